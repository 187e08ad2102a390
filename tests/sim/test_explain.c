/*
 * test_explain.c — where a step goes (result explain, sim/explain.h): the bookkeeping on its own
 * (kernel kinds, route classes, the critical rank, the layer extension); a toy cluster of two
 * nodes whose NVLink and NIC links are named by class, computed by hand (compute by kind, launch
 * cost, exposed time by link class, the class of a wait whose handles take different links, a
 * collective by the span of its group); a straggler whose delay shows as waiting for peers on
 * the others; and on real plans of every method the invariant that a rank's parts add up to its
 * step, its compute time and its blocked time, with the fold giving the full run's figures.
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

#include "sim/explain.h"
#include "sim/sim.h"
#include "topologies/topo.h"

#include "toy.h"

/* ---------------- the bookkeeping alone ---------------- */

static void test_kinds_and_classes(void **state) {
  (void)state;
  assert_int_equal(bs_explain_kind_of(BS_K_ATTN_FWD), BS_XK_ATTN_FWD);
  assert_int_equal(bs_explain_kind_of(BS_K_ATTN_FWD_UNFUSED), BS_XK_ATTN_FWD);
  assert_int_equal(bs_explain_kind_of(BS_K_ATTN_BWD), BS_XK_ATTN_BWD);
  assert_int_equal(bs_explain_kind_of(BS_K_ATTN_BWD_UNFUSED), BS_XK_ATTN_BWD);
  assert_int_equal(bs_explain_kind_of(BS_K_ATTN_DELTA), BS_XK_ATTN_BWD);
  assert_int_equal(bs_explain_kind_of(BS_K_ATTN_MERGE), BS_XK_MERGE);
  assert_int_equal(bs_explain_kind_of(BS_K_GEMM), BS_XK_GEMM);
  assert_int_equal(bs_explain_kind_of(BS_K_ELEMWISE), BS_XK_ELEMWISE);
  assert_int_equal(bs_explain_kind_of(BS_K_COPY), BS_XK_OTHER);
  /* a route is the widest class it crosses */
  const int nv[] = {BS_LINK_NVLINK, BS_LINK_NVLINK}, gpu_nic[] = {BS_LINK_NVLINK, BS_LINK_NIC, BS_LINK_FABRIC},
            pcie[] = {BS_LINK_PCIE, BS_LINK_HOSTBRIDGE, BS_LINK_PCIE}, shm[] = {BS_LINK_SHM}, none[] = {-1, -1};
  assert_int_equal(bs_explain_route(nv, 2), BS_XL_NVLINK);
  assert_int_equal(bs_explain_route(gpu_nic, 3), BS_XL_NETWORK);
  assert_int_equal(bs_explain_route(pcie, 3), BS_XL_PCIE);
  assert_int_equal(bs_explain_route(shm, 1), BS_XL_SHM);
  assert_int_equal(bs_explain_route(none, 2), BS_XL_OTHER);
  assert_int_equal(bs_explain_route(NULL, 0), BS_XL_OTHER);
  assert_int_equal(bs_explain_group(1, BS_XL_NVLINK), BS_XL_NETWORK);
  assert_int_equal(bs_explain_group(0, BS_XL_PCIE), BS_XL_PCIE);
  assert_string_equal(bs_explain_kind_name(BS_XK_MERGE), "merge");
  assert_string_equal(bs_explain_link_name(BS_XL_NETWORK), "network");
}

