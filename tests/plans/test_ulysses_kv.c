/*
 * test_ulysses_kv.c — Ulysses and USP with more ranks per all-to-all group than KV heads, on a toy
 * model computed by hand: 8 query heads, 2 KV heads, head dim 4, 16 tokens, one sequence, bf16.
 *
 * ulysses on G = 4 ranks (rep = 4 / 2 = 2: rank r receives KV head r / 2), n = 16 / 4 = 4 tokens a
 * rank. Each all-to-all buffer moves 3/4 of itself (ring convention). Forward:
 *   Q   8 heads x 4 x 4 x 2 B = 256 B -> 192
 *   K   repeated to 4 heads: 4 x 4 x 4 x 2 B = 128 B -> 96 (64 B -> 48 without the repeat)
 *   V   the same, 96
 *   O   fp32, 8 x 4 x 4 x 4 B = 512 B -> 384
 *   forward 192 + 96 + 96 + 384 = 768 B a rank
 * Backward: dO 192, dQ (fp32) 384, dK and dV (fp32, 4 heads x 4 x 4 x 4 B = 256 B) 192 each:
 *   backward 192 + 384 + 192 + 192 = 960 B; train 1728 B a rank.
 * A rank's head-sharded K is one head of 16 tokens: 16 x 4 x 2 B = 128 B (its dK 256 B fp32); the
 * replicas are made by 4 copies of one head's 4 tokens (32 B) each for K and V, and summed in the
 * backward by 4 fp32 adds of 4 x 4 = 16 elements each for dK and dV.
 * Prefill's peak is the O all-to-all: inputs q 256 + k 64 + v 64 = 384 B; head-sharded q 256, k and
 * v 128 each (the repeated head), o 2 heads x 16 x 4 x 4 B = 512: 1024 B of activations; lse 128 and
 * the sequence-sharded o 512: 640 B of outputs; o's packed send 512 B: 2560 B.
 *
 * usp on G = 8 ranks, ulysses_degree 4 (two groups, rep 2), n = 2 tokens a rank. All-to-all, forward:
 * Q 128 B -> 96, K and V 4 x 2 x 4 x 2 B = 64 B -> 48 each, O 256 B -> 192: 384; backward dO 96,
 * dQ 192, dK and dV 128 B -> 96 each: 480; 864 B. The ring across the two groups passes one KV head
 * of the group's 8 tokens, 8 x 4 x 2 B = 64 B a block: forward K and V once (128 B), backward K and V
 * once (128 B) and dK, dV (fp32, 128 B each) twice, their last hop the return (512 B): 768 B p2p.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/run_named.h"

#include <string.h>

#include "plans/plan.h"
#include "plan_walk.h"

static bs_config toy(bs_method m, int gpus, int degree, bs_phase ph) {
  bs_config c;
  bs_config_default(&c);
  c.model.preset[0] = '\0';
  c.model.heads = 8;
  c.model.kv_heads = 2;
  c.model.head_dim = 4;
  c.model.dtype = BS_BF16;
  c.work.seq_len = 16;
  c.work.batch = 1;
  c.work.causal = 1;
  c.work.phase = ph;
  c.par.method = m;
  c.par.gpus = gpus;
  c.par.ulysses_degree = degree;
  c.par.layout = BS_CONTIGUOUS;
  c.par.double_ring = BS_OFF;
  c.par.ranks_per_node = gpus;
  return c;
}

static void walk(const bs_config *c, walk_result *w) {
  bs_plan *p = NULL;
  char err[256] = "";
  int rc = bs_plan_create(c, c->par.ranks_per_node, &p, err, sizeof err);
  if (rc) fprintf(stderr, "plan refused: %s\n", err);
  assert_int_equal(rc, 0);
  rc = plan_walk(p, w);
  if (rc) fprintf(stderr, "walk: %s\n", w->err);
  assert_int_equal(rc, 0);
  bs_plan_free(p);
}

/* Bytes a rank sends: forward (prefill) and forward plus backward (train), by hand above. */
static void test_ulysses_bytes(void **st) {
  (void)st;
  walk_result w;
  bs_config c = toy(BS_ULYSSES, 4, 0, BS_PREFILL);
  walk(&c, &w);
  for (int r = 0; r < 4; r++) {
    assert_int_equal(w.coll_sent[r], 768);
    assert_int_equal(w.coll_bytes[r][BS_COLL_ALLTOALL], 256 + 128 + 128 + 512);
    assert_int_equal(w.sent[r], 0);
    assert_int_equal(w.peak[r], 2560);
    assert_int_equal(w.peak_cls[r][BS_MEM_INPUT], 384);
    assert_int_equal(w.peak_cls[r][BS_MEM_ACTIVATIONS], 1024);
    assert_int_equal(w.peak_cls[r][BS_MEM_OUTPUT], 640);
    assert_int_equal(w.peak_cls[r][BS_MEM_COMM], 512);
  }
  c.work.phase = BS_TRAIN;
  walk(&c, &w);
  for (int r = 0; r < 4; r++) {
    assert_int_equal(w.coll_sent[r], 768 + 960);
    assert_int_equal(w.ncoll[r][BS_COLL_ALLTOALL], 8);
    assert_int_equal(w.sent[r], 0);
  }
}

