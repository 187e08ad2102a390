/*
 * test_op_cache.c — a layer or model plan's iterator reads its attention's ops from a record of
 * the first layer (bs_plan_set_op_cache, workload_stream.c): the plan's record shared by the ranks
 * at the same place in their attention groups (op_share.c), or each rank's own: the ops every rank
 * yields are the same, op for op and field for field, with either record and without one, across
 * methods, recompute modes, pipeline schedules, tp variants and phases; and with threads reading
 * one plan at once (the fold's pre-pass does).
 */
#include <pthread.h>
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

/* Every rank of c: the ops of a plan in mode `mode` (bs_plan_set_op_cache) equal the ops without
 * any record, op for op; every rank's iterator open at once and stepped in turn, as the simulation
 * steps its ranks (the shared records are made by the first iterators and read by the others while
 * they run). *shared: the bytes the plan's shared records hold at the end. Returns the ops compared. */
static int64_t same_ops_mode(const bs_config *c, int mode, int64_t *shared) {
  bs_plan *on = toy_plan_make(c), *off = toy_plan_make(c);
  bs_plan_set_op_cache(on, mode);
  bs_plan_set_op_cache(off, 0);
  int G = bs_plan_ranks(on);
  bs_plan_iter **a = calloc((size_t)G, sizeof *a), **b = calloc((size_t)G, sizeof *b);
  int *live = calloc((size_t)G, sizeof *live);
  int64_t *at = calloc((size_t)G, sizeof *at);
  assert_true(a && b && live && at);
  for (int r = 0; r < G; r++) {
    a[r] = bs_plan_iter_new(on, r);
    b[r] = bs_plan_iter_new(off, r);
    assert_non_null(a[r]);
    assert_non_null(b[r]);
    live[r] = 1;
  }
  int64_t n = 0;
  for (int left = G; left > 0;) {
    for (int r = 0; r < G; r++) {
      if (!live[r]) continue;
      for (int k = 0; k < 1 + r % 7; k++) { /* ranks at different paces */
        bs_op x, y;
        int ha = bs_plan_next(a[r], &x), hb = bs_plan_next(b[r], &y);
        assert_int_equal(ha, hb);
        if (!ha) {
          live[r] = 0;
          left--;
          break;
        }
        if (!op_same(&x, &y)) fail_msg("mode %d: rank %d op %lld differs", mode, r, (long long)at[r]);
        at[r]++;
        n++;
      }
    }
  }
  for (int r = 0; r < G; r++) {
    assert_int_equal(bs_plan_iter_error(a[r]), 0);
    assert_int_equal(bs_plan_iter_error(b[r]), 0);
    bs_plan_iter_free(a[r]);
    bs_plan_iter_free(b[r]);
  }
  *shared = bs_plan_op_share_bytes(on);
  free(a);
  free(b);
  free(live);
  free(at);
  bs_plan_free(on);
  bs_plan_free(off);
  return n;
}

/* The shared records (the default) and each iterator's own: the same ops as none; only the first
 * holds shared records. Returns the ops compared. */
static int64_t same_ops(const bs_config *c) {
  int64_t shared, own, n = same_ops_mode(c, 1, &shared);
  assert_int_equal(same_ops_mode(c, BS_OP_CACHE_OWN, &own), n);
  assert_true(shared > 0);
  assert_int_equal(own, 0);
  return n;
}

