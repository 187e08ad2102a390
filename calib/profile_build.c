/*
 * profile_build.c — the profile `burstsim calib` writes, built as one cJSON
 * tree from the measurements: GSL fits (fit.h) turned into the kernel models
 * and link classes of profile/profile.h, each table tagged with its storage type
 * and its fit, then the machine, the calibration settings, the model checked
 * against every measurement, and the raw measurements (which the profile
 * loader ignores). The caller writes the tree once.
 */
#include "calib/profile_build.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "calib/fit.h"
#include "kernels/attn.h"
#include "plans/plan.h"
#include "runtime/compute.h"
#include "sim/coll_shape.h"
#include "profile/profile.h"

/* Largest relative residual at which a fit, rather than the measured rates, fills a table. */
#define BS_CALIB_FIT_TOL 0.10

/* The attention kernels with rate tables, in the order the profile lists them. */
static const int attn_kernels[] = {BS_K_ATTN_FWD, BS_K_ATTN_FWD_UNFUSED, BS_K_ATTN_BWD, BS_K_ATTN_BWD_UNFUSED};
#define N_ATTN 4

/* What the builder knows beside the bs_profile: the storage type of each attention table. */
typedef struct {
  int table_bf16[BS_K_COUNT][BS_PROF_MAX_TABLES];
} table_types;

typedef struct {
  double x[64], flops[64], t[64];
  int n;
  int heads; /* heads per launch of the series' points (a GPU's launch holds several) */
} series_pts;

static void collect(const bs_calib_data *d, int kernel, int dd, int causal, int bf16, int decode, series_pts *s) {
  s->n = 0;
  s->heads = 1;
  for (int i = 0; i < d->nk && s->n < 64; i++) {
    const bs_calib_kpoint *k = &d->k[i];
    if (k->kernel != kernel || k->d != dd || k->causal != causal || k->bf16 != bf16 || k->decode != decode) continue;
    if (k->heads > 1) s->heads = k->heads;
    s->x[s->n] = k->x;
    s->flops[s->n] = k->flops;
    s->t[s->n] = k->t_eff;
    s->n++;
  }
}

static cJSON *num_obj(cJSON *o, const char *k, double v) {
  cJSON_AddNumberToObject(o, k, isfinite(v) ? v : 0.0);
  return o;
}

static cJSON *quality_json(const bs_fit_quality *q) {
  cJSON *o = cJSON_CreateObject();
  num_obj(o, "r2", q->r2);
  num_obj(o, "max_rel_resid", q->max_rel_resid);
  num_obj(o, "rms_rel_resid", q->rms_rel_resid);
  num_obj(o, "n", q->n);
  return o;
}

/* Appends the decode fit f sampled from 1K to nk_max keys (x = sqrt(keys)), heads per launch. */
static void append_decode_fit(bs_prof_table *t, const bs_fit_sat *f, int dd, int heads, double nk_max) {
  for (double nk = 1024; nk <= nk_max && t->n < BS_PROF_MAX_POINTS; nk *= 2) {
    double x = sqrt(nk), fl = 4.0 * dd * nk * heads;
    t->x[t->n] = x;
    t->tflops[t->n++] = fl / bs_fit_sat_time(f, x, fl) / 1e12;
  }
}

/* Appends the measured rates of s that lie past the table's last x. */
static void append_measured(bs_prof_table *t, const series_pts *s) {
  for (int i = 0; i < s->n && t->n < BS_PROF_MAX_POINTS; i++) {
    if (t->n && s->x[i] <= t->x[t->n - 1]) continue;
    t->x[t->n] = s->x[i];
    t->tflops[t->n++] = s->flops[i] / s->t[i] / 1e12;
  }
}

/*
 * One rate table of an attention kernel: the saturating fit of the block
 * series sampled at x = 256 .. 64K (square blocks: diagonal ones for
 * "causal"), preceded for the full forward by the decode series (one query
 * row against nk keys, x = sqrt(nk) < 256). The fit's t0 is folded into the
 * sampled rate (launch_s = 0), so the table reproduces t0 + flops / rate at
 * the sampled shapes, with as many heads per launch as the points had (t0 is
 * per launch: folded into one head's FLOPs it would count once per head).
 * Without enough points for a fit, the measured rates are tabulated as they are.
 */
