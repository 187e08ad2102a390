/*
 * test_micro.c — the micro-batch shortcut (sim/micro.c) against the full
 * simulation of every micro-batch (--micro-batches off): on pipeline steps
 * where it applies (1F1B and interleaved, with context parallelism, ZeRO 0 and
 * 1, recompute) every figure of the result, the step's, each rank's, explain's
 * and memory's, must agree to 1e-9 relative (counts exactly); where it must not
 * apply (too few micro-batches for the two reduced steps to save work, the
 * switch off) the point runs as it is and sim.network names no shortcut.
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
#include "sim/sim.h"

/* A small model through pp stages: the toy of tests/sim/test_sim_plans.c's pipeline cases. */
static bs_config pp_model(int gpus, int pp, int dp, int64_t layers, int64_t microbatches) {
  bs_config c;
  bs_config_default(&c);
  c.model.hidden = 1024;
  c.model.heads = c.model.kv_heads = 8;
  c.model.head_dim = 128;
  c.model.ffn = 4096;
  c.model.vocab = 64;
  c.model.preset[0] = 0;
  c.model.layers = layers;
  c.work.seq_len = 8192;
  c.work.scope = BS_SCOPE_MODEL;
  c.work.batch = microbatches * dp;
  c.par.gpus = gpus;
  c.par.pp = pp;
  c.par.dp = dp;
  c.par.micro_batch = 1;
  return c;
}

static void run(const bs_config *c, bs_tristate micro, bs_result *r) {
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.micro_batches = micro;
  char err[512] = "";
  int rc = bs_sim_run(c, &o, r, err, sizeof err);
  if (rc) print_error("sim: %s\n", err);
  assert_int_equal(rc, 0);
}

static int bad;

static void near(double s, double f, const char *what, int rank) {
  double rel = fabs(s - f) / (fabs(f) > 0 ? fabs(f) : 1);
  if (rel > 1e-9) {
    print_error("%s (rank %d): %.17g (shortcut) vs %.17g (%.3g relative)\n", what, rank, s, f, rel);
    bad = 1;
  }
}

static void same(int64_t s, int64_t f, const char *what, int rank) {
  if (s != f) {
    print_error("%s (rank %d): %lld (shortcut) vs %lld\n", what, rank, (long long)s, (long long)f);
    bad = 1;
  }
}

static void near_parts(const bs_explain_parts *s, const bs_explain_parts *f, const char *what) {
  for (int k = 0; k < BS_XK_COUNT; k++) near(s->compute[k], f->compute[k], what, k);
  for (int l = 0; l < BS_XL_COUNT; l++) near(s->exposed[l], f->exposed[l], what, l);
  near(s->launch, f->launch, what, -1);
  near(s->wait_for_peers, f->wait_for_peers, what, -1);
}

/* Every figure of the shortcut's result s against the full simulation's f. */
static void compare(const bs_result *s, const bs_result *f) {
  bad = 0;
  near(s->time.step, f->time.step, "time.step", -1);
  near(s->time.fwd, f->time.fwd, "time.fwd", -1);
  near(s->time.bwd, f->time.bwd, "time.bwd", -1);
  near(s->time.compute, f->time.compute, "time.compute", -1);
  near(s->time.comm_exposed, f->time.comm_exposed, "time.comm_exposed", -1);
  near(s->time.wait_for_peers, f->time.wait_for_peers, "time.wait_for_peers", -1);
  same(s->comm.per_rank_max_sent, f->comm.per_rank_max_sent, "comm.per_rank_max_sent", -1);
  same(s->comm.total, f->comm.total, "comm.total", -1);
  same(s->comm.intra_node, f->comm.intra_node, "comm.intra_node", -1);
  same(s->comm.inter_node, f->comm.inter_node, "comm.inter_node", -1);
  for (int d = 0; d < BS_DIM_COUNT; d++) same(s->comm.by_group[d], f->comm.by_group[d], "comm.by_group", d);
  same(s->mem.peak_bytes_max, f->mem.peak_bytes_max, "mem.peak_bytes_max", -1);
  same(s->mem.capacity_bytes, f->mem.capacity_bytes, "mem.capacity_bytes", -1);
  same(s->mem.oom, f->mem.oom, "mem.oom", -1);
  for (int c = 0; c < BS_MEM_CLASS_COUNT; c++) same(s->mem.breakdown[c], f->mem.breakdown[c], "mem.breakdown", c);
  same(s->decision.microbatches, f->decision.microbatches, "decision.microbatches", -1);
  same(s->explain.critical_rank, f->explain.critical_rank, "explain.critical_rank", -1);
  same(s->explain.ranks, f->explain.ranks, "explain.ranks", -1);
  near(s->explain.step, f->explain.step, "explain.step", -1);
  near_parts(&s->explain.critical, &f->explain.critical, "explain.critical");
  near_parts(&s->explain.mean, &f->explain.mean, "explain.mean");
  same(s->nranks, f->nranks, "nranks", -1);
  assert_non_null(s->ranks);
  assert_non_null(f->ranks);
  for (int r = 0; r < f->nranks && r < s->nranks; r++) {
    const bs_rank_result *x = &s->ranks[r], *y = &f->ranks[r];
    near(x->step, y->step, "ranks.step", r);
    near(x->fwd, y->fwd, "ranks.fwd", r);
    near(x->bwd, y->bwd, "ranks.bwd", r);
    near(x->compute, y->compute, "ranks.compute", r);
    near(x->comm_exposed, y->comm_exposed, "ranks.comm_exposed", r);
    near(x->wait_for_peers, y->wait_for_peers, "ranks.wait_for_peers", r);
    same(x->bytes_sent, y->bytes_sent, "ranks.bytes_sent", r);
    same(x->bytes_recv, y->bytes_recv, "ranks.bytes_recv", r);
    same(x->peak_bytes, y->peak_bytes, "ranks.peak_bytes", r);
    for (int d = 0; d < BS_DIM_COUNT; d++) same(x->by_group[d], y->by_group[d], "ranks.by_group", d);
  }
  assert_int_equal(bad, 0);
}