static void test_same_ops(void **st) {
  (void)st;
  const struct {
    bs_method m;
    int G, tp, pp, chunks, recompute, v3;
    bs_phase ph;
    int dp;
  } pts[] = {
    {BS_BURST, 4, 1, 1, 1, BS_RECOMPUTE_OFF, 0, BS_TRAIN, 1},
    {BS_RING, 16, 2, 2, 1, BS_RECOMPUTE_OFF, 1, BS_TRAIN, 2}, /* 4 ranks at each attention place */
    {BS_RING, 4, 2, 1, 1, BS_RECOMPUTE_FULL, 1, BS_TRAIN, 1},
    {BS_USP, 4, 1, 1, 1, BS_RECOMPUTE_SELECTIVE, 0, BS_TRAIN, 1},
    {BS_BURST, 4, 1, 2, 1, BS_RECOMPUTE_OFF, 0, BS_TRAIN, 1},
    {BS_ULYSSES, 4, 1, 2, 2, BS_RECOMPUTE_SELECTIVE, 0, BS_TRAIN, 1},
    {BS_BURST, 4, 2, 1, 1, BS_RECOMPUTE_OFF, 1, BS_PREFILL, 1},
    {BS_TP, 4, 1, 1, 1, BS_RECOMPUTE_OFF, 0, BS_TRAIN, 1},
  };
  for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
    bs_config c = plan_toy(pts[i].m, pts[i].G, BS_SCOPE_MODEL, pts[i].ph);
    c.model.layers = 8;
    c.work.batch = 4;
    c.par.tp = pts[i].tp;
    c.par.pp = pts[i].pp;
    c.par.ulysses_degree = 2;
    if (pts[i].dp > 1) c.par.dp = pts[i].dp;
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

/* An attention sequence longer than a shared record holds (2,048 ops: a ring of 256 ranks): nothing
 * shared, each rank records its own prefix and generates past it, the same ops as none. */
static void test_long_sequence(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_RING, 256, BS_SCOPE_MODEL, BS_TRAIN);
  c.model.layers = 2;
  c.work.batch = 1;
  int64_t shared, n = same_ops_mode(&c, 1, &shared);
  print_message("%lld ops the same, %lld bytes shared\n", (long long)n, (long long)shared);
  assert_true(n > 0);
  assert_int_equal(shared, 0);
}

/* Threads reading one plan at once (as the fold's pre-pass does): each walks every rank, in its own
 * order, against the plan without records; the shared records are made by whichever thread comes
 * first, and one that finds a record being made keeps its own. */
typedef struct {
  const bs_plan *on, *off;
  int t, bad;
} walker;

static void *walk_all(void *arg) {
  walker *w = arg;
  int G = bs_plan_ranks(w->on);
  for (int k = 0; k < G && !w->bad; k++) {
    int r = (k * (2 * w->t + 1) + w->t) % G;
    bs_plan_iter *a = bs_plan_iter_new(w->on, r), *b = bs_plan_iter_new(w->off, r);
    bs_op x, y;
    int ha = 1, hb;
    while (a && b && ha && !w->bad) {
      ha = bs_plan_next(a, &x);
      hb = bs_plan_next(b, &y);
      if (ha != hb || (ha && !op_same(&x, &y))) w->bad = 1;
    }
    if (!a || !b || bs_plan_iter_error(a) || bs_plan_iter_error(b)) w->bad = 1;
    bs_plan_iter_free(a);
    bs_plan_iter_free(b);
  }
  return NULL;
}

static void test_threads(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_RING, 16, BS_SCOPE_MODEL, BS_TRAIN);
  c.model.layers = 8;
  c.work.batch = 4;
  c.par.tp = 2;
  c.par.dp = 2;
  c.par.pp = 2;
  bs_plan *on = toy_plan_make(&c), *off = toy_plan_make(&c);
  bs_plan_set_op_cache(off, 0);
  enum { NT = 4 };
  walker w[NT];
  pthread_t th[NT];
  for (int t = 0; t < NT; t++) {
    w[t] = (walker){on, off, t, 0};
    assert_int_equal(pthread_create(&th[t], NULL, walk_all, &w[t]), 0);
  }
  for (int t = 0; t < NT; t++) {
    pthread_join(th[t], NULL);
    assert_int_equal(w[t].bad, 0);
  }
  assert_true(bs_plan_op_share_bytes(on) > 0);
  bs_plan_free(on);
  bs_plan_free(off);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_same_ops),
    cmocka_unit_test(test_threads),
    cmocka_unit_test(test_long_sequence),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
