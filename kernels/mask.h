/*
 * mask.h — the mask geometry, written once for the plans (visible pairs behind
 * FLOPs and block skipping), the CPU kernels and the CUDA kernels (host and
 * device): is a (query, key) pair visible, what a tile of pairs is (none,
 * all or some visible), which key rows can be visible from a range of query
 * rows and the reverse, and how many pairs of two blocks are visible.
 *
 * Positions: query row i sits at q_pos0 + i*q_stride, key row j at
 * k_pos0 + j*k_stride (strides >= 1: 1 for contiguous blocks, G for the
 * striped layout). causal: key allowed iff k_pos <= q_pos. window > 0: also
 * requires q_pos - k_pos < window (causal) or |q_pos - k_pos| < window (not).
 * docs > 0: packed documents (Llama 3's document masking, FlexAttention's
 * document mask): doc_end[0 .. docs) ascending, the exclusive end position of
 * each document (positions at or past the last end form one more); a pair is
 * also required to lie inside one document. doc_end is a host pointer: the
 * CUDA backend refuses a mask with documents.
 */
#ifndef BURSTSIM_MASK_H
#define BURSTSIM_MASK_H

#include <stdint.h>

#if defined(__CUDACC__)
#define ATTN_MASK_FN __host__ __device__ __forceinline__
#else
#define ATTN_MASK_FN static inline
#endif

typedef struct {
  int64_t q_pos0, q_stride;
  int64_t k_pos0, k_stride;
  int causal;
  int64_t window;
  int64_t docs;
  const int64_t *doc_end;
} attn_mask;

/* floor(a / b) and ceil(a / b), also for negative operands. */
ATTN_MASK_FN int64_t attn_mask_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
ATTN_MASK_FN int64_t attn_mask_ceildiv(int64_t a, int64_t b) { return -attn_mask_floordiv(-a, b); }

/* The document holding position x: [*s, *e) (the first starts and the one past the last ends
 * 2^62 away). With docs = 0, one document of every position. */
ATTN_MASK_FN void attn_mask_doc_span(const attn_mask *m, int64_t x, int64_t *s, int64_t *e) {
  int64_t lo = 0, hi = m->docs, far = (int64_t)1 << 62;
  while (lo < hi) { /* the first document whose end passes x */
    int64_t mid = lo + (hi - lo) / 2;
    if (m->doc_end[mid] > x) hi = mid;
    else lo = mid + 1;
  }
  *s = lo > 0 ? m->doc_end[lo - 1] : -far;
  *e = lo < m->docs ? m->doc_end[lo] : far;
}

/* Is key position kp visible from query position qp? */
ATTN_MASK_FN int attn_mask_visible(const attn_mask *m, int64_t qp, int64_t kp) {
  if (m->docs > 0) {
    int64_t s, e;
    attn_mask_doc_span(m, qp, &s, &e);
    if (kp < s || kp >= e) return 0;
  }
  if (m->causal) {
    if (kp > qp) return 0;
    if (m->window > 0 && qp - kp >= m->window) return 0;
  } else if (m->window > 0) {
    int64_t dist = qp > kp ? qp - kp : kp - qp;
    if (dist >= m->window) return 0;
  }
  return 1;
}

/*
 * The keys visible from query position qp among key rows [j0, j0 + nk) form
 * one run: rows j0 + [*lo, *hi] (empty when *lo > *hi). attn_mask_visible
 * solved for the key row, since positions grow with it.
 */
ATTN_MASK_FN void attn_mask_visible_run(const attn_mask *m, int64_t qp, int64_t j0, int64_t nk, int64_t *lo,
                                        int64_t *hi) {
  int64_t a = 0, b = nk - 1, ks = m->k_stride, k0 = m->k_pos0;
  if (m->causal) {
    int64_t h = attn_mask_floordiv(qp - k0, ks) - j0; /* kp <= qp */
    if (h < b) b = h;
  }
  if (m->window > 0) {
    int64_t l = attn_mask_floordiv(qp - m->window - k0, ks) - j0 + 1; /* kp > qp - window */
    if (l > a) a = l;
    if (!m->causal) {
      int64_t h = attn_mask_floordiv(qp + m->window - 1 - k0, ks) - j0; /* kp < qp + window */
      if (h < b) b = h;
    }
  }
  if (m->docs > 0) { /* s <= kp < e, the query's document */
    int64_t s, e;
    attn_mask_doc_span(m, qp, &s, &e);
    int64_t l = attn_mask_ceildiv(s - k0, ks) - j0, h = attn_mask_floordiv(e - 1 - k0, ks) - j0;
    if (l > a) a = l;
    if (h < b) b = h;
  }
  *lo = a;
  *hi = b;
}