/* The shortcut applies to c, says so in sim.network (`note`), and gives the full simulation's figures. */
static void check_applies(const bs_config *c, const char *note) {
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  assert_true(bs_sim_micro_apply(c, &o));
  bs_result s, f;
  run(c, BS_AUTO, &s);
  run(c, BS_OFF, &f);
  print_message("step %.12f s (shortcut, %lld events) vs %.12f s (%lld events): %s\n", s.time.step,
                (long long)s.sim_events, f.time.step, (long long)f.sim_events, s.sim_network);
  if (!strstr(s.sim_network, note)) print_error("sim.network lacks \"%s\": %s\n", note, s.sim_network);
  assert_non_null(strstr(s.sim_network, note));
  assert_null(strstr(f.sim_network, "micro-batches:"));
  compare(&s, &f);
  bs_result_free(&s);
  bs_result_free(&f);
}

/* 1F1B, 4 stages: 4 and 5 of 12 micro-batches simulated; ZeRO 0, 1, and 1 with full recompute
 * (ZeRO 2 and 3 with pipeline stages are refused by the plan). */
static void test_micro_1f1b(void **st) {
  (void)st;
  bs_config c = pp_model(8, 4, 2, 8, 12);
  check_applies(&c, "micro-batches: 4 and 5 simulated, extended to 12");
  c.par.zero = 1;
  check_applies(&c, "micro-batches: 4 and 5 simulated, extended to 12");
  c.work.recompute = BS_RECOMPUTE_FULL;
  c.work.batch = 2 * 17;
  check_applies(&c, "micro-batches: 4 and 5 simulated, extended to 17");
}

/* The interleaved schedule, 4 stages of 2 chunks: the pipeline messages in flight grow from 8 to
 * 12 to 16 micro-batches (sim/micro.c), so the shortcut moves on to 16 and 20 of 40; with ZeRO 1
 * and full recompute too (44). */
static void test_micro_interleaved(void **st) {
  (void)st;
  bs_config c = pp_model(8, 4, 2, 8, 40);
  c.par.pp_schedule = BS_PP_INTERLEAVED;
  c.par.pp_chunks = 2;
  check_applies(&c, "micro-batches: 16 and 20 simulated, extended to 40");
  c.par.zero = 1;
  c.work.recompute = BS_RECOMPUTE_FULL;
  c.work.batch = 2 * 44;
  check_applies(&c, "micro-batches: 16 and 20 simulated, extended to 44");
}

/* Context parallelism inside each stage (a causal zigzag ring over 4 ranks), tensor parallelism
 * beside it: 1F1B over 2 stages (3 and 4 of 9) and interleaved (40, and 12 where the pattern has
 * not settled in time), selective recompute. */
