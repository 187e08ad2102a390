/*
 * test_attention_kernels.c — model.attention_kernel on a toy profile computed by hand: the
 * default kernel's rates are kernels.attn_fwd / attn_bwd, another kernel's come from
 * "attention_kernels", a kernel the profile holds no rates for is refused naming what it holds,
 * and the shipped Hopper profiles hold FA2 (default), FA3 and cuDNN while the others refuse FA3;
 * an unmasked block of multi-head latent attention (v narrower than q, k) takes the full-mask rates.
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

/* Flat tables: FA2 forward 100 TFLOP/s, backward 50; FA3 forward 200, backward 150; launch 10 us. */
#define FLAT(rate)                                                                                         \
  "\"tables\": [{\"head_dim\": 128, \"mask\": \"full\", \"x\": [512, 65536], \"tflops\": [" rate ", " rate \
  "], \"source\": \"s\"}]"
#define LAUNCH "\"launch_s\": {\"value\": 1e-5, \"source\": \"s\"}"
static const char *toy =
  "{\"format\": 1, \"name\": \"toy\",\n"
  " \"device\": {\"memory_bytes\": {\"value\": 8e10, \"source\": \"s\"},\n"
  "            \"peak_flops\": {\"value\": 1e15, \"source\": \"s\"},\n"
  "            \"mem_bw_Bps\": {\"value\": 3e12, \"source\": \"s\"}},\n"
  " \"kernels\": {\n"
  "  \"attn_fwd\": {\"model\": \"table\", " LAUNCH ", " FLAT("100") "},\n"
  "  \"attn_bwd\": {\"model\": \"table\", " LAUNCH ", " FLAT("50") "}},\n"
  " \"attention_kernels\": {\"default\": {\"value\": \"fa2\", \"source\": \"s\"},\n"
  "  \"fa3\": {\"attn_fwd\": {\"model\": \"table\", " LAUNCH ", " FLAT("200") "},\n"
  "          \"attn_bwd\": {\"model\": \"table\", " LAUNCH ", " FLAT("150") "}}},\n"
  " \"links\": {\"nvlink\": {\"bandwidth_Bps\": {\"value\": 2e11, \"source\": \"s\"},\n"
  "   \"latency_s\": {\"value\": 1e-6, \"source\": \"s\"}, \"source\": \"s\"}}}\n";

static char path[64];

static int write_toy(const char *text) {
  snprintf(path, sizeof path, "/tmp/bs_attnk_%d.json", (int)getpid());
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fputs(text, f);
  fclose(f);
  return 0;
}

/* One full (unmasked) block of 8 heads, 4096 x 4096 tokens, d = 128: F = 4 x 8 x 4096^2 x 128. */
static bs_compute block(bs_kernel k) {
  bs_compute c;
  memset(&c, 0, sizeof c);
  c.kernel = k;
  c.a.B = 1;
  c.a.Zq = 8;
  c.a.Nq = c.a.Nk = 4096;
  c.a.d = 128;
  double f = 4.0 * 8 * 4096.0 * 4096.0 * 128;
  c.flops = k == BS_K_ATTN_BWD ? 2.5 * f : f;
  return c;
}

static double t(const bs_profile *p, bs_kernel k) {
  char err[256];
  bs_compute c = block(k);
  return bs_profile_kernel_time(p, &c, BS_BF16, err, sizeof err);
}

