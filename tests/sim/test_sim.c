/*
 * test_sim.c — the simulator against hand formulas on toy platforms (CM02,
 * no cross traffic, TCP-gamma 0: exact arithmetic), its error paths
 * (deadlock, mismatched messages, bad plans), the memory model, the shipped
 * profiles and generators, the fold shortcut against the straightforward run,
 * and the burst/ring bytes against the published volume formulas.
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

/* ---------------- tests ---------------- */

/* One ring step on 4 ranks: every message takes exactly latency + bytes / bandwidth. */
static void test_ring_step_exact(void **state) {
  (void)state;
  toy_files t;
  toy_setup(&t, 4, 4);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 4;
  const int64_t bytes = 123456789;
  for (int r = 0; r < 4; r++) {
    toy_p2p(&p, r, BS_OP_RECV, 0, (r + 3) % 4, 7, bytes);
    toy_p2p(&p, r, BS_OP_SEND, 1, (r + 1) % 4, 7, bytes);
    int h[2] = {0, 1};
    toy_wait(&p, r, 2, h);
  }
  bs_result r;
  char err[512];
  assert_int_equal(run_toy(&p, &t, &r, err, sizeof err), 0);
  double want = 2 * LINK_LAT + (double)bytes / LINK_BW; /* route: two links of LINK_LAT */
  assert_close(r.time.step, want, 1e-12);
  assert_close(r.time.comm_exposed, want, 1e-12);
  assert_int_equal(r.comm.per_rank_max_sent, bytes);
  assert_int_equal(r.comm.total, 4 * bytes);
  assert_int_equal(r.comm.intra_node, 4 * bytes);
  assert_int_equal(r.comm.inter_node, 0);
  assert_non_null(strstr(r.sim_network, "CM02"));
  assert_non_null(strstr(r.sim_network, "crosstraffic=0"));
  bs_result_free(&r);
  toy_teardown(&t);
}

/* S ring steps of (post, compute, wait): compute-bound when t_comp > t_comm, else comm-bound. */
static void overlap_case(int64_t msg, int64_t copy, int S) {
  toy_files t;
  toy_setup(&t, 4, 2);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 4;
  for (int r = 0; r < 4; r++)
    for (int s = 0; s < S; s++) {
      toy_p2p(&p, r, BS_OP_RECV, 0, (r + 3) % 4, s, msg);
      toy_p2p(&p, r, BS_OP_SEND, 1, (r + 1) % 4, s, msg);
      toy_copy(&p, r, copy);
      int h[2] = {0, 1};
      toy_wait(&p, r, 2, h);
    }
  bs_result r;
  char err[512];
  assert_int_equal(run_toy(&p, &t, &r, err, sizeof err), 0);
  double tc = 2.0 * (double)copy / MEM_BW, tm = 2 * LINK_LAT + (double)msg / LINK_BW;
  double step = tc > tm ? tc : tm;
  assert_close(r.time.step, S * step, 1e-9);
  assert_close(r.time.compute, S * tc, 1e-9);
  if (tc >= tm) assert_true(r.time.comm_exposed <= 1e-12);
  else assert_close(r.time.comm_exposed, S * (tm - tc), 1e-9);
  /* 2 ranks per node in the toy file: rank 1 -> 2 and 3 -> 0 cross nodes. */
  assert_int_equal(r.comm.inter_node, 2 * S * msg);
  assert_int_equal(r.comm.intra_node, 2 * S * msg);
  bs_result_free(&r);
  toy_teardown(&t);
}

static void test_overlap_compute_bound(void **state) {
  (void)state;
  overlap_case(1000000, 50000000, 5); /* comm 0.2 ms, compute 50 ms */
}

/* p on t with --trace to path: the simulation's return code. */
static int run_toy_traced(toy_plan *p, const toy_files *t, const char *path, bs_result *r, char *err, size_t errlen) {
  bs_config c;
  toy_config(&c, t, p->ranks);
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  o.trace_path = path;
  bs_sim_source s = toy_source(p);
  return bs_sim_run_source(&c, &o, &s, r, NULL, NULL, err, errlen);
}

