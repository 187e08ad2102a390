/*
 * test_direct.c — the direct engine (sim/direct.h) against SimGrid on a
 * battery of points: every field of the result (times within 1e-6 relative
 * or 10 ns, where the step goes (explain) included; bytes, memory, events and per-link
 * bytes exactly) against SimGrid with its
 * full network update (network/optim Full, the same CM02 model recomputed at
 * every event), and the step time within 0.1 % against SimGrid as points run
 * by default (its lazy update). The battery: causal layouts of burst and ring,
 * the double ring, prefill and decode, every what-if, shared NICs and an
 * oversubscribed fabric, the H100 profile's p2p base costs and efficiencies,
 * the PCIe node, folded and not; collectives: usp, ulysses, tp, tree decode,
 * layer and model scope, with every collective model (steps, flow,
 * analytic), NCCL's tree in chunks or whole, Open MPI's binomial allreduce,
 * what-ifs on them, and one that only some ranks call. On toy
 * programs (a user platform file, which only --engine direct takes): the same
 * error messages for a deadlock, a tag mismatch, a send nobody receives and a
 * handle never waited, and the same figures for transfers that share links.
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

#include "profile/profile.h"
#include "sim/platform.h"
#include "sim/sim.h"
#include "topologies/topo.h"
#include "toy.h"

#define TIME_REL 1e-6 /* against SimGrid's full update: the same arithmetic, rounding apart */
/* ... and SimGrid's time precision (precision/timing, 1e-9 s by default: it ends an activity that
 * close to its due time early), which shows on the microseconds of a decode step: ten times that */
#define TIME_ABS 1e-8
#define STEP_GATE 1e-3 /* against SimGrid's default lazy update: the exactness gate (0.1 %) */

static bs_config point(bs_method m, int gpus, int64_t seq) {
  bs_config c;
  bs_config_default(&c);
  c.par.method = m;
  c.par.gpus = gpus;
  c.work.seq_len = seq;
  return c;
}

static void same_time(double a, double b, const char *what, int rank) {
  double rel = fabs(a - b) / (fabs(a) > 0 ? fabs(a) : 1);
  int ok = rel <= TIME_REL || fabs(a - b) <= TIME_ABS;
  if (!ok) print_error("%s (rank %d): simgrid %.12g, direct %.12g (%.3g)\n", what, rank, a, b, rel);
  assert_true(ok);
}

/* Where the step goes (explain): the same parts, to rounding. */
static void same_parts(const bs_explain_parts *a, const bs_explain_parts *b, int rank) {
  for (int k = 0; k < BS_XK_COUNT; k++) same_time(a->compute[k], b->compute[k], "explain.compute", rank);
  same_time(a->launch, b->launch, "explain.launch", rank);
  for (int l = 0; l < BS_XL_COUNT; l++) same_time(a->exposed[l], b->exposed[l], "explain.exposed", rank);
  same_time(a->wait_for_peers, b->wait_for_peers, "explain.wait_for_peers", rank);
}

