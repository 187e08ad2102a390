/*
 * test_fit.c — the calibration fits (calib/fit.h) on synthetic data with
 * known parameters and seeded multiplicative noise: the GSL fits must give
 * the parameters back, and reject bad input with a message.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include "calib/fit.h"
#include "calib/measure.h"
#include "calib/profile_build.h"
#include "profile/profile.h"
#include <cjson/cJSON.h>

static uint64_t seed_state;

/* xorshift64*: a uniform in [0, 1). */
static double urand(void) {
  seed_state ^= seed_state >> 12;
  seed_state ^= seed_state << 25;
  seed_state ^= seed_state >> 27;
  return (double)((seed_state * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

static uint64_t fresh_seed(void) {
  uint64_t s = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
  if (getenv("BS_TEST_SEED")) s = strtoull(getenv("BS_TEST_SEED"), NULL, 10);
  seed_state = s ? s : 88172645463325252ull;
  return s;
}

static double noisy(double t, double rel) { return t * (1.0 + rel * (2.0 * urand() - 1.0)); }

#define NEAR(got, want, rel, seed)                                                                                \
  do {                                                                                                            \
    if (!(fabs((got) - (want)) <= (rel)*fabs(want))) {                                                            \
      print_error("%s = %g, expected %g within %g%% (seed %llu; rerun with BS_TEST_SEED)\n", #got, (double)(got), \
                  (double)(want), 100.0 * (rel), (unsigned long long)(seed));                                     \
      fail();                                                                                                     \
    }                                                                                                             \
  } while (0)

static void test_saturating_recovers(void **state) {
  (void)state;
  uint64_t seed = fresh_seed();
  double t0 = 2e-4 + 1e-3 * urand(), rmax = 2e10 + 4e10 * urand(), xh = 200 + 600 * urand();
  double x[12], f[12], t[12];
  int n = 0;
  for (double b = 128; b <= 65536 && n < 12; b *= 2, n++) {
    x[n] = b;
    f[n] = 4.0 * 64 * b * b;
    t[n] = noisy(t0 + f[n] / (rmax * b / (b + xh)), 0.005);
  }
  bs_fit_sat fit;
  char err[160];
  assert_int_equal(bs_fit_saturating(x, f, t, n, &fit, err, sizeof err), 0);
  NEAR(fit.rmax, rmax, 0.03, seed);
  NEAR(fit.xh, xh, 0.15, seed);
  NEAR(fit.t0, t0, 0.15, seed);
  assert_true(fit.q.r2 > 0.999);
  assert_true(fit.q.max_rel_resid < 0.02);
  NEAR(bs_fit_sat_time(&fit, 4096, 4.0 * 64 * 4096 * 4096), t0 + 4.0 * 64 * 4096 * 4096 / (rmax * 4096 / (4096 + xh)),
       0.02, seed);
}

/* A GPU's attention points come from launches of several heads: the profile's table must give back
 * their times (t0 once per launch, not once per head); and decode with more keys than the decode
 * points' table reaches takes the decode rate, not the rate of a block of the same x. */
static void test_table_heads(void **state) {
  (void)state;
  uint64_t seed = fresh_seed();
  const int heads = 16, d = 128;
  double t0 = 1e-5 + 2e-5 * urand(), rmax = 2e14 + 1e14 * urand(), xh = 500 + 1000 * urand();
  bs_calib_data cd;
  memset(&cd, 0, sizeof cd);
  cd.ranks = cd.threads = cd.cores = cd.nodes = 1;
  cd.peer_intra = cd.peer_inter = -1;
  snprintf(cd.kernel_path, sizeof cd.kernel_path, "cuda");
  for (int bwd = 0; bwd < 2; bwd++)
    for (double b = 256; b <= 32768; b *= 2) {
      bs_calib_kpoint *k = bs_calib_add_k(&cd);
      assert_non_null(k);
      k->kernel = bwd ? BS_K_ATTN_BWD : BS_K_ATTN_FWD;
      snprintf(k->series, sizeof k->series, "d%d/full/bf16/block", d);
      k->d = d;
      k->bf16 = 1;
      k->heads = heads;
      k->nq = k->nk = (int64_t)b;
      k->x = b;
      k->flops = heads * (bwd ? 10.0 : 4.0) * d * b * b;
      k->t_med = k->t_min = k->t_max = k->t_eff = noisy(t0 + k->flops / (rmax * b / (b + xh)), 0.002);
      k->reps = 5;
    }
  /* decode: one query row per head against nk keys, bound by reading K and V (bf16) */
  double bw = 2e12 + 2e12 * urand();
  for (double nk = 1024; nk <= 262144; nk *= 4) {
    bs_calib_kpoint *k = bs_calib_add_k(&cd);
    assert_non_null(k);
    k->kernel = BS_K_ATTN_FWD;
    snprintf(k->series, sizeof k->series, "d%d/full/bf16/decode", d);
    k->d = d;
    k->bf16 = 1;
    k->decode = 1;
    k->heads = heads;
    k->nq = 1;
    k->nk = (int64_t)nk;
    k->x = sqrt(nk);
    k->flops = heads * 4.0 * d * nk;
    k->t_med = k->t_min = k->t_max = k->t_eff = noisy(t0 + heads * 2.0 * nk * d * 2 / bw, 0.002);
    k->reps = 5;
  }
  bs_calib_opts o;
  bs_calib_opts_default(&o);
  o.bf16 = 1;
  o.primary_bf16 = 1;
  o.no_links = 1;
  bs_profile p;
  char err[256];
  struct cJSON *root = bs_calib_profile_json(&cd, &o, "gpu-heads", &p, err, sizeof err);
  if (!root) print_error("%s\n", err);
  assert_non_null(root);
  for (int i = 0; i < cd.nk; i++) {
    const bs_calib_kpoint *k = &cd.k[i];
    double m = bs_calib_model_time(&p, k);
    NEAR(m, k->t_eff, k->decode ? 0.05 : 0.02, seed);
  }
  cJSON_Delete(root);
  free(cd.k);
}

static void test_saturating_bad_input(void **state) {
  (void)state;
  double x[3] = {1, 2, 3}, f[3] = {1, 1, 1}, t[3] = {1, -1, 1};
  bs_fit_sat fit;
  char err[160] = "";
  assert_int_equal(bs_fit_saturating(x, f, t, 2, &fit, err, sizeof err), -1);
  assert_non_null(strstr(err, "at least 3"));
  assert_int_equal(bs_fit_saturating(x, f, t, 3, &fit, err, sizeof err), -1);
  assert_non_null(strstr(err, "positive"));
}

static void test_linear_recovers(void **state) {
  (void)state;
  uint64_t seed = fresh_seed();
  double c0 = 1e-5 + 1e-4 * urand(), c1 = 1.0 / (1e9 + 9e9 * urand());
  double u[10], t[10];
  for (int i = 0; i < 10; i++) {
    u[i] = 1024.0 * pow(4.0, i);
    t[i] = noisy(c0 + c1 * u[i], 0.005);
  }
  bs_fit_lin fit;
  char err[160];
  assert_int_equal(bs_fit_linear(u, t, 10, &fit, err, sizeof err), 0);
  NEAR(fit.c0, c0, 0.05, seed);
  NEAR(fit.c1, c1, 0.02, seed);
  assert_true(fit.q.max_rel_resid < 0.02);
}

/* The GEMM model over attention-score shapes (k = 64, 128) and projection shapes (k = 512 .. 4096). */
static void test_gemm_recovers(void **state) {
  (void)state;
  uint64_t seed = fresh_seed();
  double launch = 2e-5 + 1e-4 * urand(), pf = 0.4 + 0.5 * urand(), k0 = 8 + 100 * urand(), peak = 2e11;
  static const double shapes[][3] = {{256, 256, 64},    {1024, 1024, 64},   {2048, 2048, 128},  {256, 512, 512},
                                     {512, 1024, 1024}, {1024, 2048, 2048}, {2048, 1024, 4096}, {256, 4096, 4096}};
  double t1[8], k[8], t[8];
  for (int i = 0; i < 8; i++) {
    t1[i] = 2.0 * shapes[i][0] * shapes[i][1] * shapes[i][2] / peak;
    k[i] = shapes[i][2];
    t[i] = noisy(launch + t1[i] * (k[i] + k0) / (k[i] * pf), 0.003);
  }
  bs_fit_gemm fit;
  char err[160];
  assert_int_equal(bs_fit_gemm_k(t1, k, t, 8, &fit, err, sizeof err), 0);
  NEAR(fit.peak_fraction, pf, 0.02, seed);
  NEAR(fit.k_overhead, k0, 0.15, seed);
  NEAR(fit.launch_s, launch, 0.3, seed);
  assert_true(fit.q.max_rel_resid < 0.02);
  NEAR(bs_fit_gemm_time(&fit, t1[7], k[7]), launch + t1[7] * (k[7] + k0) / (k[7] * pf), 0.01, seed);
  /* No launch cost and no K dependence in the data: both terms are dropped, not fitted negative. */
  for (int i = 0; i < 8; i++) t[i] = noisy(t1[i] / pf, 0.001);
  assert_int_equal(bs_fit_gemm_k(t1, k, t, 8, &fit, err, sizeof err), 0);
  assert_true(fit.launch_s >= 0 && fit.k_overhead >= 0);
  NEAR(fit.peak_fraction, pf, 0.01, seed);
}

static void test_gemm_bad_input(void **state) {
  (void)state;
  double t1[3] = {1, 2, 3}, k[3] = {64, 0.5, 64}, t[3] = {1, 2, 3};
  bs_fit_gemm fit;
  char err[160] = "";
  assert_int_equal(bs_fit_gemm_k(t1, k, t, 2, &fit, err, sizeof err), -1);
  assert_non_null(strstr(err, "at least 3"));
  assert_int_equal(bs_fit_gemm_k(t1, k, t, 3, &fit, err, sizeof err), -1);
  assert_non_null(strstr(err, "point 1"));
}

/* Two ranges (an eager and a rendezvous protocol) with a jump at 16 KiB. */
static void test_link_finds_break(void **state) {
  (void)state;
  uint64_t seed = fresh_seed();
  double lat1 = 1e-6 + 1e-6 * urand(), bw1 = 2e9 + 2e9 * urand();
  double lat2 = 2e-5 + 2e-5 * urand(), bw2 = 6e9 + 4e9 * urand();
  double b[26], t[26];
  int n = 0;
  for (double s = 8; s <= 256.0 * 1024 * 1024 && n < 26; s *= 2, n++) {
    b[n] = s;
    t[n] = noisy(s < 16384 ? lat1 + s / bw1 : lat2 + s / bw2, 0.005);
  }
  bs_fit_link fit;
  char err[160];
  assert_int_equal(bs_fit_link_piecewise(b, t, n, 3, 3, &fit, err, sizeof err), 0);
  assert_true(fit.nseg >= 2);
  /* The break the search found sits at 16 KiB, whatever else it split. */
  int found = 0;
  for (int s = 1; s < fit.nseg; s++) found |= fit.seg[s].min_bytes == 16384;
  if (!found) {
    print_error("no break at 16384 (seed %llu): %d segments, first break %g\n", (unsigned long long)seed, fit.nseg,
                fit.seg[1].min_bytes);
    fail();
  }
  NEAR(fit.seg[0].lat_s, lat1, 0.1, seed);
  NEAR(fit.seg[fit.nseg - 1].bw_Bps, bw2, 0.05, seed);
  NEAR(bs_fit_link_time(&fit, 1 << 20), lat2 + (1 << 20) / bw2, 0.02, seed);
  assert_true(fit.q.max_rel_resid < 0.03);
}

static void test_link_single_range(void **state) {
  (void)state;
  uint64_t seed = fresh_seed();
  double lat = 5e-6, bw = 3e9 + 3e9 * urand();
  double b[12], t[12];
  for (int i = 0; i < 12; i++) {
    b[i] = 64.0 * pow(4.0, i);
    t[i] = noisy(lat + b[i] / bw, 0.002);
  }
  bs_fit_link fit;
  char err[160];
  assert_int_equal(bs_fit_link_piecewise(b, t, 12, 3, 3, &fit, err, sizeof err), 0);
  assert_int_equal(fit.nseg, 1);
  NEAR(fit.seg[0].bw_Bps, bw, 0.02, seed);
  NEAR(fit.seg[0].lat_s, lat, 0.05, seed);
}

/* Loaded hosts: the first, smallest messages crawl (10 ms where microseconds are due).
 * The best split would make a range a thousand times slower than the bulk, a SimGrid factor
 * no profile accepts; the fit keeps only splits whose factors a profile loads. */
static void test_link_outlier_no_wild_factor(void **state) {
  (void)state;
  uint64_t seed = fresh_seed();
  double lat = 2e-5 + 1e-5 * urand(), bw = 2e9 + 2e9 * urand();
  double b[12], t[12];
  for (int i = 0; i < 12; i++) {
    b[i] = 1024.0 * pow(2.0, i);
    t[i] = noisy(lat + b[i] / bw, 0.01);
  }
  for (int i = 0; i < 3; i++) t[i] = 1e-2 * (1 + 0.5 * i) * (1 + 0.2 * urand()); /* 1-4 KiB in 10-24 ms */
  bs_fit_link fit;
  char err[160];
  assert_int_equal(bs_fit_link_piecewise(b, t, 12, 3, 3, &fit, err, sizeof err), 0);
  for (int s = 0; s < fit.nseg; s++) {
    double r = fit.seg[s].bw_Bps / fit.seg[fit.nseg - 1].bw_Bps;
    double l = fit.seg[0].lat_s > 0 ? fit.seg[s].lat_s / fit.seg[0].lat_s : 1;
    if (!(r >= 1 / BS_FIT_FACTOR_SPAN && r <= BS_FIT_FACTOR_SPAN && l <= BS_FIT_FACTOR_SPAN)) {
      print_error("range %d of %d (seed %llu): bandwidth factor %g, latency factor %g\n", s, fit.nseg,
                  (unsigned long long)seed, r, l);
      fail();
    }
  }
}

static void test_link_bad_input(void **state) {
  (void)state;
  double b[4] = {8, 4, 16, 32}, t[4] = {1, 1, 1, 1};
  bs_fit_link fit;
  char err[160] = "";
  assert_int_equal(bs_fit_link_piecewise(b, t, 4, 3, 3, &fit, err, sizeof err), -1);
  assert_non_null(strstr(err, "increasing"));
}

int main(int argc, char **argv) {
  const struct CMUnitTest all[] = {
    cmocka_unit_test(test_saturating_recovers),  cmocka_unit_test(test_table_heads),
    cmocka_unit_test(test_saturating_bad_input), cmocka_unit_test(test_linear_recovers),
    cmocka_unit_test(test_link_finds_break),     cmocka_unit_test(test_link_single_range),
    cmocka_unit_test(test_link_bad_input),       cmocka_unit_test(test_gemm_recovers),
    cmocka_unit_test(test_gemm_bad_input),       cmocka_unit_test(test_link_outlier_no_wild_factor),
  };
  if (argc > 1) {
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
      if (!strcmp(all[i].name, argv[1])) return _cmocka_run_group_tests(argv[1], &all[i], 1, NULL, NULL);
    fprintf(stderr, "no test %s\n", argv[1]);
    return 2;
  }
  return cmocka_run_group_tests(all, NULL, NULL);
}
