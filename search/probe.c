/*
 * probe.c — a candidate's cheap lower bounds (probe.h): the platform and the plan built as the walk
 * builds them first (so a refusal is the walk's, word for word), then the first ops of one rank per
 * pipeline stage, counted as the simulator counts them.
 *
 * Memory. A simulated rank's bytes in use change only at its ALLOC (+ bs_sim_alloc_held, memory.c)
 * and FREE (- what the ALLOC held) ops (rankops.c), in its program's order, whatever the timing;
 * its peak is the most it holds after any op. The bytes held after the k-th op of a rank's program
 * are therefore at most that rank's peak, so their maximum over a prefix (peak_bytes) is at most
 * the simulated peak (the maximum over the ranks; a fold simulates one rank per class of ranks with
 * the same program). The probed ranks are those the walk's first pass replays (BS_WALK_STAGES:
 * every pipeline stage's rank at the last coordinate of the attention's ring, the first of the
 * others): a walk over every op of those ranks finds at least as much. Where the simulator extends
 * from shorter programs (the layer shortcut: 3 and 4 layers; the pipeline micro-batch shortcut,
 * micro.c), the prefix is of the full program: the model state a rank allocates first grows with
 * the layers exactly as the shortcut extends it (weights, gradients and Adam states are one buffer
 * each, linear in the layers: memory.h), and what a prefix holds besides it (the first layers'
 * activations of the first micro-batch) is held by the shorter programs too, which run the same
 * first ops. Beyond the prefix: where a chunk's layers are alike (alike_layers), its layers' forwards
 * in the first micro-batch run the second layer's ALLOCs and FREEs one after another, each keeping
 * what the second kept, so the held bytes it reaches grow by that much a layer (layers_peak: a point
 * of the program, so at most its peak). Under the layer shortcut the simulated peak is extended from
 * 3 and 4 layers: that it carries what each further layer's forward keeps is the shortcut's premise
 * (the peak settles where it stays for deeper models, layers.c), not proved here.
 * search.probe_below_walk checks the bound against the walk on every candidate of its spaces (one
 * runs the layer shortcut), and the search counts every walked candidate whose walk finds less
 * (probe_violations, which must stay 0).
 *
 * Time. A rank's step is at least the sum of its COMPUTE durations (the proof at the top of
 * search.c), each the profile's bs_profile_kernel_time (times a straggler's factor of at least 1),
 * so at least the sum over any sub-multiset of its COMPUTE ops. Two such sums: the prefix's; and,
 * where a rank's layers and micro-batches run the same COMPUTE ops (alike_forwards), its first
 * layer's forward f (the ops from its kept input to the next layer's, workload.c: layer_fwd_step,
 * found as the period of its ops: period())
 * times the M x L / pp layer forwards its program runs (twice that with full recompute, whose
 * backward runs each layer's forward again) (each a copy of f's ops: the same shapes, the
 * same kernels, the attention's ops read from one record, workload_stream.c), all of them disjoint
 * and beside the backward's, the embedding's and the head's. compute_s is the larger, the largest
 * over the probed ranks. Where the point fits by its probe, a third (deep_compute): a layer's
 * forward and backward f + b, read off the whole program of a short point of a few layers and one
 * micro-batch (the same layer ops), times the M x L / pp layer-micro-batches. With the layer shortcut the simulated step is the extension of 3 and 4
 * layers, which matches the full program within 0.1 %: the search takes it with the slack it takes
 * the walk's bound with.
 */
#include "search/probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plans/plan.h"
#include "sim/memory.h"
#include "sim/platform.h"

/* The rank the walk's first pass replays for pipeline stage s (walk.c, replay_ranks with
 * BS_WALK_STAGES): the last coordinate of the dimension attention runs over, the first of the others. */
static int stage_rank(const bs_mesh *m, int s) {
  int att = m->att_dim, r = 0;
  if (att >= 0 && att < 3 && m->size[att] > 1) r = (m->size[att] - 1) * m->stride[att];
  return r + s * m->stride[BS_DIM_PP];
}

