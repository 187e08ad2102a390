/*
 * test_sim.c — the simulator on toy programs: against hand formulas on toy
 * platforms (CM02, no cross traffic, TCP-gamma 0: exact arithmetic), its error
 * paths (deadlock, mismatched messages, bad plans and platforms, no trace on a
 * failure), the memory model, the shipped profiles and generators, a shared
 * host's CPU and the profiles' message-size factors. Real plans are
 * test_sim_plans.c's.
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
    cmocka_unit_test(test_trace_none_on_failure),
  };
  return BS_RUN_NAMED(all, argc, argv, NULL, NULL);
}
