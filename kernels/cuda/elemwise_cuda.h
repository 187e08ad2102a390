/*
 * elemwise_cuda.h — the CUDA backend's elementwise kernels and its cuBLAS
 * GEMM, on device memory and a stream; the backend table
 * (backend_cuda.c) puts them behind kernels/backend.h's scale, add and gemm.
 * Returns ATTN_OK, ATTN_EINVAL (bad arguments) or ATTN_ECUDA.
 */
#ifndef BURSTSIM_ELEMWISE_CUDA_H
#define BURSTSIM_ELEMWISE_CUDA_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x[i] *= alpha over n fp32 elements, in place. */
int bs_cuda_scale_f32(int64_t n, float *x, float alpha, cudaStream_t stream);
/* dst[i] += src[i] over n fp32 elements. */
int bs_cuda_add_f32(int64_t n, float *dst, const float *src, cudaStream_t stream);
/* Tree decode around its allreduces, rows x d fp32 (kernels/backend.h's rescale and finalize):
 * num = o w, den = w with w = exp(lse - m) (0 where lse = -inf); then o = num / den and
 * lse = m + log den (0 and -inf where den = 0). */
int bs_cuda_tree_rescale_f32(int64_t rows, int64_t d, const float *o, const float *lse, const float *m, float *num,
                             float *den, cudaStream_t stream);
int bs_cuda_tree_finalize_f32(int64_t rows, int64_t d, const float *num, const float *den, const float *m, float *o,
                              float *lse, cudaStream_t stream);
/* Row-major fp32 C[m x n] = alpha A[m x k] op(B) + beta C (op(B) = B^T [n x k] when trans_b) with
 * cuBLAS on the default stream; the handle is created on first use per device. */
int bs_cuda_gemm_f32(int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

#ifdef __cplusplus
}
#endif

#endif
