/*
 * fit.c — GSL fits for calibration (models in fit.h): the saturating kernel
 * rate by nonlinear least squares, straight lines by weighted least squares,
 * and the piecewise link model by exhaustive break search. Residuals are
 * relative (each point weighted by 1/t^2) because measured times span
 * several orders of magnitude and every size matters to the simulator.
 */
#include "calib/fit.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest relative miss a link model may have before a further size range is considered. */
#define BS_FIT_SPLIT_RESID 0.05

void bs_fit_quality_of(const double *model, const double *measured, int n, bs_fit_quality *q) {
  memset(q, 0, sizeof *q);
  q->n = n;
  if (n <= 0) return;
  double mean = 0;
  for (int i = 0; i < n; i++) mean += measured[i];
  mean /= n;
  double ss_res = 0, ss_tot = 0, rel2 = 0;
  for (int i = 0; i < n; i++) {
    double r = model[i] - measured[i];
    ss_res += r * r;
    ss_tot += (measured[i] - mean) * (measured[i] - mean);
    double rel = measured[i] != 0 ? fabs(r / measured[i]) : fabs(r);
    rel2 += rel * rel;
    if (rel > q->max_rel_resid) q->max_rel_resid = rel;
  }
  q->r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res == 0 ? 1.0 : 0.0);
  q->rms_rel_resid = sqrt(rel2 / n);
}

/* ------------------------------------------------------------ saturating */

double bs_fit_sat_rate(const bs_fit_sat *f, double x) { return f->rmax * x / (x + f->xh); }

double bs_fit_sat_time(const bs_fit_sat *f, double x, double flops) { return f->t0 + flops / bs_fit_sat_rate(f, x); }

typedef struct {
  const double *x, *flops, *t;
  int n;
} sat_data;

/* Parameters: p0 = ln t0, p1 = ln rmax, p2 = ln xh (all positive by construction). */
static int sat_f(const gsl_vector *p, void *vd, gsl_vector *f) {
  const sat_data *d = vd;
  double t0 = exp(gsl_vector_get(p, 0)), rmax = exp(gsl_vector_get(p, 1)), xh = exp(gsl_vector_get(p, 2));
  for (int i = 0; i < d->n; i++) {
    double m = t0 + d->flops[i] * (d->x[i] + xh) / (rmax * d->x[i]);
    gsl_vector_set(f, (size_t)i, (m - d->t[i]) / d->t[i]);
  }
  return GSL_SUCCESS;
}

static int sat_df(const gsl_vector *p, void *vd, gsl_matrix *J) {
  const sat_data *d = vd;
  double t0 = exp(gsl_vector_get(p, 0)), rmax = exp(gsl_vector_get(p, 1)), xh = exp(gsl_vector_get(p, 2));
  for (int i = 0; i < d->n; i++) {
    double w = 1.0 / d->t[i];
    gsl_matrix_set(J, (size_t)i, 0, t0 * w);
    gsl_matrix_set(J, (size_t)i, 1, -d->flops[i] * (d->x[i] + xh) / (rmax * d->x[i]) * w);
    gsl_matrix_set(J, (size_t)i, 2, d->flops[i] * xh / (rmax * d->x[i]) * w);
  }
  return GSL_SUCCESS;
}