/* What a prefix of one rank's program shows: the most bytes held after any op, the compute, and its
 * first layer's forward where found (layer_fwd >= 0, period): the compute of that forward, the most
 * held during the second layer's, and what a layer's forward keeps (held at its end less at its start). */
typedef struct {
  int64_t peak;
  double compute, layer_fwd;
  int64_t layer_peak, layer_keeps;
} seen;

/* One op of a prefix, as what the walk sees of it: its kind, the bytes it takes or gives back (an
 * ALLOC's held, a FREE's, a message's or a collective's), its COMPUTE time; and the held bytes after it. */
typedef struct {
  int kind;
  int64_t bytes, held;
  double d;
} sig;

/* What a SEND, RECV or COLL moves (a WAIT: how many handles it waits on), as a sig's bytes; 0 else. */
static int64_t moved(const bs_op *op) {
  if (op->kind == BS_OP_SEND || op->kind == BS_OP_RECV) return op->u.p2p.bytes;
  if (op->kind == BS_OP_COLL) return op->u.coll.bytes;
  if (op->kind == BS_OP_WAIT) return op->u.wait.n;
  return 0;
}

static int sig_same(const sig *a, const sig *b) { return a->kind == b->kind && a->bytes == b->bytes && a->d == b->d; }

/*
 * A layer's forward begins with the ALLOC of its kept input (workload.c, layer_fwd_step: the first
 * ACTIVATIONS of the forward), and the forwards of a chunk's layers run the same ops one after
 * another. The period: the least P such that the P ops from the first ACTIVATIONS, s, are those of
 * [s + P, s + 2 P) (each op the same kind, bytes and time), the second window starting with an ALLOC
 * like the first's; 0 while none. A shorter repetition inside a layer (a ring's steps) does not start
 * with the kept input's ALLOC followed by the same ops.
 */
static int period(const sig *x, int s, int n) {
  if ((n - s) % 2 || n - s < 2) return 0; /* does a second window of P = (n - s) / 2 end at x[n - 1]? */
  int P = (n - s) / 2;
  if (!sig_same(&x[s], &x[s + P])) return 0;
  for (int k = 1; k < P; k++)
    if (!sig_same(&x[s + k], &x[s + P + k])) return 0;
  return P;
}

/* The first max_ops ops of rank r, up to the end of its second layer's forward where the period is
 * found. 0, or -1 (an op the simulator would refuse, or out of memory: nothing is known). */
static int prefix(const bs_plan *plan, int r, const bs_profile *prof, bs_dtype dt, int max_ops, int64_t *held_by,
                  int32_t nids, sig *x, seen *out) {
  bs_plan_iter *it = bs_plan_iter_new(plan, r);
  if (!it) return -1;
  int64_t held = 0;
  int rc = 0, s = -1, n = 0, P = 0;
  bs_op op;
  char err[256];
  memset(held_by, 0, sizeof *held_by * (size_t)nids);
  memset(out, 0, sizeof *out);
  out->layer_fwd = -1;
  out->layer_keeps = -1;
  for (int k = 0; k < max_ops && !P && bs_plan_next(it, &op); k++) {
    sig g = {(int)op.kind, 0, 0, 0};
    if (op.kind == BS_OP_ALLOC) {
      int32_t b = op.u.alloc.buf;
      if (b < 0 || b >= nids || held_by[b] || op.u.alloc.bytes < 0) {
        rc = -1;
        break;
      }
      held_by[b] = bs_sim_alloc_held(prof, &op);
      if (s < 0 && op.u.alloc.cls == BS_MEM_ACTIVATIONS) s = n; /* the first layer's kept input */
      held += held_by[b];
      g.bytes = held_by[b];
      if (held > out->peak) out->peak = held;
    } else if (op.kind == BS_OP_FREE) {
      int32_t b = op.u.free.buf;
      if (b < 0 || b >= nids) {
        rc = -1;
        break;
      }
      held -= held_by[b];
      g.bytes = -held_by[b];
      held_by[b] = 0;
    } else if (op.kind == BS_OP_COMPUTE) {
      double d = bs_profile_kernel_time(prof, &op.u.compute, dt, err, sizeof err);
      if (d < 0) {
        rc = -1;
        break;
      }
      out->compute += d;
      g.d = d;
    } else g.bytes = moved(&op);
    if (s < 0 || !x) continue; /* before the layers (or no period asked): only the peak and the compute */
    g.held = held;
    x[n++] = g;
    P = period(x, s, n);
  }
  bs_plan_iter_free(it);
  if (rc || !P) return rc;
  /* the first layer's forward is x[s, s + P), the second's x[s + P, s + 2 P) */
  double f = 0;
  for (int k = s; k < s + P; k++) f += x[k].d;
  int64_t start = x[s + P - 1].held; /* held when the second layer's forward begins */
  out->layer_fwd = f;
  out->layer_keeps = x[s + 2 * P - 1].held - start;
  for (int k = s + P; k < s + 2 * P; k++)
    if (x[k].held > out->layer_peak) out->layer_peak = x[k].held;
  return 0;
}

