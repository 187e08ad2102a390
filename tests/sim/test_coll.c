/*
 * test_coll.c — collectives in the simulator: the shape of NCCL's double
 * binary tree (sim/coll_shape.h), the tree allreduce's simulated time against
 * its hand formula on toy platforms (2·depth hops of latency; the busiest
 * member's volume over its link), tree against ring at small and large
 * messages, the auto rule, the analytic option against the steps, and the
 * cursor both engines walk a lowered collective's program with.
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

#include "sim/coll_lower.h"
#include "sim/coll_shape.h"
#include "profile/profile.h"
#include "sim/sim.h"
#include "toy.h"

/* ceil(log2 n): the depth of a binary tree of n vertices built by halving. */
static int ceil_log2(int n) {
  int d = 0;
  while ((1 << d) < n) d++;
  return d;
}

/* ---------------- the shape ---------------- */

/* Both trees of nn nodes: one root, children consistent with parents, depth
 * ceil(log2 nn), and (the point of two trees) every node a leaf in one of them,
 * except the last node when nn is odd. */
static void test_dtree_shape(void **state) {
  (void)state;
  for (int nn = 1; nn <= 70; nn++) {
    int leaf_somewhere[70] = {0};
    for (int t = 0; t < 2; t++) {
      int roots = 0, depth = 0;
      for (int i = 0; i < nn; i++) {
        int p = bs_dtree_node_parent(nn, t, i);
        if (p < 0) roots++;
        else assert_true(p < nn && p != i);
        int ch[2], k = bs_dtree_node_children(nn, t, i, ch);
        int want = 0;
        for (int j = 0; j < nn; j++) want += bs_dtree_node_parent(nn, t, j) == i;
        assert_int_equal(k, want);
        for (int c = 0; c < k; c++) assert_int_equal(bs_dtree_node_parent(nn, t, ch[c]), i);
        if (k == 0) leaf_somewhere[i] = 1;
        int d = bs_dtree_node_depth(nn, t, i);
        assert_true(d < nn); /* reaches the root: no cycle */
        if (d > depth) depth = d;
      }
      assert_int_equal(roots, 1);
      assert_int_equal(depth, ceil_log2(nn));
    }
    if (nn >= 2)
      for (int i = 0; i < nn; i++)
        if (!(nn % 2 == 1 && i == nn - 1)) assert_true(leaf_somewhere[i]);
  }
}

/* Members on nodes (interleaved on purpose): a chain per node, its first member in the node tree. */
static void test_dtree_members(void **state) {
  (void)state;
  enum { N = 12, PPN = 4 };
  int node[N];
  for (int m = 0; m < N; m++) node[m] = 7 * (m % 3); /* nodes 0, 7, 14, first seen in that order */
  for (int t = 0; t < 2; t++) {
    int roots = 0, edges = 0, depth = 0;
    for (int m = 0; m < N; m++) {
      bs_tree_vertex v;
      assert_int_equal(bs_dtree_vertex(N, node, t, m, &v), 0);
      if (v.parent < 0) roots++;
      edges += v.nchild;
      int chain = 0;
      for (int c = 0; c < v.nchild; c++) {
        bs_tree_vertex w;
        assert_int_equal(bs_dtree_vertex(N, node, t, v.child[c], &w), 0);
        assert_int_equal(w.parent, m);
        chain += node[v.child[c]] == node[m];
      }
      assert_true(chain <= 1);
      int d = 0;
      for (int x = m; d <= N;) {
        bs_tree_vertex w;
        assert_int_equal(bs_dtree_vertex(N, node, t, x, &w), 0);
        if (w.parent < 0) break;
        x = w.parent;
        d++;
      }
      if (d > depth) depth = d;
    }
    assert_int_equal(roots, 1);
    assert_int_equal(edges, N - 1);
    /* NCCL src/graph/tuning.cc: (ppn−1) intra hops plus log2(nNodes) inter hops. */
    assert_int_equal(depth, (PPN - 1) + ceil_log2(3));
  }
  bs_tree_vertex v;
  assert_int_equal(bs_dtree_vertex(0, node, 0, 0, &v), -1);
  assert_int_equal(bs_dtree_vertex(N, node, 2, 0, &v), -1);
  assert_int_equal(bs_dtree_vertex(N, node, 0, N, &v), -1);
}

