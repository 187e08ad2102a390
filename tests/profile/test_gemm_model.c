/*
 * test_gemm_model.c — the "tiled" GEMM model of profile/profile.c against hand
 * arithmetic (a shape that fills its waves, one that wastes most of a wave,
 * tile padding, the tile orientation, the K overhead, the memory bound), the
 * shipped GPU profiles against the figures their sources cite, and the round
 * trip of the model through the profile writer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/run_named.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile/profile.h"

#define assert_rel(got, want, rel)                                                              \
  do {                                                                                          \
    double g_ = (got), w_ = (want);                                                             \
    if (!(fabs(g_ - w_) <= (rel)*fabs(w_)))                                                     \
      fail_msg("%s = %.12g, expected %.12g within %g (relative)", #got, g_, w_, (double)(rel)); \
  } while (0)

/* A profile with only the tiled GEMM: 1 PFLOP/s, 100 TB/s (compute-bound unless said otherwise). */
static void toy_profile(bs_profile *p) {
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "toy");
  p->memory_bytes = 1e11;
  p->peak_flops = 1e15;
  p->mem_bw_Bps = 1e14;
  snprintf(p->net_model, sizeof p->net_model, "CM02");
  bs_kernel_model *g = &p->kernel[BS_K_GEMM];
  g->kind = BS_KM_TILED;
  g->launch_s = 5e-6;
  g->peak_fraction = 0.8;
  g->bw_efficiency = 0.9;
  g->tile_m = 128;
  g->tile_n = 256;
  g->sms = 132;
  g->k_overhead = 0;
}

static bs_compute gemm(int64_t m, int64_t n, int64_t k) {
  bs_compute c;
  memset(&c, 0, sizeof c);
  c.kernel = BS_K_GEMM;
  c.m = m;
  c.n = n;
  c.k = k;
  c.flops = 2.0 * (double)m * (double)n * (double)k;
  return c;
}

static double time_of(const bs_profile *p, const bs_compute *c) {
  char err[256] = "";
  double t = bs_profile_kernel_time(p, c, BS_BF16, err, sizeof err);
  if (!(t >= 0)) fail_msg("kernel time failed: %s", err);
  return t;
}

/* 1536 x 2816 = 12 x 11 tiles of 128 x 256 = 132 tiles: one full wave, no padding: peak x fraction. */
static void test_exact_wave(void **st) {
  (void)st;
  static bs_profile p;
  toy_profile(&p);
  bs_compute c = gemm(1536, 2816, 4096);
  assert_rel(time_of(&p, &c), 5e-6 + c.flops / (1e15 * 0.8), 1e-12);
}

/* 1536 x 3072 = 12 x 12 = 144 tiles: 2 waves of 132, the second holding 12: 144 / 264 of the rate. */
static void test_wasted_wave(void **st) {
  (void)st;
  static bs_profile p;
  toy_profile(&p);
  bs_compute c = gemm(1536, 3072, 4096);
  double want = 5e-6 + c.flops / (1e15 * 0.8 * 144.0 / 264.0);
  assert_rel(time_of(&p, &c), want, 1e-12);
  /* Hand arithmetic the other way: each wave costs one tile's time on one SM. */
  double wave = 2.0 * 128 * 256 * 4096 / (1e15 * 0.8 / 132);
  assert_rel(time_of(&p, &c), 5e-6 + 2 * wave, 1e-12);
}

/* 1000 x 2816: 1000 rows padded to 1024 (8 tiles of 128), 88 tiles in one wave of 132. */
static void test_tile_padding(void **st) {
  (void)st;
  static bs_profile p;
  toy_profile(&p);
  bs_compute c = gemm(1000, 2816, 2048);
  double q = (1000.0 * 2816) / (132.0 * 128 * 256);
  assert_rel(time_of(&p, &c), 5e-6 + c.flops / (1e15 * 0.8 * q), 1e-12);
  /* Against the fully used 1024 x 2816 (88 tiles too): the same time, more useful work there. */
  bs_compute full = gemm(1024, 2816, 2048);
  assert_rel(time_of(&p, &c), time_of(&p, &full), 1e-12);
}

