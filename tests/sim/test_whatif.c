/*
 * test_whatif.c — the what-if keys of the cluster section (cluster.straggler, cluster.degrade,
 * cluster.failed_nics) on toy cases computed by hand: a straggler in a 4-rank ring and the
 * time every rank waits for it (time_s.wait_for_peers), a link class at half rate, a failed NIC
 * whose GPU sends through another; the fold against the straightforward run with a what-if; and
 * the values a platform cannot take.
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
#include <unistd.h>

#include "sim/sim.h"
#include "topologies/topo.h"

#include "toy.h"

static double max3(double a, double b, double c) {
  double m = a > b ? a : b;
  return m > c ? m : c;
}

/*
 * A 4-rank ring of S steps, each: COMPUTE (a COPY of `copy` bytes, tc = 2 copy / MEM_BW), then
 * RECV from the left and SEND to the right, then WAIT on both. Rank 1 computes F times slower.
 * A message moves once both ends have posted (tm = 2 LINK_LAT + msg / LINK_BW, every link
 * direction carries one message at a time), so with P_r(s) = E_r(s-1) + c_r the post time of
 * rank r at step s, its step ends at E_r(s) = max(P_r-1, P_r, P_r+1) + tm, and the part of its
 * WAIT before its last peer posted is max(P_r-1, P_r, P_r+1) - P_r. The slowest rank sets the
 * pace: the step is S (F tc + tm), and the delay reaches every rank.
 */
