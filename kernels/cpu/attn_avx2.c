/*
 * attn_avx2.c — the AVX2+FMA block kernels, chosen at run time when the CPU
 * has them (the file is compiled for generic x86-64; only these functions
 * carry the avx2/fma target, so the binary runs anywhere).
 *
 * Layout trick: a sub-block of QB = 16 query rows is held transposed, queries
 * on the vector lanes (Qp[c][i]). Then every product in the forward is a
 * broadcast of a K or V element times a lane vector:
 *   S^T[j][i]  = sum_c K[j][c] * Qp[c][i]      (kernel rows_x_lanes)
 *   O^T[c][i] += sum_j V[j][c] * P^T[j][i]     (kernel rows_x_lanes again)
 * and the softmax statistics (row max, row sum) are vertical vector ops. K
 * and V are read in place (fp32) with no packing. The backward adds
 *   dV[j][c] += sum_i P^T[j][i] dO[i][c],  dK[j][c] += sum_i dS^T[j][i] Q[i][c]
 *   dQ[i][c] += sum_j dS^T[j][i] K[j][c]                (kernel rows_x_cols)
 * with vectors along the head dimension (needs d % 8 == 0; otherwise the
 * scalar kernels are used). A few query rows (decode) use dot products along
 * d instead, so no lane is wasted.
 */
#if defined(__x86_64__)
#include <math.h>
#include "kernels/cpu/attn_internal.h"

#include <immintrin.h> /* before the target region: clang gives its intrinsics their own targets */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#include "kernels/cpu/attn_avx2_math.h"

#define QB 16 /* query lanes per sub-block: two ymm vectors */
#define AI static inline __attribute__((always_inline))

/*
 * out[r][0..16) (+)= sum_{x < n} a[r * lda + x * ainc] * b[x * 16 + 0..16) for r < MR.
 * a is broadcast, b is a lane panel. load = 1 adds to out, 0 overwrites.
 */
AI void rows_x_lanes(const int MR, int64_t n, const float *a, int64_t lda, int64_t ainc, const float *b, float *out,
                     int64_t ldo, int load) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++) {
    acc[r][0] = load ? _mm256_loadu_ps(out + r * ldo) : _mm256_setzero_ps();
    acc[r][1] = load ? _mm256_loadu_ps(out + r * ldo + 8) : _mm256_setzero_ps();
  }
  for (int64_t x = 0; x < n; x++) {
    __m256 b0 = _mm256_loadu_ps(b + x * QB), b1 = _mm256_loadu_ps(b + x * QB + 8);
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
      __m256 av = _mm256_broadcast_ss(a + r * lda + x * ainc);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++) {
    _mm256_storeu_ps(out + r * ldo, acc[r][0]);
    _mm256_storeu_ps(out + r * ldo + 8, acc[r][1]);
  }
}

/* Dispatches rows_x_lanes over `rows` rows in blocks of 6 (row r at a + r*lda, out + r*ldo). */
static void gemm_rows_x_lanes(int64_t rows, int64_t n, const float *a, int64_t lda, int64_t ainc, const float *b,
                              float *out, int64_t ldo, int load) {
  int64_t r = 0;
  for (; r + 6 <= rows; r += 6) rows_x_lanes(6, n, a + r * lda, lda, ainc, b, out + r * ldo, ldo, load);
  const float *ar = a + r * lda;
  float *orr = out + r * ldo;
  switch (rows - r) {
  case 5: rows_x_lanes(5, n, ar, lda, ainc, b, orr, ldo, load); break;
  case 4: rows_x_lanes(4, n, ar, lda, ainc, b, orr, ldo, load); break;
  case 3: rows_x_lanes(3, n, ar, lda, ainc, b, orr, ldo, load); break;
  case 2: rows_x_lanes(2, n, ar, lda, ainc, b, orr, ldo, load); break;
  case 1: rows_x_lanes(1, n, ar, lda, ainc, b, orr, ldo, load); break;
  default: break;
  }
}