/* Start: the model is linear in (t0, 1/rmax, xh/rmax); solve that by weighted least squares. */
static void sat_start(const sat_data *d, double *t0, double *rmax, double *xh) {
  double best_rate = 0, tmin = d->t[0];
  for (int i = 0; i < d->n; i++) {
    if (d->flops[i] / d->t[i] > best_rate) best_rate = d->flops[i] / d->t[i];
    if (d->t[i] < tmin) tmin = d->t[i];
  }
  *t0 = 0.1 * tmin;
  *rmax = best_rate * 1.2;
  *xh = d->x[d->n / 2] * 0.1;
  gsl_matrix *X = gsl_matrix_alloc((size_t)d->n, 3);
  gsl_vector *y = gsl_vector_alloc((size_t)d->n), *w = gsl_vector_alloc((size_t)d->n), *c = gsl_vector_alloc(3);
  gsl_matrix *cov = gsl_matrix_alloc(3, 3);
  gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc((size_t)d->n, 3);
  if (X && y && w && c && cov && ws) {
    for (int i = 0; i < d->n; i++) {
      gsl_matrix_set(X, (size_t)i, 0, 1.0);
      gsl_matrix_set(X, (size_t)i, 1, d->flops[i]);
      gsl_matrix_set(X, (size_t)i, 2, d->flops[i] / d->x[i]);
      gsl_vector_set(y, (size_t)i, d->t[i]);
      gsl_vector_set(w, (size_t)i, 1.0 / (d->t[i] * d->t[i]));
    }
    double chisq;
    if (gsl_multifit_wlinear(X, w, y, c, cov, &chisq, ws) == GSL_SUCCESS) {
      double c0 = gsl_vector_get(c, 0), c1 = gsl_vector_get(c, 1), c2 = gsl_vector_get(c, 2);
      if (c1 > 0) {
        *rmax = 1.0 / c1;
        if (c2 > 0) *xh = c2 / c1;
        if (c0 > 0) *t0 = c0;
      }
    }
  }
  gsl_multifit_linear_free(ws);
  gsl_matrix_free(cov);
  gsl_vector_free(c);
  gsl_vector_free(w);
  gsl_vector_free(y);
  gsl_matrix_free(X);
  if (!(*t0 > 0)) *t0 = 1e-3 * tmin;
  if (!(*xh > 0)) *xh = 1.0;
}

int bs_fit_saturating(const double *x, const double *flops, const double *t, int n, bs_fit_sat *out, char *err,
                      size_t errlen) {
  memset(out, 0, sizeof *out);
  if (n < 3) {
    snprintf(err, errlen, "saturating fit: %d points, at least 3 needed", n);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (!(x[i] > 0 && flops[i] > 0 && t[i] > 0) || !isfinite(t[i])) {
      snprintf(err, errlen, "saturating fit: point %d: x, flops and time must be positive", i);
      return -1;
    }
  sat_data d = {x, flops, t, n};
  double t0, rmax, xh;
  sat_start(&d, &t0, &rmax, &xh);
  gsl_multifit_nlinear_fdf fdf;
  memset(&fdf, 0, sizeof fdf);
  fdf.f = sat_f;
  fdf.df = sat_df;
  fdf.n = (size_t)n;
  fdf.p = 3;
  fdf.params = &d;
  gsl_multifit_nlinear_parameters prm = gsl_multifit_nlinear_default_parameters();
  gsl_error_handler_t *old = gsl_set_error_handler_off();
  gsl_multifit_nlinear_workspace *w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &prm, (size_t)n, 3);
  gsl_vector *p = gsl_vector_alloc(3);
  int rc = -1;
  if (!w || !p) {
    snprintf(err, errlen, "saturating fit: out of memory");
    goto out;
  }
  gsl_vector_set(p, 0, log(t0));
  gsl_vector_set(p, 1, log(rmax));
  gsl_vector_set(p, 2, log(xh));
  int info = 0;
  int st = gsl_multifit_nlinear_init(p, &fdf, w);
  if (st == GSL_SUCCESS) st = gsl_multifit_nlinear_driver(500, 1e-12, 1e-12, 1e-12, NULL, NULL, &info, w);
  /* GSL_EMAXITER still leaves the best point found; only a broken solve is an error. */
  const gsl_vector *sol = gsl_multifit_nlinear_position(w);
  double a = gsl_vector_get(sol, 0), b = gsl_vector_get(sol, 1), c = gsl_vector_get(sol, 2);
  if (!isfinite(a) || !isfinite(b) || !isfinite(c) || (st != GSL_SUCCESS && st != GSL_EMAXITER)) {
    snprintf(err, errlen, "saturating fit: solver failed (%s)", gsl_strerror(st));
    goto out;
  }
  out->t0 = exp(a);
  out->rmax = exp(b);
  out->xh = exp(c);
  out->iterations = (int)gsl_multifit_nlinear_niter(w);
  out->status = st;
  {
    double *m = malloc((size_t)n * sizeof *m);
    if (!m) {
      snprintf(err, errlen, "saturating fit: out of memory");
      goto out;
    }
    for (int i = 0; i < n; i++) m[i] = bs_fit_sat_time(out, x[i], flops[i]);
    bs_fit_quality_of(m, t, n, &out->q);
    free(m);
  }
  rc = 0;
out:
  gsl_vector_free(p);
  if (w) gsl_multifit_nlinear_free(w);
  gsl_set_error_handler(old);
  return rc;
}

