/*
 * gemm_cuda.c — the CUDA backend's GEMM (elemwise_cuda.h): cuBLAS sgemm on
 * the default stream, row-major operands passed as the column-major
 * transposes cuBLAS expects (C^T = op(B)^T A^T), so no data is moved.
 * One handle per device, created on first use and kept for the process.
 */
#include <cublas_v2.h>
#include <stdio.h>
#include "kernels/cuda/attn_cuda.h"
#include "kernels/cuda/elemwise_cuda.h"

#define GEMM_MAX_DEVICES 64

static cublasHandle_t handle_of(int device) {
  static cublasHandle_t handles[GEMM_MAX_DEVICES];
  if (device < 0 || device >= GEMM_MAX_DEVICES) return NULL;
  if (!handles[device] && cublasCreate(&handles[device]) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "burstsim cuda: cublasCreate failed on device %d\n", device);
    handles[device] = NULL;
  }
  return handles[device];
}

int bs_cuda_gemm_f32(int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m < 0 || n < 0 || k < 0 || m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff) return ATTN_EINVAL;
  if (m == 0 || n == 0) return ATTN_OK;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return ATTN_ECUDA;
  cublasHandle_t h = handle_of(device);
  if (!h) return ATTN_ECUDA;
  /* column-major view: C^T [n x m] = op(B)^T [n x k] A^T [k x m] */
  cublasStatus_t s = cublasSgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, b,
                                 (int)ldb, a, (int)lda, &beta, c, (int)ldc);
  if (s != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "burstsim cuda: cublasSgemm %lldx%lldx%lld failed (status %d)\n", (long long)m, (long long)n,
            (long long)k, (int)s);
    return ATTN_ECUDA;
  }
  return ATTN_OK;
}