/*
 * out[r][c0 .. c0 + 8*NV) += sum_{x < n} a[r * ars + x * astep] * b[x * ldb + c0 ..] for
 * r < MR: a is read one element at a time (broadcast), b is row-major along d.
 */
AI void rows_x_cols(const int MR, const int NV, int64_t n, const float *a, int64_t ars, int64_t astep, const float *b,
                    int64_t ldb, float *out, int64_t ldo) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) acc[r][v] = _mm256_loadu_ps(out + r * ldo + 8 * v);
  for (int64_t x = 0; x < n; x++) {
    __m256 b0 = _mm256_loadu_ps(b + x * ldb);
    __m256 b1 = NV > 1 ? _mm256_loadu_ps(b + x * ldb + 8) : b0;
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
      __m256 av = _mm256_broadcast_ss(a + r * ars + x * astep);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      if (NV > 1) acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) _mm256_storeu_ps(out + r * ldo + 8 * v, acc[r][v]);
}

/* out[r][0..d) += sum_x a[r*ars + x*astep] * b[x*ldb + 0..d) for r < rows; d % 8 == 0. */
static void gemm_rows_x_cols(int64_t rows, int d, int64_t n, const float *a, int64_t ars, int64_t astep, const float *b,
                             int64_t ldb, float *out, int64_t ldo) {
  for (int c = 0; c < d; c += 16) {
    const int two = d - c >= 16;
    int64_t r = 0;
#define RXC(MR)                                                                                  \
  do {                                                                                           \
    if (two) rows_x_cols(MR, 2, n, a + r * ars, ars, astep, b + c, ldb, out + r * ldo + c, ldo); \
    else rows_x_cols(MR, 1, n, a + r * ars, ars, astep, b + c, ldb, out + r * ldo + c, ldo);     \
  } while (0)
    for (; r + 6 <= rows; r += 6) RXC(6);
    switch (rows - r) {
    case 5: RXC(5); break;
    case 4: RXC(4); break;
    case 3: RXC(3); break;
    case 2: RXC(2); break;
    case 1: RXC(1); break;
    default: break;
    }
#undef RXC
  }
}

/* --------------------------------------------------------------- forward */

typedef struct {
  float *qp; /* [nsb][d][16] scaled, transposed queries */
  float *ot; /* [nsb][d][16] running O^T */
  float *m;  /* [nsb][16] running max (base 2) */
  float *l;  /* [nsb][16] running sum */
  float *st; /* [tk][16] scores / probabilities */
  float *kt; /* [tk][d] fp32 copy of a K tile (bf16 storage) */
  float *vt; /* [tk][d] fp32 copy of a V tile (bf16 storage) */
} fwd_ws;

static size_t avx2_fwd_ws(const attn_params *p, attn_tiles t) {
  size_t nsb = ((size_t)t.tq + QB - 1) / QB, d = (size_t)p->d;
  size_t own = 2 * nsb * d * QB + 2 * nsb * QB + (size_t)t.tk * QB + 2 * (size_t)t.tk * (d + 16) + 64;
  size_t sc = attn_variant_scalar.fwd_ws_floats(p, t);
  return own > sc ? own : sc;
}

/* Row stride of copied K/V tiles: d + 16 floats spreads a column over the L1 sets. */
static inline int64_t pad_ld(int d) { return (int64_t)d + 16; }

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

/* Sets masked scores of a partial tile to fill (-inf); only diagonal tiles get here. */
static void mask_tile(const attn_mask *mk, int64_t i0, int64_t ni, int64_t j0, int64_t nk, float *st, int64_t ld,
                      float fill) {
  for (int64_t i = 0; i < ni; i++) {
    int64_t lo, hi;
    attn_mask_visible_run(mk, mk->q_pos0 + (i0 + i) * mk->q_stride, j0, nk, &lo, &hi);
    if (lo > hi) lo = nk, hi = nk - 1; /* nothing visible: mask all */
    for (int64_t j = 0; j < lo && j < nk; j++) st[j * ld + i] = fill;
    for (int64_t j = hi + 1 > 0 ? hi + 1 : 0; j < nk; j++) st[j * ld + i] = fill;
  }
}

