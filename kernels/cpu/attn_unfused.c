/*
 * attn_unfused.c — attention with the score block materialised: S = Q K^T by
 * OpenBLAS sgemm, a vectorised softmax over each row, then O = P V by sgemm.
 * It is the "without LAO" / Li-2021 baseline and the memory counter-example
 * (O(Nq Nk) workspace), so it is written to be a fair rival: big sgemm calls,
 * no scalar expf.
 *
 * Forward: the query rows of each head are split into one slab per thread and
 * each thread calls a single-threaded sgemm on its slab (OpenBLAS is set to
 * one thread for the call and restored after). Backward: heads one after the
 * other, each GEMM by OpenBLAS on all threads, element-wise parts by OpenMP.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include "kernels/cpu/attn_internal.h"

/* fp32 copies of q, k, v for one head when the storage is bf16. */
static size_t conv_floats(const attn_params *p) {
  return p->dtype == ATTN_BF16 ? (size_t)(p->Nq + p->Nk) * p->d + (size_t)p->Nk * attn_dv(p) : 0;
}

size_t attn_unfused_workspace_bytes(const attn_params *p) {
  if (attn_check(p)) return 0;
  size_t f = (size_t)p->Nq * p->Nk + (size_t)p->Nq * attn_dv(p) + (size_t)p->Nq + conv_floats(p);
  return f * sizeof(float);
}

size_t attn_unfused_bwd_workspace_bytes(const attn_params *p) {
  if (attn_check(p)) return 0;
  size_t f = 2 * (size_t)p->Nq * p->Nk + conv_floats(p) + (size_t)p->Nq * attn_dv(p) + (size_t)p->B * p->Zq * p->Nq;
  return f * sizeof(float);
}

/* Points *qf, *kf, *vf at fp32 data of head (b, hq), converting bf16 into conv. */
static void head_f32(const attn_params *p, const void *q, const void *k, const void *v, int b, int hq, float *conv,
                     const float **qf, const float **kf, const float **vf) {
  int hkv = hq / (p->Zq / p->Zkv);
  size_t qoff = ((size_t)b * p->Zq + hq) * p->Nq * p->d;
  size_t koff = ((size_t)b * p->Zkv + hkv) * p->Nk * p->d;
  size_t voff = ((size_t)b * p->Zkv + hkv) * p->Nk * attn_dv(p);
  if (p->dtype == ATTN_FP32) {
    *qf = (const float *)q + qoff;
    *kf = (const float *)k + koff;
    *vf = (const float *)v + voff;
    return;
  }
  float *cq = conv, *ck = cq + (size_t)p->Nq * p->d, *cv = ck + (size_t)p->Nk * p->d;
  attn_load_f32(cq, q, p->dtype, qoff, (size_t)p->Nq * p->d);
  attn_load_f32(ck, k, p->dtype, koff, (size_t)p->Nk * p->d);
  attn_load_f32(cv, v, p->dtype, voff, (size_t)p->Nk * attn_dv(p));
  *qf = cq;
  *kf = ck;
  *vf = cv;
}

/* Masks row i of a score block (base-2 scores) to -inf where not visible. */
static void mask_row(const attn_params *p, int64_t i, float *srow) {
  int64_t qp = p->mask.q_pos0 + i * p->mask.q_stride, lo, hi;
  attn_mask_visible_run(&p->mask, qp, 0, p->Nk, &lo, &hi);
  if (lo > hi) lo = p->Nk, hi = p->Nk - 1;
  for (int64_t j = 0; j < lo && j < p->Nk; j++) srow[j] = -INFINITY;
  for (int64_t j = hi + 1 > 0 ? hi + 1 : 0; j < p->Nk; j++) srow[j] = -INFINITY;
}

int attn_fwd_unfused(const attn_params *p, const void *q, const void *k, const void *v, float *o, float *lse,
                     int accumulate, float *workspace) {
  const void *bufs[] = {q, k, v, o, lse};
  int err = attn_check_bufs(p, 5, bufs);
  if (err) return err;
  float *ws = workspace;
  if (!ws) ws = malloc(attn_unfused_workspace_bytes(p));
  if (!ws) return ATTN_ENOMEM;
  const int d = p->d, dv = attn_dv(p), nt = attn_threads(p);
  const int64_t Nq = p->Nq, Nk = p->Nk;
  float *s = ws, *otmp = s + (size_t)Nq * Nk, *ltmp = otmp + (size_t)Nq * dv;
  float *conv = ltmp + Nq;
  const int64_t slab = (Nq + nt - 1) / nt;
  const float qscale = p->scale * ATTN_LOG2E;
  int blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);

  for (int b = 0; b < p->B; b++) {
    for (int hq = 0; hq < p->Zq; hq++) {
      const float *qf, *kf, *vf;
      head_f32(p, q, k, v, b, hq, conv, &qf, &kf, &vf);
      size_t row0 = ((size_t)b * p->Zq + hq) * Nq;
#pragma omp parallel for num_threads(nt) schedule(static, 1)
      for (int th = 0; th < nt; th++) {
        int64_t i0 = th * slab, ni = Nq - i0 < slab ? Nq - i0 : slab;
        if (ni <= 0) continue;
        float *sb = s + (size_t)i0 * Nk;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ni, (int)Nk, d, qscale, qf + (size_t)i0 * d, d, kf, d,
                    0.0f, sb, (int)Nk);
        for (int64_t i = 0; i < ni; i++) {
          mask_row(p, i0 + i, sb + (size_t)i * Nk);
          ltmp[i0 + i] = attn_softmax_row_exp2(sb + (size_t)i * Nk, Nk);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)ni, dv, (int)Nk, 1.0f, sb, (int)Nk, vf, dv, 0.0f,
                    otmp + (size_t)i0 * dv, dv);
        for (int64_t i = 0; i < ni; i++) {
          size_t r = row0 + i0 + i;
          float *orow = otmp + (size_t)(i0 + i) * dv;
          float l = ltmp[i0 + i];
          if (accumulate) {
            attn_merge_row(dv, o + r * dv, lse + r, orow, l);
          } else {
            memcpy(o + r * dv, orow, (size_t)dv * sizeof(float));
            lse[r] = l;
          }
        }
      }
    }
  }
  openblas_set_num_threads(blas_threads);
  if (!workspace) free(ws);
  return ATTN_OK;
}

