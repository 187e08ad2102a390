/*
 * test_fidelity.c — the mechanisms the shipped GPU profiles are built from,
 * each on a toy case computed by hand: separate forward and backward attention
 * tables (a block's time is launch_s + flops / the rate of its own pass at
 * x = sqrt(Nq Nk), interpolated in log2 x and clamped below the table), the
 * per-call cost of a collective (collectives.base_s, paid once whatever the
 * algorithm), and a link's message-size factors (a small message pays the
 * small-message latency and bandwidth, a large one the link's own); an
 * allreduce over nodes that share NICs; and the point-to-point costs of the
 * plans' SEND/RECV (p2p.*.base_s per send, p2p.*.efficiency of the route's
 * bandwidth), which a collective never pays; and the two CPU sockets of the
 * PCIe node (a100-pcie-node), where a transfer between sockets crosses the
 * inter-socket link and one inside a switch does not; and Open MPI libnbc's
 * binomial allreduce, which the host profile's collectives run.
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

#include "profile/profile.h"
#include "toy.h"

/* Writes text to a fresh temporary file with the given suffix; its path into out. */
static void temp_file(char *out, size_t outlen, const char *stem, const char *suffix, const char *text) {
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(out, outlen, "%s/bs-%s-%d-XXXXXX%s", dir, stem, (int)getpid(), suffix);
  int fd = mkstemps(out, (int)strlen(suffix));
  assert_true(fd >= 0);
  close(fd);
  write_text(out, text);
}

/* ---------------- per-pass attention tables ---------------- */

/* Forward and backward tables that differ, and launch costs that differ. */
static const char *pass_profile =
  "{\"format\": 1, \"name\": \"passes\",\n"
  " \"device\": {\"memory_bytes\": {\"value\": 8e10, \"source\": \"test\"},\n"
  "   \"peak_flops\": {\"value\": 1e15, \"source\": \"test\"}, \"mem_bw_Bps\": {\"value\": 3e12, \"source\": "
  "\"test\"}},\n"
  " \"kernels\": {\n"
  "  \"attn_fwd\": {\"model\": \"table\", \"launch_s\": {\"value\": 3e-6, \"source\": \"test\"}, \"tables\": [\n"
  "    {\"head_dim\": 128, \"mask\": \"full\", \"x\": [1024, 4096], \"tflops\": [100, 200], \"source\": \"test\"},\n"
  "    {\"head_dim\": 128, \"mask\": \"causal\", \"x\": [1024, 4096], \"tflops\": [50, 150], \"source\": \"test\"}]},\n"
  "  \"attn_bwd\": {\"model\": \"table\", \"launch_s\": {\"value\": 4e-6, \"source\": \"test\"}, \"tables\": [\n"
  "    {\"head_dim\": 128, \"mask\": \"full\", \"x\": [1024, 4096], \"tflops\": [80, 160], \"source\": \"test\"}]}},\n"
  " \"links\": {}, \"network\": {\"model\": \"CM02\", \"crosstraffic\": 0, \"tcp_gamma\": 0}}\n";

static bs_compute attn_block(bs_kernel k, int64_t nq, int64_t nk, double share) {
  bs_compute c;
  memset(&c, 0, sizeof c);
  c.kernel = k;
  c.a.B = 1;
  c.a.Zq = c.a.Zkv = 4;
  c.a.Nq = nq;
  c.a.Nk = nk;
  c.a.d = 128;
  double full = 4.0 * 4 * (double)nq * (double)nk * 128;
  c.flops = (k == BS_K_ATTN_BWD ? 2.5 : 1.0) * full * share;
  return c;
}

static double block_time(const bs_profile *p, const bs_compute *c) {
  char err[256] = "";
  double t = bs_profile_kernel_time(p, c, BS_BF16, err, sizeof err);
  if (!(t >= 0)) fail_msg("kernel time failed: %s", err);
  return t;
}

/* A block's time is launch + flops / rate of its own pass: at x = 2048, half-way in log2
 * between 1024 and 4096, the forward runs at 150 TFLOP/s, the backward at 120, the causal
 * forward at 100; a 4096 x 1024 block has the same x; below the table the first rate holds. */
