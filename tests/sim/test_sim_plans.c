/*
 * test_sim_plans.c — the simulator on real plans: the burst/ring bytes against
 * the published volume formulas, the double ring's NICs, the fold shortcut
 * against the straightforward run (and where it must refuse), the pipeline's
 * bubble, the bytes by group of a composed point, and the --trace file.
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

#include <cjson/cJSON.h>

#include "profile/profile.h"
#include "sim/sim.h"
#include "topologies/topo.h"

#include "toy.h"

/* ---------------- real plans ---------------- */

static void burst_config(bs_config *c, int gpus, int64_t seq, int double_ring) {
  bs_config_default(c);
  c->par.method = BS_BURST;
  c->par.gpus = gpus;
  c->work.seq_len = seq;
  c->work.phase = BS_TRAIN;
  c->par.double_ring = double_ring ? BS_ON : BS_OFF;
}

/* BurstAttention (arXiv 2403.09347) and ring attention volumes: forward K,V ring 2·B·Z·(N/G)·d elements per step, G−1 steps;
 * backward Q, dO, D, lse (fp32) move G−1 times, dQ (fp32) G−1 hops plus its return. */
static int64_t burst_bytes_formula(const bs_config *c) {
  int64_t G = c->par.gpus, n = c->work.seq_len / G, B = c->work.batch, d = c->model.head_dim;
  int64_t es = bs_dtype_bytes(c->model.dtype), Z = c->model.heads, Zk = c->model.kv_heads;
  int64_t fwd = (G - 1) * 2 * B * Zk * n * d * es;
  int64_t q = B * Z * n * d * es, rows = B * Z * n * 4, dq = B * Z * n * d * 4;
  return fwd + (G - 1) * (q + q + rows + rows) + G * dq;
}

static void test_burst_bytes_anchors(void **state) {
  (void)state;
  for (int dr = 0; dr < 2; dr++) {
    bs_config c;
    burst_config(&c, 16, 32768, dr);
    bs_result r;
    char err[512] = "";
    if (bs_sim_run(&c, NULL, &r, err, sizeof err)) {
      fprintf(stderr, "%s\n", err);
      fail();
    }
    int64_t want = burst_bytes_formula(&c);
    if (r.comm.per_rank_max_sent != want)
      fprintf(stderr, "double_ring %d: sim %lld bytes per rank, published formula %lld\n", dr,
              (long long)r.comm.per_rank_max_sent, (long long)want);
    assert_int_equal(r.comm.per_rank_max_sent, want);
    assert_int_equal(r.comm.total, 16 * want);
    assert_int_equal(r.comm.intra_node + r.comm.inter_node, r.comm.total);
    assert_true(r.comm.inter_node > 0);
    assert_true(r.time.fwd > 0 && r.time.bwd > 0 && r.time.step >= r.time.fwd + r.time.bwd * 0.999);
    assert_true(r.mem.peak_bytes_max > 0 && !r.mem.oom);
    bs_result_free(&r);
  }
}

/* The K,V ring forward of burst on 16 GPUs (2 DGX A100 nodes), 8K tokens (512 per
 * GPU: communication-bound), every link of the real platform: bytes and busy time
 * (post to wait) of node 0's eight NIC uplinks, and the forward time. */
