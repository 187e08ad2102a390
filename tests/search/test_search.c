/*
 * test_search.c — `burstsim search`'s pruning is exact:
 *   walk_peak_equals_sim  the plan walk's memory peak (sim/walk.h) equals the
 *                         simulated peak byte for byte, class by class, for
 *                         methods, scopes, ZeRO, recompute and composed grids;
 *                         its compute is the simulated busiest rank's, and at
 *                         most the step (the lower bound);
 *   brute_force           a small space searched with memory and bound pruning
 *                         gives the same top 10 and the same Pareto front as
 *                         simulating every legal point that fits (and _prefill,
 *                         _nodes, _fp8: pass-Q, collectives across nodes, FP8
 *                         GEMMs);
 *   brute_force_variants  the same with double_ring, ulysses_placement and
 *                         tp_variant searched, on two nodes at layer scope;
 *   variants_spread       those three multiply only the candidates they change,
 *                         a list searches its values alone, and a twin kept out
 *                         as the same plan simulates to its kept twin's step;
 *   fp8_pruned            FP8 is searched only when asked and where GEMMs run;
 *                         a profile without FP8 refuses those points, counted;
 *   many_tree_groups      a point with many strided all-rank tree allreduces
 *                         simulates, their bytes those of the step-by-step tree;
 *   stages_shortcut       the first pass's microbatch shortcut equals the walk of
 *                         every microbatch, below the corners' walk;
 *   brute_force_microbatches  search and brute force agree where it applies;
 *   op_cache_same         each rank's record of its attention ops changes no walk,
 *                         step, top 10 or front (search --no-cache);
 *   lean_record           a candidate's record is a few dozen bytes: the 405B
 *                         space of issue 27 (millions) expands in under half a
 *                         GiB, each configuration rebuilt distinct;
 *   probe_below_walk      every candidate's probe (search/probe.h) refuses what
 *                         the walk refuses, with its message, and its peak and
 *                         bound are at most the walk's, on spaces with pipelines,
 *                         ZeRO, recompute, micro-batches and memory pruning;
 *   lazy_same             the lazy walks (the default) give the top 10 and the
 *                         front of walking every candidate first (--walk-all),
 *                         the same candidates with the same steps, fewer walks,
 *                         and counts that add up.
 */
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "search/search.h"
#include "sim/sim.h"
#include "sim/walk.h"
#include "search/probe.h"

static bs_config base_cfg(bs_scope scope, int G) {
  bs_config c;
  bs_config_default(&c);
  c.work.scope = scope;
  c.work.seq_len = 32 * 1024;
  c.work.causal = 1;
  c.model.layers = 6;
  c.par.gpus = G;
  snprintf(c.cluster.topology, sizeof c.cluster.topology, "dgx-a100");
  snprintf(c.cluster.profile, sizeof c.cluster.profile, "a100-sxm4-80gb");
  return c;
}

static void walk_vs_sim(const bs_config *c, const char *what) {
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_profile *prof = calloc(1, sizeof *prof);
  char err[512] = "";
  assert_non_null(prof);
  assert_int_equal(bs_profile_load(c->cluster.profile, prof, err, sizeof err), 0);
  bs_walk w;
  int wrc = bs_sim_walk(c, &o, prof, 0, &w, err, sizeof err);
  if (wrc) print_error("%s: walk: %s\n", what, err);
  assert_int_equal(wrc, 0);
  bs_result r;
  memset(&r, 0, sizeof r);
  int rc = bs_sim_run(c, &o, &r, err, sizeof err);
  if (rc) print_error("%s: sim: %s\n", what, err);
  assert_int_equal(rc, 0);
  if (w.peak_bytes != r.mem.peak_bytes_max)
    print_error("%s: walk peak %lld, sim peak %lld\n", what, (long long)w.peak_bytes, (long long)r.mem.peak_bytes_max);
  assert_int_equal(w.peak_bytes, r.mem.peak_bytes_max);
  for (int k = 0; k < BS_MEM_CLASS_COUNT; k++) assert_int_equal(w.breakdown[k], r.mem.breakdown[k]);
  assert_int_equal(w.capacity_bytes, r.mem.capacity_bytes);
  assert_int_equal(w.oom, r.mem.oom);
  /* The busiest rank's compute is what the simulator measured (it sleeps for each duration)... */
  double rel = fabs(w.compute_s - r.time.compute) / r.time.compute;
  if (rel > 1e-6) print_error("%s: walk compute %.9g s, sim compute %.9g s\n", what, w.compute_s, r.time.compute);
  assert_true(rel <= 1e-6);
  /* ... and at most the step, as is the replay without message times (at least the compute). */
  assert_true(w.compute_s * (1 - 2e-3) <= r.time.step);
  if (!(w.replay_s * (1 - 2e-3) <= r.time.step))
    print_error("%s: replay %.9g s past the step %.9g s\n", what, w.replay_s, r.time.step);
  assert_true(w.replay_s * (1 - 2e-3) <= r.time.step);
  assert_true(w.replay_s >= w.compute_s * (1 - 1e-12));
  /* The corners: a subset, so at most the whole walk; equal on these grids. */
  bs_walk wc;
  assert_int_equal(bs_sim_walk(c, &o, prof, 1, &wc, err, sizeof err), 0);
  assert_true(wc.peak_bytes <= w.peak_bytes && wc.compute_s <= w.compute_s);
  assert_true(wc.replay_s * (1 - 2e-3) <= r.time.step);
  if (wc.peak_bytes != w.peak_bytes || wc.compute_s != w.compute_s)
    print_message("%s: corners %lld B %.6g s, all ranks %lld B %.6g s\n", what, (long long)wc.peak_bytes, wc.compute_s,
                  (long long)w.peak_bytes, w.compute_s);
  bs_result_free(&r);
  free(prof);
}