static void assert_file_is(const char *path, const char *want) {
  FILE *f = fopen(path, "rb");
  if (!want) {
    if (f) fail_msg("%s exists after a failed point", path);
    return;
  }
  assert_non_null(f);
  char buf[64] = "";
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  assert_string_equal(buf, want);
}

/* A point that fails (a deadlock; a time too large for the trace) leaves no trace file, and an
 * existing one as it was. */
static void test_trace_none_on_failure(void **state) {
  (void)state;
  char path[256];
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(path, sizeof path, "%s/bs-trace-fail-%d.json", dir, (int)getpid());
  unlink(path);
  toy_files t;
  toy_setup(&t, 2, 2);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  for (int r = 0; r < 2; r++) { /* one copy traced, then both wait for a message nobody sends */
    toy_copy(&p, r, 1000);
    toy_p2p(&p, r, BS_OP_RECV, 0, 1 - r, 1, 1000);
    int h = 0;
    toy_wait(&p, r, 1, &h);
  }
  bs_result r;
  char err[512] = "";
  assert_int_equal(run_toy_traced(&p, &t, path, &r, err, sizeof err), -1);
  assert_non_null(strstr(err, "deadlock"));
  bs_result_free(&r);
  assert_file_is(path, NULL);
  write_text(path, "old trace");
  assert_int_equal(run_toy_traced(&p, &t, path, &r, err, sizeof err), -1);
  bs_result_free(&r);
  assert_file_is(path, "old trace");
  toy_teardown(&t);
  unlink(path);

  /* links so slow that a message takes more than the trace's microseconds can hold */
  toy_setup_links(&t, 2, 2, 3e-6, 1e-300);
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  for (int rank = 0; rank < 2; rank++) {
    toy_p2p(&p, rank, BS_OP_SEND, 0, 1 - rank, 1, 1000);
    toy_p2p(&p, rank, BS_OP_RECV, 1, 1 - rank, 1, 1000);
    int h[2] = {0, 1};
    toy_wait(&p, rank, 2, h);
  }
  err[0] = '\0';
  assert_int_equal(run_toy_traced(&p, &t, path, &r, err, sizeof err), -1);
  /* the trace's own check, or an earlier refusal of the link */
  if (!strstr(err, "not a finite time")) assert_non_null(strstr(err, "bandwidth"));
  bs_result_free(&r);
  assert_file_is(path, NULL);
  toy_teardown(&t);
}

static void test_overlap_comm_bound(void **state) {
  (void)state;
  overlap_case(500000000, 1000000, 5); /* comm 100 ms, compute 1 ms */
}

/* A toy plan over two ranks that the simulation must refuse: its message in err, and the same in the
 * result's error field. */
static void toy_run_fails(toy_plan *p, char *err, size_t errlen) {
  toy_files t;
  toy_setup(&t, 2, 2);
  bs_result r;
  assert_int_equal(run_toy(p, &t, &r, err, errlen), -1);
  if (strcmp(r.error, err)) fail_msg("result error '%s', message '%s'", r.error, err);
  bs_result_free(&r);
  toy_teardown(&t);
}

static void test_deadlock(void **state) {
  (void)state;
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  for (int r = 0; r < 2; r++) { /* both receive first and wait: nobody ever sends */
    toy_p2p(&p, r, BS_OP_RECV, 0, 1 - r, 1, 1000);
    int h = 0;
    toy_wait(&p, r, 1, &h);
    toy_p2p(&p, r, BS_OP_SEND, 1, 1 - r, 1, 1000);
    h = 1;
    toy_wait(&p, r, 1, &h);
  }
  char err[512] = "";
  toy_run_fails(&p, err, sizeof err);
  assert_non_null(strstr(err, "deadlock"));
  assert_non_null(strstr(err, "rank 0"));
  assert_non_null(strstr(err, "RECV from rank 1"));
}

