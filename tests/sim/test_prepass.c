/*
 * test_prepass.c — the fold pre-pass's shortcut for rings whose ranks the plan proves alike
 * (bs_plan_ring_uniform; sim/fold.c reads one program per class of ranks) against the pre-pass
 * that reads every program (opts.prepass_full): every figure and the fold's sentence equal,
 * exactly, where the shortcut applies (burst and ring, zigzag causal, double ring or not, train and
 * forward, several fabrics, 256 ranks read in rounds), where a straggler splits the ranks into
 * classes, and where the plan refuses it (a causal contiguous ring, another method). The same for
 * composed whole-model steps whose data-parallel replicas the plan proves alike
 * (bs_plan_replicas_uniform; the pre-pass reads one replica's programs and checks two more): the
 * stage fold found, refused (cross-rail rings on leaves, a straggler, the pipeline not outermost),
 * a pre-pass that stops early, 1F1B and interleaved, recompute, ZeRO-3, FP8; and the programs it
 * reads, counted (sim_choose_fold on a source that counts them).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "tests/run_named.h"
#include "sim/sim.h"
#include "sim/point.h"
#include "sim/platform.h"

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

/* A Llama 3.1 8B of 4 layers, trained at model scope on DGX H100 nodes (8K tokens, ring over cp,
 * zigzag, ZeRO-1, one sequence a microbatch): tp x cp x dp x pp on gpus. */
static void model_config(bs_config *c, int gpus, int tp, int dp, int pp) {
  bs_config_default(c);
  assert_int_equal(bs_model_preset("llama3.1-8b", &c->model), 0);
  c->model.layers = 4;
  c->work.phase = BS_TRAIN;
  c->work.seq_len = 8192;
  c->work.causal = 1;
  c->work.scope = BS_SCOPE_MODEL;
  c->work.batch = 4 * dp;
  c->par.method = BS_RING;
  c->par.layout = BS_ZIGZAG;
  c->par.micro_batch = 1;
  c->par.zero = 1;
  c->par.gpus = gpus;
  c->par.tp = tp;
  c->par.dp = dp;
  c->par.pp = pp;
  strcpy(c->cluster.topology, "dgx-h100");
  strcpy(c->cluster.profile, "h100-sxm");
}

/* Replicas alike: the stage fold found, one leaf and leaves of 2 nodes (cross-rail gradient rings),
 * 1F1B and interleaved, full recompute. */
static void test_prepass_replicas_same(void **state) {
  (void)state;
  bs_config c;
  model_config(&c, 96, 8, 6, 2); /* tp 8 x cp 1 x dp 6 x pp 2 */
  same_both_ways(&c, 0, 0, "stage fold");
  model_config(&c, 128, 4, 8, 2); /* tp 4 x cp 2 x dp 8 x pp 2 */
  same_both_ways(&c, 2, 0, "stage fold");
  c.par.pp_schedule = BS_PP_INTERLEAVED;
  c.par.pp_chunks = 2;
  same_both_ways(&c, 2, 0, "stage fold");
  model_config(&c, 128, 4, 8, 2);
  c.work.recompute = BS_RECOMPUTE_FULL;
  same_both_ways(&c, 2, 0, "stage fold");
  c.work.recompute = BS_RECOMPUTE_SELECTIVE;
  c.model.fp8 = BS_FP8_FFN; /* the amax all-reduces over each stage's 64 ranks */
  same_both_ways(&c, 2, 0, "fold:");
  model_config(&c, 64, 8, 8, 1); /* no pipeline, ZeRO-3: the gathers over every replica */
  c.par.zero = 3;
  same_both_ways(&c, 0, 0, "fold:");
}

/* Where the fold must not apply, the shortcut reaches the same refusal: cross-rail rings on leaves
 * of 4 nodes, a straggler (its own program); the pipeline not outermost (a node fold instead); and a
 * 256-GPU pre-pass that stops after a few rounds stops at the same rank. */
