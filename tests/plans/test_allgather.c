/*
 * test_allgather.c — method allgather (plans/allgather.c) against numbers worked out by hand: the
 * bytes a rank sends in the forward and the backward of a toy layer, the gathered K,V in the peak
 * memory, the FLOPs against ring's (same kernels, same skipped blocks), its walk at layer and model
 * scope and composed with tp and dp, and the combinations it refuses with the key to change.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "plans/plan.h"
#include "plans/plan_impl.h"
#include "plan_walk.h"

/* The toy: batch 1, 1024 tokens, 8 query heads, 2 KV heads, head_dim 64, bf16, causal, cp of 4. */
static bs_config toy(bs_layout l, bs_phase ph) {
  bs_config c;
  bs_config_default(&c);
  c.model.heads = 8;
  c.model.kv_heads = 2;
  c.model.head_dim = 64;
  c.model.dtype = BS_BF16;
  c.work.batch = 1;
  c.work.seq_len = 1024;
  c.work.causal = 1;
  c.work.phase = ph;
  c.par.method = BS_ALLGATHER;
  c.par.gpus = 4;
  c.par.layout = l;
  c.par.double_ring = BS_OFF;
  c.par.ranks_per_node = 4;
  return c;
}

static void walk_ok(const bs_config *c, walk_result *w) {
  bs_plan *p = NULL;
  char err[320] = "";
  int rc = bs_plan_create(c, c->par.ranks_per_node, &p, err, sizeof err);
  if (rc) fprintf(stderr, "plan_create(%s): %s\n", bs_method_name(c->par.method), err);
  assert_int_equal(rc, 0);
  rc = plan_walk(p, w);
  if (rc) fprintf(stderr, "walk: %s\n", w->err);
  assert_int_equal(rc, 0);
  bs_plan_free(p);
}

/*
 * By hand. K and V of the whole sequence: 2 (K, V) x 1 x 2 heads x 1024 tokens x 64 x 2 bytes =
 * 524,288 bytes; a rank holds a quarter (131,072) and receives the other three quarters, and in the
 * ring convention of an all-gather sends as much: 3/4 x 524,288 = 393,216 bytes in the forward.
 * The backward gathers K, V again (393,216) and reduce-scatters the dK, dV partials of the whole
 * sequence in fp32 (1,048,576 bytes): 3/4 of them, 786,432 bytes. Train: 1,572,864 bytes a rank.
 * Peak of the collective buffers: the gathered K, V (524,288) and, in the backward, the dK, dV
 * partials with them (524,288 + 1,048,576 = 1,572,864). No point-to-point byte.
 */
static void test_toy_bytes(void **st) {
  (void)st;
  for (int l = 0; l <= BS_STRIPED; l++) {
    bs_config c = toy((bs_layout)l, BS_PREFILL);
    walk_result w;
    walk_ok(&c, &w);
    for (int r = 0; r < 4; r++) {
      assert_int_equal(w.coll_sent[r], 393216);
      assert_int_equal(w.sent[r], 0);
      assert_int_equal(w.ncoll[r][BS_COLL_ALLGATHER], 2);
      assert_int_equal(w.peak_cls[r][BS_MEM_COMM], 524288);
    }
    c.work.phase = BS_TRAIN;
    walk_ok(&c, &w);
    for (int r = 0; r < 4; r++) {
      assert_int_equal(w.coll_sent[r], 1572864);
      assert_int_equal(w.sent[r], 0);
      assert_int_equal(w.ncoll[r][BS_COLL_ALLGATHER], 4);
      assert_int_equal(w.ncoll[r][BS_COLL_REDUCE_SCATTER], 2);
      assert_int_equal(w.peak_cls[r][BS_MEM_COMM], 1572864);
    }
  }
}

/* The same kernels on the same blocks as ring: each rank's FLOPs equal ring's in every layout, and
 * causal zigzag balances them exactly (each rank: 1024 x 1025 / 2 / 4 pairs). */
static void test_flops_as_ring(void **st) {
  (void)st;
  for (int l = 0; l <= BS_STRIPED; l++)
    for (int causal = 0; causal < 2; causal++) {
      bs_config c = toy((bs_layout)l, BS_TRAIN);
      c.work.causal = causal;
      walk_result a, r;
      walk_ok(&c, &a);
      c.par.method = BS_RING;
      walk_ok(&c, &r);
      for (int k = 0; k < 4; k++) {
        assert_true(a.flops[k] > 0);
        assert_true(fabs(a.flops[k] - r.flops[k]) <= 1e-9 * r.flops[k]);
      }
    }
  bs_config c = toy(BS_ZIGZAG, BS_PREFILL);
  walk_result w;
  walk_ok(&c, &w);
  double pairs = 1024.0 * 1025.0 / 2.0 / 4.0, per_pair = 2.0 * 8 * (64 + 64);
  for (int k = 0; k < 4; k++) assert_true(fabs(w.flops[k] - pairs * per_pair) <= 1e-9 * w.flops[k]);
}

/* Bytes rank `rank` sends in collectives (the ring convention of bs_coll_bytes_sent) and in messages,
 * read off its op stream (layer and model scope free their role buffers, which plan_walk refuses). */
