/*
 * attn_api.c — the small, shape-independent parts of the CPU attention API:
 * parameter defaults and validation, error strings, bf16 conversion, merging
 * two partial (O, lse), delta = rowsum(dO * O), and the run-time choice of the
 * code path from the CPU's features.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cpu/attn_internal.h"

attn_params attn_params_make(int B, int Zq, int Zkv, int64_t Nq, int64_t Nk, int d) {
  attn_params p;
  memset(&p, 0, sizeof p);
  p.B = B;
  p.Zq = Zq;
  p.Zkv = Zkv;
  p.Nq = Nq;
  p.Nk = Nk;
  p.d = d;
  p.dv = d;
  p.scale = d > 0 ? 1.0f / sqrtf((float)d) : 1.0f;
  p.mask.q_pos0 = 0;
  p.mask.q_stride = 1;
  p.mask.k_pos0 = 0;
  p.mask.k_stride = 1;
  p.mask.causal = 0;
  p.mask.window = 0;
  p.dtype = ATTN_FP32;
  p.tile_q = 0;
  p.tile_k = 0;
  p.threads = 0;
  return p;
}

/* Largest element count of any tensor must fit comfortably in int64/size_t. */
static int sizes_overflow(const attn_params *p) {
  const double lim = 9.0e15;
  double rq = (double)p->B * p->Zq * (double)p->Nq * p->d;
  double rk = (double)p->B * p->Zkv * (double)p->Nk * p->d;
  double ro = (double)p->B * p->Zq * (double)p->Nq * attn_dv(p);
  double rv = (double)p->B * p->Zkv * (double)p->Nk * attn_dv(p);
  return rq > lim || rk > lim || ro > lim || rv > lim;
}

int attn_check_msg(const attn_params *p, char *msg, size_t len) {
  const char *why = NULL;
  int err = ATTN_OK;
  if (!p) {
    why = "params is NULL";
    err = ATTN_ENULL;
  } else if (p->B <= 0 || p->Zq <= 0 || p->Zkv <= 0) {
    why = "B, Zq and Zkv must be positive";
    err = ATTN_EINVAL;
  } else if (p->Nq <= 0 || p->Nk <= 0) {
    why = "Nq and Nk must be positive";
    err = ATTN_EINVAL;
  } else if (p->d <= 0) {
    why = "head dimension d must be positive";
    err = ATTN_EINVAL;
  } else if (p->dv < 0) {
    why = "head dimension dv must be positive (0: dv = d)";
    err = ATTN_EINVAL;
  } else if (p->Zq % p->Zkv != 0) {
    why = "Zq must be a multiple of Zkv (GQA)";
    err = ATTN_EINVAL;
  } else if (!isfinite(p->scale)) {
    why = "scale must be finite";
    err = ATTN_EINVAL;
  } else if (p->mask.q_stride <= 0 || p->mask.k_stride <= 0) {
    why = "mask strides must be >= 1";
    err = ATTN_EINVAL;
  } else if (p->mask.window < 0) {
    why = "mask window must be >= 0";
    err = ATTN_EINVAL;
  } else if (p->mask.docs < 0 || (p->mask.docs > 0 && !p->mask.doc_end)) {
    why = "mask documents: docs must be >= 0 with a doc_end table";
    err = ATTN_EINVAL;
  } else if (p->tile_q < 0 || p->tile_k < 0 || p->threads < 0) {
    why = "tile sizes and threads must be >= 0";
    err = ATTN_EINVAL;
  } else if (p->dtype != ATTN_FP32 && p->dtype != ATTN_BF16) {
    why = "dtype must be ATTN_FP32 or ATTN_BF16";
    err = ATTN_EDTYPE;
  } else if (sizes_overflow(p)) {
    why = "tensor sizes overflow";
    err = ATTN_EINVAL;
  }
  if (msg && len) snprintf(msg, len, "%s", why ? why : "ok");
  return err;
}

int attn_check(const attn_params *p) { return attn_check_msg(p, NULL, 0); }

