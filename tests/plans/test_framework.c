/*
 * test_framework.c — workload.framework's mechanisms on the toy model (plan_toy.h: hidden 64,
 * 4 heads of 16, ffn 128, 2 layers), each against a figure worked out by hand: FSDP2's per-layer
 * weight gathers (torchtitan), Transformer Engine's FP8 amax all-reduce, DeepSpeed's gradient
 * reduction without overlap, and what model.attention_kernel = default means per framework.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/run_named.h"

#include "plan_toy.h"
#include "plans/workload.h"

/* One layer's parameters of the toy: QKV 64 x (4 + 2 x 4) x 16, output 64 x 64, gate and up
 * 2 x 64 x 128, down 128 x 64, two norms of 64. */
#define TOY_LAYER (64 * 12 * 16 + 64 * 64 + 2 * 64 * 128 + 128 * 64 + 2 * 64)

#define CAP 200000
static bs_op ops[CAP];

/* Rank r's ops, into ops; the count. */
static int ops_of_rank(const bs_plan *p, int r) {
  bs_plan_iter *it = bs_plan_iter_new(p, r);
  assert_non_null(it);
  int n = 0;
  bs_op op;
  while (bs_plan_next(it, &op)) {
    assert_true(n < CAP);
    ops[n++] = op;
  }
  assert_int_equal(bs_plan_iter_error(it), 0);
  bs_plan_iter_free(it);
  return n;
}

/* torchtitan in training: parallel.zero = 3 unless given (FSDP2), and each layer's weights gathered
 * over the 4 data-parallel ranks (cp here) before its forward and again before its backward: a
 * rank contributes its shard, TOY_LAYER / 4 x 2 bytes, so it receives TOY_LAYER x 3/4 x 2 bytes a
 * gather; the next set's gather is posted before the first GEMM waits on its own (one ahead). */
static void test_fsdp_gathers(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, BS_TRAIN);
  c.work.framework = BS_FW_TORCHTITAN;
  bs_framework_defaults(&c, BS_FW_KEY_METHOD); /* burst given: the gathers of the weights only */
  assert_int_equal(c.par.zero, 3);
  assert_true(c.work.framework_applied & BS_FW_KEY_ZERO);
  bs_plan *p = toy_plan_make(&c);
  int n = ops_of_rank(p, 0), layer_gathers = 0, before_gemm = 0, gemm_seen = 0;
  for (int i = 0; i < n; i++) {
    if (ops[i].kind == BS_OP_COMPUTE && ops[i].u.compute.kernel == BS_K_GEMM) gemm_seen = 1;
    if (ops[i].kind != BS_OP_COLL || ops[i].u.coll.kind != BS_COLL_ALLGATHER) continue;
    if (!gemm_seen) before_gemm++;
    if (ops[i].u.coll.bytes == TOY_LAYER / 4 * 2) {
      layer_gathers++;
      assert_int_equal(ops[i].u.coll.bytes * 3, (int64_t)TOY_LAYER * 3 / 4 * 2);
      assert_int_equal(ops[i].u.coll.group.size, 4);
    }
  }
  assert_int_equal(layer_gathers, 2 * 2); /* 2 layers, forward and backward */
  assert_true(before_gemm >= 2);          /* the embedding's and the first layer's */
  bs_plan_free(p);

  /* a zero the user gave wins; prefill takes none */
  c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, BS_TRAIN);
  c.work.framework = BS_FW_TORCHTITAN;
  c.par.zero = 1;
  bs_framework_defaults(&c, BS_FW_KEY_ZERO);
  assert_int_equal(c.par.zero, 1);
  assert_false(c.work.framework_applied & BS_FW_KEY_ZERO);
  c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, BS_PREFILL);
  c.work.framework = BS_FW_TORCHTITAN;
  bs_framework_defaults(&c, 0);
  assert_int_equal(c.par.zero, 0);
  /* megatron sets nothing */
  c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, BS_TRAIN);
  bs_framework_defaults(&c, 0);
  assert_int_equal(c.par.zero, 0);
  assert_int_equal(c.model.attention_kernel, BS_ATTN_KERNEL_DEFAULT);
  assert_int_equal(c.work.framework_applied, 0u);
}

/* The MAX all-reduces of fp32 amaxes on rank 0: their count and their bytes summed. */
static void amax_ops(bs_fp8 fp8, bs_framework f, bs_phase ph, int *count, int64_t *bytes, int64_t *first) {
  bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, ph);
  c.model.fp8 = fp8;
  c.work.framework = f;
  bs_plan *p = toy_plan_make(&c);
  int n = ops_of_rank(p, 0);
  *count = 0;
  *bytes = 0;
  *first = 0;
  for (int i = 0; i < n; i++)
    if (ops[i].kind == BS_OP_COLL && ops[i].u.coll.red == BS_RED_MAX && ops[i].u.coll.elem == BS_ELEM_F32) {
      assert_int_equal(ops[i].u.coll.kind, BS_COLL_ALLREDUCE);
      assert_int_equal(ops[i].u.coll.group.size, 4); /* tp x cp x dp of the stage: cp 4 */
      if (!*count) *first = ops[i].u.coll.bytes;
      ++*count;
      *bytes += ops[i].u.coll.bytes;
      /* blocking: its wait comes next */
      assert_true(i + 1 < n && ops[i + 1].kind == BS_OP_WAIT && ops[i + 1].u.wait.handles[0] == ops[i].handle);
    }
  bs_plan_free(p);
}

