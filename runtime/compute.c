/*
 * compute.c — see compute.h. Attention runs as (batch, head, row tile)
 * calls: large Open MPI transfers only move while the library is entered,
 * so the progress poll between tiles is what lets a run's communication
 * overlap its compute.
 */
#include "runtime/compute.h"

#include <stdio.h>
#include <string.h>

static int kerr(const bs_compute_ctx *x, const char *what, int rc, char *err, size_t errlen) {
  snprintf(err, errlen, "step %d: %s: %s", x->step, what, x->be->strerror(rc));
  return -1;
}

static void poll(const bs_compute_ctx *x) {
  if (x->progress) x->progress(x->progress_arg);
}

static int unsupported(const bs_compute_ctx *x, const bs_compute *c, char *err, size_t errlen) {
  snprintf(err, errlen, "step %d: kernel %s is not supported by the %s backend", x->step, bs_kernel_name(c->kernel),
           x->be->name);
  return -1;
}

/* Where one call's rows start, in elements: q and dq (width d), o and dout (width dv), k and dk
 * (width d), v and dv (width dv), lse and delta (width 1). */
typedef struct {
  int64_t q, o, k, v, l;
} tile_offs;

/* One (batch, head, row tile) call of attention forward or backward. */
static int attn_tile(const bs_compute_ctx *x, const bs_compute *c, const bs_compute_bufs *b, const attn_params *s,
                     tile_offs f, float *ws) {
  const bs_kernel_backend *be = x->be;
  size_t es = s->dtype == ATTN_BF16 ? 2 : 4;
  const char *q = (const char *)b->in[0] + f.q * es, *k = (const char *)b->in[1] + f.k * es;
  const char *v = (const char *)b->in[2] + f.v * es;
  switch (c->kernel) {
  case BS_K_ATTN_FWD:
  case BS_K_ATTN_FWD_UNFUSED: {
    float *o = (float *)b->out[0] + f.o, *lse = (float *)b->out[1] + f.l;
    return c->kernel == BS_K_ATTN_FWD_UNFUSED ? be->fwd_unfused(s, q, k, v, o, lse, c->accumulate, ws)
                                              : be->fwd(s, q, k, v, o, lse, c->accumulate);
  }
  default: {
    const float *o = b->in[3] ? (const float *)b->in[3] + f.o : NULL;
    const float *lse = (const float *)b->in[5] + f.l;
    const float *delta = b->in[6] ? (const float *)b->in[6] + f.l : NULL;
    float *dq = (float *)b->out[0] + f.q, *dk = (float *)b->out[1] + f.k, *dv = (float *)b->out[2] + f.v;
    const char *dout = (const char *)b->in[4] + f.o * es;
    return c->kernel == BS_K_ATTN_BWD_UNFUSED ? be->bwd_unfused(s, q, k, v, o, dout, lse, delta, dq, dk, dv, ws)
                                              : be->bwd(s, q, k, v, o, dout, lse, delta, dq, dk, dv);
  }
  }
}