static void test_prepass_replicas_refused_same(void **state) {
  (void)state;
  bs_config c;
  model_config(&c, 128, 4, 8, 2);
  same_both_ways(&c, 4, 0, "fold: no");
  model_config(&c, 96, 8, 6, 2);
  c.cluster.straggler_rank = 40;
  c.cluster.straggler_factor = 1.5;
  same_both_ways(&c, 0, 0, "fold: no");
  model_config(&c, 96, 8, 6, 2);
  assert_int_equal(bs_order_parse("tp-pp-dp-cp", c.par.order), 0); /* no stage fold; a node fold */
  same_both_ways(&c, 0, 0, "6 of 12 nodes");
  model_config(&c, 256, 4, 8, 4);
  same_both_ways(&c, 0, 0, "pre-pass stopped at");
}

/* The plan's op source, counting the programs read (iterators opened). */
typedef struct {
  bs_plan *plan;
  int opened;
} counted;
static void *count_iter_new(void *ctx, int rank) {
  counted *c = ctx;
  __atomic_add_fetch(&c->opened, 1, __ATOMIC_RELAXED); /* the pre-pass reads on several threads */
  return bs_plan_iter_new(c->plan, rank);
}
static int count_next(void *it, bs_op *op) { return bs_plan_next(it, op); }
static void count_iter_free(void *it) { bs_plan_iter_free(it); }
static const char *count_iter_error(void *it) { return bs_plan_iter_errmsg(it); }

/* sim_choose_fold on c with the shortcut and with the full pre-pass: the same fold and sentence;
 * the programs each read into reads[0], reads[1]. */
static void fold_reads(const bs_config *c, int nodes_per_leaf, int reads[2]) {
  static bs_profile prof;
  char err[512] = "", why[2][512];
  if (bs_profile_load(c->cluster.profile, &prof, err, sizeof err)) fail_msg("profile: %s", err);
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.nodes_per_leaf = nodes_per_leaf;
  bs_platform_spec ps;
  if (bs_platform_resolve(c, &o, &prof, &ps, err, sizeof err)) fail_msg("platform: %s", err);
  counted cnt = {NULL, 0};
  if (bs_plan_create(c, ps.ranks_per_node, &cnt.plan, err, sizeof err)) fail_msg("plan: %s", err);
  bs_sim_source src = {&cnt, bs_plan_ranks(cnt.plan), count_iter_new, count_next, count_iter_free, count_iter_error,
                       NULL};
  sim_fold f[2];
  for (int k = 0; k < 2; k++) {
    o.prepass_full = k;
    cnt.opened = 0;
    if (sim_choose_fold(c, &o, &prof, &ps, &src, cnt.plan, &f[k], why[k], sizeof why[k], err, sizeof err))
      fail_msg("fold: %s", err);
    reads[k] = cnt.opened;
  }
  assert_string_equal(why[0], why[1]);
  assert_true(f[0].M == f[1].M && f[0].Pf == f[1].Pf && f[0].wrap == f[1].wrap && f[0].Ki == f[1].Ki);
  bs_plan_free(cnt.plan);
}

/* What the shortcut saves: one replica's programs and two more replicas' as the check (3 of every dp
 * programs) where the full pass reads all, and no more than three times what a pass that stops
 * early reads. */
static void test_prepass_replicas_reads(void **state) {
  (void)state;
  bs_config c;
  int n[2];
  model_config(&c, 128, 4, 8, 2); /* dp 8: 16 representatives */
  fold_reads(&c, 2, n);
  assert_int_equal(n[1], 128);
  assert_int_equal(n[0], 3 * 16);
  model_config(&c, 96, 8, 6, 2);
  c.cluster.straggler_rank = 11; /* dp 1 of 6 (not a check): read whole */
  c.cluster.straggler_factor = 1.5;
  fold_reads(&c, 0, n);
  assert_int_equal(n[1], 96);
  assert_int_equal(n[0], 3 * 16 + 1);
  model_config(&c, 256, 4, 8, 4); /* stops after one node: its 8 ranks, each a representative */
  fold_reads(&c, 0, n);
  assert_int_equal(n[1], 8);
  assert_int_equal(n[0], 3 * 8);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_prepass_uniform_same),          cmocka_unit_test(test_prepass_straggler_same),
    cmocka_unit_test(test_prepass_refused_same),          cmocka_unit_test(test_prepass_replicas_same),
    cmocka_unit_test(test_prepass_replicas_refused_same), cmocka_unit_test(test_prepass_replicas_reads),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