static int attn_table(const bs_calib_data *d, int kernel, int dd, int causal, int bf16, bs_prof_table *t, cJSON *fits) {
  int bwd = kernel == BS_K_ATTN_BWD || kernel == BS_K_ATTN_BWD_UNFUSED;
  series_pts blk, dec;
  collect(d, kernel, dd, causal, bf16, 0, &blk);
  collect(d, kernel, dd, causal, bf16, 1, &dec);
  if (blk.n == 0) return 0;
  memset(t, 0, sizeof *t);
  t->head_dim = dd;
  t->causal = causal;
  char e[160];
  bs_fit_sat fb, fd;
  int have_b = bs_fit_saturating(blk.x, blk.flops, blk.t, blk.n, &fb, e, sizeof e) == 0;
  int have_d = dec.n >= 3 && bs_fit_saturating(dec.x, dec.flops, dec.t, dec.n, &fd, e, sizeof e) == 0;
  const char *dn = bf16 ? "bf16" : "fp32";
  for (int part = 0; part < 2; part++) {
    const series_pts *s = part ? &blk : &dec;
    const bs_fit_sat *f = part ? &fb : &fd;
    int fitted = part ? have_b : have_d;
    /* Use what fits: the fit when it follows every point within 10 %, else the measured rates. */
    int have = fitted && f->q.max_rel_resid <= BS_CALIB_FIT_TOL;
    if (s->n == 0) continue;
    cJSON *fj = cJSON_CreateObject();
    char series[64];
    snprintf(series, sizeof series, "d%d/%s/%s/%s", dd, causal ? "causal" : "full", dn, part ? "block" : "decode");
    cJSON_AddStringToObject(fj, "series", series);
    cJSON_AddStringToObject(fj, "dtype", dn);
    num_obj(fj, "x_min", s->x[0]);
    num_obj(fj, "x_max", s->x[s->n - 1]);
    cJSON_AddStringToObject(fj, "table_from",
                            have ? "fit" : "measured rates (fit residual above 10 % or too few points)");
    if (fitted) {
      cJSON_AddStringToObject(fj, "model",
                              "t = t0 + flops / (rmax * x / (x + xh)), gsl_multifit_nlinear on relative residuals");
      num_obj(fj, "t0_s", f->t0);
      num_obj(fj, "rmax_flops", f->rmax);
      num_obj(fj, "xh", f->xh);
      num_obj(fj, "iterations", f->iterations);
      num_obj(fj, "solver_status", f->status);
      cJSON_AddItemToObject(fj, "quality", quality_json(&f->q));
    } else {
      cJSON_AddStringToObject(fj, "model", "measured rates tabulated (too few points for a fit)");
    }
    cJSON_AddItemToArray(fits, fj);
    if (have && part == 0) {
      append_decode_fit(t, f, dd, s->heads, 32768);
    } else if (have) {
      for (double b = 256; b <= 65536 && t->n < BS_PROF_MAX_POINTS; b *= 2) {
        double fl = (bwd ? 10.0 : 4.0) * dd * (causal ? b * (b + 1) / 2 : b * b) * s->heads;
        t->x[t->n] = b;
        t->tflops[t->n++] = fl / bs_fit_sat_time(f, b, fl) / 1e12;
      }
    } else {
      append_measured(t, s);
    }
  }
  return t->n > 0;
}

/* A COMPUTE op with the shape of a measurement, as the plans would emit it. */
static bs_compute point_op(const bs_calib_kpoint *k) {
  bs_compute c;
  memset(&c, 0, sizeof c);
  c.kernel = (bs_kernel)k->kernel;
  int64_t nq = k->nq > 0 ? k->nq : 1, nk = k->nk > 0 ? k->nk : nq;
  int heads = k->heads > 1 ? k->heads : 1;
  c.a = attn_params_make(1, heads, heads, nq, nk, k->d > 0 ? k->d : 1);
  c.a.mask.causal = k->causal;
  c.a.mask.q_pos0 = nk - nq;
  c.a.dtype = k->bf16 ? ATTN_BF16 : ATTN_FP32;
  c.flops = k->flops;
  c.elems = k->elems;
  if (k->kernel == BS_K_GEMM) {
    c.m = k->nq;
    c.n = k->nk > 0 ? k->nk : k->nq;
    c.k = k->d;
  }
  return c;
}

double bs_calib_model_time(const bs_profile *p, const bs_calib_kpoint *k) {
  char e[160];
  bs_compute c = point_op(k);
  return bs_profile_kernel_time(p, &c, k->bf16 ? BS_BF16 : BS_FP32, e, sizeof e);
}

static const int roofline_kernels[] = {BS_K_ATTN_DELTA, BS_K_ATTN_MERGE, BS_K_ELEMWISE, BS_K_COPY};
#define N_ROOFLINE 4