static void test_attn_pass_tables(void **st) {
  (void)st;
  char path[256];
  temp_file(path, sizeof path, "passes", ".json", pass_profile);
  static bs_profile p;
  char err[512] = "";
  int rc = bs_profile_load(path, &p, err, sizeof err);
  unlink(path);
  if (rc) fail_msg("%s", err);

  bs_compute f = attn_block(BS_K_ATTN_FWD, 2048, 2048, 1);
  assert_close(block_time(&p, &f), 3e-6 + f.flops / 150e12, 1e-12);
  bs_compute b = attn_block(BS_K_ATTN_BWD, 2048, 2048, 1);
  assert_close(block_time(&p, &b), 4e-6 + b.flops / 120e12, 1e-12);
  bs_compute fc = attn_block(BS_K_ATTN_FWD, 2048, 2048, 0.5);
  assert_close(block_time(&p, &fc), 3e-6 + fc.flops / 100e12, 1e-12);
  bs_compute rect = attn_block(BS_K_ATTN_FWD, 4096, 1024, 1);
  assert_close(block_time(&p, &rect), 3e-6 + rect.flops / 150e12, 1e-12);
  /* a zigzag half-block of a 4K ring step and a tiny one: the rate clamps at 100, launch stays */
  bs_compute small = attn_block(BS_K_ATTN_FWD, 128, 128, 1);
  assert_close(block_time(&p, &small), 3e-6 + small.flops / 100e12, 1e-12);
  /* the backward has no causal table: the nearest (full) one serves a partly masked block */
  bs_compute bc = attn_block(BS_K_ATTN_BWD, 4096, 4096, 0.5);
  assert_close(block_time(&p, &bc), 4e-6 + bc.flops / 160e12, 1e-12);
}

/* ---------------- per-call collective cost ---------------- */

/* One allreduce of `bytes` over the n ranks of configuration c; returns the step time. */
static double allreduce_on(const bs_config *c, int n, int64_t bytes) {
  static toy_plan pl;
  memset(&pl, 0, sizeof pl);
  pl.ranks = n;
  for (int r = 0; r < n; r++) {
    bs_op *op = toy_push(&pl, r, BS_OP_COLL);
    op->handle = 2;
    op->u.coll.kind = BS_COLL_ALLREDUCE;
    op->u.coll.group = (bs_group){0, 1, n};
    op->u.coll.bytes = bytes;
    int h = 2;
    toy_wait(&pl, r, 1, &h);
  }
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_sim_source s = toy_source(&pl);
  bs_result r;
  char err[512] = "";
  int rc = bs_sim_run_source(c, &o, &s, &r, NULL, NULL, err, sizeof err);
  if (rc) fail_msg("%s", err);
  double step = r.time.step;
  bs_result_free(&r);
  return step;
}

/* One allreduce of `bytes` over n toy ranks (profile and platform of t); the step time. */
static double one_allreduce(toy_files *t, int n, int64_t bytes, bs_coll_algo algo) {
  bs_config c;
  toy_config(&c, t, n);
  c.cluster.coll_algo = algo;
  return allreduce_on(&c, n, bytes);
}

/*
 * Shared NICs (4 per 8 GPUs, nccl-tests #119's servers) and an allreduce across 3 DGX A100 nodes
 * chosen by auto: the fold pre-pass and the run judge the algorithm from the same routes (this
 * stopped on an internal check when the route model counted a GPU's share of a NIC and SimGrid the
 * whole NIC). The ring of 8 rail channels, 2 per NIC, runs each hop as one flow at half a NIC:
 * base + route latency + 2(n-1) parts / (24 GB/s / 2).
 */
static void test_shared_nic_allreduce(void **st) {
  (void)st;
  static bs_profile prof;
  char err[512] = "";
  if (bs_profile_load("a100-sxm4-80gb", &prof, err, sizeof err)) fail_msg("%s", err);
  bs_config c;
  bs_config_default(&c);
  c.par.gpus = 24;
  snprintf(c.cluster.topology, sizeof c.cluster.topology, "dgx-a100");
  snprintf(c.cluster.profile, sizeof c.cluster.profile, "a100-sxm4-80gb");
  c.cluster.nics_per_node = 4;
  c.cluster.coll_algo = BS_COLL_ALGO_AUTO;
  const int64_t bytes = 128 << 20;
  int64_t chunk = bytes / 24, part = chunk / 8 + (chunk % 8 != 0);
  double nic_bw = prof.link[BS_LINK_NIC].bw_Bps, nic_lat = prof.link[BS_LINK_NIC].lat_s;
  double want = prof.coll_base_s + 2 * nic_lat + 2.0 * 23 * (double)part / (nic_bw / 2);
  assert_close(allreduce_on(&c, 24, bytes), want, 1e-4);
}

/* The toy profile with a collectives section added. */
static void add_coll_base(const toy_files *t, char *out, size_t outlen, double base) {
  FILE *f = fopen(t->prof, "r");
  assert_non_null(f);
  char text[4096];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  char *end = strrchr(text, '}');
  assert_non_null(end);
  *end = 0;
  char with[4400];
  snprintf(with, sizeof with, "%s,\"collectives\":{\"base_s\":{\"value\":%.17g,\"source\":\"test\"}}}", text, base);
  temp_file(out, outlen, "collbase", ".json", with);
}

