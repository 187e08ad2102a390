/*
 * test_moe.c — the mixture-of-experts layer (plans/workload_moe.c) on a toy model by hand: the
 * all-to-all bytes of dispatch and combine (top_k x tokens x hidden x bytes, forward and
 * backward), the experts' GEMM FLOPs per rank (uniform, skewed, under tp), the capacity factor's
 * padded blocks, the experts' memory per GPU and their gradient reduction over the
 * expert-data-parallel group, and the errors of bad values. Every rank's program is walked:
 * ALLOC and FREE paired, every handle waited, and the members of an all-to-all group post the same
 * all-to-alls (the simulator's and the runtime's tests run them against each other).
 *
 * Toy: hidden 64, 4 heads of 16, 4 experts of moe_ffn 32, top 2, sequence 64, ring over cp = 2,
 * dp = 2 (4 ranks), ep = 2, one layer, train: a rank holds T = 32 tokens.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "plans/plan.h"
#include "plan_toy.h"
#include "plans/workload.h"

/* The plans tests' toy model as one MoE layer: 4 experts of 32 (top 2), 64 tokens x 2 sequences on
 * 4 ranks, dp 2 x ep 2. */
static bs_config toy(void) {
  bs_config c = plan_toy(BS_RING, 4, BS_SCOPE_LAYER, BS_TRAIN);
  c.model.layers = 1;
  c.model.experts = 4;
  c.model.top_k = 2;
  c.model.moe_ffn = 32;
  c.work.seq_len = 64;
  c.work.batch = 2;
  c.par.dp = 2;
  c.par.ep = 2;
  return c;
}

typedef struct {
  double expert_flops;        /* GEMMs labelled "expert ..." */
  int64_t a2a_bytes, a2a_n;   /* ALLTOALL ops: their bytes (send buffer) and count */
  int a2a_size;               /* the all-to-all's group size */
  int64_t ar_bytes[5];        /* ALLREDUCE bytes by group size */
  int64_t ag_bytes, rs_bytes; /* ALLGATHER / REDUCE_SCATTER bytes by group size 2 (tp in the tp toy) */
  int64_t weights, grads, opt[3];
  int64_t a2a_seq[16][2]; /* the first all-to-alls: group first, bytes */
} moe_walk;

static void walk(const bs_plan *p, int rank, moe_walk *w) {
  memset(w, 0, sizeof *w);
  bs_plan_iter *it = bs_plan_iter_new(p, rank);
  assert_non_null(it);
  bs_op op;
  int nalloc = 0;
  static char live[BS_WL_MAX_BUFS], hlive[BS_WL_MAX_HANDLES];
  memset(live, 0, sizeof live);
  memset(hlive, 0, sizeof hlive);
  while (bs_plan_next(it, &op)) {
    if (op.kind == BS_OP_ALLOC) {
      assert_false(live[op.u.alloc.buf]);
      live[op.u.alloc.buf] = 1;
    } else if (op.kind == BS_OP_FREE) {
      assert_true(live[op.u.free.buf]);
      live[op.u.free.buf] = 0;
    } else if (op.kind == BS_OP_COLL || op.kind == BS_OP_SEND || op.kind == BS_OP_RECV) {
      assert_false(hlive[op.handle]);
      hlive[op.handle] = 1;
    } else if (op.kind == BS_OP_WAIT) {
      for (int j = 0; j < op.u.wait.n; j++) {
        assert_true(hlive[op.u.wait.handles[j]]);
        hlive[op.u.wait.handles[j]] = 0;
      }
    }
    if (op.kind == BS_OP_ALLOC) {
      if (nalloc == 0) w->weights = op.u.alloc.bytes;
      if (nalloc == 1) w->grads = op.u.alloc.bytes;
      if (nalloc >= 2 && nalloc < 5) w->opt[nalloc - 2] = op.u.alloc.bytes;
      nalloc++;
    } else if (op.kind == BS_OP_COMPUTE && op.u.compute.kernel == BS_K_GEMM && op.u.compute.label &&
               !strncmp(op.u.compute.label, "expert", 6)) {
      w->expert_flops += op.u.compute.flops;
    } else if (op.kind == BS_OP_COLL) {
      int s = op.u.coll.group.size;
      if (op.u.coll.kind == BS_COLL_ALLTOALL) {
        if (w->a2a_n < 16) {
          w->a2a_seq[w->a2a_n][0] = op.u.coll.group.first;
          w->a2a_seq[w->a2a_n][1] = op.u.coll.bytes;
        }
        w->a2a_bytes += op.u.coll.bytes;
        w->a2a_n++;
        w->a2a_size = s;
      } else if (op.u.coll.kind == BS_COLL_ALLREDUCE && s < 5) {
        w->ar_bytes[s] += op.u.coll.bytes;
      } else if (op.u.coll.kind == BS_COLL_ALLGATHER && s == 2) {
        w->ag_bytes += op.u.coll.bytes;
      } else if (op.u.coll.kind == BS_COLL_REDUCE_SCATTER && s == 2) {
        w->rs_bytes += op.u.coll.bytes;
      }
    }
  }
  assert_int_equal(bs_plan_iter_error(it), 0);
  bs_plan_iter_free(it);
  for (int b = 0; b < BS_WL_MAX_BUFS; b++) assert_false(live[b]);
  for (int h = 0; h < BS_WL_MAX_HANDLES; h++) assert_false(hlive[h]);
}

