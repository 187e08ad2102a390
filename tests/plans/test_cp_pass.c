/*
 * test_cp_pass.c — parallel.cp_pass = q and workload.cached_tokens at plan
 * level: bytes per rank against hand formulas written from Meta's context-
 * parallel inference paper (arXiv 2411.01783 §3: pass-KV rings the K,V shards;
 * pass-Q rings the query shards and returns the partial outputs and their lse
 * to the owners by one all-to-all), FLOPs against a brute-force count of the
 * visible (query, key) pairs, the memory of the partials, and the bad values.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "plans/plan.h"
#include "plan_walk.h"

static bs_config cfg_of(bs_method m, int G, int64_t N, int64_t C, bs_layout l, int causal, bs_cp_pass pass) {
  bs_config c;
  bs_config_default(&c);
  c.model.heads = 8;
  c.model.kv_heads = 2;
  c.model.head_dim = 16;
  c.model.dtype = BS_BF16;
  c.work.phase = BS_PREFILL;
  c.work.batch = 2;
  c.work.seq_len = N;
  c.work.cached_tokens = C;
  c.work.causal = causal;
  c.par.method = m;
  c.par.gpus = G;
  c.par.layout = l;
  c.par.double_ring = BS_OFF;
  c.par.ranks_per_node = G;
  c.par.cp_pass = pass;
  return c;
}

static void walk(const bs_config *c, walk_result *w) {
  bs_plan *p = NULL;
  char err[256] = "";
  int rc = bs_plan_create(c, c->par.gpus, &p, err, sizeof err);
  if (rc) fprintf(stderr, "plan_create: %s\n", err);
  assert_int_equal(rc, 0);
  rc = plan_walk(p, w);
  if (rc) fprintf(stderr, "walk: %s\n", w->err);
  assert_int_equal(rc, 0);
  bs_plan_free(p);
}

/* Pass-KV: each rank's K,V shard of the whole context (N/G tokens: its part of the cache and of the
 * new tokens) moves G - 1 times. */
static int64_t pass_kv_bytes(const bs_config *c) {
  int64_t G = c->par.gpus, n = c->work.seq_len / G;
  return (G - 1) * 2 * c->work.batch * c->model.kv_heads * n * c->model.head_dim * bs_dtype_bytes(c->model.dtype);
}

/* Pass-Q: the query shard (T/G new tokens, all query heads) moves G - 1 times; the all-to-all sends the
 * G - 1 partial outputs (fp32, [T/G, heads, d]) and their lse (fp32) that belong to the other ranks. */
static int64_t pass_q_bytes(const bs_config *c, int64_t T) {
  int64_t G = c->par.gpus, nq = T / G, B = c->work.batch, Z = c->model.heads, d = c->model.head_dim;
  return (G - 1) * (B * Z * nq * d * bs_dtype_bytes(c->model.dtype) + B * Z * nq * d * 4 + B * Z * nq * 4);
}

/* Visible pairs of T new queries at positions C..N-1 against keys 0..N-1, counted one by one. */
static double brute_pairs(int64_t N, int64_t C, int causal, int64_t window) {
  double n = 0;
  for (int64_t q = C; q < N; q++)
    for (int64_t k = 0; k < N; k++)
      if ((!causal || k <= q) && (window <= 0 || q - k < window)) n += 1;
  return n;
}