enum { ATTN_TILE_NONE = 0, ATTN_TILE_FULL = 1, ATTN_TILE_PARTIAL = 2 };

/*
 * Classifies query rows [i0, i0+ni) against key rows [j0, j0+nj) (both
 * non-empty): no pair visible, every pair visible, or mixed (then the caller
 * masks per element). Positions grow with the row index, so the extremes of
 * the two intervals decide; "mixed" is the safe answer when in doubt.
 */
ATTN_MASK_FN int attn_mask_tile_class_nodoc(const attn_mask *m, int64_t i0, int64_t ni, int64_t j0, int64_t nj) {
  int64_t qlo = m->q_pos0 + i0 * m->q_stride, qhi = m->q_pos0 + (i0 + ni - 1) * m->q_stride;
  int64_t klo = m->k_pos0 + j0 * m->k_stride, khi = m->k_pos0 + (j0 + nj - 1) * m->k_stride;
  if (m->causal) {
    if (klo > qhi) return ATTN_TILE_NONE;
    if (m->window > 0 && qlo - khi >= m->window) return ATTN_TILE_NONE;
    if (khi <= qlo && (m->window <= 0 || qhi - klo < m->window)) return ATTN_TILE_FULL;
    return ATTN_TILE_PARTIAL;
  }
  if (m->window <= 0) return ATTN_TILE_FULL;
  if (klo - qhi >= m->window || qlo - khi >= m->window) return ATTN_TILE_NONE;
  int64_t far = qhi - klo > khi - qlo ? qhi - klo : khi - qlo;
  if (far < m->window) return ATTN_TILE_FULL;
  return ATTN_TILE_PARTIAL;
}

/* With documents: no pair when every key lies before the first query's document or after the
 * last one's; every pair only when the base mask says so and all rows lie in one document. */
ATTN_MASK_FN int attn_mask_tile_class(const attn_mask *m, int64_t i0, int64_t ni, int64_t j0, int64_t nj) {
  int cls = attn_mask_tile_class_nodoc(m, i0, ni, j0, nj);
  if (m->docs <= 0 || cls == ATTN_TILE_NONE) return cls;
  int64_t qlo = m->q_pos0 + i0 * m->q_stride, qhi = m->q_pos0 + (i0 + ni - 1) * m->q_stride;
  int64_t klo = m->k_pos0 + j0 * m->k_stride, khi = m->k_pos0 + (j0 + nj - 1) * m->k_stride;
  int64_t s1, e1, s2, e2;
  attn_mask_doc_span(m, qlo, &s1, &e1);
  attn_mask_doc_span(m, qhi, &s2, &e2);
  if (khi < s1 || klo >= e2) return ATTN_TILE_NONE;
  if (cls == ATTN_TILE_FULL && s1 == s2 && klo >= s1 && khi < e1) return ATTN_TILE_FULL;
  return ATTN_TILE_PARTIAL;
}

/* 1 when every pair of a non-empty tile is visible (a kernel may then skip
 * per-element masking); 0 otherwise, and for an empty tile. */
ATTN_MASK_FN int attn_mask_tile_full(const attn_mask *m, int64_t i0, int64_t ni, int64_t j0, int64_t nj) {
  return ni > 0 && nj > 0 && attn_mask_tile_class(m, i0, ni, j0, nj) == ATTN_TILE_FULL;
}