/* A platform file with a link SimGrid cannot time (0 B/s, or near 0: its clock overflows) is an error naming
 * the file and the link, through bs_sim_run itself (not only the command's check before the first point). */
static void test_platform_link_range(void **state) {
  (void)state;
  const double bad[2] = {0, 1e-300};
  for (int i = 0; i < 2; i++) {
    toy_files t;
    toy_setup_links(&t, 2, 2, LINK_LAT, bad[i]);
    static toy_plan p;
    memset(&p, 0, sizeof p);
    p.ranks = 2;
    toy_p2p(&p, 0, BS_OP_SEND, 0, 1, 1, 1000);
    toy_p2p(&p, 1, BS_OP_RECV, 0, 0, 1, 1000);
    for (int r = 0; r < 2; r++) {
      int h = 0;
      toy_wait(&p, r, 1, &h);
    }
    bs_result r;
    char err[512] = "", want[64];
    assert_int_equal(run_toy(&p, &t, &r, err, sizeof err), -1);
    snprintf(want, sizeof want, "bandwidth %g B/s is out of range", bad[i]);
    if (!strstr(err, want) || !strstr(err, t.xml) || !strstr(err, "link 'w0")) fail_msg("error: %s", err);
    bs_result_free(&r);
    toy_teardown(&t);
  }
}

static void test_mismatched_tags(void **state) {
  (void)state;
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  toy_p2p(&p, 0, BS_OP_SEND, 0, 1, 5, 1000);
  toy_p2p(&p, 1, BS_OP_RECV, 0, 0, 6, 1000);
  int h = 0;
  toy_wait(&p, 0, 1, &h);
  toy_wait(&p, 1, 1, &h);
  char err[512] = "";
  toy_run_fails(&p, err, sizeof err);
  assert_non_null(strstr(err, "rank 1"));
  assert_non_null(strstr(err, "tag 6"));
}

/* A SEND nobody receives: the sender blocks in its WAIT; reported with both ranks and the step. */
static void test_unmatched_send(void **state) {
  (void)state;
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  toy_p2p(&p, 0, BS_OP_SEND, 0, 1, 3, 1000);
  p.ops[0][p.n[0] - 1].step = 3;
  int h = 0;
  toy_wait(&p, 0, 1, &h);
  toy_copy(&p, 1, 1000); /* rank 1 finishes without receiving */
  char err[512] = "";
  toy_run_fails(&p, err, sizeof err);
  if (!strstr(err, "rank 0") || !strstr(err, "SEND to rank 1") || !strstr(err, "(step 3)"))
    fail_msg("unmatched SEND reported as: %s", err);
}

/* Same tag, different sizes: the receiver names both sizes, both ranks and the step. */
static void test_wrong_size(void **state) {
  (void)state;
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  toy_p2p(&p, 0, BS_OP_SEND, 0, 1, (1 << 11) | 4, 2000);
  p.ops[0][p.n[0] - 1].step = 4;
  toy_p2p(&p, 1, BS_OP_RECV, 0, 0, (1 << 11) | 4, 1000);
  p.ops[1][p.n[1] - 1].step = 4;
  int h = 0;
  toy_wait(&p, 0, 1, &h);
  toy_wait(&p, 1, 1, &h);
  char err[512] = "";
  toy_run_fails(&p, err, sizeof err);
  if (!strstr(err, "rank 1 op #0 (step 4): RECV from rank 0") || !strstr(err, "1000 bytes") ||
      !strstr(err, "2000 bytes") || !strstr(err, "must match in order, tag and size"))
    fail_msg("wrong size reported as: %s", err);
}

static void test_unwaited_handle(void **state) {
  (void)state;
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  toy_p2p(&p, 0, BS_OP_SEND, 3, 1, 5, 1000);
  toy_p2p(&p, 1, BS_OP_RECV, 0, 0, 5, 1000);
  int h = 0;
  toy_wait(&p, 1, 1, &h);
  char err[512] = "";
  toy_run_fails(&p, err, sizeof err);
  assert_non_null(strstr(err, "never waited"));
  assert_non_null(strstr(err, "rank 0"));
}

