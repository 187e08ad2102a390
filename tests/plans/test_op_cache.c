/*
 * test_op_cache.c — a layer or model plan's iterator reads its attention's ops from each rank's
 * record of the first layer (bs_plan_set_op_cache, workload_stream.c): the ops every rank yields are
 * the same, op for op and field for field, with the record and without it,
 * across methods, recompute modes, pipeline schedules, tp variants and phases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "plans/plan.h"
#include "plan_toy.h"

/* Two ops alike: an ALLOC field by field (its shard has padding that generators leave as it
 * was), any other kind byte for byte over its used prefix. */
static int op_same(const bs_op *x, const bs_op *y) {
  if (x->kind != y->kind || x->handle != y->handle || x->step != y->step) return 0;
  if (x->kind != BS_OP_ALLOC) return !memcmp(x, y, bs_op_used_bytes(x->kind));
  const bs_shard *s = &x->u.alloc.shard, *t = &y->u.alloc.shard;
  return x->u.alloc.buf == y->u.alloc.buf && x->u.alloc.bytes == y->u.alloc.bytes && x->u.alloc.cls == y->u.alloc.cls &&
         x->u.alloc.role == y->u.alloc.role && x->u.alloc.elem == y->u.alloc.elem && s->layout == t->layout &&
         s->part == t->part && s->parts == t->parts && s->n_total == t->n_total && s->head0 == t->head0 &&
         s->heads == t->heads && s->b0 == t->b0 && s->n_cache == t->n_cache && s->runs == t->runs;
}

/* Every rank of c: the ops with the record equal the ops without it; returns the ops compared. */
static int64_t same_ops(const bs_config *c) {
  bs_plan *on = toy_plan_make(c), *off = toy_plan_make(c);
  bs_plan_set_op_cache(off, 0);
  int64_t n = 0;
  for (int r = 0; r < bs_plan_ranks(on); r++) {
    bs_plan_iter *a = bs_plan_iter_new(on, r), *b = bs_plan_iter_new(off, r);
    assert_non_null(a);
    assert_non_null(b);
    bs_op x, y;
    for (;;) {
      int ha = bs_plan_next(a, &x), hb = bs_plan_next(b, &y);
      assert_int_equal(ha, hb);
      if (!ha) break;
      if (!op_same(&x, &y)) fail_msg("rank %d op %lld differs", r, (long long)n);
      n++;
    }
    assert_int_equal(bs_plan_iter_error(a), 0);
    assert_int_equal(bs_plan_iter_error(b), 0);
    bs_plan_iter_free(a);
    bs_plan_iter_free(b);
  }
  bs_plan_free(on);
  bs_plan_free(off);
  return n;
}

static void test_same_ops(void **st) {
  (void)st;
  const struct {
    bs_method m;
    int G, tp, pp, chunks, recompute, v3;
    bs_phase ph;
  } pts[] = {
    {BS_BURST, 4, 1, 1, 1, BS_RECOMPUTE_OFF, 0, BS_TRAIN},
    {BS_RING, 4, 2, 1, 1, BS_RECOMPUTE_FULL, 1, BS_TRAIN},
    {BS_USP, 4, 1, 1, 1, BS_RECOMPUTE_SELECTIVE, 0, BS_TRAIN},
    {BS_BURST, 4, 1, 2, 1, BS_RECOMPUTE_OFF, 0, BS_TRAIN},
    {BS_ULYSSES, 4, 1, 2, 2, BS_RECOMPUTE_SELECTIVE, 0, BS_TRAIN},
    {BS_BURST, 4, 2, 1, 1, BS_RECOMPUTE_OFF, 1, BS_PREFILL},
    {BS_TP, 4, 1, 1, 1, BS_RECOMPUTE_OFF, 0, BS_TRAIN},
  };
  for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
    bs_config c = plan_toy(pts[i].m, pts[i].G, BS_SCOPE_MODEL, pts[i].ph);
    c.model.layers = 8;
    c.work.batch = 4;
    c.par.tp = pts[i].tp;
    c.par.pp = pts[i].pp;
    c.par.ulysses_degree = 2;
    if (pts[i].chunks > 1) {
      c.par.pp_schedule = BS_PP_INTERLEAVED;
      c.par.pp_chunks = pts[i].chunks;
    }
    c.work.recompute = pts[i].recompute;
    c.par.tp_variant = pts[i].v3 ? 3 : 1;
    if (pts[i].ph != BS_TRAIN) c.work.batch = 1;
    int64_t n = same_ops(&c);
    print_message("point %zu: %lld ops the same\n", i, (long long)n);
    assert_true(n > 0);
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_same_ops),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