/* The toy profile with `section` ("\"key\": {...}") added at its top level. */
static void add_section(const char *prof, char *out, size_t outlen, const char *section) {
  FILE *f = fopen(prof, "r");
  assert_non_null(f);
  char text[4096];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  char *end = strrchr(text, '}');
  assert_non_null(end);
  *end = 0;
  char with[4800];
  snprintf(with, sizeof with, "%s,%s}", text, section);
  temp_file(out, outlen, "p2p", ".json", with);
}

/* Every allreduce, by ring or by tree and at any size, takes exactly base_s longer. */
static void test_coll_base_cost(void **st) {
  (void)st;
  const double base = 7e-6;
  const int ns[] = {2, 4, 8};
  const int64_t sizes[] = {8, 4096, 4 << 20};
  const bs_coll_algo algos[] = {BS_COLL_ALGO_RING, BS_COLL_ALGO_TREE};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    toy_files t;
    toy_setup(&t, ns[i], 1);
    char with[256];
    add_coll_base(&t, with, sizeof with, base);
    for (size_t a = 0; a < 2; a++)
      for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        double plain = one_allreduce(&t, ns[i], sizes[s], algos[a]);
        toy_files tb = t;
        snprintf(tb.prof, sizeof tb.prof, "%s", with);
        double paid = one_allreduce(&tb, ns[i], sizes[s], algos[a]);
        assert_true(plain > 0);
        assert_close(paid - plain, base, 1e-6);
      }
    unlink(with);
    toy_teardown(&t);
  }
}

/* The profile writer keeps the per-call cost (calibration writes profiles through it). */
static void test_coll_base_roundtrip(void **st) {
  (void)st;
  static bs_profile p, q;
  char err[512] = "", path[256];
  if (bs_profile_load("h100-sxm", &p, err, sizeof err)) fail_msg("%s", err);
  assert_true(p.coll_base_s > 0);
  temp_file(path, sizeof path, "roundtrip", ".json", "");
  if (bs_profile_save(&p, path, "test", err, sizeof err)) fail_msg("%s", err);
  int rc = bs_profile_load(path, &q, err, sizeof err);
  unlink(path);
  if (rc) fail_msg("%s", err);
  assert_true(q.coll_base_s == p.coll_base_s);
  p.coll_base_s = 0; /* absent when 0: a calibrated host profile stays without it */
  temp_file(path, sizeof path, "roundtrip", ".json", "");
  if (bs_profile_save(&p, path, "test", err, sizeof err)) fail_msg("%s", err);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  unlink(path);
  assert_null(strstr(text, "collectives"));
}

/* ---------------- message-size factors ---------------- */

#define NV_BW 100e9
#define NV_LAT 2e-6

/* Two GPUs joined by nvlink-0 and nvlink-1 (the profile's nvlink class), a route of both. */
static const char *two_gpus =
  "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
  "<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\">\n"
  "<host id=\"gpu0\" speed=\"1Gf\"/><host id=\"gpu1\" speed=\"1Gf\"/>\n"
  "<link id=\"nvlink-0\" bandwidth=\"1GBps\" latency=\"1us\" sharing_policy=\"SPLITDUPLEX\"/>\n"
  "<link id=\"nvlink-1\" bandwidth=\"1GBps\" latency=\"1us\" sharing_policy=\"SPLITDUPLEX\"/>\n"
  "<route src=\"gpu0\" dst=\"gpu1\" symmetrical=\"NO\"><link_ctn id=\"nvlink-0\" direction=\"UP\"/>"
  "<link_ctn id=\"nvlink-1\" direction=\"DOWN\"/></route>\n"
  "<route src=\"gpu1\" dst=\"gpu0\" symmetrical=\"NO\"><link_ctn id=\"nvlink-1\" direction=\"UP\"/>"
  "<link_ctn id=\"nvlink-0\" direction=\"DOWN\"/></route>\n"
  "</zone></platform>\n";