/* Online-softmax update of one sub-block with the scores st (nk x 16, base 2). */
static void softmax_update(int64_t nk, int d, float *st, float *m, float *l, float *ot) {
  __m256 mx0 = _mm256_set1_ps(-INFINITY), mx1 = mx0;
  for (int64_t j = 0; j < nk; j++) {
    mx0 = _mm256_max_ps(mx0, _mm256_loadu_ps(st + j * QB));
    mx1 = _mm256_max_ps(mx1, _mm256_loadu_ps(st + j * QB + 8));
  }
  __m256 ninf = _mm256_set1_ps(-INFINITY), zero = _mm256_setzero_ps();
  __m256 mo0 = _mm256_loadu_ps(m), mo1 = _mm256_loadu_ps(m + 8);
  __m256 mn0 = _mm256_max_ps(mo0, mx0), mn1 = _mm256_max_ps(mo1, mx1);
  /* Rows with nothing visible yet: subtract 0 instead of -inf (gives p = 0, no NaN). */
  __m256 mu0 = _mm256_blendv_ps(mn0, zero, _mm256_cmp_ps(mn0, ninf, _CMP_EQ_OQ));
  __m256 mu1 = _mm256_blendv_ps(mn1, zero, _mm256_cmp_ps(mn1, ninf, _CMP_EQ_OQ));
  __m256 al0 = attn_exp2_ps(_mm256_sub_ps(mo0, mu0)), al1 = attn_exp2_ps(_mm256_sub_ps(mo1, mu1));
  __m256 s0 = zero, s1 = zero;
  for (int64_t j = 0; j < nk; j++) {
    __m256 p0 = attn_exp2_ps(_mm256_sub_ps(_mm256_loadu_ps(st + j * QB), mu0));
    __m256 p1 = attn_exp2_ps(_mm256_sub_ps(_mm256_loadu_ps(st + j * QB + 8), mu1));
    _mm256_storeu_ps(st + j * QB, p0);
    _mm256_storeu_ps(st + j * QB + 8, p1);
    s0 = _mm256_add_ps(s0, p0);
    s1 = _mm256_add_ps(s1, p1);
  }
  _mm256_storeu_ps(l, _mm256_fmadd_ps(_mm256_loadu_ps(l), al0, s0));
  _mm256_storeu_ps(l + 8, _mm256_fmadd_ps(_mm256_loadu_ps(l + 8), al1, s1));
  _mm256_storeu_ps(m, mn0);
  _mm256_storeu_ps(m + 8, mn1);
  for (int c = 0; c < d; c++) {
    _mm256_storeu_ps(ot + c * QB, _mm256_mul_ps(_mm256_loadu_ps(ot + c * QB), al0));
    _mm256_storeu_ps(ot + c * QB + 8, _mm256_mul_ps(_mm256_loadu_ps(ot + c * QB + 8), al1));
  }
}

/* o[0 .. 8*NV) = o * alpha + sum_{j < n} p[j] * v[j * ldv + 0 ..) (NV vectors in registers). */
AI void pv_chunk(const int NV, int64_t n, const float *p, const float *v, int64_t ldv, float *o, float alpha) {
  __m256 acc[8];
  const __m256 va = _mm256_set1_ps(alpha);
#pragma GCC unroll 8
  for (int x = 0; x < NV; x++) acc[x] = _mm256_mul_ps(_mm256_loadu_ps(o + 8 * x), va);
  for (int64_t j = 0; j < n; j++) {
    __m256 pb = _mm256_broadcast_ss(p + j);
#pragma GCC unroll 8
    for (int x = 0; x < NV; x++) acc[x] = _mm256_fmadd_ps(pb, _mm256_loadu_ps(v + j * ldv + 8 * x), acc[x]);
  }
#pragma GCC unroll 8
  for (int x = 0; x < NV; x++) _mm256_storeu_ps(o + 8 * x, acc[x]);
}