/* Ranks a and b of one expert-parallel group post the same all-to-alls over it. */
static void same_alltoalls(const moe_walk *a, const moe_walk *b) {
  assert_int_equal(a->a2a_n, b->a2a_n);
  for (int i = 0; i < a->a2a_n && i < 16; i++) {
    assert_int_equal(a->a2a_seq[i][0], b->a2a_seq[i][0]);
    assert_int_equal(a->a2a_seq[i][1], b->a2a_seq[i][1]);
  }
}

/* One MoE layer: all-to-all bytes and expert FLOPs by hand, uniform routing. */
static void test_moe_layer_toy(void **st) {
  (void)st;
  bs_config c = toy();
  bs_plan *p = toy_plan_make(&c);
  moe_walk w0, w1;
  walk(p, 0, &w0);
  walk(p, 1, &w1);
  same_alltoalls(&w0, &w1); /* ranks 0 and 1: one expert-parallel group (cp = 2 consecutive ranks) */
  assert_int_equal(w0.a2a_seq[0][0], 0);
  for (int r = 0; r < 4; r++) {
    moe_walk w;
    walk(p, r, &w);
    /* a rank's 32 tokens x top 2 x hidden 64 x 2 bytes = 8192 per all-to-all: dispatch and combine
     * forward, their gradients backward */
    assert_int_equal(w.a2a_n, 4);
    assert_int_equal(w.a2a_bytes, 4 * 32 * 2 * 64 * 2);
    assert_int_equal(w.a2a_size, 2);
    /* the group routes 2 ranks x 32 tokens x 2 = 128 rows, 32 per expert; a rank's 2 experts take
     * 64 rows: forward 2 x 64 x (2 x 32) x 64 + 2 x 64 x 64 x 32 = 786432 FLOPs, backward twice that */
    assert_true(w.expert_flops == 3.0 * 786432);
  }
  /* the all-to-all's bytes as the executors count them: (ep - 1) / ep of the send buffer */
  assert_int_equal(bs_coll_bytes_sent(BS_COLL_ALLTOALL, 8192, 2), 4096);
  bs_plan_free(p);
}

