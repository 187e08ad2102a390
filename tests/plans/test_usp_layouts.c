/*
 * test_usp_layouts.c — usp's ring across groups in each layout and placement,
 * executed abstractly (plan_walk): the same bytes per rank whatever the layout
 * or the placement, the FLOPs of the whole attention (4·B·Z·d per visible
 * pair, N(N+1)/2 pairs when causal), zigzag balancing a causal mask exactly
 * over the ranks, and the values that cannot be split say so.
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

static bs_config usp_cfg(int G, int U, bs_layout l, bs_placement where, int causal, bs_phase ph) {
  bs_config c;
  bs_config_default(&c);
  c.model.heads = 8;
  c.model.kv_heads = 8;
  c.model.head_dim = 16;
  c.work.batch = 2;
  c.work.seq_len = 64 * G;
  c.work.causal = causal;
  c.work.phase = ph;
  c.par.method = BS_USP;
  c.par.gpus = G;
  c.par.ulysses_degree = U;
  c.par.ulysses_placement = where;
  c.par.layout = l;
  c.par.ranks_per_node = G;
  return c;
}

static void walk_ok(const bs_config *c, walk_result *w) {
  bs_plan *p = NULL;
  char err[256] = "";
  if (bs_plan_create(c, c->par.gpus, &p, err, sizeof err)) fail_msg("plan: %s", err);
  if (plan_walk(p, w))
    fail_msg("walk (U=%d %s %s causal=%d): %s", c->par.ulysses_degree, bs_layout_name(c->par.layout),
             bs_placement_name(c->par.ulysses_placement), c->work.causal, w->err);
  bs_plan_free(p);
}

static void test_usp_layout_bytes_flops(void **state) {
  (void)state;
  const int G = 8, Us[] = {1, 2, 4, 8};
  for (size_t u = 0; u < sizeof Us / sizeof Us[0]; u++)
    for (int where = 0; where < 2; where++)
      for (int causal = 0; causal < 2; causal++)
        for (int ph = 0; ph < 2; ph++) {
          walk_result base;
          bs_config c = usp_cfg(G, Us[u], BS_CONTIGUOUS, (bs_placement)where, causal, ph ? BS_PREFILL : BS_TRAIN);
          walk_ok(&c, &base);
          for (int l = 0; l <= BS_STRIPED; l++) {
            c.par.layout = (bs_layout)l;
            walk_result w;
            walk_ok(&c, &w);
            double N = (double)c.work.seq_len, pairs = causal ? N * (N + 1) / 2 : N * N, got = 0, lo = 1e300, hi = 0;
            for (int r = 0; r < G; r++) {
              assert_int_equal(w.sent[r], base.sent[r]);
              assert_int_equal(w.coll_sent[r], base.coll_sent[r]);
              got += w.flops[r];
              lo = fmin(lo, w.flops[r]);
              hi = fmax(hi, w.flops[r]);
            }
            if (ph) { /* the forward alone: 4·B·Z·d per pair */
              double want = 4.0 * (double)(c.work.batch * c.model.heads * c.model.head_dim) * pairs;
              if (fabs(got - want) > 1e-9 * want)
                fail_msg("U=%d %s causal=%d: %g FLOPs, want %g", Us[u], bs_layout_name(c.par.layout), causal, got,
                         want);
            }
            /* A causal mask: the contiguous ring loads the last group most, zigzag evenly. */
            if (causal && Us[u] < G && l == BS_CONTIGUOUS) assert_true(hi > 1.5 * lo);
            if (causal && l == BS_ZIGZAG) assert_true(hi == lo);
            if (causal && l == BS_STRIPED) assert_true(hi < 1.1 * lo);
          }
        }
}

static void expect_error(const bs_config *c, const char *key) {
  bs_plan *p = NULL;
  char err[256] = "";
  assert_int_not_equal(bs_plan_create(c, c->par.gpus, &p, err, sizeof err), 0);
  if (strncmp(err, key, strlen(key))) fail_msg("error '%s' does not start with '%s'", err, key);
}

static void test_usp_layout_bad(void **state) {
  (void)state;
  bs_config c = usp_cfg(6, 3, BS_ZIGZAG, BS_HEAD_FIRST, 1, BS_TRAIN); /* a group's halves of 3 ranks */
  c.model.heads = c.model.kv_heads = 6;
  expect_error(&c, "parallel.ulysses_degree:");
  c = usp_cfg(4, 2, BS_ZIGZAG, BS_RING_FIRST, 1, BS_TRAIN);
  c.work.seq_len = 4 * 9; /* 4 | 36 but 8 does not: padded to 40 (plans/pad.c, issue 35), not refused */
  bs_plan *p = NULL;
  char err[256] = "";
  assert_int_equal(bs_plan_create(&c, c.par.gpus, &p, err, sizeof err), 0);
  bs_plan_free(p);
  assert_int_equal(bs_seq_pad(&c), 4);
  c = usp_cfg(4, 4, BS_STRIPED, BS_HEAD_FIRST, 1, BS_TRAIN);
  c.par.method = BS_ULYSSES; /* one group: nothing to balance */
  expect_error(&c, "parallel.layout:");
}

int main(int argc, char **argv) {
  const struct CMUnitTest all[] = {
    cmocka_unit_test(test_usp_layout_bytes_flops),
    cmocka_unit_test(test_usp_layout_bad),
  };
  return BS_RUN_NAMED(all, argc, argv, NULL, NULL);
}
