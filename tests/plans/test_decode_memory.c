/*
 * test_decode_memory.c — decode and memory as serving and training jobs hold them, on the toy model
 * of plan_toy.h (hidden 64, 4 heads of 16, ffn 128) computed by hand:
 *   - a decode step of B sequences (workload.batch) at layer scope: every projection one GEMM of B
 *     rows (B = 1 is the GEMV), one attention call over the B sequences' caches, B caches held;
 *   - the KV cache's allocation (workload.kv_block, workload.max_seq_len; Kwon et al., SOSP 2023,
 *     arXiv 2309.06180): paged blocks or a contiguous reservation, in memory class kv_cache;
 *   - the GEMM inputs Transformer Engine keeps for the backward under model.fp8 (FP8 casts, 1 byte).
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
#include "plans/workload.h"

/* The live bytes of memory class `want` over rank's program: at the most, when the backward
 * begins, at the end. */
static void walk_class(const bs_plan *p, int rank, bs_mem_class want, int64_t *max_live, int64_t *at_bwd,
                       int64_t *at_end) {
  static int64_t size[BS_WL_MAX_BUFS];
  static bs_mem_class cls[BS_WL_MAX_BUFS];
  bs_plan_iter *it = bs_plan_iter_new(p, rank);
  assert_non_null(it);
  int64_t cur = 0, most = 0, bwd = -1;
  bs_op op;
  while (bs_plan_next(it, &op)) {
    if (op.kind == BS_OP_ALLOC) {
      size[op.u.alloc.buf] = op.u.alloc.bytes;
      cls[op.u.alloc.buf] = op.u.alloc.cls;
      if (op.u.alloc.cls == want && (cur += op.u.alloc.bytes) > most) most = cur;
    } else if (op.kind == BS_OP_FREE) {
      if (cls[op.u.free.buf] == want) cur -= size[op.u.free.buf];
    } else if (op.kind == BS_OP_PHASE && op.u.phase.begin && op.u.phase.fwd_bwd == 1 && bwd < 0) {
      bwd = cur;
    }
  }
  assert_int_equal(bs_plan_iter_error(it), 0);
  bs_plan_iter_free(it);
  if (max_live) *max_live = most;
  if (at_bwd) *at_bwd = bwd;
  if (at_end) *at_end = cur;
}

/* The KV cache class just before the program's last FREEs: the most it held. */
static int64_t kv_held(const bs_config *c, int rank) {
  bs_plan *p = toy_plan_make(c);
  int64_t most;
  walk_class(p, rank, BS_MEM_KV_CACHE, &most, NULL, NULL);
  bs_plan_free(p);
  return most;
}

/*
 * Tree decode at layer scope on 4 ranks against a 256-token cache: a rank holds n = 64 tokens of
 * every sequence. With B sequences a step runs the QKV projection as one GEMM of m = B rows, n =
 * (4 + 2 x 4) x 16 = 192 columns, k = 64 (B = 1: a GEMV, the profile's narrow-tile bound), the
 * output projection m = B, n = 64, k = 64, the MLP's gate/up m = B, n = 256 and down m = B, n = 64,
 * k = 128; one attention call of B sequences of one query row over the rank's 64 keys; and holds K
 * and V of B x 4 heads x 64 tokens x 16 x 2 bytes = B x 8192 bytes each, kv_cache 16384 B per
 * sequence, when the step ends.
 */
static void test_decode_batch(void **st) {
  (void)st;
  const int64_t batches[] = {1, 8, 32};
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
    int64_t B = batches[i];
    bs_config c = plan_toy(BS_TREE, 4, BS_SCOPE_LAYER, BS_DECODE);
    c.work.batch = B;
    bs_plan *p = toy_plan_make(&c);
    for (int r = 0; r < 4; r++) {
      bs_plan_iter *it = bs_plan_iter_new(p, r);
      assert_non_null(it);
      bs_op op;
      int gemms = 0, attn = 0;
      while (bs_plan_next(it, &op)) {
        if (op.kind != BS_OP_COMPUTE) continue;
        const bs_compute *k = &op.u.compute;
        if (k->kernel == BS_K_GEMM) {
          assert_int_equal(k->m, B);
          assert_true((k->n == 192 && k->k == 64) || (k->n == 64 && k->k == 64) || (k->n == 256 && k->k == 64) ||
                      (k->n == 64 && k->k == 128));
          gemms++;
        } else if (k->kernel == BS_K_ATTN_FWD) {
          assert_int_equal(k->a.B, B);
          assert_int_equal(k->a.Nq, 1);
          assert_int_equal(k->a.Nk, 64);
          attn++;
        }
      }
      assert_int_equal(bs_plan_iter_error(it), 0);
      bs_plan_iter_free(it);
      assert_int_equal(gemms, 4); /* QKV, output, gate/up, down */
      assert_int_equal(attn, 1);
      int64_t most, at_end;
      walk_class(p, r, BS_MEM_KV_CACHE, &most, NULL, &at_end);
      assert_int_equal(most, B * 16384);
      assert_int_equal(at_end, 0); /* freed when the program ends */
    }
    bs_plan_free(p);
  }
}

