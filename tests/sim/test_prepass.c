/*
 * test_prepass.c — the fold pre-pass's shortcut for rings whose ranks the plan proves alike
 * (bs_plan_ring_uniform; sim/fold.c reads one program per class of ranks) against the pre-pass
 * that reads every program (opts.prepass_full): every figure and the fold's sentence equal,
 * exactly, where the shortcut applies (burst and ring, zigzag causal, double ring or not, train and
 * forward, several fabrics, 256 ranks read in rounds), where a straggler splits the ranks into
 * classes, and where the plan refuses it (a causal contiguous ring, another method).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "tests/run_named.h"
#include "sim/sim.h"

static void ring_config(bs_config *c, bs_method m, int gpus, int dr, int causal, bs_layout l, bs_phase ph) {
  bs_config_default(c);
  c->par.method = m;
  c->par.gpus = gpus;
  c->work.seq_len = 65536;
  c->work.phase = ph;
  c->work.causal = causal;
  c->par.layout = l;
  c->par.double_ring = dr ? BS_ON : BS_OFF;
  strcpy(c->cluster.topology, "dgx-a100");
}

/* The point with the shortcut and with the full pre-pass: every figure equal. */
static void same_both_ways(const bs_config *c, int nodes_per_leaf, double oversub, const char *expect) {
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.nodes_per_leaf = nodes_per_leaf;
  o.oversub = oversub;
  bs_result a, b;
  char err[512] = "";
  if (bs_sim_run(c, &o, &a, err, sizeof err)) fail_msg("shortcut: %s", err);
  o.prepass_full = 1;
  if (bs_sim_run(c, &o, &b, err, sizeof err)) fail_msg("full pre-pass: %s", err);
  if (!strstr(a.sim_network, expect)) fail_msg("expected '%s' in '%s'", expect, a.sim_network);
  assert_string_equal(a.sim_network, b.sim_network);
  assert_int_equal(a.sim_actors, b.sim_actors);
  assert_int_equal(a.sim_events, b.sim_events);
  assert_true(a.time.step == b.time.step && a.time.fwd == b.time.fwd && a.time.bwd == b.time.bwd);
  assert_true(a.time.compute == b.time.compute && a.time.comm_exposed == b.time.comm_exposed &&
              a.time.wait_for_peers == b.time.wait_for_peers);
  assert_int_equal(a.comm.total, b.comm.total);
  assert_int_equal(a.comm.intra_node, b.comm.intra_node);
  assert_int_equal(a.comm.inter_node, b.comm.inter_node);
  assert_int_equal(a.comm.per_rank_max_sent, b.comm.per_rank_max_sent);
  assert_int_equal(a.mem.peak_bytes_max, b.mem.peak_bytes_max);
  assert_int_equal(a.nranks, b.nranks);
  for (int r = 0; r < a.nranks; r++) {
    assert_true(a.ranks[r].step == b.ranks[r].step && a.ranks[r].comm_exposed == b.ranks[r].comm_exposed);
    assert_int_equal(a.ranks[r].bytes_sent, b.ranks[r].bytes_sent);
    assert_int_equal(a.ranks[r].peak_bytes, b.ranks[r].peak_bytes);
  }
  bs_result_free(&a);
  bs_result_free(&b);
}

static void test_prepass_uniform_same(void **state) {
  (void)state;
  bs_config c;
  for (int m = 0; m < 2; m++)
    for (int dr = 0; dr < 2; dr++)
      for (int ph = 0; ph < 2; ph++) {
        ring_config(&c, m ? BS_RING : BS_BURST, 64, dr, 1, BS_ZIGZAG, ph ? BS_PREFILL : BS_TRAIN);
        same_both_ways(&c, 2, 0, "of 64 ranks simulated");
      }
  /* not causal, contiguous: every pair of shards is full */
  ring_config(&c, BS_BURST, 64, 1, 0, BS_CONTIGUOUS, BS_TRAIN);
  same_both_ways(&c, 2, 0, "of 64 ranks simulated");
  /* 256 ranks (read in rounds by the full pass), leaves of 8 at half bandwidth: the leaf wrap */
  ring_config(&c, BS_BURST, 256, 1, 1, BS_ZIGZAG, BS_TRAIN);
  same_both_ways(&c, 8, 2.0, "with leaf wrap");
  /* one leaf of 8 nodes on dgx-h100 */
  ring_config(&c, BS_RING, 64, 1, 1, BS_ZIGZAG, BS_TRAIN);
  strcpy(c.cluster.topology, "dgx-h100");
  same_both_ways(&c, 0, 0, "of 64 ranks simulated");
}

/* A straggler: its class is its own, and the fold is refused as the full pass refuses it. */
static void test_prepass_straggler_same(void **state) {
  (void)state;
  bs_config c;
  ring_config(&c, BS_BURST, 64, 1, 1, BS_ZIGZAG, BS_TRAIN);
  c.cluster.straggler_rank = 37;
  c.cluster.straggler_factor = 1.5;
  same_both_ways(&c, 2, 0, "program differs from its image's");
}

/* Where the plan refuses the shortcut (ranks of a causal contiguous ring do different work; usp),
 * both passes read every program: the same figures (and the fold refused or not, the same). */
static void test_prepass_refused_same(void **state) {
  (void)state;
  bs_config c;
  ring_config(&c, BS_BURST, 64, 1, 1, BS_CONTIGUOUS, BS_TRAIN);
  same_both_ways(&c, 2, 0, "fold: no");
  ring_config(&c, BS_USP, 64, 0, 1, BS_ZIGZAG, BS_TRAIN);
  same_both_ways(&c, 2, 0, "fold:");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_prepass_uniform_same),
    cmocka_unit_test(test_prepass_straggler_same),
    cmocka_unit_test(test_prepass_refused_same),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
