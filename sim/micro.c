/*
 * micro.c — the micro-batch shortcut for pipeline steps: after its warm-up, a
 * 1F1B or interleaved schedule repeats the same pattern every g micro-batches
 * (g = 1 for 1F1B, g = pp for the interleaved schedule, whose micro-batch
 * count is a multiple of pp), and the step ends with the same cool-down and
 * the same gradient collectives whatever the count. So the simulator runs the
 * step with Ma and Mb = Ma + g micro-batches and extends the difference to M:
 * every rank's figure X(M) = X(Ma) + ((M - Ma) / g) (X(Mb) - X(Ma)), as the
 * layer shortcut (layers.c) extends layers.
 *
 * What is extended, and how the result stays the full simulation's:
 * - each rank's times and bytes on its own line; the step's figures that are
 *   a maximum over the ranks (step, fwd, bwd, compute, exposed, waiting for
 *   peers, the most bytes a rank sent, by group) are taken again over the
 *   extended ranks, since the rank with the maximum can change with M (it
 *   does for time_s.fwd on the 70B step); the sums (total, intra, inter
 *   bytes) and explain's mean on their lines;
 * - explain's critical parts only when the same rank finishes last at Ma, at
 *   Mb and, extended, at M; memory only when every rank's peak and the
 *   breakdown are the same at Ma and Mb (the schedule holds as many
 *   micro-batches' activations at once whatever M).
 * Where the pattern starts: 1F1B's memory settles at pp micro-batches (the
 * first stage holds pp in flight) and its times are on their lines from there
 * on the points measured; the interleaved schedule's waits are off the line at
 * pp and on it from 2 pp (its warm-up spans more than one group), but the
 * pipeline messages a stage holds unreceived can still grow up to 4 pp (the
 * toy of tests/sim/test_micro.c: 8, 12, 16 micro-batches hold 320, 512,
 * 528 MiB). So the shortcut starts at Ma = pp (1F1B) or 2 pp (interleaved) and
 * adds a group at a time until two steps agree (same critical rank, memory
 * settled), as long as Ma + Mb < M; else, or when another rank would finish
 * last at M, or an extended time leaves its range, it simulates all M
 * micro-batches, and sim.network says why. Whether it applies
 * (bs_sim_micro_apply) is an option's rule, in opts.c. The reduced steps run
 * through bs_sim_run, each with its own fold (and the layer shortcut, were it
 * to apply to pipeline stages).
 */
#include <stdio.h>
#include <string.h>
#include "sim.h"
#include "sim/explain.h"
#include "sim/extend.h"

static double ext(double a, double b, int64_t k) { return a + (double)k * (b - a); }

int bs_sim_micro_plan(const bs_config *cfg, int64_t *ma, int64_t *g) {
  bs_mesh m;
  char err[256];
  if (bs_mesh_of(cfg, &m, err, sizeof err) || m.size[BS_DIM_PP] <= 1) return -1;
  int64_t pp = m.size[BS_DIM_PP];
  if (cfg->par.pp_schedule == BS_PP_INTERLEAVED) {
    if (m.microbatches % pp) return -1; /* refused by the plan: the full point says so */
    *g = pp;
    *ma = 2 * pp;
  } else {
    *g = 1;
    *ma = pp;
  }
  return 0;
}

/* Why the line does not describe this point: every micro-batch simulated, and sim.network says why. */
static int run_every_microbatch(const bs_config *cfg, const bs_sim_opts *opts, const char *why, bs_result *out,
                                char *err, size_t errlen) {
  bs_result_free(out);
  memset(out, 0, sizeof *out);
  bs_sim_opts all = *opts;
  all.micro_batches = BS_OFF;
  int rc = bs_sim_run(cfg, &all, out, err, errlen);
  size_t n = strlen(out->sim_network);
  snprintf(out->sim_network + n, sizeof out->sim_network - n, "; micro-batches: all simulated (%s)", why);
  return rc;
}

/* The reduced step: cfg with mb micro-batches per replica (the same sequences per micro-batch). */
static bs_config with_microbatches(const bs_config *cfg, const bs_mesh *m, int64_t mb) {
  bs_config c = *cfg;
  c.par.micro_batch = (int)m->micro_batch;
  c.work.batch = (int64_t)m->size[BS_DIM_DP] * m->micro_batch * mb;
  return c;
}

