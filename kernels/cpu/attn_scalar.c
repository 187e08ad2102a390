/*
 * attn_scalar.c — the portable block kernels in plain C: the path taken on
 * CPUs without AVX2+FMA, and the readable statement of what the vector paths
 * compute (online softmax forward, FlashAttention-2 backward per key tile).
 */
#include <math.h>
#include "kernels/cpu/attn_internal.h"

static size_t scalar_fwd_ws(const attn_params *p, attn_tiles t) {
  return (size_t)t.tq * p->d + (size_t)t.tk * p->d + (size_t)t.tk * attn_dv(p) + (size_t)t.tq * t.tk + 2 * (size_t)t.tq;
}

static void scalar_fwd_block(const attn_params *p, attn_tiles t, const void *q, const void *k, const void *v, int b,
                             int hq, int64_t i0, int64_t ni, int64_t j0, int64_t nj, float *o_part, float *lse_part,
                             float *ws) {
  const int d = p->d, dv = attn_dv(p);
  const int hkv = hq / (p->Zq / p->Zkv);
  const size_t qoff = (((size_t)b * p->Zq + hq) * p->Nq + i0) * d;
  const size_t kbase = ((size_t)b * p->Zkv + hkv) * p->Nk;
  float *qt = ws, *kt = qt + (size_t)t.tq * d, *vt = kt + (size_t)t.tk * d;
  float *s = vt + (size_t)t.tk * dv, *m = s + (size_t)t.tq * t.tk, *l = m + t.tq;
  const float qscale = p->scale * ATTN_LOG2E;

  attn_load_f32(qt, q, p->dtype, qoff, (size_t)ni * d);
  for (size_t e = 0; e < (size_t)ni * d; e++) qt[e] *= qscale;
  memset(o_part, 0, (size_t)ni * dv * sizeof(float));
  for (int64_t i = 0; i < ni; i++) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  for (int64_t jt = j0; jt < j0 + nj; jt += t.tk) {
    int64_t nk = j0 + nj - jt < t.tk ? j0 + nj - jt : t.tk;
    int cls = attn_mask_tile_class(&p->mask, i0, ni, jt, nk);
    if (cls == ATTN_TILE_NONE) continue;
    attn_load_f32(kt, k, p->dtype, (kbase + jt) * d, (size_t)nk * d);
    attn_load_f32(vt, v, p->dtype, (kbase + jt) * dv, (size_t)nk * dv);
    for (int64_t i = 0; i < ni; i++) {
      float *srow = s + i * t.tk;
      float mx = -INFINITY;
      int64_t qp = p->mask.q_pos0 + (i0 + i) * p->mask.q_stride;
      for (int64_t j = 0; j < nk; j++) {
        float acc = 0.0f;
        for (int c = 0; c < d; c++) acc += qt[i * d + c] * kt[j * d + c];
        if (cls == ATTN_TILE_PARTIAL && !attn_mask_visible(&p->mask, qp, p->mask.k_pos0 + (jt + j) * p->mask.k_stride))
          acc = -INFINITY;
        srow[j] = acc;
        if (acc > mx) mx = acc;
      }
      float mnew = mx > m[i] ? mx : m[i];
      if (mnew == -INFINITY) continue;
      float alpha = exp2f(m[i] - mnew);
      float *orow = o_part + i * dv;
      for (int c = 0; c < dv; c++) orow[c] *= alpha;
      float sum = 0.0f;
      for (int64_t j = 0; j < nk; j++) {
        float pij = exp2f(srow[j] - mnew);
        sum += pij;
        for (int c = 0; c < dv; c++) orow[c] += pij * vt[j * dv + c];
      }
      l[i] = l[i] * alpha + sum;
      m[i] = mnew;
    }
  }
  for (int64_t i = 0; i < ni; i++) {
    float *orow = o_part + i * dv;
    if (l[i] > 0.0f) {
      float inv = 1.0f / l[i];
      for (int c = 0; c < dv; c++) orow[c] *= inv;
      lse_part[i] = (m[i] + log2f(l[i])) * ATTN_LN2;
    } else {
      memset(orow, 0, (size_t)dv * sizeof(float));
      lse_part[i] = -INFINITY;
    }
  }
}