/* Every figure of the two results: times to rounding, everything counted exactly. */
static void same_result(const bs_result *s, const bs_result *d) {
  same_time(s->time.step, d->time.step, "time.step", -1);
  same_time(s->time.fwd, d->time.fwd, "time.fwd", -1);
  same_time(s->time.bwd, d->time.bwd, "time.bwd", -1);
  same_time(s->time.compute, d->time.compute, "time.compute", -1);
  same_time(s->time.comm_exposed, d->time.comm_exposed, "time.comm_exposed", -1);
  same_time(s->time.wait_for_peers, d->time.wait_for_peers, "time.wait_for_peers", -1);
  assert_int_equal(s->comm.per_rank_max_sent, d->comm.per_rank_max_sent);
  assert_int_equal(s->comm.total, d->comm.total);
  assert_int_equal(s->comm.intra_node, d->comm.intra_node);
  assert_int_equal(s->comm.inter_node, d->comm.inter_node);
  for (int k = 0; k < BS_DIM_COUNT; k++) assert_int_equal(s->comm.by_group[k], d->comm.by_group[k]);
  assert_int_equal(s->mem.peak_bytes_max, d->mem.peak_bytes_max);
  assert_int_equal(s->mem.oom, d->mem.oom);
  for (int k = 0; k < BS_MEM_CLASS_COUNT; k++) assert_int_equal(s->mem.breakdown[k], d->mem.breakdown[k]);
  assert_int_equal(s->sim_events, d->sim_events);
  assert_int_equal(s->sim_actors, d->sim_actors);
  assert_int_equal(s->nranks, d->nranks);
  assert_int_equal(s->explain.critical_rank, d->explain.critical_rank);
  same_parts(&s->explain.critical, &d->explain.critical, s->explain.critical_rank);
  same_parts(&s->explain.mean, &d->explain.mean, -1);
  for (int r = 0; r < s->nranks; r++) {
    const bs_rank_result *a = &s->ranks[r], *b = &d->ranks[r];
    same_time(a->step, b->step, "step", r);
    same_time(a->fwd, b->fwd, "fwd", r);
    same_time(a->bwd, b->bwd, "bwd", r);
    same_time(a->compute, b->compute, "compute", r);
    same_time(a->comm_exposed, b->comm_exposed, "comm_exposed", r);
    same_time(a->wait_for_peers, b->wait_for_peers, "wait_for_peers", r);
    assert_int_equal(a->bytes_sent, b->bytes_sent);
    assert_int_equal(a->bytes_recv, b->bytes_recv);
    assert_int_equal(a->peak_bytes, b->peak_bytes);
    for (int k = 0; k < BS_DIM_COUNT; k++) assert_int_equal(a->by_group[k], b->by_group[k]);
  }
}

static void run(const bs_config *c, bs_sim_opts *o, bs_engine e, int full, bs_result *r, bs_link_stat **links,
                int *nlinks) {
  o->engine = e;
  o->sg_full_update = full;
  char err[512] = "";
  int rc = bs_sim_run_source(c, o, NULL, r, links, nlinks, err, sizeof err);
  if (rc) print_error("%s engine: %s\n", e == BS_ENGINE_DIRECT ? "direct" : "simgrid", err);
  assert_int_equal(rc, 0);
}

/* One point on both engines with options o; per-link statistics compared when links is set. */
static void check_opts(const bs_config *c, bs_sim_opts o, int links) {
  bs_result full, lazy, direct;
  bs_link_stat *lf = NULL, *ld = NULL;
  int nf = 0, nd = 0;
  run(c, &o, BS_ENGINE_SIMGRID, 1, &full, links ? &lf : NULL, &nf);
  run(c, &o, BS_ENGINE_DIRECT, 0, &direct, links ? &ld : NULL, &nd);
  run(c, &o, BS_ENGINE_SIMGRID, 0, &lazy, NULL, NULL);
  assert_non_null(strstr(direct.sim_network, "engine: direct"));
  assert_non_null(strstr(full.sim_network, "engine: simgrid"));
  same_result(&full, &direct);
  double gate = fabs(lazy.time.step - direct.time.step) / lazy.time.step;
  if (gate > STEP_GATE) print_error("time.step: simgrid %.12g, direct %.12g\n", lazy.time.step, direct.time.step);
  assert_true(gate <= STEP_GATE);
  if (links) {
    assert_int_equal(nf, nd);
    assert_true(nf > 0);
    double busy = 0;
    for (int i = 0; i < nf; i++) {
      assert_string_equal(lf[i].name, ld[i].name);
      assert_true(lf[i].bytes == ld[i].bytes);
      assert_true(fabs(lf[i].busy_s - ld[i].busy_s) <= TIME_REL * (lf[i].busy_s > 0 ? lf[i].busy_s : 1));
      busy += lf[i].busy_s;
    }
    assert_true(busy > 0);
  }
  free(lf);
  free(ld);
  bs_result_free(&full);
  bs_result_free(&lazy);
  bs_result_free(&direct);
}

/* One point on both engines (fold as given). */
static void check(const bs_config *c, bs_tristate fold, int nodes_per_leaf, double oversub, int links) {
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.fold = fold;
  o.nodes_per_leaf = nodes_per_leaf;
  o.oversub = oversub;
  check_opts(c, o, links);
}

/* One point with collectives as coll.c's model m runs them (fold as given). */
static void check_coll(const bs_config *c, bs_tristate fold, bs_coll_model m) {
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.fold = fold;
  o.coll_model = m;
  check_opts(c, o, 0);
}

