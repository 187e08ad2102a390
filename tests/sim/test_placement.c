/*
 * test_placement.c — where traffic goes when the cluster or the plan places it
 * differently: dgx nodes whose GPUs share fewer NICs (cluster.nics_per_node),
 * checked against hand arithmetic on the generated platform with the toy
 * profile (CM02, no cross traffic, TCP-gamma 0: exact), and usp's two
 * placements (parallel.ulysses_placement), whose bytes per link class swap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/run_named.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "topologies/topo.h"

#include "toy.h"

/* The link figures a generated dgx-a100 platform carries when the profile names none. */
static bs_link_val dgx_link(bs_link_class c) {
  bs_topo_params p;
  char err[256];
  assert_int_equal(bs_topo_defaults("dgx-a100", 2, &p, err, sizeof err), 0);
  return p.link[c];
}

/* 2 DGX A100 nodes of 8 GPUs, `nics` NICs each (0: the key not given); every GPU exchanges
 * `bytes` with a GPU of the other node (pairs given by peer()); returns the step time. */
static double exchange(int nics, int64_t bytes, int (*peer)(int)) {
  toy_files t;
  toy_setup(&t, 16, 8); /* for the toy profile: the topology below is the generator */
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 16;
  for (int r = 0; r < 16; r++) {
    toy_p2p(&p, r, BS_OP_RECV, 0, peer(r), 1, bytes);
    toy_p2p(&p, r, BS_OP_SEND, 1, peer(r), 1, bytes);
    int h[2] = {0, 1};
    toy_wait(&p, r, 2, h);
  }
  bs_config c;
  toy_config(&c, &t, 16);
  snprintf(c.cluster.topology, sizeof c.cluster.topology, "dgx-a100");
  c.cluster.nics_per_node = nics;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.fold = BS_OFF;
  bs_sim_source s = toy_source(&p);
  bs_result r;
  char err[512] = "";
  if (bs_sim_run_source(&c, &o, &s, &r, NULL, NULL, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  double step = r.time.step;
  bs_result_free(&r);
  toy_teardown(&t);
  return step;
}

static int same_rail(int r) { return (r + 8) % 16; }
static int same_node(int r) { return r ^ 1; }

/* GPU i of node 0 and GPU i of node 1 exchange B bytes, all 16 at once. One NIC per GPU: each
 * message has a NIC per end to itself, 2 latencies + B / bw. k GPUs per NIC: k messages share
 * each NIC's direction, 2 latencies + k B / bw (max-min sharing, no cross traffic). */
static void test_nic_share_exact(void **state) {
  (void)state;
  bs_link_val nic = dgx_link(BS_LINK_NIC);
  const int64_t B = 1 << 26;
  const int nics[] = {0, 8, 4, 2, 1};
  for (size_t i = 0; i < sizeof nics / sizeof nics[0]; i++) {
    int k = nics[i] ? 8 / nics[i] : 1;
    double want = 2 * nic.lat_s + (double)k * (double)B / nic.bw_Bps;
    double got = exchange(nics[i], B, same_rail);
    fprintf(stderr, "%d NICs per node: %.9f s (want %.9f s)\n", nics[i] ? nics[i] : 8, got, want);
    assert_close(got, want, 1e-9);
  }
}

/* GPUs that share a NIC still talk over NVLink inside their node: 2 NVLink latencies + B / bw. */
static void test_nic_share_keeps_nvlink(void **state) {
  (void)state;
  bs_link_val nv = dgx_link(BS_LINK_NVLINK);
  const int64_t B = 1 << 26;
  double want = 2 * nv.lat_s + (double)B / nv.bw_Bps;
  assert_close(exchange(0, B, same_node), want, 1e-9);
  assert_close(exchange(2, B, same_node), want, 1e-9);
  assert_close(exchange(1, B, same_node), want, 1e-9);
}

/* The generated wiring: 2 NICs per node of 8 GPUs, GPUs 0-3 on NIC 0 and 4-7 on NIC 1, 2 rails. */
static void test_nic_share_xml(void **state) {
  (void)state;
  bs_topo_params p;
  char err[256];
  assert_int_equal(bs_topo_defaults("dgx-a100", 2, &p, err, sizeof err), 0);
  p.nics_per_node = 2;
  for (int i = 0; i < 8; i++) assert_int_equal(bs_topo_nic_of(&p, i), i / 4);
  char *xml = bs_topo_xml(&p, err, sizeof err);
  assert_non_null(xml);
  assert_non_null(strstr(xml, "<link id=\"nic-n1-nic1\""));
  assert_null(strstr(xml, "nic-n0-nic2"));
  assert_null(strstr(xml, "nic-n0-g"));
  assert_non_null(strstr(xml, "<router id=\"leaf-r1-l0\"/>"));
  assert_null(strstr(xml, "leaf-r2-l0"));
  assert_non_null(strstr(xml,
                         "<route src=\"gpu11\" dst=\"leaf-r0-l0\" symmetrical=\"YES\">"
                         "<link_ctn id=\"nic-n1-nic0\" direction=\"UP\"/></route>"));
  assert_non_null(strstr(xml, "<bypassRoute src=\"gpu5\" dst=\"gpu7\"><link_ctn id=\"nvlink-n0-g5\""));
  free(xml);
  /* one NIC per GPU is the generator's own wiring, written as before */
  p.nics_per_node = 8;
  char *own = bs_topo_xml(&p, err, sizeof err);
  p.nics_per_node = 0;
  char *plain = bs_topo_xml(&p, err, sizeof err);
  assert_non_null(own);
  assert_non_null(plain);
  assert_string_equal(own, plain);
  free(own);
  free(plain);
  p.nics_per_node = 3;
  assert_null(bs_topo_xml(&p, err, sizeof err));
  assert_non_null(strstr(err, "3 NICs per node must divide its 8 GPUs"));
}

static void run_point(const bs_config *c, bs_tristate fold, bs_result *r) {
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.fold = fold;
  char err[512] = "";
  if (bs_sim_run(c, &o, r, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
}

/* A plan on shared NICs: the fold (whole NICs per folded node) times as the full platform, and
 * fewer NICs never make a step faster. */
static void test_nic_share_fold(void **state) {
  (void)state;
  bs_config c;
  bs_config_default(&c);
  c.par.gpus = 32;
  c.work.seq_len = 32768;
  c.work.phase = BS_PREFILL;
  double prev = 0;
  const int nics[] = {8, 4, 2, 1};
  for (size_t i = 0; i < sizeof nics / sizeof nics[0]; i++) {
    c.cluster.nics_per_node = nics[i];
    bs_result full, fold;
    run_point(&c, BS_OFF, &full);
    run_point(&c, BS_AUTO, &fold);
    fprintf(stderr, "burst 32 GPUs, %d NICs per node: %.9f s (fold: %d actors, %.9f s)\n", nics[i], full.time.step,
            fold.sim_actors, fold.time.step);
    assert_close(fold.time.step, full.time.step, 1e-9);
    assert_int_equal(fold.comm.total, full.comm.total);
    assert_true(full.time.step >= prev);
    prev = full.time.step;
    bs_result_free(&full);
    bs_result_free(&fold);
  }
}

/* Bad values: the message names the key and why. */
static void test_nic_share_bad(void **state) {
  (void)state;
  struct {
    const char *topology;
    int nics, gpus;
    const char *why;
  } cases[] = {
    {"dgx-a100", 3, 8, "cluster.nics_per_node: 3 does not divide the 8 GPUs per node of dgx-a100"},
    {"dgx-h100", 16, 8, "cluster.nics_per_node: 16 does not divide the 8 GPUs per node of dgx-h100"},
    {"a100-pcie-node", 2, 8, "cluster.nics_per_node: 2: only the dgx topologies take it"},
    {"host", 1, 2, "cluster.nics_per_node: 1: only the dgx topologies take it"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    bs_config c;
    bs_config_default(&c);
    snprintf(c.cluster.topology, sizeof c.cluster.topology, "%s", cases[i].topology);
    snprintf(c.cluster.profile, sizeof c.cluster.profile, "%s", bs_topo_default_profile(cases[i].topology));
    c.par.gpus = cases[i].gpus;
    c.cluster.nics_per_node = cases[i].nics;
    bs_result r;
    char err[512] = "";
    assert_int_equal(bs_sim_run(&c, NULL, &r, err, sizeof err), -2);
    if (!strstr(err, cases[i].why)) fail_msg("%s: got '%s', want '%s'", cases[i].topology, err, cases[i].why);
    bs_result_free(&r);
  }
  /* a platform file says which NIC each GPU uses */
  toy_files t;
  toy_setup(&t, 2, 2);
  bs_config c;
  toy_config(&c, &t, 2);
  c.cluster.nics_per_node = 1;
  bs_result r;
  char err[512] = "";
  assert_int_equal(bs_sim_run(&c, NULL, &r, err, sizeof err), -2);
  assert_non_null(strstr(err, "cluster.nics_per_node: 1: the platform file"));
  bs_result_free(&r);
  toy_teardown(&t);
}

/* usp on 4 nodes of 4 GPUs (a toy platform: bytes only), U = 4 (R = 4 groups). */
static void usp_bytes(bs_placement where, bs_phase phase, bs_result *r) {
  toy_files t;
  toy_setup(&t, 16, 4);
  bs_config c;
  toy_config(&c, &t, 16);
  snprintf(c.cluster.profile, sizeof c.cluster.profile, "a100-sxm4-80gb");
  c.par.method = BS_USP;
  c.par.ulysses_degree = 4;
  c.par.ulysses_placement = where;
  c.work.phase = phase;
  c.work.seq_len = 4096;
  run_point(&c, BS_AUTO, r);
  toy_teardown(&t);
}

/*
 * head-first: each all-to-all group is one node, each ring joins the 4 nodes; ring-first:
 * each ring is one node, each group takes one GPU of every node. The bytes swap link classes.
 * Prefill by hand (Z = 32 heads, n = 256 tokens per rank, d = 128): every rank sends 3/4 of
 * q, k, v (bf16) and of o (fp32) in all-to-alls, (U-1)/U x Z n d (3 x 2 + 4) bytes, and
 * R - 1 = 3 ring steps of its group's K and V (Z/U heads x U n tokens, bf16), 3 x 2 x 2 Z n d.
 */
static void test_usp_placement_bytes(void **state) {
  (void)state;
  const int64_t Znd = 32 * 256 * 128;
  const int64_t a2a = 16 * (3 * Znd * 10 / 4), ring = 16 * (3 * 2 * 2 * Znd);
  for (int phase = 0; phase < 2; phase++) {
    bs_result head, rf;
    usp_bytes(BS_HEAD_FIRST, phase ? BS_PREFILL : BS_TRAIN, &head);
    usp_bytes(BS_RING_FIRST, phase ? BS_PREFILL : BS_TRAIN, &rf);
    fprintf(stderr, "%s: head-first intra %lld inter %lld; ring-first intra %lld inter %lld\n",
            phase ? "prefill" : "train", (long long)head.comm.intra_node, (long long)head.comm.inter_node,
            (long long)rf.comm.intra_node, (long long)rf.comm.inter_node);
    assert_int_equal(head.comm.total, rf.comm.total);
    assert_int_equal(head.comm.intra_node, rf.comm.inter_node);
    assert_int_equal(head.comm.inter_node, rf.comm.intra_node);
    assert_true(head.comm.intra_node > 0 && head.comm.inter_node > 0);
    if (phase) {
      assert_int_equal(head.comm.intra_node, a2a);
      assert_int_equal(head.comm.inter_node, ring);
    }
    bs_result_free(&head);
    bs_result_free(&rf);
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest all[] = {
    cmocka_unit_test(test_nic_share_exact), cmocka_unit_test(test_nic_share_keeps_nvlink),
    cmocka_unit_test(test_nic_share_xml),   cmocka_unit_test(test_nic_share_fold),
    cmocka_unit_test(test_nic_share_bad),   cmocka_unit_test(test_usp_placement_bytes),
  };
  return BS_RUN_NAMED(all, argc, argv, NULL, NULL);
}
