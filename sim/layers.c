/*
 * layers.c — the layer shortcut for model scope: a model's layers are
 * identical, so the simulator runs the model with 3 and with 4 layers and
 * extends the difference (one more layer) to L layers: every time, byte and
 * memory figure X(L) = X(3) + (L - 3) (X(4) - X(3)). Three layers, not one,
 * so that the added layer sits between others as the middle layers of a real
 * model do (its gradient collective overlapping the next layer's backward),
 * and so that the memory peak has settled where it stays for deeper models
 * (with recompute and ZeRO-3 it moves between 2 and 3 layers).
 * It sits on top of the point simulation: bs_sim_run (run.c) comes here when
 * it applies, and the two reduced models run as plain points
 * (bs_sim_run_source). tests/sim/test_layers.c checks it against the
 * straightforward run of a deeper model (within 0.1 %); opts->layers =
 * BS_OFF simulates every layer, as does an extension that leaves a time's
 * range (waiting for peers can shrink from 3 to 4 layers; sim.network says
 * so). Pipeline stages (parallel.pp > 1) simulate
 * every layer: a 1F1B step is the longest path through the stages' tasks, a
 * maximum of sums linear in the layers, which a straight line through two
 * depths need not follow. Whether it applies (bs_sim_layers_apply) is an
 * option's rule, in opts.c, which the search's walk reads without calling here.
 */
#include <stdio.h>
#include <string.h>
#include "sim.h"
#include "sim/explain.h"
#include "sim/extend.h"

#define LA 3
#define LB 4

static double ext(double a, double b, int64_t k) { return a + (double)k * (b - a); }

/* *x = a + k (b - a) for a byte count; -1 when it passes int64 (never a wrapped count). */
int sim_extend_count(int64_t a, int64_t b, int64_t k, int64_t *x) {
  int64_t d, kd;
  return __builtin_sub_overflow(b, a, &d) || __builtin_mul_overflow(k, d, &kd) || __builtin_add_overflow(a, kd, x) ? -1
                                                                                                                   : 0;
}

/* The byte counts of a result extended from a (LA layers) and b (LB layers, in *out) to k more. */
static const char *ext_counts(const bs_result *a, bs_result *out, int64_t k) {
  if (sim_extend_count(a->comm.per_rank_max_sent, out->comm.per_rank_max_sent, k, &out->comm.per_rank_max_sent))
    return "comm_bytes.per_rank_max_sent";
  if (sim_extend_count(a->comm.total, out->comm.total, k, &out->comm.total) ||
      sim_extend_count(a->comm.intra_node, out->comm.intra_node, k, &out->comm.intra_node) ||
      sim_extend_count(a->comm.inter_node, out->comm.inter_node, k, &out->comm.inter_node))
    return "comm_bytes.total";
  for (int d = 0; d < BS_DIM_COUNT; d++)
    if (sim_extend_count(a->comm.by_group[d], out->comm.by_group[d], k, &out->comm.by_group[d]))
      return "comm_bytes.by_group";
  if (sim_extend_count(a->mem.peak_bytes_max, out->mem.peak_bytes_max, k, &out->mem.peak_bytes_max))
    return "memory.peak_bytes";
  for (int c = 0; c < BS_MEM_CLASS_COUNT; c++)
    if (sim_extend_count(a->mem.breakdown[c], out->mem.breakdown[c], k, &out->mem.breakdown[c]))
      return "memory.breakdown";
  for (int r = 0; r < out->nranks && a->ranks && r < a->nranks; r++) {
    bs_rank_result *x = &out->ranks[r];
    const bs_rank_result *y = &a->ranks[r];
    if (sim_extend_count(y->bytes_sent, x->bytes_sent, k, &x->bytes_sent) ||
        sim_extend_count(y->bytes_recv, x->bytes_recv, k, &x->bytes_recv))
      return "comm_bytes.per_rank";
    for (int d = 0; d < BS_DIM_COUNT; d++)
      if (sim_extend_count(y->by_group[d], x->by_group[d], k, &x->by_group[d])) return "comm_bytes.by_group";
    if (sim_extend_count(y->peak_bytes, x->peak_bytes, k, &x->peak_bytes)) return "memory.peak_bytes";
  }
  return NULL;
}

/* A time the layer shortcut extended is a time: >= -tol, waiting for peers within the exposed time. */
static int extended_time_ok(double wait_for_peers, double exposed, double tol) {
  return wait_for_peers >= -tol && exposed >= -tol && wait_for_peers <= exposed + tol;
}

/*
 * The layer shortcut's straight line through 3 and 4 layers (layers.c) holds for sums over a rank's
 * ops; waiting for peers is where ranks meet, and can shrink from 3 to 4 layers, so that its line
 * leaves [0, exposed] at L layers. 1 when every extended time is in range: the point's figures
 * exactly (sim_check_times refuses a negative one), a rank's and explain's parts within rounding
 * (1e-9 of the step).
 */
