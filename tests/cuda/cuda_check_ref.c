/*
 * cuda_check_ref.c — the float64 CPU reference bs_cuda_check compares the CUDA
 * kernels with: the mask written out position by position, the forward (O and
 * lse) and the backward (dQ, dK, dV added into initial values).
 */
#include <math.h>
#include <stdlib.h>
#include "tests/cuda/cuda_check.h"

static int ref_visible(const attn_mask *m, int64_t i, int64_t j) {
  int64_t qp = m->q_pos0 + i * m->q_stride, kp = m->k_pos0 + j * m->k_stride;
  if (m->causal && kp > qp) return 0;
  if (m->window > 0) {
    int64_t dist = m->causal ? qp - kp : (qp > kp ? qp - kp : kp - qp);
    if (dist >= m->window) return 0;
  }
  return 1;
}

/* O [B,Zq,Nq,d] and lse [B,Zq,Nq] in double. */
void ref_fwd(const attn_params *p, const float *q, const float *k, const float *v, double *o, double *lse) {
  const int d = p->d, grp = p->Zq / p->Zkv;
  double *s = malloc((size_t)p->Nk * sizeof(double));
  for (int b = 0; b < p->B; b++)
    for (int h = 0; h < p->Zq; h++) {
      const size_t kvo = ((size_t)b * p->Zkv + h / grp) * (size_t)p->Nk * d;
      for (int64_t i = 0; i < p->Nq; i++) {
        const size_t row = ((size_t)b * p->Zq + h) * (size_t)p->Nq + (size_t)i;
        const float *qr = q + row * d;
        double mx = -INFINITY;
        for (int64_t j = 0; j < p->Nk; j++) {
          if (!ref_visible(&p->mask, i, j)) {
            s[j] = -INFINITY;
            continue;
          }
          const float *kr = k + kvo + (size_t)j * d;
          double acc = 0.0;
          for (int c = 0; c < d; c++) acc += (double)qr[c] * (double)kr[c];
          s[j] = acc * (double)p->scale;
          if (s[j] > mx) mx = s[j];
        }
        double *orow = o + row * d;
        for (int c = 0; c < d; c++) orow[c] = 0.0;
        if (mx == -INFINITY) {
          lse[row] = -INFINITY;
          continue;
        }
        double l = 0.0;
        for (int64_t j = 0; j < p->Nk; j++) {
          if (s[j] == -INFINITY) continue;
          double pj = exp(s[j] - mx);
          l += pj;
          const float *vr = v + kvo + (size_t)j * d;
          for (int c = 0; c < d; c++) orow[c] += pj * (double)vr[c];
        }
        for (int c = 0; c < d; c++) orow[c] /= l;
        lse[row] = mx + log(l);
      }
    }
  free(s);
}

/* Gradients (added into dq, dk, dv, which hold the initial values) given the
 * full forward's lse and O. */
void ref_bwd(const attn_params *p, const float *q, const float *k, const float *v, const float *dout, const double *o,
             const double *lse, double *dq, double *dk, double *dv) {
  const int d = p->d, grp = p->Zq / p->Zkv;
  for (int b = 0; b < p->B; b++)
    for (int h = 0; h < p->Zq; h++) {
      const size_t kvo = ((size_t)b * p->Zkv + h / grp) * (size_t)p->Nk * d;
      for (int64_t i = 0; i < p->Nq; i++) {
        const size_t row = ((size_t)b * p->Zq + h) * (size_t)p->Nq + (size_t)i;
        if (lse[row] == -INFINITY) continue;
        const float *qr = q + row * d, *gr = dout + row * d;
        double D = 0.0;
        for (int c = 0; c < d; c++) D += (double)gr[c] * o[row * d + c];
        for (int64_t j = 0; j < p->Nk; j++) {
          if (!ref_visible(&p->mask, i, j)) continue;
          const float *kr = k + kvo + (size_t)j * d, *vr = v + kvo + (size_t)j * d;
          double s = 0.0, dp = 0.0;
          for (int c = 0; c < d; c++) {
            s += (double)qr[c] * (double)kr[c];
            dp += (double)gr[c] * (double)vr[c];
          }
          double pj = exp(s * (double)p->scale - lse[row]);
          double ds = pj * (dp - D) * (double)p->scale;
          for (int c = 0; c < d; c++) {
            dq[row * d + c] += ds * (double)kr[c];
            dk[kvo + (size_t)j * d + c] += ds * (double)qr[c];
            dv[kvo + (size_t)j * d + c] += pj * (double)gr[c];
          }
        }
      }
    }
}