/* Transformer Engine's amax reduction: fp8 = ffn puts the 2 MLP GEMMs of each of 2 layers in FP8,
 * 4 GEMMs, so 3 x 4 x 4 = 48 bytes of forward amaxes after the forward and 2 x 4 x 4 = 32 after
 * the backward; fp8 = all doubles the GEMMs (96 and 64); inference (row-wise scales) none;
 * torchtitan (torchao's dynamic scaling) and fp8 = off none. */
static void test_fp8_amax(void **st) {
  (void)st;
  int k;
  int64_t b, first;
  amax_ops(BS_FP8_FFN, BS_FW_MEGATRON, BS_TRAIN, &k, &b, &first);
  assert_int_equal(k, 2);
  assert_int_equal(first, 48);
  assert_int_equal(b, 48 + 32);
  amax_ops(BS_FP8_ALL, BS_FW_DEEPSPEED, BS_TRAIN, &k, &b, &first);
  assert_int_equal(k, 2);
  assert_int_equal(first, 96);
  assert_int_equal(b, 96 + 64);
  amax_ops(BS_FP8_FFN, BS_FW_MEGATRON, BS_PREFILL, &k, &b, &first);
  assert_int_equal(k, 0);
  amax_ops(BS_FP8_FFN, BS_FW_TORCHTITAN, BS_TRAIN, &k, &b, &first);
  assert_int_equal(k, 0);
  amax_ops(BS_FP8_OFF, BS_FW_MEGATRON, BS_TRAIN, &k, &b, &first);
  assert_int_equal(k, 0);
}

/* Composed tp 2 x cp 2 x dp 2 x pp 2 (16 ranks, tp fastest) with fp8 = ffn: on every rank the amax
 * all-reduce runs over the 8 ranks of its pipeline stage (tp x cp x dp: ranks 0-7 or 8-15), 4 bytes
 * x 3 x the 2 MLP GEMMs of the stage's one layer = 24 bytes after each microbatch's forward, 16
 * after its backward, 2 microbatches a replica. (The simulator runs such points to their end:
 * tests/golden/composed.ini holds fp8 = ffn over tp x cp x dp x pp.) */
static void test_amax_composed(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_RING, 16, BS_SCOPE_MODEL, BS_TRAIN);
  c.model.fp8 = BS_FP8_FFN;
  c.par.tp = 2;
  c.par.dp = 2;
  c.par.pp = 2;
  c.work.batch = 4;
  c.par.micro_batch = 1;
  bs_plan *p = toy_plan_make(&c);
  for (int r = 0; r < 16; r++) {
    int n = ops_of_rank(p, r), k = 0;
    int64_t sum = 0;
    for (int i = 0; i < n; i++)
      if (ops[i].kind == BS_OP_COLL && ops[i].u.coll.red == BS_RED_MAX) {
        assert_int_equal(ops[i].u.coll.group.first, r / 8 * 8);
        assert_int_equal(ops[i].u.coll.group.stride, 1);
        assert_int_equal(ops[i].u.coll.group.size, 8);
        sum += ops[i].u.coll.bytes;
        k++;
      }
    assert_int_equal(k, 2 * 2);
    assert_int_equal(sum, 2 * (24 + 16));
  }
  bs_plan_free(p);
}

/* Whether every layer's gradient reduction (TOY_LAYER x 4 bytes of fp32 main gradients, model
 * scope) is waited by the op right after it; how many there were through *count. */
static int grads_waited_at_once(bs_framework f, int zero, int *count) {
  bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, BS_TRAIN);
  c.work.framework = f;
  c.par.zero = zero;
  bs_plan *p = toy_plan_make(&c);
  int n = ops_of_rank(p, 0), all = 1;
  *count = 0;
  for (int i = 0; i < n; i++) {
    if (ops[i].kind != BS_OP_COLL || ops[i].u.coll.red != BS_RED_SUM) continue;
    int k = ops[i].u.coll.kind;
    if ((zero == 0 && k != BS_COLL_ALLREDUCE) || (zero > 0 && k != BS_COLL_REDUCE_SCATTER)) continue;
    if (ops[i].u.coll.bytes != (int64_t)TOY_LAYER * 4) continue;
    ++*count;
    all &= i + 1 < n && ops[i + 1].kind == BS_OP_WAIT && ops[i + 1].u.wait.handles[0] == ops[i].handle;
  }
  bs_plan_free(p);
  return all;
}

/* DeepSpeed without overlap_comm (its default below stage 3): the gradient reduction runs in the
 * compute stream, waited as soon as it is posted; megatron and torchtitan overlap it (waited after
 * the next set's backward); DeepSpeed at stage 3 overlaps it too. */
