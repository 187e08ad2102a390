/*
 * test_uniform.c — the plan's proofs that ranks run alike (plans/uniform.c) against the programs
 * themselves. bs_plan_ring_uniform: where it says every rank runs rank 0's program with its peers
 * shifted on the ring's torus, every rank's op stream is compared with rank 0's op by op (peers
 * mapped, COMPUTEs in every field a kernel's duration reads); where it refuses because of the mask
 * (causal contiguous or striped), a rank is found whose program differs, so the rule is not
 * vacuous. bs_plan_replicas_uniform: where it says a rank runs the program of its dp-0 image with
 * peers and groups shifted in the dp coordinate, every rank's op stream is compared with its
 * image's the same way (groups as the image of their members), on composed tp x cp x dp x pp
 * points; where it refuses (expert parallelism), a rank is found whose program differs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "tests/run_named.h"
#include "plans/plan.h"
#include "plan_toy.h"

static bs_config ring_cfg(bs_method m, int G, int causal, bs_layout l, bs_phase ph) {
  bs_config c;
  bs_config_default(&c);
  c.model.heads = 4;
  c.model.kv_heads = 2;
  c.model.head_dim = 16;
  c.model.dtype = BS_BF16;
  c.work.batch = 2;
  c.work.seq_len = 64 * G;
  c.work.causal = causal;
  c.work.phase = ph;
  c.par.method = m;
  c.par.gpus = G;
  c.par.layout = l;
  c.par.double_ring = BS_OFF;
  c.par.ranks_per_node = G;
  return c;
}

static int same_ref(bs_ref a, bs_ref b) { return a.buf == b.buf; } /* offsets may differ */

/* How a rank's peers are written from its image's: a shift on the ring's torus (P x M, the rank at
 * position (a, i)), or (mesh set) a shift of d in the dp coordinate of the mesh. */
typedef struct {
  int P, M, a, i;
  const bs_mesh *mesh;
  int d;
} peer_map;

static int map_peer(const peer_map *pm, int q) {
  if (!pm->mesh) return ((pm->a + q / pm->P) % pm->M) * pm->P + (pm->i + q % pm->P) % pm->P;
  int st = pm->mesh->stride[BS_DIM_DP], n = pm->mesh->size[BS_DIM_DP], c = q / st % n;
  return q + ((c + pm->d) % n - c) * st;
}

/* Whether group b is the image of group a's members under pm, written as plans write groups (the
 * lowest member first, a positive stride): every image a member of b, as many of them. */
static int group_image(const peer_map *pm, bs_group a, bs_group b) {
  if (a.size != b.size || a.stride != b.stride || b.stride < 1) return 0;
  for (int k = 0; k < a.size; k++) {
    int q = map_peer(pm, a.first + a.stride * k), off = q - b.first;
    if (off < 0 || off % b.stride || off / b.stride >= b.size) return 0;
  }
  return 1;
}

