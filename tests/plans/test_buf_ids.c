/*
 * test_buf_ids.c — a model plan whose pipeline stage holds more layers x microbatches at once than
 * the fixed table of BS_WL_MAX_BUFS buffer ids allowed: the plan numbers its ids from its schedule
 * (bs_plan_buf_ids), builds, keeps every id below that bound, and its ops add up to the hand
 * formulas of the toy model (plan_toy.h): GEMM FLOPs, pipeline bytes, weights.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "plans/plan.h"
#include "plans/workload.h"
#include "plan_toy.h"

typedef struct {
  double gemm_flops;
  int64_t sent, recvd, first_alloc;
  int nsend, nrecv, nalloc, nfree;
  int32_t max_id; /* the largest buffer id an ALLOC used */
} walk;

/* Every op of rank r: ids below the plan's bound, ALLOC/FREE paired, every buffer freed at the end. */
static void walk_rank(const bs_plan *p, int r, walk *w) {
  int32_t nb = bs_plan_buf_ids(p);
  char *live = calloc((size_t)nb, 1);
  assert_non_null(live);
  memset(w, 0, sizeof *w);
  w->max_id = -1;
  bs_plan_iter *it = bs_plan_iter_new(p, r);
  assert_non_null(it);
  bs_op op;
  while (bs_plan_next(it, &op)) {
    if (op.kind == BS_OP_ALLOC) {
      int32_t b = op.u.alloc.buf;
      assert_true(b >= 0 && b < nb && !live[b]);
      live[b] = 1;
      if (b > w->max_id) w->max_id = b;
      if (!w->nalloc) w->first_alloc = op.u.alloc.bytes;
      w->nalloc++;
    } else if (op.kind == BS_OP_FREE) {
      int32_t b = op.u.free.buf;
      assert_true(b >= 0 && b < nb && live[b]);
      live[b] = 0;
      w->nfree++;
    } else if (op.kind == BS_OP_COMPUTE && op.u.compute.kernel == BS_K_GEMM) {
      w->gemm_flops += op.u.compute.flops;
    } else if (op.kind == BS_OP_SEND) {
      w->sent += op.u.p2p.bytes;
      w->nsend++;
    } else if (op.kind == BS_OP_RECV) {
      w->recvd += op.u.p2p.bytes;
      w->nrecv++;
    }
  }
  assert_int_equal(bs_plan_iter_error(it), 0);
  bs_plan_iter_free(it);
  for (int32_t b = 0; b < nb; b++) assert_false(live[b]);
  free(live);
}

/*
 * The toy on 2 ranks, pp = 2 (1F1B), L = 400 layers (200 a stage), 4 microbatches of one 256-token
 * sequence: stage 0 holds the activations of min(4, pp) = 2 microbatches of 200 layers, 400
 * layer-microbatches (the old table stopped at 165). Per stage, by hand: the forward GEMMs of a
 * layer on T tokens are 2T(H qkv + o H + 2 H F + F H), the backward twice that; the last stage adds
 * the head, 2 T H V, three times; each microbatch sends one T x H activation forward (stage 0) or
 * one gradient back (stage 1), es = 2 bytes; the first ALLOC holds the stage's weights in bf16.
 */
static void test_many_in_flight(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_BURST, 2, BS_SCOPE_MODEL, BS_TRAIN);
  c.model.layers = 400;
  c.par.pp = 2;
  c.work.batch = 4;
  c.par.micro_batch = 1;
  bs_plan *p = toy_plan_make(&c);
  assert_true(bs_plan_buf_ids(p) > BS_WL_MAX_BUFS);
  double T = 256, H = 64, F = 128, V = 256, qkv = (4 + 2 * 4) * 16, o = 4 * 16, m = 4, es = 2;
  double layer = 2 * T * (H * qkv + o * H + 2 * H * F + F * H);
  for (int r = 0; r < 2; r++) {
    walk w;
    walk_rank(p, r, &w);
    print_message("rank %d: %d ALLOCs, largest id %d of %d\n", r, w.nalloc, (int)w.max_id, (int)bs_plan_buf_ids(p));
    assert_int_equal(w.nalloc, w.nfree);
    double want = m * 200 * 3 * layer + (r == 1 ? m * 3 * 2 * T * H * V : 0);
    assert_true(w.gemm_flops == want);
    assert_int_equal(w.nsend, 4);
    assert_int_equal(w.nrecv, 4);
    assert_int_equal(w.sent, (int64_t)(m * T * H * es));
    assert_int_equal(w.recvd, (int64_t)(m * T * H * es));
    bs_param_count pc;
    bs_param_count_stage(&c, r, &pc);
    assert_int_equal(w.first_alloc, 2 * pc.total);
    if (r == 0) assert_true(w.max_id >= BS_WL_MAX_BUFS); /* past the old table */
  }
  bs_plan_free(p);
}

/* Attention scope keeps its own bound; a layer plan (no pipeline) the floor. */
static void test_bounds_by_scope(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_BURST, 2, BS_SCOPE_ATTENTION, BS_TRAIN);
  bs_plan *p = toy_plan_make(&c);
  assert_int_equal(bs_plan_buf_ids(p), BS_PLAN_MAX_BUFS);
  bs_plan_free(p);
  c.work.scope = BS_SCOPE_LAYER;
  p = toy_plan_make(&c);
  assert_int_equal(bs_plan_buf_ids(p), BS_WL_MAX_BUFS);
  bs_plan_free(p);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_many_in_flight),
    cmocka_unit_test(test_bounds_by_scope),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