static void nic_uplinks(int double_ring, bs_config *c, double bytes[8], double busy[8], double *fwd) {
  burst_config(c, 16, 8192, double_ring);
  c->work.phase = BS_PREFILL; /* forward only: the K,V ring */
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.fold = BS_OFF; /* every link of the real platform */
  bs_result r;
  bs_link_stat *links = NULL;
  int nl = 0;
  char err[512] = "";
  if (bs_sim_run_source(c, &o, NULL, &r, &links, &nl, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  assert_true(nl > 0);
  int seen = 0;
  for (int g = 0; g < 8; g++) bytes[g] = busy[g] = 0;
  for (int i = 0; i < nl; i++) {
    for (int g = 0; g < 8; g++) {
      char want[48];
      snprintf(want, sizeof want, "nic-n0-g%d_UP", g);
      if (!strcmp(links[i].name, want)) {
        bytes[g] = links[i].bytes;
        busy[g] = links[i].busy_s;
        seen++;
      }
    }
  }
  assert_int_equal(seen, 8);
  *fwd = r.time.fwd;
  free(links);
  bs_result_free(&r);
}

/* Double ring: every NIC of a node carries the same outer-ring bytes, all at once;
 * a single ring funnels all inter-node bytes through one NIC. */
static void test_double_ring_parallel_nics(void **state) {
  (void)state;
  bs_config c;
  double bytes[8], busy[8], fwd, bytes1[8], busy1[8], fwd1;
  nic_uplinks(1, &c, bytes, busy, &fwd);
  bs_profile prof;
  char err[512];
  assert_int_equal(bs_profile_load(c.cluster.profile, &prof, err, sizeof err), 0);
  double nic_bw = prof.link[BS_LINK_NIC].bw_Bps;
  assert_true(nic_bw > 0);
  /* 2 nodes: one outer step, K and V of every GPU over its own NIC. */
  double kv = 2.0 * c.model.kv_heads * (c.work.seq_len / 16) * c.model.head_dim * 2;
  double t_nic = kv / nic_bw; /* one block over one NIC, bandwidth term alone */
  for (int g = 0; g < 8; g++) {
    assert_close(bytes[g], kv, 1e-12);
    assert_close(busy[g], busy[0], 1e-9);
  }
  /* Single ring: GPU 7 -> GPU 8 is node 0's only crossing, one block per step for 15 steps,
   * all over one NIC (the rail-optimised route takes the destination's rail). */
  nic_uplinks(0, &c, bytes1, busy1, &fwd1);
  int used = -1;
  for (int g = 0; g < 8; g++)
    if (bytes1[g] > 0) {
      assert_int_equal(used, -1);
      used = g;
    }
  assert_true(used >= 0);
  assert_close(bytes1[used], 15 * kv, 1e-12);
  fprintf(stderr,
          "double ring: 8 NICs x %.0f bytes, forward %.6f s; single ring: NIC %d x %.0f bytes, forward "
          "%.6f s; one block over a NIC %.6f s\n",
          kv, fwd, used, 15 * kv, fwd1, t_nic);
  /* Communication-bound: the single ring waits for its NIC 15 times. */
  assert_true(fwd1 >= 15 * t_nic);
  /* In parallel: the double ring's forward holds one NIC transfer, plus the inner ring and the
   * compute it overlaps, far below the 8 transfers one after the other. */
  assert_true(fwd >= t_nic);
  assert_true(fwd < 2 * t_nic);
}

/* The fold against the straightforward run: the same figures within 0.1 % (here: equal). */
static void fold_case_full(const char *topo, int gpus, int nodes_per_leaf, double oversub, bs_method m, int dr,
                           int causal, bs_layout layout, const char *expect) {
  bs_config c;
  burst_config(&c, gpus, 65536, dr);
  c.par.method = m;
  c.work.causal = causal;
  c.par.layout = layout;
  strcpy(c.cluster.topology, topo);
  if (!strcmp(topo, "a100-pcie-node")) strcpy(c.cluster.profile, "a100-pcie-40gb"); /* its links' profile */
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.nodes_per_leaf = nodes_per_leaf;
  o.oversub = oversub;
  o.fold = BS_OFF;
  bs_result full, folded;
  char err[512] = "";
  if (bs_sim_run(&c, &o, &full, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  o.fold = BS_ON;
  if (bs_sim_run(&c, &o, &folded, err, sizeof err)) {
    fprintf(stderr, "%s on %d GPUs: %s\n", topo, gpus, err);
    fail();
  }
  assert_true(folded.sim_actors < full.sim_actors);
  if (!strstr(folded.sim_network, expect)) {
    fprintf(stderr, "%s %d GPUs: expected '%s' in '%s'\n", topo, gpus, expect, folded.sim_network);
    fail();
  }
  assert_int_equal(full.sim_actors, gpus);
  const double tol = 1e-3; /* the bound; the fold is exact by construction */
  assert_close(folded.time.step, full.time.step, tol);
  assert_close(folded.time.fwd, full.time.fwd, tol);
  assert_close(folded.time.bwd, full.time.bwd, tol);
  assert_close(folded.time.compute, full.time.compute, tol);
  assert_close(folded.time.comm_exposed + 1e-30, full.time.comm_exposed + 1e-30, tol);
  assert_int_equal(folded.comm.per_rank_max_sent, full.comm.per_rank_max_sent);
  assert_int_equal(folded.comm.total, full.comm.total);
  assert_int_equal(folded.comm.intra_node, full.comm.intra_node);
  assert_int_equal(folded.comm.inter_node, full.comm.inter_node);
  assert_int_equal(folded.mem.peak_bytes_max, full.mem.peak_bytes_max);
  for (int r = 0; r < gpus; r++) assert_close(folded.ranks[r].step, full.ranks[r].step, tol);
  bs_result_free(&full);
  bs_result_free(&folded);
}

/* A composed point folded and not: the same figures. */
static void fold_composed(bs_config *c, int nodes_per_leaf, const char *expect) {
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.nodes_per_leaf = nodes_per_leaf;
  o.fold = BS_OFF;
  bs_result full, folded;
  char err[512] = "";
  if (bs_sim_run(c, &o, &full, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  o.fold = BS_ON;
  if (bs_sim_run(c, &o, &folded, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  if (!strstr(folded.sim_network, expect)) {
    fprintf(stderr, "tp %d dp %d: expected '%s' in '%s'\n", c->par.tp, c->par.dp, expect, folded.sim_network);
    fail();
  }
  assert_true(folded.sim_actors < full.sim_actors);
  const double tol = 1e-3;
  assert_close(folded.time.step, full.time.step, tol);
  assert_close(folded.time.fwd, full.time.fwd, tol);
  assert_close(folded.time.bwd, full.time.bwd, tol);
  assert_close(folded.time.comm_exposed + 1e-30, full.time.comm_exposed + 1e-30, tol);
  assert_int_equal(folded.comm.per_rank_max_sent, full.comm.per_rank_max_sent);
  assert_int_equal(folded.comm.total, full.comm.total);
  assert_int_equal(folded.comm.intra_node, full.comm.intra_node);
  assert_int_equal(folded.comm.inter_node, full.comm.inter_node);
  assert_int_equal(folded.mem.peak_bytes_max, full.mem.peak_bytes_max);
  for (int r = 0; r < c->par.gpus; r++) assert_close(folded.ranks[r].step, full.ranks[r].step, tol);
  bs_result_free(&full);
  bs_result_free(&folded);
}

/* Composed parallelism: context-parallel rings per tensor-parallel index and replica fold onto the
 * nodes their programs repeat over; the gradient group of a tensor-parallel index is strided (its
 * ring collectives and whole trees fold like the plain ones). */
static void test_fold_composed(void **state) {
  (void)state;
  bs_config c;
  burst_config(&c, 128, 65536, 0); /* 16 nodes; a cp ring of 16 spans 4, and repeats over 4 replicas */
  c.par.double_ring = BS_AUTO;
  c.par.tp = 2;
  c.par.dp = 4;
  c.work.batch = 4;
  c.work.causal = 1;
  c.par.layout = BS_ZIGZAG;
  fold_composed(&c, 2, "ranks simulated");
  /* model scope, 2 layers, gradients over dp x cp of each tp index: ring and tree allreduces */
  c.work.scope = BS_SCOPE_MODEL;
  c.model.layers = 2;
  c.par.tp_variant = 3;
  for (int a = 0; a < 2; a++) {
    c.cluster.coll_algo = a ? BS_COLL_ALGO_TREE : BS_COLL_ALGO_RING;
    fold_composed(&c, 2, "ranks simulated");
  }
}

/* A small model whose embedding and head cost next to nothing, so that every stage's task is its layers. */
static void pp_model(bs_config *c, int gpus, int pp, int dp, int64_t layers, int64_t batch) {
  bs_config_default(c);
  c->model.hidden = 1024;
  c->model.heads = c->model.kv_heads = 8;
  c->model.head_dim = 128;
  c->model.ffn = 4096;
  c->model.vocab = 64;
  c->model.preset[0] = 0;
  c->model.layers = layers;
  c->work.seq_len = 8192;
  c->work.scope = BS_SCOPE_MODEL;
  c->work.batch = batch;
  c->par.gpus = gpus;
  c->par.pp = pp;
  c->par.dp = dp;
  c->par.micro_batch = 1;
}

static double pp_step(const bs_config *c) {
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_result r;
  char err[512] = "";
  if (bs_sim_run(c, &o, &r, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  double t = r.time.step;
  bs_result_free(&r);
  return t;
}

/*
 * The pipeline bubble comes out of the simulated 1F1B schedule: p = 4 stages of 2 layers, m = 8
 * microbatches. One stage's work per microbatch (T) and the step's fixed part (gradient
 * reduction, optimizer) come from one-stage runs of 2 layers with 1 and 8 microbatches; the
 * textbook 1F1B step is (m + p - 1) T plus the fixed part: a bubble of (p - 1) / m.
 */
static void test_pp_bubble(void **state) {
  (void)state;
  bs_config c;
  pp_model(&c, 8, 4, 2, 8, 16); /* 2 replicas of 4 stages: 8 microbatches each */
  double t_pp = pp_step(&c);
  pp_model(&c, 8, 1, 8, 2, 8); /* one stage: 2 layers, 1 microbatch per replica */
  double t1 = pp_step(&c);
  pp_model(&c, 8, 1, 8, 2, 64); /* 8 microbatches */
  double t8 = pp_step(&c);
  double T = (t8 - t1) / 7, fixed = t1 - T, m = 8, p = 4;
  double bubble = (t_pp - fixed) / (m * T) - 1;
  fprintf(stderr, "1F1B: step %.6f s, T %.6f s, fixed %.6f s: bubble %.4f, textbook (p - 1) / m = %.4f\n", t_pp, T,
          fixed, bubble, (p - 1) / m);
  assert_true(fabs(bubble - (p - 1) / m) < 0.01);
}

/*
 * The interleaved schedule on the toy case of test_pp_bubble (Narayanan et al. 2021, section
 * 2.2.2): each of the p = 4 ranks holds v = 2 chunks of one layer, so a chunk's work per
 * microbatch is T / v and the bubble shrinks by v: (p - 1) / (m v) = 3 / 16 of the m T of work,
 * against 1F1B's 3 / 8. The schedule also sends v times as many messages between stages, and on
 * its critical path every chunk's input arrives just as it is needed: at 8K tokens the 16 MiB
 * transfers add 0.012 to the bubble (0.200; 0.182 with 8-byte messages, measured), so the
 * case runs at 32K tokens, where a chunk's attention outgrows its message (0.192).
 */
static void test_pp_bubble_interleaved(void **state) {
  (void)state;
  bs_config c;
  const int64_t seq = 32768;
  pp_model(&c, 8, 4, 2, 8, 16);
  c.work.seq_len = seq;
  c.par.pp_schedule = BS_PP_INTERLEAVED;
  c.par.pp_chunks = 2;
  double t_il = pp_step(&c);
  pp_model(&c, 8, 1, 8, 2, 8);
  c.work.seq_len = seq;
  double t1 = pp_step(&c);
  pp_model(&c, 8, 1, 8, 2, 64);
  c.work.seq_len = seq;
  double t8 = pp_step(&c);
  double T = (t8 - t1) / 7, fixed = t1 - T, m = 8, p = 4, v = 2;
  double bubble = (t_il - fixed) / (m * T) - 1;
  fprintf(stderr, "interleaved: step %.6f s, T %.6f s, fixed %.6f s: bubble %.4f, paper (p - 1) / (m v) = %.4f\n", t_il,
          T, fixed, bubble, (p - 1) / (m * v));
  assert_true(fabs(bubble - (p - 1) / (m * v)) < 0.01);
  /* other shapes run to the end (no rank waits forever), m = pp (all forwards first) included,
   * and shorten the step against 1F1B */
  int shapes[][3] = {{2, 4, 4}, {4, 2, 4}, {8, 2, 8}, {4, 4, 12}}; /* pp, chunks, microbatches */
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    int pp = shapes[i][0], ch = shapes[i][1], mb = shapes[i][2];
    pp_model(&c, 8, pp, 8 / pp, pp * ch, (int64_t)mb * (8 / pp));
    double t_1f1b = pp_step(&c);
    c.par.pp_schedule = BS_PP_INTERLEAVED;
    c.par.pp_chunks = ch;
    double t = pp_step(&c);
    fprintf(stderr, "pp %d chunks %d microbatches %d: 1F1B %.6f s, interleaved %.6f s\n", pp, ch, mb, t_1f1b, t);
    assert_true(t < t_1f1b);
  }
}

/*
 * Bytes by group (comm_bytes.by_group): with ring collectives every byte a rank sends belongs to one
 * group, so the four add up to its bytes; the pipeline's share is its microbatches' activations
 * (tokens of the rank x hidden x 2 bytes) one way, as the first and last stages send.
 */
static void test_bytes_by_group(void **state) {
  (void)state;
  bs_config c;
  pp_model(&c, 16, 2, 2, 4, 8); /* tp 2 x cp 2 x dp 2 x pp 2, 4 layers, 4 microbatches a replica */
  c.par.tp = 2;
  c.par.zero = 1;
  c.cluster.coll_algo = BS_COLL_ALGO_RING;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_result r;
  char err[512] = "";
  if (bs_sim_run(&c, &o, &r, err, sizeof err)) fail_msg("%s", err);
  for (int k = 0; k < r.nranks; k++) {
    const bs_rank_result *x = &r.ranks[k];
    int64_t sum = x->by_group[BS_DIM_TP] + x->by_group[BS_DIM_CP] + x->by_group[BS_DIM_DP] + x->by_group[BS_DIM_PP];
    assert_int_equal(sum, x->bytes_sent);
    assert_true(x->by_group[BS_DIM_TP] > 0 && x->by_group[BS_DIM_CP] > 0 && x->by_group[BS_DIM_DP] > 0);
    int64_t act = 4 * (8192 / 2) * 1024 * 2; /* 4 microbatches of 4K tokens x 1024 hidden in bf16 */
    assert_int_equal(x->by_group[BS_DIM_PP], act);
  }
  assert_int_equal(r.comm.by_group[BS_DIM_PP], 4 * (8192 / 2) * 1024 * 2);
  bs_result_free(&r);
}

static void fold_case_layout(const char *topo, int gpus, int nodes_per_leaf, bs_method m, int dr, int causal,
                             bs_layout layout, const char *expect) {
  fold_case_full(topo, gpus, nodes_per_leaf, 0, m, dr, causal, layout, expect);
}

static void fold_case(const char *topo, int gpus, int nodes_per_leaf, bs_method m, int dr, const char *expect) {
  fold_case_layout(topo, gpus, nodes_per_leaf, m, dr, 0, BS_CONTIGUOUS, expect);
}

static void test_fold_matches_full(void **state) {
  (void)state;
  /* 8 nodes in leaves of 2: the node fold keeps 2 leaves (4 nodes), the double ring
   * also folds the 8 GPUs of a node onto 4. */
  fold_case("dgx-a100", 64, 2, BS_BURST, 1, "16 of 64 ranks simulated (4 of 8 nodes, leaves merged, 4 of 8 per node");
  fold_case("dgx-a100", 64, 2, BS_RING, 1, "16 of 64 ranks simulated (4 of 8 nodes, leaves merged, 4 of 8 per node");
  /* A single ring crosses rails (GPU 7 to GPU 0 of the next node): nodes only. */
  fold_case("dgx-a100", 64, 2, BS_BURST, 0, "32 of 64 ranks simulated (4 of 8 nodes, 8 of 8 per node");
  /* 16 nodes in leaves of 4 with full-bandwidth uplinks: the leaves merge and the nodes
   * fold as under one leaf (3 does not divide 16: 4 nodes). */
  fold_case("dgx-a100", 128, 4, BS_BURST, 1, "16 of 128 ranks simulated (4 of 16 nodes, leaves merged");
  fold_case("dgx-a100", 128, 4, BS_RING, 1, "leaves merged");
  /* 32 nodes in leaves of 8, uplinks at half their NICs' bandwidth: the quotient keeps one
   * leaf and wraps through its uplink. */
  fold_case_full("dgx-a100", 256, 8, 2.0, BS_BURST, 1, 0, BS_CONTIGUOUS,
                 "32 of 256 ranks simulated (8 of 32 nodes with leaf wrap");
  /* An oversubscribed fabric (uplinks at 1/3 of the downlinks), single ring across rails. */
  fold_case_full("dgx-a100", 128, 4, 3.0, BS_BURST, 0, 0, BS_CONTIGUOUS, "of 128 ranks simulated");
  fold_case_full("dgx-a100", 128, 4, 3.0, BS_RING, 1, 0, BS_CONTIGUOUS, "with leaf wrap");
  /* Causal with the zigzag balance: every rank's step costs the same. */
  fold_case_layout("dgx-a100", 128, 4, BS_BURST, 1, 1, BS_ZIGZAG, "leaves merged");
  fold_case_layout("dgx-a100", 64, 2, BS_RING, 1, 1, BS_ZIGZAG, "of 64 ranks simulated");
  /* One leaf. */
  fold_case("dgx-h100", 64, 0, BS_BURST, 1, "of 64 ranks simulated");
  /* h100-sxm sets the p2p keys (a base per send across nodes, which runs on its own actor, and
   * NVLink's p2p efficiency): the fold stays exact with them, across rails and along them. */
  fold_case("dgx-h100", 64, 2, BS_RING, 1, "of 64 ranks simulated");
  fold_case("dgx-h100", 64, 2, BS_BURST, 0, "of 64 ranks simulated");
  fold_case("a100-pcie-node", 64, 0, BS_BURST, 1, "32 of 64 ranks simulated (4 of 8 nodes, 8 of 8");
}

/* --trace: a Chrome trace-event file that parses, with compute spans of every kernel kind used. */
static void test_trace_json(void **state) {
  (void)state;
  bs_config c;
  burst_config(&c, 16, 32768, 1);
  char path[256];
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(path, sizeof path, "%s/bs-trace-%d.json", dir, (int)getpid());
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.trace_path = path;
  o.fold = BS_OFF;
  bs_result r;
  char err[512] = "";
  assert_int_equal(bs_sim_run(&c, &o, &r, err, sizeof err), 0);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)n + 1);
  assert_non_null(text);
  assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
  text[n] = 0;
  fclose(f);
  unlink(path);
  cJSON *root = cJSON_Parse(text);
  free(text);
  assert_non_null(root);
  cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  assert_true(cJSON_IsArray(ev) && cJSON_GetArraySize(ev) > 0);
  int fwd = 0, bwd = 0, comm = 0, tracks = 0;
  double last = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, ev) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
    assert_true(cJSON_IsString(ph));
    if (strcmp(ph->valuestring, "X")) { /* metadata: the tracks' names */
      tracks += !strcmp(ph->valuestring, "M") && !strcmp(name->valuestring, "thread_name");
      continue;
    }
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts"), *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
    assert_true(cJSON_IsString(name) && cJSON_IsNumber(ts) && cJSON_IsNumber(dur) && dur->valuedouble >= 0);
    fwd += !strncmp(name->valuestring, "attention forward, step ", 24);
    bwd += !strncmp(name->valuestring, "attention backward, step ", 25);
    comm += !strncmp(name->valuestring, "send to", 7);
    if (ts->valuedouble + dur->valuedouble > last) last = ts->valuedouble + dur->valuedouble;
  }
  assert_int_equal(tracks, 16);   /* a named track per rank */
  assert_int_equal(fwd, 16 * 16); /* G blocks per rank */
  assert_int_equal(bwd, 16 * 16);
  assert_true(comm > 0);
  assert_close(last * 1e-6, r.time.step, 1e-6);
  cJSON_Delete(root);
  bs_result_free(&r);
}

/* A causal contiguous split is not symmetric: the fold must refuse. */
static void test_fold_refuses_asymmetric(void **state) {
  (void)state;
  bs_config c;
  burst_config(&c, 64, 65536, 1);
  c.work.causal = 1;
  c.par.layout = BS_CONTIGUOUS;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.fold = BS_ON;
  bs_result r;
  char err[512] = "";
  assert_int_equal(bs_sim_run(&c, &o, &r, err, sizeof err), -2);
  assert_non_null(strstr(err, "fold"));
  bs_result_free(&r);
  o.fold = BS_AUTO;
  assert_int_equal(bs_sim_run(&c, &o, &r, err, sizeof err), 0);
  assert_int_equal(r.sim_actors, 64);
  bs_result_free(&r);
}

int main(int argc, char **argv) {
  const struct CMUnitTest all[] = {
    cmocka_unit_test(test_burst_bytes_anchors),
    cmocka_unit_test(test_double_ring_parallel_nics),
    cmocka_unit_test(test_fold_matches_full),
    cmocka_unit_test(test_fold_composed),
    cmocka_unit_test(test_pp_bubble),
    cmocka_unit_test(test_bytes_by_group),
    cmocka_unit_test(test_pp_bubble_interleaved),
    cmocka_unit_test(test_fold_refuses_asymmetric),
    cmocka_unit_test(test_trace_json),
  };
  return BS_RUN_NAMED(all, argc, argv, NULL, NULL);
}