/* Rank r's head-sharded K is its one KV head r / 2 (128 B), dK 256 B; the repeat and the sum. */
static void test_ulysses_buffers(void **st) {
  (void)st;
  bs_config c = toy(BS_ULYSSES, 4, 0, BS_TRAIN);
  bs_plan *p;
  char err[256];
  assert_int_equal(bs_plan_create(&c, 4, &p, err, sizeof err), 0);
  for (int r = 0; r < 4; r++) {
    bs_plan_iter *it = bs_plan_iter_new(p, r);
    bs_op op;
    int copies = 0, adds = 0, attn = 0;
    while (bs_plan_next(it, &op)) {
      if (op.kind == BS_OP_ALLOC && op.u.alloc.role == BS_ROLE_K) {
        assert_int_equal(op.u.alloc.bytes, 2 * 4 * 4 * 2); /* the input: 2 heads x 4 tokens */
        assert_int_equal(op.u.alloc.shard.heads, 2);
      }
      if (op.kind != BS_OP_COMPUTE) continue;
      const bs_compute *k = &op.u.compute;
      if (k->kernel == BS_K_COPY && k->t_a == 0 && k->elems == 4 * 4 * 2) copies++;
      if (k->kernel == BS_K_ELEMWISE && k->ew == BS_EW_ADD) {
        assert_int_equal(k->elems, 4 * 4);
        adds++;
      }
      if (k->kernel == BS_K_ATTN_FWD || k->kernel == BS_K_ATTN_BWD) {
        assert_int_equal(k->a.Zq, 2); /* 8 / 4 query heads */
        assert_int_equal(k->a.Zkv, 1);
        assert_int_equal(k->a.Nk, 16);
        attn++;
      }
    }
    assert_int_equal(copies, 2 * 4); /* K and V: 4 blocks each */
    assert_int_equal(adds, 2 * 4);   /* dK and dV: 4 replicas each */
    assert_true(attn >= 2);
    bs_plan_iter_free(it);
  }
  bs_plan_free(p);
}

/* usp: the all-to-all inside groups of 4, the ring of one KV head across the 2 groups. */
static void test_usp_bytes(void **st) {
  (void)st;
  walk_result w;
  bs_config c = toy(BS_USP, 8, 4, BS_TRAIN);
  for (int pl = 0; pl < 2; pl++) {
    c.par.ulysses_placement = pl ? BS_RING_FIRST : BS_HEAD_FIRST;
    walk(&c, &w);
    for (int r = 0; r < 8; r++) {
      assert_int_equal(w.coll_sent[r], 384 + 480);
      assert_int_equal(w.sent[r], 128 + 128 + 512);
    }
  }
}

/* Cases still impossible, each with its reason. */
static void test_refused(void **st) {
  (void)st;
  bs_plan *p = NULL;
  char err[256];
  bs_config c = toy(BS_ULYSSES, 16, 0, BS_TRAIN); /* 16 ranks, 8 query heads */
  c.work.seq_len = 64;
  assert_int_equal(bs_plan_create(&c, 16, &p, err, sizeof err), -1);
  assert_string_equal(err, "parallel.gpus: ulysses needs gpus <= heads: 16 > 8");
  c = toy(BS_ULYSSES, 3, 0, BS_TRAIN); /* 3 does not divide 8 */
  c.work.seq_len = 48;
  assert_int_equal(bs_plan_create(&c, 3, &p, err, sizeof err), -1);
  assert_string_equal(err, "parallel.gpus: 3 does not divide heads 8 (ulysses scatters whole query heads)");
  c = toy(BS_ULYSSES, 6, 0, BS_TRAIN); /* 6 divides 12 query heads; 4 KV heads neither divide 6 nor are its multiple */
  c.model.heads = 12;
  c.model.kv_heads = 4;
  c.work.seq_len = 48;
  assert_int_equal(bs_plan_create(&c, 6, &p, err, sizeof err), -1);
  assert_string_equal(err,
                      "parallel.gpus: 6 must divide kv_heads 4, or be a multiple of it (then each KV head is "
                      "replicated on gpus / kv_heads ranks)");
  c = toy(BS_USP, 12, 3, BS_TRAIN);
  c.model.heads = 12;
  c.work.seq_len = 48;
  assert_int_equal(bs_plan_create(&c, 12, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "parallel.ulysses_degree: 3 must divide kv_heads 2, or be a multiple of it"));
  assert_null(p);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_ulysses_bytes),
    cmocka_unit_test(test_ulysses_buffers),
    cmocka_unit_test(test_usp_bytes),
    cmocka_unit_test(test_refused),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