static void test_by_hand(void **state) {
  (void)state;
  assert_int_equal(write_toy(toy), 0);
  bs_profile *p = calloc(1, sizeof *p);
  char err[512];
  assert_int_equal(bs_profile_load(path, p, err, sizeof err), 0);
  const double f = 4.0 * 8 * 4096.0 * 4096.0 * 128; /* 68.72 GFLOP */
  /* as loaded and with default or fa2: the FA2 tables */
  assert_true(fabs(t(p, BS_K_ATTN_FWD) - (1e-5 + f / 100e12)) < 1e-12);
  assert_true(fabs(t(p, BS_K_ATTN_BWD) - (1e-5 + 2.5 * f / 50e12)) < 1e-12);
  /* fa3: 10 us + 0.3436 ms forward, 10 us + 1.1453 ms backward */
  assert_int_equal(bs_profile_use_attention(p, BS_ATTN_KERNEL_FA3, err, sizeof err), 0);
  assert_true(fabs(t(p, BS_K_ATTN_FWD) - (1e-5 + f / 200e12)) < 1e-12);
  assert_true(fabs(t(p, BS_K_ATTN_BWD) - (1e-5 + 2.5 * f / 150e12)) < 1e-12);
  /* back to the default, then fa2 by name: the FA2 tables again */
  assert_int_equal(bs_profile_use_attention(p, BS_ATTN_KERNEL_DEFAULT, err, sizeof err), 0);
  assert_true(fabs(t(p, BS_K_ATTN_FWD) - (1e-5 + f / 100e12)) < 1e-12);
  assert_int_equal(bs_profile_use_attention(p, BS_ATTN_KERNEL_FA3, err, sizeof err), 0);
  assert_int_equal(bs_profile_use_attention(p, BS_ATTN_KERNEL_FA2, err, sizeof err), 0);
  assert_true(fabs(t(p, BS_K_ATTN_BWD) - (1e-5 + 2.5 * f / 50e12)) < 1e-12);
  /* cudnn: none in the toy, refused naming what it holds */
  assert_int_equal(bs_profile_use_attention(p, BS_ATTN_KERNEL_CUDNN, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.attention_kernel: profile toy holds no cudnn rates; it holds fa2, fa3"));
  free(p);
  unlink(path);
}

/* Full-mask tables at 100 (forward) and 50 (backward) TFLOP/s, causal ones at 10: an MLA block (q, k
 * of 192 columns, v of 128) with every key visible does 2 (192 + 128) FLOPs per pair and head
 * forward, 2 (3 x 192 + 2 x 128) backward, and is timed at the full-mask rate (a block counted as
 * 4 x 192 per pair would look masked, and take the causal rate). */
static const char *toy_masks =
  "{\"format\": 1, \"name\": \"toy\",\n"
  " \"device\": {\"memory_bytes\": {\"value\": 8e10, \"source\": \"s\"},\n"
  "            \"peak_flops\": {\"value\": 1e15, \"source\": \"s\"},\n"
  "            \"mem_bw_Bps\": {\"value\": 3e12, \"source\": \"s\"}},\n"
  " \"kernels\": {\n"
  "  \"attn_fwd\": {\"model\": \"table\", " LAUNCH
  ", \"tables\": ["
  "{\"head_dim\": 128, \"mask\": \"full\", \"x\": [512, 65536], \"tflops\": [100, 100], \"source\": \"s\"},"
  "{\"head_dim\": 128, \"mask\": \"causal\", \"x\": [512, 65536], \"tflops\": [10, 10], \"source\": \"s\"}]},\n"
  "  \"attn_bwd\": {\"model\": \"table\", " LAUNCH
  ", \"tables\": ["
  "{\"head_dim\": 128, \"mask\": \"full\", \"x\": [512, 65536], \"tflops\": [50, 50], \"source\": \"s\"},"
  "{\"head_dim\": 128, \"mask\": \"causal\", \"x\": [512, 65536], \"tflops\": [10, 10], \"source\": \"s\"}]}},\n"
  " \"links\": {\"nvlink\": {\"bandwidth_Bps\": {\"value\": 2e11, \"source\": \"s\"},\n"
  "   \"latency_s\": {\"value\": 1e-6, \"source\": \"s\"}, \"source\": \"s\"}}}\n";

static void test_mla_full_block(void **state) {
  (void)state;
  assert_int_equal(write_toy(toy_masks), 0);
  bs_profile *p = calloc(1, sizeof *p);
  char err[512];
  assert_int_equal(bs_profile_load(path, p, err, sizeof err), 0);
  bs_compute c = block(BS_K_ATTN_FWD);
  c.a.d = 192;
  c.a.dv = 128;
  const double pairs = 8 * 4096.0 * 4096.0; /* 134,217,728 */
  c.flops = 2.0 * (192 + 128) * pairs;      /* 85.9 GFLOP */
  assert_true(fabs(bs_profile_kernel_time(p, &c, BS_BF16, err, sizeof err) - (1e-5 + c.flops / 100e12)) < 1e-12);
  c.kernel = BS_K_ATTN_BWD;
  c.flops = 2.0 * (3 * 192 + 2 * 128) * pairs; /* 223.3 GFLOP */
  assert_true(fabs(bs_profile_kernel_time(p, &c, BS_BF16, err, sizeof err) - (1e-5 + c.flops / 50e12)) < 1e-12);
  free(p);
  unlink(path);
}

static void test_bad_input(void **state) {
  (void)state;
  static const struct {
    const char *from, *to, *needle;
  } cases[] = {
    {"\"fa3\": {", "\"fa4\": {", "attention_kernels.fa4: unknown kernel (default, fa2, fa3, cudnn)"},
    {"{\"value\": \"fa2\", \"source\": \"s\"}", "{\"value\": \"fa5\", \"source\": \"s\"}",
     "attention_kernels.default: {\"value\": fa2 | fa3 | cudnn"},
    {"\"default\": {\"value\": \"fa2\", \"source\": \"s\"},", "", "attention_kernels.default: missing"},
    {"{\"value\": \"fa2\", \"source\": \"s\"}", "{\"value\": \"fa3\", \"source\": \"s\"}",
     "attention_kernels.fa3: the default's rates are kernels.attn_fwd / attn_bwd"},
    {"\"fa3\": {\"attn_fwd\": {\"model\": \"table\"", "\"fa3\": {\"attn_fwx\": {\"model\": \"table\"",
     "attention_kernels.fa3.attn_fwd: missing"},
    {"\"fa3\": {\"attn_fwd\": {\"model\": \"table\"", "\"fa3\": {\"attn_fwd\": {\"model\": \"lookup\"",
     "attention_kernels.fa3.attn_fwd.model: unknown 'lookup'"},
    {" \"attention_kernels\": {", " \"attention_kernels\": 5, \"x\": {", "attention_kernels: not an object"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *at = strstr(toy, cases[i].from);
    assert_non_null(at);
    char text[4096];
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - toy), toy, cases[i].to, at + strlen(cases[i].from));
    assert_int_equal(write_toy(text), 0);
    bs_profile *p = calloc(1, sizeof *p);
    char err[512] = "";
    int rc = bs_profile_load(path, p, err, sizeof err);
    if (rc != -1 || !strstr(err, cases[i].needle) || !strstr(err, path))
      fail_msg("case %zu: rc %d, '%s' lacks '%s'", i, rc, err, cases[i].needle);
    free(p);
  }
  unlink(path);
}

/* The shipped profiles: Hopper ones hold fa2 (default), fa3 and cudnn; an A100 refuses fa3. */
static void test_shipped(void **state) {
  (void)state;
  bs_profile *p = calloc(1, sizeof *p);
  char err[512];
  const char *hopper[] = {"h100-sxm", "h100-sxm-96gb", "h800-sxm5", "h200"};
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(bs_profile_load(hopper[i], p, err, sizeof err), 0);
    assert_int_equal(p->attn_default, BS_ATTN_KERNEL_FA2);
    double fa2 = t(p, BS_K_ATTN_FWD);
    assert_int_equal(bs_profile_use_attention(p, BS_ATTN_KERNEL_FA3, err, sizeof err), 0);
    double fa3 = t(p, BS_K_ATTN_FWD);
    assert_int_equal(bs_profile_use_attention(p, BS_ATTN_KERNEL_CUDNN, err, sizeof err), 0);
    double cudnn = t(p, BS_K_ATTN_FWD);
    /* FA3 paper Fig. 5c at 4k, d = 128: FA2 368, cuDNN 609, FA3 638 TFLOP/s */
    assert_true(fa3 < cudnn && cudnn < fa2);
  }
  assert_int_equal(bs_profile_load("a100-sxm4-80gb", p, err, sizeof err), 0);
  assert_int_equal(bs_profile_use_attention(p, BS_ATTN_KERNEL_FA3, err, sizeof err), -1);
  assert_non_null(strstr(err, "holds no fa3 rates (FlashAttention-3 is written for Hopper, sm90)"));
  free(p);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_by_hand),
    cmocka_unit_test(test_mla_full_block),
    cmocka_unit_test(test_bad_input),
    cmocka_unit_test(test_shipped),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