static void test_straggler_ring_exact(void **state) {
  (void)state;
  toy_files t;
  toy_setup(&t, 4, 4);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 4;
  const int S = 5;
  const int64_t msg = 50000000, copy = 40000000;
  const double F = 1.5;
  for (int r = 0; r < 4; r++)
    for (int s = 0; s < S; s++) {
      toy_copy(&p, r, copy);
      toy_p2p(&p, r, BS_OP_RECV, 0, (r + 3) % 4, s, msg);
      toy_p2p(&p, r, BS_OP_SEND, 1, (r + 1) % 4, s, msg);
      int h[2] = {0, 1};
      toy_wait(&p, r, 2, h);
    }
  double tc = 2.0 * (double)copy / MEM_BW, tm = 2 * LINK_LAT + (double)msg / LINK_BW;
  /* the hand model */
  double E[4] = {0}, W[4] = {0}, X[4] = {0};
  for (int s = 0; s < S; s++) {
    double P[4];
    for (int r = 0; r < 4; r++) P[r] = E[r] + (r == 1 ? F : 1.0) * tc;
    for (int r = 0; r < 4; r++) {
      double ready = max3(P[(r + 3) % 4], P[r], P[(r + 1) % 4]);
      W[r] += ready - P[r];
      E[r] = ready + tm;
      X[r] += E[r] - P[r];
    }
  }
  bs_config c;
  toy_config(&c, &t, 4);
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_sim_source src = toy_source(&p);
  bs_result base, slow;
  char err[512] = "";
  assert_int_equal(bs_sim_run_source(&c, &o, &src, &base, NULL, NULL, err, sizeof err), 0);
  c.cluster.straggler_rank = 1;
  c.cluster.straggler_factor = F;
  if (bs_sim_run_source(&c, &o, &src, &slow, NULL, NULL, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  /* uniform: lockstep, nobody waits for a peer */
  assert_close(base.time.step, S * (tc + tm), 1e-9);
  assert_true(base.time.wait_for_peers <= 1e-12);
  /* the straggler: S (F tc + tm), every rank later than in the uniform ring */
  assert_close(slow.time.step, S * (F * tc + tm), 1e-9);
  assert_close(slow.time.compute, S * F * tc, 1e-9);
  for (int r = 0; r < 4; r++) {
    fprintf(stderr, "rank %d: end %.9f s (hand %.9f), waited for peers %.9f s (hand %.9f)\n", r, slow.ranks[r].step,
            E[r], slow.ranks[r].wait_for_peers, W[r]);
    assert_close(slow.ranks[r].step, E[r], 1e-9);
    assert_close(slow.ranks[r].wait_for_peers + 1e-30, W[r] + 1e-30, 1e-9);
    assert_close(slow.ranks[r].comm_exposed, X[r], 1e-9);
    assert_true(slow.ranks[r].step > base.ranks[r].step + (F - 1) * tc);
  }
  /* the straggler's neighbours wait (F - 1) tc per step from the second step on, the straggler never */
  assert_true(slow.ranks[1].wait_for_peers <= 1e-12);
  assert_close(slow.ranks[0].wait_for_peers, S * (F - 1) * tc, 1e-9);
  assert_close(slow.time.wait_for_peers, S * (F - 1) * tc, 1e-9);
  bs_result_free(&base);
  bs_result_free(&slow);
  toy_teardown(&t);
}

/* A collective's members wait for the last to arrive: COMPUTE (rank 2 F times slower), then a
 * ring allreduce of 4 ranks joined by WAIT. The others reach the collective at tc and wait for
 * rank 2 until F tc: (F - 1) tc each, rank 2 none; the allreduce then runs as in the uniform
 * case, so the step is the uniform one plus (F - 1) tc. */
static void test_straggler_coll_wait(void **state) {
  (void)state;
  toy_files t;
  toy_setup(&t, 4, 4);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 4;
  const int64_t copy = 30000000;
  const double F = 2.0;
  for (int r = 0; r < 4; r++) {
    toy_copy(&p, r, copy);
    bs_op *op = toy_push(&p, r, BS_OP_COLL);
    op->handle = 2;
    op->u.coll.kind = BS_COLL_ALLREDUCE;
    op->u.coll.group = (bs_group){0, 1, 4};
    op->u.coll.bytes = 8000000;
    int h = 2;
    toy_wait(&p, r, 1, &h);
  }
  double tc = 2.0 * (double)copy / MEM_BW;
  bs_config c;
  toy_config(&c, &t, 4);
  c.cluster.coll_algo = BS_COLL_ALGO_RING;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_sim_source src = toy_source(&p);
  bs_result base, slow;
  char err[512] = "";
  assert_int_equal(bs_sim_run_source(&c, &o, &src, &base, NULL, NULL, err, sizeof err), 0);
  c.cluster.straggler_rank = 2;
  c.cluster.straggler_factor = F;
  assert_int_equal(bs_sim_run_source(&c, &o, &src, &slow, NULL, NULL, err, sizeof err), 0);
  assert_true(base.time.wait_for_peers <= 1e-12);
  assert_close(slow.time.step, base.time.step + (F - 1) * tc, 1e-9);
  for (int r = 0; r < 4; r++) {
    if (r == 2) assert_true(slow.ranks[r].wait_for_peers <= 1e-12);
    else assert_close(slow.ranks[r].wait_for_peers, (F - 1) * tc, 1e-9);
  }
  bs_result_free(&base);
  bs_result_free(&slow);
  toy_teardown(&t);
}

/* The link figures a generated dgx-a100 platform carries when the profile names none. */
static bs_link_val dgx_link(bs_link_class c) {
  bs_topo_params p;
  char err[256];
  assert_int_equal(bs_topo_defaults("dgx-a100", 2, &p, err, sizeof err), 0);
  return p.link[c];
}

/* 2 DGX A100 nodes, the toy profile (exact arithmetic); pairs (a[i], b[i]) send b bytes a -> b. */
static int dgx_sends(const bs_config *base, const int *from, const int *to, int n, int64_t bytes, bs_result *r,
                     bs_link_stat **links, int *nlinks, char *err, size_t errlen) {
  toy_files t;
  toy_setup(&t, 16, 8);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 16;
  for (int i = 0; i < n; i++) {
    toy_p2p(&p, from[i], BS_OP_SEND, 0, to[i], 1, bytes);
    toy_p2p(&p, to[i], BS_OP_RECV, 1, from[i], 1, bytes);
    int h0 = 0, h1 = 1;
    toy_wait(&p, from[i], 1, &h0);
    toy_wait(&p, to[i], 1, &h1);
  }
  bs_config c = *base;
  snprintf(c.cluster.profile, sizeof c.cluster.profile, "%s", t.prof);
  c.par.gpus = 16;
  snprintf(c.cluster.topology, sizeof c.cluster.topology, "dgx-a100");
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.fold = BS_OFF;
  bs_sim_source s = toy_source(&p);
  int rc = bs_sim_run_source(&c, &o, &s, r, links, nlinks, err, errlen);
  toy_teardown(&t);
  return rc;
}

static double dgx_time(const bs_config *c, const int *from, const int *to, int n, int64_t bytes) {
  bs_result r;
  char err[512] = "";
  if (dgx_sends(c, from, to, n, bytes, &r, NULL, NULL, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  double t = r.time.step;
  bs_result_free(&r);
  return t;
}

/* GPU 0 of node 0 sends B to GPU 0 of node 1 (NIC - leaf - NIC): 2 latencies + B / bw. At half
 * the NIC bandwidth, on every node or on either end's node only, the transfer takes twice as
 * long; halving NVLink does not touch it. */
static void test_degrade_halves_nic(void **state) {
  (void)state;
  bs_link_val nic = dgx_link(BS_LINK_NIC);
  const int64_t B = 1 << 28;
  int from[] = {0}, to[] = {8};
  bs_config c;
  bs_config_default(&c);
  double full = dgx_time(&c, from, to, 1, B);
  assert_close(full, 2 * nic.lat_s + (double)B / nic.bw_Bps, 1e-9);
  c.cluster.degrade_class = BS_LINK_NIC;
  c.cluster.degrade_factor = 0.5;
  double half = dgx_time(&c, from, to, 1, B);
  assert_close(half, 2 * nic.lat_s + 2.0 * (double)B / nic.bw_Bps, 1e-9);
  assert_close(half - 2 * nic.lat_s, 2 * (full - 2 * nic.lat_s), 1e-9);
  c.cluster.degrade_one_node = 1;
  for (int node = 0; node < 2; node++) {
    c.cluster.degrade_node = node;
    assert_close(dgx_time(&c, from, to, 1, B), half, 1e-9);
  }
  c.cluster.degrade_class = BS_LINK_NVLINK;
  assert_close(dgx_time(&c, from, to, 1, B), full, 1e-9);
  fprintf(stderr, "NIC transfer of %lld B: %.9f s, at half rate %.9f s\n", (long long)B, full, half);
}

/* cluster.nic_gbps: the same transfer on NICs of G Gb/s moves at G / 8 x 0.96 GB/s: 100 Gb/s gives 12 GB/s;
 * the line rate of the platform's own NIC gives its time back (24 GB/s: 200 Gb/s HDR); a degrade of the NIC
 * class scales the set rate. */
static void test_nic_gbps(void **state) {
  (void)state;
  bs_link_val nic = dgx_link(BS_LINK_NIC);
  const int64_t B = 1 << 28;
  int from[] = {0}, to[] = {8};
  bs_config c;
  bs_config_default(&c);
  double full = dgx_time(&c, from, to, 1, B);
  c.cluster.nic_gbps = nic.bw_Bps * 8 / 1e9 / 0.96;
  assert_close(dgx_time(&c, from, to, 1, B), full, 1e-9);
  c.cluster.nic_gbps = 100;
  assert_close(dgx_time(&c, from, to, 1, B), 2 * nic.lat_s + (double)B / 12e9, 1e-9);
  c.cluster.degrade_class = BS_LINK_NIC;
  c.cluster.degrade_factor = 0.5;
  assert_close(dgx_time(&c, from, to, 1, B), 2 * nic.lat_s + (double)B / 6e9, 1e-9);
}

static double xml_bw(const char *xml, const char *link);

/* One NIC (cluster.degrade = nic@1/0:0.5): GPU 0 of node 0 sends B to GPU 0 of node 1 through NIC 0
 * of each, which is at half rate on node 1: 2 latencies + 2 B / bw; GPU 1 to GPU 9 goes through NIC 1
 * and keeps the full rate (2 latencies + B / bw); both at once, each on its own rail, as alone. The
 * same NIC of node 0 halves the first transfer too, NIC 1 of node 1 only the second. */
static void test_degrade_one_nic(void **state) {
  (void)state;
  bs_link_val nic = dgx_link(BS_LINK_NIC);
  const int64_t B = 1 << 28;
  double full = 2 * nic.lat_s + (double)B / nic.bw_Bps, half = 2 * nic.lat_s + 2.0 * (double)B / nic.bw_Bps;
  int f0[] = {0}, t0[] = {8}, f1[] = {1}, t1[] = {9}, fb[] = {0, 1}, tb[] = {8, 9};
  bs_config c;
  bs_config_default(&c);
  c.cluster.degrade_class = BS_LINK_NIC;
  c.cluster.degrade_factor = 0.5;
  c.cluster.degrade_one_node = 1;
  c.cluster.degrade_node = 1;
  c.cluster.degrade_one_nic = 1;
  c.cluster.degrade_nic = 0;
  assert_close(dgx_time(&c, f0, t0, 1, B), half, 1e-9);
  assert_close(dgx_time(&c, f1, t1, 1, B), full, 1e-9);
  assert_close(dgx_time(&c, fb, tb, 2, B), half, 1e-9); /* the slower of the two, each on its own rail */
  c.cluster.degrade_node = 0;
  assert_close(dgx_time(&c, f0, t0, 1, B), half, 1e-9);
  c.cluster.degrade_node = 1;
  c.cluster.degrade_nic = 1;
  assert_close(dgx_time(&c, f0, t0, 1, B), full, 1e-9);
  assert_close(dgx_time(&c, f1, t1, 1, B), half, 1e-9);
  /* the generated wiring: nic-n1-g1 alone at the factor */
  bs_topo_params p;
  char err[256];
  assert_int_equal(bs_topo_defaults("dgx-a100", 2, &p, err, sizeof err), 0);
  p.degrade_class = BS_LINK_NIC;
  p.degrade_factor = 0.25;
  p.degrade_node = 1;
  p.degrade_one_nic = 1;
  p.degrade_nic = 1;
  char *xml = bs_topo_xml(&p, err, sizeof err);
  assert_non_null(xml);
  double bw = p.link[BS_LINK_NIC].bw_Bps;
  for (int n = 0; n < 2; n++)
    for (int g = 0; g < 8; g++) {
      char l[32];
      snprintf(l, sizeof l, "nic-n%d-g%d", n, g);
      assert_true(xml_bw(xml, l) == (n == 1 && g == 1 ? 0.25 * bw : bw));
    }
  free(xml);
}

/* The generator's wiring of one node's degrade: node 2's NVLink and NICs, and (fabric@2) the
 * uplinks of its leaf on every rail, at the factor; the other nodes and leaves as they were. */
static double xml_bw(const char *xml, const char *link) {
  char key[96];
  snprintf(key, sizeof key, "<link id=\"%s\" bandwidth=\"", link);
  const char *at = strstr(xml, key);
  assert_non_null(at);
  return strtod(at + strlen(key), NULL);
}

static void test_degrade_xml(void **state) {
  (void)state;
  bs_topo_params p;
  char err[256];
  assert_int_equal(bs_topo_defaults("dgx-a100", 4, &p, err, sizeof err), 0);
  p.nodes_per_leaf = 2;
  p.degrade_node = 2;
  p.degrade_factor = 0.25;
  const bs_link_class cls[] = {BS_LINK_NVLINK, BS_LINK_NIC, BS_LINK_FABRIC};
  for (size_t i = 0; i < 3; i++) {
    p.degrade_class = (int)cls[i];
    char *xml = bs_topo_xml(&p, err, sizeof err);
    assert_non_null(xml);
    double nv = p.link[BS_LINK_NVLINK].bw_Bps, nic = p.link[BS_LINK_NIC].bw_Bps, up = bs_topo_uplink_bw(&p, 0);
    double f = p.degrade_factor;
    assert_true(xml_bw(xml, "nvlink-n2-g5") == (cls[i] == BS_LINK_NVLINK ? f * nv : nv));
    assert_true(xml_bw(xml, "nvlink-n3-g5") == nv);
    assert_true(xml_bw(xml, "nic-n2-g3") == (cls[i] == BS_LINK_NIC ? f * nic : nic));
    assert_true(xml_bw(xml, "nic-n1-g3") == nic);
    for (int r = 0; r < 8; r++) {
      char l[32];
      snprintf(l, sizeof l, "fabric-r%d-l1", r);
      assert_true(xml_bw(xml, l) == (cls[i] == BS_LINK_FABRIC ? f * up : up));
      snprintf(l, sizeof l, "fabric-r%d-l0", r);
      assert_true(xml_bw(xml, l) == up);
    }
    free(xml);
  }
}

/* A platform file whose links carry class names: the class at half its bandwidth. */
static void test_degrade_user_file(void **state) {
  (void)state;
  toy_files t;
  toy_setup(&t, 2, 2);
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char xml[256];
  snprintf(xml, sizeof xml, "%s/bs-whatif-%d.xml", dir, (int)getpid());
  char text[2048];
  snprintf(text, sizeof text,
           "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
           "<platform version=\"4.1\"><zone id=\"w\" routing=\"Full\">\n"
           "<host id=\"gpu0\" speed=\"1Gf\"/><host id=\"gpu1\" speed=\"1Gf\"/>\n"
           "<link id=\"nic-a\" bandwidth=\"%.17gBps\" latency=\"%.17gs\" sharing_policy=\"SPLITDUPLEX\"/>\n"
           "<link id=\"nic-b\" bandwidth=\"%.17gBps\" latency=\"%.17gs\" sharing_policy=\"SPLITDUPLEX\"/>\n"
           "<route src=\"gpu0\" dst=\"gpu1\" symmetrical=\"NO\"><link_ctn id=\"nic-a\" direction=\"UP\"/>"
           "<link_ctn id=\"nic-b\" direction=\"DOWN\"/></route>\n"
           "<route src=\"gpu1\" dst=\"gpu0\" symmetrical=\"NO\"><link_ctn id=\"nic-b\" direction=\"UP\"/>"
           "<link_ctn id=\"nic-a\" direction=\"DOWN\"/></route>\n"
           "</zone></platform>\n",
           LINK_BW, LINK_LAT, LINK_BW, LINK_LAT);
  write_text(xml, text);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  const int64_t B = 100000000;
  toy_p2p(&p, 0, BS_OP_SEND, 0, 1, 1, B);
  toy_p2p(&p, 1, BS_OP_RECV, 0, 0, 1, B);
  int h = 0;
  toy_wait(&p, 0, 1, &h);
  toy_wait(&p, 1, 1, &h);
  bs_config c;
  toy_config(&c, &t, 2);
  snprintf(c.cluster.topology, sizeof c.cluster.topology, "%s", xml);
  c.cluster.degrade_class = BS_LINK_NIC;
  c.cluster.degrade_factor = 0.5;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_sim_source s = toy_source(&p);
  bs_result r;
  char err[512] = "";
  if (bs_sim_run_source(&c, &o, &s, &r, NULL, NULL, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  assert_close(r.time.step, 2 * LINK_LAT + (double)B / (0.5 * LINK_BW), 1e-9);
  bs_result_free(&r);
  /* a class the file has no link of, and one node of a file: errors naming the key */
  c.cluster.degrade_class = BS_LINK_PCIE;
  assert_int_not_equal(bs_sim_run_source(&c, &o, &s, &r, NULL, NULL, err, sizeof err), 0);
  assert_non_null(strstr(err, "cluster.degrade: "));
  assert_non_null(strstr(err, "no link named pcie-"));
  bs_result_free(&r);
  c.cluster.degrade_one_node = 1;
  assert_int_equal(bs_sim_run_source(&c, &o, &s, &r, NULL, NULL, err, sizeof err), -2);
  assert_non_null(strstr(err, "cluster.degrade: pcie@0: one node's links only on a generated topology"));
  bs_result_free(&r);
  unlink(xml);
  toy_teardown(&t);
}

static double link_bytes(const bs_link_stat *l, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(l[i].name, name)) return l[i].bytes;
  return 0;
}

/* Node 0's last NIC (GPU 7's) down: GPU 7 sends through NIC 0 (7 mod 7), beside GPU 0. GPU 0 ->
 * GPU 8 and GPU 7 -> GPU 15 at once share NIC 0's uplink direction: both take 2 latencies + 2 B
 * / bw (max-min sharing; the fabric adds no latency and its uplink carries two ports); GPU 7's
 * message leaves on rail 0 and crosses the core to rail 7. Without the failure: B / bw each. */
static void test_failed_nic_reroutes(void **state) {
  (void)state;
  bs_link_val nic = dgx_link(BS_LINK_NIC), fab = dgx_link(BS_LINK_FABRIC);
  assert_true(fab.lat_s == 0 && 2 * fab.bw_Bps >= nic.bw_Bps);
  const int64_t B = 1 << 27;
  int from[] = {0, 7}, to[] = {8, 15};
  bs_config c;
  bs_config_default(&c);
  assert_close(dgx_time(&c, from, to, 2, B), 2 * nic.lat_s + (double)B / nic.bw_Bps, 1e-9);
  c.cluster.failed_node = 0;
  c.cluster.failed_nics = 1;
  bs_result r;
  bs_link_stat *l = NULL;
  int nl = 0;
  char err[512] = "";
  if (dgx_sends(&c, from, to, 2, B, &r, &l, &nl, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  assert_close(r.time.step, 2 * nic.lat_s + 2.0 * (double)B / nic.bw_Bps, 1e-9);
  assert_true(link_bytes(l, nl, "nic-n0-g0_UP") == 2.0 * (double)B);
  assert_true(link_bytes(l, nl, "nic-n0-g7_UP") == 0);
  /* beyond the leaf, SimGrid's shortest route (4 links either way): over the core to rail 7, or
   * down rail 0 and over node 1's NVLink to GPU 15 */
  assert_true(link_bytes(l, nl, "fabric-r7-l0_DOWN") + link_bytes(l, nl, "nvlink-n1-g7_DOWN") == (double)B);
  assert_int_equal(r.comm.inter_node, 2 * B);
  free(l);
  bs_result_free(&r);
  /* the wiring: node 0's GPU 7 on NIC 0, node 1 as it was */
  bs_topo_params p;
  assert_int_equal(bs_topo_defaults("dgx-a100", 2, &p, err, sizeof err), 0);
  p.failed_node = 0;
  p.failed_nics = 3;
  int want[8] = {0, 1, 2, 3, 4, 0, 1, 2};
  for (int i = 0; i < 8; i++) {
    assert_int_equal(bs_topo_nic_of_node(&p, 0, i), want[i]);
    assert_int_equal(bs_topo_nic_of_node(&p, 1, i), i);
  }
  p.failed_node = -1; /* all:3 */
  for (int n = 0; n < 2; n++)
    for (int i = 0; i < 8; i++) assert_int_equal(bs_topo_nic_of_node(&p, n, i), want[i]);
}

/* A point with a what-if: the fold refuses the asymmetric ones and folds the symmetric one
 * (a class at a share of its bandwidth on every node) exactly: time within 0.1 %, bytes and
 * memory equal. */
static void fold_case(const char *whatif, int expect_fold, void (*set)(bs_config *)) {
  bs_config c;
  bs_config_default(&c);
  c.par.method = BS_BURST;
  c.par.gpus = 64;
  c.work.seq_len = 65536;
  c.work.phase = BS_TRAIN;
  c.par.double_ring = BS_ON;
  set(&c);
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.nodes_per_leaf = 2;
  o.fold = BS_OFF;
  bs_result full, folded;
  char err[512] = "";
  if (bs_sim_run(&c, &o, &full, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", whatif, err);
    fail();
  }
  o.fold = BS_AUTO;
  if (bs_sim_run(&c, &o, &folded, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", whatif, err);
    fail();
  }
  fprintf(stderr, "%s: %d actors, step %.9f s (full %.9f s); %s\n", whatif, folded.sim_actors, folded.time.step,
          full.time.step, folded.sim_network);
  if (expect_fold) assert_true(folded.sim_actors < 64);
  else assert_int_equal(folded.sim_actors, 64);
  if (c.cluster.straggler_factor > 0) assert_non_null(strstr(folded.sim_network, "(cluster.straggler)"));
  const double tol = 1e-3;
  assert_close(folded.time.step, full.time.step, tol);
  assert_close(folded.time.fwd, full.time.fwd, tol);
  assert_close(folded.time.bwd, full.time.bwd, tol);
  assert_close(folded.time.comm_exposed + 1e-30, full.time.comm_exposed + 1e-30, tol);
  assert_close(folded.time.wait_for_peers + 1e-30, full.time.wait_for_peers + 1e-30, tol);
  assert_int_equal(folded.comm.total, full.comm.total);
  assert_int_equal(folded.comm.intra_node, full.comm.intra_node);
  assert_int_equal(folded.comm.inter_node, full.comm.inter_node);
  assert_int_equal(folded.comm.per_rank_max_sent, full.comm.per_rank_max_sent);
  assert_int_equal(folded.mem.peak_bytes_max, full.mem.peak_bytes_max);
  for (int r = 0; r < 64; r++) {
    assert_close(folded.ranks[r].step, full.ranks[r].step, tol);
    assert_close(folded.ranks[r].wait_for_peers + 1e-30, full.ranks[r].wait_for_peers + 1e-30, tol);
  }
  bs_result_free(&full);
  bs_result_free(&folded);
}

static void set_straggler(bs_config *c) {
  c->cluster.straggler_rank = 37;
  c->cluster.straggler_factor = 1.3;
}
static void set_nic_half(bs_config *c) {
  c->cluster.degrade_class = BS_LINK_NIC;
  c->cluster.degrade_factor = 0.5;
}
static void set_fabric_half(bs_config *c) {
  c->cluster.degrade_class = BS_LINK_FABRIC;
  c->cluster.degrade_factor = 0.25;
}
static void set_nvlink_node(bs_config *c) {
  c->cluster.degrade_class = BS_LINK_NVLINK;
  c->cluster.degrade_factor = 0.5;
  c->cluster.degrade_one_node = 1;
  c->cluster.degrade_node = 3;
}
static void set_failed(bs_config *c) {
  c->cluster.failed_node = 5;
  c->cluster.failed_nics = 1;
}

static void set_failed_all(bs_config *c) {
  c->cluster.failed_node = -1;
  c->cluster.failed_nics = 1;
}

static void test_whatif_fold_exact(void **state) {
  (void)state;
  fold_case("straggler 37:1.3", 0, set_straggler);
  fold_case("degrade nic:0.5", 1, set_nic_half);
  fold_case("degrade fabric:0.25", 1, set_fabric_half);
  fold_case("degrade nvlink@3:0.5", 0, set_nvlink_node);
  fold_case("failed_nics 5:1", 0, set_failed);
  fold_case("failed_nics all:1", 0, set_failed_all);
}

/* Values the point cannot take: errors that name the key, before SimGrid starts (-2). */
static void expect_bad(void (*set)(bs_config *), const char *topo, const char *want) {
  bs_config c;
  bs_config_default(&c);
  c.par.gpus = 16;
  snprintf(c.cluster.topology, sizeof c.cluster.topology, "%s", topo);
  c.cluster.profile[0] = '\0';
  snprintf(c.cluster.profile, sizeof c.cluster.profile, "%s", bs_topo_default_profile(topo));
  set(&c);
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_result r;
  char err[512] = "";
  assert_int_equal(bs_sim_run(&c, &o, &r, err, sizeof err), -2);
  if (!strstr(err, want)) {
    fprintf(stderr, "expected '%s' in '%s'\n", want, err);
    fail();
  }
  bs_result_free(&r);
}
static void bad_rank(bs_config *c) {
  c->cluster.straggler_rank = 16;
  c->cluster.straggler_factor = 2;
}
static void bad_class(bs_config *c) {
  c->cluster.degrade_class = BS_LINK_PCIE;
  c->cluster.degrade_factor = 0.5;
}
static void bad_node(bs_config *c) {
  set_nic_half(c);
  c->cluster.degrade_one_node = 1;
  c->cluster.degrade_node = 2;
}
static void bad_factor(bs_config *c) {
  set_nic_half(c);
  c->cluster.degrade_factor = 1.5;
}
static void all_nics(bs_config *c) {
  c->cluster.failed_node = 1;
  c->cluster.failed_nics = 8;
}
static void bad_failed_node(bs_config *c) {
  c->cluster.failed_node = 2;
  c->cluster.failed_nics = 1;
}
static void shared_nics(bs_config *c) {
  c->cluster.nics_per_node = 2;
  c->cluster.failed_node = 0;
  c->cluster.failed_nics = 2;
}

static void bad_nic(bs_config *c) {
  set_nic_half(c);
  c->cluster.degrade_one_node = 1;
  c->cluster.degrade_node = 1;
  c->cluster.degrade_one_nic = 1;
  c->cluster.degrade_nic = 8;
}

static void test_whatif_bad_values(void **state) {
  (void)state;
  expect_bad(bad_rank, "dgx-a100", "cluster.straggler: rank 16 is not a rank of parallel.gpus = 16 (0 .. 15)");
  expect_bad(bad_class, "dgx-a100", "cluster.degrade: topology dgx-a100 has no pcie links");
  expect_bad(bad_node, "dgx-a100", "cluster.degrade: node 2 is not a node of dgx-a100 with 2 node(s) (0 .. 1)");
  expect_bad(bad_factor, "dgx-a100", "cluster.degrade: factor 1.5 of class nic must be in (0, 1]");
  expect_bad(bad_nic, "dgx-a100", "cluster.degrade: NIC 8 is not a NIC of a dgx-a100 node with 8 NICs (0 .. 7)");
  expect_bad(bad_nic, "a100-pcie-node", "cluster.degrade: nic@1/8: one NIC only on the dgx topologies");
  expect_bad(all_nics, "dgx-a100", "cluster.failed_nics: 8 of the 8 NICs of node 1 down leaves none");
  expect_bad(shared_nics, "dgx-a100", "cluster.failed_nics: 2 of the 2 NICs of node 0 down leaves none");
  expect_bad(bad_failed_node, "dgx-a100", "cluster.failed_nics: node 2 is not a node of dgx-a100");
  expect_bad(bad_failed_node, "a100-pcie-node", "cluster.failed_nics: 2:1: only the dgx topologies");
}

/* cluster.oversub and cluster.nodes_per_leaf: the keys set what --oversub and --nodes-per-leaf
 * set, the flags win when both are given, and the oversubscription slows a ring across leaves. */
static double leaf_step(int key_npl, double key_over, int flag_npl, double flag_over, char *whatif, size_t n) {
  bs_config c;
  bs_config_default(&c);
  c.par.method = BS_RING;
  c.par.gpus = 64;
  c.work.seq_len = 65536;
  c.cluster.nodes_per_leaf = key_npl;
  c.cluster.oversub = key_over;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.nodes_per_leaf = flag_npl;
  o.oversub = flag_over;
  bs_result r;
  char err[512] = "";
  if (bs_sim_run(&c, &o, &r, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  double t = r.time.step;
  if (whatif) snprintf(whatif, n, "oversub=%g nodes_per_leaf=%d", r.cfg.cluster.oversub, r.cfg.cluster.nodes_per_leaf);
  bs_result_free(&r);
  return t;
}

static void test_leaf_keys(void **state) {
  (void)state;
  double flat = leaf_step(0, 0, 0, 0, NULL, 0);
  double by_key = leaf_step(2, 4, 0, 0, NULL, 0), by_flag = leaf_step(0, 0, 2, 4, NULL, 0);
  fprintf(stderr, "ring 64 GPUs: one leaf %.9f s, leaves of 2 nodes at 4:1 %.9f s\n", flat, by_key);
  assert_true(by_key > flat * 1.01);
  assert_true(by_key == by_flag);
  char w[96];
  assert_true(leaf_step(2, 4, 0, 1, w, sizeof w) == leaf_step(2, 1, 0, 0, NULL, 0)); /* --oversub 1 wins */
  assert_string_equal(w, "oversub=1 nodes_per_leaf=2");                              /* and the result says so */
  assert_true(leaf_step(8, 4, 2, 0, NULL, 0) == by_key);                             /* --nodes-per-leaf 2 wins */
}

int main(int argc, char **argv) {
  const struct CMUnitTest all[] = {
    cmocka_unit_test(test_straggler_ring_exact),
    cmocka_unit_test(test_straggler_coll_wait),
    cmocka_unit_test(test_degrade_halves_nic),
    cmocka_unit_test(test_nic_gbps),
    cmocka_unit_test(test_degrade_one_nic),
    cmocka_unit_test(test_degrade_xml),
    cmocka_unit_test(test_degrade_user_file),
    cmocka_unit_test(test_failed_nic_reroutes),
    cmocka_unit_test(test_whatif_fold_exact),
    cmocka_unit_test(test_whatif_bad_values),
    cmocka_unit_test(test_leaf_keys),
  };
  return BS_RUN_NAMED(all, argc, argv, NULL, NULL);
}