/* Scores of one query row against 4 consecutive keys: 4 independent chains, one hsum. */
static inline __m128 dot4(const float *qi, const float *k0, int64_t ldk, int d) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int c = 0; c < d; c += 8) {
    __m256 qv = _mm256_loadu_ps(qi + c);
    a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + c), a0);
    a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + ldk + c), a1);
    a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 2 * ldk + c), a2);
    a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 3 * ldk + c), a3);
  }
  __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

static inline float dot1(const float *qi, const float *kj, int d) {
  __m256 a0 = _mm256_setzero_ps();
  for (int c = 0; c < d; c += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qi + c), _mm256_loadu_ps(kj + c), a0);
  return attn_hsum_ps(a0);
}

#define DECODE_ROWS 4 /* per head: up to this many rows take the row path */
#define GROUP_ROWS 16 /* grouped decode: rows of all heads of a kv group */

/*
 * Few query rows (decode): keys stream once through the cache, scores by dot
 * products along d, O rows held in registers while V streams; d % 8 == 0.
 */
static void fwd_rows(const attn_params *p, attn_tiles t, const float *qs, const void *k, const void *v, size_t kbase,
                     int64_t i0, int64_t ni, int64_t cyc, int64_t j0, int64_t nj, float *o_part, float *lse_part,
                     fwd_ws *w) {
  /* Row i sits at query index i0 + i % cyc (cyc < ni when rows of several heads are stacked). */
  const int d = p->d;
  float m[GROUP_ROWS], l[GROUP_ROWS];
  float *s = w->st; /* [ni][tk] scores */
  for (int64_t i = 0; i < ni; i++) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  memset(o_part, 0, (size_t)ni * d * sizeof(float));
  for (int64_t jt = j0; jt < j0 + nj; jt += t.tk) {
    int64_t nk = j0 + nj - jt < t.tk ? j0 + nj - jt : t.tk;
    int cls = attn_mask_tile_class(&p->mask, i0, ni < cyc ? ni : cyc, jt, nk);
    if (cls == ATTN_TILE_NONE) continue;
    const float *kt = (const float *)k + (kbase + jt) * d, *vt = (const float *)v + (kbase + jt) * d;
    if (p->dtype != ATTN_FP32) {
      attn_load_f32(w->kt, k, p->dtype, (kbase + jt) * d, (size_t)nk * d);
      attn_load_f32(w->vt, v, p->dtype, (kbase + jt) * d, (size_t)nk * d);
      kt = w->kt;
      vt = w->vt;
    }
    for (int64_t i = 0; i < ni; i++) {
      const float *qi = qs + i * d;
      float *si = s + i * t.tk;
      int64_t j = 0;
      for (; j + 4 <= nk; j += 4) _mm_storeu_ps(si + j, dot4(qi, kt + j * d, d, d));
      for (; j < nk; j++) si[j] = dot1(qi, kt + j * d, d);
    }
    if (cls == ATTN_TILE_PARTIAL)
      for (int64_t i = 0; i < ni; i++) {
        int64_t qp = p->mask.q_pos0 + (i0 + i % cyc) * p->mask.q_stride;
        for (int64_t j = 0; j < nk; j++)
          if (!attn_mask_visible(&p->mask, qp, p->mask.k_pos0 + (jt + j) * p->mask.k_stride))
            s[i * t.tk + j] = -INFINITY;
      }
    for (int64_t i = 0; i < ni; i++) {
      float *si = s + i * t.tk;
      __m256 vmx = _mm256_set1_ps(-INFINITY);
      int64_t j = 0;
      for (; j + 8 <= nk; j += 8) vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(si + j));
      float mx = attn_hmax_ps(vmx);
      for (; j < nk; j++) mx = si[j] > mx ? si[j] : mx;
      float mn = mx > m[i] ? mx : m[i];
      if (mn == -INFINITY) continue;
      float alpha = m[i] == -INFINITY ? 0.0f : exp2f(m[i] - mn);
      __m256 bm = _mm256_set1_ps(mn), vs = _mm256_setzero_ps();
      for (j = 0; j + 8 <= nk; j += 8) {
        __m256 e = attn_exp2_ps(_mm256_sub_ps(_mm256_loadu_ps(si + j), bm));
        _mm256_storeu_ps(si + j, e);
        vs = _mm256_add_ps(vs, e);
      }
      float sum = attn_hsum_ps(vs);
      for (; j < nk; j++) {
        si[j] = exp2f(si[j] - mn);
        sum += si[j];
      }
      l[i] = l[i] * alpha + sum;
      m[i] = mn;
      float *orow = o_part + i * d;
      for (int c = 0; c < d; c += 64) {
        switch ((d - c) >= 64 ? 8 : (d - c) / 8) {
        case 8: pv_chunk(8, nk, si, vt + c, d, orow + c, alpha); break;
        case 7: pv_chunk(7, nk, si, vt + c, d, orow + c, alpha); break;
        case 6: pv_chunk(6, nk, si, vt + c, d, orow + c, alpha); break;
        case 5: pv_chunk(5, nk, si, vt + c, d, orow + c, alpha); break;
        case 4: pv_chunk(4, nk, si, vt + c, d, orow + c, alpha); break;
        case 3: pv_chunk(3, nk, si, vt + c, d, orow + c, alpha); break;
        case 2: pv_chunk(2, nk, si, vt + c, d, orow + c, alpha); break;
        default: pv_chunk(1, nk, si, vt + c, d, orow + c, alpha); break;
        }
      }
    }
  }
  for (int64_t i = 0; i < ni; i++) {
    float *orow = o_part + i * d;
    if (l[i] > 0.0f) {
      __m256 inv = _mm256_set1_ps(1.0f / l[i]);
      for (int c = 0; c < d; c += 8) _mm256_storeu_ps(orow + c, _mm256_mul_ps(_mm256_loadu_ps(orow + c), inv));
      lse_part[i] = (m[i] + log2f(l[i])) * ATTN_LN2;
    } else {
      memset(orow, 0, (size_t)d * sizeof(float));
      lse_part[i] = -INFINITY;
    }
  }
}