/* [lo, hi) clamped into [0, n], empty (lo = hi) when hi < lo. */
ATTN_MASK_FN void attn_mask_clamp(int64_t lo, int64_t hi, int64_t n, int64_t *out_lo, int64_t *out_hi) {
  if (hi < lo) hi = lo;
  if (lo > n) lo = n;
  if (hi > n) hi = n;
  if (hi < 0) hi = 0;
  if (lo < 0) lo = 0;
  *out_lo = lo;
  *out_hi = hi;
}

/*
 * Key rows that may be visible from query rows [i0, i0+ni): [*jlo, *jhi)
 * within [0, nk), a superset of the visible keys (per-element masking inside
 * stays exact). Empty (jlo >= jhi) when no key is visible from any row.
 */
ATTN_MASK_FN void attn_mask_key_range(const attn_mask *m, int64_t i0, int64_t ni, int64_t nk, int64_t *jlo,
                                      int64_t *jhi) {
  int64_t lo = 0, hi = nk;
  if (ni <= 0) {
    *jlo = 0;
    *jhi = 0;
    return;
  }
  int64_t qlo = m->q_pos0 + i0 * m->q_stride, qhi = m->q_pos0 + (i0 + ni - 1) * m->q_stride;
  if (m->causal || m->window > 0) {
    /* Largest visible key position: qhi (causal) or qhi + window - 1. */
    int64_t kmax = m->causal ? qhi : qhi + m->window - 1;
    int64_t h = attn_mask_floordiv(kmax - m->k_pos0, m->k_stride) + 1;
    if (h < hi) hi = h;
  }
  if (m->window > 0) {
    /* Smallest visible key position: qlo - window + 1 (both kinds). */
    int64_t l = attn_mask_ceildiv(qlo - m->window + 1 - m->k_pos0, m->k_stride);
    if (l > lo) lo = l;
  }
  if (m->docs > 0) { /* from the first query's document start to the last one's end */
    int64_t s, e, s2, e2;
    attn_mask_doc_span(m, qlo, &s, &e);
    attn_mask_doc_span(m, qhi, &s2, &e2);
    int64_t l = attn_mask_ceildiv(s - m->k_pos0, m->k_stride),
            h = attn_mask_floordiv(e2 - 1 - m->k_pos0, m->k_stride) + 1;
    if (l > lo) lo = l;
    if (h < hi) hi = h;
  }
  attn_mask_clamp(lo, hi, nk, jlo, jhi);
}

/* Query rows that may see key rows [j0, j0+nj): the mirror image, for a
 * backward that walks query tiles for a fixed key tile. */
ATTN_MASK_FN void attn_mask_query_range(const attn_mask *m, int64_t j0, int64_t nj, int64_t nq, int64_t *ilo,
                                        int64_t *ihi) {
  int64_t lo = 0, hi = nq;
  if (nj <= 0) {
    *ilo = 0;
    *ihi = 0;
    return;
  }
  int64_t klo = m->k_pos0 + j0 * m->k_stride, khi = m->k_pos0 + (j0 + nj - 1) * m->k_stride;
  if (m->causal || m->window > 0) {
    /* Smallest query position that sees some key: klo (causal), klo - window + 1. */
    int64_t qmin = m->causal ? klo : klo - m->window + 1;
    int64_t l = attn_mask_ceildiv(qmin - m->q_pos0, m->q_stride);
    if (l > lo) lo = l;
  }
  if (m->window > 0) {
    /* Largest: khi + window - 1 (both kinds). */
    int64_t h = attn_mask_floordiv(khi + m->window - 1 - m->q_pos0, m->q_stride) + 1;
    if (h < hi) hi = h;
  }
  if (m->docs > 0) { /* from the first key's document start to the last one's end */
    int64_t s, e, s2, e2;
    attn_mask_doc_span(m, klo, &s, &e);
    attn_mask_doc_span(m, khi, &s2, &e2);
    int64_t l = attn_mask_ceildiv(s - m->q_pos0, m->q_stride),
            h = attn_mask_floordiv(e2 - 1 - m->q_pos0, m->q_stride) + 1;
    if (l > lo) lo = l;
    if (h < hi) hi = h;
  }
  attn_mask_clamp(lo, hi, nq, ilo, ihi);
}