/*
 * The KV cache's allocation, tree decode at layer scope on 4 ranks against a 252-token cache: a
 * rank holds n = 63 tokens of each sequence, 4 heads x 16 x 2 bytes = 128 bytes per token in each
 * of K and V, B = 2 sequences: 2 x 2 x 63 x 128 = 32256 bytes as the tokens are.
 *   - kv_block 16 (vLLM's default): ceil(63 / 16) = 4 blocks, 64 token slots per sequence: 32768;
 *     kv_block 50: 2 blocks, 100 slots: 2 x 2 x 100 x 128 = 51200;
 *   - max_seq_len 1024 contiguous (FasterTransformer, Orca): the rank's share ceil(1024 x 63 / 252)
 *     = 256 slots per sequence: 2 x 2 x 256 x 128 = 131072, so 32256 of 131072 = 24.6 % holds
 *     tokens (the paper's Fig. 2 measures 20.4 to 38.2 % for such systems);
 *   - model scope: each of the 2 layers holds its own; layers x the layer's.
 */
static void test_kv_block(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_TREE, 4, BS_SCOPE_LAYER, BS_DECODE);
  c.work.seq_len = 252;
  c.work.batch = 2;
  for (int r = 0; r < 4; r++) assert_int_equal(kv_held(&c, r), 32256);
  c.work.kv_block = 16;
  for (int r = 0; r < 4; r++) assert_int_equal(kv_held(&c, r), 32768);
  c.work.kv_block = 50;
  assert_int_equal(kv_held(&c, 3), 51200);
  c.work.kv_block = 0;
  c.work.max_seq_len = 1024;
  assert_int_equal(kv_held(&c, 1), 131072);
  c.work.scope = BS_SCOPE_MODEL;
  assert_int_equal(kv_held(&c, 1), 2 * 131072);
  c.work.max_seq_len = 0;
  c.work.kv_block = 16;
  assert_int_equal(kv_held(&c, 2), 2 * 32768);
  /* a block holding the rank's tokens exactly wastes nothing: 63 tokens, blocks of 63 or 21 */
  c.work.scope = BS_SCOPE_LAYER;
  c.work.kv_block = 21;
  assert_int_equal(kv_held(&c, 0), 32256);
  /* prefill keeps its KV cache too (burst over 4 ranks, 256 tokens: 64 a rank, batch 1, K and V
   * 64 x 128 = 8192 each): blocks of 48 hold 96 slots, 2 x 96 x 128 = 24576; dropped: none */
  bs_config f = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_PREFILL);
  assert_int_equal(kv_held(&f, 0), 16384);
  f.work.kv_block = 48;
  assert_int_equal(kv_held(&f, 0), 24576);
  f.work.kv_cache = BS_KV_DROP;
  assert_int_equal(kv_held(&f, 0), 0);
  /* training keeps K and V as activations, never as a cache */
  bs_config t = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
  t.work.kv_block = 48;
  assert_int_equal(kv_held(&t, 0), 0);
  /* a reservation shorter than what a sequence holds is refused, naming the key */
  c.work.kv_block = 0;
  c.work.max_seq_len = 252; /* the step appends a token: 253 */
  bs_plan *p = NULL;
  char err[256] = "";
  assert_int_equal(bs_plan_create(&c, 4, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "workload.max_seq_len: 252 is below the 253 tokens a sequence holds"));
  c.work.max_seq_len = 253;
  assert_int_equal(kv_held(&c, 0), 32256 + 2 * 2 * 1 * 128); /* ceil(253 x 63 / 252) = 64 slots */
}

/*
 * What a training layer keeps for its backward under model.fp8 (burst over 4 ranks, 64 tokens a
 * rank, hidden 64, ffn 128, heads 4 of head_dim 8: the attention output O is 64 x 32), the
 * non-attention activations:
 *   off: layer input and residual 2 x 64 x 64 x 2 = 16384, norm outputs 2 x 64 x 64 x 2 = 16384,
 *        gate and up 64 x 256 x 2 = 32768, SwiGLU output 64 x 128 x 2 = 16384: 81920;
 *   ffn: norm2's output and SwiGLU's as FP8 casts, 64 x 64 + 64 x 128 bytes less: 81920 - 12288;
 *   all: norm1's output too (4096 less) and the output projection's FP8 copy of O (64 x 32 = 2048
 *        more): 81920 - 12288 - 2048.
 * The attention's own Q, K, V, O, lse are the same in all three, so the differences of the
 * activations held when the backward begins are these.
 */
static void test_fp8_saved(void **st) {
  (void)st;
  int64_t held[3];
  for (int f = BS_FP8_OFF; f <= BS_FP8_ALL; f++) {
    bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
    c.model.head_dim = 8;
    c.model.fp8 = (bs_fp8)f;
    bs_plan *p = toy_plan_make(&c);
    walk_class(p, 0, BS_MEM_ACTIVATIONS, NULL, &held[f], NULL);
    bs_plan_free(p);
  }
  assert_int_equal(held[BS_FP8_OFF] - held[BS_FP8_FFN], 12288);
  assert_int_equal(held[BS_FP8_FFN] - held[BS_FP8_ALL], 2048);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_decode_batch),
    cmocka_unit_test(test_kv_block),
    cmocka_unit_test(test_fp8_saved),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
