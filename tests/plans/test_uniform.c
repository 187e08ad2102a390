/*
 * test_uniform.c — bs_plan_ring_uniform (plans/uniform.c) against the programs themselves: where it
 * says every rank runs rank 0's program with its peers shifted on the ring's torus, every rank's op
 * stream is compared with rank 0's op by op (peers mapped, COMPUTEs in every field a kernel's
 * duration reads); where it refuses because of the mask (causal contiguous or striped), a rank is
 * found whose program differs, so the rule is not vacuous.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "tests/run_named.h"
#include "plans/plan.h"

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

/* Whether op b (of the rank at torus position (a, i)) is op x of rank 0 with peers shifted. */
static int same_op(const bs_op *x, const bs_op *b, int P, int M, int a, int i) {
  if (x->kind != b->kind || x->handle != b->handle || x->step != b->step) return 0;
  switch (x->kind) {
  case BS_OP_ALLOC:
    return x->u.alloc.buf == b->u.alloc.buf && x->u.alloc.bytes == b->u.alloc.bytes &&
           x->u.alloc.cls == b->u.alloc.cls && x->u.alloc.role == b->u.alloc.role && x->u.alloc.elem == b->u.alloc.elem;
  case BS_OP_FREE: return x->u.free.buf == b->u.free.buf;
  case BS_OP_SEND:
  case BS_OP_RECV: {
    int q = x->u.p2p.peer, want = ((a + q / P) % M) * P + (i + q % P) % P;
    return b->u.p2p.peer == want && x->u.p2p.tag == b->u.p2p.tag && x->u.p2p.bytes == b->u.p2p.bytes &&
           same_ref(x->u.p2p.buf, b->u.p2p.buf);
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
  default: return 0; /* no collectives in these plans */
  }
}

/* The first rank whose program is not rank 0's shifted on a P x M torus, or -1 when every one is. */
static int first_different(const bs_plan *p, int P, int M) {
  int G = bs_plan_ranks(p);
  for (int r = 1; r < G; r++) {
    bs_plan_iter *i0 = bs_plan_iter_new(p, 0), *ir = bs_plan_iter_new(p, r);
    assert_non_null(i0);
    assert_non_null(ir);
    bs_op x, b;
    int diff = 0, n0, nr;
    do {
      n0 = bs_plan_next(i0, &x);
      nr = bs_plan_next(ir, &b);
      if (n0 != nr || (n0 && !same_op(&x, &b, P, M, r / P, r % P))) diff = 1;
    } while (n0 && nr && !diff);
    assert_int_equal(bs_plan_iter_error(i0), 0);
    assert_int_equal(bs_plan_iter_error(ir), 0);
    bs_plan_iter_free(i0);
    bs_plan_iter_free(ir);
    if (diff) return r;
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

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_uniform_rings),
    cmocka_unit_test(test_uniform_refused),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
