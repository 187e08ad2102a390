/*
 * fit.h — the model fits behind `burstsim calib`, on plain arrays so they can
 * be tested on synthetic data with known parameters (tests/calib):
 *
 *   kernels: time = t0 + flops / rate(x), rate(x) = rmax * x / (x + xh), a
 *            saturating rate over the block size x, fitted with GSL's
 *            nonlinear least squares (gsl_multifit_nlinear) on relative
 *            residuals (times span orders of magnitude);
 *   linear:  time = c0 + c1 * u (a roofline-style fixed cost plus work over
 *            speed), weighted least squares (gsl_multifit_wlinear);
 *   gemm:    time = launch + T1 (k + k0) / (k pf), T1 the GEMM's compute time
 *            at the full peak (no tile or wave loss), k its inner dimension:
 *            the fraction pf of peak reached and a fixed per-tile cost of k0
 *            K elements (profile/profile.h, model "tiled"); linear in (launch,
 *            1 / pf, k0 / pf), weighted least squares (gsl_multifit_wlinear);
 *   links:   time = latency + bytes / bandwidth per size range, with up to
 *            three ranges whose breaks (Open MPI's eager / rendezvous switch,
 *            the single-copy threshold) are found by exhaustive search; a
 *            range is split only when the simpler model misses a point by more
 *            than 5 % and the split cuts chi2 fourfold: the SimGrid SMPI
 *            piecewise factors.
 *
 * Every fit reports R^2 (on the times) and the largest relative residual.
 */
#ifndef BURSTSIM_CALIB_FIT_H
#define BURSTSIM_CALIB_FIT_H

#include <stddef.h>

typedef struct {
  double r2;            /* 1 - SS_res / SS_tot on the times */
  double max_rel_resid; /* max |model - measured| / measured */
  double rms_rel_resid;
  int n; /* points used */
} bs_fit_quality;

typedef struct {
  double t0;   /* seconds, >= 0 */
  double rmax; /* FLOP/s reached at large x */
  double xh;   /* x at which half of rmax is reached, >= 0 */
  int iterations;
  int status; /* GSL status of the solver (0 = converged) */
  bs_fit_quality q;
} bs_fit_sat;

/* Evaluates the saturating model. */
double bs_fit_sat_time(const bs_fit_sat *f, double x, double flops);
double bs_fit_sat_rate(const bs_fit_sat *f, double x);

/*
 * Fits the saturating model to n >= 3 points (x > 0, flops > 0, t > 0).
 * Returns 0, or -1 with a message (too few points, bad values, solver failure).
 */
int bs_fit_saturating(const double *x, const double *flops, const double *t, int n, bs_fit_sat *out, char *err,
                      size_t errlen);

typedef struct {
  double c0, c1; /* time = c0 + c1 * u */
  bs_fit_quality q;
} bs_fit_lin;

/* Weighted (1/t^2) straight-line fit of t against u over n >= 2 points; c0 clamped >= 0. */
int bs_fit_linear(const double *u, const double *t, int n, bs_fit_lin *out, char *err, size_t errlen);

typedef struct {
  double launch_s;      /* >= 0 */
  double peak_fraction; /* 1 / c1, as fitted (may exceed 1: the caller decides) */
  double k_overhead;    /* >= 0, K elements */
  bs_fit_quality q;
} bs_fit_gemm;

/* Evaluates the GEMM model for a point of compute time t1 (at the full peak) and inner dimension k. */
double bs_fit_gemm_time(const bs_fit_gemm *f, double t1, double k);

/*
 * Fits the GEMM model to n >= 3 points (t1 > 0, k >= 1, t > 0) with relative
 * residuals. A negative intercept or overhead means none is visible: that
 * term is dropped and the rest refitted. Returns 0, or -1 with a message.
 */
int bs_fit_gemm_k(const double *t1, const double *k, const double *t, int n, bs_fit_gemm *out, char *err,
                  size_t errlen);

#define BS_FIT_MAX_SEGS 3

/* A split is kept only when every range's bandwidth lies within this factor of the bulk
 * (last) range's, and every latency within it of the first range's: beyond it a range is noise (one slow outlier, a flat run), not a protocol,
 * and profiles refuse such SimGrid factors. */
#define BS_FIT_FACTOR_SPAN 1e3

typedef struct {
  double min_bytes; /* the segment covers sizes >= min_bytes (first: 0) */
  double lat_s;     /* intercept, >= 0 */
  double bw_Bps;    /* 1 / slope */
} bs_fit_seg;

typedef struct {
  int nseg;
  bs_fit_seg seg[BS_FIT_MAX_SEGS];
  bs_fit_quality q;
} bs_fit_link;

/* Time of a message of `bytes` under the fitted segments. */
double bs_fit_link_time(const bs_fit_link *f, double bytes);

/*
 * Piecewise latency + bytes / bandwidth fit of n >= 4 points sorted by size
 * (sizes increasing). Each segment needs at least min_pts points (0 = 3).
 * max_segs (1..3) bounds the number of ranges.
 */
int bs_fit_link_piecewise(const double *bytes, const double *t, int n, int max_segs, int min_pts, bs_fit_link *out,
                          char *err, size_t errlen);

/* Quality of arbitrary model times against measured ones. */
void bs_fit_quality_of(const double *model, const double *measured, int n, bs_fit_quality *q);

#endif
