/*
 * test_walk_stop.c — the walk's early stop (BS_WALK_STOP_OOM, sim/walk.c: walk_stop), which `burstsim
 * search` asks for: a walk that stops as soon as a rank's held bytes prove the point out of memory
 * must say out of memory exactly when the whole walk does, and a point that fits must walk byte for
 * byte as without it. Kept apart from test_search.c: the points are walked under capacities set
 * around each one's own peak (the profile's memory_bytes moved), on every path the walk takes:
 *   walk_stop  plain walks (4 layers), the layer shortcut (3 and 4 layers extended to 6 or 12), the
 *              first pass's micro-batch shortcut (pp = 1, 4 micro-batches or more), the pipeline
 *              shortcut (1F1B and interleaved), each over one rank per stage and over the corners,
 *              varying the model, tp, recompute, ZeRO and the sequence. Capacities: exactly the
 *              peak plus its reserve (fits: a stop claiming out of memory there fails), one byte
 *              less (out of memory by one byte), and half the peak (every point must stop early
 *              there: else the stop does nothing). And FP8 on a profile without FP8 GEMMs stays
 *              refused, as by the whole walk, under a capacity the weights alone pass.
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
#include "sim/sim.h"
#include "sim/walk.h"

typedef struct {
  const char *preset; /* a model preset, or NULL: the default model */
  bs_method m;
  int G, tp, dp, pp, chunks, zero, recompute, layers, micro;
  int64_t seq, batch;
} point;

static bs_config point_cfg(const point *p) {
  bs_config c;
  bs_config_default(&c);
  if (p->preset) assert_int_equal(bs_model_preset(p->preset, &c.model), 0);
  c.work.scope = BS_SCOPE_MODEL;
  c.work.causal = 1;
  c.work.seq_len = p->seq;
  c.work.batch = p->batch;
  c.work.recompute = p->recompute;
  c.model.layers = p->layers;
  c.par.gpus = p->G;
  c.par.method = p->m;
  c.par.tp = p->tp;
  c.par.dp = p->dp;
  c.par.pp = p->pp;
  c.par.zero = p->zero;
  c.par.micro_batch = p->micro;
  c.par.layout = p->m == BS_TP ? BS_CONTIGUOUS : BS_ZIGZAG;
  c.par.ulysses_degree = 2;
  if (p->chunks) {
    c.par.pp_schedule = BS_PP_INTERLEAVED;
    c.par.pp_chunks = p->chunks;
  }
  snprintf(c.cluster.topology, sizeof c.cluster.topology, "dgx-a100");
  snprintf(c.cluster.profile, sizeof c.cluster.profile, "a100-sxm4-80gb");
  return c;
}

/* The profile's capacity (bs_profile_capacity_bytes) set to cap. */
static void set_capacity(bs_profile *prof, int64_t cap) {
  prof->memory_bytes = (double)(cap + prof->reserved_bytes);
  assert_int_equal(bs_profile_capacity_bytes(prof), cap);
}

/* The walk with the early stop against the whole walk at capacity cap: the same oom; where it fits,
 * every figure the same; where it stopped, a lower bound past the capacity. 1 when it stopped. */
static int check_at(const bs_config *c, bs_profile *prof, int mode, int64_t cap, const char *what) {
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  char err[512] = "";
  set_capacity(prof, cap);
  bs_walk w, e;
  int rc = bs_sim_walk(c, &o, prof, mode, &w, err, sizeof err);
  if (rc) print_error("%s: whole walk: %s\n", what, err);
  assert_int_equal(rc, 0);
  assert_int_equal(w.peak_partial, 0);
  rc = bs_sim_walk(c, &o, prof, mode | BS_WALK_STOP_OOM, &e, err, sizeof err);
  if (rc) print_error("%s: stopping walk: %s\n", what, err);
  assert_int_equal(rc, 0);
  if (e.oom != w.oom)
    print_error("%s: capacity %lld: whole walk peak %lld oom %d, stopping walk peak %lld oom %d (partial %d)\n", what,
                (long long)cap, (long long)w.peak_bytes, w.oom, (long long)e.peak_bytes, e.oom, e.peak_partial);
  assert_int_equal(e.oom, w.oom);
  assert_int_equal(e.capacity_bytes, w.capacity_bytes);
  assert_int_equal(e.ranks_per_node, w.ranks_per_node);
  if (e.peak_partial) {
    assert_true(w.oom);
    assert_true(e.peak_bytes <= w.peak_bytes);
    assert_true(bs_mem_over(c, e.peak_bytes, cap));
    return 1;
  }
  assert_int_equal(e.peak_bytes, w.peak_bytes);
  assert_memory_equal(e.breakdown, w.breakdown, sizeof w.breakdown);
  assert_memory_equal(&e.compute_s, &w.compute_s, sizeof w.compute_s); /* the same bits */
  assert_memory_equal(&e.replay_s, &w.replay_s, sizeof w.replay_s);
  return 0;
}

