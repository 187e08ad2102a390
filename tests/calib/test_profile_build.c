/*
 * test_profile_build.c — the profile a calibration builds from its points
 * (calib/profile_build.h), on synthetic points whose answer is known by hand.
 *
 * Memory bandwidth: the profile starts from memcpy's rate and raises it when a
 * streaming kernel (delta, merge, ...) ran faster than memcpy would allow. On
 * a busy machine a short series can come back quantised to the scheduler's
 * tick, the same 8 ms at every size: its fitted slope is near zero, and
 * 1 / slope would claim an absurd bandwidth (a calibration failed that way
 * with 3e17 B/s). The raise may never exceed what the kernel's fastest point
 * shows. Hand count: delta over R rows of d = 64 fp32 moves R (64 x 4 + 64 x 4
 * + 4) = 516 R bytes; at 1e10 B/s, R = 65536 takes 3.4 ms, under the 8 ms
 * measured, so no point beats memcpy and the bandwidth stays 1e10 B/s. A
 * clean series measured twice as fast as memcpy raises it to 2e10 B/s.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include <cmocka.h>
#include "calib/profile_build.h"
#include "plans/plan.h"

static const int64_t rows[3] = {1024, 8192, 65536};

/* A one-rank calibration with only a delta series, its times from t_of(bytes). */
static double build(double (*t_of)(double bytes)) {
  bs_calib_kpoint k[3];
  memset(k, 0, sizeof k);
  for (int i = 0; i < 3; i++) {
    k[i].kernel = BS_K_ATTN_DELTA;
    snprintf(k[i].series, sizeof k[i].series, "d64/fp32");
    k[i].d = 64;
    k[i].nq = rows[i];
    k[i].elems = rows[i] * 64;
    k[i].flops = 2.0 * (double)k[i].elems;
    k[i].t_med = k[i].t_min = k[i].t_max = k[i].t_eff = t_of(516.0 * (double)rows[i]);
    k[i].reps = 3;
  }
  bs_calib_data d;
  memset(&d, 0, sizeof d);
  d.k = k;
  d.nk = 3;
  d.ranks = d.threads = d.nodes = 1;
  d.cores = 2;
  d.peer_intra = d.peer_inter = -1;
  d.fma_peak = 1e11;
  d.copy_Bps = 1e10;
  d.mem_total = (int64_t)1 << 34;
  snprintf(d.isa, sizeof d.isa, "avx2");
  snprintf(d.kernel_path, sizeof d.kernel_path, "avx2");
  bs_calib_opts o;
  bs_calib_opts_default(&o);
  o.no_links = 1;
  bs_profile p;
  char err[256] = "";
  cJSON *j = bs_calib_profile_json(&d, &o, "synthetic", &p, err, sizeof err);
  if (!j) print_error("bs_calib_profile_json: %s\n", err);
  assert_non_null(j);
  cJSON_Delete(j);
  return p.mem_bw_Bps;
}

static double flat_8ms(double bytes) {
  (void)bytes;
  return 8e-3;
}

static double twice_memcpy(double bytes) { return bytes / 2e10; }

static void test_flat_series_keeps_memcpy_bandwidth(void **state) {
  (void)state;
  double bw = build(flat_8ms);
  if (!(fabs(bw - 1e10) <= 1e10 * 1e-9)) {
    print_error("mem_bw_Bps = %g, expected memcpy's 1e10\n", bw);
    fail();
  }
}

static void test_fast_series_raises_bandwidth(void **state) {
  (void)state;
  double bw = build(twice_memcpy);
  if (!(fabs(bw - 2e10) <= 2e10 * 1e-6)) {
    print_error("mem_bw_Bps = %g, expected 2e10\n", bw);
    fail();
  }
}

int main(void) {
  const struct CMUnitTest all[] = {
    cmocka_unit_test(test_flat_series_keeps_memcpy_bandwidth),
    cmocka_unit_test(test_fast_series_raises_bandwidth),
  };
  return cmocka_run_group_tests(all, NULL, NULL);
}
