/*
 * test_memory_terms.c — the memory terms a framework holds beyond the plan's tensors, and the
 * padding of a sequence the ranks do not divide, on toy cases computed by hand (issue 35):
 *   - logits and cross-entropy (workload.cross_entropy): the LM head's logits of a rank's T tokens
 *     over its vocab share v, held from the head to its backward as Megatron's
 *     vocab_parallel_cross_entropy holds them (fp32 copy, 16-bit logits during the cast and the
 *     16-bit gradient after it) or as Transformer Engine's fused loss does (the 16-bit logits only);
 *   - the caching allocator's reserve (workload.fragmentation): peak x f / (1 - f), rounded up,
 *     at layer and model scope only (auto: f = 0.15 in training, 0 in inference), and the OOM
 *     test with it;
 *   - padding (plans/pad.c): 2^20 tokens on 24 ranks, the divisor per layout, the plan made for
 *     the padded sequence, none where no fresh sequence is split;
 *   - prefix caching (workload.cached_tokens) at layer and model scope: the projections and the LM
 *     head run over the new tokens only, around the attention plan of the cached prefill.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "plans/plan.h"
#include "plan_toy.h"
#include "plans/plan_impl.h"
#include "plans/workload.h"

typedef struct {
  int64_t max_live, at_bwd, at_end; /* bytes of the class live: most, when the backward begins, at the end */
} class_walk;

/* The live bytes of one memory class over rank's program. */
static void walk_class(const bs_plan *p, int rank, bs_mem_class want, class_walk *w) {
  memset(w, 0, sizeof *w);
  static int64_t size[BS_WL_MAX_BUFS];
  static bs_mem_class cls[BS_WL_MAX_BUFS];
  bs_plan_iter *it = bs_plan_iter_new(p, rank);
  assert_non_null(it);
  int64_t cur = 0;
  int seen_bwd = 0;
  bs_op op;
  while (bs_plan_next(it, &op)) {
    if (op.kind == BS_OP_ALLOC) {
      size[op.u.alloc.buf] = op.u.alloc.bytes;
      cls[op.u.alloc.buf] = op.u.alloc.cls;
      if (op.u.alloc.cls == want && (cur += op.u.alloc.bytes) > w->max_live) w->max_live = cur;
    } else if (op.kind == BS_OP_FREE) {
      if (cls[op.u.free.buf] == want) cur -= size[op.u.free.buf];
    } else if (op.kind == BS_OP_PHASE && op.u.phase.begin && op.u.phase.fwd_bwd == 1 && !seen_bwd) {
      seen_bwd = 1;
      w->at_bwd = cur;
    }
  }
  assert_int_equal(bs_plan_iter_error(it), 0);
  bs_plan_iter_free(it);
  w->at_end = cur;
}

/* burst over 4 ranks: T = 256 / 4 = 64 tokens a rank, v = 256 (no tp), 16-bit logits 2 bytes. */
static void test_logits(void **st) {
  (void)st;
  const int64_t T = 64, v = 256;
  struct {
    bs_cross_entropy xent;
    bs_dtype dtype;
    bs_phase phase;
    int64_t max_live, at_bwd;
  } cases[] = {
    /* Megatron: bf16 logits (2) + the fp32 copy (4) while the cast runs; the fp32 softmax kept */
    {BS_CE_UNFUSED, BS_BF16, BS_TRAIN, T * v * (2 + 4), T * v * 4},
    /* Transformer Engine's fused loss: the bf16 logits only, the gradient written into them */
    {BS_CE_FUSED, BS_BF16, BS_TRAIN, T * v * 2, T * v * 2},
    /* fp32 logits: .float() returns them unchanged, no copy */
    {BS_CE_UNFUSED, BS_FP32, BS_TRAIN, T * v * 4, T * v * 4},
    /* inference: fp32 scores for the sampling, freed at once (nothing kept, no backward) */
    {BS_CE_UNFUSED, BS_BF16, BS_PREFILL, T * v * 4, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, cases[i].phase);
    c.work.cross_entropy = cases[i].xent;
    c.model.dtype = cases[i].dtype;
    bs_plan *p = toy_plan_make(&c);
    for (int r = 0; r < 4; r++) {
      class_walk w;
      walk_class(p, r, BS_MEM_LOGITS, &w);
      assert_int_equal(w.max_live, cases[i].max_live);
      assert_int_equal(w.at_bwd, cases[i].at_bwd);
      assert_int_equal(w.at_end, 0);
    }
    bs_plan_free(p);
  }
  /* tp 2 (method tp): every rank holds the vocab's half for all 256 tokens: 256 x 128 x 6 */
  bs_config c = plan_toy(BS_TP, 2, BS_SCOPE_MODEL, BS_TRAIN);
  bs_plan *p = toy_plan_make(&c);
  class_walk w;
  walk_class(p, 1, BS_MEM_LOGITS, &w);
  assert_int_equal(w.max_live, 256 * 128 * 6);
  assert_int_equal(w.at_bwd, 256 * 128 * 4);
  bs_plan_free(p);
  /* layer scope has no head: no logits */
  c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
  p = toy_plan_make(&c);
  walk_class(p, 0, BS_MEM_LOGITS, &w);
  assert_int_equal(w.max_live, 0);
  bs_plan_free(p);
}