/* ---------------- simulated ---------------- */

static void allreduce_plan(toy_plan *p, int n, int64_t bytes) {
  memset(p, 0, sizeof *p);
  p->ranks = n;
  for (int r = 0; r < n; r++) {
    bs_op *op = toy_push(p, r, BS_OP_COLL);
    op->handle = 2;
    op->u.coll.kind = BS_COLL_ALLREDUCE;
    op->u.coll.group = (bs_group){0, 1, n};
    op->u.coll.bytes = bytes;
    int h = 2;
    toy_wait(p, r, 1, &h);
  }
}

/* Simulates one allreduce of `bytes` over n toy ranks; returns the step time. */
static double allreduce(const toy_files *t, int n, int64_t bytes, bs_coll_algo algo, bs_coll_model model,
                        bs_result *out) {
  static toy_plan p;
  allreduce_plan(&p, n, bytes);
  bs_config c;
  toy_config(&c, t, n);
  c.cluster.coll_algo = algo;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.coll_model = model;
  bs_sim_source s = toy_source(&p);
  bs_result r;
  char err[512] = "";
  int rc = bs_sim_run_source(&c, &o, &s, &r, NULL, NULL, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(r.sim_network, algo == BS_COLL_ALGO_TREE   ? "coll: tree"
                                        : algo == BS_COLL_ALGO_RING ? "coll: ring"
                                                                    : "coll: auto"));
  double step = r.time.step;
  if (out) *out = r;
  else bs_result_free(&r);
  return step;
}

/* Latency: with links too fast to matter, a tree allreduce takes 2·ceil(log2 n)
 * hops (reduce up, broadcast down) of one route each (two links of LINK_LAT);
 * every tree edge carries its half of the buffer up once and down once. */
static void test_tree_latency_exact(void **state) {
  (void)state;
  const int ns[] = {2, 3, 4, 5, 8, 13, 16};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    int n = ns[i];
    toy_files t;
    toy_setup_links(&t, n, 1, LINK_LAT, 1e18);
    const int64_t bytes = 4096;
    bs_result r;
    double step = allreduce(&t, n, bytes, BS_COLL_ALGO_TREE, BS_COLL_STEPS, &r);
    double want = 2.0 * ceil_log2(n) * (2 * LINK_LAT);
    assert_close(step, want, 1e-9);
    assert_int_equal(r.comm.total, 2 * (int64_t)(n - 1) * bytes);
    assert_int_equal(r.comm.inter_node, r.comm.total);
    bs_result_free(&r);
    /* The analytic option gives the same time, and the same bytes. */
    step = allreduce(&t, n, bytes, BS_COLL_ALGO_TREE, BS_COLL_ANALYTIC, &r);
    assert_close(step, want, 1e-9);
    assert_int_equal(r.comm.total, 2 * (int64_t)(n - 1) * bytes);
    bs_result_free(&r);
    toy_teardown(&t);
  }
  /* Two nodes of four: a chain of 3 intra hops plus 1 inter hop, each way. */
  toy_files t;
  toy_setup_links(&t, 8, 4, LINK_LAT, 1e18);
  bs_result r;
  double step = allreduce(&t, 8, 4096, BS_COLL_ALGO_TREE, BS_COLL_STEPS, &r);
  assert_close(step, 2.0 * (3 + 1) * (2 * LINK_LAT), 1e-9);
  assert_int_equal(r.comm.total, 2 * 7 * 4096);
  /* tree 0 and tree 1 each cross between the two nodes once, up and down */
  assert_int_equal(r.comm.inter_node, 2 * 4096);
  bs_result_free(&r);
  toy_teardown(&t);
}

