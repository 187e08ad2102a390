/*
 * test_kv_replication.c — tensor parallelism above the KV-head count on a toy model computed by
 * hand: 8 query heads, 2 KV heads, head dim 4, hidden 32, 16 tokens, bf16. With 4 tensor-parallel
 * ranks each rank holds 2 query heads and one KV head, the one its query heads share (rank r: head
 * r / 2), replicated on 2 ranks: its K buffer is 1 head x 16 tokens x 4 x 2 B = 128 B, its QKV
 * projection 32 x (2 + 2 x 1) x 4 = 512 weights (not 32 x (8 + 2 x 2) x 4 / 4 = 384 as an even
 * split would give) and its QKV GEMM 16 columns wide. A tp that neither divides nor is a multiple of
 * the KV heads is refused.
 *
 * Training (issue 26): the 2 replicas of a KV head (ranks {0,1} hold head 0, {2,3} head 1) compute
 * the same K, V, each only a partial dK, dV (from its own 2 query heads); the head's gradients are
 * the sum over the replicas.
 *   attention scope (method tp): dK and dV (fp32: 1 sequence x 1 head x 16 tokens x 4 x 4 B = 256 B
 *     each) all-reduced over the 2 ranks of the replica group: 2 all-reduces of 256 B, a ring moving
 *     2 (2 - 1) / 2 x 256 = 256 B each: 512 B sent per rank for the reduction.
 *   layer scope (method tp, or tp 4 x cp 2): the input gradient goes through tp's collectives; the
 *     replicated Wk, Wv gradients (2 x hidden 32 x head_dim 4 = 256 parameters, fp32 main gradients:
 *     1024 B) all-reduced once a step over the 2 replicas: 1024 B sent per rank. Model scope, 2 layers:
 *     one coalesced all-reduce of 2048 B.
 *   attention scope, tp 4 x cp 2 (ring): the 2 tp replicas (same cp rank) all-reduce the dK, dV of
 *     their 8 tokens after the ring's backward: 1 x 1 x 8 x 4 x 4 B = 128 B each, 256 B sent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/run_named.h"

#include <string.h>

#include "plans/plan.h"
#include "plans/workload.h"

static bs_config toy(bs_method m, int gpus, int tp, bs_scope scope, bs_phase ph) {
  bs_config c;
  bs_config_default(&c);
  c.model.preset[0] = '\0';
  c.model.hidden = 32;
  c.model.heads = 8;
  c.model.kv_heads = 2;
  c.model.head_dim = 4;
  c.model.layers = 2;
  c.model.ffn = 64;
  c.model.vocab = 64;
  c.model.dtype = BS_BF16;
  c.work.seq_len = 16;
  c.work.batch = 1;
  c.work.phase = ph;
  c.work.scope = scope;
  c.par.method = m;
  c.par.gpus = gpus;
  c.par.tp = tp;
  c.par.layout = BS_CONTIGUOUS;
  return c;
}

/* Method tp on 4 ranks: each rank's K buffer holds its one KV head. */
static void test_tp_method(void **st) {
  (void)st;
  bs_config c = toy(BS_TP, 4, 1, BS_SCOPE_ATTENTION, BS_PREFILL);
  bs_plan *p;
  char err[256];
  assert_int_equal(bs_plan_create(&c, 8, &p, err, sizeof err), 0);
  for (int r = 0; r < 4; r++) {
    bs_plan_iter *it = bs_plan_iter_new(p, r);
    bs_op op;
    int seen = 0;
    while (bs_plan_next(it, &op))
      if (op.kind == BS_OP_ALLOC && (op.u.alloc.role == BS_ROLE_K || op.u.alloc.role == BS_ROLE_V)) {
        assert_int_equal(op.u.alloc.bytes, 1 * 16 * 4 * 2);
        assert_int_equal(op.u.alloc.shard.heads, 1);
        assert_int_equal(op.u.alloc.shard.head0, r / 2);
        seen++;
      }
    assert_int_equal(seen, 2);
    bs_plan_iter_free(it);
  }
  bs_plan_free(p);
}

/* Composed tp 4 x cp 2, layer scope: the QKV weights and GEMM of a rank with one replicated KV head. */
static void test_composed_layer(void **st) {
  (void)st;
  bs_config c = toy(BS_RING, 8, 4, BS_SCOPE_LAYER, BS_PREFILL);
  bs_param_count pc;
  bs_param_count_of(&c, &pc);
  assert_int_equal(pc.qkv, 32 * (2 + 2 * 1) * 4);
  bs_plan *p;
  char err[256];
  assert_int_equal(bs_plan_create(&c, 8, &p, err, sizeof err), 0);
  bs_plan_iter *it = bs_plan_iter_new(p, 5);
  bs_op op;
  int gemm = 0, kbuf = 0;
  while (bs_plan_next(it, &op)) {
    if (op.kind == BS_OP_COMPUTE && op.u.compute.label && !strcmp(op.u.compute.label, "QKV projection")) {
      assert_int_equal(op.u.compute.n * op.u.compute.m, (2 + 2 * 1) * 4 * 8); /* 16 columns, 8 tokens */
      gemm++;
    }
    if (op.kind == BS_OP_ALLOC && op.u.alloc.role == BS_ROLE_K && !kbuf) {
      assert_int_equal(op.u.alloc.shard.heads, 1);
      kbuf = 1;
    }
  }
  assert_int_equal(gemm, 1);
  assert_int_equal(kbuf, 1);
  bs_plan_iter_free(it);
  bs_plan_free(p);
}