/* launch_s and efficiency of a roofline kernel: t = launch + T1 / eff, T1 the model time at eff 1. */
static int roofline_fit(const bs_calib_data *d, bs_profile *p, int kernel, int bf16, bs_fit_lin *fit, double *fastest) {
  double u[64], t[64];
  int n = 0;
  *fastest = 0;
  p->kernel[kernel].kind = BS_KM_ROOFLINE;
  p->kernel[kernel].launch_s = 0;
  p->kernel[kernel].efficiency = 1;
  for (int i = 0; i < d->nk && n < 64; i++) {
    const bs_calib_kpoint *k = &d->k[i];
    if (k->kernel != kernel || (kernel == BS_K_ATTN_DELTA && k->bf16 != bf16)) continue;
    double m = bs_calib_model_time(p, k);
    if (!(m > 0)) continue;
    u[n] = m;
    t[n] = k->t_eff;
    if (t[n] > 0 && u[n] / t[n] > *fastest) *fastest = u[n] / t[n];
    n++;
  }
  char e[160];
  if (n < 2 || bs_fit_linear(u, t, n, fit, e, sizeof e)) {
    p->kernel[kernel].kind = BS_KM_NONE;
    return 0;
  }
  double eff = 1.0 / fit->c1;
  p->kernel[kernel].launch_s = fit->c0;
  p->kernel[kernel].efficiency = eff > 1 ? 1 : eff;
  return 1;
}

/*
 * The GEMM entry: the tiled model of profile/profile.h with no tile or wave
 * quantization on a CPU (tile 1 x 1, one unit: OpenBLAS runs edges with
 * narrower micro-kernels and splits the rows over threads), its bandwidth term
 * at the memcpy bandwidth, and launch_s, peak_fraction and k_overhead fitted
 * (calib/fit.h) to every GEMM measured: the attention-score shapes (k = d)
 * and the projection shapes (k = 512 .. 11008). The fitted record goes to
 * fits.gemm. Returns 1 when fitted, 0 without enough points.
 */
static int gemm_fit(const bs_calib_data *d, bs_profile *p, cJSON *fits) {
  bs_kernel_model *g = &p->kernel[BS_K_GEMM];
  memset(g, 0, sizeof *g);
  g->kind = BS_KM_TILED;
  g->peak_fraction = g->bw_efficiency = 1;
  g->tile_m = g->tile_n = g->sms = 1;
  double t1[64], kk[64], t[64];
  int n = 0, bytes_bound = 0;
  for (int i = 0; i < d->nk && n < 64; i++) {
    const bs_calib_kpoint *k = &d->k[i];
    if (k->kernel != BS_K_GEMM || !(k->flops > 0) || k->d < 1) continue;
    t1[n] = k->flops / p->peak_flops;
    kk[n] = k->d;
    t[n++] = k->t_eff;
  }
  bs_fit_gemm f;
  char e[160];
  if (n < 3 || bs_fit_gemm_k(t1, kk, t, n, &f, e, sizeof e)) {
    g->kind = BS_KM_NONE;
    return 0;
  }
  g->launch_s = f.launch_s;
  g->peak_fraction = f.peak_fraction > 1 ? 1 : f.peak_fraction;
  g->k_overhead = f.k_overhead;
  /* Points the model puts on its bandwidth bound (the fit assumed compute): reported, not refitted. */
  for (int i = 0; i < d->nk; i++) {
    const bs_calib_kpoint *k = &d->k[i];
    if (k->kernel != BS_K_GEMM) continue;
    double bytes = ((double)k->nq * k->d + (double)k->d * (k->nk > 0 ? k->nk : k->nq) +
                    (double)k->nq * (k->nk > 0 ? k->nk : k->nq)) *
                   4;
    bytes_bound += bytes / p->mem_bw_Bps > bs_fit_gemm_time(&f, k->flops / p->peak_flops, k->d) - f.launch_s;
  }
  cJSON *fj = cJSON_CreateObject();
  cJSON_AddStringToObject(fj, "model",
                          "tiled, no tile or wave quantization on a CPU (tile 1 x 1, sms 1): t = launch_s + "
                          "flops (k + k_overhead) / (k peak_flops peak_fraction), gsl_multifit_wlinear on "
                          "relative residuals over the score (k = d) and projection GEMMs");
  num_obj(fj, "launch_s", f.launch_s);
  num_obj(fj, "peak_fraction_fitted", f.peak_fraction);
  num_obj(fj, "k_overhead", f.k_overhead);
  num_obj(fj, "points_bytes_bound", bytes_bound);
  cJSON_AddItemToObject(fj, "quality", quality_json(&f.q));
  cJSON_AddItemToObject(fits, bs_kernel_name(BS_K_GEMM), fj);
  return 1;
}

/* Link points of one test: ping-pong and bidir of class cls ("intra", "inter"), or with
 * cls NULL every point but the inter-node ones. Returns how many (at most 64). */
static int link_points(const bs_calib_data *d, const char *test, const char *cls, double *b, double *t) {
  int n = 0;
  for (int i = 0; i < d->nl && n < 64; i++) {
    const bs_calib_lpoint *l = &d->l[i];
    if (strcmp(l->test, test) || (cls ? strcmp(l->cls, cls) != 0 : !strcmp(l->cls, "inter"))) continue;
    b[n] = (double)l->bytes;
    t[n++] = l->t_med;
  }
  return n;
}