/* Messages up to 16 KiB: a quarter of the latency and half the bandwidth (an LL-like protocol). */
static const char *factor_profile =
  "{\"format\": 1, \"name\": \"factors\",\n"
  " \"device\": {\"memory_bytes\": {\"value\": 1e9, \"source\": \"test\"},\n"
  "   \"peak_flops\": {\"value\": 1e12, \"source\": \"test\"}, \"mem_bw_Bps\": {\"value\": 1e12, \"source\": "
  "\"test\"}},\n"
  " \"kernels\": {\"copy\": {\"model\": \"roofline\", \"launch_s\": {\"value\": 0, \"source\": \"test\"},\n"
  "   \"efficiency\": {\"value\": 1, \"source\": \"test\"}}},\n"
  " \"links\": {\"nvlink\": {\"bandwidth_Bps\": {\"value\": 100e9, \"source\": \"test\"},\n"
  "   \"latency_s\": {\"value\": 2e-6, \"source\": \"test\"},\n"
  "   \"factors\": [{\"min_bytes\": 0, \"bandwidth\": 0.5, \"latency\": 0.25},\n"
  "                 {\"min_bytes\": 16385, \"bandwidth\": 1, \"latency\": 1}], \"source\": \"test\"}},\n"
  " \"network\": {\"model\": \"CM02\", \"crosstraffic\": 0, \"tcp_gamma\": 0}}\n";

/* One message of `bytes` from rank 0 to rank 1; the step time. */
static double one_message(const toy_files *t, int64_t bytes) {
  static toy_plan pl;
  memset(&pl, 0, sizeof pl);
  pl.ranks = 2;
  toy_p2p(&pl, 0, BS_OP_SEND, 0, 1, 1, bytes);
  toy_p2p(&pl, 1, BS_OP_RECV, 0, 0, 1, bytes);
  for (int r = 0; r < 2; r++) {
    int h = 0;
    toy_wait(&pl, r, 1, &h);
  }
  bs_result r;
  char err[512] = "";
  if (run_toy(&pl, t, &r, err, sizeof err)) fail_msg("%s", err);
  double step = r.time.step;
  bs_result_free(&r);
  return step;
}

static void test_small_message_factors(void **st) {
  (void)st;
  toy_files t;
  temp_file(t.xml, sizeof t.xml, "twogpu", ".xml", two_gpus);
  temp_file(t.prof, sizeof t.prof, "factors", ".json", factor_profile);
  /* the route is two links of the profile's latency; the bottleneck bandwidth is one link's */
  assert_close(one_message(&t, 1024), 0.25 * 2 * NV_LAT + 1024 / (0.5 * NV_BW), 1e-6);
  assert_close(one_message(&t, 16384), 0.25 * 2 * NV_LAT + 16384 / (0.5 * NV_BW), 1e-6);
  assert_close(one_message(&t, 16385), 2 * NV_LAT + 16385 / NV_BW, 1e-6);
  assert_close(one_message(&t, 64 << 20), 2 * NV_LAT + (double)(64 << 20) / NV_BW, 1e-6);
  toy_teardown(&t);
}

/* ---------------- point-to-point costs ---------------- */

#define P2P_BASE 20e-6
#define P2P_EFF 0.5

/* p2p keys on both routes (the two-GPU platform's hosts carry no node, so either may apply). */
static const char *p2p_both =
  "\"p2p\": {\"intra_node\": {\"base_s\": {\"value\": 2e-5, \"source\": \"test\"}, "
  "\"efficiency\": {\"value\": 0.5, \"source\": \"test\"}}, "
  "\"inter_node\": {\"base_s\": {\"value\": 2e-5, \"source\": \"test\"}, "
  "\"efficiency\": {\"value\": 0.5, \"source\": \"test\"}}}";