/* ----------------------------------------------------------------- linear */

/* Weighted fit on [lo, hi) without quality (shared by the line and the link fits). */
static int line_fit(const double *u, const double *t, int lo, int hi, double *c0, double *c1, double *chi2) {
  int n = hi - lo;
  double *w = malloc((size_t)n * sizeof *w);
  if (!w) return -1;
  for (int i = 0; i < n; i++) w[i] = 1.0 / (t[lo + i] * t[lo + i]);
  double cov00, cov01, cov11, sumsq;
  int st = n >= 2 ? gsl_fit_wlinear(u + lo, 1, w, 1, t + lo, 1, (size_t)n, c0, c1, &cov00, &cov01, &cov11, &sumsq)
                  : GSL_EINVAL;
  if (st == GSL_SUCCESS && *c0 < 0) {
    /* A negative fixed cost means none is visible: refit through the origin. */
    *c0 = 0;
    st = gsl_fit_wmul(u + lo, 1, w, 1, t + lo, 1, (size_t)n, c1, &cov11, &sumsq);
  }
  if (st == GSL_SUCCESS && !(*c1 > 0)) {
    /* Flat (latency-bound) range: the slope is below what the data resolve. */
    double mean = 0;
    for (int i = lo; i < hi; i++) mean += t[i];
    *c0 = mean / n;
    *c1 = 1e-300;
  }
  free(w);
  if (st != GSL_SUCCESS) return -1;
  double s = 0;
  for (int i = lo; i < hi; i++) {
    double r = (*c0 + *c1 * u[i] - t[i]) / t[i];
    s += r * r;
  }
  *chi2 = s;
  return 0;
}