/* A piecewise link fit as JSON: its segments and the fit quality, added to o. */
static void link_fit_json(cJSON *o, const bs_fit_link *f) {
  cJSON *segs = cJSON_AddArrayToObject(o, "segments");
  for (int s = 0; s < f->nseg; s++) {
    cJSON *sj = cJSON_CreateObject();
    num_obj(sj, "min_bytes", f->seg[s].min_bytes);
    num_obj(sj, "latency_s", f->seg[s].lat_s);
    num_obj(sj, "bandwidth_Bps", f->seg[s].bw_Bps);
    cJSON_AddItemToArray(segs, sj);
  }
  cJSON_AddItemToObject(o, "quality", quality_json(&f->q));
}

/*
 * The link of class cls ("intra" or "inter" ping-pong points): latency and bandwidth per
 * size range (GSL piecewise fit), as SimGrid-style factors relative to the bulk range.
 * Writes the fit under fitj[name] when fitj is given. 0 = done, 1 = no such points, -1 = error.
 */
static int link_from_pingpong(const bs_calib_data *d, const char *cls, bs_prof_link *lk, bs_fit_link *out, cJSON *fitj,
                              const char *name, char *err, size_t errlen) {
  double b[64], t[64];
  int n = link_points(d, "pingpong", cls, b, t);
  if (n == 0) return 1;
  bs_fit_link pp;
  if (bs_fit_link_piecewise(b, t, n, 3, 3, &pp, err, errlen)) return -1;
  lk->present = 1;
  lk->bw_Bps = pp.seg[pp.nseg - 1].bw_Bps;
  lk->lat_s = pp.seg[0].lat_s;
  /* On a loaded host the fitted intercept can land at or below zero, or the bulk slope at or below
   * zero: a link the simulator cannot use. Then the smallest message's one-way time bounds the
   * latency from above, and the largest message's rate stands for the bandwidth. */
  if (!(lk->lat_s > 0) || !(lk->bw_Bps > 0)) {
    int lo = 0, hi = 0;
    for (int i = 1; i < n; i++) {
      if (b[i] < b[lo] || (b[i] == b[lo] && t[i] < t[lo])) lo = i;
      if (b[i] > b[hi]) hi = i;
    }
    if (!(lk->lat_s > 0)) lk->lat_s = t[lo] > 0 ? t[lo] : 1e-6;
    if (!(lk->bw_Bps > 0)) lk->bw_Bps = t[hi] > 0 ? b[hi] / t[hi] : 1e9;
    pp.seg[0].lat_s = lk->lat_s;
    pp.seg[pp.nseg - 1].bw_Bps = lk->bw_Bps;
  }
  lk->nfactors = pp.nseg;
  for (int s = 0; s < pp.nseg; s++) {
    lk->factors[s].min_bytes = pp.seg[s].min_bytes;
    lk->factors[s].bandwidth = pp.seg[s].bw_Bps / pp.seg[pp.nseg - 1].bw_Bps;
    lk->factors[s].latency = lk->lat_s > 0 ? pp.seg[s].lat_s / lk->lat_s : 1.0;
    if (!(lk->factors[s].latency >= 0)) lk->factors[s].latency = 1.0;
  }
  lk->factors[pp.nseg - 1].bandwidth = 1.0;
  lk->factors[pp.nseg - 1].latency = 1.0;
  if (out) *out = pp;
  if (fitj) {
    cJSON *pj = cJSON_CreateObject();
    cJSON_AddStringToObject(pj, "model",
                            "pingpong one way: t = latency + bytes / bandwidth per size range; a break only where one "
                            "range misses a point by > 5 % and the split cuts chi2 fourfold");
    cJSON_AddStringToObject(
      pj, "ranks", !strcmp(cls, "intra") ? "rank 0 and a rank of its node" : "rank 0 and a rank of another node");
    link_fit_json(pj, &pp);
    cJSON_AddItemToObject(fitj, name, pj);
  }
  return 0;
}

/*
 * The decode table of a forward kernel (mask "decode", read for calls of one query row only): the
 * decode series' fit sampled from 1K to 1M keys (x = sqrt(keys)), with the points' heads per launch;
 * without a fit within 10 %, the measured rates. On a GPU decode is bound by reading K and V, a
 * hundred times slower than a block of the same x, which the combined table would give past 32K keys.
 */
static int decode_table(const bs_calib_data *d, int kernel, int dd, int bf16, bs_prof_table *t) {
  series_pts dec;
  collect(d, kernel, dd, 0, bf16, 1, &dec);
  if (dec.n == 0) return 0;
  memset(t, 0, sizeof *t);
  t->head_dim = dd;
  t->decode = 1;
  char e[160];
  bs_fit_sat f;
  if (dec.n >= 3 && bs_fit_saturating(dec.x, dec.flops, dec.t, dec.n, &f, e, sizeof e) == 0 &&
      f.q.max_rel_resid <= BS_CALIB_FIT_TOL)
    append_decode_fit(t, &f, dd, dec.heads, 1048576);
  else append_measured(t, &dec);
  return t->n > 0;
}

