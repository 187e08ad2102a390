/*
 * attn_internal.h — what the CPU attention files share and nobody else sees:
 * bf16 row loading, the thread count, and the per-variant block kernels
 * (scalar C, AVX2+FMA, AVX-512) the drivers call.
 *
 * Conventions inside kernels/cpu: scores are kept in base 2 (the softmax scale
 * is multiplied by log2(e) once), so exp becomes exp2; lse leaves in natural
 * log units as attn.h promises.
 */
#ifndef BURSTSIM_ATTN_INTERNAL_H
#define BURSTSIM_ATTN_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "kernels/attn.h"

#define ATTN_LOG2E 1.4426950408889634f
#define ATTN_LN2 0.6931471805599453f

/* The mask geometry (attn_mask_visible, attn_mask_visible_run, attn_mask_tile_class) is kernels/mask.h. */

/* Copies n elements starting at element offset off of src (fp32 or bf16) to fp32 dst. */
static inline void attn_load_f32(float *dst, const void *src, attn_dtype dt, size_t off, size_t n) {
  if (dt == ATTN_FP32) {
    memcpy(dst, (const float *)src + off, n * sizeof(float));
  } else {
    const uint16_t *s = (const uint16_t *)src + off;
    for (size_t i = 0; i < n; i++) {
      uint32_t u = (uint32_t)s[i] << 16;
      memcpy(&dst[i], &u, sizeof u);
    }
  }
}

/*
 * Lane-layout helpers shared by the vector forward kernels (attn_avx2.c with 16
 * query lanes, attn_avx512.c with 32): queries of a sub-block are held
 * transposed, qp[sub-block][c][lane], and so is the running output.
 */

/* Packs rows 0..ni of q (from element qoff) transposed and scaled into qp, lb lanes per
 * sub-block; padding lanes stay 0. row: scratch of d floats. */
static inline void attn_pack_lanes(const attn_params *p, const void *q, size_t qoff, int64_t ni, int lb, float qscale,
                                   float *qp, float *row) {
  const int d = p->d;
  int64_t nsb = (ni + lb - 1) / lb;
  memset(qp, 0, (size_t)nsb * d * lb * sizeof(float));
  for (int64_t i = 0; i < ni; i++) {
    float *dst = qp + (i / lb) * d * lb + (i % lb);
    attn_load_f32(row, q, p->dtype, qoff + (size_t)i * d, (size_t)d);
    for (int c = 0; c < d; c++) dst[c * lb] = row[c] * qscale;
  }
}

/* Writes the finished rows: o = O^T / l (lanes back to rows), lse = (m + log2 l) ln 2, and
 * -inf with O = 0 for rows that saw no visible key. */
static inline void attn_unpack_lanes(int d, int64_t ni, int lb, const float *ot, const float *m, const float *l,
                                     float *o_part, float *lse_part) {
  for (int64_t i = 0; i < ni; i++) {
    const float *oi = ot + (i / lb) * d * lb + (i % lb);
    float *orow = o_part + i * d;
    if (l[i] > 0.0f) {
      float inv = 1.0f / l[i];
      for (int c = 0; c < d; c++) orow[c] = oi[c * lb] * inv;
      lse_part[i] = (m[i] + log2f(l[i])) * ATTN_LN2;
    } else {
      memset(orow, 0, (size_t)d * sizeof(float));
      lse_part[i] = -INFINITY;
    }
  }
}

/* Sub-block sb of nsb pulls its share of the next nn-row K and V tiles (at kn, vn) towards L2. */
static inline void attn_prefetch_share(const float *kn, const float *vn, int64_t nn, int d, int64_t sb, int64_t nsb) {
  size_t bytes = (size_t)nn * d * sizeof(float), share = (bytes + nsb - 1) / nsb;
  for (size_t off = (size_t)sb * share; off < bytes && off < (size_t)(sb + 1) * share; off += 64) {
    __builtin_prefetch((const char *)kn + off, 0, 2);
    __builtin_prefetch((const char *)vn + off, 0, 2);
  }
}

/* Threads to use for p (0 = the OpenMP default, i.e. all cores). */
int attn_threads(const attn_params *p);

/* Effective tile sizes for the variant in use. */
typedef struct {
  int tq, tk;
} attn_tiles;

/*
 * Forward block kernel: query rows [i0, i0+ni) of head (b, hq) against key rows
 * [j0, j0+nj) of kv head (b, hkv). Writes the normalised partial result to
 * o_part (ni x d, row-major) and its lse (natural log; -inf if no key visible).
 * ws: per-thread scratch of attn_fwd_ws_floats(p) floats.
 */
typedef void (*attn_fwd_block_fn)(const attn_params *p, attn_tiles t, const void *q, const void *k, const void *v,
                                  int b, int hq, int64_t i0, int64_t ni, int64_t j0, int64_t nj, float *o_part,
                                  float *lse_part, float *ws);

/*
 * Backward block kernel: key rows [j0, j0+nj) of kv head (b, hkv) against every
 * query row of the heads of its group. Adds into dk, dv (full tensors) and into
 * dq_base (a full-size dq, either the caller's or a per-thread partial).
 * delta is rowsum(dout * o) for all query rows. ws: attn_bwd_ws_floats(p).
 */
typedef void (*attn_bwd_block_fn)(const attn_params *p, attn_tiles t, const void *q, const void *k, const void *v,
                                  const void *dout, const float *lse, const float *delta, int b, int hkv, int64_t j0,
                                  int64_t nj, float *dq_base, float *dk, float *dv, float *ws);

/*
 * Forward of the Nq rows of every query head of kv group (b, hkv) at once
 * (GQA decode): o_part row g * Nq + i is query row i of head hkv * group + g.
 */
typedef void (*attn_fwd_group_fn)(const attn_params *p, attn_tiles t, const void *q, const void *k, const void *v,
                                  int b, int hkv, int64_t j0, int64_t nj, float *o_part, float *lse_part, float *ws);

typedef struct {
  const char *name;
  attn_tiles fwd, bwd;
  attn_fwd_block_fn fwd_block;
  attn_fwd_group_fn fwd_group_block; /* NULL: no grouped decode */
  int64_t group_rows;                /* most rows fwd_group_block takes */
  attn_bwd_block_fn bwd_block;
  size_t (*fwd_ws_floats)(const attn_params *p, attn_tiles t);
  size_t (*bwd_ws_floats)(const attn_params *p, attn_tiles t);
} attn_variant;

/* The variant chosen from the CPU's features (BURSTSIM_ATTN_VARIANT overrides). */
const attn_variant *attn_pick_variant(void);
/* The variant for the call p: the scalar one when v's head dimension differs from q's and k's. */
const attn_variant *attn_pick_variant_for(const attn_params *p);

extern const attn_variant attn_variant_scalar;
#if defined(__x86_64__)
extern const attn_variant attn_variant_avx2;
extern const attn_variant attn_variant_avx512;
#endif

/* Base-2 softmax of a row in place; returns its lse in natural log (-inf, row 0, if all -inf). */
float attn_softmax_row_exp2(float *row, int64_t n);
/* row[j] = 2^row[j] in place (-inf gives 0). */
void attn_exp2_row(float *row, int64_t n);

/* Merges (o2, lse2) into (o, lse) for one row of width d. */
void attn_merge_row(int d, float *o, float *lse, const float *o2, float lse2);

/* Validates p and the buffers the forward / backward need. */
int attn_check_bufs(const attn_params *p, int nbufs, const void *const *bufs);

#endif