/* Bandwidth: a large buffer S. A member inner in one tree sends its half to two
 * children and its parent, and its other half to its parent in the other tree:
 * 2·S over its link, the lower bound of the time. Above it: the latencies of
 * the deepest path (2·D hops) and the pipeline fill, the first chunk crossing
 * those 2·D hops on links it shares with the other tree's flow (at most two
 * chunk times per hop). The analytic formula must lie in the same interval. */
static void test_tree_bandwidth(void **state) {
  (void)state;
  const int ns[] = {4, 8, 16};
  const int64_t S = 400000000;
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    int n = ns[i];
    toy_files t;
    toy_setup(&t, n, 1);
    bs_result r;
    double step = allreduce(&t, n, S, BS_COLL_ALGO_TREE, BS_COLL_STEPS, &r);
    assert_int_equal(r.comm.per_rank_max_sent, 2 * S);
    assert_int_equal(r.comm.total, 2 * (n - 1) * S);
    bs_result_free(&r);
    int D = ceil_log2(n);
    int64_t half = S / 2, chunk = bs_tree_chunk_size(half, bs_tree_chunks(half), 0);
    double lower = 2.0 * (double)S / LINK_BW;
    double fill = 2.0 * D * (2 * LINK_LAT) + 2.0 * (2.0 * D) * (double)chunk / LINK_BW;
    double an = allreduce(&t, n, S, BS_COLL_ALGO_TREE, BS_COLL_ANALYTIC, NULL);
    fprintf(stderr,
            "tree allreduce of 400 MB on %d: steps %.6f s, analytic %.6f s (%+.2f %%), 2S/bw %.6f s, "
            "+ latency and fill bound %.6f s\n",
            n, step, an, 100 * (an - step) / step, lower, fill);
    assert_true(step >= lower && step <= lower + fill);
    assert_true(an >= lower && an <= lower + fill);
    toy_teardown(&t);
  }
}

/* Tree against ring on 16 ranks: the tree's 2·log2(16) = 8 hops beat the ring's
 * 2·15 steps at 4 KiB; at 400 MB the ring moves 2·15/16·S per link against the
 * tree's 2·S and wins. auto picks the faster one in both cases. */
static void test_tree_vs_ring(void **state) {
  (void)state;
  const int n = 16;
  toy_files t;
  toy_setup(&t, n, 1);
  const int64_t sizes[2] = {4096, 400000000};
  for (int k = 0; k < 2; k++) {
    double tree = allreduce(&t, n, sizes[k], BS_COLL_ALGO_TREE, BS_COLL_STEPS, NULL);
    double ring = allreduce(&t, n, sizes[k], BS_COLL_ALGO_RING, BS_COLL_STEPS, NULL);
    double aut = allreduce(&t, n, sizes[k], BS_COLL_ALGO_AUTO, BS_COLL_STEPS, NULL);
    fprintf(stderr, "%lld bytes on %d ranks: tree %.6g s, ring %.6g s, auto %.6g s\n", (long long)sizes[k], n, tree,
            ring, aut);
    if (k == 0) {
      assert_true(tree < ring);
      assert_close(ring, 2.0 * (n - 1) * (2 * LINK_LAT + (double)(sizes[k] / n) / LINK_BW), 1e-9);
      assert_close(aut, tree, 1e-12);
    } else {
      assert_true(ring < tree);
      assert_close(aut, ring, 1e-12);
    }
  }
  /* Other collectives have only the ring in NCCL: tree leaves them alone. */
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 4;
  for (int r = 0; r < 4; r++) {
    bs_op *op = toy_push(&p, r, BS_OP_COLL);
    op->handle = 1;
    op->u.coll.kind = BS_COLL_ALLGATHER;
    op->u.coll.group = (bs_group){0, 1, 4};
    op->u.coll.bytes = 1000000;
    int h = 1;
    toy_wait(&p, r, 1, &h);
  }
  bs_config c;
  toy_config(&c, &t, 4);
  c.cluster.coll_algo = BS_COLL_ALGO_TREE;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_sim_source s = toy_source(&p);
  bs_result r;
  char err[512] = "";
  assert_int_equal(bs_sim_run_source(&c, &o, &s, &r, NULL, NULL, err, sizeof err), 0);
  assert_close(r.time.step, 3 * (2 * LINK_LAT + 1e6 / LINK_BW), 1e-9);
  bs_result_free(&r);
  toy_teardown(&t);
}