/* Whether op b is op x of the rank's image with peers mapped by pm. */
static int same_op(const bs_op *x, const bs_op *b, const peer_map *pm) {
  if (x->kind != b->kind || x->handle != b->handle || x->step != b->step) return 0;
  switch (x->kind) {
  case BS_OP_ALLOC:
    return x->u.alloc.buf == b->u.alloc.buf && x->u.alloc.bytes == b->u.alloc.bytes &&
           x->u.alloc.cls == b->u.alloc.cls && x->u.alloc.role == b->u.alloc.role && x->u.alloc.elem == b->u.alloc.elem;
  case BS_OP_FREE: return x->u.free.buf == b->u.free.buf;
  case BS_OP_SEND:
  case BS_OP_RECV: {
    return b->u.p2p.peer == map_peer(pm, x->u.p2p.peer) && x->u.p2p.tag == b->u.p2p.tag &&
           x->u.p2p.bytes == b->u.p2p.bytes && same_ref(x->u.p2p.buf, b->u.p2p.buf);
  }
  case BS_OP_WAIT:
    if (x->u.wait.n != b->u.wait.n) return 0;
    for (int j = 0; j < x->u.wait.n && j < BS_MAX_WAIT; j++)
      if (x->u.wait.handles[j] != b->u.wait.handles[j]) return 0;
    return 1;
  case BS_OP_PHASE: return x->u.phase.fwd_bwd == b->u.phase.fwd_bwd && x->u.phase.begin == b->u.phase.begin;
  case BS_OP_COMPUTE: {
    const bs_compute *c = &x->u.compute, *d = &b->u.compute;
    const attn_params *p = &c->a, *q = &d->a;
    if (c->kernel != d->kernel || c->m != d->m || c->n != d->n || c->k != d->k || c->elems != d->elems ||
        c->flops != d->flops || c->ew != d->ew || c->gemm != d->gemm || c->fp8 != d->fp8 || c->ld != d->ld ||
        c->t_a != d->t_a || c->t_b != d->t_b || c->t_chunk != d->t_chunk)
      return 0;
    if (p->B != q->B || p->Zq != q->Zq || p->Zkv != q->Zkv || p->Nq != q->Nq || p->Nk != q->Nk || p->d != q->d ||
        p->scale != q->scale || p->dtype != q->dtype || p->mask.causal != q->mask.causal ||
        p->mask.window != q->mask.window || p->mask.docs != q->mask.docs)
      return 0;
    for (int j = 0; j < BS_OP_IN; j++)
      if (!same_ref(c->in[j], d->in[j])) return 0;
    for (int j = 0; j < BS_OP_OUT; j++)
      if (!same_ref(c->out[j], d->out[j])) return 0;
    return 1;
  }
  case BS_OP_COLL:
    return x->u.coll.kind == b->u.coll.kind && x->u.coll.red == b->u.coll.red && x->u.coll.elem == b->u.coll.elem &&
           x->u.coll.bytes == b->u.coll.bytes && same_ref(x->u.coll.send, b->u.coll.send) &&
           same_ref(x->u.coll.recv, b->u.coll.recv) && group_image(pm, x->u.coll.group, b->u.coll.group);
  default: return 0;
  }
}

/* Whether rank r's program is rank r0's with peers mapped by pm (op by op, the same count). */
static int same_program(const bs_plan *p, int r0, int r, const peer_map *pm) {
  bs_plan_iter *i0 = bs_plan_iter_new(p, r0), *ir = bs_plan_iter_new(p, r);
  assert_non_null(i0);
  assert_non_null(ir);
  bs_op x, b;
  int diff = 0, n0, nr;
  do {
    n0 = bs_plan_next(i0, &x);
    nr = bs_plan_next(ir, &b);
    if (n0 != nr || (n0 && !same_op(&x, &b, pm))) diff = 1;
  } while (n0 && nr && !diff);
  assert_int_equal(bs_plan_iter_error(i0), 0);
  assert_int_equal(bs_plan_iter_error(ir), 0);
  bs_plan_iter_free(i0);
  bs_plan_iter_free(ir);
  return !diff;
}

/* The first rank whose program is not rank 0's shifted on a P x M torus, or -1 when every one is. */
static int first_different(const bs_plan *p, int P, int M) {
  int G = bs_plan_ranks(p);
  for (int r = 1; r < G; r++) {
    peer_map pm = {P, M, r / P, r % P, NULL, 0};
    if (!same_program(p, 0, r, &pm)) return r;
  }
  return -1;
}

static void test_uniform_rings(void **state) {
  (void)state;
  static const struct {
    int causal;
    bs_layout l;
  } masks[] = {{1, BS_ZIGZAG}, {0, BS_ZIGZAG}, {0, BS_CONTIGUOUS}, {0, BS_STRIPED}};
  int checked = 0;
  for (int m = 0; m < 2; m++)
    for (size_t k = 0; k < sizeof masks / sizeof masks[0]; k++)
      for (int ph = 0; ph < 2; ph++)
        for (int dbl = 0; dbl < 2; dbl++)
          for (int v = 0; v < 2; v++) {
            int G = dbl ? 16 : 8, rpn = dbl ? 4 : G;
            bs_config c = ring_cfg(m ? BS_RING : BS_BURST, G, masks[k].causal, masks[k].l, ph ? BS_PREFILL : BS_TRAIN);
            c.par.double_ring = dbl ? BS_ON : BS_OFF;
            c.par.ranks_per_node = rpn;
            c.par.lao = v ? 0 : 1;
            c.par.bwd_opt = v ? 0 : 1;
            bs_plan *p;
            char err[256];
            assert_int_equal(bs_plan_create(&c, rpn, &p, err, sizeof err), 0);
            int P = 0, M = 0;
            assert_int_equal(bs_plan_ring_uniform(p, &P, &M), 1);
            assert_int_equal(P * M, G);
            if (dbl) assert_int_equal(M, G / rpn); /* the double ring's torus, not a plain ring */
            int r = first_different(p, P, M);
            if (r >= 0)
              fail_msg("method %d layout %d causal %d phase %d double %d variant %d: rank %d differs", m,
                       (int)masks[k].l, masks[k].causal, ph, dbl, v, r);
            bs_plan_free(p);
            checked++;
          }
  assert_int_equal(checked, 64);
}