/* Causal burst and ring on contiguous, zigzag and striped shards; non-causal, folded and not. */
static void test_layouts(void **state) {
  (void)state;
  const bs_method m[] = {BS_BURST, BS_RING};
  const bs_layout l[] = {BS_CONTIGUOUS, BS_ZIGZAG, BS_STRIPED};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) {
      bs_config c = point(m[i], 32, 128 * 1024);
      c.work.causal = 1;
      c.par.layout = l[j];
      check(&c, BS_OFF, 0, 0, 0);
    }
  bs_config c = point(BS_BURST, 64, 256 * 1024);
  check(&c, BS_AUTO, 0, 0, 0);
  check(&c, BS_OFF, 0, 0, 1);
}

/* The double ring on and off: two sends per rank at once share its links. */
static void test_double_ring(void **state) {
  (void)state;
  const bs_tristate dr[] = {BS_ON, BS_OFF};
  for (int i = 0; i < 2; i++) {
    bs_config c = point(BS_BURST, 64, 256 * 1024);
    c.par.double_ring = dr[i];
    check(&c, BS_OFF, 0, 0, 0);
  }
}

/* Prefill and decode (ring: point-to-point only); Li et al.'s ring at 1M tokens (no fold). */
static void test_phases(void **state) {
  (void)state;
  bs_config c = point(BS_RING, 32, 256 * 1024);
  c.work.phase = BS_PREFILL;
  check(&c, BS_OFF, 0, 0, 0);
  c = point(BS_BURST, 32, 256 * 1024);
  c.work.phase = BS_PREFILL;
  check(&c, BS_AUTO, 0, 0, 0);
  c = point(BS_RING, 16, 128 * 1024);
  c.work.phase = BS_DECODE;
  check(&c, BS_OFF, 0, 0, 0);
  c = point(BS_RING_LI2021, 32, 1024 * 1024);
  check(&c, BS_AUTO, 0, 0, 0);
}

/* A straggler, degraded NICs or one node's NVLink, failed NICs. */
static void test_whatifs(void **state) {
  (void)state;
  bs_config c = point(BS_BURST, 32, 128 * 1024);
  c.cluster.straggler_rank = 5;
  c.cluster.straggler_factor = 1.5;
  check(&c, BS_AUTO, 0, 0, 0);
  c = point(BS_RING, 32, 128 * 1024);
  c.cluster.degrade_class = BS_LINK_NIC;
  c.cluster.degrade_factor = 0.5;
  check(&c, BS_AUTO, 0, 0, 0);
  c = point(BS_BURST, 32, 128 * 1024);
  c.cluster.degrade_class = BS_LINK_NVLINK;
  c.cluster.degrade_one_node = 1;
  c.cluster.degrade_node = 1;
  c.cluster.degrade_factor = 0.5;
  check(&c, BS_OFF, 0, 0, 0);
  c = point(BS_BURST, 32, 128 * 1024);
  c.cluster.failed_node = 1;
  c.cluster.failed_nics = 3;
  check(&c, BS_OFF, 0, 0, 1);
}

/* Shared NICs (2 and 1 per node) and a 4:1 oversubscribed fabric of 2 nodes per leaf: contention. */
static void test_contention(void **state) {
  (void)state;
  bs_config c = point(BS_RING, 32, 128 * 1024);
  c.cluster.nics_per_node = 2;
  check(&c, BS_OFF, 0, 0, 0);
  c = point(BS_BURST, 32, 128 * 1024);
  c.cluster.nics_per_node = 1;
  check(&c, BS_OFF, 0, 0, 1);
  c = point(BS_BURST, 64, 256 * 1024);
  check(&c, BS_OFF, 2, 4, 1);
  c.par.method = BS_RING;
  check(&c, BS_AUTO, 2, 4, 0);
}

/* The H100 profile: p2p base cost across nodes, p2p efficiency on both routes; the PCIe node. */
static void test_profiles(void **state) {
  (void)state;
  bs_config c = point(BS_BURST, 16, 256 * 1024);
  strcpy(c.cluster.topology, "dgx-h100");
  strcpy(c.cluster.profile, "h100-sxm");
  check(&c, BS_OFF, 0, 0, 1);
  c.par.method = BS_RING;
  c.par.gpus = 64;
  check(&c, BS_AUTO, 0, 0, 0);
  c = point(BS_BURST, 8, 32 * 1024);
  strcpy(c.cluster.topology, "a100-pcie-node");
  strcpy(c.cluster.profile, "a100-pcie-40gb");
  check(&c, BS_OFF, 0, 0, 1);
  c.par.method = BS_RING;
  check(&c, BS_OFF, 0, 0, 0);
}