/*
 * The framework's memory terms on a toy profile (toy figures): a reserve of 100000 B off the
 * 1e6 B capacity, requests up to 1024 B rounded to 512 B, larger ones to 4096 B, the model state
 * counted as allocated. Rank 0 holds 1000 B input (-> 1024), 5000 B workspace (-> 8192) and
 * 3000 B weights (3000): peak 12216 B. A request of 899000 B fits the bare 1e6 B but rounds to
 * 220 x 4096 = 901120 B, over the 900000 B left by the reserve: OOM.
 */
static void test_memory_framework_terms(void **state) {
  (void)state;
  toy_files t;
  toy_setup(&t, 2, 2);
  char pj[2048];
  snprintf(pj, sizeof pj,
           "{\"format\":1,\"name\":\"toy\",\"device\":{"
           "\"memory_bytes\":{\"value\":%.17g,\"source\":\"test\"},"
           "\"peak_flops\":{\"value\":1e12,\"source\":\"test\"},"
           "\"mem_bw_Bps\":{\"value\":%.17g,\"source\":\"test\"},"
           "\"reserved_bytes\":{\"value\":100000,\"source\":\"test\"},"
           "\"alloc_round_bytes\":{\"value\":4096,\"source\":\"test\"},"
           "\"alloc_small_bytes\":{\"value\":1024,\"source\":\"test\"},"
           "\"alloc_small_round_bytes\":{\"value\":512,\"source\":\"test\"}},"
           "\"kernels\":{},\"links\":{},\"network\":{\"model\":\"CM02\",\"crosstraffic\":0,\"tcp_gamma\":0}}",
           CAPACITY, MEM_BW);
  write_text(t.prof, pj);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  toy_alloc(&p, 0, 0, 1000, BS_MEM_INPUT);
  toy_alloc(&p, 0, 1, 5000, BS_MEM_WORKSPACE);
  toy_alloc(&p, 0, 2, 3000, BS_MEM_WEIGHTS);
  for (int b = 0; b < 3; b++) toy_free_buf(&p, 0, b);
  bs_result r;
  char err[512] = "";
  assert_int_equal(run_toy(&p, &t, &r, err, sizeof err), 0);
  assert_int_equal(r.mem.peak_bytes_max, 1024 + 8192 + 3000);
  assert_int_equal(r.mem.breakdown[BS_MEM_INPUT], 1024);
  assert_int_equal(r.mem.breakdown[BS_MEM_WORKSPACE], 8192);
  assert_int_equal(r.mem.breakdown[BS_MEM_WEIGHTS], 3000);
  assert_int_equal(r.mem.capacity_bytes, (int64_t)CAPACITY - 100000);
  assert_int_equal(r.mem.oom, 0);
  bs_result_free(&r);
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  toy_alloc(&p, 1, 0, 899000, BS_MEM_SCORES);
  toy_free_buf(&p, 1, 0);
  assert_int_equal(run_toy(&p, &t, &r, err, sizeof err), 0);
  assert_int_equal(r.mem.peak_bytes_max, 901120);
  assert_int_equal(r.mem.oom, 1);
  bs_result_free(&r);
  toy_teardown(&t);
}