static size_t scalar_bwd_ws(const attn_params *p, attn_tiles t) {
  const size_t d = (size_t)p->d, dv = (size_t)attn_dv(p);
  return (size_t)t.tk * (2 * d + 2 * dv) + (size_t)t.tq * (d + dv);
}

static void scalar_bwd_block(const attn_params *p, attn_tiles t, const void *q, const void *k, const void *v,
                             const void *dout, const float *lse, const float *delta, int b, int hkv, int64_t j0,
                             int64_t nj, float *dq_base, float *dk, float *dv_out, float *ws) {
  const int d = p->d, dv = attn_dv(p), group = p->Zq / p->Zkv;
  const size_t kbase = ((size_t)b * p->Zkv + hkv) * p->Nk;
  float *kt = ws, *vt = kt + (size_t)t.tk * d, *dka = vt + (size_t)t.tk * dv;
  float *dva = dka + (size_t)t.tk * d, *qt = dva + (size_t)t.tk * dv, *gt = qt + (size_t)t.tq * d;
  const float scale = p->scale;

  for (int64_t jt = j0; jt < j0 + nj; jt += t.tk) {
    int64_t nk = j0 + nj - jt < t.tk ? j0 + nj - jt : t.tk;
    attn_load_f32(kt, k, p->dtype, (kbase + jt) * d, (size_t)nk * d);
    attn_load_f32(vt, v, p->dtype, (kbase + jt) * dv, (size_t)nk * dv);
    memset(dka, 0, (size_t)nk * d * sizeof(float));
    memset(dva, 0, (size_t)nk * dv * sizeof(float));
    for (int g = 0; g < group; g++) {
      int hq = hkv * group + g;
      size_t rbase = ((size_t)b * p->Zq + hq) * p->Nq;
      for (int64_t it = 0; it < p->Nq; it += t.tq) {
        int64_t ni = p->Nq - it < t.tq ? p->Nq - it : t.tq;
        int cls = attn_mask_tile_class(&p->mask, it, ni, jt, nk);
        if (cls == ATTN_TILE_NONE) continue;
        attn_load_f32(qt, q, p->dtype, (rbase + it) * d, (size_t)ni * d);
        attn_load_f32(gt, dout, p->dtype, (rbase + it) * dv, (size_t)ni * dv);
        for (int64_t i = 0; i < ni; i++) {
          float li = lse[rbase + it + i], di = delta[rbase + it + i];
          if (li == -INFINITY) continue;
          int64_t qp = p->mask.q_pos0 + (it + i) * p->mask.q_stride;
          float *dqrow = dq_base + (rbase + it + i) * d;
          const float *qi = qt + i * d, *gi = gt + i * dv;
          for (int64_t j = 0; j < nk; j++) {
            if (cls == ATTN_TILE_PARTIAL &&
                !attn_mask_visible(&p->mask, qp, p->mask.k_pos0 + (jt + j) * p->mask.k_stride))
              continue;
            const float *kj = kt + j * d, *vj = vt + j * dv;
            float s = 0.0f, dp = 0.0f;
            for (int c = 0; c < d; c++) s += qi[c] * kj[c];
            for (int c = 0; c < dv; c++) dp += gi[c] * vj[c];
            float pij = expf(s * scale - li);
            float ds = pij * (dp - di) * scale;
            float *dkj = dka + j * d, *dvj = dva + j * dv;
            for (int c = 0; c < dv; c++) dvj[c] += pij * gi[c];
            for (int c = 0; c < d; c++) {
              dkj[c] += ds * qi[c];
              dqrow[c] += ds * kj[c];
            }
          }
        }
      }
    }
    float *dkd = dk + (kbase + jt) * d, *dvd = dv_out + (kbase + jt) * dv;
    for (size_t e = 0; e < (size_t)nk * d; e++) dkd[e] += dka[e];
    for (size_t e = 0; e < (size_t)nk * dv; e++) dvd[e] += dva[e];
  }
}

const attn_variant attn_variant_scalar = {
  .name = "scalar",
  .fwd = {32, 64},
  .bwd = {32, 64},
  .fwd_block = scalar_fwd_block,
  .bwd_block = scalar_bwd_block,
  .fwd_ws_floats = scalar_fwd_ws,
  .bwd_ws_floats = scalar_bwd_ws,
};
