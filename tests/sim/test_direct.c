/*
 * test_direct.c — the direct engine (sim/direct.h) against SimGrid on a
 * battery of points: every field of the result (times within 1e-6 relative,
 * bytes, memory, events and per-link bytes exactly) against SimGrid with its
 * full network update (network/optim Full, the same CM02 model recomputed at
 * every event), and the step time within 0.1 % against SimGrid as points run
 * by default (its lazy update). The battery: causal layouts of burst and ring,
 * the double ring, prefill and decode, every what-if, shared NICs and an
 * oversubscribed fabric, the H100 profile's p2p base costs and efficiencies,
 * the PCIe node, folded and not. A point with a collective goes back to
 * SimGrid under --engine auto and is refused under --engine direct.
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

#include "sim/sim.h"
#include "topologies/topo.h"

#define TIME_REL 1e-6  /* against SimGrid's full update: the same arithmetic, rounding apart */
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
  if (rel > TIME_REL) print_error("%s (rank %d): simgrid %.12g, direct %.12g (%.3g)\n", what, rank, a, b, rel);
  assert_true(rel <= TIME_REL);
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

/* One point on both engines (fold as given); per-link statistics compared when links is set. */
static void check(const bs_config *c, bs_tristate fold, int nodes_per_leaf, double oversub, int links) {
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.fold = fold;
  o.nodes_per_leaf = nodes_per_leaf;
  o.oversub = oversub;
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

/* Prefill and decode (ring: point-to-point only). */
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

/* A collective: auto hands the point to SimGrid (the same result, said so); direct refuses. */
static void test_coll_fallback(void **state) {
  (void)state;
  bs_config c = point(BS_USP, 16, 64 * 1024);
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_result a, s;
  run(&c, &o, BS_ENGINE_AUTO, 0, &a, NULL, NULL);
  run(&c, &o, BS_ENGINE_SIMGRID, 0, &s, NULL, NULL);
  assert_non_null(strstr(a.sim_network, "engine: simgrid (a collective (COLL))"));
  assert_true(a.time.step == s.time.step);
  assert_int_equal(a.comm.total, s.comm.total);
  o.engine = BS_ENGINE_DIRECT;
  bs_result d;
  char err[512] = "";
  assert_int_equal(bs_sim_run(&c, &o, &d, err, sizeof err), -1);
  assert_non_null(strstr(err, "--engine direct: this point needs SimGrid: a collective (COLL)"));
  bs_result_free(&a);
  bs_result_free(&s);
  bs_result_free(&d);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_layouts),       cmocka_unit_test(test_double_ring), cmocka_unit_test(test_phases),
    cmocka_unit_test(test_whatifs),       cmocka_unit_test(test_contention),  cmocka_unit_test(test_profiles),
    cmocka_unit_test(test_coll_fallback),
  };
  return bs_run_named("direct", tests, sizeof tests / sizeof tests[0], argc, argv, NULL, NULL);
}