/* Where the rule refuses: a causal mask on contiguous or striped shards gives ranks different
 * work (rank 0's shard sees only itself); a window and another method are refused too. */
static void test_uniform_refused(void **state) {
  (void)state;
  bs_layout ls[] = {BS_CONTIGUOUS, BS_STRIPED};
  for (int k = 0; k < 2; k++) {
    bs_config c = ring_cfg(BS_BURST, 8, 1, ls[k], BS_TRAIN);
    bs_plan *p;
    char err[256];
    assert_int_equal(bs_plan_create(&c, 8, &p, err, sizeof err), 0);
    int P = 0, M = 0;
    assert_int_equal(bs_plan_ring_uniform(p, &P, &M), 0);
    assert_true(first_different(p, 8, 1) > 0);
    bs_plan_free(p);
  }
  bs_config c = ring_cfg(BS_RING, 8, 1, BS_ZIGZAG, BS_TRAIN);
  c.work.window = 100;
  bs_plan *p;
  char err[256];
  assert_int_equal(bs_plan_create(&c, 8, &p, err, sizeof err), 0);
  int P = 0, M = 0;
  assert_int_equal(bs_plan_ring_uniform(p, &P, &M), 0);
  bs_plan_free(p);
  c = ring_cfg(BS_RING_LI2021, 8, 0, BS_CONTIGUOUS, BS_TRAIN); /* not the ring engine alone */
  assert_int_equal(bs_plan_create(&c, 8, &p, err, sizeof err), 0);
  assert_int_equal(bs_plan_ring_uniform(p, &P, &M), 0);
  bs_plan_free(p);
}

/* The first rank whose program is not its dp-0 image's with the dp coordinate shifted (peers and
 * groups), or -1 when every one is; *n: the ranks compared. */
static int first_replica_different(const bs_plan *p, int *n) {
  const bs_mesh *m = bs_plan_mesh(p);
  int st = m->stride[BS_DIM_DP], dp = m->size[BS_DIM_DP], G = bs_plan_ranks(p);
  for (int r = 0; r < G; r++) {
    int d = r / st % dp;
    if (!d) continue;
    peer_map pm = {0, 0, 0, 0, m, d};
    (*n)++;
    if (!same_program(p, r - d * st, r, &pm)) return r;
  }
  return -1;
}

/* The toy model on tp x cp x dp x pp ranks (cp: what is left), 4 layers, 2 sequences a replica of
 * one microbatch each, training at model scope, ZeRO-1, sequence parallelism (tp v3). */
static bs_config replicas_cfg(int tp, int dp, int pp, int G) {
  bs_config c = plan_toy(BS_RING, G, BS_SCOPE_MODEL, BS_TRAIN);
  c.model.layers = 4;
  c.work.causal = 1;
  c.par.layout = BS_ZIGZAG;
  c.par.tp = tp;
  c.par.dp = dp;
  c.par.pp = pp;
  c.par.zero = 1;
  c.par.tp_variant = 3;
  c.work.batch = 2 * dp;
  c.par.micro_batch = 1;
  c.par.ranks_per_node = 8;
  return c;
}

/* Where bs_plan_replicas_uniform admits a composed plan: every rank's program is its dp-0 image's,
 * peers and groups shifted, on points that exercise each way the dp coordinate enters a program. */