#if !defined(__CUDA_ARCH__)
/*
 * Visible pairs of nq query rows and nk key rows with the same stride
 * (m->q_stride; m->k_stride must equal it): the pairs (a, b) at row distance
 * a - b = x number f(x) = min(nq, nk + x) - max(0, x), linear between its
 * breakpoints, and the mask allows a range of x. Counted in 128 bits (a block
 * of 2^32 tokens has 2^64 pairs): -1 when the count passes 2^63 - 1. Host only.
 */
static inline int64_t attn_mask_imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t attn_mask_imax(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t attn_mask_diag(int64_t nq, int64_t nk, int64_t x) {
  return attn_mask_imin(nq, nk + x) - attn_mask_imax(0, x);
}
static inline __int128 attn_mask_diag_sum(int64_t nq, int64_t nk, int64_t u, int64_t v) {
  if (v < u) return 0;
  return ((__int128)attn_mask_diag(nq, nk, u) + attn_mask_diag(nq, nk, v)) * ((__int128)v - u + 1) / 2;
}
static inline int64_t attn_mask_pairs_docs(const attn_mask *m, int64_t nq, int64_t nk);
static inline int64_t attn_mask_pairs(const attn_mask *m, int64_t nq, int64_t nk) {
  if (nq <= 0 || nk <= 0) return 0;
  if (m->docs > 0) return attn_mask_pairs_docs(m, nq, nk);
  int64_t stride = m->q_stride, delta = m->q_pos0 - m->k_pos0, lo = -(nk - 1), hi = nq - 1;
  /* allowed position differences delta + stride * x in [dlo, dhi] */
  int64_t big = (int64_t)1 << 60;
  int64_t dlo = m->causal ? 0 : (m->window > 0 ? -(m->window - 1) : -big);
  int64_t dhi = m->window > 0 ? m->window - 1 : big;
  lo = attn_mask_imax(lo, attn_mask_ceildiv(dlo - delta, stride));
  hi = attn_mask_imin(hi, attn_mask_floordiv(dhi - delta, stride));
  if (lo > hi) return 0;
  /* f is linear on (-inf, c1), [c1, c2), [c2, inf) */
  int64_t c1 = attn_mask_imin(0, nq - nk), c2 = attn_mask_imax(0, nq - nk);
  __int128 n = attn_mask_diag_sum(nq, nk, lo, attn_mask_imin(hi, c1 - 1)) +
               attn_mask_diag_sum(nq, nk, attn_mask_imax(lo, c1), attn_mask_imin(hi, c2 - 1)) +
               attn_mask_diag_sum(nq, nk, attn_mask_imax(lo, c2), hi);
  return n > INT64_MAX ? -1 : (int64_t)n;
}

/* With documents: the sum over the documents of the query rows' span of the pairs of the rows
 * of both blocks inside it, each counted without documents. */
static inline int64_t attn_mask_pairs_docs(const attn_mask *m, int64_t nq, int64_t nk) {
  int64_t st = m->q_stride, qhi = m->q_pos0 + (nq - 1) * st, x = m->q_pos0;
  __int128 n = 0;
  while (x <= qhi) {
    int64_t s, e;
    attn_mask_doc_span(m, x, &s, &e);
    int64_t qa = attn_mask_imax(0, attn_mask_ceildiv(s - m->q_pos0, st));
    int64_t qb = attn_mask_imin(nq - 1, attn_mask_floordiv(e - 1 - m->q_pos0, st));
    int64_t ka = attn_mask_imax(0, attn_mask_ceildiv(s - m->k_pos0, m->k_stride));
    int64_t kb = attn_mask_imin(nk - 1, attn_mask_floordiv(e - 1 - m->k_pos0, m->k_stride));
    if (qa <= qb && ka <= kb) {
      attn_mask sub = *m;
      sub.docs = 0;
      sub.q_pos0 = m->q_pos0 + qa * st;
      sub.k_pos0 = m->k_pos0 + ka * m->k_stride;
      int64_t c = attn_mask_pairs(&sub, qb - qa + 1, kb - ka + 1);
      if (c < 0) return -1;
      n += c;
    }
    if (e > qhi) break;
    x = e;
  }
  return n > INT64_MAX ? -1 : (int64_t)n;
}
#endif

#endif