static void rank_bytes(const bs_config *c, int rank, int64_t *coll, int64_t *p2p, int *ngather) {
  bs_plan *p = NULL;
  char err[320] = "";
  int rc = bs_plan_create(c, c->par.ranks_per_node, &p, err, sizeof err);
  if (rc) fprintf(stderr, "plan_create: %s\n", err);
  assert_int_equal(rc, 0);
  bs_plan_iter *it = bs_plan_iter_new(p, rank);
  assert_non_null(it);
  bs_op op;
  *coll = *p2p = 0;
  *ngather = 0;
  while (bs_plan_next(it, &op)) {
    if (op.kind == BS_OP_SEND) *p2p += op.u.p2p.bytes;
    if (op.kind != BS_OP_COLL) continue;
    *coll += bs_coll_bytes_sent(op.u.coll.kind, op.u.coll.bytes, op.u.coll.group.size);
    if (op.u.coll.kind == BS_COLL_ALLGATHER) ++*ngather;
  }
  assert_int_equal(bs_plan_iter_error(it), 0);
  bs_plan_iter_free(it);
  bs_plan_free(p);
}

/* Layer and model scope, and composed tp 2 x cp 4 x dp 2 at model scope: a layer's attention adds
 * the toy's 1,572,864 collective bytes to the layer that ring runs with messages instead, and a
 * model of two layers twice that; composed, every rank gathers K,V over its cp group. */
static void test_scopes(void **st) {
  (void)st;
  bs_config c = toy(BS_ZIGZAG, BS_TRAIN);
  c.model.hidden = 512;
  c.model.ffn = 1024;
  c.model.vocab = 256;
  c.model.layers = 2;
  for (int sc = 0; sc < 2; sc++) {
    c.work.scope = sc ? BS_SCOPE_MODEL : BS_SCOPE_LAYER;
    for (int r = 0; r < 4; r++) {
      int64_t ac, ap, rc, rp;
      int ag, rg;
      c.par.method = BS_ALLGATHER;
      rank_bytes(&c, r, &ac, &ap, &ag);
      c.par.method = BS_RING;
      rank_bytes(&c, r, &rc, &rp, &rg);
      assert_int_equal(ap, 0);
      assert_true(rp > 0);
      assert_int_equal(ac - rc, (sc ? 2 : 1) * 1572864);
      assert_int_equal(ag - rg, (sc ? 2 : 1) * 4);
    }
  }
  c.par.method = BS_ALLGATHER;
  c.par.gpus = 16;
  c.par.ranks_per_node = 16;
  c.par.tp = 2;
  c.par.dp = 2;
  c.work.batch = 2;
  c.model.kv_heads = 4;
  for (int r = 0; r < 16; r++) {
    int64_t coll, p2p;
    int ng;
    rank_bytes(&c, r, &coll, &p2p, &ng);
    assert_int_equal(p2p, 0);
    assert_true(ng >= 2 * 4); /* K and V, forward and backward, each of the two layers */
  }
}

static void expect_error(bs_config c, const char *key) {
  bs_plan *p = NULL;
  char err[400] = "";
  int rc = bs_plan_create(&c, c.par.ranks_per_node, &p, err, sizeof err);
  if (rc != -1) fprintf(stderr, "no error (wanted %s)\n", key);
  assert_int_equal(rc, -1);
  assert_null(p);
  if (strncmp(err, key, strlen(key)) != 0) fprintf(stderr, "error '%s' does not start with '%s'\n", err, key);
  assert_int_equal(strncmp(err, key, strlen(key)), 0);
  assert_non_null(strstr(err, "allgather"));
}

/* What allgather does not run, each refused naming the key to change and the method. */
static void test_refused(void **st) {
  (void)st;
  bs_config c = toy(BS_CONTIGUOUS, BS_DECODE); /* no decode: the KV cache is not gathered per token */
  c.work.decode_tokens = 1;
  expect_error(c, "workload.phase:");
  c = toy(BS_ZIGZAG, BS_PREFILL); /* the queries have no ring to travel */
  c.par.cp_pass = BS_PASS_Q;
  expect_error(c, "parallel.cp_pass:");
  c = toy(BS_CONTIGUOUS, BS_PREFILL); /* prefill against a KV cache */
  c.work.cached_tokens = 512;
  expect_error(c, "workload.cached_tokens:");
  for (int l = BS_DOC_ZIGZAG; l <= BS_GREEDY; l++) { /* the balance layouts' unequal shards */
    c = toy((bs_layout)l, BS_TRAIN);
    c.work.docs = 2;
    c.work.doc_end[0] = 256;
    c.work.doc_end[1] = 1024;
    expect_error(c, "parallel.layout:");
  }
  c = toy(BS_ZIGZAG, BS_TRAIN); /* a v head dimension other than head_dim */
  c.model.v_head_dim = 32;
  expect_error(c, "parallel.method:");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_toy_bytes),
    cmocka_unit_test(test_flops_as_ring),
    cmocka_unit_test(test_scopes),
    cmocka_unit_test(test_refused),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