static void test_grad_overlap(void **st) {
  (void)st;
  int k;
  assert_true(grads_waited_at_once(BS_FW_DEEPSPEED, 0, &k));
  assert_int_equal(k, 2); /* one a layer */
  assert_true(grads_waited_at_once(BS_FW_DEEPSPEED, 2, &k));
  assert_int_equal(k, 2);
  assert_false(grads_waited_at_once(BS_FW_MEGATRON, 0, &k));
  assert_int_equal(k, 2);
  assert_false(grads_waited_at_once(BS_FW_DEEPSPEED, 3, &k));
  assert_false(grads_waited_at_once(BS_FW_TORCHTITAN, 3, &k));
  assert_true(bs_framework_grad_overlap(BS_FW_MEGATRON, 0));
  assert_false(bs_framework_grad_overlap(BS_FW_DEEPSPEED, 1));
}

/* model.attention_kernel = default per framework; a kernel given stays. */
static void test_default_kernel(void **st) {
  (void)st;
  static const bs_attn_kernel want[BS_FW_COUNT] = {BS_ATTN_KERNEL_DEFAULT, BS_ATTN_KERNEL_CUDNN, BS_ATTN_KERNEL_FA2};
  for (int f = 0; f < BS_FW_COUNT; f++) {
    bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, BS_TRAIN);
    c.work.framework = (bs_framework)f;
    bs_framework_defaults(&c, 0);
    assert_int_equal(c.model.attention_kernel, want[f]);
    assert_int_equal(!!(c.work.framework_applied & BS_FW_KEY_KERNEL), f != BS_FW_MEGATRON);
    c.model.attention_kernel = BS_ATTN_KERNEL_FA3;
    bs_framework_defaults(&c, 0);
    assert_int_equal(c.model.attention_kernel, BS_ATTN_KERNEL_FA3);
    assert_false(c.work.framework_applied & BS_FW_KEY_KERNEL);
  }
  assert_string_equal(bs_framework_name(BS_FW_TORCHTITAN), "torchtitan");
}

/* torchtitan's context parallelism (torch's context_parallel, rotate method allgather, head-tail load
 * balance) where the scenario gives no method: allgather over zigzag shards, in training only, and
 * not where allgather does not run (packed documents, MLA) or a method or layout is given; the
 * plan the default makes builds. */
static void test_cp_rotation(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
  c.work.framework = BS_FW_TORCHTITAN;
  bs_framework_defaults(&c, 0);
  assert_int_equal(c.par.method, BS_ALLGATHER);
  assert_int_equal(c.par.layout, BS_ZIGZAG);
  assert_int_equal(c.work.framework_applied & (BS_FW_KEY_METHOD | BS_FW_KEY_LAYOUT),
                   BS_FW_KEY_METHOD | BS_FW_KEY_LAYOUT);
  bs_plan *p = toy_plan_make(&c);
  assert_non_null(p);
  bs_plan_free(p);

  /* a layout given stays (striped is one allgather takes), a method given stays */
  c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
  c.work.framework = BS_FW_TORCHTITAN;
  c.par.layout = BS_STRIPED;
  bs_framework_defaults(&c, BS_FW_KEY_LAYOUT);
  assert_int_equal(c.par.method, BS_ALLGATHER);
  assert_int_equal(c.par.layout, BS_STRIPED);
  assert_false(c.work.framework_applied & BS_FW_KEY_LAYOUT);
  c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
  c.work.framework = BS_FW_TORCHTITAN;
  bs_framework_defaults(&c, BS_FW_KEY_METHOD);
  assert_int_equal(c.par.method, BS_BURST);
  assert_false(c.work.framework_applied & BS_FW_KEY_METHOD);

  /* not in prefill, not with packed documents or MLA, not under another framework */
  c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_PREFILL);
  c.work.framework = BS_FW_TORCHTITAN;
  bs_framework_defaults(&c, 0);
  assert_int_equal(c.par.method, BS_BURST);
  c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
  c.work.framework = BS_FW_TORCHTITAN;
  c.work.docs = 2;
  bs_framework_defaults(&c, 0);
  assert_int_equal(c.par.method, BS_BURST);
  c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
  c.work.framework = BS_FW_TORCHTITAN;
  c.model.attention = BS_ATTENTION_MLA;
  bs_framework_defaults(&c, 0);
  assert_int_equal(c.par.method, BS_BURST);
  for (int f = 0; f < BS_FW_COUNT; f++) {
    if (f == BS_FW_TORCHTITAN) continue;
    c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
    c.work.framework = (bs_framework)f;
    bs_framework_defaults(&c, 0);
    assert_int_equal(c.par.method, BS_BURST);
    assert_int_equal(c.par.layout, plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN).par.layout);
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_fsdp_gathers), cmocka_unit_test(test_fp8_amax),       cmocka_unit_test(test_amax_composed),
    cmocka_unit_test(test_grad_overlap), cmocka_unit_test(test_default_kernel), cmocka_unit_test(test_cp_rotation),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