/* A rank's figures extended in place (x holds the Mb run's). NULL or the field that passed int64. */
static const char *ext_rank(const bs_rank_result *y, bs_rank_result *x, int64_t k) {
  if (sim_extend_count(y->bytes_sent, x->bytes_sent, k, &x->bytes_sent) ||
      sim_extend_count(y->bytes_recv, x->bytes_recv, k, &x->bytes_recv))
    return "comm_bytes.per_rank";
  for (int d = 0; d < BS_DIM_COUNT; d++)
    if (sim_extend_count(y->by_group[d], x->by_group[d], k, &x->by_group[d])) return "comm_bytes.by_group";
  x->step = ext(y->step, x->step, k);
  x->fwd = ext(y->fwd, x->fwd, k);
  x->bwd = ext(y->bwd, x->bwd, k);
  x->compute = ext(y->compute, x->compute, k);
  x->comm_exposed = ext(y->comm_exposed, x->comm_exposed, k);
  x->wait_for_peers = ext(y->wait_for_peers, x->wait_for_peers, k);
  return NULL;
}

/* The step's maxima over the extended ranks, as sim_fill_result takes them over the simulated ones. */
static void maxima(bs_result *out) {
  bs_times t = {0, 0, 0, 0, 0, 0};
  int64_t sent = 0, by[BS_DIM_COUNT] = {0};
  for (int r = 0; r < out->nranks; r++) {
    const bs_rank_result *x = &out->ranks[r];
    if (x->step > t.step) t.step = x->step;
    if (x->fwd > t.fwd) t.fwd = x->fwd;
    if (x->bwd > t.bwd) t.bwd = x->bwd;
    if (x->compute > t.compute) t.compute = x->compute;
    if (x->comm_exposed > t.comm_exposed) t.comm_exposed = x->comm_exposed;
    if (x->wait_for_peers > t.wait_for_peers) t.wait_for_peers = x->wait_for_peers;
    if (x->bytes_sent > sent) sent = x->bytes_sent;
    for (int d = 0; d < BS_DIM_COUNT; d++)
      if (x->by_group[d] > by[d]) by[d] = x->by_group[d];
  }
  out->time = t;
  out->comm.per_rank_max_sent = sent;
  memcpy(out->comm.by_group, by, sizeof by);
}

/* The rank that finishes last (the lowest of a tie), as bs_explain_end picks it; -1 with no rank. */
static int last_rank(const bs_result *r) {
  int best = -1;
  for (int i = 0; i < r->nranks; i++)
    if (best < 0 || r->ranks[i].step > r->ranks[best].step) best = i;
  return best;
}

/* NULL when memory has settled: every rank's peak, and the breakdown at the step's peak, the same at Ma and Mb. */
static const char *memory_settled(const bs_result *a, const bs_result *b) {
  if (a->mem.peak_bytes_max != b->mem.peak_bytes_max ||
      memcmp(a->mem.breakdown, b->mem.breakdown, sizeof a->mem.breakdown))
    return "the memory peak still moves at the simulated counts";
  for (int r = 0; r < b->nranks; r++)
    if (a->ranks[r].peak_bytes != b->ranks[r].peak_bytes) return "a rank's memory peak still moves";
  return NULL;
}

/* NULL when the pattern has settled between a (Ma) and b (Mb): per-rank results to extend, the
 * same rank finishing last, memory settled; else why not. */
static const char *settled(const bs_result *a, const bs_result *b) {
  if (!a->ranks || !b->ranks || a->nranks != b->nranks || b->nranks < 1) return "no per-rank results to extend";
  if (a->explain.critical_rank != b->explain.critical_rank) return "another rank finishes last at each count";
  return memory_settled(a, b);
}

/* Extends a (Ma) and out (Mb, settled) by k groups into out. NULL, or why the line does not hold
 * (*over: a count passed int64, the message in err). */