/* auto on a real fabric (2 DGX A100 nodes, tp's all-reduces of 256 MiB): every rank of a group
 * must pick the same algorithm (the ring crossing nodes is timed at its slowest link, on
 * every rank alike), else the group deadlocks; the result is the ring's or the tree's. */
static void test_auto_multinode(void **state) {
  (void)state;
  double step[3];
  for (int a = 0; a < 3; a++) {
    bs_config c;
    bs_config_default(&c);
    c.par.method = BS_TP;
    c.par.gpus = 16;
    c.work.seq_len = 32768;
    c.cluster.coll_algo = (bs_coll_algo)a;
    bs_result r;
    char err[512] = "";
    int rc = bs_sim_run(&c, NULL, &r, err, sizeof err);
    if (rc) fprintf(stderr, "%s: %s\n", bs_coll_algo_name(c.cluster.coll_algo), err);
    assert_int_equal(rc, 0);
    step[a] = r.time.step;
    bs_result_free(&r);
  }
  fprintf(stderr, "tp on 16 GPUs: ring %.6f s, tree %.6f s, auto %.6f s\n", step[0], step[1], step[2]);
  assert_true(step[2] == step[0] || step[2] == step[1]);
}

/* ---------------- rail-aligned ring channels ---------------- */

/* Every channel is one cycle through all members, next and previous are inverse, every
 * hop between nodes stays on its rail (but the wrap for 2 per node and an odd count), and each
 * member leaves its node on exactly one channel: every NIC carries one ring. */
static void test_ring_channel_shape(void **state) {
  (void)state;
  for (int P = 2; P <= 8; P++)
    for (int nn = 2; nn <= 7; nn++) {
      int n = P * nn;
      int exits[64] = {0};
      assert_true(n <= 64);
      for (int ch = 0; ch < P; ch++) {
        int seen[64] = {0}, x = 0;
        assert_true(n <= 64);
        for (int k = 0; k < n; k++) {
          assert_false(seen[x]);
          seen[x] = 1;
          int y = bs_ring_channel_peer(P, nn, ch, x, +1);
          assert_true(y >= 0 && y < n);
          assert_int_equal(bs_ring_channel_peer(P, nn, ch, y, -1), x);
          if (y / P != x / P) {
            exits[x]++;
            int wrap = x / P == nn - 1 && y / P == 0;
            if (!(wrap && nn % 2 && P == 2)) assert_int_equal(x % P, y % P);
          }
          x = y;
        }
        assert_int_equal(x, 0); /* back at the start after n hops: one cycle */
      }
      for (int m = 0; m < n; m++) assert_int_equal(exits[m], 1);
    }
  assert_int_equal(bs_ring_channel_peer(8, 2, 8, 0, 1), -1);
  assert_int_equal(bs_ring_channel_peer(8, 2, 0, 16, 1), -1);
  assert_int_equal(bs_ring_channel_peer(8, 2, 0, 0, 0), -1);
}

/* An allreduce over all n ranks; with `cross` > 0, rank 0 also sends `cross` bytes to rank 8
 * (same rail, next node) while it runs. */