static void test_walk_peak_equals_sim(void **st) {
  (void)st;
  const struct {
    bs_scope scope;
    bs_method m;
    int G, tp, dp, pp, zero, recompute, batch;
    bs_layout layout;
  } pts[] = {
    {BS_SCOPE_ATTENTION, BS_BURST, 8, 1, 1, 1, 0, 0, 1, BS_ZIGZAG},
    {BS_SCOPE_ATTENTION, BS_RING, 16, 1, 1, 1, 0, 0, 1, BS_STRIPED},
    {BS_SCOPE_ATTENTION, BS_ULYSSES, 8, 1, 1, 1, 0, 0, 1, BS_CONTIGUOUS},
    {BS_SCOPE_ATTENTION, BS_USP, 16, 1, 1, 1, 0, 0, 1, BS_ZIGZAG},
    {BS_SCOPE_ATTENTION, BS_TP, 8, 1, 1, 1, 0, 0, 1, BS_CONTIGUOUS},
    {BS_SCOPE_LAYER, BS_BURST, 8, 1, 1, 1, 0, 0, 1, BS_ZIGZAG},
    {BS_SCOPE_MODEL, BS_BURST, 8, 1, 1, 1, 0, 1, 1, BS_ZIGZAG},       /* layer shortcut, recompute */
    {BS_SCOPE_MODEL, BS_ULYSSES, 8, 1, 2, 1, 3, 0, 2, BS_CONTIGUOUS}, /* ZeRO-3 over dp 2 */
    {BS_SCOPE_MODEL, BS_RING, 16, 2, 2, 1, 1, 0, 2, BS_ZIGZAG},       /* composed tp x cp x dp */
    {BS_SCOPE_MODEL, BS_BURST, 8, 2, 1, 2, 0, 0, 2, BS_ZIGZAG},       /* pipeline, every layer simulated */
    {BS_SCOPE_MODEL, BS_TP, 8, 1, 2, 1, 2, 1, 2, BS_CONTIGUOUS},
    /* collectives across nodes, whose floors the replay adds: tp over 2 nodes (a ring of flows),
     * the gradients over dp x cp (a tree timed whole, or rings per rail) */
    {BS_SCOPE_MODEL, BS_RING, 32, 16, 1, 1, 0, 0, 1, BS_ZIGZAG},
    {BS_SCOPE_MODEL, BS_BURST, 32, 2, 2, 1, 1, 1, 2, BS_ZIGZAG},
    {BS_SCOPE_MODEL, BS_USP, 32, 1, 1, 1, 0, 0, 1, BS_ZIGZAG},
  };
  for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
    bs_config c = base_cfg(pts[i].scope, pts[i].G);
    c.par.method = pts[i].m;
    c.par.tp = pts[i].tp;
    c.par.dp = pts[i].dp;
    c.par.pp = pts[i].pp;
    c.par.zero = pts[i].zero;
    c.par.layout = pts[i].layout;
    c.par.ulysses_degree = 4;
    c.work.recompute = pts[i].recompute;
    c.work.batch = pts[i].batch;
    char what[64];
    snprintf(what, sizeof what, "point %zu (%s)", i, bs_method_name(pts[i].m));
    walk_vs_sim(&c, what);
  }
}

/* Candidate i's configuration, rebuilt from its record. */
static bs_config cfg_of(const bs_search *s, int i) {
  bs_config c;
  bs_search_config(s, i, &c);
  return c;
}

static double step_of(const bs_search *s, int i) { return bs_search_result(s, i)->time.step; }

static void run_search_part(const bs_config *base, const bs_search_autos *a, int brute, int part, int parts,
                            bs_search *s) {
  char err[512] = "";
  assert_int_equal(bs_search_expand(base, 1, a, s, err, sizeof err), 0);
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_search_opts so = {.top_k = 10, .part = part, .parts = parts, .opts = &o, .brute_force = brute};
  int rc = bs_search_run(s, &so, err, sizeof err);
  if (rc) print_error("search: %s\n", err);
  assert_int_equal(rc, 0);
  assert_int_equal(s->bound_violations, 0);
  assert_int_equal(s->probe_violations, 0);
  assert_int_equal(s->failed, 0);
}

static void run_search(const bs_config *base, const bs_search_autos *a, int brute, bs_search *s) {
  run_search_part(base, a, brute, 0, 1, s);
}

/* Two mpirun ranks' parts, merged as cmd_search.c merges them: rank 1's candidates into rank 0's. */
static void run_split(const bs_config *base, const bs_search_autos *a, bs_search *s) {
  bs_search other;
  run_search_part(base, a, 0, 0, 2, s);
  run_search_part(base, a, 0, 1, 2, &other);
  assert_int_equal(s->n, other.n);
  for (int i = 0; i < s->n; i++)
    if (s->c[i].status == BS_CAND_REMOTE)
      assert_int_equal(
        bs_search_settle(s, i, (bs_cand_status)other.c[i].status, (other.c[i].flags & BS_CAND_SIM_OOM) != 0,
                         bs_search_why(&other, i), bs_search_result(&other, i)),
        0);
  bs_search_recount(s);
  bs_search_free(&other);
}

/* Search and brute force (and search split over two ranks) agree on the top 10 and the front. */
static void brute_agrees(const bs_config *c, const bs_search_autos *a) {
  bs_search fast, brute, split;
  run_search(c, a, 0, &fast);
  run_search(c, a, 1, &brute);
  run_split(c, a, &split);
  assert_int_equal(fast.n, brute.n);
  assert_true(fast.simulated >= 10);
  assert_true(fast.bound > 0); /* the bound pruned something, or the test proves nothing */
  assert_int_equal(brute.simulated, brute.legal - brute.memory + brute.memory_by_sim);
  int nf, nb, *rf = bs_search_ranking(&fast, &nf), *rb = bs_search_ranking(&brute, &nb);
  assert_true(nb >= 10);
  for (int i = 0; i < 10; i++) {
    assert_int_equal(rf[i], rb[i]); /* the same candidate (both enumerate in the same order) */
    assert_true(step_of(&fast, rf[i]) == step_of(&brute, rb[i]));
  }
  int ff, fb, *pf = bs_search_front(&fast, &ff), *pb = bs_search_front(&brute, &fb);
  assert_int_equal(ff, fb);
  for (int i = 0; i < ff; i++) assert_int_equal(pf[i], pb[i]);
  /* Split over two ranks (each pruning with its own results): the same top 10 and front. */
  int ns, *rs = bs_search_ranking(&split, &ns), fs, *ps = bs_search_front(&split, &fs);
  for (int i = 0; i < 10; i++) assert_int_equal(rs[i], rb[i]);
  assert_int_equal(fs, fb);
  for (int i = 0; i < fs; i++) assert_int_equal(ps[i], pb[i]);
  assert_int_equal(split.simulated + split.bound, fast.simulated + fast.bound);
  free(rs);
  free(ps);
  bs_search_free(&split);
  print_message("search: %d candidates, %d legal, %d simulated, %d pruned by bound (brute force %d)\n", fast.n,
                fast.legal, fast.simulated, fast.bound, brute.simulated);
  free(rf);
  free(rb);
  free(pf);
  free(pb);
  bs_search_free(&fast);
  bs_search_free(&brute);
}

static void test_brute_force(void **st) {
  (void)st;
  /* 8 GPUs at model scope, two sequences per step: methods, tp x dp x pp, layouts, ZeRO, recompute,
   * pipeline schedules;
   * a capacity cut by the 16K sequences' memory is not reached, so a 40 GB profile would be
   * needed to exercise memory pruning: the walk test above covers its figures. */
  bs_config c = base_cfg(BS_SCOPE_MODEL, 8);
  c.work.seq_len = 16 * 1024;
  c.work.batch = 2;
  bs_search_autos a = {.method = 1,
                       .tp = 1,
                       .dp = 1,
                       .pp = 1,
                       .layout = 1,
                       .zero = 1,
                       .recompute = 1,
                       .ulysses_degree = 1,
                       .pp_schedule = 1};
  c.par.pp = 1;
  c.model.layers = 8; /* pipelines of 2 and 4 stages also run interleaved over 2 or 4 chunks */
  brute_agrees(&c, &a);
}

/* Each rank's record of its attention ops (bs_sim_opts.no_op_cache, search --no-cache) changes
 * nothing: on the space of brute_force, with pipelines, every candidate's status, walk and bound,
 * every simulated step and peak, the top 10 and the front are the same with it and without it. */