static void test_memory_peak_breakdown_oom(void **state) {
  (void)state;
  toy_files t;
  toy_setup(&t, 2, 2);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  for (int r = 0; r < 2; r++) {
    toy_alloc(&p, r, 0, 1000, BS_MEM_INPUT);
    toy_alloc(&p, r, 1, 300 + r, BS_MEM_COMM);
    toy_free_buf(&p, r, 1);
    toy_alloc(&p, r, 2, 500, BS_MEM_WORKSPACE); /* the peak: input + workspace */
    toy_free_buf(&p, r, 2);
    toy_free_buf(&p, r, 0);
  }
  bs_result r;
  char err[512] = "";
  assert_int_equal(run_toy(&p, &t, &r, err, sizeof err), 0);
  assert_int_equal(r.mem.peak_bytes_max, 1500);
  assert_int_equal(r.mem.breakdown[BS_MEM_INPUT], 1000);
  assert_int_equal(r.mem.breakdown[BS_MEM_WORKSPACE], 500);
  assert_int_equal(r.mem.breakdown[BS_MEM_COMM], 0);
  assert_int_equal(r.mem.capacity_bytes, (int64_t)CAPACITY);
  assert_int_equal(r.mem.oom, 0);
  bs_result_free(&r);
  /* Over capacity: reported, not hidden. */
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  toy_alloc(&p, 1, 0, (int64_t)CAPACITY + 1, BS_MEM_SCORES);
  toy_free_buf(&p, 1, 0);
  assert_int_equal(run_toy(&p, &t, &r, err, sizeof err), 0);
  assert_int_equal(r.mem.oom, 1);
  assert_int_equal(r.mem.breakdown[BS_MEM_SCORES], (int64_t)CAPACITY + 1);
  bs_result_free(&r);
  /* A double free is a plan error naming the rank. */
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  toy_alloc(&p, 0, 4, 10, BS_MEM_INPUT);
  toy_free_buf(&p, 0, 4);
  toy_free_buf(&p, 0, 4);
  assert_int_equal(run_toy(&p, &t, &r, err, sizeof err), -1);
  assert_non_null(strstr(err, "rank 0"));
  assert_non_null(strstr(err, "FREE"));
  bs_result_free(&r);
  toy_teardown(&t);
}

/* A ring all-reduce of S bytes over n ranks: 2(n-1) steps of (latency + S/n / bw). */
static void test_allreduce_ring(void **state) {
  (void)state;
  toy_files t;
  toy_setup(&t, 4, 4);
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 4;
  const int64_t S = 400000000;
  for (int r = 0; r < 4; r++) {
    bs_op *op = toy_push(&p, r, BS_OP_COLL);
    op->handle = 2;
    op->u.coll.kind = BS_COLL_ALLREDUCE;
    op->u.coll.group = (bs_group){0, 1, 4};
    op->u.coll.bytes = S;
    int h = 2;
    toy_wait(&p, r, 1, &h);
  }
  bs_result r;
  char err[512] = "";
  assert_int_equal(run_toy(&p, &t, &r, err, sizeof err), 0);
  double want = 2 * 3 * (2 * LINK_LAT + (double)(S / 4) / LINK_BW);
  assert_close(r.time.step, want, 1e-9);
  assert_int_equal(r.comm.per_rank_max_sent, 2 * 3 * (S / 4));
  bs_result_free(&r);
  toy_teardown(&t);
}

static void test_bad_config(void **state) {
  (void)state;
  bs_config c;
  bs_config_default(&c);
  c.par.gpus = 12; /* not a multiple of 8 GPUs per node */
  bs_result r;
  char err[512] = "";
  assert_int_equal(bs_sim_run(&c, NULL, &r, err, sizeof err), -2);
  assert_non_null(strstr(err, "parallel.gpus"));
  bs_result_free(&r);
  bs_config_default(&c);
  strcpy(c.cluster.profile, "no-such-profile");
  assert_int_equal(bs_sim_run(&c, NULL, &r, err, sizeof err), -2);
  assert_non_null(strstr(err, "no-such-profile"));
  bs_result_free(&r);
  bs_config_default(&c);
  strcpy(c.cluster.topology, "torus");
  assert_int_equal(bs_sim_run(&c, NULL, &r, err, sizeof err), -2);
  assert_non_null(strstr(err, "torus"));
  bs_result_free(&r);
}

/* The shape of one attention block (the simulator reads only these fields). */
static attn_params block_params(int heads, int64_t n, int d) {
  attn_params a;
  memset(&a, 0, sizeof a);
  a.B = 1;
  a.Zq = a.Zkv = heads;
  a.Nq = a.Nk = n;
  a.d = d;
  return a;
}

