/*
 * attn_avx512.c — the AVX-512 forward block kernel, chosen at run time on CPUs
 * with AVX-512F/BW/DQ/VL (Zen 4, Sapphire Rapids, ...). Only the functions in
 * this file carry the avx512 target, so the binary still runs on any x86-64.
 *
 * Same layout as attn_avx2.c, widened: a sub-block of QB = 32 query rows is
 * held transposed (queries on the lanes of two zmm vectors), and the two
 * products of the forward are broadcast-times-lane-panel kernels
 *   S^T[j][i]  = sum_c K[j][c] * Qp[c][i]
 *   O^T[c][i] += sum_j V[j][c] * P^T[j][i]
 * with MR = 12 broadcast rows x 2 vectors = 24 accumulators (of 32 zmm
 * registers): 24 FMAs per 14 loads, twice the work per instruction of the
 * AVX2 kernel. The backward and the few-row decode path stay on the AVX2
 * kernels (they are not limited by the vector width; see the README table).
 */
#if defined(__x86_64__)
#include <math.h>
#include "kernels/cpu/attn_internal.h"

#include <immintrin.h> /* before the target region: clang gives its intrinsics their own targets */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")
#endif

#define QB 32         /* query lanes per sub-block: two zmm vectors */
#define MR_MAX 12     /* broadcast rows per micro-kernel call */
#define DECODE_ROWS 4 /* this many rows or fewer: the AVX2 row path */
#define AI static inline __attribute__((always_inline))

/* 2^x as in attn_avx2_math.h (degree-6 polynomial on [-1/2, 1/2]); x <= -127 gives exactly 0. */
AI __m512 exp2_ps(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
  __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 f = _mm512_sub_ps(x, n);
  __m512 r = _mm512_set1_ps(1.5403530393381606e-4f);
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(1.3333558146428443e-3f));
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(9.6181291076284772e-3f));
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(5.5504108664821580e-2f));
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(2.4022650695910071e-1f));
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(6.9314718055994531e-1f));
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(1.0f));
  __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(r, _mm512_castsi512_ps(e));
}

/*
 * out[r][0..32) (+)= sum_{x < n} a[r * lda + x * ainc] * b[x * 32 + 0..32) for r < MR.
 * a is broadcast, b is a lane panel. load = 1 adds to out, 0 overwrites.
 */