static void test_op_cache_same(void **st) {
  (void)st;
  bs_config c = base_cfg(BS_SCOPE_MODEL, 8);
  c.work.seq_len = 16 * 1024;
  c.work.batch = 2;
  c.par.pp = 1;
  c.model.layers = 8;
  bs_search_autos a = {.method = 1, .tp = 1, .dp = 1, .pp = 1, .layout = 1, .recompute = 1, .pp_schedule = 1};
  bs_search s[2];
  for (int k = 0; k < 2; k++) {
    char err[512] = "";
    assert_int_equal(bs_search_expand(&c, 1, &a, &s[k], err, sizeof err), 0);
    bs_sim_opts o;
    bs_sim_opts_default(&o);
    o.no_op_cache = k;
    bs_search_opts so = {.top_k = 10, .parts = 1, .opts = &o};
    assert_int_equal(bs_search_run(&s[k], &so, err, sizeof err), 0);
  }
  assert_int_equal(s[0].n, s[1].n);
  assert_true(s[0].simulated >= 10);
  /* a candidate keeps its walk's peak and bound: the walk's classes and times are walked again here,
   * with the record and without, as the search walked them (the corners once refined) */
  bs_profile *prof = calloc(1, sizeof *prof);
  char perr[512] = "";
  assert_non_null(prof);
  assert_int_equal(bs_profile_load(c.cluster.profile, prof, perr, sizeof perr), 0);
  for (int i = 0; i < s[0].n; i++) {
    const bs_cand *x = &s[0].c[i], *y = &s[1].c[i];
    assert_int_equal(x->status, y->status);
    assert_int_equal(x->flags, y->flags);
    assert_int_equal(x->peak_bytes, y->peak_bytes);
    assert_true(x->bound == y->bound);
    if (x->status == BS_CAND_SIMULATED) {
      const bs_result *rx = bs_search_result(&s[0], i), *ry = bs_search_result(&s[1], i);
      assert_true(rx->time.step == ry->time.step);
      assert_int_equal(rx->mem.peak_bytes_max, ry->mem.peak_bytes_max);
    }
    /* a candidate never walked keeps its probe's figures (equal above, with the record and without) */
    if (x->status == BS_CAND_ILLEGAL || x->status == BS_CAND_FAILED || (x->flags & BS_CAND_PROBED)) continue;
    bs_config cx = cfg_of(&s[0], i);
    bs_walk w[2];
    for (int k = 0; k < 2; k++) {
      bs_sim_opts o;
      bs_sim_opts_default(&o);
      o.no_op_cache = k;
      int mode = x->flags & BS_CAND_REFINED ? BS_WALK_CORNERS : BS_WALK_STAGES;
      assert_int_equal(bs_sim_walk(&cx, &o, prof, mode, &w[k], perr, sizeof perr), 0);
    }
    assert_int_equal(w[0].peak_bytes, x->peak_bytes);
    for (int j = 0; j < BS_MEM_CLASS_COUNT; j++) assert_int_equal(w[0].breakdown[j], w[1].breakdown[j]);
    assert_true(w[0].compute_s == w[1].compute_s && w[0].replay_s == w[1].replay_s);
  }
  free(prof);
  int n0, n1, *r0 = bs_search_ranking(&s[0], &n0), *r1 = bs_search_ranking(&s[1], &n1);
  assert_int_equal(n0, n1);
  for (int i = 0; i < n0; i++) assert_int_equal(r0[i], r1[i]);
  int f0, f1, *p0 = bs_search_front(&s[0], &f0), *p1 = bs_search_front(&s[1], &f1);
  assert_int_equal(f0, f1);
  for (int i = 0; i < f0; i++) assert_int_equal(p0[i], p1[i]);
  print_message("%d candidates, %d simulated, %d pruned by bound: the same with and without the record\n", s[0].n,
                s[0].simulated, s[0].bound);
  free(r0);
  free(r1);
  free(p0);
  free(p1);
  bs_search_free(&s[0]);
  bs_search_free(&s[1]);
}

/* The first pass's microbatch shortcut (walk.c: one rank, 2 and 3 microbatches extended) equals the
 * walk of every microbatch of that rank, and stays below the corners' walk (a lower bound). */
static void test_stages_shortcut(void **st) {
  (void)st;
  const struct {
    bs_method m;
    int tp, dp, zero, recompute, micro;
  } pts[] = {
    {BS_BURST, 1, 1, 0, 0, 1}, {BS_RING, 2, 1, 0, 1, 1},  {BS_BURST, 1, 2, 1, 0, 1},
    {BS_USP, 1, 1, 0, 2, 2},   {BS_BURST, 2, 2, 3, 1, 1}, {BS_TP, 1, 2, 2, 0, 1},
  };
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_profile *prof = calloc(1, sizeof *prof);
  char err[512] = "";
  assert_non_null(prof);
  assert_int_equal(bs_profile_load("a100-sxm4-80gb", prof, err, sizeof err), 0);
  for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
    bs_config c = base_cfg(BS_SCOPE_MODEL, 8);
    c.work.seq_len = 16 * 1024;
    c.work.batch = 12; /* 6 to 12 microbatches per replica */
    c.par.method = pts[i].m;
    c.par.tp = pts[i].tp;
    c.par.dp = pts[i].dp;
    c.par.zero = pts[i].zero;
    c.par.micro_batch = pts[i].micro;
    c.par.layout = pts[i].m == BS_TP ? BS_CONTIGUOUS : BS_ZIGZAG;
    c.par.ulysses_degree = 2;
    c.work.recompute = pts[i].recompute;
    bs_walk s, e, k;
    assert_int_equal(bs_sim_walk(&c, &o, prof, BS_WALK_STAGES, &s, err, sizeof err), 0);
    assert_int_equal(bs_sim_walk(&c, &o, prof, BS_WALK_STAGES_EVERY, &e, err, sizeof err), 0);
    assert_int_equal(bs_sim_walk(&c, &o, prof, BS_WALK_CORNERS, &k, err, sizeof err), 0);
    print_message(
      "point %zu: shortcut %lld B %.9g s %.9g s, every microbatch %lld B %.9g s %.9g s, corners %lld B "
      "%.9g s\n",
      i, (long long)s.peak_bytes, s.compute_s, s.replay_s, (long long)e.peak_bytes, e.compute_s, e.replay_s,
      (long long)k.peak_bytes, k.replay_s);
    assert_int_equal(s.peak_bytes, e.peak_bytes);
    for (int j = 0; j < BS_MEM_CLASS_COUNT; j++) assert_int_equal(s.breakdown[j], e.breakdown[j]);
    assert_true(fabs(s.compute_s - e.compute_s) <= 1e-9 * e.compute_s);
    assert_true(fabs(s.replay_s - e.replay_s) <= 1e-9 * e.replay_s);
    assert_true(s.peak_bytes <= k.peak_bytes);
    assert_true(s.replay_s <= k.replay_s * (1 + 1e-12) && s.compute_s <= k.compute_s * (1 + 1e-12));
  }
  free(prof);
}