/* The experts' memory per GPU and their gradient all-reduce over the expert-data-parallel group. */
static void test_moe_memory_toy(void **st) {
  (void)st;
  bs_config c = toy();
  bs_param_count pc;
  bs_param_count_of(&c, &pc);
  /* 4 experts / ep 2 = 2 per rank, 3 x 64 x 32 each */
  assert_int_equal(pc.experts, 2 * 3 * 64 * 32);
  assert_int_equal(pc.edp, 2);                                    /* dp x cp = 4 ranks / ep 2 */
  assert_int_equal(pc.router, 256);                               /* 64 x 4 */
  assert_int_equal(pc.gate_up, 0);                                /* no shared experts: no dense MLP */
  int64_t dense = 64 * (4 + 8) * 16 + 4 * 16 * 64 + 2 * 64 + 256; /* qkv, o, norms, router */
  assert_int_equal(pc.layer, dense);
  assert_int_equal(pc.total, dense + 12288);
  bs_plan *p = toy_plan_make(&c);
  moe_walk w;
  walk(p, 3, &w);
  assert_int_equal(w.weights, (dense + 12288) * 2);
  assert_int_equal(w.grads, (dense + 12288) * 4); /* fp32 main gradients */
  for (int j = 0; j < 3; j++) assert_int_equal(w.opt[j], (dense + 12288) * 4);
  /* dense gradients over dp x cp (4 ranks), the experts' over the 2 ranks holding the same experts */
  assert_int_equal(w.ar_bytes[4], dense * 4);
  assert_int_equal(w.ar_bytes[2], 12288 * 4);
  bs_plan_free(p);
  /* ZeRO-1: the optimizer states shard the dense set over 4 and the experts over 2 */
  c.par.zero = 1;
  bs_param_count_of(&c, &pc);
  assert_int_equal(pc.shard_total, (dense + 3) / 4 + 12288 / 2);
  /* ep = 1: every rank holds all 4 experts */
  c.par.ep = 1;
  bs_param_count_of(&c, &pc);
  assert_int_equal(pc.experts, 4 * 3 * 64 * 32);
  assert_int_equal(pc.edp, 4);
}

/* A skewed router: expert 0 takes half the routed rows, the rank holding it computes more. */
static void test_moe_skew_capacity(void **st) {
  (void)st;
  bs_config c = toy();
  c.model.routing_skew = 0.5;
  /* 128 rows: expert 0 takes 64, experts 1..3 share 64 as 22, 21, 21 */
  assert_int_equal(bs_moe_expert_rows(&c, 32, 0), 64);
  assert_int_equal(bs_moe_expert_rows(&c, 32, 1), 22);
  assert_int_equal(bs_moe_expert_rows(&c, 32, 3), 21);
  bs_plan *p = toy_plan_make(&c);
  moe_walk w0, w1;
  walk(p, 0, &w0); /* ep index 0: experts 0 and 1, 86 rows */
  walk(p, 1, &w1); /* ep index 1: experts 2 and 3, 42 rows */
  assert_true(w0.expert_flops == 3.0 * 6 * 86 * 64 * 32);
  assert_true(w1.expert_flops == 3.0 * 6 * 42 * 64 * 32);
  assert_int_equal(w0.a2a_bytes, w1.a2a_bytes); /* equal blocks: the mean */
  bs_plan_free(p);
  /* capacity 1.5: every expert takes ceil(1.5 x 32 x 2 / 4) = 24 rows from each rank, padded */
  c.model.capacity_factor = 1.5;
  assert_int_equal(bs_moe_dispatch_rows(&c, 32), 4 * 24);
  p = toy_plan_make(&c);
  walk(p, 0, &w0);
  walk(p, 1, &w1);
  assert_int_equal(w0.a2a_bytes, 4 * 96 * 64 * 2);
  assert_true(w0.expert_flops == 3.0 * 6 * 96 * 64 * 32); /* 2 experts x 2 ranks x 24 rows */
  assert_true(w1.expert_flops == w0.expert_flops);
  bs_plan_free(p);
}

/* Expert tensor parallelism (tp 2, sequence parallel): half the tokens dispatched, the rows
 * gathered over tp, each rank half of every expert's width. */
static void test_moe_tp(void **st) {
  (void)st;
  bs_config c = toy();
  c.work.batch = 1;
  c.par.dp = 1;
  c.par.tp = 2;
  c.par.tp_variant = 3; /* cp = 2, ep = 2 over it */
  bs_plan *p = toy_plan_make(&c);
  moe_walk w;
  walk(p, 0, &w);
  /* T = 32, Tn = 16 per tp rank: 16 x 2 x 64 x 2 = 4096 per all-to-all */
  assert_int_equal(w.a2a_bytes, 4 * 4096);
  /* 64 rows per rank after the tp gather (2 experts x 16 x 2), width 32 / 2 */
  assert_true(w.expert_flops == 3.0 * 6 * 64 * 64 * 16);
  bs_plan_free(p);
}