int bs_fit_linear(const double *u, const double *t, int n, bs_fit_lin *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (n < 2) {
    snprintf(err, errlen, "linear fit: %d points, at least 2 needed", n);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (!(t[i] > 0) || !isfinite(u[i]) || u[i] < 0) {
      snprintf(err, errlen, "linear fit: point %d: time must be positive and work >= 0", i);
      return -1;
    }
  double chi2;
  gsl_error_handler_t *old = gsl_set_error_handler_off();
  int rc = line_fit(u, t, 0, n, &out->c0, &out->c1, &chi2);
  gsl_set_error_handler(old);
  if (rc) {
    snprintf(err, errlen, "linear fit: GSL failed (degenerate points?)");
    return -1;
  }
  double *m = malloc((size_t)n * sizeof *m);
  if (!m) {
    snprintf(err, errlen, "linear fit: out of memory");
    return -1;
  }
  for (int i = 0; i < n; i++) m[i] = out->c0 + out->c1 * u[i];
  bs_fit_quality_of(m, t, n, &out->q);
  free(m);
  return 0;
}

/* ------------------------------------------------------------------- gemm */

double bs_fit_gemm_time(const bs_fit_gemm *f, double t1, double k) {
  return f->launch_s + t1 * (k + f->k_overhead) / (k * f->peak_fraction);
}

/* Weighted fit of t against the columns (1, t1, t1 / k) that `use` keeps; c[] gets all three (0 if dropped). */
static int gemm_solve(const double *t1, const double *k, const double *t, int n, const int use[3], double c[3]) {
  int p = use[0] + use[1] + use[2];
  gsl_matrix *X = gsl_matrix_alloc((size_t)n, (size_t)p), *cov = gsl_matrix_alloc((size_t)p, (size_t)p);
  gsl_vector *y = gsl_vector_alloc((size_t)n), *w = gsl_vector_alloc((size_t)n), *cv = gsl_vector_alloc((size_t)p);
  gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc((size_t)n, (size_t)p);
  int rc = -1;
  if (X && cov && y && w && cv && ws) {
    for (int i = 0; i < n; i++) {
      double col[3] = {1.0, t1[i], t1[i] / k[i]};
      for (int j = 0, q = 0; j < 3; j++)
        if (use[j]) gsl_matrix_set(X, (size_t)i, (size_t)q++, col[j]);
      gsl_vector_set(y, (size_t)i, t[i]);
      gsl_vector_set(w, (size_t)i, 1.0 / (t[i] * t[i]));
    }
    double chisq;
    if (gsl_multifit_wlinear(X, w, y, cv, cov, &chisq, ws) == GSL_SUCCESS) {
      for (int j = 0, q = 0; j < 3; j++) c[j] = use[j] ? gsl_vector_get(cv, (size_t)q++) : 0.0;
      rc = 0;
    }
  }
  gsl_multifit_linear_free(ws);
  gsl_vector_free(cv);
  gsl_vector_free(w);
  gsl_vector_free(y);
  gsl_matrix_free(cov);
  gsl_matrix_free(X);
  return rc;
}

int bs_fit_gemm_k(const double *t1, const double *k, const double *t, int n, bs_fit_gemm *out, char *err,
                  size_t errlen) {
  memset(out, 0, sizeof *out);
  if (n < 3) {
    snprintf(err, errlen, "gemm fit: %d points, at least 3 needed", n);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (!(t1[i] > 0 && k[i] >= 1 && t[i] > 0) || !isfinite(t1[i]) || !isfinite(k[i]) || !isfinite(t[i])) {
      snprintf(err, errlen, "gemm fit: point %d: compute time, k >= 1 and time must be positive", i);
      return -1;
    }
  gsl_error_handler_t *old = gsl_set_error_handler_off();
  int use[3] = {1, 1, 1};
  double c[3] = {0, 0, 0};
  int rc = -1;
  /* Drop a term whose coefficient comes out negative (not visible in the data), then refit. */
  for (int round = 0; round < 3; round++) {
    if (gemm_solve(t1, k, t, n, use, c)) break;
    if (use[0] && c[0] < 0) use[0] = 0;
    else if (use[2] && c[2] < 0) use[2] = 0;
    else {
      rc = 0;
      break;
    }
  }
  gsl_set_error_handler(old);
  if (rc || !(c[1] > 0)) {
    snprintf(err, errlen, "gemm fit: GSL failed or no positive rate (degenerate points?)");
    return -1;
  }
  out->launch_s = c[0];
  out->peak_fraction = 1.0 / c[1];
  out->k_overhead = c[2] / c[1];
  double *m = malloc((size_t)n * sizeof *m);
  if (!m) {
    snprintf(err, errlen, "gemm fit: out of memory");
    return -1;
  }
  for (int i = 0; i < n; i++) m[i] = bs_fit_gemm_time(out, t1[i], k[i]);
  bs_fit_quality_of(m, t, n, &out->q);
  free(m);
  return 0;
}

/* ------------------------------------------------------------------ links */

double bs_fit_link_time(const bs_fit_link *f, double bytes) {
  int s = 0;
  while (s + 1 < f->nseg && bytes >= f->seg[s + 1].min_bytes) s++;
  return f->seg[s].lat_s + bytes / f->seg[s].bw_Bps;
}

/* Total chi2 of segments split at breaks b[0..k-2] (indices of each later segment's first point). */
static int segs_fit(const double *x, const double *t, int n, int k, const int *b, bs_fit_seg *seg, double *chi2) {
  double total = 0;
  for (int s = 0; s < k; s++) {
    int lo = s ? b[s - 1] : 0, hi = s + 1 < k ? b[s] : n;
    double c0, c1, c;
    if (line_fit(x, t, lo, hi, &c0, &c1, &c)) return -1;
    seg[s].min_bytes = s ? x[lo] : 0;
    seg[s].lat_s = c0;
    seg[s].bw_Bps = 1.0 / c1;
    total += c;
  }
  /* Every range within BS_FIT_FACTOR_SPAN of the bulk range's bandwidth, or no split. */
  for (int s = 0; s + 1 < k; s++) {
    double r = seg[s].bw_Bps / seg[k - 1].bw_Bps;
    if (!(r >= 1.0 / BS_FIT_FACTOR_SPAN && r <= BS_FIT_FACTOR_SPAN)) return -1;
  }
  for (int s = 1; s < k && seg[0].lat_s > 0; s++)
    if (!(seg[s].lat_s <= seg[0].lat_s * BS_FIT_FACTOR_SPAN)) return -1;
  *chi2 = total;
  return 0;
}

int bs_fit_link_piecewise(const double *bytes, const double *t, int n, int max_segs, int min_pts, bs_fit_link *out,
                          char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (min_pts <= 0) min_pts = 3;
  if (max_segs < 1 || max_segs > BS_FIT_MAX_SEGS) max_segs = BS_FIT_MAX_SEGS;
  if (n < 2 || n < min_pts) {
    snprintf(err, errlen, "link fit: %d points, at least %d needed", n, min_pts > 2 ? min_pts : 2);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (!(t[i] > 0) || !(bytes[i] > 0) || (i && bytes[i] <= bytes[i - 1])) {
      snprintf(err, errlen, "link fit: point %d: sizes increasing and positive, times positive", i);
      return -1;
    }
  gsl_error_handler_t *old = gsl_set_error_handler_off();
  /* Best split for each number of ranges, by total chi2 over all break positions. */
  double best[BS_FIT_MAX_SEGS + 1];
  bs_fit_seg best_seg[BS_FIT_MAX_SEGS + 1][BS_FIT_MAX_SEGS];
  bs_fit_seg seg[BS_FIT_MAX_SEGS];
  for (int k = 1; k <= max_segs; k++) {
    best[k] = INFINITY;
    if (k * min_pts > n) break;
    int b[BS_FIT_MAX_SEGS - 1] = {0, 0};
    /* k = 1: no break; k = 2: b0; k = 3: b0 < b1. */
    int b0lo = k > 1 ? min_pts : 0, b0hi = k > 1 ? n - (k - 1) * min_pts : 0;
    for (int b0 = b0lo; b0 <= b0hi; b0++) {
      int b1lo = k > 2 ? b0 + min_pts : 0, b1hi = k > 2 ? n - min_pts : 0;
      for (int b1 = b1lo; b1 <= b1hi; b1++) {
        b[0] = b0;
        b[1] = b1;
        double chi2;
        if (segs_fit(bytes, t, n, k, b, seg, &chi2)) continue;
        if (chi2 < best[k]) {
          best[k] = chi2;
          memcpy(best_seg[k], seg, sizeof seg);
        }
      }
    }
  }
  /* One more range only when the simpler model visibly misses (a point off by more than
   * BS_FIT_SPLIT_RESID) and the split cuts chi2 at least fourfold: noise never splits a range. */
  int k = 0;
  if (isfinite(best[1])) k = 1;
  while (k && k < max_segs && isfinite(best[k + 1])) {
    bs_fit_link cur;
    memset(&cur, 0, sizeof cur);
    cur.nseg = k;
    memcpy(cur.seg, best_seg[k], sizeof cur.seg);
    double worst = 0;
    for (int i = 0; i < n; i++) {
      double r = fabs(bs_fit_link_time(&cur, bytes[i]) - t[i]) / t[i];
      if (r > worst) worst = r;
    }
    if (!(worst > BS_FIT_SPLIT_RESID && best[k + 1] < best[k] / 4)) break;
    k++;
  }
  if (k) {
    out->nseg = k;
    memcpy(out->seg, best_seg[k], sizeof out->seg);
  }
  gsl_set_error_handler(old);
  if (out->nseg == 0) {
    snprintf(err, errlen, "link fit: no segment could be fitted");
    return -1;
  }
  double *m = malloc((size_t)n * sizeof *m);
  if (!m) {
    snprintf(err, errlen, "link fit: out of memory");
    return -1;
  }
  for (int i = 0; i < n; i++) m[i] = bs_fit_link_time(out, bytes[i]);
  bs_fit_quality_of(m, t, n, &out->q);
  free(m);
  return 0;
}