/* 640 x 33792: 128 x 256 tiles give 5 x 132 = 660 tiles (5 full waves); 256 x 128 would give 3 x 264 =
 * 792 (6 waves). The model takes the better orientation. */
static void test_orientation(void **st) {
  (void)st;
  static bs_profile p;
  toy_profile(&p);
  bs_compute c = gemm(640, 33792, 1024);
  assert_rel(time_of(&p, &c), 5e-6 + c.flops / (1e15 * 0.8), 1e-12);
  p.kernel[BS_K_GEMM].tile_m = 256; /* the same candidates named the other way round */
  p.kernel[BS_K_GEMM].tile_n = 128;
  assert_rel(time_of(&p, &c), 5e-6 + c.flops / (1e15 * 0.8), 1e-12);
}

/* k_overhead: a fixed per-tile cost of K elements; at k = k_overhead the rate halves. */
static void test_k_overhead(void **st) {
  (void)st;
  static bs_profile p;
  toy_profile(&p);
  p.kernel[BS_K_GEMM].k_overhead = 64;
  bs_compute c = gemm(1536, 2816, 64);
  assert_rel(time_of(&p, &c), 5e-6 + c.flops / (1e15 * 0.8 * 0.5), 1e-12);
  c = gemm(1536, 2816, 4096);
  assert_rel(time_of(&p, &c), 5e-6 + c.flops / (1e15 * 0.8 * 4096.0 / 4160.0), 1e-12);
}

/* A decode-like GEMM (one row against a 4096 x 12288 bf16 weight) on a slow memory is bytes-bound. */
static void test_memory_bound(void **st) {
  (void)st;
  static bs_profile p;
  toy_profile(&p);
  p.mem_bw_Bps = 2e12;
  bs_compute c = gemm(1, 12288, 4096);
  double bytes = (1.0 * 4096 + 4096.0 * 12288 + 12288.0) * 2;
  double tf = c.flops / (1e15 * 0.8 * (12288.0 / (132.0 * 128 * 256)));
  double tb = bytes / (2e12 * 0.9);
  assert_true(tb > tf);
  assert_rel(time_of(&p, &c), 5e-6 + tb, 1e-12);
}

/* A batched op (one GEMM per head, flops = heads x 2mnk, as the materialised plans emit): heads x tiles. */
static void test_batched(void **st) {
  (void)st;
  static bs_profile p;
  toy_profile(&p);
  bs_compute c = gemm(1024, 1024, 128); /* 8 x 4 = 32 tiles per head */
  c.flops *= 33;                        /* 33 heads: 1056 tiles = 8 full waves */
  assert_rel(time_of(&p, &c), 5e-6 + c.flops / (1e15 * 0.8), 1e-12);
  c.flops = c.flops / 33 * 34; /* 1088 tiles: 9 waves */
  assert_rel(time_of(&p, &c), 5e-6 + c.flops / (1e15 * 0.8 * 1088.0 / (9 * 132)), 1e-12);
}

/* The shipped GPU profiles: a large square GEMM that fills every wave reaches peak x peak_fraction. */
static void test_large_square_peak(void **st) {
  (void)st;
  static bs_profile p;
  char err[512];
  static const struct {
    const char *name;
    int64_t n;
  } cases[] = {
    {"a100-sxm4-80gb", 256 * 108}, {"a100-pcie-40gb", 256 * 108}, {"h100-sxm", 256 * 132}, {"h200", 256 * 132}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (bs_profile_load(cases[i].name, &p, err, sizeof err)) fail_msg("%s", err);
    const bs_kernel_model *g = &p.kernel[BS_K_GEMM];
    assert_int_equal(g->kind, BS_KM_TILED);
    bs_compute c = gemm(cases[i].n, cases[i].n, 8192);
    double rate = c.flops / (time_of(&p, &c) - g->launch_s);
    assert_rel(rate, p.peak_flops * g->peak_fraction, 1e-9);
  }
}