AI void rows_x_lanes(const int MR, int64_t n, const float *a, int64_t lda, int64_t ainc, const float *b, float *out,
                     int64_t ldo, int load) {
  __m512 acc[MR_MAX][2];
#pragma GCC unroll 12
  for (int r = 0; r < MR; r++) {
    acc[r][0] = load ? _mm512_loadu_ps(out + r * ldo) : _mm512_setzero_ps();
    acc[r][1] = load ? _mm512_loadu_ps(out + r * ldo + 16) : _mm512_setzero_ps();
  }
  for (int64_t x = 0; x < n; x++) {
    __m512 b0 = _mm512_loadu_ps(b + x * QB), b1 = _mm512_loadu_ps(b + x * QB + 16);
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
      __m512 av = _mm512_set1_ps(a[r * lda + x * ainc]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < MR; r++) {
    _mm512_storeu_ps(out + r * ldo, acc[r][0]);
    _mm512_storeu_ps(out + r * ldo + 16, acc[r][1]);
  }
}

/* rows_x_lanes over `rows` rows in blocks of MR_MAX (row r at a + r*lda, out + r*ldo). */
static void gemm_rows_x_lanes(int64_t rows, int64_t n, const float *a, int64_t lda, int64_t ainc, const float *b,
                              float *out, int64_t ldo, int load) {
  int64_t r = 0;
  for (; r + MR_MAX <= rows; r += MR_MAX) rows_x_lanes(MR_MAX, n, a + r * lda, lda, ainc, b, out + r * ldo, ldo, load);
  const float *ar = a + r * lda;
  float *orr = out + r * ldo;
  /* clang-format off */
  switch (rows - r) {
#define TAIL(m) \
  case m: rows_x_lanes(m, n, ar, lda, ainc, b, orr, ldo, load); break;
    TAIL(11) TAIL(10) TAIL(9) TAIL(8) TAIL(7) TAIL(6) TAIL(5) TAIL(4) TAIL(3) TAIL(2) TAIL(1)
#undef TAIL
    default: break;
  }
  /* clang-format on */
}

typedef struct {
  float *qp; /* [nsb][d][32] scaled, transposed queries */
  float *ot; /* [nsb][d][32] running O^T */
  float *m;  /* [nsb][32] running max (base 2) */
  float *l;  /* [nsb][32] running sum */
  float *st; /* [tk][32] scores / probabilities */
  float *kt; /* [tk][d + 16] K tile, padded rows */
  float *vt; /* [tk][d + 16] V tile, padded rows */
} fwd_ws;

static size_t avx512_fwd_ws(const attn_params *p, attn_tiles t) {
  size_t nsb = ((size_t)t.tq + QB - 1) / QB, d = (size_t)p->d;
  size_t own = 2 * nsb * d * QB + 2 * nsb * QB + (size_t)t.tk * QB + 2 * (size_t)t.tk * (d + 16) + 64;
  /* Rows with d % 8 != 0 or few rows go to the AVX2 kernel, with its own layout and tiles. */
  size_t other = attn_variant_avx2.fwd_ws_floats(p, t);
  return own > other ? own : other;
}

static fwd_ws fwd_ws_carve(const attn_params *p, attn_tiles t, float *ws) {
  size_t nsb = ((size_t)t.tq + QB - 1) / QB, d = (size_t)p->d;
  fwd_ws w;
  w.qp = ws;
  w.ot = w.qp + nsb * d * QB;
  w.m = w.ot + nsb * d * QB;
  w.l = w.m + nsb * QB;
  w.st = w.l + nsb * QB;
  w.kt = w.st + (size_t)t.tk * QB;
  w.vt = w.kt + (size_t)t.tk * (d + 16);
  return w;
}

/* Sets masked scores of a partial tile to -inf; only tiles crossing a mask edge get here. */
static void mask_tile(const attn_mask *mk, int64_t i0, int64_t ni, int64_t j0, int64_t nk, float *st) {
  for (int64_t i = 0; i < ni; i++) {
    int64_t lo, hi;
    attn_mask_visible_run(mk, mk->q_pos0 + (i0 + i) * mk->q_stride, j0, nk, &lo, &hi);
    if (lo > hi) lo = nk, hi = nk - 1; /* nothing visible: mask all */
    for (int64_t j = 0; j < lo && j < nk; j++) st[j * QB + i] = -INFINITY;
    for (int64_t j = hi + 1 > 0 ? hi + 1 : 0; j < nk; j++) st[j * QB + i] = -INFINITY;
  }
}

/* Online-softmax update of one sub-block with the scores st (nk x 32, base 2). */
static void softmax_update(int64_t nk, int d, float *st, float *m, float *l, float *ot) {
  const __m512 ninf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
  __m512 mx0 = ninf, mx1 = ninf;
  for (int64_t j = 0; j < nk; j++) {
    mx0 = _mm512_max_ps(mx0, _mm512_loadu_ps(st + j * QB));
    mx1 = _mm512_max_ps(mx1, _mm512_loadu_ps(st + j * QB + 16));
  }
  __m512 mo0 = _mm512_loadu_ps(m), mo1 = _mm512_loadu_ps(m + 16);
  __m512 mn0 = _mm512_max_ps(mo0, mx0), mn1 = _mm512_max_ps(mo1, mx1);
  /* Rows with nothing visible yet: subtract 0 instead of -inf (gives p = 0, no NaN). */
  __m512 mu0 = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mn0, ninf, _CMP_EQ_OQ), mn0, zero);
  __m512 mu1 = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mn1, ninf, _CMP_EQ_OQ), mn1, zero);
  __m512 al0 = exp2_ps(_mm512_sub_ps(mo0, mu0)), al1 = exp2_ps(_mm512_sub_ps(mo1, mu1));
  __m512 s0 = zero, s1 = zero;
  for (int64_t j = 0; j < nk; j++) {
    __m512 p0 = exp2_ps(_mm512_sub_ps(_mm512_loadu_ps(st + j * QB), mu0));
    __m512 p1 = exp2_ps(_mm512_sub_ps(_mm512_loadu_ps(st + j * QB + 16), mu1));
    _mm512_storeu_ps(st + j * QB, p0);
    _mm512_storeu_ps(st + j * QB + 16, p1);
    s0 = _mm512_add_ps(s0, p0);
    s1 = _mm512_add_ps(s1, p1);
  }
  _mm512_storeu_ps(l, _mm512_fmadd_ps(_mm512_loadu_ps(l), al0, s0));
  _mm512_storeu_ps(l + 16, _mm512_fmadd_ps(_mm512_loadu_ps(l + 16), al1, s1));
  _mm512_storeu_ps(m, mn0);
  _mm512_storeu_ps(m + 16, mn1);
  for (int c = 0; c < d; c++) {
    _mm512_storeu_ps(ot + c * QB, _mm512_mul_ps(_mm512_loadu_ps(ot + c * QB), al0));
    _mm512_storeu_ps(ot + c * QB + 16, _mm512_mul_ps(_mm512_loadu_ps(ot + c * QB + 16), al1));
  }
}