static void test_parts_and_summary(void **state) {
  (void)state;
  bs_explain_parts a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  bs_explain_compute(&a, BS_K_GEMM, 3.0, 0.5);     /* 2.5 gemm + 0.5 launch */
  bs_explain_compute(&a, BS_K_COPY, 0.25, 1.0);    /* a launch cost above the op's time: all launch */
  bs_explain_wait(&a, 4.0, 5.0, 7.0, BS_XL_PCIE);  /* 1 waiting for a peer, 2 on PCIe */
  bs_explain_wait(&a, 8.0, 8.0, 8.5, BS_XL_SHM);   /* no peer wait */
  bs_explain_wait(&a, 9.0, 12.0, 10.0, BS_XL_SHM); /* the peer posted after the wait ended: all peers */
  assert_true(a.compute[BS_XK_GEMM] == 2.5 && a.compute[BS_XK_OTHER] == 0 && a.launch == 0.75);
  assert_true(a.wait_for_peers == 2.0 && a.exposed[BS_XL_PCIE] == 2.0 && a.exposed[BS_XL_SHM] == 0.5);
  assert_true(bs_explain_compute_total(&a) == 3.25 && bs_explain_blocked_total(&a) == 4.5);
  assert_true(bs_explain_total(&a) == 7.75);
  bs_explain_compute(&b, BS_K_ATTN_FWD, 7.75, 0);
  bs_explain e;
  bs_explain_begin(&e);
  assert_int_equal(e.critical_rank, -1);
  bs_explain_add(&e, 3, 7.75, &b); /* a tie: the lowest rank, whatever the order */
  bs_explain_add(&e, 1, 7.75, &a);
  bs_explain_add(&e, 2, 1.0, &b);
  bs_explain_end(&e);
  assert_int_equal(e.critical_rank, 1);
  assert_int_equal(e.ranks, 3);
  assert_true(e.step == 7.75 && e.critical.compute[BS_XK_GEMM] == 2.5);
  assert_close(e.mean.compute[BS_XK_ATTN_FWD], 2 * 7.75 / 3, 1e-15);
  assert_close(e.mean.wait_for_peers, 2.0 / 3, 1e-15);
  /* the layer shortcut: X = a + k (b - a) */
  bs_explain x = e, y = e;
  y.step = 9.75;
  y.critical.launch = 1.75;
  bs_explain_extend(&x, &y, 5);
  assert_true(y.step == 7.75 + 5 * 2.0 && y.critical.launch == 0.75 + 5 * 1.0);
  assert_true(y.critical.compute[BS_XK_GEMM] == 2.5);
}

/* ---------------- a toy cluster by hand ---------------- */

/* Toy figures (not hardware): NVLink and NIC links, launch costs of the copy and elementwise kernels. */
#define NV_LAT 1e-6
#define NV_BW 50e9
#define NIC_LAT 4e-6
#define NIC_BW 5e9
#define COPY_LAUNCH 2e-5
#define EW_LAUNCH 3e-5

/*
 * Two nodes of two GPUs: host gpu<i> on node i / 2 with links nvlink-g<i> and nic-g<i>; a route
 * inside a node is nvlink-g<i> up then nvlink-g<j> down, across nodes nic-g<i> up then nic-g<j>
 * down (one message: 2 latencies + bytes / bandwidth). p2p_base > 0: every send pays it (the
 * profile's p2p base cost on both routes).
 */