/* usp (heads first and ring first), ulysses: all-to-alls as flows and as their alpha-beta time. */
static void test_usp(void **state) {
  (void)state;
  const bs_placement pl[] = {BS_HEAD_FIRST, BS_RING_FIRST};
  for (int i = 0; i < 2; i++) {
    bs_config c = point(BS_USP, 32, 128 * 1024);
    c.par.ulysses_placement = pl[i];
    c.work.causal = 1;
    check_coll(&c, BS_OFF, BS_COLL_MODEL_AUTO);
    check_coll(&c, BS_AUTO, BS_COLL_ANALYTIC);
  }
  bs_config c = point(BS_USP, 32, 128 * 1024);
  check(&c, BS_OFF, 0, 0, 1); /* per-link statistics: the ring's messages (collectives count in neither) */
  c = point(BS_ULYSSES, 16, 64 * 1024);
  check_coll(&c, BS_OFF, BS_COLL_MODEL_AUTO);
  check_coll(&c, BS_OFF, BS_COLL_ANALYTIC);
}

/* Megatron TP (both variants) inside a node and across two: rings as lockstep steps, as flows and
 * as their alpha-beta time. */
static void test_tp(void **state) {
  (void)state;
  const int variant[] = {1, 3};
  for (int i = 0; i < 2; i++)
    for (int g = 8; g <= 16; g *= 2) {
      bs_config c = point(BS_TP, g, 32 * 1024);
      c.par.tp_variant = variant[i];
      check_coll(&c, BS_OFF, BS_COLL_STEPS);
      check_coll(&c, BS_OFF, BS_COLL_FLOW);
      check_coll(&c, BS_OFF, BS_COLL_ANALYTIC);
    }
}

/* Tree decode; usp at layer scope; LLaMA-2-7B's first 4 layers at model scope over 2 stages and 2
 * replicas (burst, with and without TP 2): the gradient allreduce as rings (auto), as the tree
 * timed as a whole (every rank of one residue, flow) and as the tree's alpha-beta time. */
static void test_scopes(void **state) {
  (void)state;
  bs_config c = point(BS_TREE, 16, 128 * 1024);
  c.work.phase = BS_DECODE;
  check_coll(&c, BS_OFF, BS_COLL_MODEL_AUTO);
  check_coll(&c, BS_OFF, BS_COLL_ANALYTIC);
  c = point(BS_USP, 16, 64 * 1024);
  c.work.scope = BS_SCOPE_LAYER;
  check_coll(&c, BS_OFF, BS_COLL_MODEL_AUTO);
  for (int tp = 1; tp <= 2; tp++) {
    c = point(BS_BURST, 16, 32 * 1024);
    c.work.scope = BS_SCOPE_MODEL;
    c.model.layers = 4;
    c.work.batch = 2 * tp;
    c.par.pp = 2;
    c.par.dp = 2;
    c.par.tp = tp;
    check_coll(&c, BS_OFF, BS_COLL_MODEL_AUTO);
    c.cluster.coll_algo = BS_COLL_ALGO_TREE;
    check_coll(&c, BS_OFF, BS_COLL_ANALYTIC);
  }
  c = point(BS_BURST, 16, 32 * 1024);
  c.work.scope = BS_SCOPE_MODEL;
  c.model.layers = 4;
  c.work.batch = 2;
  c.par.dp = 2;
  c.cluster.coll_algo = BS_COLL_ALGO_TREE;
  check_coll(&c, BS_OFF, BS_COLL_FLOW);
}

/* A source that hands out copies of a plan's ops (bs_plan_next) and not the ops in place
 * (bs_sim_source.next_ref, as the plan source does): the path before the simulation read ops in
 * place, and what a source without next_ref still takes. */
static void *copy_new(void *ctx, int rank) { return bs_plan_iter_new(ctx, rank); }
static int copy_next(void *it, bs_op *op) { return bs_plan_next(it, op); }
static void copy_free(void *it) { bs_plan_iter_free(it); }
static const char *copy_error(void *it) { return bs_plan_iter_errmsg(it); }

/* The ops read in place and copied: the same figures, bit for bit, on either engine, folded or not
 * (the pre-pass reads them in place too), with the records of attention ops and without. */
