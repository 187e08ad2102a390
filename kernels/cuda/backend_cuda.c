/*
 * backend_cuda.c — the CUDA attention kernels as a backend table
 * (kernels/backend.h) on device memory: every call is enqueued on the
 * default stream, so consecutive calls run in order. The GEMM is cuBLAS,
 * scale and add are elemwise_cuda.cu's kernels. The entries this backend
 * has no kernel for (the unfused baseline and the tree decode's rescale,
 * finalize and softmax) are NULL.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include "kernels/backend.h"
#include "kernels/cuda/attn_cuda.h"
#include "kernels/cuda/elemwise_cuda.h"

static int cuda_check(const attn_params *p) {
  char msg[160];
  return attn_cuda_check_msg(p, msg, sizeof msg);
}

static int cuda_fwd(const attn_params *p, const void *q, const void *k, const void *v, float *o, float *lse,
                    int accumulate) {
  return attn_cuda_fwd(p, q, k, v, o, lse, accumulate, 0);
}

static int cuda_bwd(const attn_params *p, const void *q, const void *k, const void *v, const float *o, const void *dout,
                    const float *lse, const float *delta, float *dq, float *dk, float *dv) {
  return attn_cuda_bwd(p, q, k, v, o, dout, lse, delta, dq, dk, dv, 0);
}

static int cuda_delta(const attn_params *p, const float *o, const void *dout, float *delta) {
  return attn_cuda_delta(p, o, dout, delta, 0);
}

static int cuda_merge(int64_t rows, int d, float *o, float *lse, const float *o2, const float *lse2) {
  return attn_cuda_merge(rows, d, o, lse, o2, lse2, 0);
}

static void cuda_gemm(int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                      const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  /* the table's GEMM returns nothing: a failure is printed by bs_cuda_gemm_f32 and surfaces in the results */
  (void)bs_cuda_gemm_f32(trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static int cuda_add(int64_t n, float *dst, const float *src) { return bs_cuda_add_f32(n, dst, src, 0); }
static int cuda_scale(int64_t n, float *x, float alpha) { return bs_cuda_scale_f32(n, x, alpha, 0); }
static int cuda_rescale(int64_t rows, int64_t d, const float *o, const float *lse, const float *m, float *num,
                        float *den) {
  return bs_cuda_tree_rescale_f32(rows, d, o, lse, m, num, den, 0);
}
static int cuda_finalize(int64_t rows, int64_t d, const float *num, const float *den, const float *m, float *o,
                         float *lse) {
  return bs_cuda_tree_finalize_f32(rows, d, num, den, m, o, lse, 0);
}

static void *cuda_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) return NULL;
  if (cudaMemset(p, 0, bytes) != cudaSuccess) {
    cudaFree(p);
    return NULL;
  }
  return p;
}

static void cuda_free(void *p) {
  if (p) cudaFree(p);
}

static int cuda_copy(void *dst, const void *src, size_t bytes) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0) == cudaSuccess ? ATTN_OK : ATTN_ECUDA;
}

static int cuda_zero(void *dst, size_t bytes) {
  return cudaMemsetAsync(dst, 0, bytes, 0) == cudaSuccess ? ATTN_OK : ATTN_ECUDA;
}

static const bs_kernel_backend cuda_backend = {
  .name = "cuda",
  .whole_heads = 1,
  .check = cuda_check,
  .strerror = attn_cuda_strerror,
  .fwd = cuda_fwd,
  .bwd = cuda_bwd,
  .delta = cuda_delta,
  .merge = cuda_merge,
  .gemm = cuda_gemm,
  .add = cuda_add,
  .scale = cuda_scale,
  .rescale = cuda_rescale,
  .finalize = cuda_finalize,
  .alloc = cuda_alloc,
  .free = cuda_free,
  .copy = cuda_copy,
  .zero = cuda_zero,
};

const bs_kernel_backend *bs_kernel_backend_cuda(void) { return &cuda_backend; }