/* The pipeline shortcut (walk.c: fewer microbatches, the middle ones' messages between stages
 * relaxed, extended): on 1F1B and interleaved points of 2 to 8 stages, with cp, tp, ZeRO-1,
 * recompute and several microbatch counts, its peak and breakdown equal the walk of every
 * microbatch, its bound and compute are at most that walk's, on the first pass and on the corners;
 * and it walks 256 microbatches in less than half the CPU time. */
static void test_pipeline_shortcut(void **st) {
  (void)st;
  const struct {
    bs_method m;
    int G, pp, chunks, tp, dp, zero, recompute, micro, layers;
    int64_t batch;
  } pts[] = {
    {BS_BURST, 8, 2, 0, 2, 1, 0, 0, 1, 8, 12},   {BS_BURST, 8, 2, 0, 1, 2, 1, 1, 1, 8, 48},
    {BS_RING, 8, 4, 0, 1, 1, 0, 0, 1, 8, 16},    {BS_BURST, 8, 4, 0, 2, 1, 1, 2, 1, 8, 32},
    {BS_USP, 16, 4, 0, 1, 1, 0, 1, 2, 8, 64},    {BS_BURST, 8, 8, 0, 1, 1, 0, 0, 1, 8, 24},
    {BS_BURST, 16, 8, 0, 1, 2, 1, 1, 1, 16, 64}, {BS_BURST, 8, 2, 2, 2, 1, 0, 0, 1, 8, 48},
    {BS_RING, 8, 2, 4, 1, 2, 1, 1, 1, 8, 64},    {BS_BURST, 8, 4, 2, 1, 1, 0, 2, 1, 8, 64},
    {BS_BURST, 8, 4, 4, 2, 1, 1, 1, 1, 16, 48},  {BS_BURST, 8, 8, 4, 1, 1, 0, 0, 1, 32, 96},
    {BS_BURST, 8, 2, 0, 2, 1, 0, 0, 1, 8, 256}, /* 11 microbatches walked for 256: the CPU time below */
  };
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_profile *prof = calloc(1, sizeof *prof);
  char err[512] = "";
  assert_non_null(prof);
  assert_int_equal(bs_profile_load("a100-sxm4-80gb", prof, err, sizeof err), 0);
  double cpu_short = 0, cpu_every = 0, worst = 1;
  for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
    bs_config c = base_cfg(BS_SCOPE_MODEL, pts[i].G);
    c.work.seq_len = 8 * 1024;
    c.model.layers = pts[i].layers;
    c.work.batch = pts[i].batch;
    c.par.method = pts[i].m;
    c.par.pp = pts[i].pp;
    c.par.tp = pts[i].tp;
    c.par.dp = pts[i].dp;
    c.par.zero = pts[i].zero;
    c.par.micro_batch = pts[i].micro;
    c.par.layout = BS_ZIGZAG;
    c.par.ulysses_degree = 2;
    if (pts[i].chunks) {
      c.par.pp_schedule = BS_PP_INTERLEAVED;
      c.par.pp_chunks = pts[i].chunks;
    }
    c.work.recompute = pts[i].recompute;
    for (int corners = 0; corners < 2; corners++) {
      int mode = corners ? BS_WALK_CORNERS : BS_WALK_STAGES,
          every = corners ? BS_WALK_CORNERS_EVERY : BS_WALK_STAGES_EVERY;
      bs_walk s, e;
      clock_t t0 = clock();
      int rc = bs_sim_walk(&c, &o, prof, mode, &s, err, sizeof err);
      clock_t t1 = clock();
      if (rc) print_error("point %zu: %s\n", i, err);
      assert_int_equal(rc, 0);
      assert_int_equal(bs_sim_walk(&c, &o, prof, every, &e, err, sizeof err), 0);
      clock_t t2 = clock();
      if (pts[i].batch == 256) { /* the CPU time of walking 11 microbatches against 256 */
        cpu_short += (double)(t1 - t0);
        cpu_every += (double)(t2 - t1);
      }
      print_message(
        "point %zu %s: shortcut %lld B %.9g s %.9g s, every microbatch %lld B %.9g s %.9g s: bound "
        "ratio %.6f\n",
        i, corners ? "corners" : "stages", (long long)s.peak_bytes, s.compute_s, s.replay_s, (long long)e.peak_bytes,
        e.compute_s, e.replay_s, s.replay_s / e.replay_s);
      assert_int_equal(s.peak_bytes, e.peak_bytes);
      for (int j = 0; j < BS_MEM_CLASS_COUNT; j++) assert_int_equal(s.breakdown[j], e.breakdown[j]);
      assert_int_equal(s.oom, e.oom);
      assert_true(s.replay_s <= e.replay_s * (1 + 1e-12));
      assert_true(s.compute_s <= e.compute_s * (1 + 1e-12));
      assert_true(s.replay_s > 0);
      if (s.replay_s / e.replay_s < worst) worst = s.replay_s / e.replay_s;
    }
  }
  print_message("worst bound ratio %.6f; CPU of the 256-microbatch point: shortcut %.3g s, every microbatch %.3g s\n",
                worst, cpu_short / CLOCKS_PER_SEC, cpu_every / CLOCKS_PER_SEC);
  assert_true(cpu_short < 0.5 * cpu_every);
  free(prof);
}

/* Search and brute force agree where the first pass's microbatch shortcut applies: 8 microbatches. */
static void test_brute_force_microbatches(void **st) {
  (void)st;
  bs_config c = base_cfg(BS_SCOPE_MODEL, 8);
  c.work.seq_len = 16 * 1024;
  c.work.batch = 8;
  c.par.pp = 1;
  bs_search_autos a = {.method = 1, .tp = 1, .dp = 1, .zero = 1, .recompute = 1, .micro_batch = 1, .ulysses_degree = 1};
  c.par.layout = BS_ZIGZAG;
  brute_agrees(&c, &a);
}

static void test_brute_force_prefill(void **st) {
  (void)st;
  /* 16 GPUs, one attention layer's prefill at 64K: methods, tp, layouts, and what travels the ring
   * (pass-KV and pass-Q on burst and ring). */
  bs_config c = base_cfg(BS_SCOPE_ATTENTION, 16);
  c.work.phase = BS_PREFILL;
  c.work.seq_len = 64 * 1024;
  bs_search_autos a = {.method = 1, .tp = 1, .layout = 1, .ulysses_degree = 1, .cp_pass = 1};
  bs_search s;
  char err[256];
  assert_int_equal(bs_search_expand(&c, 1, &a, &s, err, sizeof err), 0);
  int passq = 0;
  for (int i = 0; i < s.n; i++) {
    bs_config ci = cfg_of(&s, i);
    bs_method m = ci.par.method;
    if (ci.par.cp_pass == BS_PASS_Q) {
      assert_true(m == BS_BURST || m == BS_RING); /* the only methods with a pass-Q plan */
      passq++;
    }
  }
  assert_true(passq > 0);
  bs_search_free(&s);
  brute_agrees(&c, &a);
}