/* A send of B bytes takes base + route latency + B / (bw x efficiency), and still counts B bytes. */
static void test_p2p_send_cost(void **st) {
  (void)st;
  toy_files t;
  temp_file(t.xml, sizeof t.xml, "twogpu", ".xml", two_gpus);
  temp_file(t.prof, sizeof t.prof, "factors", ".json", factor_profile);
  char with[256];
  add_section(t.prof, with, sizeof with, p2p_both);
  toy_files tp = t;
  snprintf(tp.prof, sizeof tp.prof, "%s", with);
  /* sizes whose wire size (B / efficiency) is past the factors' small-message piece */
  const int64_t sizes[] = {16385, 1 << 20, 64 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    double b = (double)sizes[i];
    assert_close(one_message(&t, sizes[i]), 2 * NV_LAT + b / NV_BW, 1e-6);
    assert_close(one_message(&tp, sizes[i]), P2P_BASE + 2 * NV_LAT + b / (NV_BW * P2P_EFF), 1e-6);
  }
  /* the byte counters keep the message's size */
  static toy_plan pl;
  memset(&pl, 0, sizeof pl);
  pl.ranks = 2;
  toy_p2p(&pl, 0, BS_OP_SEND, 0, 1, 1, 1 << 20);
  toy_p2p(&pl, 1, BS_OP_RECV, 0, 0, 1, 1 << 20);
  for (int r = 0; r < 2; r++) {
    int h = 0;
    toy_wait(&pl, r, 1, &h);
  }
  bs_result r;
  char err[512] = "";
  if (run_toy(&pl, &tp, &r, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(r.comm.total, 1 << 20);
  bs_result_free(&r);
  unlink(with);
  toy_teardown(&t);
}

/* Sends that pay the base keep their order within a pair (K then V, as a RECV checks them): four
 * sends of different tags and sizes, posted at once, all wake after the same base. */
static void test_p2p_order(void **st) {
  (void)st;
  toy_files t;
  toy_setup(&t, 2, 1);
  char with[256];
  add_section(t.prof, with, sizeof with, p2p_both);
  unlink(t.prof);
  snprintf(t.prof, sizeof t.prof, "%s", with);
  static toy_plan pl;
  memset(&pl, 0, sizeof pl);
  pl.ranks = 2;
  int hs[4] = {0, 1, 2, 3};
  for (int k = 0; k < 4; k++) {
    toy_p2p(&pl, 0, BS_OP_SEND, k, 1, 10 + k, 1000 * (k + 1));
    toy_p2p(&pl, 1, BS_OP_RECV, k, 0, 10 + k, 1000 * (k + 1));
  }
  for (int r = 0; r < 2; r++) toy_wait(&pl, r, 4, hs);
  bs_result r;
  char err[512] = "";
  if (run_toy(&pl, &t, &r, err, sizeof err)) fail_msg("%s", err);
  assert_true(r.time.step > P2P_BASE);
  bs_result_free(&r);
  toy_teardown(&t);
}

/* A send that pays the base still counts the wait for a late receiver as waiting for a peer: rank 1
 * copies first (2 x 4 MB / MEM_BW = 4 ms), then receives; rank 0 waits that long for it. */
static void test_p2p_peer_wait(void **st) {
  (void)st;
  toy_files t;
  toy_setup(&t, 2, 1);
  char with[256];
  add_section(t.prof, with, sizeof with, p2p_both);
  unlink(t.prof);
  snprintf(t.prof, sizeof t.prof, "%s", with);
  static toy_plan pl;
  memset(&pl, 0, sizeof pl);
  pl.ranks = 2;
  int h = 0;
  toy_p2p(&pl, 0, BS_OP_SEND, 0, 1, 1, 4096);
  toy_wait(&pl, 0, 1, &h);
  toy_copy(&pl, 1, 4000000);
  toy_p2p(&pl, 1, BS_OP_RECV, 0, 0, 1, 4096);
  toy_wait(&pl, 1, 1, &h);
  bs_result r;
  char err[512] = "";
  if (run_toy(&pl, &t, &r, err, sizeof err)) fail_msg("%s", err);
  assert_close(r.ranks[0].wait_for_peers, 2 * 4000000 / MEM_BW, 1e-6);
  bs_result_free(&r);
  toy_teardown(&t);
}

/* A collective never pays the p2p costs: every allreduce takes the same time with them. */
static void test_p2p_leaves_collectives(void **st) {
  (void)st;
  toy_files t;
  toy_setup(&t, 4, 2);
  char with[256];
  add_section(t.prof, with, sizeof with, p2p_both);
  toy_files tp = t;
  snprintf(tp.prof, sizeof tp.prof, "%s", with);
  const bs_coll_algo algos[] = {BS_COLL_ALGO_RING, BS_COLL_ALGO_TREE};
  for (size_t a = 0; a < 2; a++) {
    double plain = one_allreduce(&t, 4, 4 << 20, algos[a]), with_p2p = one_allreduce(&tp, 4, 4 << 20, algos[a]);
    assert_true(plain > 0);
    assert_true(with_p2p == plain);
  }
  unlink(with);
  toy_teardown(&t);
}

/* One message from rank 0 to rank 1 on a toy of 2 hosts, per_node to a node, with `section`. */
static double toy_message(int per_node, const char *section, int64_t bytes) {
  toy_files t;
  toy_setup(&t, 2, per_node);
  char with[256];
  if (section) {
    add_section(t.prof, with, sizeof with, section);
    unlink(t.prof);
    snprintf(t.prof, sizeof t.prof, "%s", with);
  }
  double s = one_message(&t, bytes);
  toy_teardown(&t);
  return s;
}

/* Each route pays its own keys: intra_node inside a node, inter_node across nodes. */
static void test_p2p_routes(void **st) {
  (void)st;
  const char *intra = "\"p2p\": {\"intra_node\": {\"base_s\": {\"value\": 2e-5, \"source\": \"t\"}}}";
  const char *inter = "\"p2p\": {\"inter_node\": {\"base_s\": {\"value\": 2e-5, \"source\": \"t\"}}}";
  for (int per_node = 1; per_node <= 2; per_node++) {
    double plain = toy_message(per_node, NULL, 4096);
    double a = toy_message(per_node, intra, 4096), e = toy_message(per_node, inter, 4096);
    assert_close(per_node == 2 ? a - plain : e - plain, P2P_BASE, 1e-6); /* its own route's key */
    assert_true((per_node == 2 ? e : a) == plain);                       /* never the other's */
  }
}

/* The profile writer keeps the p2p keys, and writes none where there are none. */
static void test_p2p_roundtrip(void **st) {
  (void)st;
  static bs_profile p, q;
  char err[512] = "", path[256];
  if (bs_profile_load("h100-sxm-96gb", &p, err, sizeof err)) fail_msg("%s", err);
  assert_true(p.p2p_base_s[1] > 0 && p.p2p_efficiency[0] < 1 && p.p2p_efficiency[1] < 1);
  temp_file(path, sizeof path, "roundtrip", ".json", "");
  if (bs_profile_save(&p, path, "test", err, sizeof err)) fail_msg("%s", err);
  int rc = bs_profile_load(path, &q, err, sizeof err);
  unlink(path);
  if (rc) fail_msg("%s", err);
  for (int w = 0; w < 2; w++) {
    assert_true(q.p2p_base_s[w] == p.p2p_base_s[w]);
    assert_true(q.p2p_efficiency[w] == p.p2p_efficiency[w]);
  }
  if (bs_profile_load("host", &p, err, sizeof err)) fail_msg("%s", err);
  assert_true(p.p2p_base_s[0] == 0 && p.p2p_base_s[1] == 0 && p.p2p_efficiency[0] == 1 && p.p2p_efficiency[1] == 1);
  temp_file(path, sizeof path, "roundtrip", ".json", "");
  if (bs_profile_save(&p, path, "test", err, sizeof err)) fail_msg("%s", err);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  unlink(path);
  assert_null(strstr(text, "p2p"));
}

/* ---------------- Open MPI libnbc's allreduce (the host profile's) ---------------- */

static const char *libnbc_section =
  "\"collectives\": {\"allreduce\": {\"value\": \"open-mpi-libnbc\", \"source\": \"test\"}}";

/*
 * With collectives.allreduce = open-mpi-libnbc, an allreduce below 4 ranks or 64 KiB is libnbc's
 * binomial one: reduce rounds to member 0, then a broadcast from it, each the whole buffer B. On
 * the toy platform (route latency L = 2 link latencies, x = B / link bandwidth): 2 ranks take
 * 2 (L + x), where the ring takes 2 (L + x / 2); 4 ranks take (L + x) for 1->0 beside 3->2, (L + x)
 * for 2->0, then 0 sends to 1 and 2 at once over its one link (L + 2x) and 2 to 3 (L + x): 4L + 5x.
 * At 64 KiB on 4 ranks libnbc leaves the binomial algorithm: the ring's 6 (L + x / 4). Bytes are
 * counted as the ring sends them, as the runtime counts them. Rooted at one rank, the plan does not
 * fold (the same plan with NCCL's allreduce does). A bad library name is refused.
 */
static void test_libnbc_allreduce(void **st) {
  (void)st;
  toy_files t;
  toy_setup(&t, 4, 4);
  char with[256];
  add_section(t.prof, with, sizeof with, libnbc_section);
  toy_files tl = t;
  snprintf(tl.prof, sizeof tl.prof, "%s", with);
  const double L = 2 * LINK_LAT;
  const int64_t small = 1024, big = 65536;
  double xs = (double)small / LINK_BW, xb = (double)big / LINK_BW;
  assert_close(one_allreduce(&tl, 2, small, BS_COLL_ALGO_RING), 2 * (L + xs), 1e-6);
  assert_close(one_allreduce(&t, 2, small, BS_COLL_ALGO_RING), 2 * (L + xs / 2), 1e-6);
  assert_close(one_allreduce(&tl, 4, small, BS_COLL_ALGO_RING), 4 * L + 5 * xs, 1e-6);
  assert_close(one_allreduce(&tl, 4, small, BS_COLL_ALGO_TREE), 4 * L + 5 * xs, 1e-6);
  assert_close(one_allreduce(&tl, 4, big, BS_COLL_ALGO_RING), 6 * (L + xb / 4), 1e-6);
  /* the byte counters keep the ring convention */
  static toy_plan pl;
  memset(&pl, 0, sizeof pl);
  pl.ranks = 4;
  for (int r = 0; r < 4; r++) {
    bs_op *op = toy_push(&pl, r, BS_OP_COLL);
    op->handle = 0;
    op->u.coll.kind = BS_COLL_ALLREDUCE;
    op->u.coll.group = (bs_group){0, 1, 4};
    op->u.coll.bytes = small;
    int h = 0;
    toy_wait(&pl, r, 1, &h);
  }
  bs_result r;
  char err[512] = "";
  if (run_toy(&pl, &tl, &r, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(r.comm.total, 4 * 2 * 3 * (small / 4));
  bs_result_free(&r);
  /* rooted at one rank, it does not fold: 32 DGX A100 ranks (4 nodes), an allreduce per local
   * index across the nodes; with NCCL's allreduce the same plan folds */
  for (int lib = 0; lib < 2; lib++) {
    bs_config c;
    toy_config(&c, lib ? &tl : &t, 32);
    snprintf(c.cluster.topology, sizeof c.cluster.topology, "dgx-a100");
    memset(&pl, 0, sizeof pl);
    pl.ranks = 32;
    for (int k = 0; k < 32; k++) {
      bs_op *op = toy_push(&pl, k, BS_OP_COLL);
      op->handle = 0;
      op->u.coll.kind = BS_COLL_ALLREDUCE;
      op->u.coll.group = (bs_group){k % 8, 8, 4};
      op->u.coll.bytes = small;
      int h = 0;
      toy_wait(&pl, k, 1, &h);
    }
    bs_sim_opts o;
    bs_sim_opts_default(&o);
    bs_sim_source src = toy_source(&pl);
    if (bs_sim_run_source(&c, &o, &src, &r, NULL, NULL, err, sizeof err)) fail_msg("%s", err);
    fprintf(stderr, "%s: %d actors; %s\n", lib ? "open-mpi-libnbc" : "nccl", r.sim_actors, r.sim_network);
    if (lib) {
      assert_int_equal(r.sim_actors, 32);
      assert_non_null(strstr(r.sim_network, "open-mpi-libnbc"));
    } else {
      assert_true(r.sim_actors < 32);
    }
    bs_result_free(&r);
  }
  /* the key goes back out when the profile is written */
  static bs_profile p, q;
  char path[256];
  if (bs_profile_load(tl.prof, &p, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(p.allreduce_lib, BS_ALLREDUCE_OMPI_LIBNBC);
  temp_file(path, sizeof path, "libnbc", ".json", "");
  if (bs_profile_save(&p, path, "test", err, sizeof err)) fail_msg("%s", err);
  int rc = bs_profile_load(path, &q, err, sizeof err);
  unlink(path);
  if (rc) fail_msg("%s", err);
  assert_int_equal(q.allreduce_lib, BS_ALLREDUCE_OMPI_LIBNBC);
  unlink(with);
  /* an unknown library */
  add_section(t.prof, with, sizeof with, "\"collectives\": {\"allreduce\": {\"value\": \"mpich\", \"source\": \"x\"}}");
  assert_int_not_equal(bs_profile_load(with, &p, err, sizeof err), 0);
  assert_non_null(strstr(err, "collectives.allreduce: unknown 'mpich' (nccl, open-mpi-libnbc)"));
  unlink(with);
  add_section(t.prof, with, sizeof with, "\"collectives\": {\"allreduce\": \"open-mpi-libnbc\"}");
  assert_int_not_equal(bs_profile_load(with, &p, err, sizeof err), 0);
  assert_non_null(strstr(err, "collectives.allreduce: must be {\"value\""));
  unlink(with);
  toy_teardown(&t);
}

/* ---------------- the two sockets of a PCIe node ---------------- */

#define PC_BW 40e9
#define PC_LAT 1e-6
#define HB_BW 30e9
#define HB_LAT 0.5e-6
#define SO_BW 10e9
#define SO_LAT 2e-6

/* Distinct figures for the PCIe node's classes; no factors (identity at every size). */
static const char *socket_profile =
  "{\"format\": 1, \"name\": \"sockets\",\n"
  " \"device\": {\"memory_bytes\": {\"value\": 1e9, \"source\": \"test\"},\n"
  "   \"peak_flops\": {\"value\": 1e12, \"source\": \"test\"}, \"mem_bw_Bps\": {\"value\": 1e12, \"source\": "
  "\"test\"}},\n"
  " \"kernels\": {},\n"
  " \"links\": {\"pcie\": {\"bandwidth_Bps\": {\"value\": 40e9, \"source\": \"test\"},\n"
  "   \"latency_s\": {\"value\": 1e-6, \"source\": \"test\"}},\n"
  "  \"hostbridge\": {\"bandwidth_Bps\": {\"value\": 30e9, \"source\": \"test\"},\n"
  "   \"latency_s\": {\"value\": 0.5e-6, \"source\": \"test\"}},\n"
  "  \"socket\": {\"bandwidth_Bps\": {\"value\": 10e9, \"source\": \"test\"},\n"
  "   \"latency_s\": {\"value\": 2e-6, \"source\": \"test\"}}},\n"
  " \"network\": {\"model\": \"CM02\", \"crosstraffic\": 0, \"tcp_gamma\": 0}}\n";

/* Messages of `bytes` between the given (from, to) pairs, all at once, on 8 GPUs of one
 * a100-pcie-node; the step time. */
static double pcie_messages(const toy_files *t, int n, const int (*pair)[2], int64_t bytes) {
  static toy_plan pl;
  memset(&pl, 0, sizeof pl);
  pl.ranks = 8;
  int h[8] = {0};
  for (int i = 0; i < n; i++) {
    int a = pair[i][0], b = pair[i][1];
    toy_p2p(&pl, a, BS_OP_SEND, h[a]++, b, 1 + i, bytes);
    toy_p2p(&pl, b, BS_OP_RECV, h[b]++, a, 1 + i, bytes);
  }
  for (int r = 0; r < 8; r++) {
    int hs[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    if (h[r]) toy_wait(&pl, r, h[r], hs);
  }
  bs_result r;
  char err[512] = "";
  if (run_toy(&pl, t, &r, err, sizeof err)) fail_msg("%s", err);
  double step = r.time.step;
  bs_result_free(&r);
  return step;
}

/*
 * GPUs 0-3 sit under PCIe switch 0 on socket 0, GPUs 4-7 under switch 1 on socket 1. Inside a
 * switch: GPU link up, GPU link down. Across sockets: GPU link, the switch's host bridge, the
 * inter-socket link, the other host bridge, the GPU link: the latencies add and the socket link
 * is the narrowest. Two transfers across at once share it; two in opposite directions do not.
 */
static void test_pcie_sockets(void **st) {
  (void)st;
  toy_files t;
  snprintf(t.xml, sizeof t.xml, "a100-pcie-node");
  temp_file(t.prof, sizeof t.prof, "sockets", ".json", socket_profile);
  const int64_t B = 64 << 20;
  const double b = (double)B, across_lat = 2 * PC_LAT + 2 * HB_LAT + SO_LAT;
  const int inside[1][2] = {{0, 1}}, across[1][2] = {{0, 4}}, back[1][2] = {{7, 2}};
  assert_close(pcie_messages(&t, 1, inside, B), 2 * PC_LAT + b / PC_BW, 1e-6);
  assert_close(pcie_messages(&t, 1, across, B), across_lat + b / SO_BW, 1e-6);
  assert_close(pcie_messages(&t, 1, back, B), across_lat + b / SO_BW, 1e-6);
  const int two_same[2][2] = {{0, 4}, {1, 5}}, two_opposite[2][2] = {{0, 4}, {5, 1}};
  assert_close(pcie_messages(&t, 2, two_same, B), across_lat + 2 * b / SO_BW, 1e-6);
  assert_close(pcie_messages(&t, 2, two_opposite, B), across_lat + b / SO_BW, 1e-6);
  unlink(t.prof);
  /* sockets that do not split the switches evenly are refused with the counts */
  bs_topo_params tp;
  char err[256] = "";
  assert_int_equal(bs_topo_defaults("a100-pcie-node", 1, &tp, err, sizeof err), 0);
  assert_int_equal(tp.sockets_per_node, 2);
  tp.sockets_per_node = 3;
  assert_int_not_equal(bs_topo_check(&tp, err, sizeof err), 0);
  assert_non_null(strstr(err, "3 CPU sockets must divide its 2 PCIe switches"));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_attn_pass_tables),       cmocka_unit_test(test_coll_base_cost),
    cmocka_unit_test(test_coll_base_roundtrip),    cmocka_unit_test(test_small_message_factors),
    cmocka_unit_test(test_shared_nic_allreduce),   cmocka_unit_test(test_p2p_send_cost),
    cmocka_unit_test(test_p2p_leaves_collectives), cmocka_unit_test(test_p2p_routes),
    cmocka_unit_test(test_p2p_roundtrip),          cmocka_unit_test(test_p2p_order),
    cmocka_unit_test(test_p2p_peer_wait),          cmocka_unit_test(test_pcie_sockets),
    cmocka_unit_test(test_libnbc_allreduce),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