static const char *extend(int64_t M, const bs_result *a, bs_result *out, int64_t k, int *over, char *err,
                          size_t errlen) {
  *over = 0;
  const char *field = NULL;
  if (sim_extend_count(a->comm.total, out->comm.total, k, &out->comm.total) ||
      sim_extend_count(a->comm.intra_node, out->comm.intra_node, k, &out->comm.intra_node) ||
      sim_extend_count(a->comm.inter_node, out->comm.inter_node, k, &out->comm.inter_node))
    field = "comm_bytes.total";
  for (int r = 0; !field && r < out->nranks; r++) field = ext_rank(&a->ranks[r], &out->ranks[r], k);
  if (field) {
    *over = 1;
    snprintf(err, errlen, "%s: the bytes of %lld micro-batches pass 2^63 - 1 (the point is too large)", field,
             (long long)M);
    return field;
  }
  maxima(out);
  if (last_rank(out) != out->explain.critical_rank) return "another rank finishes last when extended";
  bs_explain_extend(&a->explain, &out->explain, k);
  out->explain.step = out->time.step;
  return sim_extension_sound(out) ? NULL : "the extension left a time's range";
}

/* One reduced step of mb micro-batches into r, traced (labelled) when the point is and `traced`
 * (every step but the first, which the result never keeps); the costs it took added to *wall,
 * *events, *rss. */
static int run_reduced(const bs_config *cfg, const bs_mesh *m, int traced, int64_t mb, const bs_sim_opts *opts,
                       bs_result *r, double *wall, int64_t *events, int64_t *rss, char *err, size_t errlen) {
  bs_sim_opts o = *opts;
  o.micro_batches = BS_OFF;
  if (!traced) o.trace_path = NULL;
  char note[200];
  snprintf(note, sizeof note,
           "micro-batch shortcut: %lld of %lld micro-batches simulated; the result extends them to %lld "
           "(--micro-batches off traces all)",
           (long long)mb, (long long)m->microbatches, (long long)m->microbatches);
  o.trace_note = note;
  bs_config c = with_microbatches(cfg, m, mb);
  memset(r, 0, sizeof *r);
  int rc = bs_sim_run(&c, &o, r, err, errlen);
  *wall += r->sim_wall_s;
  *events += r->sim_events;
  if (r->sim_rss_bytes > *rss) *rss = r->sim_rss_bytes;
  if (rc) r->cfg = *cfg;
  return rc;
}

int bs_sim_run_micro(const bs_config *cfg, const bs_sim_opts *opts, bs_result *out, char *err, size_t errlen) {
  bs_mesh m;
  int64_t ma, g;
  if (bs_mesh_of(cfg, &m, err, errlen) || bs_sim_micro_plan(cfg, &ma, &g))
    return run_every_microbatch(cfg, opts, "no pipeline schedule to extend", out, err, errlen);
  int64_t M = m.microbatches, events = 0, rss = 0;
  double wall = 0;
  bs_result a, b;
  int rc = run_reduced(cfg, &m, 0, ma, opts, &a, &wall, &events, &rss, err, errlen);
  if (rc) {
    *out = a;
    return rc;
  }
  /* until the pattern repeats: one group more at a time, while the two steps still save work */
  for (;;) {
    rc = run_reduced(cfg, &m, 1, ma + g, opts, &b, &wall, &events, &rss, err, errlen);
    if (rc) {
      bs_result_free(&a);
      *out = b;
      return rc;
    }
    const char *why = settled(&a, &b);
    if (!why) break;
    bs_result_free(&a);
    a = b;
    ma += g;
    if (2 * ma + g >= M) {
      *out = a;
      return run_every_microbatch(cfg, opts, why, out, err, errlen);
    }
  }
  int64_t mb = ma + g;
  *out = b;
  out->cfg = *cfg;
  out->decision.microbatches = M;
  int over;
  const char *why = extend(M, &a, out, (M - ma) / g, &over, err, errlen);
  bs_result_free(&a);
  if (over) {
    bs_result_free(out);
    memset(out, 0, sizeof *out);
    out->cfg = *cfg;
    out->mode = "sim";
    snprintf(out->error, sizeof out->error, "%s", err);
    return -1;
  }
  out->mem.oom = bs_mem_over(cfg, out->mem.peak_bytes_max, out->mem.capacity_bytes); /* as sim_fill_result */
  out->sim_wall_s = wall;
  out->sim_events = events;
  out->sim_rss_bytes = rss;
  if (why) return run_every_microbatch(cfg, opts, why, out, err, errlen);
  size_t n = strlen(out->sim_network);
  snprintf(out->sim_network + n, sizeof out->sim_network - n,
           "; micro-batches: %lld and %lld simulated, extended to %lld", (long long)ma, (long long)mb, (long long)M);
  return 0;
}
