/*
 * backend.h — a kernel backend as a table of entry points, so that the code
 * that executes a plan's COMPUTE op (runtime/compute.h) names no backend: the
 * runtime and the calibration hand it a table, and the same op runs on the
 * CPU kernels (kernels/cpu) or on a GPU backend.
 *
 * The attention entries have the contracts of attn.h. Buffers are the
 * backend's own memory: host memory for the CPU table, device memory for a
 * GPU table (alloc, free and copy move data in that memory). An entry a
 * backend does not have is NULL; the caller reports the kernel as not
 * supported by that backend.
 */
#ifndef BURSTSIM_KERNELS_BACKEND_H
#define BURSTSIM_KERNELS_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/attn.h"

typedef struct {
  const char *name; /* "cpu", "cuda" */
  /* 1: fwd and bwd take every (batch, head) of a call in one launch, as a GPU needs them to fill its
   * multiprocessors; 0: the caller splits a call by (batch, head) and row tile (the CPU's threads work
   * inside one head, and the runtime polls communication between tiles). */
  int whole_heads;
  /* Validation and messages of the attention kernels (attn_check, attn_strerror). */
  int (*check)(const attn_params *p);
  const char *(*strerror)(int err);
  /* Attention forward: fused (online softmax) and with the score block materialised. */
  int (*fwd)(const attn_params *p, const void *q, const void *k, const void *v, float *o, float *lse, int accumulate);
  int (*fwd_unfused)(const attn_params *p, const void *q, const void *k, const void *v, float *o, float *lse,
                     int accumulate, float *workspace);
  size_t (*fwd_unfused_workspace)(const attn_params *p);
  /* Attention backward: fused and with the score block materialised. */
  int (*bwd)(const attn_params *p, const void *q, const void *k, const void *v, const float *o, const void *dout,
             const float *lse, const float *delta, float *dq, float *dk, float *dv);
  int (*bwd_unfused)(const attn_params *p, const void *q, const void *k, const void *v, const float *o,
                     const void *dout, const float *lse, const float *delta, float *dq, float *dk, float *dv,
                     float *workspace);
  size_t (*bwd_unfused_workspace)(const attn_params *p);
  /* delta = rowsum(dout * o), and the lse-weighted merge of two partial results. */
  int (*delta)(const attn_params *p, const float *o, const void *dout, float *delta);
  int (*merge)(int64_t rows, int d, float *o, float *lse, const float *o2, const float *lse2);
  /* C[m x n] = alpha A[m x k] op(B) + beta C, row-major fp32; op(B) = B^T [n x k] when trans_b, else B [k x n]. */
  void (*gemm)(int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda, const float *b,
               int64_t ldb, float beta, float *c, int64_t ldc);
  /* Elementwise, fp32, over rows of width d. rescale: den = exp(lse - m) (0 where lse = -inf), num = o den.
   * finalize: o = num / den, lse = m + log(den) (o = 0, lse = -inf where den = 0). softmax: each of the
   * rows (a's B * Zq * Nq) of the ld-wide score matrix s, masked by a's mask from column 0, becomes its
   * softmax in place and its log-sum-exp goes to lse. add: dst += src over n elements. scale: x *= alpha
   * over n elements, in place (one read and one write of each: the pass the plans' generic elementwise
   * ops model, norms, activations and the optimizer step). */
  int (*rescale)(int64_t rows, int64_t d, const float *o, const float *lse, const float *m, float *num, float *den);
  int (*finalize)(int64_t rows, int64_t d, const float *num, const float *den, const float *m, float *o, float *lse);
  int (*softmax)(const attn_params *a, int64_t ld, float *s, float *lse);
  int (*add)(int64_t n, float *dst, const float *src);
  int (*scale)(int64_t n, float *x, float alpha);
  /* Memory: zero-filled allocation, release, copy and zero fill of bytes. */
  void *(*alloc)(size_t bytes);
  void (*free)(void *ptr);
  int (*copy)(void *dst, const void *src, size_t bytes);
  int (*zero)(void *dst, size_t bytes);
} bs_kernel_backend;

/* The CPU kernels (kernels/cpu): every entry is present. */
const bs_kernel_backend *bs_kernel_backend_cpu(void);
/* The CUDA kernels (kernels/cuda, in builds with a CUDA toolkit): attention forward and backward, delta,
 * merge, GEMM (cuBLAS), add, scale and device memory; no unfused baseline, rescale, finalize or softmax. */
const bs_kernel_backend *bs_kernel_backend_cuda(void);

#endif