int attn_bwd_unfused(const attn_params *p, const void *q, const void *k, const void *v, const float *o,
                     const void *dout, const float *lse, const float *delta, float *dq, float *dk, float *dv_out,
                     float *workspace) {
  const void *bufs[] = {q, k, v, dout, lse, dq, dk, dv_out};
  int err = attn_check_bufs(p, 8, bufs);
  if (err) return err;
  if (!delta && !o) return ATTN_ENULL;
  float *ws = workspace;
  if (!ws) ws = malloc(attn_unfused_bwd_workspace_bytes(p));
  if (!ws) return ATTN_ENOMEM;
  const int d = p->d, dv = attn_dv(p), nt = attn_threads(p);
  const int64_t Nq = p->Nq, Nk = p->Nk;
  float *pm = ws, *ds = pm + (size_t)Nq * Nk, *conv = ds + (size_t)Nq * Nk;
  float *gconv = conv + conv_floats(p), *dl = gconv + (size_t)Nq * dv;
  if (!delta) {
    err = attn_delta(p, o, dout, dl);
    if (err) {
      if (!workspace) free(ws);
      return err;
    }
    delta = dl;
  }
  /* OpenBLAS runs single-threaded inside our OpenMP threads, each on its own slab of
   * output rows: its own thread pool would spin beside the OpenMP threads between calls
   * and halve both (measured: 3-8 GFLOP/s causal with both pools on 2 cores). */
  int blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  const float scale = p->scale;
  const int64_t qslab = (Nq + nt - 1) / nt, kslab = (Nk + nt - 1) / nt;
  for (int b = 0; b < p->B; b++) {
    for (int hq = 0; hq < p->Zq; hq++) {
      int hkv = hq / (p->Zq / p->Zkv);
      const float *qf, *kf, *vf, *gf;
      head_f32(p, q, k, v, b, hq, conv, &qf, &kf, &vf);
      size_t row0 = ((size_t)b * p->Zq + hq) * Nq;
      size_t koff = ((size_t)b * p->Zkv + hkv) * Nk * d, voff = ((size_t)b * p->Zkv + hkv) * Nk * dv;
      if (p->dtype == ATTN_FP32) {
        gf = (const float *)dout + row0 * dv;
      } else {
        attn_load_f32(gconv, dout, p->dtype, row0 * dv, (size_t)Nq * dv);
        gf = gconv;
      }
#pragma omp parallel num_threads(nt)
      {
        int th = omp_get_thread_num();
        /* Rows i0 .. i0+ni of P = softmax(S) and dS = P * (dP - D) * scale, then dQ = dS K. */
        int64_t i0 = th * qslab, ni = Nq - i0 < qslab ? Nq - i0 : qslab;
        if (ni > 0) {
          float *pm_i = pm + (size_t)i0 * Nk, *ds_i = ds + (size_t)i0 * Nk;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ni, (int)Nk, d, 1.0f, qf + (size_t)i0 * d, d, kf, d,
                      0.0f, pm_i, (int)Nk);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ni, (int)Nk, dv, 1.0f, gf + (size_t)i0 * dv, dv, vf,
                      dv, 0.0f, ds_i, (int)Nk);
          for (int64_t i = i0; i < i0 + ni; i++) {
            float *prow = pm + (size_t)i * Nk, *drow = ds + (size_t)i * Nk;
            float li = lse[row0 + i], di = delta[row0 + i];
            if (li == -INFINITY) {
              memset(prow, 0, (size_t)Nk * sizeof(float));
              memset(drow, 0, (size_t)Nk * sizeof(float));
              continue;
            }
            for (int64_t j = 0; j < Nk; j++) prow[j] = (prow[j] * scale - li) * ATTN_LOG2E;
            mask_row(p, i, prow);
            attn_exp2_row(prow, Nk);
            for (int64_t j = 0; j < Nk; j++) drow[j] = prow[j] * (drow[j] - di) * scale;
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)ni, d, (int)Nk, 1.0f, ds_i, (int)Nk, kf, d, 1.0f,
                      dq + (row0 + i0) * d, d);
        }
#pragma omp barrier
        /* Rows j0 .. j0+nj of dV = P^T dO and dK = dS^T Q. */
        int64_t j0 = th * kslab, nj = Nk - j0 < kslab ? Nk - j0 : kslab;
        if (nj > 0) {
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nj, dv, (int)Nq, 1.0f, pm + j0, (int)Nk, gf, dv,
                      1.0f, dv_out + voff + (size_t)j0 * dv, dv);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nj, d, (int)Nq, 1.0f, ds + j0, (int)Nk, qf, d, 1.0f,
                      dk + koff + (size_t)j0 * d, d);
        }
      }
    }
  }
  openblas_set_num_threads(blas_threads);
  if (!workspace) free(ws);
  return ATTN_OK;
}