static void test_op_ref(void **state) {
  (void)state;
  bs_config c = point(BS_BURST, 128, 65536); /* 16 nodes: a cp ring of 16 over 4 replicas folds */
  c.par.tp = 2;
  c.par.dp = 4;
  c.work.batch = 4;
  c.work.causal = 1;
  c.par.layout = BS_ZIGZAG;
  c.work.scope = BS_SCOPE_MODEL;
  c.model.layers = 2;
  c.par.tp_variant = 3;
  for (int k = 0; k < 8; k++) {
    bs_sim_opts o;
    bs_sim_opts_default(&o);
    o.engine = k & 1 ? BS_ENGINE_DIRECT : BS_ENGINE_SIMGRID;
    o.fold = k & 2 ? BS_OFF : BS_AUTO;
    o.no_op_cache = (k & 4) != 0;
    bs_platform_spec ps;
    static bs_profile prof;
    char err[512] = "";
    if (bs_profile_load(c.cluster.profile, &prof, err, sizeof err) ||
        bs_platform_resolve(&c, &o, &prof, &ps, err, sizeof err))
      fail_msg("%s", err);
    bs_plan *plan;
    if (bs_plan_create(&c, ps.ranks_per_node, &plan, err, sizeof err)) fail_msg("%s", err);
    bs_plan_set_op_cache(plan, !o.no_op_cache);
    bs_sim_source copies = {plan, bs_plan_ranks(plan), copy_new, copy_next, copy_free, copy_error, NULL};
    bs_result r[2];
    for (int i = 0; i < 2; i++)
      if (bs_sim_run_source(&c, &o, i ? &copies : NULL, &r[i], NULL, NULL, err, sizeof err)) fail_msg("%s", err);
    assert_true(r[0].time.step > 0);
    if (r[0].time.step != r[1].time.step || r[0].time.fwd != r[1].time.fwd || r[0].time.bwd != r[1].time.bwd)
      fail_msg("case %d: step %.17g in place, %.17g copied", k, r[0].time.step, r[1].time.step);
    same_result(&r[0], &r[1]);
    bs_result_free(&r[0]);
    bs_result_free(&r[1]);
    bs_plan_free(plan);
  }
}

/* A straggler and half-rate NICs on a point with collectives. */
static void test_coll_whatifs(void **state) {
  (void)state;
  bs_config c = point(BS_USP, 32, 128 * 1024);
  c.cluster.straggler_rank = 9;
  c.cluster.straggler_factor = 1.5;
  check_coll(&c, BS_OFF, BS_COLL_MODEL_AUTO);
  c = point(BS_TP, 16, 32 * 1024);
  c.cluster.degrade_class = BS_LINK_NIC;
  c.cluster.degrade_factor = 0.5;
  check_coll(&c, BS_OFF, BS_COLL_MODEL_AUTO);
  c.cluster.degrade_class = BS_LINK_NVLINK;
  c.cluster.degrade_one_node = 1;
  c.cluster.degrade_node = 1;
  check_coll(&c, BS_OFF, BS_COLL_STEPS);
}

/* NCCL's double binary tree in pipelined chunks (one node, two nodes, the gradient groups of pp 2 x
 * dp 2 across nodes) and Open MPI's binomial allreduce (the host profile's small allreduces). */
static void test_coll_trees(void **state) {
  (void)state;
  bs_config c = point(BS_TP, 8, 32 * 1024);
  c.cluster.coll_algo = BS_COLL_ALGO_TREE;
  check_coll(&c, BS_OFF, BS_COLL_MODEL_AUTO);
  c.par.gpus = 16;
  check_coll(&c, BS_OFF, BS_COLL_STEPS);
  check_coll(&c, BS_OFF, BS_COLL_FLOW);
  c = point(BS_BURST, 32, 32 * 1024);
  c.work.scope = BS_SCOPE_MODEL;
  c.model.layers = 4;
  c.work.batch = 2;
  c.par.pp = 2;
  c.par.dp = 2;
  c.par.order[0] = BS_DIM_TP;
  c.par.order[1] = BS_DIM_DP;
  c.par.order[2] = BS_DIM_CP;
  c.par.order[3] = BS_DIM_PP;
  c.cluster.coll_algo = BS_COLL_ALGO_TREE;
  check_coll(&c, BS_OFF, BS_COLL_FLOW);
  for (int g = 8; g <= 16; g *= 2) {
    c = point(BS_TREE, g, 64 * 1024);
    c.work.phase = BS_DECODE;
    snprintf(c.cluster.profile, sizeof c.cluster.profile, "%s", BS_HOST_DGX_PROFILE); /* host + DGX links */
    check_coll(&c, BS_OFF, BS_COLL_MODEL_AUTO);
  }
}

