/*
 * attn.h — the attention kernel API every backend implements (kernels/cpu now,
 * kernels/cuda later). Plans name these kernels; the runtime calls them; the
 * calibration times them. Nothing here knows about ranks, rings or SimGrid.
 *
 * Layout: Q is [B, Zq, Nq, d], K is [B, Zkv, Nk, d] and V is [B, Zkv, Nk, dv],
 * row-major, densely packed. O and dout are [B, Zq, Nq, dv] and lse is
 * [B, Zq, Nq], O and lse fp32. Gradients dq, dk, dv are fp32 and are
 * ACCUMULATED into (a ring step adds into a visiting dQ and into the local dK,
 * dV). Query head h reads key/value head h / (Zq/Zkv). dv differs from d in
 * multi-head latent attention (DeepSeek-V2, arXiv 2405.04434: QK over 192
 * dimensions, V over 128); dv = 0 means dv = d.
 */
#ifndef BURSTSIM_ATTN_H
#define BURSTSIM_ATTN_H

#include <stddef.h>
#include <stdint.h>
#include "mask.h"

typedef enum { ATTN_FP32 = 0, ATTN_BF16 = 1 } attn_dtype;

/* Error codes (0 = success). */
enum {
  ATTN_OK = 0,
  ATTN_EINVAL = -1, /* a size is zero or negative, or Zq % Zkv != 0 */
  ATTN_ENULL = -2,  /* a required buffer is NULL */
  ATTN_ENOMEM = -3, /* workspace allocation failed */
  ATTN_EDTYPE = -4  /* storage type not supported by this backend */
};

/* attn_mask: which (query, key) pairs a call sees, from global token
 * positions; mask.h holds it with the geometry every backend and the plans use. */

typedef struct {
  int B, Zq, Zkv; /* batch, query heads, key/value heads */
  int64_t Nq, Nk; /* rows of the query block and of the key block */
  int d;          /* head dimension of q and k */
  int dv;         /* head dimension of v, o and dout; 0 = d */
  float scale;    /* softmax scale, usually 1/sqrt(d) */
  attn_mask mask;
  attn_dtype dtype;   /* storage of q, k, v and dout */
  int tile_q, tile_k; /* tile sizes; 0 = backend default */
  int threads;        /* 0 = all cores */
} attn_params;

/* The head dimension of v, o and dout. */
static inline int attn_dv(const attn_params *p) { return p->dv > 0 ? p->dv : p->d; }

/* A full (unmasked) mask over contiguous blocks, and a default-filled params (dv = d). */
attn_params attn_params_make(int B, int Zq, int Zkv, int64_t Nq, int64_t Nk, int d);

/* Validates p (and the non-NULL-ness of buffers is checked by each call). */
int attn_check(const attn_params *p);
/* Same as attn_check, and writes a one-line reason ("ok" when valid) to msg. */
int attn_check_msg(const attn_params *p, char *msg, size_t len);
const char *attn_strerror(int err);

/*
 * Forward. accumulate = 0: O, lse are overwritten. accumulate = 1: (O, lse)
 * hold a running normalised result (from earlier key blocks) that this block
 * is merged into by online softmax. A row with no visible key gets lse = -inf
 * and O = 0 (never NaN). Few query rows against many keys are split over
 * threads along the keys and merged by lse (Flash-Decoding).
 */
int attn_fwd(const attn_params *p, const void *q, const void *k, const void *v, float *o, float *lse, int accumulate);

/*
 * Forward without tiling: materialises the Nq x Nk score block per head with
 * OpenBLAS sgemm (the "without LAO" / Li-2021 baseline). workspace: at least
 * attn_unfused_workspace_bytes(p) bytes, or NULL to allocate internally.
 */
size_t attn_unfused_workspace_bytes(const attn_params *p);
int attn_fwd_unfused(const attn_params *p, const void *q, const void *k, const void *v, float *o, float *lse,
                     int accumulate, float *workspace);

/* delta[row] = sum_j dout[row, j] * o[row, j] over B*Zq*Nq rows. */
int attn_delta(const attn_params *p, const float *o, const void *dout, float *delta);

/*
 * Backward of one (query block, key block) pair. Needs lse of the FULL forward
 * (over all key blocks) and either delta (= attn_delta of the final O) or o
 * (then delta is computed here; pass delta = NULL). Adds into dq, dk, dv.
 */
int attn_bwd(const attn_params *p, const void *q, const void *k, const void *v, const float *o, const void *dout,
             const float *lse, const float *delta, float *dq, float *dk, float *dv);

/* Backward with the score block materialised (baseline). Same contract;
 * workspace: at least attn_unfused_bwd_workspace_bytes(p) bytes, or NULL. */
size_t attn_unfused_bwd_workspace_bytes(const attn_params *p);
int attn_bwd_unfused(const attn_params *p, const void *q, const void *k, const void *v, const float *o,
                     const void *dout, const float *lse, const float *delta, float *dq, float *dk, float *dv,
                     float *workspace);

/* Merge a partial (o2, lse2) into (o, lse), over `rows` rows of width d. */
int attn_merge(int64_t rows, int d, float *o, float *lse, const float *o2, const float *lse2);

/* bf16 helpers (round to nearest even). */
uint16_t attn_f32_to_bf16(float x);
float attn_bf16_to_f32(uint16_t x);

/* Which CPU code path is in use ("avx512", "avx2", "scalar"). */
const char *attn_cpu_variant(void);

#endif
