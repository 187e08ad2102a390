/*
 * test_scratch.c — the runtime's scratch for the ops a layer plan only
 * models (runtime/scratch.h) and the compute paths that use it: the
 * generic GEMM computes C = A B (against a brute-force product, across row
 * tiles with a progress poll after each), the generic elementwise pass reads and writes its elements in place,
 * a collective's shape on scratch is rounded as comm.h needs (and the value
 * its first delivered float must have), and a layer
 * plan's scratch is sized to the largest operands a hand count of its GEMMs,
 * passes and gradient all-reduce gives; an attention plan needs none. And a
 * backend that launches every (batch, head) at once (the GPU's) computes what
 * the per-head calls compute.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "tests/toy_model.h"
#include "runtime/compute.h"
#include "runtime/scratch.h"
#include "plans/workload.h"

static int polls;
static void count_poll(void *arg) {
  (void)arg;
  polls++;
}

static bs_op coll_op(bs_coll_kind k, bs_elem e, int size, int64_t bytes) {
  bs_op op;
  memset(&op, 0, sizeof op);
  op.kind = BS_OP_COLL;
  op.u.coll.kind = k;
  op.u.coll.elem = e;
  op.u.coll.group = (bs_group){0, 1, size};
  op.u.coll.send = BS_NOREF;
  op.u.coll.recv = BS_NOREF;
  op.u.coll.bytes = bytes;
  return op;
}

static void expect_shape(bs_coll_kind k, bs_elem e, int size, int64_t bytes, bs_comm_type ty, int64_t want,
                         int64_t want_recv) {
  bs_op op = coll_op(k, e, size, bytes);
  bs_scratch_coll s = bs_scratch_coll_shape(&op);
  assert_int_equal(bs_scratch_uses(&op), 1);
  assert_int_equal(s.type, ty);
  assert_int_equal(s.bytes, want);
  assert_int_equal(s.recv_bytes, want_recv);
}

/* 16-bit reductions run as fp32 sums of whole floats; blocks split evenly; receive sizes per comm.h. */
static void test_coll_shape(void **state) {
  (void)state;
  expect_shape(BS_COLL_ALLREDUCE, BS_ELEM_F32, 2, 64, BS_COMM_F32, 64, 64);
  expect_shape(BS_COLL_ALLREDUCE, BS_ELEM_BF16, 2, 6, BS_COMM_F32, 8, 8);
  expect_shape(BS_COLL_REDUCE_SCATTER, BS_ELEM_BF16, 4, 12, BS_COMM_F32, 16, 4);
  expect_shape(BS_COLL_REDUCE_SCATTER, BS_ELEM_F32, 2, 48, BS_COMM_F32, 48, 24);
  expect_shape(BS_COLL_ALLGATHER, BS_ELEM_BF16, 3, 3, BS_COMM_BYTES, 3, 9);
  expect_shape(BS_COLL_ALLTOALL, BS_ELEM_BF16, 4, 10, BS_COMM_BYTES, 12, 12);
  /* what the first delivered float must be (send data are fp32 ones): the group size for a sum */
  bs_op e = coll_op(BS_COLL_ALLREDUCE, BS_ELEM_BF16, 4, 64);
  assert_true(bs_scratch_expected(&e) == 4.0f);
  e = coll_op(BS_COLL_REDUCE_SCATTER, BS_ELEM_F32, 3, 48);
  assert_true(bs_scratch_expected(&e) == 3.0f);
  e.u.coll.red = BS_RED_MAX;
  assert_true(bs_scratch_expected(&e) == 1.0f);
  e = coll_op(BS_COLL_ALLGATHER, BS_ELEM_BF16, 2, 8);
  assert_true(bs_scratch_expected(&e) == 1.0f);
  e = coll_op(BS_COLL_ALLGATHER, BS_ELEM_BF16, 2, 2); /* too few bytes to tell */
  assert_true(bs_scratch_expected(&e) == 0.0f);
  e = coll_op(BS_COLL_ALLTOALL, BS_ELEM_BF16, 4, 32);
  assert_true(bs_scratch_expected(&e) == 1.0f);
  e = coll_op(BS_COLL_ALLTOALL, BS_ELEM_BF16, 4, 24); /* blocks of 6 bytes: not whole floats */
  assert_true(bs_scratch_expected(&e) == 0.0f);
  bs_op with_ref = coll_op(BS_COLL_ALLREDUCE, BS_ELEM_F32, 2, 64);
  with_ref.u.coll.send = with_ref.u.coll.recv = (bs_ref){3, 0};
  assert_int_equal(bs_scratch_uses(&with_ref), 0);
}