static void test_profiles_load(void **state) {
  (void)state;
  const char *names[] = {"a100-sxm4-80gb", "a100-pcie-40gb", "a800-sxm4-80gb", "h100-sxm",
                         "h100-sxm-96gb",  "h800-sxm5",      "h200",           "host"};
  static bs_profile p;
  char err[512];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (bs_profile_load(names[i], &p, err, sizeof err)) {
      fprintf(stderr, "%s\n", err);
      fail();
    }
    assert_true(p.memory_bytes > 0);
    assert_true(p.kernel[BS_K_ATTN_FWD].kind == BS_KM_TABLE);
    assert_true(p.kernel[BS_K_ATTN_BWD].kind == BS_KM_TABLE);
    /* A larger block never runs at a lower useful rate in the shipped tables. */
    bs_compute c;
    memset(&c, 0, sizeof c);
    c.kernel = BS_K_ATTN_FWD;
    c.a = block_params(32, 1024, 128);
    c.flops = 4.0 * 32 * 1024 * 1024 * 128;
    double t1 = bs_profile_kernel_time(&p, &c, BS_BF16, err, sizeof err);
    c.a.Nq = c.a.Nk = 4096;
    c.flops *= 16;
    double t4 = bs_profile_kernel_time(&p, &c, BS_BF16, err, sizeof err);
    assert_true(t1 > 0 && t4 >= 0.0 && t4 <= 16 * t1 * (1 + 1e-12));
  }
  /* The published figure itself: FlashAttention-2 fwd+bwd, A100 d=128 non-causal at 1k = 173 TFLOP/s
   * (github.com/Dao-AILab/flash-attention README) in its benchmark setting (16k tokens, 16 heads):
   * the forward and backward blocks, each with its launch, and the backward's delta kernel
   * together take 3.5 F / 173 TFLOP/s. */
  assert_int_equal(bs_profile_load("a100-sxm4-80gb", &p, err, sizeof err), 0);
  bs_compute c;
  memset(&c, 0, sizeof c);
  c.kernel = BS_K_ATTN_FWD;
  c.a = block_params(16, 1024, 128);
  c.a.B = 16;
  double F = 4.0 * 16 * 16 * 1024 * 1024 * 128;
  c.flops = F;
  double tf = bs_profile_kernel_time(&p, &c, BS_BF16, err, sizeof err);
  c.kernel = BS_K_ATTN_BWD;
  c.flops = 2.5 * F;
  double tb = bs_profile_kernel_time(&p, &c, BS_BF16, err, sizeof err);
  assert_true(tb > tf); /* the backward runs slower per FLOP and does 2.5x the work */
  /* FlashAttention-2's backward time includes its preprocessing, the simulator's attn_delta */
  c.kernel = BS_K_ATTN_DELTA;
  c.flops = 0;
  double td = bs_profile_kernel_time(&p, &c, BS_BF16, err, sizeof err);
  assert_true(td > 0);
  /* 1e-3: the tables are stored to 0.1 TFLOP/s */
  assert_close(tf + tb + td, 3.5 * F / 173e12, 1e-3);
  /* A value without a source is refused. */
  toy_files t;
  toy_setup(&t, 2, 2);
  write_text(t.prof,
             "{\"format\":1,\"device\":{\"memory_bytes\":{\"value\":1},"
             "\"peak_flops\":{\"value\":1,\"source\":\"x\"},\"mem_bw_Bps\":{\"value\":1,\"source\":\"x\"}},"
             "\"kernels\":{},\"links\":{}}");
  assert_int_equal(bs_profile_load(t.prof, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "memory_bytes"));
  toy_teardown(&t);
}

static int count(const char *s, const char *pat) {
  int n = 0;
  for (const char *q = strstr(s, pat); q; q = strstr(q + 1, pat)) n++;
  return n;
}

