/*
 * backend_cpu.c — the CPU kernels as a backend table (kernels/backend.h):
 * the attention entry points of attn.h, OpenBLAS for GEMM, and the few
 * row-wise loops the plans' elementwise ops need, in host memory.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/backend.h"

static void cpu_gemm(int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a,
              (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

static int cpu_rescale(int64_t rows, int64_t d, const float *o, const float *lse, const float *m, float *num,
                       float *den) {
  for (int64_t r = 0; r < rows; r++) {
    float w = lse[r] == -INFINITY ? 0.0f : expf(lse[r] - m[r]);
    den[r] = w;
    for (int64_t x = 0; x < d; x++) num[r * d + x] = o[r * d + x] * w;
  }
  return ATTN_OK;
}

static int cpu_finalize(int64_t rows, int64_t d, const float *num, const float *den, const float *m, float *o,
                        float *lse) {
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t x = 0; x < d; x++) o[r * d + x] = den[r] > 0 ? num[r * d + x] / den[r] : 0.0f;
    lse[r] = den[r] > 0 ? m[r] + logf(den[r]) : -INFINITY;
  }
  return ATTN_OK;
}

static int cpu_softmax(const attn_params *a, int64_t ld, float *S, float *lse) {
  int64_t rows = (int64_t)a->B * a->Zq * a->Nq;
  for (int64_t r = 0; r < rows; r++) {
    float *s = S + r * ld;
    int64_t qp = a->mask.q_pos0 + (r % a->Nq) * a->mask.q_stride;
    float m = -INFINITY;
    for (int64_t j = 0; j < ld; j++) {
      if (!attn_mask_visible(&a->mask, qp, a->mask.k_pos0 + j * a->mask.k_stride)) s[j] = -INFINITY;
      if (s[j] > m) m = s[j];
    }
    double sum = 0;
    for (int64_t j = 0; j < ld; j++) {
      float e = m == -INFINITY ? 0.0f : expf(s[j] - m);
      s[j] = e;
      sum += e;
    }
    for (int64_t j = 0; j < ld; j++) s[j] = sum > 0 ? (float)(s[j] / sum) : 0.0f;
    lse[r] = sum > 0 ? m + (float)log(sum) : -INFINITY;
  }
  return ATTN_OK;
}

static int cpu_add(int64_t n, float *dst, const float *src) {
  for (int64_t e = 0; e < n; e++) dst[e] += src[e];
  return ATTN_OK;
}

static int cpu_scale(int64_t n, float *x, float alpha) {
  for (int64_t e = 0; e < n; e++) x[e] *= alpha;
  return ATTN_OK;
}

static void *cpu_alloc(size_t bytes) { return calloc(1, bytes); }

static int cpu_copy(void *dst, const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
  return ATTN_OK;
}

static int cpu_zero(void *dst, size_t bytes) {
  memset(dst, 0, bytes);
  return ATTN_OK;
}

static const bs_kernel_backend cpu_backend = {
  .name = "cpu",
  .check = attn_check,
  .strerror = attn_strerror,
  .fwd = attn_fwd,
  .fwd_unfused = attn_fwd_unfused,
  .fwd_unfused_workspace = attn_unfused_workspace_bytes,
  .bwd = attn_bwd,
  .bwd_unfused = attn_bwd_unfused,
  .bwd_unfused_workspace = attn_unfused_bwd_workspace_bytes,
  .delta = attn_delta,
  .merge = attn_merge,
  .gemm = cpu_gemm,
  .rescale = cpu_rescale,
  .finalize = cpu_finalize,
  .softmax = cpu_softmax,
  .add = cpu_add,
  .scale = cpu_scale,
  .alloc = cpu_alloc,
  .free = free,
  .copy = cpu_copy,
  .zero = cpu_zero,
};

const bs_kernel_backend *bs_kernel_backend_cpu(void) { return &cpu_backend; }