int attn_check_bufs(const attn_params *p, int nbufs, const void *const *bufs) {
  int err = attn_check(p);
  if (err) return err;
  for (int i = 0; i < nbufs; i++)
    if (!bufs[i]) return ATTN_ENULL;
  return ATTN_OK;
}

const char *attn_strerror(int err) {
  switch (err) {
  case ATTN_OK: return "success";
  case ATTN_EINVAL: return "invalid attention parameters (a size <= 0, Zq % Zkv != 0, or a bad mask)";
  case ATTN_ENULL: return "a required buffer is NULL";
  case ATTN_ENOMEM: return "attention workspace allocation failed";
  case ATTN_EDTYPE: return "storage type not supported by this backend";
  default: return "unknown attention error";
  }
}

uint16_t attn_f32_to_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float attn_bf16_to_f32(uint16_t x) {
  uint32_t u = (uint32_t)x << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

void attn_merge_row(int d, float *o, float *lse, const float *o2, float lse2) {
  float l1 = *lse;
  if (lse2 == -INFINITY) return;
  if (l1 == -INFINITY) {
    memcpy(o, o2, (size_t)d * sizeof(float));
    *lse = lse2;
    return;
  }
  float m = l1 > lse2 ? l1 : lse2;
  float w1 = expf(l1 - m), w2 = expf(lse2 - m);
  float s = w1 + w2;
  float a = w1 / s, c = w2 / s;
  for (int i = 0; i < d; i++) o[i] = a * o[i] + c * o2[i];
  *lse = m + logf(s);
}

int attn_merge(int64_t rows, int d, float *o, float *lse, const float *o2, const float *lse2) {
  if (rows <= 0 || d <= 0) return ATTN_EINVAL;
  if (!o || !lse || !o2 || !lse2) return ATTN_ENULL;
  for (int64_t r = 0; r < rows; r++) attn_merge_row(d, o + (size_t)r * d, lse + r, o2 + (size_t)r * d, lse2[r]);
  return ATTN_OK;
}

int attn_delta(const attn_params *p, const float *o, const void *dout, float *delta) {
  const void *bufs[] = {o, dout, delta};
  int err = attn_check_bufs(p, 3, bufs);
  if (err) return err;
  int64_t rows = (int64_t)p->B * p->Zq * p->Nq;
  int d = attn_dv(p);
  int nt = attn_threads(p);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *orow = o + (size_t)r * d;
    float acc = 0.0f;
    if (p->dtype == ATTN_FP32) {
      const float *g = (const float *)dout + (size_t)r * d;
      for (int c = 0; c < d; c++) acc += g[c] * orow[c];
    } else {
      const uint16_t *g = (const uint16_t *)dout + (size_t)r * d;
      for (int c = 0; c < d; c++) acc += attn_bf16_to_f32(g[c]) * orow[c];
    }
    delta[r] = acc;
  }
  return ATTN_OK;
}

int attn_threads(const attn_params *p) {
  int n = p && p->threads > 0 ? p->threads : omp_get_max_threads();
  return n > 0 ? n : 1;
}

/*
 * The fastest path this CPU runs; BURSTSIM_ATTN_VARIANT=scalar|avx2|avx512 asks for a
 * path (for tests and comparisons), granted only if the CPU has it.
 */
const attn_variant *attn_pick_variant(void) {
  const char *force = getenv("BURSTSIM_ATTN_VARIANT");
  if (force && !strcmp(force, "scalar")) return &attn_variant_scalar;
#if defined(__x86_64__)
  __builtin_cpu_init();
  int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (avx512 && !(force && !strcmp(force, "avx2"))) return &attn_variant_avx512;
  if (avx2) return &attn_variant_avx2;
#endif
  return &attn_variant_scalar;
}

/* The vector paths hold one head dimension for q, k and v; a call whose v is narrower or wider
 * (multi-head latent attention) takes the scalar path. */
const attn_variant *attn_pick_variant_for(const attn_params *p) {
  return attn_dv(p) != p->d ? &attn_variant_scalar : attn_pick_variant();
}

const char *attn_cpu_variant(void) { return attn_pick_variant()->name; }