static void test_generators(void **state) {
  (void)state;
  const char *names[] = {"dgx-a100", "a100-pcie-node", "dgx-h100", "host"};
  const int nodes[] = {1, 4, 128};
  char err[256];
  for (size_t i = 0; i < 4; i++)
    for (size_t j = 0; j < 3; j++) {
      bs_topo_params p;
      assert_int_equal(bs_topo_defaults(names[i], nodes[j], &p, err, sizeof err), 0);
      char *x = bs_topo_xml(&p, err, sizeof err);
      assert_non_null(x);
      int hosts = count(x, "<host ");
      if (!strcmp(names[i], "host")) assert_int_equal(hosts, 1);
      else assert_int_equal(hosts, nodes[j] * 8);
      free(x);
    }
  bs_topo_params p;
  assert_int_equal(bs_topo_defaults("dgx-a100", 128, &p, err, sizeof err), 0);
  assert_int_equal(bs_topo_fold_nodes(&p, 1), 32);  /* two leaves of 16 */
  assert_int_equal(bs_topo_fold_nodes(&p, 20), 64); /* flows may skip a leaf */
  p.nodes = 32;
  assert_int_equal(bs_topo_fold_nodes(&p, 1), 0); /* the fold would be the whole */
  p.nodes = 8;                                    /* one leaf: any shift, 3 < M */
  assert_int_equal(bs_topo_fold_nodes(&p, 1), 4);
  assert_int_equal(bs_topo_defaults("torus", 4, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "torus"));
}

/* The host topology's rule: ranks on one host share its CPU. Two concurrent
 * copies of t seconds each end at 2t; a message goes over the host's link. */