static float val(int64_t i, int salt) { return (float)((i * 7 + salt) % 11 - 5) / 4.0f; }

/* The generic GEMM computes C = A B in row tiles (a poll after each); without operands it does nothing. */
static void test_generic_gemm(void **state) {
  (void)state;
  enum { M = 5, N = 3, K = 7 };
  float A[M * K], B[K * N], C[M * N];
  for (int i = 0; i < M * K; i++) A[i] = val(i, 1);
  for (int i = 0; i < K * N; i++) B[i] = val(i, 2);
  for (int i = 0; i < M * N; i++) C[i] = 99.0f; /* beta = 0: overwritten */
  bs_compute c;
  memset(&c, 0, sizeof c);
  c.kernel = BS_K_GEMM;
  c.gemm = BS_GEMM_GENERIC;
  c.m = M;
  c.n = N;
  c.k = K;
  bs_compute_bufs b;
  memset(&b, 0, sizeof b);
  bs_compute_ctx x = {bs_kernel_backend_cpu(), 1, 2, 0, 0, count_poll, NULL};
  char err[160];
  polls = 0;
  assert_int_equal(bs_compute_run(&x, &c, &b, err, sizeof err), 0); /* no operands: modelled only */
  assert_int_equal(polls, 0);
  b.in[0] = A;
  b.in[1] = B;
  b.out[0] = C;
  assert_int_equal(bs_compute_run(&x, &c, &b, err, sizeof err), 0);
  assert_int_equal(polls, 3); /* rows 0-1, 2-3, 4 */
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += (double)A[i * K + k] * B[k * N + j];
      if (fabs(s - C[i * N + j]) > 1e-5) print_error("C[%d][%d] = %g, brute force %g\n", i, j, C[i * N + j], s);
      assert_true(fabs(s - C[i * N + j]) <= 1e-5);
    }
}

/* The generic elementwise pass: in place over elems of out[0], which it reads and writes (values kept). */
static void test_generic_elemwise(void **state) {
  (void)state;
  float ys[9];
  for (int i = 0; i < 9; i++) ys[i] = val(i, 4);
  bs_compute c;
  memset(&c, 0, sizeof c);
  c.kernel = BS_K_ELEMWISE;
  c.ew = BS_EW_GENERIC;
  c.elems = 8; /* the ninth stays */
  bs_compute_bufs b;
  memset(&b, 0, sizeof b);
  b.out[0] = ys;
  bs_compute_ctx x = {bs_kernel_backend_cpu(), 1, 256, 0, 0, count_poll, NULL};
  char err[160];
  polls = 0;
  assert_int_equal(bs_compute_run(&x, &c, &b, err, sizeof err), 0);
  assert_int_equal(polls, 1);
  for (int i = 0; i < 9; i++) assert_true(ys[i] == val(i, 4));
  /* the backend's pass itself: x *= alpha over n, the rest untouched */
  assert_int_equal(bs_kernel_backend_cpu()->scale(8, ys, 2.0f), 0);
  for (int i = 0; i < 9; i++) assert_true(ys[i] == (i < 8 ? 2.0f * val(i, 4) : val(i, 4)));
}