/*
 * The layers of a rank's chunk (its stage's layers, or a chunk's of the interleaved schedule) where
 * they run the same ops, one forward after another (model scope, training: the layers are
 * identical), else 0. Not alike: FP8 (the first micro-batch casts each layer's weights,
 * wk_fp8_casts), mixture of experts (routed tokens).
 */
static int64_t alike_layers(const bs_config *cfg, const bs_mesh *m) {
  int64_t pp = m->size[BS_DIM_PP] > 0 ? m->size[BS_DIM_PP] : 1, L = cfg->model.layers;
  int64_t chunks = cfg->par.pp_schedule == BS_PP_INTERLEAVED && cfg->par.pp_chunks > 1 ? cfg->par.pp_chunks : 1;
  if (cfg->work.scope != BS_SCOPE_MODEL || cfg->work.phase != BS_TRAIN || cfg->model.fp8 != BS_FP8_OFF ||
      cfg->model.experts > 0 || L % (pp * chunks))
    return 0;
  return L / (pp * chunks);
}

/*
 * The forwards a rank's program runs that are each at least its first layer's forward: every layer
 * of its stage in every micro-batch (M x layers / pp, twice with full recompute), where its layers are alike and so are its
 * micro-batches (the same shapes): 0 (no such count) where they are not. Besides alike_layers: not
 * with packed documents (each micro-batch's own lengths), nor a chunk of one layer (its second kept
 * input is another micro-batch's or the backward's). What a workload plan does by micro-batch (w->mb
 * in plans/) is FP8's weight cast, MoE's expert gradients, the packed documents' sequences (all
 * refused here) and the gradient reduction of the last one (a collective: no COMPUTE).
 */
static double alike_forwards(const bs_config *cfg, const bs_mesh *m) {
  int64_t pp = m->size[BS_DIM_PP] > 0 ? m->size[BS_DIM_PP] : 1, per = alike_layers(cfg, m);
  if (per < 2 || cfg->work.docs > 0 || cfg->work.documents[0] || m->microbatches < 1) return 0;
  /* full recompute runs each layer's forward again in its backward (workload.c, layer_bwd_step: the
   * kept input gives way, layer_fwd_step again: the same pre-attention, attention forward, QKV and
   * post-attention ops) */
  double again = cfg->work.recompute == BS_RECOMPUTE_FULL ? 2 : 1;
  return again * (double)m->microbatches * (double)(cfg->model.layers / pp);
}

/*
 * The most a rank holds in the forward of its first micro-batch's chunk, from its second layer's: the
 * layers j = 1 .. per - 2 of a chunk of alike layers run the second layer's ops one after another, so
 * layer j starts holding (j - 1) x keeps more than the second did, and peaks (j - 1) x keeps above its
 * peak (the window of a layer ends at the next layer's kept input: layer per - 1's ends elsewhere, on
 * the head's or the next chunk's ops, and is left out). 0 when not known.
 */