static void test_brute_force_nodes(void **st) {
  (void)st;
  /* 16 GPUs over two DGX A100 nodes, two layers trained at 32K: methods, tp (up to both nodes),
   * layouts and recompute, where the collectives that cross nodes have floors in the bound. */
  bs_config c = base_cfg(BS_SCOPE_MODEL, 16);
  c.model.layers = 2;
  bs_search_autos a = {.method = 1, .tp = 1, .layout = 1, .recompute = 1, .ulysses_degree = 1};
  brute_agrees(&c, &a);
}

static void test_brute_force_fp8(void **st) {
  (void)st;
  /* 8 GPUs of DGX H100 nodes, two layers trained at 16K: FP8 GEMMs (off, ffn, all) asked for by
   * auto, with methods, tp, layouts and recompute. */
  bs_config c = base_cfg(BS_SCOPE_MODEL, 8);
  snprintf(c.cluster.topology, sizeof c.cluster.topology, "dgx-h100");
  snprintf(c.cluster.profile, sizeof c.cluster.profile, "h100-sxm");
  c.work.seq_len = 16 * 1024;
  c.model.layers = 2;
  bs_search_autos a = {.method = 1, .tp = 1, .layout = 1, .recompute = 1, .ulysses_degree = 1, .fp8 = 1};
  bs_search s;
  char err[256];
  assert_int_equal(bs_search_expand(&c, 1, &a, &s, err, sizeof err), 0);
  int per[3] = {0, 0, 0};
  for (int i = 0; i < s.n; i++) per[cfg_of(&s, i).model.fp8]++;
  assert_true(per[BS_FP8_OFF] > 0 && per[BS_FP8_OFF] == per[BS_FP8_FFN] && per[BS_FP8_FFN] == per[BS_FP8_ALL]);
  bs_search_free(&s);
  brute_agrees(&c, &a);
}

static void test_brute_force_variants(void **st) {
  (void)st;
  /* 16 GPUs over two DGX A100 nodes, one layer trained at 32K: methods, tp and usp degrees with
   * double rings (burst, ring), usp placements and Megatron v1 / v3 searched. */
  bs_config c = base_cfg(BS_SCOPE_LAYER, 16);
  c.par.layout = BS_ZIGZAG;
  bs_search_autos a = {.method = 1,
                       .tp = 1,
                       .ulysses_degree = 1,
                       .double_ring = BS_SEARCH_EVERY,
                       .placement = BS_SEARCH_EVERY,
                       .tp_variant = BS_SEARCH_EVERY};
  brute_agrees(&c, &a);
}

/* The candidate's point with double_ring, ulysses_placement and tp_variant as in the base point. */
static bs_config without_variants(const bs_config *x, const bs_config *base) {
  bs_config y = *x;
  y.par.double_ring = base->par.double_ring;
  y.par.ulysses_placement = base->par.ulysses_placement;
  y.par.tp_variant = base->par.tp_variant;
  return y;
}

static void test_variants_spread(void **st) {
  (void)st;
  /* 16 GPUs over two nodes at layer scope. Searched, the three keys turn every candidate of the
   * space without them into as many as the values that change its plan, as a hand count says:
   * double_ring off and on for burst and ring with cp > 1, both placements for usp, v1 and v3
   * where tp > 1 (method tp: gpus / (dp pp)). */
  bs_config c = base_cfg(BS_SCOPE_LAYER, 16);
  bs_search_autos a = {.method = 1, .tp = 1, .layout = 1, .ulysses_degree = 1};
  bs_search s0, s;
  char err[256];
  assert_int_equal(bs_search_expand(&c, 1, &a, &s0, err, sizeof err), 0);
  int want = 0;
  for (int i = 0; i < s0.n; i++) {
    bs_config ci = cfg_of(&s0, i);
    const bs_parallel *p = &ci.par;
    int tp = p->method == BS_TP ? p->gpus : p->tp, cp = p->method == BS_TP ? 1 : p->gpus / p->tp;
    int dr = (p->method == BS_BURST || p->method == BS_RING) && cp > 1 ? 2 : 1;
    want += dr * (p->method == BS_USP ? 2 : 1) * (tp > 1 ? 2 : 1);
    assert_int_equal(s0.c[i].spread, 0);
  }
  a.double_ring = a.placement = a.tp_variant = BS_SEARCH_EVERY;
  assert_int_equal(bs_search_expand(&c, 1, &a, &s, err, sizeof err), 0);
  assert_int_equal(s.n, want);
  int labelled[3] = {0, 0, 0};
  for (int i = 0; i < s.n; i++) { /* each is a point of the space without them, with values they take */
    bs_config ci = cfg_of(&s, i), y = without_variants(&ci, &c);
    int found = 0;
    for (int j = 0; j < s0.n && !found; j++) {
      bs_config cj = cfg_of(&s0, j);
      found = !memcmp(&y, &cj, sizeof y);
    }
    assert_true(found);
    const bs_parallel *p = &ci.par;
    if (s.c[i].spread & BS_SPREAD_DOUBLE_RING) {
      assert_true(p->double_ring == BS_OFF || p->double_ring == BS_ON);
      labelled[0]++;
    } else assert_int_equal(p->double_ring, BS_AUTO);
    if (s.c[i].spread & BS_SPREAD_PLACEMENT) labelled[1]++;
    else assert_int_equal(p->ulysses_placement, BS_HEAD_FIRST);
    if (s.c[i].spread & BS_SPREAD_TP_VARIANT) labelled[2]++;
    else assert_int_equal(p->tp_variant, 1);
  }
  assert_true(labelled[0] > 0 && labelled[1] > 0 && labelled[2] > 0);
  bs_search_free(&s);
  /* A list: ring-first alone, v3 alone: no more candidates, and those values where they apply. */
  a.double_ring = 0;
  a.placement = BS_SEARCH_BIT(BS_RING_FIRST);
  a.tp_variant = BS_SEARCH_BIT(3);
  assert_int_equal(bs_search_expand(&c, 1, &a, &s, err, sizeof err), 0);
  assert_int_equal(s.n, s0.n);
  for (int i = 0; i < s.n; i++) {
    bs_config ci = cfg_of(&s, i);
    const bs_parallel *p = &ci.par;
    if (p->method == BS_USP) assert_int_equal(p->ulysses_placement, BS_RING_FIRST);
    int tp = p->method == BS_TP ? p->gpus : p->tp;
    assert_int_equal(p->tp_variant, tp > 1 ? 3 : 1);
    assert_int_equal(s.c[i].spread, 0); /* one value each: the label needs none */
  }
  bs_search_free(&s);
  bs_search_free(&s0);
}

/* Candidates kept out as running their twin's plan (a ring within one node, double or not; usp's
 * placements on one node) simulate to exactly their kept twin's step and peak. */
/* Candidate i, set aside as the twin of j, simulates to j's step and peak. */
static void twin_same_step(const bs_search *s, int i, int j, const bs_sim_opts *o) {
  char err[512];
  bs_result ri, rj;
  memset(&ri, 0, sizeof ri);
  memset(&rj, 0, sizeof rj);
  bs_config ci = cfg_of(s, i), cj = cfg_of(s, j);
  assert_int_equal(bs_sim_run(&ci, o, &ri, err, sizeof err), 0);
  assert_int_equal(bs_sim_run(&cj, o, &rj, err, sizeof err), 0);
  if (ri.time.step != rj.time.step)
    print_error("%s: %.9g s, its twin %.9g s\n", bs_search_why(s, i), ri.time.step, rj.time.step);
  assert_true(ri.time.step == rj.time.step);
  assert_int_equal(ri.mem.peak_bytes_max, rj.mem.peak_bytes_max);
  bs_result_free(&ri);
  bs_result_free(&rj);
}

