/*
 * attn_cuda_mask.h — the mask arithmetic the CUDA kernels run, written once for
 * host and device: is a (query, key) pair visible, is a whole tile visible,
 * and which key rows can be visible at all from a range of query rows. The
 * host unit tests check these against brute force, so the kernels' loop bounds
 * are tested without a GPU. Positions follow attn.h: query row i sits at
 * q_pos0 + i*q_stride, key row j at k_pos0 + j*k_stride (strides >= 1).
 */
#ifndef BURSTSIM_ATTN_CUDA_MASK_H
#define BURSTSIM_ATTN_CUDA_MASK_H

#include <stdint.h>

#if defined(__CUDACC__)
#define ATTN_HD __host__ __device__ __forceinline__
#else
#define ATTN_HD static inline
#endif

/* Plain copy of attn_mask's fields, passed to kernels by value. */
typedef struct {
  int64_t q_pos0, q_stride, k_pos0, k_stride, window;
  int causal;
} attn_cuda_maskv;

/* floor(a / b) for b > 0, also for negative a. */
ATTN_HD int64_t attn_cuda_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b) != 0 && a < 0) q -= 1;
  return q;
}

ATTN_HD int attn_cuda_visible(const attn_cuda_maskv *m, int64_t qp, int64_t kp) {
  if (m->causal) {
    if (kp > qp) return 0;
    if (m->window > 0 && qp - kp >= m->window) return 0;
  } else if (m->window > 0) {
    int64_t dist = qp > kp ? qp - kp : kp - qp;
    if (dist >= m->window) return 0;
  }
  return 1;
}

/* 1 when every pair of query rows [i0, i0+ni) x key rows [j0, j0+nj) is
 * visible (then a kernel may skip per-element masking); 0 otherwise. */
ATTN_HD int attn_cuda_tile_full(const attn_cuda_maskv *m, int64_t i0, int64_t ni, int64_t j0,
                                int64_t nj) {
  if (ni <= 0 || nj <= 0) return 0;
  int64_t qlo = m->q_pos0 + i0 * m->q_stride, qhi = m->q_pos0 + (i0 + ni - 1) * m->q_stride;
  int64_t klo = m->k_pos0 + j0 * m->k_stride, khi = m->k_pos0 + (j0 + nj - 1) * m->k_stride;
  if (m->causal) return khi <= qlo && (m->window <= 0 || qhi - klo < m->window);
  if (m->window <= 0) return 1;
  int64_t far = qhi - klo > khi - qlo ? qhi - klo : khi - qlo;
  return far < m->window;
}

/*
 * Key rows that may be visible from query rows [i0, i0+ni): writes [*jlo, *jhi)
 * within [0, nk), a superset of the visible keys (per-element masking inside
 * stays exact). Empty (jlo >= jhi) when no key is visible from any row.
 */
ATTN_HD void attn_cuda_key_range(const attn_cuda_maskv *m, int64_t i0, int64_t ni, int64_t nk,
                                 int64_t *jlo, int64_t *jhi) {
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
    int64_t h = attn_cuda_floordiv(kmax - m->k_pos0, m->k_stride) + 1;
    if (h < hi) hi = h;
  }
  if (m->window > 0) {
    /* Smallest visible key position: qlo - window + 1 (both kinds). */
    int64_t kmin = qlo - m->window + 1;
    int64_t l = -attn_cuda_floordiv(-(kmin - m->k_pos0), m->k_stride); /* ceil */
    if (l > lo) lo = l;
  }
  if (hi < lo) hi = lo;
  if (lo > nk) lo = nk;
  if (hi > nk) hi = nk;
  if (hi < 0) hi = 0;
  if (lo < 0) lo = 0;
  *jlo = lo;
  *jhi = hi;
}

/* Query rows that may see key rows [j0, j0+nj): the mirror image, used by the
 * backward, which walks query tiles for a fixed key tile. */
ATTN_HD void attn_cuda_query_range(const attn_cuda_maskv *m, int64_t j0, int64_t nj, int64_t nq,
                                   int64_t *ilo, int64_t *ihi) {
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
    int64_t l = -attn_cuda_floordiv(-(qmin - m->q_pos0), m->q_stride);
    if (l > lo) lo = l;
  }
  if (m->window > 0) {
    /* Largest: khi + window - 1 (both kinds). */
    int64_t qmax = khi + m->window - 1;
    int64_t h = attn_cuda_floordiv(qmax - m->q_pos0, m->q_stride) + 1;
    if (h < hi) hi = h;
  }
  if (hi < lo) hi = lo;
  if (lo > nq) lo = nq;
  if (hi > nq) hi = nq;
  if (hi < 0) hi = 0;
  if (lo < 0) lo = 0;
  *ilo = lo;
  *ihi = hi;
}

#endif