static void avx2_fwd_block(const attn_params *p, attn_tiles t, const void *q, const void *k, const void *v, int b,
                           int hq, int64_t i0, int64_t ni, int64_t j0, int64_t nj, float *o_part, float *lse_part,
                           float *ws) {
  const int d = p->d;
  if (d % 8) {
    attn_variant_scalar.fwd_block(p, t, q, k, v, b, hq, i0, ni, j0, nj, o_part, lse_part, ws);
    return;
  }
  const int hkv = hq / (p->Zq / p->Zkv);
  const size_t qoff = (((size_t)b * p->Zq + hq) * p->Nq + i0) * d;
  const size_t kbase = ((size_t)b * p->Zkv + hkv) * p->Nk;
  const float qscale = p->scale * ATTN_LOG2E;
  fwd_ws w = fwd_ws_carve(p, t, ws);
  const int64_t nsb = (ni + QB - 1) / QB, ldp = pad_ld(d);

  if (ni <= DECODE_ROWS) {
    /* Row-major scaled queries in the (unused here) qp area. */
    attn_load_f32(w.qp, q, p->dtype, qoff, (size_t)ni * d);
    for (size_t e = 0; e < (size_t)ni * d; e++) w.qp[e] *= qscale;
    fwd_rows(p, t, w.qp, k, v, kbase, i0, ni, ni, j0, nj, o_part, lse_part, &w);
    return;
  }

  /* Pack each sub-block of 16 queries transposed and scaled (w.st: scratch for a row). */
  attn_pack_lanes(p, q, qoff, ni, QB, qscale, w.qp, w.st);
  memset(w.ot, 0, (size_t)nsb * d * QB * sizeof(float));
  for (int64_t e = 0; e < nsb * QB; e++) {
    w.m[e] = -INFINITY;
    w.l[e] = 0.0f;
  }
  for (int64_t jt = j0; jt < j0 + nj; jt += t.tk) {
    int64_t nk = j0 + nj - jt < t.tk ? j0 + nj - jt : t.tk;
    if (attn_mask_tile_class(&p->mask, i0, ni, jt, nk) == ATTN_TILE_NONE) continue;
    /* Copy the tile with a padded row stride: walking down a column of V at a
     * stride of d floats (a power of two) would use only a few L1 sets. */
    const float *kt = w.kt, *vt = w.vt;
    for (int64_t j = 0; j < nk; j++) {
      attn_load_f32(w.kt + j * ldp, k, p->dtype, (kbase + jt + j) * d, (size_t)d);
      attn_load_f32(w.vt + j * ldp, v, p->dtype, (kbase + jt + j) * d, (size_t)d);
    }
    for (int64_t sb = 0; sb < nsb; sb++) {
      int64_t s0 = sb * QB, sn = ni - s0 < QB ? ni - s0 : QB;
      int cls = attn_mask_tile_class(&p->mask, i0 + s0, sn, jt, nk);
      if (cls == ATTN_TILE_NONE) continue;
      float *qp = w.qp + sb * d * QB, *ot = w.ot + sb * d * QB;
      gemm_rows_x_lanes(nk, d, kt, ldp, 1, qp, w.st, QB, 0);
      if (cls == ATTN_TILE_PARTIAL) mask_tile(&p->mask, i0 + s0, sn, jt, nk, w.st, QB, -INFINITY);
      softmax_update(nk, d, w.st, w.m + sb * QB, w.l + sb * QB, ot);
      /* O^T[c][:] += sum_j V[j][c] P^T[j][:]: rows are c (stride 1), x runs over j (stride d). */
      gemm_rows_x_lanes(d, nk, vt, 1, ldp, w.st, ot, QB, 1);
      /* Meanwhile pull a share of the next K/V tile towards L2, so the copy at
       * the top of the next step does not wait on memory. */
      if (p->dtype == ATTN_FP32 && jt + t.tk < j0 + nj) {
        int64_t nn = j0 + nj - jt - t.tk < t.tk ? j0 + nj - jt - t.tk : t.tk;
        attn_prefetch_share((const float *)k + (kbase + jt + t.tk) * d, (const float *)v + (kbase + jt + t.tk) * d, nn,
                            d, sb, nsb);
      }
    }
  }
  attn_unpack_lanes(d, ni, QB, w.ot, w.m, w.l, o_part, lse_part);
}