/* Tree decode over 136 ranks: a collective group larger than the members' nodes a setup keeps
 * inline (SIM_COLL_NODE_INLINE, sim/coll_setup.h), as rings, flows and the tree timed whole. */
static void test_large_group(void **state) {
  (void)state;
  bs_config c = point(BS_TREE, 136, 136 * 512);
  c.work.phase = BS_DECODE;
  check_coll(&c, BS_OFF, BS_COLL_MODEL_AUTO);
  check_coll(&c, BS_OFF, BS_COLL_STEPS);
  check_coll(&c, BS_OFF, BS_COLL_ANALYTIC);
}

/* A toy program on both engines: 0 and the same figures, or the same error message. */
static void toy_both(toy_plan *p, const toy_files *t, int want_rc) {
  bs_config c;
  toy_config(&c, t, p->ranks);
  bs_sim_source src = toy_source(p);
  bs_result r[2];
  char err[2][512] = {"", ""};
  for (int e = 0; e < 2; e++) {
    bs_sim_opts o;
    bs_sim_opts_default(&o);
    o.engine = e ? BS_ENGINE_DIRECT : BS_ENGINE_SIMGRID;
    o.sg_full_update = 1;
    assert_int_equal(bs_sim_run_source(&c, &o, &src, &r[e], NULL, NULL, err[e], sizeof err[e]), want_rc);
  }
  if (want_rc) assert_string_equal(err[0], err[1]);
  else same_result(&r[0], &r[1]);
  bs_result_free(&r[0]);
  bs_result_free(&r[1]);
}

/* The failures of a program read the same from either engine. */
static void test_errors(void **state) {
  (void)state;
  toy_files t;
  toy_setup(&t, 3, 3);
  static toy_plan p;
  int h0 = 0, h1 = 1;
  memset(&p, 0, sizeof p); /* both receive first and wait: a deadlock */
  p.ranks = 2;
  for (int r = 0; r < 2; r++) {
    toy_p2p(&p, r, BS_OP_RECV, 0, 1 - r, 1, 1000);
    toy_wait(&p, r, 1, &h0);
    toy_p2p(&p, r, BS_OP_SEND, 1, 1 - r, 1, 1000);
    toy_wait(&p, r, 1, &h1);
  }
  toy_both(&p, &t, -1);
  memset(&p, 0, sizeof p); /* tags that differ */
  p.ranks = 2;
  toy_p2p(&p, 0, BS_OP_SEND, 0, 1, 5, 1000);
  toy_p2p(&p, 1, BS_OP_RECV, 0, 0, 6, 1000);
  toy_wait(&p, 0, 1, &h0);
  toy_wait(&p, 1, 1, &h0);
  toy_both(&p, &t, -1);
  memset(&p, 0, sizeof p); /* sizes that differ */
  p.ranks = 2;
  toy_p2p(&p, 0, BS_OP_SEND, 0, 1, 5, 1000);
  toy_p2p(&p, 1, BS_OP_RECV, 0, 0, 5, 999);
  toy_wait(&p, 0, 1, &h0);
  toy_wait(&p, 1, 1, &h0);
  toy_both(&p, &t, -1);
  memset(&p, 0, sizeof p); /* a send nobody receives */
  p.ranks = 2;
  toy_p2p(&p, 0, BS_OP_SEND, 0, 1, 3, 1000);
  toy_wait(&p, 0, 1, &h0);
  toy_both(&p, &t, -1);
  memset(&p, 0, sizeof p); /* a handle never waited */
  p.ranks = 2;
  toy_p2p(&p, 0, BS_OP_SEND, 0, 1, 3, 1000);
  toy_p2p(&p, 1, BS_OP_RECV, 0, 0, 3, 1000);
  toy_wait(&p, 1, 1, &h0);
  toy_both(&p, &t, -1);
  toy_teardown(&t);
}

