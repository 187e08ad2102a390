/*
 * test_kv_replication.c — tensor parallelism above the KV-head count on a toy model computed by
 * hand: 8 query heads, 2 KV heads, head dim 4, hidden 32, 16 tokens, bf16. With 4 tensor-parallel
 * ranks each rank holds 2 query heads and one KV head, the one its query heads share (rank r: head
 * r / 2), replicated on 2 ranks: its K buffer is 1 head x 16 tokens x 4 x 2 B = 128 B, its QKV
 * projection 32 x (2 + 2 x 1) x 4 = 512 weights (not 32 x (8 + 2 x 2) x 4 / 4 = 384 as an even
 * split would give) and its QKV GEMM 16 columns wide. Training refuses it (the replicas' gradient
 * reduction is not modelled); a tp that neither divides nor is a multiple of the KV heads is refused.
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

static void test_refused(void **st) {
  (void)st;
  bs_plan *p = NULL;
  char err[256];
  bs_config c = toy(BS_RING, 8, 4, BS_SCOPE_LAYER, BS_TRAIN);
  assert_int_equal(bs_plan_create(&c, 8, &p, err, sizeof err), -1);
  assert_non_null(strstr(err,
                         "parallel.tp: 4 ranks over 2 KV heads replicate each KV head 2 times; that runs for "
                         "prefill and decode only"));
  c = toy(BS_TP, 4, 1, BS_SCOPE_ATTENTION, BS_TRAIN);
  assert_int_equal(bs_plan_create(&c, 8, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "replicate each KV head 2 times"));
  c = toy(BS_RING, 6, 3, BS_SCOPE_LAYER, BS_PREFILL); /* 3 neither divides 2 KV heads nor is a multiple */
  c.model.heads = 6;
  assert_int_equal(bs_plan_create(&c, 8, &p, err, sizeof err), -1);
  assert_non_null(strstr(err,
                         "parallel.tp: 3 must divide model.heads (6) and divide, or be a multiple of, "
                         "model.kv_heads (2)"));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_tp_method),
    cmocka_unit_test(test_composed_layer),
    cmocka_unit_test(test_refused),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