static void test_shared_host_cpu(void **state) {
  (void)state;
  toy_files t;
  toy_setup(&t, 2, 2);
  write_text(t.xml,
             "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
             "<platform version=\"4.1\"><zone id=\"one\" routing=\"Full\">\n"
             "<host id=\"cpu\" speed=\"1Gf\" core=\"1\"/>\n"
             "<link id=\"loop\" bandwidth=\"5GBps\" latency=\"3us\" sharing_policy=\"SPLITDUPLEX\"/>\n"
             "<route src=\"cpu\" dst=\"cpu\"><link_ctn id=\"loop\" direction=\"UP\"/></route>\n"
             "</zone></platform>\n");
  static toy_plan p;
  memset(&p, 0, sizeof p);
  p.ranks = 2;
  const int64_t copy = 20000000, msg = 50000000;
  for (int r = 0; r < 2; r++) toy_copy(&p, r, copy);
  toy_p2p(&p, 0, BS_OP_SEND, 0, 1, 9, msg);
  toy_p2p(&p, 1, BS_OP_RECV, 0, 0, 9, msg);
  int h = 0;
  toy_wait(&p, 0, 1, &h);
  toy_wait(&p, 1, 1, &h);
  bs_result r;
  char err[512] = "";
  if (run_toy(&p, &t, &r, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  double tc = 2.0 * (double)copy / MEM_BW; /* one copy alone */
  assert_close(r.time.compute, 2 * tc, 1e-9);
  assert_close(r.time.step, 2 * tc + 3e-6 + (double)msg / 5e9, 1e-9);
  assert_int_equal(r.comm.inter_node, 0);
  bs_result_free(&r);
  toy_teardown(&t);
}

/* Profile factors by message size on classed links ("nic-..."): a bulk message sees
 * the bulk piece, a small one the small piece. */
static void test_size_factors(void **state) {
  (void)state;
  toy_files t;
  toy_setup(&t, 2, 1);
  write_text(t.xml,
             "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
             "<platform version=\"4.1\"><zone id=\"two\" routing=\"Full\">\n"
             "<host id=\"gpu0\" speed=\"1Gf\"><prop id=\"node\" value=\"0\"/></host>\n"
             "<host id=\"gpu1\" speed=\"1Gf\"><prop id=\"node\" value=\"1\"/></host>\n"
             "<link id=\"nic-a\" bandwidth=\"1GBps\" latency=\"1s\" sharing_policy=\"SPLITDUPLEX\"/>\n"
             "<route src=\"gpu0\" dst=\"gpu1\"><link_ctn id=\"nic-a\" direction=\"UP\"/></route>\n"
             "</zone></platform>\n");
  char pj[2048];
  snprintf(pj, sizeof pj,
           "{\"format\":1,\"name\":\"toyf\",\"device\":{"
           "\"memory_bytes\":{\"value\":1e9,\"source\":\"test\"},"
           "\"peak_flops\":{\"value\":1e12,\"source\":\"test\"},"
           "\"mem_bw_Bps\":{\"value\":1e9,\"source\":\"test\"}},\"kernels\":{},"
           "\"links\":{\"nic\":{\"bandwidth_Bps\":{\"value\":%.17g,\"source\":\"test\"},"
           "\"latency_s\":{\"value\":%.17g,\"source\":\"test\"},"
           "\"factors\":[{\"min_bytes\":0,\"bandwidth\":1,\"latency\":2},"
           "{\"min_bytes\":1000000,\"bandwidth\":0.5,\"latency\":1}],\"source\":\"test\"}},"
           "\"network\":{\"model\":\"CM02\",\"crosstraffic\":0,\"tcp_gamma\":0}}",
           LINK_BW, LINK_LAT);
  write_text(t.prof, pj);
  const int64_t sizes[2] = {1000, 10000000};
  for (int k = 0; k < 2; k++) {
    static toy_plan p;
    memset(&p, 0, sizeof p);
    p.ranks = 2;
    toy_p2p(&p, 0, BS_OP_SEND, 0, 1, 1, sizes[k]);
    toy_p2p(&p, 1, BS_OP_RECV, 0, 0, 1, sizes[k]);
    int h = 0;
    toy_wait(&p, 0, 1, &h);
    toy_wait(&p, 1, 1, &h);
    bs_result r;
    char err[512] = "";
    if (run_toy(&p, &t, &r, err, sizeof err)) {
      fprintf(stderr, "%s\n", err);
      fail();
    }
    double want = k == 0 ? 2 * LINK_LAT + (double)sizes[0] / LINK_BW : LINK_LAT + (double)sizes[1] / (0.5 * LINK_BW);
    assert_close(r.time.step, want, 1e-9);
    assert_non_null(strstr(r.sim_network, "size factors"));
    bs_result_free(&r);
  }
  toy_teardown(&t);
}

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
    cmocka_unit_test(test_ring_step_exact),
    cmocka_unit_test(test_overlap_compute_bound),
    cmocka_unit_test(test_overlap_comm_bound),
    cmocka_unit_test(test_deadlock),
    cmocka_unit_test(test_mismatched_tags),
    cmocka_unit_test(test_unmatched_send),
    cmocka_unit_test(test_wrong_size),
    cmocka_unit_test(test_unwaited_handle),
    cmocka_unit_test(test_memory_peak_breakdown_oom),
    cmocka_unit_test(test_memory_framework_terms),
    cmocka_unit_test(test_allreduce_ring),
    cmocka_unit_test(test_bad_config),
    cmocka_unit_test(test_platform_link_range),
    cmocka_unit_test(test_shared_host_cpu),
    cmocka_unit_test(test_size_factors),
    cmocka_unit_test(test_profiles_load),
    cmocka_unit_test(test_generators),
    cmocka_unit_test(test_burst_bytes_anchors),
    cmocka_unit_test(test_double_ring_parallel_nics),
    cmocka_unit_test(test_fold_matches_full),
    cmocka_unit_test(test_fold_composed),
    cmocka_unit_test(test_pp_bubble),
    cmocka_unit_test(test_bytes_by_group),
    cmocka_unit_test(test_pp_bubble_interleaved),
    cmocka_unit_test(test_fold_refuses_asymmetric),
    cmocka_unit_test(test_trace_json),
    cmocka_unit_test(test_trace_none_on_failure),
  };
  return BS_RUN_NAMED(all, argc, argv, NULL, NULL);
}