/* Attention: fused and unfused, tables of the primary type first (the simulator reads those). */
static void attn_models(const bs_calib_data *d, int primary, bs_profile *p, cJSON *fits, table_types *types) {
  for (int ki = 0; ki < N_ATTN; ki++) {
    int kernel = attn_kernels[ki];
    bs_kernel_model *m = &p->kernel[kernel];
    cJSON *kf = cJSON_CreateArray();
    for (int pass = 0; pass < 2; pass++) {
      int bf16 = pass == 0 ? primary : !primary;
      for (int dd = 64; dd <= 128; dd *= 2)
        for (int causal = 0; causal < 2; causal++) {
          if (m->ntables >= BS_PROF_MAX_TABLES) break;
          if (attn_table(d, kernel, dd, causal, bf16, &m->tables[m->ntables], kf))
            types->table_bf16[kernel][m->ntables++] = bf16;
        }
    }
    for (int pass = 0; pass < 2; pass++) {
      int bf16 = pass == 0 ? primary : !primary;
      for (int dd = 64; dd <= 128; dd *= 2)
        if (m->ntables < BS_PROF_MAX_TABLES && decode_table(d, kernel, dd, bf16, &m->tables[m->ntables]))
          types->table_bf16[kernel][m->ntables++] = bf16;
    }
    if (m->ntables) {
      m->kind = BS_KM_TABLE;
      m->launch_s = 0;
    }
    cJSON_AddItemToObject(fits, bs_kernel_name((bs_kernel)kernel), kf);
  }
}

/* Roofline kernels (memory bandwidth raised when a kernel streams faster than memcpy), then GEMM. */
static void other_models(const bs_calib_data *d, int primary, bs_profile *p, cJSON *fits) {
  for (int pass = 0; pass < 3; pass++) {
    double worst = 1;
    for (int r = 0; r < N_ROOFLINE; r++) {
      bs_fit_lin f;
      double fastest;
      if (!roofline_fit(d, p, roofline_kernels[r], primary, &f, &fastest)) continue;
      /* The slope's rate, but never above the kernel's fastest measured point: on a busy machine
       * times quantised to scheduler ticks give a near-flat series whose slope means no rate. */
      double raise = 1.0 / f.c1 < fastest ? 1.0 / f.c1 : fastest;
      if (raise > worst) worst = raise;
    }
    if (worst <= 1.0 + 1e-9) break;
    p->mem_bw_Bps *= worst;
  }
  for (int r = 0; r < N_ROOFLINE; r++) {
    bs_fit_lin f;
    int kernel = roofline_kernels[r];
    double fastest;
    if (!roofline_fit(d, p, kernel, primary, &f, &fastest)) continue;
    cJSON *fj = cJSON_CreateObject();
    cJSON_AddStringToObject(
      fj, "model", "t = launch_s + T1 / efficiency, T1 = the roofline time at efficiency 1 (weighted linear fit)");
    num_obj(fj, "launch_s", f.c0);
    num_obj(fj, "efficiency_fitted", 1.0 / f.c1);
    cJSON_AddItemToObject(fj, "quality", quality_json(&f.q));
    cJSON_AddItemToObject(fits, bs_kernel_name((bs_kernel)kernel), fj);
  }
  gemm_fit(d, p, fits);
}

/*
 * The per-call cost of a collective (collectives.base_s) from the cold call measure_links.c
 * times: its median less what the simulator gives that call without it, libnbc's binomial
 * allreduce on the shm link (2 ceil(log2 ranks) transfers of its bytes, one at a time on the
 * critical path); 0 when the cold call is no slower.
 */
static void cold_call_cost(const bs_calib_data *d, bs_profile *p, cJSON *links_fit) {
  const bs_prof_link *shm = &p->link[BS_LINK_SHM];
  for (int i = 0; i < d->nl; i++) {
    const bs_calib_lpoint *l = &d->l[i];
    if (strcmp(l->test, "allreduce_cold") || l->ranks < 2 || !(shm->bw_Bps > 0)) continue;
    double warm = 2.0 * bs_binomial_rounds(l->ranks) * (shm->lat_s + (double)l->bytes / shm->bw_Bps);
    p->coll_base_s = l->t_med > warm ? l->t_med - warm : 0;
    cJSON *cj = cJSON_CreateObject();
    cJSON_AddStringToObject(
      cj, "model",
      "collectives.base_s = the median of one allreduce timed alone after the caches were "
      "flushed, less the simulated warm call (libnbc binomial: 2 ceil(log2 ranks) shm transfers)");
    num_obj(cj, "cold_median_s", l->t_med);
    num_obj(cj, "cold_min_s", l->t_min);
    num_obj(cj, "cold_max_s", l->t_max);
    num_obj(cj, "warm_model_s", warm);
    num_obj(cj, "base_s", p->coll_base_s);
    cJSON_AddItemToObject(links_fit, "allreduce_cold", cj);
  }
}