/* GQA decode: the Nq rows of every query head of kv head (b, hkv), K/V read once. */
static void avx2_fwd_group_block(const attn_params *p, attn_tiles t, const void *q, const void *k, const void *v, int b,
                                 int hkv, int64_t j0, int64_t nj, float *o_part, float *lse_part, float *ws) {
  const int d = p->d, group = p->Zq / p->Zkv;
  if (d % 8) {
    for (int g = 0; g < group; g++)
      attn_variant_scalar.fwd_block(p, t, q, k, v, b, hkv * group + g, 0, p->Nq, j0, nj, o_part + (size_t)g * p->Nq * d,
                                    lse_part + (size_t)g * p->Nq, ws);
    return;
  }
  const size_t kbase = ((size_t)b * p->Zkv + hkv) * p->Nk;
  const float qscale = p->scale * ATTN_LOG2E;
  const int64_t ni = p->Nq * group;
  fwd_ws w = fwd_ws_carve(p, t, ws);
  /* Rows of heads hkv*group .. hkv*group + group - 1 are consecutive in q. */
  size_t qoff = (((size_t)b * p->Zq + (size_t)hkv * group) * p->Nq) * d;
  attn_load_f32(w.qp, q, p->dtype, qoff, (size_t)ni * d);
  for (size_t e = 0; e < (size_t)ni * d; e++) w.qp[e] *= qscale;
  fwd_rows(p, t, w.qp, k, v, kbase, 0, ni, p->Nq, j0, nj, o_part, lse_part, &w);
}