static void test_bytes_and_flops(void **st) {
  (void)st;
  const int Gs[] = {1, 2, 3, 4};
  for (int gi = 0; gi < 4; gi++)
    for (int l = 0; l <= BS_STRIPED; l++)
      for (int causal = 0; causal < 2; causal++)
        for (int m = 0; m < 2; m++)
          for (int ci = 0; ci < 3; ci++) {
            const int G = Gs[gi];
            const int64_t unit = 2 * (int64_t)G, N = 8 * unit, C = ci == 0 ? 0 : ci == 1 ? 4 * unit : 7 * unit;
            double want_flops = 4.0 * 2 * 8 * 16 * brute_pairs(N, C, causal, 0);
            for (int pass = 0; pass < 2; pass++) {
              bs_config c = cfg_of(m ? BS_RING : BS_BURST, G, N, C, (bs_layout)l, causal, (bs_cp_pass)pass);
              walk_result w;
              walk(&c, &w);
              int64_t want = pass ? pass_q_bytes(&c, N - C) : pass_kv_bytes(&c);
              double flops = 0;
              for (int r = 0; r < G; r++) {
                if (w.sent[r] + w.coll_sent[r] != want)
                  fprintf(stderr, "G=%d %s causal=%d C=%lld pass %s rank %d: sent %lld + %lld want %lld\n", G,
                          bs_layout_name((bs_layout)l), causal, (long long)C, bs_cp_pass_name((bs_cp_pass)pass), r,
                          (long long)w.sent[r], (long long)w.coll_sent[r], (long long)want);
                assert_int_equal(w.sent[r] + w.coll_sent[r], want);
                flops += w.flops[r];
              }
              assert_true(fabs(flops - want_flops) <= 1e-9 * want_flops);
              if (pass && G > 1) { /* the ring carries the queries only; the partials go by one all-to-all each */
                int64_t T = N - C, q = 2 * 8 * (T / G) * 16 * 2;
                for (int r = 0; r < G; r++) {
                  assert_int_equal(w.sent[r], (G - 1) * q);
                  assert_int_equal(w.ncoll[r][BS_COLL_ALLTOALL], 2);
                }
              }
            }
          }
}

/* Decode: pass-Q splits the query tokens over the ring (pass-KV replicates them). */
static void test_decode(void **st) {
  (void)st;
  for (int G = 1; G <= 4; G++) {
    bs_config c = cfg_of(BS_RING, G, 64 * G, 0, BS_CONTIGUOUS, 1, BS_PASS_Q);
    c.work.phase = BS_DECODE;
    c.work.decode_tokens = 2 * G;
    walk_result w;
    walk(&c, &w);
    double want_flops = 4.0 * 2 * 8 * 16 * (double)(2 * G) * (double)(64 * G), flops = 0;
    for (int r = 0; r < G; r++) {
      assert_int_equal(w.sent[r] + w.coll_sent[r], pass_q_bytes(&c, 2 * G));
      flops += w.flops[r];
    }
    assert_true(fabs(flops - want_flops) <= 1e-9 * want_flops);
  }
}

/* The partials are part of the plan's memory: at the all-to-all a rank holds the visiting query
 * shards (two receive buffers) and G blocks of partial (O, lse) to send and G to receive. */
static void test_partials_memory(void **st) {
  (void)st;
  for (int G = 2; G <= 8; G *= 2) {
    const int64_t N = 64 * G, C = 48 * G, T = N - C, B = 2, Z = 8, d = 16;
    bs_config c = cfg_of(BS_BURST, G, N, C, BS_ZIGZAG, 1, BS_PASS_Q);
    walk_result w;
    walk(&c, &w);
    int64_t nq = T / G, qbuf = B * Z * nq * d * 2, part = B * Z * nq * d * 4 + B * Z * nq * 4;
    int64_t want = (G > 2 ? 2 : 1) * qbuf + 2 * G * part;
    for (int r = 0; r < G; r++) assert_int_equal(w.peak_cls[r][BS_MEM_COMM], want);
    /* pass-KV: two K and two V receive buffers of the whole context's shard */
    c.par.cp_pass = BS_PASS_KV;
    walk(&c, &w);
    for (int r = 0; r < G; r++) assert_int_equal(w.peak_cls[r][BS_MEM_COMM], 4 * B * 2 * (N / G) * d * 2);
  }
}

/* Composed with tensor parallelism (tp 2 x cp 2): each cp group runs pass-Q over its ranks with the
 * rank's half of the heads, so a rank sends the pass-Q volume of 4 query heads over a ring of 2. */