/* Links: ping-pong within rank 0's node gives the shm class, to another node the NIC class. */
static int link_models(const bs_calib_data *d, bs_profile *p, cJSON *links_fit, char *err, size_t errlen) {
  bs_prof_link *shm = &p->link[BS_LINK_SHM];
  int have_intra = 0;
  bs_fit_link pp;
  if (d->ranks >= 2) {
    int r = link_from_pingpong(d, "intra", shm, &pp, links_fit, "pingpong", err, errlen);
    if (r < 0) return -1;
    have_intra = r == 0;
    r = link_from_pingpong(d, "inter", &p->link[BS_LINK_NIC], NULL, links_fit, "pingpong_inter", err, errlen);
    if (r < 0) return -1;
  }
  if (have_intra) {
    /* Ring step: every rank sends to the next at once; the host has one shm link they share. */
    double rb[64], rt[64];
    int rn = 0;
    for (int i = 0; i < d->nl && rn < 64; i++)
      if (!strcmp(d->l[i].test, "ring") && d->l[i].bytes >= (1 << 20)) {
        rb[rn] = (double)d->l[i].bytes;
        rt[rn++] = d->l[i].t_med;
      }
    bs_fit_lin ring;
    double agg = pp.seg[pp.nseg - 1].bw_Bps;
    int ring_ok = rn >= 2 && bs_fit_linear(rb, rt, rn, &ring, err, errlen) == 0 && ring.c1 > 0;
    /* One node: every flow of the ring shares the host's one shm link. */
    if (d->nodes == 1 && ring_ok) agg = d->ranks / ring.c1;
    shm->bw_Bps = agg;
    cJSON *rj = cJSON_CreateObject();
    cJSON_AddStringToObject(rj, "model",
                            d->nodes == 1 ? "ring step of all ranks (>= 1 MiB): t = c0 + bytes / flow_bw; shm link "
                                            "bandwidth = ranks x flow_bw (one link shared by every flow)"
                                          : "ring step of all ranks over several nodes (>= 1 MiB): recorded; shm "
                                            "bandwidth from the intra-node ping-pong");
    num_obj(rj, "flow_bw_Bps", ring_ok ? 1.0 / ring.c1 : 0);
    num_obj(rj, "link_bw_Bps", agg);
    if (ring_ok) cJSON_AddItemToObject(rj, "quality", quality_json(&ring.q));
    cJSON_AddItemToObject(links_fit, "ring", rj);
    cJSON_AddStringToObject(
      links_fit, "factors_note",
      "factors[] = SimGrid SMPI-style pieces from the ping-pong segments, relative to the bulk piece; "
      "the simulator applies the last piece (bulk) to every message, with latency_s = the eager latency");
    /* Collectives: recorded fits (the simulator runs them as point-to-point steps over the shm link). */
    static const char *colls[] = {"bidir", "allreduce", "allgather", "reduce_scatter", "alltoall"};
    for (int c = 0; c < 5; c++) {
      double cb[64], ct[64];
      int cn = link_points(d, colls[c], NULL, cb, ct);
      bs_fit_link cf;
      char e[160];
      if (cn < 4 || bs_fit_link_piecewise(cb, ct, cn, 2, 2, &cf, e, sizeof e)) continue;
      cJSON *cj = cJSON_CreateObject();
      link_fit_json(cj, &cf);
      cJSON_AddItemToObject(links_fit, colls[c], cj);
    }
    cold_call_cost(d, p, links_fit);
  } else {
    /* One rank, or no second rank on rank 0's node: keep the shipped host profile's shm link. */
    bs_profile shipped;
    char e[256];
    if (bs_profile_load("host", &shipped, e, sizeof e) == 0 && shipped.link[BS_LINK_SHM].present)
      *shm = shipped.link[BS_LINK_SHM];
    else {
      shm->present = 1;
      shm->bw_Bps = 1e9;
      shm->lat_s = 1e-6;
    }
    cJSON_AddStringToObject(links_fit, "note",
                            "no two ranks on one node: shm not measured, copied from the shipped host profile");
  }
  return 0;
}

static int build_profile(const bs_calib_data *d, const bs_calib_opts *o, const char *name, bs_profile *p, cJSON *fits,
                         cJSON *links_fit, table_types *types, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  p->memory_bytes = d->mem_total > 0 ? (double)d->mem_total / d->ranks : 1e9;
  p->peak_flops = d->fma_peak > 0 ? d->fma_peak : 1e9;
  p->mem_bw_Bps = d->copy_Bps > 0 ? d->copy_Bps : 1e9;
  p->host_speed = p->peak_flops;
  p->host_cores = d->cores;
  snprintf(p->net_model, sizeof p->net_model, "CM02");
  /* measured through the runtime's MPI backend, whose MPI_Iallreduce is Open MPI's libnbc */
  p->allreduce_lib = BS_ALLREDUCE_OMPI_LIBNBC;
  int primary = o->primary_bf16 ? 1 : 0;
  attn_models(d, primary, p, fits, types);
  other_models(d, primary, p, fits);
  return link_models(d, p, links_fit, err, errlen);
}