/* The all-reduces over 2-rank groups of stride `stride` (the tp ranks' in the mesh) of one rank's
 * plan: their count, bytes each (all equal), the group's first rank and stride; and the bytes the
 * rank sends (a ring: 2 (n - 1) / n of each). */
typedef struct {
  int n;
  int64_t bytes, sent;
  int32_t first, stride;
} pairs;

static pairs replica_allreduces(const bs_config *c, int rank, int32_t stride) {
  bs_plan *p;
  char err[256];
  pairs r = {0, 0, 0, -1, -1};
  assert_int_equal(bs_plan_create(c, 8, &p, err, sizeof err), 0);
  bs_plan_iter *it = bs_plan_iter_new(p, rank);
  bs_op op;
  while (bs_plan_next(it, &op))
    if (op.kind == BS_OP_COLL && op.u.coll.kind == BS_COLL_ALLREDUCE && op.u.coll.group.size == 2 &&
        op.u.coll.group.stride == stride) {
      if (r.n) assert_int_equal(op.u.coll.bytes, r.bytes);
      r.bytes = op.u.coll.bytes;
      r.first = op.u.coll.group.first;
      r.stride = op.u.coll.group.stride;
      r.sent += 2 * (2 - 1) * op.u.coll.bytes / 2;
      r.n++;
    }
  bs_plan_iter_free(it);
  bs_plan_free(p);
  return r;
}

/* Method tp on 4 ranks in training at attention scope: dK, dV summed over the replicas. */
static void test_train_attention(void **st) {
  (void)st;
  bs_config c = toy(BS_TP, 4, 1, BS_SCOPE_ATTENTION, BS_TRAIN);
  for (int rank = 0; rank < 4; rank++) {
    pairs r = replica_allreduces(&c, rank, 1);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.bytes, 256);
    assert_int_equal(r.sent, 512);
    assert_int_equal(r.first, rank / 2 * 2);
    assert_int_equal(r.stride, 1);
  }
}

/* tp 4 x cp 2 (ring) at attention scope: after the ring's backward the 2 tp replicas of a KV head
 * (same cp rank) all-reduce the partial dK, dV of the rank's 8 tokens: 1 x 1 x 8 x 4 x 4 B = 128 B. */
static void test_train_composed_attention(void **st) {
  (void)st;
  bs_config c = toy(BS_RING, 8, 4, BS_SCOPE_ATTENTION, BS_TRAIN);
  bs_plan *p;
  char err[256];
  assert_int_equal(bs_plan_create(&c, 8, &p, err, sizeof err), 0);
  for (int rank = 0; rank < 8; rank++) {
    const bs_mesh *m = bs_plan_mesh(p);
    int32_t stride = (int32_t)m->stride[BS_DIM_TP], t = bs_mesh_coord(m, rank, BS_DIM_TP);
    pairs r = replica_allreduces(&c, rank, stride);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.bytes, 128);
    assert_int_equal(r.sent, 256);
    assert_int_equal(r.first, rank - t * stride + t / 2 * 2 * stride);
  }
  bs_plan_free(p);
}

/* Layer and model scope: the replicated Wk, Wv gradients summed once a step, no dK, dV reduction. */
static void test_train_layer(void **st) {
  (void)st;
  bs_config c = toy(BS_TP, 4, 1, BS_SCOPE_LAYER, BS_TRAIN);
  c.model.main_grads = BS_GRADS_FP32;
  pairs r = replica_allreduces(&c, 3, 1);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.bytes, 1024);
  assert_int_equal(r.sent, 1024);
  assert_int_equal(r.first, 2);
  c.work.scope = BS_SCOPE_MODEL;
  r = replica_allreduces(&c, 1, 1);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.bytes, 2048);
  assert_int_equal(r.first, 0);
  c = toy(BS_RING, 8, 4, BS_SCOPE_LAYER, BS_TRAIN); /* tp 4 x cp 2 */
  c.model.main_grads = BS_GRADS_FP32;
  bs_plan *p;
  char err[256];
  assert_int_equal(bs_plan_create(&c, 8, &p, err, sizeof err), 0);
  for (int rank = 0; rank < 8; rank++) {
    const bs_mesh *m = bs_plan_mesh(p);
    int32_t stride = (int32_t)m->stride[BS_DIM_TP], t = bs_mesh_coord(m, rank, BS_DIM_TP);
    r = replica_allreduces(&c, rank, stride);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.bytes, 1024);
    assert_int_equal(r.first, rank - t * stride + t / 2 * 2 * stride);
  }
  bs_plan_free(p);
  /* tp 4 over 4 KV heads: no replicas, no all-reduce over 2 ranks */
  c = toy(BS_TP, 4, 1, BS_SCOPE_LAYER, BS_TRAIN);
  c.model.kv_heads = 4;
  assert_int_equal(replica_allreduces(&c, 0, 1).n, 0);
}

static void test_refused(void **st) {
  (void)st;
  bs_plan *p = NULL;
  char err[256];
  bs_config c = toy(BS_RING, 6, 3, BS_SCOPE_LAYER, BS_PREFILL); /* 3 neither divides 2 KV heads nor is a multiple */
  c.model.heads = 6;
  assert_int_equal(bs_plan_create(&c, 8, &p, err, sizeof err), -1);
  assert_non_null(strstr(err,
                         "parallel.tp: 3 must divide model.heads (6) and divide, or be a multiple of, "
                         "model.kv_heads (2)"));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_tp_method),       cmocka_unit_test(test_composed_layer),
    cmocka_unit_test(test_train_attention), cmocka_unit_test(test_train_composed_attention),
    cmocka_unit_test(test_train_layer),     cmocka_unit_test(test_refused),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