int sim_extension_sound(const bs_result *r) {
  const bs_times *t = &r->time;
  double tol = 1e-9 * t->step;
  if (!(t->step >= 0 && t->fwd >= 0 && t->bwd >= 0 && t->compute >= 0 && t->wait_for_peers >= 0) ||
      !extended_time_ok(t->wait_for_peers, t->comm_exposed, tol))
    return 0;
  for (int i = 0; r->ranks && i < r->nranks; i++) {
    const bs_rank_result *x = &r->ranks[i];
    if (!(x->step >= -tol && x->fwd >= -tol && x->bwd >= -tol && x->compute >= -tol) ||
        !extended_time_ok(x->wait_for_peers, x->comm_exposed, tol))
      return 0;
  }
  const bs_explain_parts *p[] = {&r->explain.critical, &r->explain.mean};
  for (int j = 0; j < 2; j++) {
    if (!(p[j]->wait_for_peers >= -tol && p[j]->launch >= -tol)) return 0;
    for (int k = 0; k < BS_XK_COUNT; k++)
      if (!(p[j]->compute[k] >= -tol)) return 0;
    for (int l = 0; l < BS_XL_COUNT; l++)
      if (!(p[j]->exposed[l] >= -tol)) return 0;
  }
  return 1;
}

/* The line does not describe this model: every layer simulated, and sim.network says why. */
static int run_every_layer(const bs_config *cfg, const bs_sim_opts *opts, bs_result *out, char *err, size_t errlen) {
  bs_result_free(out);
  memset(out, 0, sizeof *out);
  bs_sim_opts all = *opts;
  all.layers = BS_OFF;
  int rc = bs_sim_run_source(cfg, &all, NULL, out, NULL, NULL, err, errlen);
  size_t n = strlen(out->sim_network);
  snprintf(out->sim_network + n, sizeof out->sim_network - n,
           "; layers: all %lld simulated (the shortcut's extension left a time's range)", (long long)cfg->model.layers);
  return rc;
}

int bs_sim_run_layers(const bs_config *cfg, const bs_sim_opts *opts, bs_result *out, char *err, size_t errlen) {
  bs_sim_opts o = *opts;
  o.layers = BS_OFF;
  o.trace_path = NULL; /* the trace is the LB-layer run's, labelled so */
  bs_config ca = *cfg, cb = *cfg;
  char note[160];
  snprintf(note, sizeof note,
           "layer shortcut: %d of %lld layers simulated; the result extends them to %lld (--layers off traces all)", LB,
           (long long)cfg->model.layers, (long long)cfg->model.layers);
  ca.model.layers = LA;
  cb.model.layers = LB;
  bs_result a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  int rc = bs_sim_run_source(&ca, &o, NULL, &a, NULL, NULL, err, errlen);
  if (rc) {
    *out = a;
    out->cfg = *cfg;
    return rc;
  }
  o.trace_path = opts->trace_path;
  o.trace_note = note;
  rc = bs_sim_run_source(&cb, &o, NULL, &b, NULL, NULL, err, errlen);
  if (rc) {
    bs_result_free(&a);
    *out = b;
    out->cfg = *cfg;
    return rc;
  }
  int64_t k = cfg->model.layers - LA;
  *out = b;
  out->cfg = *cfg;
  out->time.step = ext(a.time.step, b.time.step, k);
  out->time.fwd = ext(a.time.fwd, b.time.fwd, k);
  out->time.bwd = ext(a.time.bwd, b.time.bwd, k);
  out->time.compute = ext(a.time.compute, b.time.compute, k);
  out->time.comm_exposed = ext(a.time.comm_exposed, b.time.comm_exposed, k);
  out->time.wait_for_peers = ext(a.time.wait_for_peers, b.time.wait_for_peers, k);
  bs_explain_extend(&a.explain, &out->explain, k);
  const char *over = ext_counts(&a, out, k);
  if (over) {
    bs_result_free(&a);
    bs_result_free(out);
    memset(out, 0, sizeof *out);
    out->cfg = *cfg;
    out->mode = "sim";
    snprintf(err, errlen, "%s: the bytes of %lld layers pass 2^63 - 1 (the point is too large)", over,
             (long long)cfg->model.layers);
    snprintf(out->error, sizeof out->error, "%s", err);
    return -1;
  }
  out->mem.oom = out->mem.capacity_bytes > 0 && bs_mem_over(cfg, out->mem.peak_bytes_max, out->mem.capacity_bytes);
  for (int r = 0; r < out->nranks && a.ranks && r < a.nranks; r++) {
    bs_rank_result *x = &out->ranks[r];
    const bs_rank_result *y = &a.ranks[r];
    x->step = ext(y->step, x->step, k);
    x->fwd = ext(y->fwd, x->fwd, k);
    x->bwd = ext(y->bwd, x->bwd, k);
    x->compute = ext(y->compute, x->compute, k);
    x->comm_exposed = ext(y->comm_exposed, x->comm_exposed, k);
    x->wait_for_peers = ext(y->wait_for_peers, x->wait_for_peers, k);
  }
  out->sim_wall_s = a.sim_wall_s + b.sim_wall_s;
  out->sim_events = a.sim_events + b.sim_events;
  if (a.sim_rss_bytes > out->sim_rss_bytes) out->sim_rss_bytes = a.sim_rss_bytes;
  size_t n = strlen(out->sim_network);
  snprintf(out->sim_network + n, sizeof out->sim_network - n, "; layers: %d and %d simulated, extended to %lld", LA, LB,
           (long long)cfg->model.layers);
  bs_result_free(&a);
  return sim_extension_sound(out) ? 0 : run_every_layer(cfg, opts, out, err, errlen);
}