static void cluster_setup(toy_files *t, double p2p_base) {
  toy_setup(t, 4, 2);
  char x[8192];
  size_t n = (size_t)snprintf(x, sizeof x,
                              "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
                              "<platform version=\"4.1\"><zone id=\"two\" routing=\"Full\">\n");
  for (int i = 0; i < 4; i++)
    n += (size_t)snprintf(x + n, sizeof x - n,
                          "<host id=\"gpu%d\" speed=\"1Gf\"><prop id=\"node\" value=\"%d\"/></host>\n"
                          "<link id=\"nvlink-g%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\" "
                          "sharing_policy=\"SPLITDUPLEX\"/>\n"
                          "<link id=\"nic-g%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\" "
                          "sharing_policy=\"SPLITDUPLEX\"/>\n",
                          i, i / 2, i, NV_BW, NV_LAT, i, NIC_BW, NIC_LAT);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++)
      if (i != j) {
        const char *k = i / 2 == j / 2 ? "nvlink" : "nic";
        n += (size_t)snprintf(x + n, sizeof x - n,
                              "<route src=\"gpu%d\" dst=\"gpu%d\" symmetrical=\"NO\"><link_ctn id=\"%s-g%d\" "
                              "direction=\"UP\"/><link_ctn id=\"%s-g%d\" direction=\"DOWN\"/></route>\n",
                              i, j, k, i, k, j);
      }
  snprintf(x + n, sizeof x - n, "</zone></platform>\n");
  write_text(t->xml, x);
  char p2p[256] = "";
  if (p2p_base > 0)
    snprintf(p2p, sizeof p2p,
             ",\"p2p\":{\"intra_node\":{\"base_s\":{\"value\":%.17g,\"source\":\"test\"}},"
             "\"inter_node\":{\"base_s\":{\"value\":%.17g,\"source\":\"test\"}}}",
             p2p_base, p2p_base);
  char pj[2048];
  snprintf(pj, sizeof pj,
           "{\"format\":1,\"name\":\"toy-explain\",\"device\":{"
           "\"memory_bytes\":{\"value\":%.17g,\"source\":\"test\"},"
           "\"peak_flops\":{\"value\":1e12,\"source\":\"test\"},"
           "\"mem_bw_Bps\":{\"value\":%.17g,\"source\":\"test\"}},"
           "\"kernels\":{\"copy\":{\"model\":\"roofline\",\"launch_s\":{\"value\":%.17g,\"source\":\"test\"},"
           "\"efficiency\":{\"value\":1,\"source\":\"test\"}},"
           "\"elemwise\":{\"model\":\"roofline\",\"launch_s\":{\"value\":%.17g,\"source\":\"test\"},"
           "\"efficiency\":{\"value\":1,\"source\":\"test\"}}},"
           "\"links\":{},\"network\":{\"model\":\"CM02\",\"crosstraffic\":0,\"tcp_gamma\":0}%s}",
           CAPACITY, MEM_BW, COPY_LAUNCH, EW_LAUNCH, p2p);
  write_text(t->prof, pj);
}

static void elemwise(toy_plan *p, int r, int64_t elems) {
  bs_op *op = toy_push(p, r, BS_OP_COMPUTE);
  op->u.compute.kernel = BS_K_ELEMWISE;
  op->u.compute.elems = elems;
}

/* Rank r sends `bytes` to `peer` and receives as much from it, handles h and h + 1. */
static void exchange(toy_plan *p, int r, int peer, int tag, int64_t bytes, int h) {
  toy_p2p(p, r, BS_OP_RECV, h, peer, tag, bytes);
  toy_p2p(p, r, BS_OP_SEND, h + 1, peer, tag, bytes);
}