static void test_composed(void **st) {
  (void)st;
  for (int decode = 0; decode < 2; decode++) {
    bs_config c = cfg_of(BS_RING, 4, 256, decode ? 0 : 128, decode ? BS_CONTIGUOUS : BS_ZIGZAG, 1, BS_PASS_Q);
    c.par.tp = 2;
    if (decode) {
      c.work.phase = BS_DECODE;
      c.work.decode_tokens = 4;
    }
    walk_result w;
    walk(&c, &w);
    bs_config one = c; /* the volume of one cp group of 2 ranks and 4 heads */
    one.par.gpus = 2;
    one.model.heads = 4;
    int64_t want = pass_q_bytes(&one, decode ? 4 : 128);
    for (int r = 0; r < 4; r++) {
      assert_int_equal(w.sent[r] + w.coll_sent[r], want);
      assert_int_equal(w.ncoll[r][BS_COLL_ALLTOALL], 2);
    }
  }
}

static void expect_error(bs_config c, const char *key) {
  bs_plan *p = NULL;
  char err[320] = "";
  int rc = bs_plan_create(&c, c.par.gpus, &p, err, sizeof err);
  if (rc != -1) fprintf(stderr, "no error for %s (wanted %s)\n", bs_method_name(c.par.method), key);
  assert_int_equal(rc, -1);
  assert_null(p);
  if (strncmp(err, key, strlen(key)) != 0) fprintf(stderr, "error '%s' does not start with '%s'\n", err, key);
  assert_int_equal(strncmp(err, key, strlen(key)), 0);
}

static void test_bad_values(void **st) {
  (void)st;
  bs_config c = cfg_of(BS_BURST, 2, 64, 64, BS_CONTIGUOUS, 1, BS_PASS_KV);
  expect_error(c, "workload.cached_tokens:"); /* no new token */
  c.work.cached_tokens = 100;
  expect_error(c, "workload.cached_tokens:");
  c.work.cached_tokens = -2;
  expect_error(c, "workload.cached_tokens:");
  c = cfg_of(BS_BURST, 4, 64, 34, BS_CONTIGUOUS, 1, BS_PASS_Q); /* 34 cached tokens do not split over 4 */
  expect_error(c, "workload.cached_tokens:");
  c = cfg_of(BS_BURST, 4, 64, 32, BS_ZIGZAG, 1, BS_PASS_Q); /* 32 and 32: 8 parts each, fine; 36 + 28 not */
  c.work.cached_tokens = 36;
  expect_error(c, "workload.cached_tokens:");
  c = cfg_of(BS_RING, 2, 64, 32, BS_CONTIGUOUS, 1, BS_PASS_KV);
  c.work.phase = BS_TRAIN;
  expect_error(c, "workload.cached_tokens:");
  c.work.phase = BS_DECODE;
  expect_error(c, "workload.cached_tokens:");
  /* layer and model scope run a cached prefill since issue 35 (plans.memory_terms_cached_layer) */
  const bs_method others[] = {BS_RING_LI2021, BS_ULYSSES, BS_USP, BS_TP};
  for (int i = 0; i < 4; i++) {
    c = cfg_of(others[i], 2, 64, 32, BS_CONTIGUOUS, 1, BS_PASS_KV);
    expect_error(c, "workload.cached_tokens:");
    c = cfg_of(others[i], 2, 64, 0, BS_CONTIGUOUS, 1, BS_PASS_Q);
    expect_error(c, "parallel.cp_pass:");
  }
  c = cfg_of(BS_TREE, 2, 64, 0, BS_CONTIGUOUS, 1, BS_PASS_Q);
  c.work.phase = BS_DECODE;
  expect_error(c, "parallel.cp_pass:");
  c = cfg_of(BS_BURST, 2, 64, 0, BS_CONTIGUOUS, 1, BS_PASS_Q);
  c.work.phase = BS_TRAIN;
  expect_error(c, "parallel.cp_pass:");
  c.par.cp_pass = (bs_cp_pass)7;
  expect_error(c, "parallel.cp_pass:");
  c = cfg_of(BS_RING, 4, 64, 0, BS_CONTIGUOUS, 1, BS_PASS_Q);
  c.work.phase = BS_DECODE;
  c.work.decode_tokens = 6;
  expect_error(c, "workload.decode_tokens:");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_bytes_and_flops), cmocka_unit_test(test_decode),     cmocka_unit_test(test_partials_memory),
    cmocka_unit_test(test_composed),        cmocka_unit_test(test_bad_values),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