static void test_same_plan_twins(void **st) {
  (void)st;
  bs_config c = base_cfg(BS_SCOPE_ATTENTION, 8);
  c.par.layout = BS_CONTIGUOUS; /* causal and contiguous: the ranks' work differs with their place */
  bs_search_autos a = {.method = 1, .ulysses_degree = 1, .double_ring = BS_SEARCH_EVERY, .placement = BS_SEARCH_EVERY};
  bs_search s;
  char err[512];
  assert_int_equal(bs_search_expand(&c, 1, &a, &s, err, sizeof err), 0);
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_search_opts so = {.top_k = 10, .opts = &o, .dry_run = 1};
  assert_int_equal(bs_search_run(&s, &so, err, sizeof err), 0);
  int twins[2] = {0, 0};
  for (int i = 0; i < s.n; i++) {
    int ring = strstr(bs_search_why(&s, i), "parallel.double_ring:") != NULL;
    if (s.c[i].status != BS_CAND_ILLEGAL || (!ring && !strstr(bs_search_why(&s, i), "parallel.ulysses_placement:")))
      continue;
    bs_config ci = cfg_of(&s, i);
    int j = i - 1;
    for (; j >= 0; j--) {
      bs_config cj = cfg_of(&s, j);
      if (cj.par.method == ci.par.method && cj.par.ulysses_degree == ci.par.ulysses_degree &&
          s.c[j].status != BS_CAND_ILLEGAL)
        break;
    }
    assert_true(j >= 0);
    twin_same_step(&s, i, j, &o);
    twins[ring]++;
  }
  assert_true(twins[0] > 0 && twins[1] > 0);
  bs_search_free(&s);
}

/* A method list is one base point per method: at cp = 1 their candidates run one plan (no method splits
 * the sequence), so all but the first are twins, and each simulates to its twin's step and peak. */
static void test_method_list_twins(void **st) {
  (void)st;
  bs_config c[3];
  const bs_method m[3] = {BS_BURST, BS_RING, BS_ULYSSES};
  for (int i = 0; i < 3; i++) {
    c[i] = base_cfg(BS_SCOPE_LAYER, 8);
    c[i].par.method = m[i];
  }
  bs_search_autos a = {.tp = 1};
  bs_search s;
  char err[512];
  assert_int_equal(bs_search_expand(c, 3, &a, &s, err, sizeof err), 0);
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_search_opts so = {.top_k = 10, .opts = &o, .dry_run = 1};
  assert_int_equal(bs_search_run(&s, &so, err, sizeof err), 0);
  int twins = 0;
  for (int i = 0; i < s.n; i++) {
    if (s.c[i].status != BS_CAND_ILLEGAL || !strstr(bs_search_why(&s, i), "parallel.method:")) continue;
    bs_config ci = cfg_of(&s, i);
    int j = 0;
    for (; j < i; j++) {
      bs_config y = cfg_of(&s, j);
      bs_method mj = y.par.method;
      y.par.method = ci.par.method;
      if (s.c[j].status != BS_CAND_ILLEGAL && mj == BS_BURST && !memcmp(&y, &ci, sizeof y)) break;
    }
    assert_true(j < i); /* the twin is the first method's candidate */
    assert_int_equal(ci.par.tp, 8);
    twin_same_step(&s, i, j, &o);
    twins++;
  }
  assert_true(twins >= 2); /* ring's and ulysses's tp = 8 */
  bs_search_free(&s);
}

static void test_fp8_pruned(void **st) {
  (void)st;
  /* fp8 is searched only when asked, and at layer and model scope; on a profile without FP8 GEMMs
   * (A100) every FP8 candidate is illegal, counted under the profile's reason. */
  bs_config c = base_cfg(BS_SCOPE_LAYER, 8);
  bs_search_autos a = {.method = 1, .tp = 1};
  bs_search s;
  char err[256];
  assert_int_equal(bs_search_expand(&c, 1, &a, &s, err, sizeof err), 0);
  int n_off = s.n;
  for (int i = 0; i < s.n; i++) assert_int_equal(cfg_of(&s, i).model.fp8, BS_FP8_OFF);
  bs_search_free(&s);
  a.fp8 = 1;
  bs_config att = base_cfg(BS_SCOPE_ATTENTION, 8);
  assert_int_equal(bs_search_expand(&att, 1, &a, &s, err, sizeof err), 0);
  for (int i = 0; i < s.n; i++) assert_int_equal(cfg_of(&s, i).model.fp8, BS_FP8_OFF); /* no GEMMs to run in FP8 */
  bs_search_free(&s);
  assert_int_equal(bs_search_expand(&c, 1, &a, &s, err, sizeof err), 0);
  assert_int_equal(s.n, 3 * n_off);
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_search_opts so = {.top_k = 10, .opts = &o, .dry_run = 1};
  assert_int_equal(bs_search_run(&s, &so, err, sizeof err), 0);
  int by_fp8 = 0, legal_off = 0;
  for (int i = 0; i < s.n; i++) {
    int f = (int)cfg_of(&s, i).model.fp8; /* fp8 turns fastest: the point without it is f before */
    if (f == BS_FP8_OFF) {
      legal_off += s.c[i].status != BS_CAND_ILLEGAL;
      continue;
    }
    assert_int_equal(s.c[i].status, BS_CAND_ILLEGAL);
    assert_int_equal(cfg_of(&s, i - f).model.fp8, BS_FP8_OFF);
    if (s.c[i - f].status != BS_CAND_ILLEGAL) { /* legal but for FP8 */
      assert_non_null(strstr(bs_search_why(&s, i), "model.fp8"));
      by_fp8++;
    }
  }
  assert_true(legal_off > 0);
  assert_int_equal(by_fp8, 2 * legal_off);
  int counted = 0;
  for (int i = 0; i < s.nreasons; i++)
    if (strstr(s.reasons[i].example, "model.fp8")) counted += s.reasons[i].count;
  assert_int_equal(counted, by_fp8);
  bs_search_free(&s);
}