static int64_t layers_peak(const bs_config *cfg, const bs_mesh *m, const seen *x) {
  int64_t per = alike_layers(cfg, m), more;
  if (per < 3 || x->layer_keeps < 0) return 0;
  if (x->layer_keeps == 0) return x->layer_peak;
  if (__builtin_mul_overflow(per - 3, x->layer_keeps, &more) || __builtin_add_overflow(x->layer_peak, more, &more))
    return 0;
  return more;
}

/*
 * A pipeline's first stage holds its warm-up's micro-batches (1F1B: up to pp; interleaved: up to
 * 2 (pp - 1) + (v - 1) pp + 1 chunk-micro-batches, workload_pipe.c) before its first backward: the
 * first LONG_OPS ops of its rank's program, read whole (a prefix: at most the peak, as above). 0 (*peak
 * set) or -1.
 */
#define LONG_OPS (1 << 14)
static int long_peak(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof, int rpn, int64_t *peak) {
  bs_plan *plan = NULL;
  char err[256];
  if (bs_plan_create(cfg, rpn, &plan, err, sizeof err)) return -1;
  bs_plan_set_op_cache(plan, !opts->no_op_cache);
  int32_t nids = bs_plan_buf_ids(plan);
  int64_t *held_by = malloc(sizeof *held_by * (size_t)(nids > 0 ? nids : 1));
  seen sn = {0, 0, -1, 0, -1};
  int rc = !held_by || prefix(plan, stage_rank(bs_plan_mesh(plan), 0), prof, cfg->model.dtype, LONG_OPS, held_by, nids,
                              NULL, &sn)
             ? -1
             : 0;
  *peak = sn.peak;
  free(held_by);
  bs_plan_free(plan);
  return rc;
}

/* ---- a layer's backward: the whole program of a short point ---------------------------------- */

#define DEEP_LAYERS 4      /* a chunk's layers in the short point: its layers 1 and 2 are middle ones */
#define DEEP_OPS (1 << 17) /* the most ops of one rank's short program read */

/*
 * The compute of one layer's forward and backward, f + b, from the whole program of rank r of the
 * short point (DEEP_LAYERS layers a chunk, one micro-batch): f is the period of the forward (as
 * prefix: the least P whose window from the first kept input repeats); the backward runs the layers
 * in reverse, each freeing its kept input at the same place of its ops (workload.c, layer_bwd_step),
 * so the ops from the FREE of layer 2's kept input to that of layer 1's are one layer's backward
 * (the end of layer 2's and the start of layer 1's, alike), checked equal to those from layer 3's
 * to layer 2's or from layer 1's to layer 0's. 0 (*fb set), or -1 (not found: no bound).
 */