static void expect_error(const bs_config *c, const char *want) {
  bs_plan *p = NULL;
  char err[512] = "";
  assert_int_equal(bs_plan_create(c, c->par.ranks_per_node, &p, err, sizeof err), -1);
  assert_null(p);
  if (!strstr(err, want)) fail_msg("error '%s' lacks '%s'", err, want);
}

static void test_moe_bad_values(void **st) {
  (void)st;
  bs_config c = toy();
  c.model.top_k = 5;
  expect_error(&c, "model.top_k: 5 must be between 1 and model.experts (4)");
  c = toy();
  c.par.ep = 3;
  c.par.gpus = 6;
  c.par.dp = 3;
  c.work.batch = 3;
  expect_error(&c, "parallel.ep: 3 does not divide model.experts (4)");
  c = toy();
  c.par.ep = 4;
  c.par.dp = 1;
  c.par.tp = 2;
  c.par.tp_variant = 3;
  c.work.batch = 1;
  expect_error(&c, "parallel.ep: 4 does not divide the dp x cp = 2 ranks");
  c = toy();
  c.model.experts = 0;
  expect_error(&c, "parallel.ep: 2 needs model.experts");
  c = toy();
  c.model.routing_skew = 0.9;
  expect_error(&c, "model.routing_skew: 0.9 is outside [1/experts, 1/top_k]");
  c = toy();
  c.par.zero = 2;
  expect_error(&c, "parallel.zero: stage 2 with model.experts is not modelled");
  c = toy();
  c.par.dp = 1;
  c.par.tp = 2;
  c.work.batch = 1;
  expect_error(&c, "parallel.tp_variant: MoE with tensor parallelism needs sequence parallelism");
  c = toy(); /* tp between cp and dp: dp x cp is no strided group to carve ep from */
  c.par.gpus = 8;
  c.par.tp = 2;
  c.par.tp_variant = 3;
  c.par.order[0] = BS_DIM_CP;
  c.par.order[1] = BS_DIM_TP;
  c.par.order[2] = BS_DIM_DP;
  c.par.order[3] = BS_DIM_PP;
  expect_error(&c, "parallel.order: cp and dp must be neighbours in the order for parallel.ep");
  c = toy();
  c.work.phase = BS_DECODE;
  expect_error(&c, "parallel.ep: decode holds the new tokens on every rank");
}

/* The public preset: Mixtral-8x7B's config.json. */
static void test_moe_preset(void **st) {
  (void)st;
  bs_model m;
  memset(&m, 0, sizeof m);
  assert_int_equal(bs_model_preset("mixtral-8x7b", &m), 0);
  assert_int_equal(m.layers, 32);
  assert_int_equal(m.hidden, 4096);
  assert_int_equal(m.kv_heads, 8);
  assert_int_equal(m.experts, 8);
  assert_int_equal(m.top_k, 2);
  assert_int_equal(m.moe_ffn, 14336);
  /* the whole model: 46.7B parameters (Mixtral's paper: 47B total), 12.9B active (13B) */
  bs_config c;
  bs_config_default(&c);
  c.model = m;
  c.work.scope = BS_SCOPE_MODEL;
  c.par.gpus = 1;
  c.par.ep = 1;
  bs_param_count pc;
  bs_param_count_of(&c, &pc);
  assert_true(pc.total > 46.6e9 && pc.total < 46.8e9);
  int64_t active = pc.total - 32 * pc.experts / 8 * 6; /* 2 of 8 experts per token */
  assert_true(active > 12.8e9 && active < 13.0e9);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_moe_layer_toy),     cmocka_unit_test(test_moe_memory_toy),
    cmocka_unit_test(test_moe_skew_capacity), cmocka_unit_test(test_moe_tp),
    cmocka_unit_test(test_moe_bad_values),    cmocka_unit_test(test_moe_preset),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