/* peak x f / (1 - f), rounded up: 850 B at 0.15 reserve 150 (850 is 85 % of 1000). */
static void test_reserve(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
  assert_true(c.work.fragmentation < 0 && BS_FRAGMENTATION_DEFAULT == 0.15); /* auto: 0.15 in training */
  assert_int_equal(bs_reserve_bytes(&c, 850), 150);
  c.work.phase = BS_PREFILL; /* auto: 0 in inference (no published figure) */
  assert_int_equal(bs_reserve_bytes(&c, 850), 0);
  c.work.fragmentation = 0.15; /* given: any phase */
  assert_int_equal(bs_reserve_bytes(&c, 850), 150);
  c.work.phase = BS_TRAIN;
  assert_int_equal(bs_reserve_bytes(&c, 851), 151); /* 150.18 up */
  assert_int_equal(bs_reserve_bytes(&c, 1), 1);     /* 0.18 up */
  assert_int_equal(bs_reserve_bytes(&c, 0), 0);
  c.work.fragmentation = 0.5;
  assert_int_equal(bs_reserve_bytes(&c, 1000), 1000);
  c.work.fragmentation = 0;
  assert_int_equal(bs_reserve_bytes(&c, 1000), 0);
  c.work.fragmentation = 0.15;
  c.work.scope = BS_SCOPE_MODEL;
  assert_int_equal(bs_reserve_bytes(&c, 850), 150);
  c.work.scope = BS_SCOPE_ATTENTION; /* no framework's allocator: the plan's bytes as they are */
  assert_int_equal(bs_reserve_bytes(&c, 850), 0);
  /* OOM: 850 + 150 fits 1000, 851 + 151 does not; at attention scope 1000 fits 1000 */
  c.work.scope = BS_SCOPE_LAYER;
  assert_false(bs_mem_over(&c, 850, 1000));
  assert_true(bs_mem_over(&c, 851, 1000));
  c.work.scope = BS_SCOPE_ATTENTION;
  assert_false(bs_mem_over(&c, 1000, 1000));
  assert_true(bs_mem_over(&c, 1001, 1000));
}

/* 2^20 tokens on 24 ranks: 1048576 = 24 x 43690 + 16, so 8 tokens pad to 24 x 43691; zigzag cuts
 * 48 pieces (1048576 = 48 x 21845 + 16: 32 tokens). */