/* Transfers that share links, start while others are paying their latency and end at once: rank 0
 * sends to 1 and 2 at once (its uplink shared), rank 1 to 2 (2's downlink shared), in rounds with
 * copies of different lengths between them, memory allocated and freed on the way. */
static void test_toy_sharing(void **state) {
  (void)state;
  toy_files t;
  toy_setup(&t, 3, 1);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 3;
  for (int s = 0; s < 4; s++) {
    int64_t m = 2000000 * (s + 1), k = 1000000 * (3 - s);
    toy_alloc(&p, 0, s, m, BS_MEM_COMM);
    toy_p2p(&p, 0, BS_OP_SEND, 0, 1, s, m);
    toy_copy(&p, 0, k);
    toy_p2p(&p, 0, BS_OP_SEND, 1, 2, s, m / 2);
    toy_copy(&p, 1, 2 * k);
    toy_p2p(&p, 1, BS_OP_RECV, 0, 0, s, m);
    toy_p2p(&p, 1, BS_OP_SEND, 1, 2, 100 + s, m / 3);
    toy_p2p(&p, 2, BS_OP_RECV, 0, 0, s, m / 2);
    toy_copy(&p, 2, k / 2);
    toy_p2p(&p, 2, BS_OP_RECV, 1, 1, 100 + s, m / 3);
    int h[2] = {0, 1};
    for (int r = 0; r < 3; r++) toy_wait(&p, r, 2, h);
    toy_free_buf(&p, 0, s);
  }
  toy_both(&p, &t, 0);
  toy_teardown(&t);
}

/* A collective that only ranks 2 and 3 have (rank 0's program has none), as a ring and as a tree
 * in chunks: the same figures on both engines. */
static void test_coll_midway(void **state) {
  (void)state;
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 8;
  int h0 = 0;
  for (int r = 0; r < 8; r++) {
    toy_p2p(&p, r, BS_OP_SEND, 0, (r + 1) % 8, 1, 4000000);
    toy_p2p(&p, r, BS_OP_RECV, 1, (r + 7) % 8, 1, 4000000);
    int h[2] = {0, 1};
    toy_wait(&p, r, 2, h);
  }
  for (int r = 2; r < 4; r++) { /* ranks 2 and 3 reduce 1 MB between them */
    bs_op *op = toy_push(&p, r, BS_OP_COLL);
    op->handle = 0;
    op->u.coll.kind = BS_COLL_ALLREDUCE;
    op->u.coll.group = (bs_group){2, 1, 2};
    op->u.coll.bytes = 1000000;
    toy_wait(&p, r, 1, &h0);
  }
  bs_config c;
  bs_config_default(&c); /* 8 GPUs of a generated dgx-a100 node */
  bs_sim_source src = toy_source(&p);
  const bs_coll_algo algo[] = {BS_COLL_ALGO_RING, BS_COLL_ALGO_TREE};
  for (int i = 0; i < 2; i++) {
    bs_result r[2];
    char err[512] = "";
    c.cluster.coll_algo = algo[i];
    for (int e = 0; e < 2; e++) {
      bs_sim_opts o;
      bs_sim_opts_default(&o);
      o.engine = e ? BS_ENGINE_DIRECT : BS_ENGINE_SIMGRID;
      o.sg_full_update = 1;
      assert_int_equal(bs_sim_run_source(&c, &o, &src, &r[e], NULL, NULL, err, sizeof err), 0);
    }
    assert_non_null(strstr(r[1].sim_network, "engine: direct"));
    assert_true(r[0].time.step > 0);
    same_result(&r[0], &r[1]);
    bs_result_free(&r[0]);
    bs_result_free(&r[1]);
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_layouts),      cmocka_unit_test(test_double_ring), cmocka_unit_test(test_phases),
    cmocka_unit_test(test_whatifs),      cmocka_unit_test(test_contention),  cmocka_unit_test(test_profiles),
    cmocka_unit_test(test_usp),          cmocka_unit_test(test_tp),          cmocka_unit_test(test_scopes),
    cmocka_unit_test(test_coll_whatifs), cmocka_unit_test(test_coll_trees),  cmocka_unit_test(test_coll_midway),
    cmocka_unit_test(test_errors),       cmocka_unit_test(test_toy_sharing), cmocka_unit_test(test_large_group),
    cmocka_unit_test(test_op_ref),
  };
  return bs_run_named("direct", tests, sizeof tests / sizeof tests[0], argc, argv, NULL, NULL);
}