static void run_cluster(toy_plan *p, const toy_files *t, double straggler, bs_result *r) {
  bs_config c;
  toy_config(&c, t, p->ranks);
  if (straggler > 0) {
    c.cluster.straggler_rank = 1;
    c.cluster.straggler_factor = straggler;
  }
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_sim_source s = toy_source(p);
  char err[512] = "";
  if (bs_sim_run_source(&c, &o, &s, r, NULL, NULL, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
}

/* The parts of every rank add up to its step, its compute and its blocked time (the result's
 * per-rank figures), and the mean is the mean of the ranks'. */
static void check_sums(const bs_result *r, const char *what) {
  const bs_explain *e = &r->explain;
  const double tol = 1e-9;
  if (e->critical_rank < 0 || e->critical_rank >= r->nranks || e->ranks != r->nranks) {
    fprintf(stderr, "%s: critical rank %d, %d ranks of %d\n", what, e->critical_rank, e->ranks, r->nranks);
    fail();
  }
  const bs_rank_result *cr = &r->ranks[e->critical_rank];
  double total = bs_explain_total(&e->critical);
  fprintf(stderr, "%s: step %.9g s, critical rank %d, parts %.9g s (compute %.9g, blocked %.9g)\n", what, r->time.step,
          e->critical_rank, total, bs_explain_compute_total(&e->critical), bs_explain_blocked_total(&e->critical));
  assert_close(e->step, r->time.step, tol);
  assert_close(cr->step, r->time.step, tol);
  assert_close(total, r->time.step, tol);
  assert_close(bs_explain_compute_total(&e->critical), cr->compute, tol);
  assert_close(bs_explain_blocked_total(&e->critical) + 1e-30, cr->comm_exposed + 1e-30, tol);
  assert_true(fabs(e->critical.wait_for_peers - cr->wait_for_peers) <= tol * r->time.step);
  for (int i = 0; i < r->nranks; i++) /* the critical rank finished last, and is the lowest of a tie */
    assert_true(r->ranks[i].step < cr->step || (r->ranks[i].step == cr->step && i >= e->critical_rank));
  double step = 0, comp = 0, blocked = 0, peers = 0;
  for (int i = 0; i < r->nranks; i++) {
    step += r->ranks[i].step / r->nranks;
    comp += r->ranks[i].compute / r->nranks;
    blocked += r->ranks[i].comm_exposed / r->nranks;
    peers += r->ranks[i].wait_for_peers / r->nranks;
  }
  assert_close(bs_explain_total(&e->mean), step, tol);
  assert_close(bs_explain_compute_total(&e->mean), comp, tol);
  assert_close(bs_explain_blocked_total(&e->mean) + 1e-30, blocked + 1e-30, tol);
  assert_true(fabs(e->mean.wait_for_peers - peers) <= tol * r->time.step);
  for (int k = 0; k < BS_XK_COUNT; k++) assert_true(e->critical.compute[k] >= -tol * r->time.step);
  for (int l = 0; l < BS_XL_COUNT; l++) assert_true(e->critical.exposed[l] >= -tol * r->time.step);
}

/*
 * Every rank: a COPY of c bytes, an exchange of `a` bytes with its node partner (r ^ 1), an
 * ELEMENTWISE op over e elements, an exchange of `b` bytes with its partner on the other node
 * (r ^ 2). In lockstep nobody waits for a peer; the copy takes COPY_LAUNCH + 2c / MEM_BW, the
 * elementwise op EW_LAUNCH + 2 e 2 / MEM_BW (bf16), the exchanges 2 NV_LAT + a / NV_BW on NVLink
 * and 2 NIC_LAT + b / NIC_BW on the network.
 */
static void test_toy_by_hand(void **state) {
  (void)state;
  toy_files t;
  cluster_setup(&t, 0);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 4;
  const int64_t c = 30000000, a = 200000000, e = 10000000, b = 40000000;
  int h[2] = {0, 1};
  for (int r = 0; r < 4; r++) {
    toy_copy(&p, r, c);
    exchange(&p, r, r ^ 1, 1, a, 0);
    toy_wait(&p, r, 2, h);
    elemwise(&p, r, e);
    exchange(&p, r, r ^ 2, 2, b, 0);
    toy_wait(&p, r, 2, h);
  }
  bs_result res;
  run_cluster(&p, &t, 0, &res);
  double copy = 2.0 * (double)c / MEM_BW, ew = 2.0 * (double)e * 2 / MEM_BW;
  double nv = 2 * NV_LAT + (double)a / NV_BW, net = 2 * NIC_LAT + (double)b / NIC_BW;
  const bs_explain *x = &res.explain;
  fprintf(stderr, "copy %.9g + %.9g launch, elemwise %.9g + %.9g launch, nvlink %.9g, network %.9g\n", copy,
          COPY_LAUNCH, ew, EW_LAUNCH, nv, net);
  assert_int_equal(x->critical_rank, 0);
  assert_close(x->critical.compute[BS_XK_OTHER], copy, 1e-9);
  assert_close(x->critical.compute[BS_XK_ELEMWISE], ew, 1e-9);
  assert_close(x->critical.launch, COPY_LAUNCH + EW_LAUNCH, 1e-9);
  assert_close(x->critical.exposed[BS_XL_NVLINK], nv, 1e-9);
  assert_close(x->critical.exposed[BS_XL_NETWORK], net, 1e-9);
  assert_true(x->critical.wait_for_peers <= 1e-12);
  assert_true(x->critical.exposed[BS_XL_PCIE] == 0 && x->critical.exposed[BS_XL_SHM] == 0 &&
              x->critical.exposed[BS_XL_OTHER] == 0);
  assert_true(x->critical.compute[BS_XK_ATTN_FWD] == 0 && x->critical.compute[BS_XK_GEMM] == 0);
  assert_close(x->step, copy + COPY_LAUNCH + ew + EW_LAUNCH + nv + net, 1e-9);
  for (int k = 0; k < BS_XK_COUNT; k++) assert_close(x->mean.compute[k] + 1, x->critical.compute[k] + 1, 1e-12);
  for (int l = 0; l < BS_XL_COUNT; l++) assert_close(x->mean.exposed[l] + 1, x->critical.exposed[l] + 1, 1e-12);
  check_sums(&res, "toy by hand");
  bs_result_free(&res);
  toy_teardown(&t);
}

/*
 * One WAIT on an exchange inside the node and one across: the handle that finishes last names
 * the class, and the wait is as long as it. A large NVLink exchange (2 NV_LAT + big / NV_BW) beside
 * a small network one is all NVLink; swapped, all network. With the profile's p2p base cost
 * (each send its own actor, joined by the WAIT) the same holds, each exchange taking base longer.
 */
static void mixed_wait(double base) {
  toy_files t;
  cluster_setup(&t, base);
  const int64_t big = 400000000, small = 1000000;
  for (int swap = 0; swap < 2; swap++) {
    static toy_plan p;
    memset(&p, 0, sizeof p);
    p.ranks = 4;
    int h[4] = {0, 1, 2, 3};
    for (int r = 0; r < 4; r++) {
      exchange(&p, r, r ^ 1, 1, swap ? small : big, 0);
      exchange(&p, r, r ^ 2, 2, swap ? big : small, 2);
      toy_wait(&p, r, 4, h);
    }
    bs_result res;
    run_cluster(&p, &t, 0, &res);
    const bs_explain_parts *x = &res.explain.critical;
    double want = base + (swap ? 2 * NIC_LAT + (double)big / NIC_BW : 2 * NV_LAT + (double)big / NV_BW);
    fprintf(stderr, "base %g, %s large: nvlink %.9g, network %.9g (want %.9g)\n", base, swap ? "network" : "nvlink",
            x->exposed[BS_XL_NVLINK], x->exposed[BS_XL_NETWORK], want);
    assert_close(x->exposed[swap ? BS_XL_NETWORK : BS_XL_NVLINK], want, 1e-9);
    assert_true(x->exposed[swap ? BS_XL_NVLINK : BS_XL_NETWORK] == 0);
    check_sums(&res, "mixed wait");
    bs_result_free(&res);
  }
  toy_teardown(&t);
}
static void test_mixed_wait_last_finisher(void **state) {
  (void)state;
  mixed_wait(0);
}
static void test_mixed_wait_p2p_base(void **state) {
  (void)state;
  mixed_wait(5e-5);
}

/* A collective counts by the span of its group: an allreduce inside each node is NVLink's, one
 * over all four ranks the network's, whatever links its steps take. */
static void test_collective_span(void **state) {
  (void)state;
  toy_files t;
  cluster_setup(&t, 0);
  for (int span = 0; span < 2; span++) {
    static toy_plan p;
    memset(&p, 0, sizeof p);
    p.ranks = 4;
    for (int r = 0; r < 4; r++) {
      bs_op *op = toy_push(&p, r, BS_OP_COLL);
      op->handle = 0;
      op->u.coll.kind = BS_COLL_ALLREDUCE;
      op->u.coll.group = span ? (bs_group){0, 1, 4} : (bs_group){r / 2 * 2, 1, 2};
      op->u.coll.bytes = 8000000;
      int h = 0;
      toy_wait(&p, r, 1, &h);
    }
    bs_result res;
    run_cluster(&p, &t, 0, &res);
    const bs_explain_parts *x = &res.explain.critical;
    assert_true(res.time.comm_exposed > 0);
    assert_close(x->exposed[span ? BS_XL_NETWORK : BS_XL_NVLINK], res.time.comm_exposed, 1e-9);
    assert_true(x->exposed[span ? BS_XL_NVLINK : BS_XL_NETWORK] == 0);
    check_sums(&res, span ? "allreduce over two nodes" : "allreduce inside a node");
    bs_result_free(&res);
  }
  toy_teardown(&t);
}

/*
 * A straggler: rank 1 computes F times slower (launch included: the whole op is scaled). Each rank
 * copies (d = COPY_LAUNCH + 2c / MEM_BW) and exchanges with its node partner; rank 0 then copies
 * `c2` more bytes, so it finishes last. It waited (F - 1) d for rank 1: waiting for a peer, not
 * compute and not transfer; rank 1 itself never waits. The step is F d + the exchange + rank 0's
 * last copy.
 */
static void test_straggler_peers(void **state) {
  (void)state;
  toy_files t;
  cluster_setup(&t, 0);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 4;
  const int64_t c = 40000000, c2 = 1000000, a = 100000000;
  const double F = 1.5;
  int h[2] = {0, 1};
  for (int r = 0; r < 4; r++) {
    toy_copy(&p, r, c);
    exchange(&p, r, r ^ 1, 1, a, 0);
    toy_wait(&p, r, 2, h);
  }
  toy_copy(&p, 0, c2);
  bs_result res;
  run_cluster(&p, &t, F, &res);
  double d = COPY_LAUNCH + 2.0 * (double)c / MEM_BW, d2 = COPY_LAUNCH + 2.0 * (double)c2 / MEM_BW;
  double nv = 2 * NV_LAT + (double)a / NV_BW;
  const bs_explain *x = &res.explain;
  fprintf(stderr, "straggler: step %.9g (hand %.9g), critical rank %d waited %.9g for peers (hand %.9g)\n", x->step,
          F * d + nv + d2, x->critical_rank, x->critical.wait_for_peers, (F - 1) * d);
  assert_int_equal(x->critical_rank, 0);
  assert_close(x->step, F * d + nv + d2, 1e-9);
  assert_close(x->critical.wait_for_peers, (F - 1) * d, 1e-9);
  assert_close(x->critical.exposed[BS_XL_NVLINK], nv, 1e-9);
  assert_close(x->critical.launch, 2 * COPY_LAUNCH, 1e-9);
  assert_close(x->critical.compute[BS_XK_OTHER], d + d2 - 2 * COPY_LAUNCH, 1e-9);
  assert_true(res.ranks[1].wait_for_peers <= 1e-12);           /* the straggler waits for nobody */
  assert_close(res.ranks[1].compute, F * d, 1e-9);             /* and computes longer */
  assert_close(x->mean.wait_for_peers, (F - 1) * d / 4, 1e-9); /* only rank 0, its partner, waited */
  assert_close(x->mean.launch, 5 * COPY_LAUNCH / 4, 1e-9);
  check_sums(&res, "straggler");
  bs_result_free(&res);
  toy_teardown(&t);
}

/* ---------------- real plans ---------------- */

static void plan_config(bs_config *c, bs_method m, int gpus, int64_t seq) {
  bs_config_default(c);
  c->par.method = m;
  c->par.gpus = gpus;
  c->work.seq_len = seq;
  c->work.phase = BS_TRAIN;
}

static void run_plan(const bs_config *c, bs_tristate fold, bs_result *r, const char *what) {
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.fold = fold;
  char err[512] = "";
  if (bs_sim_run(c, &o, r, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", what, err);
    fail();
  }
}

/* Every method's parts add up, per the critical rank and on average: training on two DGX A100 nodes,
 * decode, a layer with GEMMs, a model under the layer shortcut, a PCIe node, the shared-memory host. */
static void test_sum_invariant_methods(void **state) {
  (void)state;
  static const struct {
    bs_method m;
    int gpus;
  } train[] = {{BS_BURST, 16}, {BS_RING, 16}, {BS_RING_LI2021, 8}, {BS_ULYSSES, 16}, {BS_USP, 16}, {BS_TP, 8}};
  for (size_t i = 0; i < sizeof train / sizeof train[0]; i++) {
    bs_config c;
    plan_config(&c, train[i].m, train[i].gpus, 32768);
    c.work.causal = 1;
    c.par.layout = train[i].m == BS_BURST || train[i].m == BS_RING || train[i].m == BS_USP ? BS_ZIGZAG : BS_CONTIGUOUS;
    bs_result r;
    run_plan(&c, BS_OFF, &r, bs_method_name(train[i].m));
    check_sums(&r, bs_method_name(train[i].m));
    const bs_explain_parts *x = &r.explain.critical;
    /* li2021 materialises the scores: its forward is GEMMs and a softmax */
    assert_true(x->compute[BS_XK_ATTN_BWD] > 0 && x->launch > 0);
    assert_true(train[i].m == BS_RING_LI2021 ? x->compute[BS_XK_GEMM] > 0 : x->compute[BS_XK_ATTN_FWD] > 0);
    bs_result_free(&r);
  }
  { /* decode: tree and ring against a KV cache */
    bs_method dm[] = {BS_TREE, BS_RING};
    for (int i = 0; i < 2; i++) {
      bs_config c;
      plan_config(&c, dm[i], 16, 131072);
      c.work.phase = BS_DECODE;
      c.par.layout = BS_CONTIGUOUS;
      bs_result r;
      run_plan(&c, BS_OFF, &r, "decode");
      check_sums(&r, dm[i] == BS_TREE ? "tree decode" : "ring decode");
      bs_result_free(&r);
    }
  }
  { /* a layer (GEMMs, norms) and a model under the layer shortcut */
    bs_config c;
    plan_config(&c, BS_USP, 16, 32768);
    c.work.scope = BS_SCOPE_LAYER;
    bs_result r;
    run_plan(&c, BS_AUTO, &r, "layer");
    check_sums(&r, "usp layer");
    assert_true(r.explain.critical.compute[BS_XK_GEMM] > 0 && r.explain.critical.compute[BS_XK_ELEMWISE] > 0);
    bs_result_free(&r);
    c.work.scope = BS_SCOPE_MODEL;
    c.model.layers = 8;
    assert_true(bs_sim_layers_apply(&c, &(bs_sim_opts){.layers = BS_AUTO}));
    run_plan(&c, BS_AUTO, &r, "model");
    /* extended from 3 and 4 layers: the sums hold for the step and the mean as extended */
    assert_close(r.explain.step, r.time.step, 1e-9);
    assert_close(bs_explain_total(&r.explain.critical), r.time.step, 1e-9);
    bs_result_free(&r);
  }
  { /* a PCIe node: transfers inside it are PCIe's */
    bs_config c;
    plan_config(&c, BS_RING, 8, 32768);
    strcpy(c.cluster.topology, "a100-pcie-node");
    strcpy(c.cluster.profile, "a100-pcie-40gb");
    bs_result r;
    run_plan(&c, BS_AUTO, &r, "pcie");
    check_sums(&r, "ring on a PCIe node");
    assert_true(r.explain.critical.exposed[BS_XL_PCIE] > 0);
    assert_true(r.explain.critical.exposed[BS_XL_NVLINK] == 0 && r.explain.critical.exposed[BS_XL_NETWORK] == 0);
    bs_result_free(&r);
  }
  { /* the host topology: ranks share one CPU and its memory */
    bs_config c;
    plan_config(&c, BS_RING, 4, 4096);
    strcpy(c.cluster.topology, "host");
    strcpy(c.cluster.profile, "host");
    bs_result r;
    run_plan(&c, BS_AUTO, &r, "host");
    check_sums(&r, "ring on the host");
    const bs_explain_parts *x = &r.explain.critical;
    assert_true(x->exposed[BS_XL_SHM] > 0);
    assert_true(x->exposed[BS_XL_NVLINK] == 0 && x->exposed[BS_XL_PCIE] == 0 && x->exposed[BS_XL_NETWORK] == 0);
    bs_result_free(&r);
  }
  { /* a straggler in a real ring: the others wait for it */
    bs_config c;
    plan_config(&c, BS_RING, 16, 32768);
    c.cluster.straggler_rank = 3;
    c.cluster.straggler_factor = 1.5;
    bs_result r;
    run_plan(&c, BS_OFF, &r, "straggler");
    check_sums(&r, "ring with a straggler");
    assert_true(r.explain.mean.wait_for_peers > 0);
    assert_true(r.ranks[3].wait_for_peers < r.explain.mean.wait_for_peers);
    bs_result_free(&r);
  }
}

/* The fold stands for every rank: its explain is the full run's (the critical rank's parts and the mean). */
static void test_fold_matches_full(void **state) {
  (void)state;
  bs_config c;
  plan_config(&c, BS_BURST, 32, 65536);
  bs_result full, folded;
  run_plan(&c, BS_OFF, &full, "full");
  run_plan(&c, BS_ON, &folded, "folded");
  assert_true(folded.sim_actors < full.sim_actors);
  check_sums(&full, "burst, 32 GPUs");
  check_sums(&folded, "burst, 32 GPUs, folded");
  const double tol = 1e-6;
  assert_close(folded.explain.step, full.explain.step, tol);
  for (int k = 0; k < BS_XK_COUNT; k++)
    assert_close(folded.explain.mean.compute[k] + 1e-30, full.explain.mean.compute[k] + 1e-30, tol);
  for (int l = 0; l < BS_XL_COUNT; l++)
    assert_true(fabs(folded.explain.mean.exposed[l] - full.explain.mean.exposed[l]) <= tol * full.time.step);
  assert_true(fabs(folded.explain.mean.wait_for_peers - full.explain.mean.wait_for_peers) <= tol * full.time.step);
  assert_int_equal(folded.explain.critical_rank, full.explain.critical_rank);
  for (int k = 0; k < BS_XK_COUNT; k++)
    assert_true(fabs(folded.explain.critical.compute[k] - full.explain.critical.compute[k]) <= tol * full.time.step);
  for (int l = 0; l < BS_XL_COUNT; l++)
    assert_true(fabs(folded.explain.critical.exposed[l] - full.explain.critical.exposed[l]) <= tol * full.time.step);
  assert_true(full.explain.critical.exposed[BS_XL_NETWORK] + full.explain.critical.exposed[BS_XL_NVLINK] > 0);
  bs_result_free(&full);
  bs_result_free(&folded);
}

int main(int argc, char **argv) {
  const struct CMUnitTest all[] = {
    cmocka_unit_test(test_kinds_and_classes),   cmocka_unit_test(test_parts_and_summary),
    cmocka_unit_test(test_toy_by_hand),         cmocka_unit_test(test_mixed_wait_last_finisher),
    cmocka_unit_test(test_mixed_wait_p2p_base), cmocka_unit_test(test_collective_span),
    cmocka_unit_test(test_straggler_peers),     cmocka_unit_test(test_sum_invariant_methods),
    cmocka_unit_test(test_fold_matches_full),
  };
  return BS_RUN_NAMED(all, argc, argv, NULL, NULL);
}