static void test_walk_stop(void **st) {
  (void)st;
  const point pts[] = {
    /* plain (4 layers), tp 2 at 64K */
    {NULL, BS_BURST, 8, 2, 1, 1, 0, 0, 0, 4, 1, 64 * 1024, 1},
    /* the layer shortcut: 6 layers, recompute, ZeRO-1 over dp 2; ring at 32K */
    {NULL, BS_BURST, 8, 1, 2, 1, 0, 1, 1, 6, 1, 32 * 1024, 2},
    {NULL, BS_RING, 8, 2, 1, 1, 0, 0, 2, 12, 1, 16 * 1024, 1},
    /* a larger model (Llama 3.1 8B's shapes, 12 layers), tp 4, selective recompute */
    {"llama3.1-8b", BS_USP, 8, 4, 1, 1, 0, 0, 2, 12, 1, 32 * 1024, 1},
    /* the micro-batch shortcut (8 micro-batches per replica), with and without recompute */
    {NULL, BS_BURST, 8, 1, 1, 1, 0, 0, 1, 6, 1, 16 * 1024, 8},
    {"llama3.1-8b", BS_TP, 8, 1, 2, 1, 0, 2, 0, 6, 1, 8 * 1024, 12},
    /* the pipeline shortcut: 1F1B over 2 and 4 stages, interleaved over 2 */
    {NULL, BS_BURST, 8, 2, 1, 2, 0, 0, 0, 8, 1, 8 * 1024, 16},
    {NULL, BS_RING, 8, 1, 1, 4, 0, 0, 1, 8, 1, 8 * 1024, 24},
    {NULL, BS_BURST, 8, 1, 2, 2, 2, 1, 1, 8, 1, 8 * 1024, 64},
  };
  bs_profile *prof = calloc(1, sizeof *prof);
  char err[512] = "";
  assert_non_null(prof);
  assert_int_equal(bs_profile_load("a100-sxm4-80gb", prof, err, sizeof err), 0);
  int stopped = 0, checked = 0;
  for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
    bs_config c = point_cfg(&pts[i]);
    for (int corners = 0; corners < 2; corners++) {
      int mode = corners ? BS_WALK_CORNERS : BS_WALK_STAGES;
      char what[64];
      snprintf(what, sizeof what, "point %zu %s", i, corners ? "corners" : "stages");
      bs_sim_opts o;
      bs_sim_opts_default(&o);
      bs_walk w;
      assert_int_equal(bs_sim_walk(&c, &o, prof, mode, &w, err, sizeof err), 0);
      int64_t P = w.peak_bytes, fit = P + bs_reserve_bytes(&c, P); /* the least capacity P fits */
      assert_true(P > 0);
      assert_false(bs_mem_over(&c, P, fit));
      assert_true(bs_mem_over(&c, P, fit - 1));
      int at_fit = check_at(&c, prof, mode, fit, what);
      int at_one = check_at(&c, prof, mode, fit - 1, what);
      int at_half = check_at(&c, prof, mode, P / 2, what);
      print_message("%s: peak %lld B; stopped early: one byte short %d, at half %d\n", what, (long long)P, at_one,
                    at_half);
      assert_int_equal(at_fit, 0);
      assert_int_equal(at_half, 1); /* far past the capacity every path stops */
      stopped += at_one + at_half;
      checked += 3;
    }
  }
  print_message("%d of %d checks stopped early\n", stopped, checked);
  /* FP8 GEMMs on A100 (none): refused whatever the capacity, with the stop too, even where the
   * weights alone pass the capacity before the first GEMM */
  bs_config c = point_cfg(&pts[0]);
  c.model.fp8 = BS_FP8_ALL;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  for (int corners = 0; corners < 2; corners++) {
    int mode = corners ? BS_WALK_CORNERS : BS_WALK_STAGES;
    set_capacity(prof, 1 << 20);
    bs_walk w, e;
    char err2[512] = "";
    int rw = bs_sim_walk(&c, &o, prof, mode, &w, err, sizeof err);
    int re = bs_sim_walk(&c, &o, prof, mode | BS_WALK_STOP_OOM, &e, err2, sizeof err2);
    print_message("fp8 on A100 %s: whole walk %d (%s), stopping walk %d (%s)\n", corners ? "corners" : "stages", rw,
                  err, re, err2);
    assert_int_not_equal(rw, 0);
    assert_int_equal(re, rw);
    assert_string_equal(err2, err);
    assert_non_null(strstr(err, "model.fp8"));
  }
  free(prof);
}

int main(int argc, char **argv) {
  const struct CMUnitTest all[] = {cmocka_unit_test(test_walk_stop)};
  return BS_RUN_NAMED(all, argc, argv, NULL, NULL);
}