/* Attention forward / backward, as (batch, head, row tile) calls with progress polls between them. */
static int run_attn(const bs_compute_ctx *x, const bs_compute *c, const bs_compute_bufs *b, char *err, size_t errlen) {
  attn_params a = c->a;
  a.threads = x->threads;
  int rc = x->be->check(&a);
  if (rc) return kerr(x, bs_kernel_name(c->kernel), rc, err, errlen);
  int grp = a.Zq / a.Zkv;
  int bwd = c->kernel == BS_K_ATTN_BWD || c->kernel == BS_K_ATTN_BWD_UNFUSED;
  int unfused = c->kernel == BS_K_ATTN_FWD_UNFUSED || c->kernel == BS_K_ATTN_BWD_UNFUSED;
  int have = bwd ? (unfused ? x->be->bwd_unfused != NULL : x->be->bwd != NULL)
                 : (unfused ? x->be->fwd_unfused != NULL : x->be->fwd != NULL);
  if (!have) return unsupported(x, c, err, errlen);
  float *ws = unfused ? (float *)b->in[bwd ? 7 : 3] : NULL;
  if (x->be->whole_heads && !unfused && x->tile_rows >= a.Nq) { /* one launch for every (batch, head) */
    rc = attn_tile(x, c, b, &a, (tile_offs){0, 0, 0, 0, 0}, NULL);
    if (rc) return kerr(x, bs_kernel_name(c->kernel), rc, err, errlen);
    poll(x);
    return 0;
  }
  for (int64_t bb = 0; bb < a.B; bb++)
    for (int64_t h = 0; h < a.Zq; h++)
      for (int64_t r0 = 0; r0 < a.Nq; r0 += x->tile_rows) {
        attn_params s = a;
        s.B = 1;
        s.Zq = 1;
        s.Zkv = 1;
        s.Nq = a.Nq - r0 < x->tile_rows ? a.Nq - r0 : x->tile_rows;
        s.mask.q_pos0 = a.mask.q_pos0 + r0 * a.mask.q_stride;
        int64_t row = (bb * a.Zq + h) * a.Nq + r0, kvrow = (bb * a.Zkv + h / grp) * a.Nk;
        tile_offs f = {row * a.d, row * attn_dv(&a), kvrow * a.d, kvrow * attn_dv(&a), row};
        float *w = unfused && ws && (int64_t)x->be->fwd_unfused_workspace(&s) <= b->ws_bytes ? ws : NULL;
        rc = attn_tile(x, c, b, &s, f, w);
        if (rc) return kerr(x, bs_kernel_name(c->kernel), rc, err, errlen);
        poll(x);
      }
  return 0;
}

static int run_copy(const bs_compute_ctx *x, const bs_compute *c, const bs_compute_bufs *b) {
  const char *src = b->in[0];
  char *dst = b->out[0];
  if (c->t_a <= 0 || c->t_b <= 0) return x->be->copy(dst, src, (size_t)c->elems);
  int rc = 0;
  for (int64_t i = 0; i < c->t_a && !rc; i++)
    for (int64_t j = 0; j < c->t_b && !rc; j++)
      rc = x->be->copy(dst + (j * c->t_a + i) * c->t_chunk, src + (i * c->t_b + j) * c->t_chunk, (size_t)c->t_chunk);
  poll(x);
  return rc;
}

/* 1 when the backend has the entry an elementwise op needs (the CPU table has them all). */
static int have_elemwise(const bs_kernel_backend *be, int ew) {
  switch (ew) {
  case BS_EW_TREE_RESCALE: return be->rescale != NULL;
  case BS_EW_TREE_FINAL: return be->finalize != NULL;
  case BS_EW_SOFTMAX: return be->softmax != NULL;
  case BS_EW_ZERO: return be->zero != NULL;
  case BS_EW_ADD: return be->add != NULL;
  default: return 1; /* the generic pass checks its own entry */
  }
}

static int run_elemwise(const bs_compute_ctx *x, const bs_compute *c, const bs_compute_bufs *b) {
  const bs_kernel_backend *be = x->be;
  int64_t d = c->a.d > 0 ? c->a.d : 1, rows = c->elems / d;
  switch (c->ew) {
  case BS_EW_TREE_RESCALE: return be->rescale(rows, d, b->in[0], b->in[1], b->in[2], b->out[0], b->out[1]);
  case BS_EW_TREE_FINAL: return be->finalize(rows, d, b->in[0], b->in[1], b->in[2], b->out[0], b->out[1]);
  case BS_EW_SOFTMAX: return be->softmax(&c->a, c->ld, b->out[0], b->out[1]);
  case BS_EW_ZERO: return be->zero(b->out[0], (size_t)c->elems * sizeof(float));
  case BS_EW_ADD: return be->add(c->elems, b->out[0], b->in[0]);
  default: {
    /* BS_EW_GENERIC (a norm, an activation, a residual add, the optimizer step): one pass over
     * elems fp32 elements of the operand the caller gives (out[0], the runtime's scratch), read and
     * written in place as the plans' roofline counts it; without an operand it is modelled only */
    if (!b->out[0] || c->elems <= 0) return 0;
    if (!be->scale) return ATTN_EINVAL;
    int rc = be->scale(c->elems, b->out[0], 1.0f);
    poll(x);
    return rc;
  }
  }
}

/* A projection the plans only model (BS_GEMM_GENERIC, m x n x k): C [m x n] = A [m x k] B [k x n] in
 * fp32 on the operands the caller gives (in[0], in[1], out[0]: the runtime's scratch), in row tiles
 * with progress polls between them as attention has; without operands it is modelled work only. */