static int layer_fwd_bwd(const bs_plan *plan, int r, const bs_profile *prof, bs_dtype dt, sig *x, int32_t *buf,
                         double *fb) {
  bs_plan_iter *it = bs_plan_iter_new(plan, r);
  if (!it) return -1;
  int n = 0, s = -1, rc = 0, P = 0, at[DEEP_LAYERS];
  int32_t id[DEEP_LAYERS];
  bs_op op;
  char err[256];
  for (int k = 0; k < DEEP_LAYERS; k++) at[k] = id[k] = -1;
  while (at[0] < 0 && bs_plan_next(it, &op)) { /* to the FREE of the first layer's kept input */
    if (n == DEEP_OPS) {
      rc = -1;
      break;
    }
    sig g = {(int)op.kind, 0, 0, 0};
    buf[n] = -1;
    if (op.kind == BS_OP_ALLOC) {
      g.bytes = bs_sim_alloc_held(prof, &op);
      buf[n] = op.u.alloc.buf;
      if (s < 0 && op.u.alloc.cls == BS_MEM_ACTIVATIONS) s = n;
    } else if (op.kind == BS_OP_FREE) {
      buf[n] = op.u.free.buf;
    } else if (op.kind == BS_OP_COMPUTE) {
      g.d = bs_profile_kernel_time(prof, &op.u.compute, dt, err, sizeof err);
      if (g.d < 0) {
        rc = -1;
        break;
      }
    } else g.bytes = moved(&op);
    x[n++] = g;
    if (s < 0) continue;
    if (!P) { /* the forward's period, once its second window is read */
      P = period(x, s, n);
      if (P) id[0] = buf[s], id[1] = buf[s + P];
      continue;
    }
    int last = n - 1;
    for (int k = 2; k < DEEP_LAYERS; k++) /* each layer's kept input, held to its backward */
      if (last == s + k * P) {
        if (!sig_same(&x[last], &x[s])) rc = -1;
        id[k] = buf[last];
      }
    if (rc) break;
    if (op.kind == BS_OP_FREE && last >= s + DEEP_LAYERS * P)
      for (int k = 0; k < DEEP_LAYERS; k++)
        if (at[k] < 0 && id[k] >= 0 && buf[last] == id[k]) at[k] = last;
  }
  bs_plan_iter_free(it);
  if (rc || at[0] < 0) return -1;
  int w = at[1] - at[2];
  if (at[3] < 0 || at[2] < 0 || at[3] >= at[2] || w <= 0 || at[0] <= at[1]) return -1;
  /* layer 2's backward window as layer 3's, or as layer 1's (the first backward of a task may wait
   * on one op more) */
  int as3 = at[2] - at[3] == w, as1 = at[0] - at[1] == w;
  for (int k = 0; k < w && (as3 || as1); k++) {
    as3 = as3 && sig_same(&x[at[3] + k], &x[at[2] + k]);
    as1 = as1 && sig_same(&x[at[1] + k], &x[at[2] + k]);
  }
  if (!as3 && !as1) return -1;
  double f = 0, b = 0;
  for (int k = s; k < s + P; k++) f += x[k].d;
  for (int k = at[2]; k < at[1]; k++) b += x[k].d;
  *fb = f + b;
  return 0;
}

/*
 * A lower bound of the busiest probed rank's compute from each layer's forward and backward: the
 * short point (cfg with DEEP_LAYERS layers a chunk and one micro-batch, pp of them interleaved) runs the same layer
 * ops as cfg (a layer's shapes do not depend on the layers or the micro-batches), and where cfg's
 * layers and micro-batches are alike (alike_forwards) each of its M x L / pp layer-micro-batches
 * runs them: M x L / pp x (f + b), all disjoint (with full recompute b holds the forward run again).
 * 0 when unknown.
 */
static double deep_compute(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof, int rpn) {
  bs_mesh m;
  char err[256];
  if (bs_mesh_of(cfg, &m, err, sizeof err) || alike_forwards(cfg, &m) <= 0) return 0;
  int64_t pp = m.size[BS_DIM_PP] > 0 ? m.size[BS_DIM_PP] : 1;
  int ring = cfg->par.pp_schedule == BS_PP_INTERLEAVED && cfg->par.pp_chunks > 1;
  int64_t chunks = ring ? cfg->par.pp_chunks : 1;
  bs_config c = *cfg;
  c.model.layers = (int)(DEEP_LAYERS * pp * chunks);
  c.par.micro_batch = (int)m.micro_batch;
  /* one micro-batch; the interleaved schedule needs a multiple of pp: pp of them, whose first's
   * chunk 0 runs its layers' forwards, and later their backwards, one after another */
  c.work.batch = (int64_t)m.size[BS_DIM_DP] * m.micro_batch * (ring ? pp : 1);
  bs_plan *plan = NULL;
  if (bs_plan_create(&c, rpn, &plan, err, sizeof err)) return 0;
  bs_plan_set_op_cache(plan, !opts->no_op_cache);
  const bs_mesh *ms = bs_plan_mesh(plan);
  sig *x = malloc(sizeof *x * DEEP_OPS);
  int32_t *buf = malloc(sizeof *buf * DEEP_OPS);
  double best = 0, per = (double)m.microbatches * (double)(cfg->model.layers / pp);
  for (int s = 0; x && buf && s < pp; s++) {
    double fb;
    if (!layer_fwd_bwd(plan, stage_rank(ms, s), prof, cfg->model.dtype, x, buf, &fb) && per * fb > best)
      best = per * fb;
  }
  free(x);
  free(buf);
  bs_plan_free(plan);
  return best;
}