static void avx512_fwd_block(const attn_params *p, attn_tiles t, const void *q, const void *k, const void *v, int b,
                             int hq, int64_t i0, int64_t ni, int64_t j0, int64_t nj, float *o_part, float *lse_part,
                             float *ws) {
  const int d = p->d;
  if (d % 8 || ni <= DECODE_ROWS) {
    attn_variant_avx2.fwd_block(p, t, q, k, v, b, hq, i0, ni, j0, nj, o_part, lse_part, ws);
    return;
  }
  const int hkv = hq / (p->Zq / p->Zkv);
  const size_t qoff = (((size_t)b * p->Zq + hq) * p->Nq + i0) * d;
  const size_t kbase = ((size_t)b * p->Zkv + hkv) * p->Nk;
  const float qscale = p->scale * ATTN_LOG2E;
  const int64_t nsb = (ni + QB - 1) / QB, ldp = (int64_t)d + 16;
  fwd_ws w = fwd_ws_carve(p, t, ws);

  /* Pack each sub-block of 32 queries transposed and scaled (w.st: scratch for a row). */
  attn_pack_lanes(p, q, qoff, ni, QB, qscale, w.qp, w.st);
  memset(w.ot, 0, (size_t)nsb * d * QB * sizeof(float));
  for (int64_t e = 0; e < nsb * QB; e++) {
    w.m[e] = -INFINITY;
    w.l[e] = 0.0f;
  }
  for (int64_t jt = j0; jt < j0 + nj; jt += t.tk) {
    int64_t nk = j0 + nj - jt < t.tk ? j0 + nj - jt : t.tk;
    if (attn_mask_tile_class(&p->mask, i0, ni, jt, nk) == ATTN_TILE_NONE) continue;
    /* Padded row stride: a V column at a stride of d floats would use few L1 sets. */
    for (int64_t j = 0; j < nk; j++) {
      attn_load_f32(w.kt + j * ldp, k, p->dtype, (kbase + jt + j) * d, (size_t)d);
      attn_load_f32(w.vt + j * ldp, v, p->dtype, (kbase + jt + j) * d, (size_t)d);
    }
    for (int64_t sb = 0; sb < nsb; sb++) {
      int64_t s0 = sb * QB, sn = ni - s0 < QB ? ni - s0 : QB;
      int cls = attn_mask_tile_class(&p->mask, i0 + s0, sn, jt, nk);
      if (cls == ATTN_TILE_NONE) continue;
      float *qp = w.qp + sb * d * QB, *ot = w.ot + sb * d * QB;
      gemm_rows_x_lanes(nk, d, w.kt, ldp, 1, qp, w.st, QB, 0);
      if (cls == ATTN_TILE_PARTIAL) mask_tile(&p->mask, i0 + s0, sn, jt, nk, w.st);
      softmax_update(nk, d, w.st, w.m + sb * QB, w.l + sb * QB, ot);
      /* O^T[c][:] += sum_j V[j][c] P^T[j][:]: rows are c (stride 1), x runs over j. */
      gemm_rows_x_lanes(d, nk, w.vt, 1, ldp, w.st, ot, QB, 1);
      /* Pull a share of the next K/V tile towards L2 meanwhile. */
      if (p->dtype == ATTN_FP32 && jt + t.tk < j0 + nj) {
        int64_t nn = j0 + nj - jt - t.tk < t.tk ? j0 + nj - jt - t.tk : t.tk;
        attn_prefetch_share((const float *)k + (kbase + jt + t.tk) * d, (const float *)v + (kbase + jt + t.tk) * d, nn,
                            d, sb, nsb);
      }
    }
  }
  attn_unpack_lanes(d, ni, QB, w.ot, w.m, w.l, o_part, lse_part);
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

/* The backward and the grouped decode are AVX2's (filled in by attn_pick_variant). */
static void avx512_bwd_block(const attn_params *p, attn_tiles t, const void *q, const void *k, const void *v,
                             const void *dout, const float *lse, const float *delta, int b, int hkv, int64_t j0,
                             int64_t nj, float *dq_base, float *dk, float *dv, float *ws) {
  attn_variant_avx2.bwd_block(p, t, q, k, v, dout, lse, delta, b, hkv, j0, nj, dq_base, dk, dv, ws);
}

static void avx512_fwd_group_block(const attn_params *p, attn_tiles t, const void *q, const void *k, const void *v,
                                   int b, int hkv, int64_t j0, int64_t nj, float *o_part, float *lse_part, float *ws) {
  attn_variant_avx2.fwd_group_block(p, t, q, k, v, b, hkv, j0, nj, o_part, lse_part, ws);
}

static size_t avx512_bwd_ws(const attn_params *p, attn_tiles t) { return attn_variant_avx2.bwd_ws_floats(p, t); }

const attn_variant attn_variant_avx512 = {
  .name = "avx512",
  .fwd = {512, 128}, /* 128 keys a tile: 200 vs 188 GFLOP/s at N = 4096, d = 128 (README) */
  .bwd = {64, 128},
  .fwd_block = avx512_fwd_block,
  .fwd_group_block = avx512_fwd_group_block,
  .group_rows = 16, /* attn_avx2.c's GROUP_ROWS */
  .bwd_block = avx512_bwd_block,
  .fwd_ws_floats = avx512_fwd_ws,
  .bwd_ws_floats = avx512_bwd_ws,
};
#endif