/* -------------------------------------------------------------- backward */

/* Query rows handled together per key tile: BWD_SB sub-blocks, LW lanes in all. */
#define BWD_SB 4
#define LW (BWD_SB * QB)

static size_t avx2_bwd_ws(const attn_params *p, attn_tiles t) {
  size_t d = (size_t)p->d, tk = (size_t)t.tk;
  size_t own = 4 * tk * (d + 16)           /* K, V fp32 tiles (padded rows), dK, dV accumulators */
               + 4 * (size_t)LW * (d + 16) /* Qp, dOp lane panels; Q, dO rows (zero padded) */
               + 2 * (size_t)LW * tk       /* P^T, dS^T */
               + 2 * (size_t)LW + 64;      /* lse (base 2), delta */
  size_t sc = attn_variant_scalar.bwd_ws_floats(p, t);
  return own > sc ? own : sc;
}

static void avx2_bwd_block(const attn_params *p, attn_tiles t, const void *q, const void *k, const void *v,
                           const void *dout, const float *lse, const float *delta, int b, int hkv, int64_t j0,
                           int64_t nj, float *dq_base, float *dk, float *dv, float *ws) {
  const int d = p->d, group = p->Zq / p->Zkv;
  if (d % 8) {
    attn_variant_scalar.bwd_block(p, t, q, k, v, dout, lse, delta, b, hkv, j0, nj, dq_base, dk, dv, ws);
    return;
  }
  const size_t kbase = ((size_t)b * p->Zkv + hkv) * p->Nk;
  const int64_t tk = t.tk, ldp = pad_ld(d);
  float *kt = ws, *vt = kt + tk * ldp, *dka = vt + tk * ldp, *dva = dka + tk * d;
  float *qp = dva + tk * d, *gp = qp + LW * d, *qr = gp + LW * d, *gr = qr + LW * ldp;
  float *pt = gr + LW * ldp, *dst = pt + LW * tk, *l2 = dst + LW * tk, *dl = l2 + LW;
  const float s2 = p->scale * ATTN_LOG2E;
  const __m256 vscale = _mm256_set1_ps(p->scale);

  for (int64_t jt = j0; jt < j0 + nj; jt += tk) {
    int64_t nk = j0 + nj - jt < tk ? j0 + nj - jt : tk;
    for (int64_t j = 0; j < nk; j++) {
      attn_load_f32(kt + j * ldp, k, p->dtype, (kbase + jt + j) * d, (size_t)d);
      attn_load_f32(vt + j * ldp, v, p->dtype, (kbase + jt + j) * d, (size_t)d);
    }
    memset(dka, 0, (size_t)nk * d * sizeof(float));
    memset(dva, 0, (size_t)nk * d * sizeof(float));
    for (int g = 0; g < group; g++) {
      const int hq = hkv * group + g;
      const size_t rbase = ((size_t)b * p->Zq + hq) * p->Nq;
      for (int64_t it = 0; it < p->Nq; it += LW) {
        int64_t ni = p->Nq - it < LW ? p->Nq - it : LW;
        if (attn_mask_tile_class(&p->mask, it, ni, jt, nk) == ATTN_TILE_NONE) continue;
        int64_t nsb = (ni + QB - 1) / QB, np = nsb * QB;
        /* Pack Q, dO row-major (zero padded) and as lane panels; lse in base 2. */
        for (int64_t i = 0; i < np; i++) {
          float *qd = qp + (i / QB) * d * QB + (i % QB), *gd = gp + (i / QB) * d * QB + (i % QB);
          float *qi = qr + i * ldp, *gi = gr + i * ldp;
          if (i < ni) {
            attn_load_f32(qi, q, p->dtype, (rbase + it + i) * d, (size_t)d);
            attn_load_f32(gi, dout, p->dtype, (rbase + it + i) * d, (size_t)d);
          } else {
            memset(qi, 0, (size_t)d * sizeof(float));
            memset(gi, 0, (size_t)d * sizeof(float));
          }
          for (int c = 0; c < d; c++) {
            qd[c * QB] = qi[c] * s2;
            gd[c * QB] = gi[c];
          }
          float li = i < ni ? lse[rbase + it + i] : -INFINITY;
          l2[i] = li == -INFINITY ? INFINITY : li * ATTN_LOG2E; /* +inf gives p = 0 */
          dl[i] = i < ni ? delta[rbase + it + i] : 0.0f;
        }
        for (int64_t sb = 0; sb < nsb; sb++) {
          int64_t s0 = sb * QB, sn = ni - s0 < QB ? ni - s0 : QB;
          float *ps = pt + s0, *ds = dst + s0;
          int cls = attn_mask_tile_class(&p->mask, it + s0, sn, jt, nk);
          if (cls == ATTN_TILE_NONE) {
            for (int64_t j = 0; j < nk; j++) {
              memset(ps + j * LW, 0, QB * sizeof(float));
              memset(ds + j * LW, 0, QB * sizeof(float));
            }
            continue;
          }
          gemm_rows_x_lanes(nk, d, kt, ldp, 1, qp + sb * d * QB, ps, LW, 0); /* S^T, base 2 */
          gemm_rows_x_lanes(nk, d, vt, ldp, 1, gp + sb * d * QB, ds, LW, 0); /* dP^T */
          if (cls == ATTN_TILE_PARTIAL) mask_tile(&p->mask, it + s0, sn, jt, nk, ps, LW, -INFINITY);
          __m256 la = _mm256_loadu_ps(l2 + s0), lb = _mm256_loadu_ps(l2 + s0 + 8);
          __m256 da = _mm256_loadu_ps(dl + s0), db = _mm256_loadu_ps(dl + s0 + 8);
          for (int64_t j = 0; j < nk; j++) {
            float *pj = ps + j * LW, *dj = ds + j * LW;
            __m256 p0 = attn_exp2_ps(_mm256_sub_ps(_mm256_loadu_ps(pj), la));
            __m256 p1 = attn_exp2_ps(_mm256_sub_ps(_mm256_loadu_ps(pj + 8), lb));
            __m256 g0 = _mm256_sub_ps(_mm256_loadu_ps(dj), da);
            __m256 g1 = _mm256_sub_ps(_mm256_loadu_ps(dj + 8), db);
            _mm256_storeu_ps(pj, p0);
            _mm256_storeu_ps(pj + 8, p1);
            _mm256_storeu_ps(dj, _mm256_mul_ps(_mm256_mul_ps(p0, g0), vscale));
            _mm256_storeu_ps(dj + 8, _mm256_mul_ps(_mm256_mul_ps(p1, g1), vscale));
          }
          /* dQ[i][:] += sum_j dS^T[j][i] K[j][:], straight into the (partial) dq rows. */
          gemm_rows_x_cols(sn, d, nk, ds, 1, LW, kt, ldp, dq_base + (rbase + it + s0) * d, d);
        }
        /* dV[j][:] += sum_i P^T[j][i] dO[i][:];  dK[j][:] += sum_i dS^T[j][i] Q[i][:]. */
        gemm_rows_x_cols(nk, d, np, pt, LW, 1, gr, ldp, dva, d);
        gemm_rows_x_cols(nk, d, np, dst, LW, 1, qr, ldp, dka, d);
      }
    }
    float *dkd = dk + (kbase + jt) * d, *dvd = dv + (kbase + jt) * d;
    for (size_t e = 0; e < (size_t)nk * d; e++) {
      dkd[e] += dka[e];
      dvd[e] += dva[e];
    }
  }
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const attn_variant attn_variant_avx2 = {
  .name = "avx2",
  .fwd = {512, 64},
  .bwd = {64, 128},
  .fwd_block = avx2_fwd_block,
  .fwd_group_block = avx2_fwd_group_block,
  .group_rows = GROUP_ROWS,
  .bwd_block = avx2_bwd_block,
  .fwd_ws_floats = avx2_fwd_ws,
  .bwd_ws_floats = avx2_bwd_ws,
};
#endif