static void test_uniform_replicas(void **state) {
  (void)state;
  int points = 0, ranks = 0;
  for (int k = 0; k < 17; k++) {
    bs_config c = replicas_cfg(2, 4, 2, 32); /* tp 2 x cp 2 x dp 4 x pp 2, 1F1B */
    const char *what = "tp2 cp2 dp4 pp2 1f1b";
    switch (k) {
    case 1:
      c.par.pp_schedule = BS_PP_INTERLEAVED;
      c.par.pp_chunks = 2;
      what = "interleaved, 2 chunks";
      break;
    case 2:
      c.work.recompute = BS_RECOMPUTE_FULL;
      what = "full recompute";
      break;
    case 3:
      c.work.recompute = BS_RECOMPUTE_SELECTIVE;
      what = "selective recompute";
      break;
    case 4:
      c = replicas_cfg(2, 4, 1, 16);
      c.par.zero = 3;
      what = "zero 3, no pipeline";
      break;
    case 5:
      c = replicas_cfg(2, 4, 1, 16);
      c.par.zero = 0;
      c.work.scope = BS_SCOPE_LAYER;
      what = "zero 0, layer";
      break;
    case 6:
      c.model.heads = 8;
      c.model.kv_heads = 2;
      c.model.head_dim = 8;
      c.par.tp = 4;
      c.par.gpus = 64;
      what = "tp 4 over 2 KV heads (replicated K, V)";
      break;
    case 7:
      bs_order_parse("tp-dp-cp-pp", c.par.order);
      what = "order tp-dp-cp-pp";
      break;
    case 8:
      bs_order_parse("dp-cp-tp-pp", c.par.order);
      what = "order dp-cp-tp-pp";
      break;
    case 9:
      c.par.method = BS_ULYSSES;
      c.par.layout = BS_CONTIGUOUS;
      what = "ulysses over cp 2";
      break;
    case 10:
      c.par.method = BS_BURST;
      c.par.tp_variant = 1;
      what = "burst, tp v1";
      break;
    case 11:
      c.model.fp8 = BS_FP8_FFN;
      what = "fp8 ffn (amax over the stage)";
      break;
    case 12:
      c.model.experts = 4;
      c.model.top_k = 2;
      c.model.moe_ffn = 32;
      c.model.routing_skew = 0.4;
      what = "MoE without expert parallelism, skewed routing";
      break;
    case 13:
      c = replicas_cfg(1, 4, 1, 16);
      c.work.scope = BS_SCOPE_ATTENTION;
      c.work.batch = 4;
      c.par.micro_batch = 0;
      what = "attention scope";
      break;
    case 14:
      c.par.method = BS_TP;
      c.par.tp = 0;
      c.par.gpus = 32;
      c.par.layout = BS_CONTIGUOUS;
      c.work.causal = 1;
      what = "method tp";
      break;
    case 15:
      c.work.window = 40;
      what = "sliding window";
      break;
    case 16:
      c = replicas_cfg(2, 4, 1, 16);
      c.work.phase = BS_PREFILL;
      c.par.zero = 0;
      c.par.micro_batch = 0;
      what = "prefill";
      break;
    }
    bs_plan *p = toy_plan_make(&c);
    int st = 0, n = 0;
    if (!bs_plan_replicas_uniform(p, &st, &n)) fail_msg("%s: refused", what);
    assert_int_equal(st, bs_plan_mesh(p)->stride[BS_DIM_DP]);
    assert_int_equal(n, 4);
    int r = first_replica_different(p, &ranks);
    if (r >= 0) fail_msg("%s: rank %d differs from its dp-0 image", what, r);
    bs_plan_free(p);
    points++;
  }
  assert_int_equal(points, 17);
  assert_true(ranks > 17 * 8);
}

/* Where it refuses: expert parallelism over dp x cp places a rank's experts by its position in the
 * gradients' group, a mix of coordinates, so a shift of dp gives another rank other expert GEMMs
 * (skewed routing: expert 0's rank computes more); one replica and an uncomposed plan too. */
static void test_uniform_replicas_refused(void **state) {
  (void)state;
  bs_config c = replicas_cfg(2, 4, 1, 16);
  c.model.experts = 4;
  c.model.top_k = 2;
  c.model.moe_ffn = 32;
  c.model.routing_skew = 0.4;
  c.par.ep = 4;
  bs_plan *p = toy_plan_make(&c);
  int st = 0, n = 0, ranks = 0;
  assert_int_equal(bs_plan_replicas_uniform(p, &st, &n), 0);
  assert_true(first_replica_different(p, &ranks) > 0);
  bs_plan_free(p);
  c = replicas_cfg(2, 1, 2, 16);
  p = toy_plan_make(&c);
  assert_int_equal(bs_plan_replicas_uniform(p, &st, &n), 0);
  bs_plan_free(p);
  c = ring_cfg(BS_RING, 8, 1, BS_ZIGZAG, BS_TRAIN);
  p = toy_plan_make(&c);
  assert_int_equal(bs_plan_replicas_uniform(p, &st, &n), 0);
  bs_plan_free(p);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_uniform_rings),
    cmocka_unit_test(test_uniform_refused),
    cmocka_unit_test(test_uniform_replicas),
    cmocka_unit_test(test_uniform_replicas_refused),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