static void test_many_tree_groups(void **st) {
  (void)st;
  /* Ring over cp 2 under tp 32 on 64 GPUs with tree allreduces: 32 strided groups over all ranks,
   * each timed whole with its bytes counted by its first member, several sizes each (more than a
   * plan-wide table of 64 held; the 1024-GPU search's tp 32 candidates failed on it). Their bytes
   * are those of the tree run step by step, every member counting its own sends. */
  bs_config c = base_cfg(BS_SCOPE_MODEL, 64);
  c.par.method = BS_RING;
  c.par.tp = 32;
  c.par.layout = BS_ZIGZAG;
  c.work.seq_len = 64 * 1024;
  c.model.layers = 32;
  c.cluster.coll_algo = BS_COLL_ALGO_TREE;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_result whole, steps;
  memset(&whole, 0, sizeof whole);
  memset(&steps, 0, sizeof steps);
  char err[512] = "";
  int rc = bs_sim_run(&c, &o, &whole, err, sizeof err);
  if (rc) print_error("whole trees: %s\n", err);
  assert_int_equal(rc, 0);
  o.coll_model = BS_COLL_STEPS;
  rc = bs_sim_run(&c, &o, &steps, err, sizeof err);
  if (rc) print_error("tree steps: %s\n", err);
  assert_int_equal(rc, 0);
  assert_true(whole.comm.inter_node > 0);
  assert_int_equal(whole.comm.total, steps.comm.total);
  assert_int_equal(whole.comm.intra_node, steps.comm.intra_node);
  assert_int_equal(whole.comm.inter_node, steps.comm.inter_node);
  assert_int_equal(whole.comm.per_rank_max_sent, steps.comm.per_rank_max_sent);
  bs_result_free(&whole);
  bs_result_free(&steps);
}

/* The searched keys' values of a configuration, hashed (FNV-1a): what tells two candidates apart. */
static uint64_t searched_hash(const bs_config *c) {
  const int64_t v[] = {
    c->par.method,         c->par.tp,      c->par.dp,          c->par.pp,          c->par.layout,
    c->par.ulysses_degree, c->par.zero,    c->par.micro_batch, c->work.recompute,  c->par.pp_schedule,
    c->par.pp_chunks,      c->par.cp_pass, c->model.fp8,       c->par.double_ring, c->par.ulysses_placement,
    c->par.tp_variant,     c->par.ep};
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    for (int b = 0; b < 8; b++) h = (h ^ (uint64_t)((v[i] >> (8 * b)) & 0xff)) * 1099511628211ull;
  return h;
}