static void test_padding(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_RING, 24, BS_SCOPE_ATTENTION, BS_TRAIN);
  c.work.seq_len = 1 << 20;
  assert_int_equal(bs_seq_divisor(&c), 24);
  assert_int_equal(bs_seq_pad(&c), 8);
  bs_plan *p = toy_plan_make(&c);
  assert_int_equal(p->N, (1 << 20) + 8);
  assert_int_equal(p->cfg.work.seq_len, (1 << 20) + 8);
  bs_plan_free(p);
  c.par.layout = BS_ZIGZAG;
  assert_int_equal(bs_seq_divisor(&c), 48);
  assert_int_equal(bs_seq_pad(&c), 32);
  p = toy_plan_make(&c);
  assert_int_equal(p->N, (1 << 20) + 32);
  bs_plan_free(p);
  /* a sequence the ranks divide: no pad, the plan as before */
  c.work.seq_len = 48 * 1000;
  assert_int_equal(bs_seq_pad(&c), 0);
  /* ulysses and burst alike split over the G ranks */
  c = plan_toy(BS_ULYSSES, 4, BS_SCOPE_ATTENTION, BS_PREFILL);
  c.work.seq_len = 1001;
  assert_int_equal(bs_seq_pad(&c), 3);
  p = toy_plan_make(&c);
  assert_int_equal(p->N, 1004);
  bs_plan_free(p);
  /* method tp: v1 splits no sequence (nothing to pad), v3 over the gpus */
  c = plan_toy(BS_TP, 4, BS_SCOPE_ATTENTION, BS_TRAIN);
  c.work.seq_len = 1001;
  c.par.tp_variant = 1;
  assert_int_equal(bs_seq_pad(&c), 0);
  c.par.tp_variant = 3;
  assert_int_equal(bs_seq_pad(&c), 3);
  /* composed cp 2 x tp 2 under sequence parallelism at layer scope: each rank's N / 2 tokens split
   * over tp again, a multiple of 4 (Megatron: tp x cp x 2 with zigzag, 8) */
  c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
  c.par.tp = 2;
  c.par.tp_variant = 3;
  c.work.seq_len = 1001;
  assert_int_equal(bs_seq_divisor(&c), 4);
  assert_int_equal(bs_seq_pad(&c), 3);
  c.par.layout = BS_ZIGZAG;
  assert_int_equal(bs_seq_divisor(&c), 4); /* lcm(2 x cp, cp x tp) = 4 */
  p = toy_plan_make(&c);
  assert_int_equal(p->N, 1004);
  bs_plan_free(p);
  /* no padding where no fresh sequence is split: decode, a cached prefix */
  c = plan_toy(BS_RING, 4, BS_SCOPE_ATTENTION, BS_DECODE);
  c.work.seq_len = 1001;
  assert_int_equal(bs_seq_pad(&c), 0);
  c = plan_toy(BS_RING, 4, BS_SCOPE_ATTENTION, BS_PREFILL);
  c.work.seq_len = 1001;
  c.work.cached_tokens = 500;
  assert_int_equal(bs_seq_pad(&c), 0);
}

/* GEMM and attention FLOPs of rank's program. */
static void flops_of(const bs_plan *p, int rank, double *gemm, double *attn) {
  *gemm = *attn = 0;
  bs_plan_iter *it = bs_plan_iter_new(p, rank);
  assert_non_null(it);
  bs_op op;
  while (bs_plan_next(it, &op))
    if (op.kind == BS_OP_COMPUTE && op.u.compute.kernel == BS_K_GEMM) *gemm += op.u.compute.flops;
    else if (op.kind == BS_OP_COMPUTE && op.u.compute.kernel <= BS_K_ATTN_BWD_UNFUSED) *attn += op.u.compute.flops;
  assert_int_equal(bs_plan_iter_error(it), 0);
  bs_plan_iter_free(it);
}

/* 256 tokens, 128 of them cached, on 4 ranks (contiguous: 32 cached and 32 new a rank). A layer's
 * forward GEMMs run over the 32 new tokens: QKV 2 T h (a + 2 a_kv) d, output 2 T a d h, gate/up
 * 2 T h 2F, down 2 T F h = 2 x 32 x 64 x (192 + 64 + 256 + 128) = 2,621,440 FLOPs; the attention is
 * the attention-scope plan's with the same cache; the model adds the LM head over the new tokens,
 * 2 x 32 x 64 x 256 = 1,048,576 per rank and 2 layers. Before: refused at layer and model scope. */
static void test_cached_layer(void **st) {
  (void)st;
  for (int pass = BS_PASS_KV; pass <= BS_PASS_Q; pass++) {
    bs_config c = plan_toy(BS_RING, 4, BS_SCOPE_LAYER, BS_PREFILL);
    c.work.cached_tokens = 128;
    c.par.cp_pass = (bs_cp_pass)pass;
    bs_plan *p = toy_plan_make(&c);
    bs_config a = c;
    a.work.scope = BS_SCOPE_ATTENTION;
    bs_plan *pa = toy_plan_make(&a);
    c.work.scope = BS_SCOPE_MODEL;
    bs_plan *pm = toy_plan_make(&c);
    for (int r = 0; r < 4; r++) {
      double g, at, ga, aa, gm, am;
      flops_of(p, r, &g, &at);
      flops_of(pa, r, &ga, &aa);
      flops_of(pm, r, &gm, &am);
      assert_true(g == 2621440.0);
      assert_true(at == aa && aa > 0);
      assert_true(gm == 2 * 2621440.0 + 1048576.0);
      assert_true(am == 2 * aa);
    }
    bs_plan_free(pm);
    bs_plan_free(pa);
    bs_plan_free(p);
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_logits),
    cmocka_unit_test(test_reserve),
    cmocka_unit_test(test_padding),
    cmocka_unit_test(test_cached_layer),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
