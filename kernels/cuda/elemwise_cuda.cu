/*
 * elemwise_cuda.cu — the elementwise entries of the CUDA backend table
 * (kernels/backend.h): scale (x *= alpha in place, the one pass the plans'
 * generic elementwise ops model: norms, activations, the optimizer step), add
 * (dst += src), and tree decode's two passes around its allreduces: rescale
 * (num = o exp(lse - m), den = exp(lse - m), m the max of lse over the ranks)
 * and finalize (o = num / den, lse = m + log den). Grid-stride loops on the
 * default stream, like the attention calls of backend_cuda.c, so they run in
 * order with them. The kernels also build for the host emulation
 * (ATTN_CUDA_EMU, tests/cuda/test_cuda_emulated.cpp); the launchers do not.
 */
#include <cstdint>
#include "kernels/cuda/attn_cuda_common.cuh"
#include "kernels/cuda/elemwise_cuda.h"

namespace {

__global__ void scale_kernel(float *__restrict__ x, int64_t n, float alpha) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) x[i] *= alpha;
}

__global__ void add_kernel(float *__restrict__ dst, const float *__restrict__ src, int64_t n) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] += src[i];
}

/* One thread per element of rows x d; the row's first element also writes its den. */
__global__ void tree_rescale_kernel(int64_t rows, int64_t d, const float *__restrict__ o, const float *__restrict__ lse,
                                    const float *__restrict__ m, float *__restrict__ num, float *__restrict__ den) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x, n = rows * d;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / d;
    const float w = lse[r] == -CUDART_INF_F ? 0.0f : expf(lse[r] - m[r]);
    num[i] = o[i] * w;
    if (i - r * d == 0) den[r] = w;
  }
}

__global__ void tree_finalize_kernel(int64_t rows, int64_t d, const float *__restrict__ num,
                                     const float *__restrict__ den, const float *__restrict__ m, float *__restrict__ o,
                                     float *__restrict__ lse) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x, n = rows * d;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / d;
    o[i] = den[r] > 0 ? num[i] / den[r] : 0.0f;
    if (i - r * d == 0) lse[r] = den[r] > 0 ? m[r] + logf(den[r]) : -CUDART_INF_F;
  }
}

#ifndef ATTN_CUDA_EMU
/* Enough blocks of 256 threads to cover n, at most 8192 (the loop strides over the rest). */
unsigned blocks_for(int64_t n) {
  const int64_t want = (n + 255) / 256;
  return (unsigned)(want < 8192 ? want : 8192);
}
#endif

} // namespace

#ifndef ATTN_CUDA_EMU
extern "C" int bs_cuda_scale_f32(int64_t n, float *x, float alpha, cudaStream_t stream) {
  if (n < 0 || (n > 0 && !x)) return ATTN_EINVAL;
  if (n == 0) return ATTN_OK;
  scale_kernel<<<blocks_for(n), 256, 0, stream>>>(x, n, alpha);
  ATTN_CUDA_LAUNCHED("scale_kernel");
  return ATTN_OK;
}

extern "C" int bs_cuda_add_f32(int64_t n, float *dst, const float *src, cudaStream_t stream) {
  if (n < 0 || (n > 0 && (!dst || !src))) return ATTN_EINVAL;
  if (n == 0) return ATTN_OK;
  add_kernel<<<blocks_for(n), 256, 0, stream>>>(dst, src, n);
  ATTN_CUDA_LAUNCHED("add_kernel");
  return ATTN_OK;
}

extern "C" int bs_cuda_tree_rescale_f32(int64_t rows, int64_t d, const float *o, const float *lse, const float *m,
                                        float *num, float *den, cudaStream_t stream) {
  if (rows < 0 || d <= 0 || (rows > 0 && (!o || !lse || !m || !num || !den))) return ATTN_EINVAL;
  if (rows == 0) return ATTN_OK;
  tree_rescale_kernel<<<blocks_for(rows * d), 256, 0, stream>>>(rows, d, o, lse, m, num, den);
  ATTN_CUDA_LAUNCHED("tree_rescale_kernel");
  return ATTN_OK;
}

extern "C" int bs_cuda_tree_finalize_f32(int64_t rows, int64_t d, const float *num, const float *den, const float *m,
                                         float *o, float *lse, cudaStream_t stream) {
  if (rows < 0 || d <= 0 || (rows > 0 && (!num || !den || !m || !o || !lse))) return ATTN_EINVAL;
  if (rows == 0) return ATTN_OK;
  tree_finalize_kernel<<<blocks_for(rows * d), 256, 0, stream>>>(rows, d, num, den, m, o, lse);
  ATTN_CUDA_LAUNCHED("tree_finalize_kernel");
  return ATTN_OK;
}
#endif // ATTN_CUDA_EMU