/* ... and the measured figures their peak_fraction sources cite, at the measured shapes (M x N x K). */
static void test_cited_figures(void **st) {
  (void)st;
  static bs_profile p;
  char err[512];
  static const struct {
    const char *name;
    int64_t m, n, k;
    double tflops;
  } cases[] = {
    {"h200", 8192, 8192, 8192,
     770.0}, /* H200 SXM measurement (cuBLAS bf16 8192^3 GEMM 770-798 TFLOP/s, device-to-device copy 4.3 TB/s), low end */
    {"h100-sxm", 8192, 8192, 8192, 770.0},        /* the same figure, derived for the H100 */
    {"a100-sxm4-80gb", 1024, 10240, 5120, 271.2}, /* stas00/ml-engineering MAMF table */
    {"a100-pcie-40gb", 2048, 5120, 6144, 252.9},  /* same table */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (bs_profile_load(cases[i].name, &p, err, sizeof err)) fail_msg("%s", err);
    bs_compute c = gemm(cases[i].m, cases[i].n, cases[i].k);
    double tflops = c.flops / (time_of(&p, &c) - p.kernel[BS_K_GEMM].launch_s) / 1e12;
    /* peak_fraction is written with 4 digits */
    assert_rel(tflops, cases[i].tflops, 1e-3);
  }
}

/* The writer keeps the model: save, reload, the same parameters and the same times. */
static void test_round_trip(void **st) {
  (void)st;
  static bs_profile p, q;
  char err[512], path[64];
  snprintf(path, sizeof path, "/tmp/bs_gemm_model_%ld.json", (long)getpid());
  toy_profile(&p);
  p.kernel[BS_K_GEMM].k_overhead = 48.5;
  p.kernel[BS_K_GEMM].sms = 108;
  if (bs_profile_save(&p, path, "test", err, sizeof err)) fail_msg("%s", err);
  if (bs_profile_load(path, &q, err, sizeof err)) fail_msg("%s", err);
  unlink(path);
  const bs_kernel_model *a = &p.kernel[BS_K_GEMM], *b = &q.kernel[BS_K_GEMM];
  assert_int_equal(b->kind, BS_KM_TILED);
  assert_true(a->launch_s == b->launch_s && a->peak_fraction == b->peak_fraction &&
              a->bw_efficiency == b->bw_efficiency && a->k_overhead == b->k_overhead);
  assert_true(a->tile_m == b->tile_m && a->tile_n == b->tile_n && a->sms == b->sms);
  static const int64_t shapes[][3] = {{1, 4096, 4096}, {1000, 2816, 2048}, {16384, 4096, 11008}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    bs_compute c = gemm(shapes[i][0], shapes[i][1], shapes[i][2]);
    assert_true(time_of(&p, &c) == time_of(&q, &c));
  }
}

/* model.fp8: an FP8 GEMM runs at the FP8 peak with one-byte operands (compute-bound: the exact wave
 * at 2 PFLOP/s; memory-bound: half the operand bytes); a profile without an FP8 rate refuses it;
 * the key survives the writer; the shipped Hopper profiles carry the datasheet's dense FP8 figure. */
static void test_fp8(void **st) {
  (void)st;
  static bs_profile p, q;
  toy_profile(&p);
  bs_compute c = gemm(1536, 2816, 4096);
  c.fp8 = 1;
  char err[512] = "";
  assert_true(bs_profile_kernel_time(&p, &c, BS_BF16, err, sizeof err) < 0);
  assert_non_null(strstr(err, "model.fp8: profile toy has no FP8 GEMMs"));
  p.peak_flops_fp8 = 2e15;
  assert_rel(time_of(&p, &c), 5e-6 + c.flops / (2e15 * 0.8), 1e-12);
  p.mem_bw_Bps = 2e12;
  bs_compute v = gemm(1, 12288, 4096);
  v.fp8 = 1;
  assert_rel(time_of(&p, &v), 5e-6 + (1.0 * 4096 + 4096.0 * 12288 + 12288.0) / (2e12 * 0.9), 1e-12);
  char path[64];
  snprintf(path, sizeof path, "/tmp/bs_gemm_fp8_%ld.json", (long)getpid());
  if (bs_profile_save(&p, path, "test", err, sizeof err)) fail_msg("%s", err);
  if (bs_profile_load(path, &q, err, sizeof err)) fail_msg("%s", err);
  unlink(path);
  assert_true(q.peak_flops_fp8 == 2e15);
  if (bs_profile_load("h100-sxm", &q, err, sizeof err)) fail_msg("%s", err);
  assert_true(q.peak_flops_fp8 == 1979e12);
  if (bs_profile_load("a100-sxm4-80gb", &q, err, sizeof err)) fail_msg("%s", err);
  assert_true(q.peak_flops_fp8 == 0);
}