static bs_config layer_cfg(bs_scope scope) {
  bs_config c;
  bs_config_default(&c);
  toy_model(&c);
  c.model.layers = 1;
  c.model.dtype = BS_FP32;
  c.work.batch = 1;
  c.work.phase = BS_TRAIN;
  c.work.scope = scope;
  c.par.method = BS_BURST;
  c.par.gpus = 2;
  c.par.double_ring = BS_OFF;
  c.par.ranks_per_node = 2;
  return c;
}

/*
 * One layer, burst over 2 ranks, T = 128 tokens a rank, H = 64, F = 128, QKV width 192, fp32. The
 * largest operands (forward [m x k] x [k x n], backward dX = [m x n] x [n x k], dW = [k x m] x [m x n]):
 * A is dX of gate/up, T x 2F; B is dW of gate/up, T x 2F; C is gate/up's forward, T x 2F. The largest
 * elementwise pass is Adam's over the layer's P parameters (P * (3 x 8 + 4) / (2 * 4) elements: the
 * fp32 master, m and v read and written, the fp32 main gradient read; the copy of the master weights
 * to the model's is a pass of its own, plans/workload_kernels.c); one
 * collective in flight, the gradient all-reduce of P fp32 over the 2 ranks holding the weights.
 */
static void test_layer_sizes(void **state) {
  (void)state;
  bs_config c = layer_cfg(BS_SCOPE_LAYER);
  bs_plan *p = toy_plan_make(&c);
  const int64_t T = 128, H = 64, F = 128, Q = (4 + 2 * 4) * 16;
  const int64_t P = H * Q + 4 * 16 * H + 2 * H * F + F * H + 2 * H;
  for (int rank = 0; rank < 2; rank++) {
    bs_scratch s;
    char err[256] = "";
    int rc = bs_scratch_create(&s, p, rank, err, sizeof err);
    if (rc) print_error("scratch: %s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(s.na, T * 2 * F);
    assert_int_equal(s.nb, T * 2 * F);
    assert_int_equal(s.nc, T * 2 * F);
    assert_int_equal(s.nx, P * (3 * 8 + 4) / 8);
    assert_int_equal(s.nrecv, 1);
    assert_int_equal(s.recv_bytes, P * 4);
    assert_int_equal(s.send_bytes, P * 4);
    assert_int_equal(bs_scratch_bytes(&s), (3 * T * 2 * F + s.nx) * 4 + 2 * P * 4);
    float first;
    memcpy(&first, s.send, sizeof first);
    assert_true(first == 1.0f); /* the send data every delivered value is checked against */
    /* one slot: a second handle in flight finds none until the first is given back */
    char *r0 = bs_scratch_take(&s, 0);
    assert_non_null(r0);
    assert_null(bs_scratch_take(&s, 1));
    bs_scratch_give(&s, 0);
    assert_ptr_equal(bs_scratch_take(&s, 1), r0);
    bs_scratch_free(&s);
  }
  bs_plan_free(p);
}

/* Attention scope names every buffer: no scratch, so its runs are what they were. */
static void test_attention_none(void **state) {
  (void)state;
  bs_config c = layer_cfg(BS_SCOPE_ATTENTION);
  bs_plan *p = toy_plan_make(&c);
  bs_scratch s;
  char err[256] = "";
  assert_int_equal(bs_scratch_create(&s, p, 1, err, sizeof err), 0);
  assert_int_equal(bs_scratch_bytes(&s), 0);
  assert_null(s.a);
  assert_null(s.send);
  bs_scratch_free(&s);
  bs_plan_free(p);
}

/* A backend that takes every (batch, head) in one launch (whole_heads, as the GPU's does) computes what
 * the per-head, per-row-tile calls compute: forward and backward, GQA, a causal mask, accumulated. */
static int run_attn_pass(const bs_kernel_backend *be, int bwd, const attn_params *a, float **in, float **out) {
  bs_compute c;
  memset(&c, 0, sizeof c);
  c.kernel = bwd ? BS_K_ATTN_BWD : BS_K_ATTN_FWD;
  c.a = *a;
  c.accumulate = 1;
  bs_compute_bufs b;
  memset(&b, 0, sizeof b);
  for (int i = 0; i < 7; i++) b.in[i] = in[i];
  for (int i = 0; i < 3; i++) b.out[i] = out[i];
  bs_compute_ctx x = {be, 1, 1 << 20, 0, 0, count_poll, NULL};
  char err[160];
  polls = 0;
  int rc = bs_compute_run(&x, &c, &b, err, sizeof err);
  if (rc) print_error("%s\n", err);
  return rc;
}

static void test_whole_heads(void **state) {
  (void)state;
  enum { B = 2, ZQ = 4, ZKV = 2, NQ = 37, NK = 53, D = 16 };
  attn_params a = attn_params_make(B, ZQ, ZKV, NQ, NK, D);
  a.mask.causal = 1;
  a.mask.q_pos0 = NK - NQ;
  size_t nq = (size_t)B * ZQ * NQ * D, nk = (size_t)B * ZKV * NK * D, rows = (size_t)B * ZQ * NQ;
  float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *dout = malloc(nq * 4);
  float *res[2][6]; /* per launch style: o, lse, delta, dq, dk, dv */
  assert_non_null(q && k && v && dout);
  for (size_t i = 0; i < nq; i++) q[i] = val((int64_t)i, 5), dout[i] = val((int64_t)i, 6);
  for (size_t i = 0; i < nk; i++) k[i] = val((int64_t)i, 7), v[i] = val((int64_t)i, 8);
  bs_kernel_backend whole = *bs_kernel_backend_cpu();
  whole.whole_heads = 1;
  const bs_kernel_backend *be[2] = {bs_kernel_backend_cpu(), &whole};
  for (int w = 0; w < 2; w++) {
    size_t n[6] = {nq, rows, rows, nq, nk, nk};
    for (int i = 0; i < 6; i++) assert_non_null(res[w][i] = calloc(n[i], 4));
    float *fin[7] = {q, k, v, NULL, NULL, NULL, NULL}, *fout[3] = {res[w][0], res[w][1], NULL};
    assert_int_equal(run_attn_pass(be[w], 0, &a, fin, fout), 0);
    assert_int_equal(polls, w ? 1 : B * ZQ); /* one launch, or one per (batch, head) */
    assert_int_equal(be[w]->delta(&a, res[w][0], dout, res[w][2]), 0);
    float *bin[7] = {q, k, v, res[w][0], dout, res[w][1], res[w][2]}, *bout[3] = {res[w][3], res[w][4], res[w][5]};
    assert_int_equal(run_attn_pass(be[w], 1, &a, bin, bout), 0);
  }
  const char *name[6] = {"o", "lse", "delta", "dq", "dk", "dv"};
  size_t n[6] = {nq, rows, rows, nq, nk, nk};
  for (int i = 0; i < 6; i++) {
    double worst = 0, scale = 0;
    for (size_t j = 0; j < n[i]; j++) {
      worst = fmax(worst, fabs((double)res[0][i][j] - res[1][i][j]));
      scale = fmax(scale, fabs((double)res[0][i][j]));
    }
    if (!(worst <= 1e-5 * scale))
      print_error("%s: whole-heads vs per-head max diff %g (max |x| %g)\n", name[i], worst, scale);
    assert_true(scale > 0 && worst <= 1e-5 * scale);
  }
  for (int w = 0; w < 2; w++)
    for (int i = 0; i < 6; i++) free(res[w][i]);
  free(q);
  free(k);
  free(v);
  free(dout);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_coll_shape),  cmocka_unit_test(test_generic_gemm),   cmocka_unit_test(test_generic_elemwise),
    cmocka_unit_test(test_layer_sizes), cmocka_unit_test(test_attention_none), cmocka_unit_test(test_whole_heads),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
