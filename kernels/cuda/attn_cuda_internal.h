/*
 * attn_cuda_internal.h — what the CUDA backend's files share and nobody else
 * sees: the checked-call macros (every CUDA call and every launch goes through
 * them) and the launchers each .cu file exports to the dispatching code.
 */
#ifndef BURSTSIM_ATTN_CUDA_INTERNAL_H
#define BURSTSIM_ATTN_CUDA_INTERNAL_H

#include <stdio.h>
#include "kernels/cuda/attn_cuda.h"
#include "kernels/mask.h"

/* Runs a CUDA runtime call; on failure prints file:line, the call and
 * cudaGetErrorString, and returns ATTN_ECUDA from the enclosing function. */
#define ATTN_CUDA_TRY(call)                                                                                      \
  do {                                                                                                           \
    cudaError_t attn_e_ = (call);                                                                                \
    if (attn_e_ != cudaSuccess) {                                                                                \
      fprintf(stderr, "burstsim cuda: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(attn_e_)); \
      return ATTN_ECUDA;                                                                                         \
    }                                                                                                            \
  } while (0)

/* After every <<<...>>>: the launch error (bad configuration, no device). */
#define ATTN_CUDA_LAUNCHED(name)                                                              \
  do {                                                                                        \
    cudaError_t attn_e_ = cudaGetLastError();                                                 \
    if (attn_e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "burstsim cuda: %s:%d: launch of %s: %s\n", __FILE__, __LINE__, (name), \
              cudaGetErrorString(attn_e_));                                                   \
      return ATTN_ECUDA;                                                                      \
    }                                                                                         \
  } while (0)

#ifdef __cplusplus
extern "C" {
#endif

/* Storage element size in bytes (0 for an unknown dtype). */
size_t attn_cuda_elem_bytes(attn_dtype dt);
/* Fills the by-value mask the kernels take. */
attn_mask attn_cuda_mask_of(const attn_params *p);
/* 1 when every non-NULL pointer given is 16-byte aligned. */
int attn_cuda_aligned16(int n, const void *const *ptrs);

/* Launchers (enqueue only; the plan has been checked by the caller). */
int attn_cuda_launch_fwd_simple(const attn_params *p, const attn_cuda_launch *L, const void *q, const void *k,
                                const void *v, float *o, float *lse, int accumulate, cudaStream_t s);
int attn_cuda_launch_fwd_mma(const attn_params *p, const attn_cuda_launch *L, const void *q, const void *k,
                             const void *v, float *o, float *lse, int accumulate, cudaStream_t s);
int attn_cuda_launch_bwd_simple(const attn_params *p, const attn_cuda_launch *L, const void *q, const void *k,
                                const void *v, const void *dout, const float *lse, const float *delta, float *dq,
                                float *dk, float *dv, cudaStream_t s);
int attn_cuda_launch_bwd_mma(const attn_params *p, const attn_cuda_launch *L, const void *q, const void *k,
                             const void *v, const void *dout, const float *lse, const float *delta, float *dq,
                             float *dk, float *dv, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