static double dgx_allreduce_with(int n, int64_t bytes, int64_t cross, bs_coll_model model, bs_result *out) {
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = n;
  for (int r = 0; r < n; r++) {
    bs_op *op = toy_push(&p, r, BS_OP_COLL);
    op->handle = 2;
    op->u.coll.kind = BS_COLL_ALLREDUCE;
    op->u.coll.group = (bs_group){0, 1, n};
    op->u.coll.bytes = bytes;
    int h[2] = {2, 3};
    int k = 1;
    if (cross > 0 && (r == 0 || r == 8)) {
      toy_p2p(&p, r, r == 0 ? BS_OP_SEND : BS_OP_RECV, 3, r == 0 ? 8 : 0, 7, cross);
      k = 2;
    }
    toy_wait(&p, r, k, h);
  }
  bs_config c;
  bs_config_default(&c);
  c.par.gpus = n;
  snprintf(c.cluster.topology, sizeof c.cluster.topology, "dgx-a100");
  snprintf(c.cluster.profile, sizeof c.cluster.profile, "a100-sxm4-80gb");
  c.cluster.coll_algo = BS_COLL_ALGO_RING;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.coll_model = model;
  o.fold = BS_OFF;
  bs_sim_source s = toy_source(&p);
  char err[512] = "";
  int rc = bs_sim_run_source(&c, &o, &s, out, NULL, NULL, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  assert_int_equal(rc, 0);
  return out->time.step;
}

static double dgx_allreduce(int n, int64_t bytes, bs_coll_model model, bs_result *out) {
  return dgx_allreduce_with(n, bytes, 0, model, out);
}

/* Link sharing: a 1 GiB message on NIC 0 of node 0 during a 4 GiB allreduce over 2 DGX A100
 * nodes slows the channel that leaves through that NIC. Steps and flow see it (within 2 % of
 * each other), analytic does not (the step is the longer of the two alone). */
static void test_ring_flow_shares_links(void **state) {
  (void)state;
  int64_t S = (int64_t)4 << 30, X = (int64_t)1 << 30;
  bs_result r;
  double alone = dgx_allreduce_with(16, S, 0, BS_COLL_STEPS, &r);
  bs_result_free(&r);
  double t[3];
  bs_coll_model models[3] = {BS_COLL_STEPS, BS_COLL_FLOW, BS_COLL_ANALYTIC};
  for (int k = 0; k < 3; k++) {
    t[k] = dgx_allreduce_with(16, S, X, models[k], &r);
    bs_result_free(&r);
  }
  fprintf(stderr, "allreduce alone %.6f s; with a 1 GiB message: steps %.6f s, flow %.6f s, analytic %.6f s\n", alone,
          t[0], t[1], t[2]);
  /* the message alone takes the profile's per-send cost + 2 x 7 us + X / 24 GB/s = 44.8 ms; sharing
   * the NIC adds most of it */
  static bs_profile prof;
  char perr[512] = "";
  if (bs_profile_load("a100-sxm4-80gb", &prof, perr, sizeof perr)) fail_msg("%s", perr);
  double msg = prof.p2p_base_s[1] + 2 * 7e-6 + (double)X / 24e9;
  assert_true(t[0] > alone + 0.5 * msg);
  assert_true(fabs(t[1] - t[0]) < 0.02 * t[0]);
  /* analytic: the two side by side, each at its own pace */
  assert_close(t[2], alone > msg ? alone : msg, 1e-6);
}

/* A ring allreduce over 2 and 3 DGX A100 nodes: 8 channels, one per NIC. Steps, flow and
 * analytic agree with the lockstep formula 2(n-1)(2 lat_nic + S/n/8 / bw_nic) (no other
 * traffic), bytes are the ring's, and the bus bandwidth of a 4 GiB allreduce is within 5 %
 * of the multi-node DGX A100 figure of github.com/NVIDIA/nccl/issues/812 (8 HDR NICs: about 192 GB/s, nccl #812). */
static void test_ring_channels_dgx(void **state) {
  (void)state;
  const double lat = 2 * 7e-6, bw = 24e9; /* a100-sxm4-80gb: NIC link latency and bandwidth */
  static bs_profile prof;                 /* and its per-call cost, paid once */
  char perr[512] = "";
  if (bs_profile_load("a100-sxm4-80gb", &prof, perr, sizeof perr)) fail_msg("%s", perr);
  for (int n = 16; n <= 24; n += 8) {
    int64_t S = (int64_t)4 << 30;
    int64_t part = (S / n + 7) / 8; /* the largest channel share of a step's chunk */
    double want = prof.coll_base_s + 2 * (n - 1) * (lat + (double)part / bw);
    double t[3];
    bs_coll_model models[3] = {BS_COLL_STEPS, BS_COLL_FLOW, BS_COLL_ANALYTIC};
    for (int k = 0; k < 3; k++) {
      bs_result r;
      t[k] = dgx_allreduce(n, S, models[k], &r);
      assert_int_equal(r.comm.per_rank_max_sent, 2 * (n - 1) * (S / n));
      /* one member per node and channel leaves the node: n/8 of them carry each step's chunk */
      assert_int_equal(r.comm.inter_node, (int64_t)(n / 8) * 2 * (n - 1) * (S / n));
      bs_result_free(&r);
      if (fabs(t[k] - want) > 1e-6 * want) fprintf(stderr, "model %s\n", bs_coll_model_name(models[k]));
      /* 1e-6: SimGrid resolves times to about 1e-9 s, a byte per step here is 4e-11 s */
      assert_close(t[k], want, 1e-6);
    }
    double busbw = (double)S / (t[0] - prof.coll_base_s) * 2 * (n - 1) / n;
    fprintf(stderr, "ring allreduce 4 GiB over %d DGX A100 GPUs: %.6f s, busbw %.1f GB/s\n", n, t[0], busbw / 1e9);
    assert_true(fabs(busbw - 192e9) < 0.05 * 192e9);
  }
}

/* ---------------- the lowered program ---------------- */

/* The cursor both engines walk a lowered program with: a loop's body `times` times with its
 * iteration, a loop of none skipped, each thread its own steps, and a chunked send's sizes summing
 * to its half. */
static void test_lower_cursor(void **state) {
  (void)state;
  cl_op op[] = {
    {.kind = CL_SLEEP, .t = 1}, {.kind = CL_LOOP, .n = 2, .bytes = 3},
    {.kind = CL_RECV},          {.kind = CL_SEND, .flags = CL_CHUNKED, .n = 3, .bytes = 1000},
    {.kind = CL_WAIT},          {.kind = CL_LOOP, .n = 1, .bytes = 0},
    {.kind = CL_EVENT},         {.kind = CL_MARK},
  };
  cl_prog p = {.nth = 2, .op = op, .nop = 8};
  p.th[0] = (cl_thread){.first = 0, .nop = 5};
  p.th[1] = (cl_thread){.first = 5, .nop = 3};
  const int want[] = {CL_SLEEP, CL_RECV, CL_SEND, CL_RECV, CL_SEND, CL_RECV, CL_SEND, CL_WAIT};
  int got = 0;
  int64_t sent = 0;
  cl_cursor cur = cl_begin(&p, 0);
  for (const cl_op *o; (o = cl_next(&p, 0, &cur)); cl_done(&p, &cur)) {
    assert_true(got < 8);
    assert_int_equal(o->kind, want[got++]);
    if (o->kind == CL_SEND) {
      assert_int_equal(cur.iter, (got - 3) / 2);
      sent += cl_send_bytes(o, cur.iter);
    }
  }
  assert_int_equal(got, 8);
  assert_int_equal(sent, 1000);
  cur = cl_begin(&p, 1);
  const cl_op *o = cl_next(&p, 1, &cur);
  assert_non_null(o);
  assert_int_equal(o->kind, CL_MARK);
  cl_done(&p, &cur);
  assert_null(cl_next(&p, 1, &cur));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_dtree_shape),
    cmocka_unit_test(test_dtree_members),
    cmocka_unit_test(test_tree_latency_exact),
    cmocka_unit_test(test_tree_bandwidth),
    cmocka_unit_test(test_tree_vs_ring),
    cmocka_unit_test(test_auto_multinode),
    cmocka_unit_test(test_ring_channel_shape),
    cmocka_unit_test(test_ring_channels_dgx),
    cmocka_unit_test(test_ring_flow_shares_links),
    cmocka_unit_test(test_lower_cursor),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