static void test_micro_cp(void **st) {
  (void)st;
  bs_config c = pp_model(32, 2, 2, 4, 9);
  c.par.tp = 2;
  c.par.method = BS_RING;
  c.par.layout = BS_ZIGZAG;
  c.work.causal = 1;
  c.par.zero = 1;
  check_applies(&c, "micro-batches: 3 and 4 simulated, extended to 9");
  c.par.pp_schedule = BS_PP_INTERLEAVED;
  c.par.pp_chunks = 2;
  c.work.batch = 2 * 40;
  c.work.recompute = BS_RECOMPUTE_SELECTIVE;
  check_applies(&c, "simulated, extended to 40");
  /* at 12 the pipeline messages in flight still grow from 4 to 6 micro-batches, and 6 + 8 >= 12:
   * every micro-batch simulated, and sim.network says why */
  c.work.batch = 2 * 12;
  check_applies(&c, "micro-batches: all simulated (the memory peak still moves at the simulated counts)");
}

/* The premise, on the full simulation of the 1F1B toy with ZeRO 1 over 2 replicas: past the
 * warm-up, the data-parallel gradient bytes and every rank's memory peak do not depend on the
 * micro-batches, and each micro-batch adds the same time to the step (to 1e-9 relative) and the
 * same pipeline bytes. */
static void test_micro_constant_in_m(void **st) {
  (void)st;
  bs_result r[3];
  for (int i = 0; i < 3; i++) {
    bs_config c = pp_model(8, 4, 2, 8, 6 + 3 * i);
    c.par.zero = 1;
    run(&c, BS_OFF, &r[i]);
  }
  for (int i = 1; i < 3; i++) {
    assert_int_equal(r[i].comm.by_group[BS_DIM_DP], r[0].comm.by_group[BS_DIM_DP]);
    assert_int_equal(r[i].mem.peak_bytes_max, r[0].mem.peak_bytes_max);
    for (int k = 0; k < r[0].nranks; k++) assert_int_equal(r[i].ranks[k].peak_bytes, r[0].ranks[k].peak_bytes);
  }
  assert_true(r[0].comm.by_group[BS_DIM_DP] > 0);
  assert_int_equal(r[2].comm.by_group[BS_DIM_PP] - r[1].comm.by_group[BS_DIM_PP],
                   r[1].comm.by_group[BS_DIM_PP] - r[0].comm.by_group[BS_DIM_PP]);
  double d1 = r[1].time.step - r[0].time.step, d2 = r[2].time.step - r[1].time.step;
  print_message("step %.12f, %.12f, %.12f s: +%.12f, +%.12f s per 3 micro-batches\n", r[0].time.step, r[1].time.step,
                r[2].time.step, d1, d2);
  assert_true(d1 > 0 && fabs(d2 - d1) <= 1e-9 * r[2].time.step);
  for (int i = 0; i < 3; i++) bs_result_free(&r[i]);
}

/* Where it must not apply: the two reduced steps would simulate as many micro-batches as the step
 * (1F1B over 4 stages: 4 + 5 >= 9; interleaved: 8 + 12 >= 20), no pipeline, the switch off. */
static void test_micro_not_applied(void **st) {
  (void)st;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_config c = pp_model(8, 4, 2, 8, 9);
  assert_false(bs_sim_micro_apply(&c, &o));
  bs_result r;
  run(&c, BS_AUTO, &r);
  assert_null(strstr(r.sim_network, "micro-batches:"));
  assert_int_equal(r.decision.microbatches, 9);
  bs_result_free(&r);
  c.work.batch = 2 * 12;
  assert_true(bs_sim_micro_apply(&c, &o));
  o.micro_batches = BS_OFF;
  assert_false(bs_sim_micro_apply(&c, &o));
  o.micro_batches = BS_AUTO;
  c.par.pp_schedule = BS_PP_INTERLEAVED;
  c.par.pp_chunks = 2;
  c.work.batch = 2 * 20;
  assert_false(bs_sim_micro_apply(&c, &o));
  run(&c, BS_AUTO, &r);
  assert_null(strstr(r.sim_network, "micro-batches:"));
  bs_result_free(&r);
  c.work.batch = 2 * 22; /* not a multiple of pp: the plan refuses it, not the shortcut */
  assert_false(bs_sim_micro_apply(&c, &o));
  c = pp_model(8, 1, 8, 8, 24);
  assert_false(bs_sim_micro_apply(&c, &o));
}

int main(int argc, char **argv) {
  const struct CMUnitTest all[] = {
    cmocka_unit_test(test_micro_1f1b),        cmocka_unit_test(test_micro_interleaved),
    cmocka_unit_test(test_micro_cp),          cmocka_unit_test(test_micro_constant_in_m),
    cmocka_unit_test(test_micro_not_applied),
  };
  return BS_RUN_NAMED(all, argc, argv, NULL, NULL);
}