/* gemm.peak_fraction_fp8: FP8 GEMMs reach their own fraction of the FP8 peak (compute-bound: the exact
 * wave at 2 PFLOP/s x 0.7), absent it BF16's; it survives the writer; the shipped H100 holds the FP8
 * over BF16 efficiency of the same card's best matmuls (1402.6 / 1979 against 794.5 / 989, stas00/
 * ml-engineering) times its BF16 peak_fraction, and BF16 GEMMs do not move. */
static void test_fp8_fraction(void **st) {
  (void)st;
  static bs_profile p, q;
  toy_profile(&p);
  p.peak_flops_fp8 = 2e15;
  bs_compute c = gemm(1536, 2816, 4096), b = c;
  c.fp8 = 1;
  double bf16 = time_of(&p, &b);
  p.kernel[BS_K_GEMM].peak_fraction_fp8 = 0.7;
  assert_rel(time_of(&p, &c), 5e-6 + c.flops / (2e15 * 0.7), 1e-12);
  assert_true(time_of(&p, &b) == bf16);
  char path[64], err[512] = "";
  snprintf(path, sizeof path, "/tmp/bs_gemm_fp8f_%ld.json", (long)getpid());
  if (bs_profile_save(&p, path, "test", err, sizeof err)) fail_msg("%s", err);
  if (bs_profile_load(path, &q, err, sizeof err)) fail_msg("%s", err);
  unlink(path);
  assert_true(q.kernel[BS_K_GEMM].peak_fraction_fp8 == 0.7);
  if (bs_profile_load("h100-sxm", &q, err, sizeof err)) fail_msg("%s", err);
  const bs_kernel_model *g = &q.kernel[BS_K_GEMM];
  assert_rel(g->peak_fraction_fp8, g->peak_fraction * (1402.6 / 1979) / (794.5 / 989), 1e-4);
}

/* Roofline GEMMs (old profiles, the shipped host profile) keep their formula. */
static void test_roofline_kept(void **st) {
  (void)st;
  static bs_profile p;
  toy_profile(&p);
  bs_kernel_model *g = &p.kernel[BS_K_GEMM];
  memset(g, 0, sizeof *g);
  g->kind = BS_KM_ROOFLINE;
  g->launch_s = 1e-6;
  g->efficiency = 0.5;
  bs_compute c = gemm(1000, 3000, 64);
  double bytes = (1000.0 * 64 + 64.0 * 3000 + 1000.0 * 3000) * 2;
  double tb = bytes / (1e14 * 0.5), tf = c.flops / (1e15 * 0.5);
  assert_rel(time_of(&p, &c), 1e-6 + (tb > tf ? tb : tf), 1e-12);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_exact_wave),   cmocka_unit_test(test_wasted_wave),       cmocka_unit_test(test_tile_padding),
    cmocka_unit_test(test_orientation),  cmocka_unit_test(test_k_overhead),        cmocka_unit_test(test_memory_bound),
    cmocka_unit_test(test_batched),      cmocka_unit_test(test_large_square_peak), cmocka_unit_test(test_cited_figures),
    cmocka_unit_test(test_round_trip),   cmocka_unit_test(test_roofline_kept),     cmocka_unit_test(test_fp8),
    cmocka_unit_test(test_fp8_fraction),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