static cJSON *measurements_json(const bs_calib_data *d) {
  cJSON *m = cJSON_CreateObject();
  cJSON *ks = cJSON_AddArrayToObject(m, "kernels");
  for (int i = 0; i < d->nk; i++) {
    const bs_calib_kpoint *k = &d->k[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kernel", bs_kernel_name((bs_kernel)k->kernel));
    cJSON_AddStringToObject(o, "series", k->series);
    num_obj(o, "d", k->d);
    num_obj(o, "causal", k->causal);
    cJSON_AddStringToObject(o, "dtype", k->bf16 ? "bf16" : "fp32");
    num_obj(o, "nq", (double)k->nq);
    if (k->heads > 1) num_obj(o, "heads", k->heads);
    num_obj(o, "nk", (double)k->nk);
    num_obj(o, "elems", (double)k->elems);
    num_obj(o, "flops", k->flops);
    num_obj(o, "t_med_s", k->t_med);
    num_obj(o, "t_min_s", k->t_min);
    num_obj(o, "t_max_s", k->t_max);
    num_obj(o, "spread", k->t_med > 0 ? (k->t_max - k->t_min) / k->t_med : 0);
    num_obj(o, "t_eff_s", k->t_eff);
    num_obj(o, "reps", k->reps);
    cJSON_AddItemToArray(ks, o);
  }
  cJSON *ls = cJSON_AddArrayToObject(m, "links");
  for (int i = 0; i < d->nl; i++) {
    const bs_calib_lpoint *l = &d->l[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "test", l->test);
    if (l->cls[0]) cJSON_AddStringToObject(o, "class", l->cls);
    num_obj(o, "ranks", l->ranks);
    num_obj(o, "bytes", (double)l->bytes);
    num_obj(o, "t_med_s", l->t_med);
    num_obj(o, "t_min_s", l->t_min);
    num_obj(o, "t_max_s", l->t_max);
    num_obj(o, "algbw_Bps", l->algbw);
    num_obj(o, "busbw_Bps", l->busbw);
    num_obj(o, "reps", l->reps);
    cJSON_AddItemToArray(ls, o);
  }
  return m;
}

/* Measured against the simulator's own formula (bs_profile_kernel_time) for every point of the primary type. */
static cJSON *profile_check(const bs_calib_data *d, const bs_profile *p, int primary) {
  cJSON *c = cJSON_CreateObject();
  for (int kernel = 0; kernel < BS_K_COUNT; kernel++) {
    double m[256], t[256];
    int n = 0;
    for (int i = 0; i < d->nk && n < 256; i++) {
      const bs_calib_kpoint *k = &d->k[i];
      if (k->kernel != kernel || (k->bf16 != primary && kernel != BS_K_COPY && kernel != BS_K_GEMM &&
                                  kernel != BS_K_ATTN_MERGE && kernel != BS_K_ELEMWISE))
        continue;
      double mt = bs_calib_model_time(p, k);
      if (!(mt > 0)) continue;
      m[n] = mt;
      t[n++] = k->t_eff;
    }
    if (!n) continue;
    bs_fit_quality q;
    bs_fit_quality_of(m, t, n, &q);
    cJSON_AddItemToObject(c, bs_kernel_name((bs_kernel)kernel), quality_json(&q));
  }
  return c;
}
/* Each attention table gets its storage type ("dtype", ignored by the loader: the simulator reads the
 * first table per head_dim and mask) and each attention kernel its fits. */
static void tag_tables(cJSON *root, cJSON *fits, const bs_profile *p, const table_types *types) {
  cJSON *ks = cJSON_GetObjectItemCaseSensitive(root, "kernels");
  for (int ki = 0; ki < N_ATTN; ki++) {
    int kernel = attn_kernels[ki];
    cJSON *kj = cJSON_GetObjectItemCaseSensitive(ks, bs_kernel_name((bs_kernel)kernel));
    cJSON *ts = cJSON_GetObjectItemCaseSensitive(kj, "tables");
    cJSON *fk = cJSON_GetObjectItemCaseSensitive(fits, bs_kernel_name((bs_kernel)kernel));
    int t = 0;
    cJSON *tj;
    cJSON_ArrayForEach(tj, ts) {
      int bf16 = t < p->kernel[kernel].ntables ? types->table_bf16[kernel][t] : 0;
      cJSON_AddStringToObject(tj, "dtype", bf16 ? "bf16" : "fp32");
      t++;
    }
    if (kj && fk) cJSON_AddItemReferenceToObject(kj, "fits", fk);
  }
}

static void machine_json(cJSON *root, const bs_calib_data *d) {
  cJSON *mj = cJSON_AddObjectToObject(root, "machine");
  cJSON_AddStringToObject(mj, "uname", d->machine);
  cJSON_AddStringToObject(mj, "cpu_model", d->cpu_model);
  num_obj(mj, "cores", d->cores);
  num_obj(mj, "memory_bytes", (double)d->mem_total);
  cJSON_AddStringToObject(mj, "fma_isa", d->isa);
  cJSON_AddStringToObject(mj, "kernel_path", d->kernel_path);
  cJSON_AddStringToObject(root, "date", d->date);
}

static void calibration_json(cJSON *root, const bs_calib_data *d, const bs_calib_opts *o) {
  cJSON *cj = cJSON_AddObjectToObject(root, "calibration");
  num_obj(cj, "ranks", d->ranks);
  num_obj(cj, "threads_per_rank", d->threads);
  num_obj(cj, "nodes", d->nodes);
  num_obj(cj, "pingpong_peer_intra", d->peer_intra);
  num_obj(cj, "pingpong_peer_inter", d->peer_inter);
  cJSON_AddBoolToObject(cj, "quick", d->quick);
  num_obj(cj, "wall_s", d->wall_s);
  num_obj(cj, "tile_rows", BS_COMPUTE_TILE_ROWS);
  num_obj(cj, "fma_peak_flops", d->fma_peak);
  num_obj(cj, "memcpy_Bps", d->copy_Bps);
  cJSON_AddStringToObject(cj, "primary_dtype", o->primary_bf16 ? "bf16" : "fp32");
  cJSON_AddStringToObject(
    cj, "time_convention",
    "kernel times: median over repetitions of the slowest rank, all ranks running the kernel at once, "
    "divided by the number of ranks");
}

cJSON *bs_calib_profile_json(const bs_calib_data *d, const bs_calib_opts *o, const char *name, bs_profile *p, char *err,
                             size_t errlen) {
  cJSON *fits = cJSON_CreateObject(), *links_fit = cJSON_CreateObject(), *root = NULL;
  table_types *types = calloc(1, sizeof *types);
  if (!fits || !links_fit || !types) {
    snprintf(err, errlen, "calib: out of memory");
    goto fail;
  }
  if (build_profile(d, o, name, p, fits, links_fit, types, err, errlen)) goto fail;
  int nkm = 0;
  for (int k = 0; k < BS_K_COUNT; k++) nkm += p->kernel[k].kind != BS_KM_NONE;
  if (!nkm && !o->no_kernels) {
    snprintf(err, errlen, "calib: no kernel model could be fitted");
    goto fail;
  }
  char source[400];
  snprintf(source, sizeof source,
           "burstsim calib %s on %s (%d rank(s) x %d thread(s)); fits and raw measurements in this file", d->date,
           d->cpu_model, d->ranks, d->threads);
  root = bs_profile_to_json(p, source);
  if (!root) {
    snprintf(err, errlen, "calib: out of memory");
    goto fail;
  }
  tag_tables(root, fits, p, types);
  cJSON_ReplaceItemInObject(root, "name", cJSON_CreateString(name));
  int heads = 1; /* heads per attention launch, as the points were measured */
  for (int i = 0; i < d->nk; i++)
    if (d->k[i].heads > heads) heads = d->k[i].heads;
  char desc[640];
  if (strcmp(d->kernel_path, "cuda") == 0)
    snprintf(desc, sizeof desc,
             "Measured by burstsim calib --backend cuda on the GPU(s) of this machine, for the host topology: "
             "kernel times are the device's (ranks sharing a device count as the CPU's ranks do: time with all "
             "busy / ranks), attention on launches of %d heads as the runtime launches every head at once, "
             "GEMMs in fp32 (the runtime's projections on scratch); links: NCCL where every rank has its own "
             "GPU, else Open MPI between host buffers (the runtime's staging copies between device and host are "
             "not in them)",
             heads);
  else
    snprintf(desc, sizeof desc,
             "Measured by burstsim calib on this machine for the host topology: every rank an actor on one shared "
             "CPU; kernel times are whole-CPU-equivalent (time with all ranks busy / ranks)");
  cJSON_AddStringToObject(root, "description", desc);
  machine_json(root, d);
  calibration_json(root, d, o);
  cJSON_AddItemToObject(root, "fits", fits);
  cJSON_AddItemToObject(root, "links_fit", links_fit);
  cJSON_AddItemToObject(root, "profile_check", profile_check(d, p, o->primary_bf16 ? 1 : 0));
  cJSON_AddItemToObject(root, "measurements", measurements_json(d));
  free(types);
  return root;
fail:
  cJSON_Delete(fits);
  cJSON_Delete(links_fit);
  free(types);
  return NULL;
}