static int by_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* Issue 27: the whole default space of Llama 3.1 405B trained at 8K on 2304 H100 GPUs holds millions
 * of candidates. Each record is lean (its base point and the index of each key's value, from which
 * bs_search_config rebuilds its configuration; its result only once simulated): the space expanded
 * stays far below a GiB of memory (12 KB a candidate before, 25 GB for this space). Every rebuilt
 * configuration is a factorisation of the GPUs and no two are the same, as the enumeration makes
 * them (a record that lost a key's index would rebuild two candidates alike). */
static void test_lean_record(void **st) {
  (void)st;
  print_message("bs_cand: %zu bytes\n", sizeof(bs_cand));
  assert_true(sizeof(bs_cand) <= 64);
  bs_config c = base_cfg(BS_SCOPE_MODEL, 2304);
  assert_int_equal(bs_model_preset("llama3.1-405b", &c.model), 0);
  snprintf(c.cluster.topology, sizeof c.cluster.topology, "dgx-h100");
  snprintf(c.cluster.profile, sizeof c.cluster.profile, "h100-sxm");
  c.work.seq_len = 8 * 1024;
  c.work.batch = 64;
  bs_search_autos a = {.method = 1,
                       .tp = 1,
                       .dp = 1,
                       .pp = 1,
                       .layout = 1,
                       .zero = 1,
                       .micro_batch = 1,
                       .recompute = 1,
                       .ulysses_degree = 1,
                       .pp_schedule = 1,
                       .cp_pass = 1,
                       .placement = BS_SEARCH_EVERY,
                       .tp_variant = BS_SEARCH_EVERY,
                       .ep = 1};
  struct rusage ru;
  bs_search s;
  char err[256];
  assert_int_equal(bs_search_expand(&c, 1, &a, &s, err, sizeof err), 0);
  assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
  print_message("%d candidates, peak RSS %.1f MiB after the expansion\n", s.n, ru.ru_maxrss / 1024.0);
  assert_true(s.n > 1000000);             /* the space is the large one, or the test proves nothing */
  assert_true(ru.ru_maxrss < 512 * 1024); /* KiB: under half a GiB */
  uint64_t *h = malloc(sizeof *h * (size_t)s.n);
  assert_non_null(h);
  for (int i = 0; i < s.n; i++) {
    bs_config ci = cfg_of(&s, i);
    int size[BS_DIM_COUNT];
    bs_mesh_sizes(&ci.par, size);
    assert_int_equal(size[BS_DIM_TP] * size[BS_DIM_CP] * size[BS_DIM_DP] * size[BS_DIM_PP], ci.par.gpus);
    h[i] = searched_hash(&ci);
  }
  qsort(h, (size_t)s.n, sizeof *h, by_u64);
  for (int i = 1; i < s.n; i++) assert_true(h[i] != h[i - 1]);
  free(h);
  bs_search_free(&s);
}

/* The spaces of probe_below_walk and lazy_same: pipelines and their schedules, ZeRO and recompute
 * (the brute_force space); micro-batches under the layer shortcut; and 128K tokens on 8 H100s,
 * where memory prunes. */
static int lazy_space(int k, bs_config *c, bs_search_autos *a) {
  memset(a, 0, sizeof *a);
  *c = base_cfg(BS_SCOPE_MODEL, 8);
  c->work.seq_len = 16 * 1024;
  c->par.pp = 1;
  switch (k) {
  case 0:
    c->work.batch = 2;
    c->model.layers = 8;
    *a = (bs_search_autos){.method = 1,
                           .tp = 1,
                           .dp = 1,
                           .pp = 1,
                           .layout = 1,
                           .zero = 1,
                           .recompute = 1,
                           .ulysses_degree = 1,
                           .pp_schedule = 1};
    return 1;
  case 1:
    c->work.batch = 8;
    c->par.layout = BS_ZIGZAG;
    *a = (bs_search_autos){
      .method = 1, .tp = 1, .dp = 1, .zero = 1, .recompute = 1, .micro_batch = 1, .ulysses_degree = 1};
    return 1;
  case 2:
    snprintf(c->cluster.topology, sizeof c->cluster.topology, "dgx-h100");
    snprintf(c->cluster.profile, sizeof c->cluster.profile, "h100-sxm");
    c->work.seq_len = 128 * 1024;
    c->work.batch = 4;
    c->model.layers = 8;
    c->par.layout = BS_ZIGZAG;
    *a = (bs_search_autos){.method = 1, .tp = 1, .dp = 1, .pp = 1, .zero = 1, .recompute = 1, .micro_batch = 1};
    return 1;
  default: return 0;
  }
}

/* Every candidate's probe against its first walk (BS_WALK_STAGES, as the search walks it): the same
 * refusal with the same message, a peak and a bound (the search's slack applied to both) at most the
 * walk's; the probe's out of memory only where the walk's is. The bounds must not be all zero (or the
 * test proves nothing), and the layer-forward bound must pass the prefix's compute somewhere. */
static void test_probe_below_walk(void **st) {
  (void)st;
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_profile *prof[2] = {calloc(1, sizeof(bs_profile)), calloc(1, sizeof(bs_profile))};
  char err[512] = "", werr[512] = "";
  assert_non_null(prof[0]);
  assert_non_null(prof[1]);
  assert_int_equal(bs_profile_load("a100-sxm4-80gb", prof[0], err, sizeof err), 0);
  assert_int_equal(bs_profile_load("h100-sxm", prof[1], err, sizeof err), 0);
  bs_config base;
  bs_search_autos a;
  int probed = 0, refused = 0, oom = 0, tight = 0;
  double closest = 0;
  for (int k = 0; lazy_space(k, &base, &a); k++) {
    bs_search s;
    assert_int_equal(bs_search_expand(&base, 1, &a, &s, err, sizeof err), 0);
    for (int i = 0; i < s.n; i++) {
      bs_config c = cfg_of(&s, i);
      const bs_profile *p = prof[k == 2];
      bs_probe pr;
      bs_walk w;
      int rp = bs_search_probe(&c, &o, p, BS_PROBE_OPS, 1, &pr, err, sizeof err);
      int rw = bs_sim_walk(&c, &o, p, BS_WALK_STAGES, &w, werr, sizeof werr);
      if (rp == -2) { /* the walk's own refusal, word for word */
        assert_int_equal(rw, -2);
        assert_string_equal(err, werr);
        refused++;
        continue;
      }
      if (rw) continue; /* a refusal past the probe's plan: the search walks it when reached */
      double slack = bs_sim_layers_apply(&c, &o) ? 2e-3 : 1e-9;
      double wb = (w.replay_s > w.compute_s ? w.replay_s : w.compute_s) * (1 - slack);
      double pb = pr.compute_s * (1 - slack);
      if (pr.peak_bytes > w.peak_bytes || pb > wb * (1 + 1e-9))
        print_error("space %d candidate %d: probe %lld B %.9g s past the walk's %lld B %.9g s\n", k, i,
                    (long long)pr.peak_bytes, pb, (long long)w.peak_bytes, wb);
      assert_true(pr.peak_bytes <= w.peak_bytes);
      assert_true(pb <= wb * (1 + 1e-9));
      assert_true(!pr.oom || w.oom);
      probed += rp == 0 && pr.compute_s > 0 && pr.peak_bytes > 0;
      oom += pr.oom;
      if (rp == 0 && wb > 0 && pb / wb > closest) closest = pb / wb;
      tight += rp == 0 && pb > 0.25 * wb;
    }
    bs_search_free(&s);
  }
  print_message(
    "probes: %d with bounds, %d refused as the walk refuses, %d out of memory; %d within a quarter of the "
    "walk's bound, the closest %.3g of it\n",
    probed, refused, oom, tight, closest);
  assert_true(probed > 0 && refused > 0 && oom > 0 && tight > 0);
  free(prof[0]);
  free(prof[1]);
}

/* The lazy walks against walking every candidate first: the same top 10 (the same candidates, the
 * same steps) and front; fewer walks; counts that add up. */
static void test_lazy_same(void **st) {
  (void)st;
  bs_config base;
  bs_search_autos a;
  int saved = 0, by_probe = 0;
  for (int k = 0; lazy_space(k, &base, &a); k++) {
    bs_search lazy, all;
    char err[512] = "";
    bs_sim_opts o;
    bs_sim_opts_default(&o);
    for (int j = 0; j < 2; j++) {
      bs_search *s = j ? &all : &lazy;
      assert_int_equal(bs_search_expand(&base, 1, &a, s, err, sizeof err), 0);
      bs_search_opts so = {.top_k = 10, .opts = &o, .walk_all = j};
      int rc = bs_search_run(s, &so, err, sizeof err);
      if (rc) print_error("search: %s\n", err);
      assert_int_equal(rc, 0);
      assert_int_equal(s->bound_violations, 0);
      assert_int_equal(s->probe_violations, 0);
      assert_int_equal(s->failed, 0);
      int illegal = 0, probed = 0;
      for (int i = 0; i < s->n; i++) {
        illegal += s->c[i].status == BS_CAND_ILLEGAL;
        probed += (s->c[i].flags & BS_CAND_PROBED) != 0 && s->c[i].status != BS_CAND_ILLEGAL;
      }
      /* every candidate is illegal, or legal and settled one way */
      assert_int_equal(illegal + s->legal, s->n);
      assert_int_equal(s->legal, s->memory + s->bound + s->simulated - s->memory_by_sim + s->failed);
      assert_int_equal(s->not_walked, probed);
      assert_true(s->memory_by_probe <= s->memory);
      if (j) {
        assert_int_equal(s->not_walked, 0);
        assert_int_equal(s->walked, s->n);
      } else assert_true(s->walked + s->not_walked >= s->legal); /* a legal one is walked, or settled unwalked */
    }
    assert_int_equal(lazy.legal, all.legal);
    int nl, na, *rl = bs_search_ranking(&lazy, &nl), *ra = bs_search_ranking(&all, &na);
    assert_true(na >= 10 && nl >= 10);
    for (int i = 0; i < 10; i++) {
      assert_int_equal(rl[i], ra[i]);
      assert_true(step_of(&lazy, rl[i]) == step_of(&all, ra[i]));
    }
    int fl, fa, *pl = bs_search_front(&lazy, &fl), *pa = bs_search_front(&all, &fa);
    assert_int_equal(fl, fa);
    for (int i = 0; i < fl; i++) {
      assert_int_equal(pl[i], pa[i]);
      assert_true(step_of(&lazy, pl[i]) == step_of(&all, pa[i]));
    }
    print_message(
      "space %d: %d candidates, %d legal; lazy %d walks (%d never walked, %d past memory by their probe), "
      "%d simulated; walk-all %d walks, %d simulated\n",
      k, lazy.n, lazy.legal, lazy.walked, lazy.not_walked, lazy.memory_by_probe, lazy.simulated, all.walked,
      all.simulated);
    assert_true(lazy.walked <= all.walked);
    saved += all.walked - lazy.walked;
    by_probe += lazy.memory_by_probe;
    free(rl);
    free(ra);
    free(pl);
    free(pa);
    bs_search_free(&lazy);
    bs_search_free(&all);
  }
  assert_true(saved > 0 && by_probe > 0); /* the lazy walks saved walks, or the test proves nothing */
}

int main(int argc, char **argv) {
  const struct CMUnitTest all[] = {
    cmocka_unit_test(test_walk_peak_equals_sim), cmocka_unit_test(test_brute_force),
    cmocka_unit_test(test_brute_force_prefill),  cmocka_unit_test(test_brute_force_nodes),
    cmocka_unit_test(test_brute_force_fp8),      cmocka_unit_test(test_fp8_pruned),
    cmocka_unit_test(test_many_tree_groups),     cmocka_unit_test(test_brute_force_variants),
    cmocka_unit_test(test_variants_spread),      cmocka_unit_test(test_same_plan_twins),
    cmocka_unit_test(test_method_list_twins),    cmocka_unit_test(test_stages_shortcut),
    cmocka_unit_test(test_op_cache_same),        cmocka_unit_test(test_brute_force_microbatches),
    cmocka_unit_test(test_lean_record),          cmocka_unit_test(test_pipeline_shortcut),
    cmocka_unit_test(test_probe_below_walk),     cmocka_unit_test(test_lazy_same),
  };
  return BS_RUN_NAMED(all, argc, argv, NULL, NULL);
}