static int run_generic_gemm(const bs_compute_ctx *x, const bs_compute *c, const bs_compute_bufs *b) {
  const float *A = b->in[0], *B = b->in[1];
  float *C = b->out[0];
  if (!A || !B || !C || c->m <= 0 || c->n <= 0 || c->k <= 0) return 0;
  for (int64_t r0 = 0; r0 < c->m; r0 += x->tile_rows) {
    int64_t rows = c->m - r0 < x->tile_rows ? c->m - r0 : x->tile_rows;
    x->be->gemm(0, rows, c->n, c->k, 1.0f, A + r0 * c->k, c->k, B, c->n, 0.0f, C + r0 * c->n, c->n);
    poll(x);
  }
  return 0;
}

/* The explicit score matrix of li2021: S = scale q k^T, or o += P v, per (batch, head). */
static int run_gemm(const bs_compute_ctx *x, const bs_compute *c, const bs_compute_bufs *b, char *err, size_t errlen) {
  const attn_params *a = &c->a;
  if (c->gemm == BS_GEMM_GENERIC) return run_generic_gemm(x, c, b);
  if (x->bf16) {
    snprintf(err, errlen, "step %d: the explicit-score GEMM runs in fp32 only", x->step);
    return -1;
  }
  int grp = a->Zq / a->Zkv;
  for (int64_t bb = 0; bb < a->B; bb++)
    for (int64_t h = 0; h < a->Zq; h++) {
      int64_t kvh = bb * a->Zkv + h / grp, qh = bb * a->Zq + h;
      if (c->gemm == BS_GEMM_QK) {
        const float *q = (const float *)b->in[0] + qh * a->Nq * a->d;
        const float *k = (const float *)b->in[1] + kvh * a->Nk * a->d;
        float *S = (float *)b->out[0] + qh * a->Nq * c->ld + c->col0;
        x->be->gemm(1, a->Nq, a->Nk, a->d, a->scale, q, a->d, k, a->d, 0.0f, S, c->ld);
      } else {
        const float *P = (const float *)b->in[0] + qh * a->Nq * c->ld + c->col0;
        const float *v = (const float *)b->in[1] + kvh * a->Nk * a->d;
        float *o = (float *)b->out[0] + qh * a->Nq * a->d;
        x->be->gemm(0, a->Nq, a->d, a->Nk, 1.0f, P, c->ld, v, a->d, 1.0f, o, a->d);
      }
      poll(x);
    }
  return 0;
}

int bs_compute_run(const bs_compute_ctx *x, const bs_compute *c, const bs_compute_bufs *b, char *err, size_t errlen) {
  switch (c->kernel) {
  case BS_K_ATTN_FWD:
  case BS_K_ATTN_FWD_UNFUSED:
  case BS_K_ATTN_BWD:
  case BS_K_ATTN_BWD_UNFUSED: return run_attn(x, c, b, err, errlen);
  case BS_K_ATTN_DELTA: {
    attn_params p = c->a;
    p.threads = x->threads;
    int rc = x->be->delta(&p, b->in[0], b->in[1], b->out[0]);
    return rc ? kerr(x, "attn_delta", rc, err, errlen) : 0;
  }
  case BS_K_ATTN_MERGE: {
    int dv = attn_dv(&c->a);
    int rc = x->be->merge(c->elems / dv, dv, b->out[0], b->out[1], b->in[0], b->in[1]);
    return rc ? kerr(x, "attn_merge", rc, err, errlen) : 0;
  }
  case BS_K_COPY: {
    int rc = run_copy(x, c, b);
    return rc ? kerr(x, "copy", rc, err, errlen) : 0;
  }
  case BS_K_ELEMWISE: {
    if (!have_elemwise(x->be, c->ew)) {
      snprintf(err, errlen, "step %d: this elementwise op (%s) is not supported by the %s backend", x->step,
               c->label ? c->label : "tree rescale, finalize or softmax", x->be->name);
      return -1;
    }
    int rc = run_elemwise(x, c, b);
    return rc ? kerr(x, "elementwise", rc, err, errlen) : 0;
  }
  case BS_K_GEMM: return run_gemm(x, c, b, err, errlen);
  default: return unsupported(x, c, err, errlen);
  }
}
