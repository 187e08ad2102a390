/*
 * elemwise_cuda.cu — the elementwise entries of the CUDA backend table
 * (kernels/backend.h): scale (x *= alpha in place, the one pass the plans'
 * generic elementwise ops model: norms, activations, the optimizer step) and
 * add (dst += src). Grid-stride loops on the default stream, like the
 * attention calls of backend_cuda.c, so they run in order with them.
 */
#include <cstdint>
#include "kernels/cuda/attn_cuda_internal.h"
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

/* Enough blocks of 256 threads to cover n, at most 8192 (the loop strides over the rest). */
unsigned blocks_for(int64_t n) {
  const int64_t want = (n + 255) / 256;
  return (unsigned)(want < 8192 ? want : 8192);
}

} // namespace

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