int bs_search_probe(const bs_config *cfg, const bs_sim_opts *opts_in, const bs_profile *prof, int max_ops, int deep,
                    bs_probe *out, char *err, size_t errlen) {
  bs_sim_opts opts;
  if (opts_in) opts = *opts_in;
  else bs_sim_opts_default(&opts);
  memset(out, 0, sizeof *out);
  bs_platform_spec ps;
  if (bs_platform_resolve(cfg, &opts, prof, &ps, err, errlen)) return -2; /* every walk resolves it first */
  out->ranks_per_node = ps.ranks_per_node;
  out->capacity_bytes = bs_profile_capacity_bytes(prof);
  bs_plan *plan = NULL;
  int64_t sn_peak = 0;
  if (bs_sim_layers_apply(cfg, &opts)) {
    /* the walk builds the 3-layer plan first: its refusal is the walk's; the full plan's is not */
    bs_config c3 = *cfg;
    c3.model.layers = 3;
    if (bs_plan_create(&c3, ps.ranks_per_node, &plan, err, errlen)) return -2;
    bs_plan_free(plan);
    char why[256];
    if (bs_plan_create(cfg, ps.ranks_per_node, &plan, why, sizeof why)) return 1;
  } else if (bs_plan_create(cfg, ps.ranks_per_node, &plan, err, errlen)) {
    return -2; /* the walk's first plan (the micro-batch and pipeline shortcuts build it first too) */
  }
  bs_plan_set_op_cache(plan, !opts.no_op_cache);
  const bs_mesh *m = bs_plan_mesh(plan);
  int32_t nids = bs_plan_buf_ids(plan);
  int64_t *held_by = malloc(sizeof *held_by * (size_t)(nids > 0 ? nids : 1));
  sig *x = malloc(sizeof *x * (size_t)(max_ops > 0 ? max_ops : 1));
  int rc = held_by && x ? 0 : 1, stages = m->size[BS_DIM_PP] > 0 ? m->size[BS_DIM_PP] : 1;
  double fwds = alike_forwards(cfg, m);
  for (int s = 0; !rc && s < stages; s++) {
    seen sn = {0, 0, -1, 0, -1};
    if (prefix(plan, stage_rank(m, s), prof, cfg->model.dtype, max_ops, held_by, nids, x, &sn)) rc = 1;
    double compute =
      fwds > 0 && sn.layer_fwd > 0 && fwds * sn.layer_fwd > sn.compute ? fwds * sn.layer_fwd : sn.compute;
    int64_t peak = layers_peak(cfg, m, &sn);
    if (sn.peak > peak) peak = sn.peak;
    if (peak > out->peak_bytes) out->peak_bytes = peak;
    if (compute > out->compute_s) out->compute_s = compute;
  }
  free(held_by);
  free(x);
  bs_plan_free(plan);
  if (rc) {
    out->peak_bytes = 0;
    out->compute_s = 0;
    return 1;
  }
  out->oom = out->capacity_bytes > 0 && bs_mem_over(cfg, out->peak_bytes, out->capacity_bytes);
  if (!out->oom && deep && stages > 1 && !long_peak(cfg, &opts, prof, ps.ranks_per_node, &sn_peak) &&
      sn_peak > out->peak_bytes) {
    out->peak_bytes = sn_peak;
    out->oom = out->capacity_bytes > 0 && bs_mem_over(cfg, out->peak_bytes, out->capacity_bytes);
  }
  if (!out->oom && deep) {
    double d = deep_compute(cfg, &opts, prof, ps.ranks_per_node);
    if (d > out->compute_s) out->compute_s = d;
  }
  return 0;
}
