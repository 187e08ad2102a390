/*
 * search.c — the engine of `burstsim search` (search.h): enumerate, prune the
 * illegal (bs_plan_create's checks, through the walk), prune by memory (the
 * walk's peak is the simulator's, byte for byte), then simulate cheapest lower
 * bound first and skip what the bound rules out.
 *
 * The lower bound and why it is one. A simulated rank executes its ops one
 * after another (actor.c): a COMPUTE op holds the rank for the profile's
 * modelled duration d (sg_actor_sleep_for(d)), or, on the shared-CPU host
 * topology, executes d x host_speed flops at a rate bounded by the host's
 * speed, so for at least d. Nothing else a rank does (waits, posting
 * communications, ALLOC, FREE, PHASE) takes negative time. Hence a rank ends no
 * earlier than the sum of its COMPUTE durations, and the step (the latest rank's
 * end, result.c) is at least the largest such sum over the ranks, the walk's
 * compute_s. A fold simulates one rank per class of ranks with the same
 * timeline, so the simulated step is still the maximum over all ranks.
 * The walk's replay_s is tighter (walk.c): the ranks' ops replayed in program
 * order with each COMPUTE taking d, a SEND/RECV pair completing when both are
 * posted, a COLL its floor f after its post, and a rank outside the replay
 * always ready. In the simulation a COMPUTE takes at least d, a message
 * completes no earlier than both its posts (SimGrid's mailbox rendezvous), a
 * WAIT returns no earlier than its handles complete, and a COLL no earlier
 * than f after its post: its member's actor sleeps the profile's base cost,
 * then the modelled time where its algorithm sleeps it out (a ring of flows
 * waits out its lockstep time, a tree timed whole its tree time; walk.c's
 * coll_floor decides the algorithm and the links as coll.c does). By
 * induction over each rank's ops in order, every op starts in the simulation
 * no earlier than in the replay (each start is a maximum of sums of terms the
 * simulation makes larger or equal), so every replayed rank's end, and their
 * maximum replay_s, is at most the step. The bound is max(replay_s, compute_s).
 * With the layer shortcut the step is extended from 3 and 4 simulated layers,
 * which is not the full simulation: there the bound holds for the full
 * simulation, which the shortcut matches within 0.1 % (tests/sim/test_layers.c),
 * so the bound used is the walk's bound x (1 - LAYERS_SLACK). Every simulated step is
 * checked against its bound (bound_violations), so a broken proof shows.
 *
 * Two passes. Every candidate is first walked over one rank per pipeline stage
 * (BS_WALK_STAGES, walk.h): a subset of the corners, so its peak is at most the
 * corners' (at most the simulated peak) and its latest end at most theirs (a
 * rank outside the replay is always ready): both stay lower bounds, so a
 * candidate past the capacity on that pass is out of memory, and the skip below
 * holds with them. A candidate the branch and bound reaches with its first-pass
 * figures is walked over the corners (refine), its bound raised to the larger
 * of the two, and put back in the heap: only those are ever walked twice.
 *
 * Exactness of the skip: a candidate c is skipped only when K candidates are
 * simulated with steps at most the K-th best, and the K-th best < bound(c) <=
 * step(c) (so c is not in the top K), and a simulated candidate s has step(s)
 * <= bound(c) and peak(s) <= peak(c) (so c is dominated: not on the front).
 */
#include "search/search.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/clock.h"
#include "search/probe.h"

#define LAYERS_SLACK 2e-3 /* twice the layer shortcut's tested agreement */
#define ROUND_SLACK 1e-9  /* a sum in another order than SimGrid's clock */

/* ---- enumeration ---------------------------------------------------- */

typedef struct {
  bs_search *s;
  int cap;
} builder;

/* A candidate: its base point, the index of its value of each searched key, the keys spread. */
static int push(builder *b, int base, const int *at, int spread) {
  if (b->s->n == INT32_MAX) return -1;
  if (b->s->n == b->cap) {
    int nc = b->cap ? (b->cap > INT32_MAX / 2 ? INT32_MAX : 2 * b->cap) : 256;
    bs_cand *p = realloc(b->s->c, sizeof *p * (size_t)nc);
    if (!p) return -1;
    b->s->c = p;
    b->cap = nc;
  }
  bs_cand *x = &b->s->c[b->s->n++];
  memset(x, 0, sizeof *x);
  x->res = x->why = -1;
  x->base = base;
  for (int k = 0; k < BS_SEARCH_NKEYS; k++) x->at[k] = (uint8_t)at[k];
  x->spread = (uint8_t)spread;
  return 0;
}

/* The divisors of n in ascending order, the first max of them: those up to sqrt(n), then their
 * cofactors (every candidate's configuration is rebuilt through these lists: search.c's odometer). */
static int divisors(int64_t n, int *out, int max) {
  int64_t lo[64], hi[64];
  int nl = 0, nh = 0;
  for (int64_t d = 1; d * d <= n && nl < 64; d++)
    if (n % d == 0) {
      lo[nl++] = d;
      if (d * d != n) hi[nh++] = n / d;
    }
  int k = 0;
  for (int i = 0; i < nl && k < max; i++) out[k++] = (int)lo[i];
  for (int i = nh - 1; i >= 0 && k < max; i--) out[k++] = (int)hi[i];
  return k;
}

static int takes_layouts(bs_method m) { return m == BS_BURST || m == BS_RING || m == BS_USP || m == BS_ALLGATHER; }

/*
 * The enumeration is an odometer over the searched keys, in this order (the last turns fastest).
 * Each key's values are listed from the base point, the auto keys, and the keys before it (set in
 * the candidate being built): a list may be empty (no candidate has that prefix).
 */
#define MAXV 64

typedef struct {
  int v, chunks; /* the key's value; pp_schedule: the schedule and its chunks */
} kval;

typedef struct {
  const bs_config *base;
  const bs_search_autos *a;
  int first_method; /* at cp = 1 the first method searched stands for all */
} space;

typedef int (*key_values)(const space *sp, const bs_config *c, kval *v);
typedef void (*key_set)(bs_config *c, kval v);

static int is_model(const bs_config *c) { return c->work.scope == BS_SCOPE_MODEL; }
static int is_train(const bs_config *c) { return c->work.phase == BS_TRAIN; }

/* The size of a dimension of a candidate whose method, pp, dp and tp are set (the mesh's rule). */
static int size_of(const bs_config *c, bs_dim d) {
  int size[BS_DIM_COUNT];
  bs_mesh_sizes(&c->par, size);
  return size[d];
}
static int cp_of(const bs_config *c) { return size_of(c, BS_DIM_CP); }

static int one(kval *v, int x) {
  v[0] = (kval){x, 0};
  return 1;
}

static int list_divisors(int64_t n, kval *v) {
  int d[MAXV], k = divisors(n, d, MAXV);
  for (int i = 0; i < k; i++) v[i] = (kval){d[i], 0};
  return k;
}

static int values_method(const space *sp, const bs_config *c, kval *v) {
  (void)c;
  if (!sp->a->method) return one(v, sp->base->par.method);
  int n = 0;
  for (int m = 0; m < BS_METHOD_COUNT; m++)
    if (m != BS_TREE || sp->base->work.phase == BS_DECODE) v[n++] = (kval){m, 0};
  return n;
}
static void set_method(bs_config *c, kval v) { c->par.method = (bs_method)v.v; }

static int values_pp(const space *sp, const bs_config *c, kval *v) {
  int G = c->par.gpus, n = sp->a->pp && is_model(c) ? list_divisors(G, v) : one(v, sp->base->par.pp), k = 0;
  for (int i = 0; i < n; i++) {
    int pp = v[i].v > 0 ? v[i].v : 1;
    if (G % pp == 0) v[k++] = (kval){pp, 0};
  }
  return k;
}
static void set_pp(bs_config *c, kval v) { c->par.pp = v.v; }

static int values_dp(const space *sp, const bs_config *c, kval *v) {
  int G = c->par.gpus, pp = c->par.pp, n = 0;
  if (sp->a->dp) {
    kval all[MAXV];
    int nall = list_divisors(G / pp, all);
    for (int i = 0; i < nall; i++)
      if (c->work.batch % all[i].v == 0) v[n++] = all[i];
    return n;
  }
  int dp = sp->base->par.dp > 0 ? sp->base->par.dp : 1;
  return G % (dp * pp) ? 0 : one(v, dp);
}
static void set_dp(bs_config *c, kval v) { c->par.dp = v.v; }

static int values_tp(const space *sp, const bs_config *c, kval *v) {
  int n;
  if (!sp->a->tp) n = one(v, sp->base->par.tp);
  else if (c->par.method == BS_TP) n = one(v, 1); /* method tp: tp = gpus / (dp pp) */
  else n = list_divisors(c->par.gpus / (c->par.dp * c->par.pp), v);
  if (!sp->a->method || c->par.method == BS_TP || (int)c->par.method == sp->first_method) return n;
  /* cp = 1: no method splits the sequence, so they all run the same plan: the first stands for them */
  int k = 0;
  for (int i = 0; i < n; i++) {
    bs_config t = *c;
    t.par.tp = v[i].v;
    if (cp_of(&t) != 1) v[k++] = v[i];
  }
  return k;
}
static void set_tp(bs_config *c, kval v) { c->par.tp = v.v; }

static int values_ulysses(const space *sp, const bs_config *c, kval *v) {
  if (!sp->a->ulysses_degree || c->par.method != BS_USP) return one(v, sp->base->par.ulysses_degree);
  int cp = cp_of(c), n = 0; /* usp needs 1 < ulysses_degree < cp: ring or ulysses otherwise */
  kval all[MAXV];
  int nall = list_divisors(cp, all);
  for (int i = 0; i < nall; i++)
    if (all[i].v > 1 && all[i].v < cp) v[n++] = all[i];
  return n;
}
static void set_ulysses(bs_config *c, kval v) { c->par.ulysses_degree = v.v; }

static int values_layout(const space *sp, const bs_config *c, kval *v) {
  if (!sp->a->layout) return one(v, sp->base->par.layout);
  if (!takes_layouts(c->par.method) || cp_of(c) == 1) return one(v, BS_CONTIGUOUS);
  /* the balance strategies: packed documents, on the K,V ring of burst and ring */
  int nl = c->work.docs > 0 && (c->par.method == BS_BURST || c->par.method == BS_RING) ? 5 : 3;
  for (int l = 0; l < nl; l++) v[l] = (kval){l, 0};
  return nl;
}
static void set_layout(bs_config *c, kval v) { c->par.layout = (bs_layout)v.v; }

static int values_zero(const space *sp, const bs_config *c, kval *v) {
  if (!sp->a->zero) return one(v, sp->base->par.zero);
  if (!is_model(c) || !is_train(c) || c->par.dp <= 1) return one(v, 0); /* it shards over dp */
  for (int z = 0; z < 4; z++) v[z] = (kval){z, 0};
  return 4;
}
static void set_zero(bs_config *c, kval v) { c->par.zero = v.v; }

static int values_micro_batch(const space *sp, const bs_config *c, kval *v) {
  if (!sp->a->micro_batch) return one(v, sp->base->par.micro_batch);
  if (!is_model(c) || c->work.batch % c->par.dp) return one(v, 0);
  return list_divisors(c->work.batch / c->par.dp, v);
}
static void set_micro_batch(bs_config *c, kval v) { c->par.micro_batch = v.v; }

static int values_recompute(const space *sp, const bs_config *c, kval *v) {
  if (!sp->a->recompute || !is_model(c) || !is_train(c)) return one(v, sp->base->work.recompute);
  v[0] = (kval){BS_RECOMPUTE_OFF, 0}, v[1] = (kval){BS_RECOMPUTE_FULL, 0}, v[2] = (kval){BS_RECOMPUTE_SELECTIVE, 0};
  return 3;
}
static void set_recompute(bs_config *c, kval v) { c->work.recompute = v.v; }

/* Pipeline schedules: 1F1B, and interleaved where the chunks divide the layers and pp can divide the
 * microbatches (their count divides batch / dp: none is a multiple of pp unless batch / dp is, so
 * the others would all be refused by the plan). */
static int values_pp_schedule(const space *sp, const bs_config *c, kval *v) {
  const bs_parallel *bp = &sp->base->par;
  int pp = c->par.pp;
  if (!sp->a->pp_schedule || !is_model(c) || pp <= 1 || (c->work.batch / c->par.dp) % pp) {
    v[0] = (kval){bp->pp_schedule, bp->pp_chunks};
    return 1;
  }
  int n = 0;
  v[n++] = (kval){BS_PP_1F1B, bp->pp_chunks};
  for (int k = 2; k <= 4; k *= 2)
    if (c->model.layers % (pp * k) == 0) v[n++] = (kval){BS_PP_INTERLEAVED, k};
  return n;
}
static void set_pp_schedule(bs_config *c, kval v) {
  c->par.pp_schedule = (bs_pp_schedule)v.v;
  c->par.pp_chunks = v.chunks;
}

/* What travels the ring: pass-Q runs on burst and ring, in prefill and decode. */
static int values_cp_pass(const space *sp, const bs_config *c, kval *v) {
  bs_method m = c->par.method;
  if (!sp->a->cp_pass || is_train(c) || (m != BS_BURST && m != BS_RING)) return one(v, sp->base->par.cp_pass);
  if (cp_of(c) == 1) return one(v, BS_PASS_KV); /* no ring */
  v[0] = (kval){BS_PASS_KV, 0}, v[1] = (kval){BS_PASS_Q, 0};
  return 2;
}
static void set_cp_pass(bs_config *c, kval v) { c->par.cp_pass = (bs_cp_pass)v.v; }

/* FP8 GEMMs (layer and model scope: attention alone has none): only when asked, as it changes the
 * numerics the prediction stands for. */
static int values_fp8(const space *sp, const bs_config *c, kval *v) {
  if (!sp->a->fp8 || c->work.scope == BS_SCOPE_ATTENTION) return one(v, sp->base->model.fp8);
  v[0] = (kval){BS_FP8_OFF, 0}, v[1] = (kval){BS_FP8_FFN, 0}, v[2] = (kval){BS_FP8_ALL, 0};
  return 3;
}
static void set_fp8(bs_config *c, kval v) { c->model.fp8 = (bs_fp8)v.v; }

/* A double ring (inner rings within nodes, an outer ring over them) forms on burst and ring with a
 * ring (cp > 1), outside decode and pass-Q (plans/create.c); off and on, or the list's values. Where
 * both still take the same decision (a ring within one node) the walk keeps the first (first_pass). */
static int values_double_ring(const space *sp, const bs_config *c, kval *v) {
  bs_method m = c->par.method;
  if (!sp->a->double_ring || (m != BS_BURST && m != BS_RING) || c->work.phase == BS_DECODE ||
      c->par.cp_pass == BS_PASS_Q || cp_of(c) == 1)
    return one(v, sp->base->par.double_ring);
  int n = 0, want = sp->a->double_ring;
  for (int t = BS_AUTO; t <= BS_ON; t++) /* every: off and on (auto is one of them); a list: its bits */
    if (want == BS_SEARCH_EVERY ? t != BS_AUTO : (want & BS_SEARCH_BIT(t + 1)) != 0) v[n++] = (kval){t, 0};
  return n;
}
static void set_double_ring(bs_config *c, kval v) { c->par.double_ring = (bs_tristate)v.v; }

/* usp: its all-to-all groups within nodes and rings across (head-first), or the rings within nodes. */
static int values_placement(const space *sp, const bs_config *c, kval *v) {
  if (!sp->a->placement || c->par.method != BS_USP) return one(v, sp->base->par.ulysses_placement);
  static const int every[] = {BS_HEAD_FIRST, BS_RING_FIRST};
  int n = 0, want = sp->a->placement;
  for (int i = 0; i < 2; i++)
    if (want == BS_SEARCH_EVERY || want & BS_SEARCH_BIT(every[i])) v[n++] = (kval){every[i], 0};
  return n;
}
static void set_placement(bs_config *c, kval v) { c->par.ulysses_placement = (bs_placement)v.v; }

/* Megatron's tensor parallelism v1 (allreduces) or v3 (sequence parallel: all-gathers and
 * reduce-scatters) where a tensor-parallel dimension of more than one rank runs: method tp at every
 * scope (plans/tp.c), and the projections of layer and model scope (plans/workload.c). */
static int values_tp_variant(const space *sp, const bs_config *c, kval *v) {
  int tp = size_of(c, BS_DIM_TP);
  if (!sp->a->tp_variant || tp <= 1 || (c->par.method != BS_TP && c->work.scope == BS_SCOPE_ATTENTION))
    return one(v, sp->base->par.tp_variant);
  static const int every[] = {1, 3};
  int n = 0, want = sp->a->tp_variant;
  for (int i = 0; i < 2; i++)
    if (want == BS_SEARCH_EVERY || want & BS_SEARCH_BIT(every[i])) v[n++] = (kval){every[i], 0};
  return n;
}
static void set_tp_variant(bs_config *c, kval v) { c->par.tp_variant = v.v; }

/* Expert parallelism (a MoE model at layer and model scope): every divisor of dp x cp that divides
 * the experts (plans/workload_moe.c lays the expert-parallel group over those ranks). */
static int values_ep(const space *sp, const bs_config *c, kval *v) {
  if (!sp->a->ep || c->model.experts <= 0 || c->work.scope == BS_SCOPE_ATTENTION) return one(v, sp->base->par.ep);
  kval all[MAXV];
  int n = 0, nall = list_divisors((int64_t)cp_of(c) * c->par.dp, all);
  for (int i = 0; i < nall; i++)
    if (c->model.experts % all[i].v == 0) v[n++] = all[i];
  return n;
}
static void set_ep(bs_config *c, kval v) { c->par.ep = v.v; }

static const struct {
  key_values values;
  key_set set;
  int spread; /* BS_SPREAD_*: a key the label names where it takes more than one value */
} searched[] = {
  {values_method, set_method, 0},
  {values_pp, set_pp, 0},
  {values_dp, set_dp, 0},
  {values_tp, set_tp, 0},
  {values_ulysses, set_ulysses, 0},
  {values_layout, set_layout, 0},
  {values_zero, set_zero, 0},
  {values_micro_batch, set_micro_batch, 0},
  {values_recompute, set_recompute, 0},
  {values_pp_schedule, set_pp_schedule, 0},
  {values_cp_pass, set_cp_pass, 0},
  {values_fp8, set_fp8, 0},
  {values_double_ring, set_double_ring, BS_SPREAD_DOUBLE_RING},
  {values_placement, set_placement, BS_SPREAD_PLACEMENT},
  {values_tp_variant, set_tp_variant, BS_SPREAD_TP_VARIANT},
  {values_ep, set_ep, 0},
};
#define NKEYS ((int)(sizeof searched / sizeof searched[0]))
_Static_assert(sizeof searched / sizeof searched[0] == BS_SEARCH_NKEYS, "bs_cand.at holds one index per key");
_Static_assert(MAXV <= 256, "bs_cand.at holds an index below 256");

/* The auto keys of one base point, spread over their values. Each key's values depend only on the
 * base point and the keys before it (values_*), so a candidate is its base point and its indices:
 * bs_search_config replays them. */
static int expand_one(builder *b, int ibase, const bs_config *base, const bs_search_autos *a) {
  space sp = {base, a, a->method ? BS_BURST : base->par.method};
  kval v[NKEYS][MAXV];
  int n[NKEYS], at[NKEYS], d = 0;
  bs_config c = *base;
  n[0] = searched[0].values(&sp, &c, v[0]);
  at[0] = 0;
  while (d >= 0) {
    if (at[d] == n[d]) { /* this key's values done: turn the one before */
      if (--d >= 0) at[d]++;
      continue;
    }
    searched[d].set(&c, v[d][at[d]]);
    if (d == NKEYS - 1) {
      int spread = 0;
      for (int k = 0; k < NKEYS; k++)
        if (n[k] > 1) spread |= searched[k].spread;
      if (push(b, ibase, at, spread)) return -1;
      at[d]++;
      continue;
    }
    d++;
    n[d] = searched[d].values(&sp, &c, v[d]);
    at[d] = 0;
  }
  return 0;
}

void bs_search_config(const bs_search *s, int i, bs_config *out) {
  const bs_cand *x = &s->c[i];
  const bs_config *base = &s->base[x->base];
  space sp = {base, &s->autos, s->autos.method ? BS_BURST : base->par.method};
  kval v[MAXV];
  *out = *base;
  for (int d = 0; d < NKEYS; d++) {
    int n = searched[d].values(&sp, out, v);
    if (x->at[d] < n) searched[d].set(out, v[x->at[d]]); /* always: the same lists as the enumeration's */
  }
}

int bs_search_expand(const bs_config *base, int nbase, const bs_search_autos *a, bs_search *s, char *err,
                     size_t errlen) {
  memset(s, 0, sizeof *s);
  builder b = {s, 0};
  s->base = malloc(sizeof *s->base * (size_t)(nbase > 0 ? nbase : 1));
  if (!s->base) {
    snprintf(err, errlen, "out of memory for %d base points", nbase);
    return -1;
  }
  if (nbase > 0) memcpy(s->base, base, sizeof *base * (size_t)nbase);
  s->nbase = nbase;
  s->autos = *a;
  for (int i = 0; i < nbase; i++)
    if (expand_one(&b, i, &base[i], a)) {
      snprintf(err, errlen, "out of memory for %d candidates", s->n);
      bs_search_free(s);
      return -1;
    }
  if (s->n == 0) {
    snprintf(err, errlen, "the search space is empty (no factorisation of parallel.gpus fits the keys given)");
    bs_search_free(s);
    return -1;
  }
  return 0;
}

/* ---- pruning ---------------------------------------------------------- */

/* A plan's message with its numbers written N: one reason class per check. */
static void add_reason(bs_search *s, const char *why) {
  char cls[160];
  size_t k = 0;
  for (const char *p = why; *p && k + 2 < sizeof cls; p++) {
    if (*p >= '0' && *p <= '9') {
      while (p[1] >= '0' && p[1] <= '9') p++;
      cls[k++] = 'N';
    } else cls[k++] = *p;
  }
  cls[k] = '\0';
  for (int i = 0; i < s->nreasons; i++)
    if (!strcmp(s->reasons[i].reason, cls)) {
      s->reasons[i].count++;
      return;
    }
  if (s->nreasons == BS_SEARCH_MAX_REASONS) {
    s->other_reasons++;
    return;
  }
  bs_search_reason *r = &s->reasons[s->nreasons++];
  snprintf(r->reason, sizeof r->reason, "%s", cls);
  snprintf(r->example, sizeof r->example, "%s", why);
  r->count = 1;
}

typedef struct {
  char name[256];
  bs_profile *prof;
} prof_slot;

#define MAX_PROFILES 8

static const bs_profile *profile_for(prof_slot *ps, int *np, const bs_config *c, const bs_sim_opts *o, char *err,
                                     size_t errlen) {
  const char *name = o && o->profile ? o->profile : c->cluster.profile;
  char key[sizeof ps->name];
  int kl = snprintf(key, sizeof key, "%s#%s", name, bs_attn_kernel_name(c->model.attention_kernel));
  if (kl < 0 || (size_t)kl >= sizeof key) {
    snprintf(err, errlen, "cluster.profile: name longer than %zu characters", sizeof key - 16);
    return NULL;
  }
  for (int i = 0; i < *np; i++)
    if (!strcmp(ps[i].name, key)) return ps[i].prof;
  if (*np == MAX_PROFILES) {
    snprintf(err, errlen, "cluster.profile: more than %d profiles in one search", MAX_PROFILES);
    return NULL;
  }
  bs_profile *p = calloc(1, sizeof *p);
  if (!p) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  char why[512];
  if (bs_profile_load(name, p, why, sizeof why)) {
    snprintf(err, errlen, "%s: %s", o && o->profile ? "--profile" : "cluster.profile", why);
    free(p);
    return NULL;
  }
  if (bs_profile_use_attention(p, c->model.attention_kernel, err, errlen)) {
    free(p);
    return NULL;
  }
  snprintf(ps[*np].name, sizeof ps[*np].name, "%s", key);
  ps[*np].prof = p;
  (*np)++;
  return p;
}

/* ---- what a candidate keeps apart: its reason, its result ------------------ */

static uint64_t hash_bytes(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t k = 0; k < n; k++) h = (h ^ b[k]) * 1099511628211ull;
  return h;
}

/* Where why sits in the reasons' hash table, or the empty slot where it goes. */
static int why_slot(const bs_search *s, const char *why) {
  int m = s->capwhyhash - 1, k = (int)(hash_bytes(why, strlen(why)) & (uint64_t)m);
  while (s->whyhash[k] && strcmp(s->whys[s->whyhash[k] - 1], why)) k = (k + 1) & m;
  return k;
}

/* The reasons are few (a plan's message per class of numbers) against the candidates: each distinct
 * one is kept once. Its index, or -1 out of memory. */
static int why_index(bs_search *s, const char *why) {
  if (2 * (s->nwhys + 1) > s->capwhyhash) { /* the table at most half full */
    int cap = s->capwhyhash ? 2 * s->capwhyhash : 64, *h = calloc((size_t)cap, sizeof *h), *old = s->whyhash;
    if (!h) return -1;
    s->whyhash = h;
    s->capwhyhash = cap;
    for (int i = 0; i < s->nwhys; i++) s->whyhash[why_slot(s, s->whys[i])] = i + 1;
    free(old);
  }
  int k = why_slot(s, why);
  if (s->whyhash[k]) return s->whyhash[k] - 1;
  if (s->nwhys == s->capwhys) {
    int cap = s->capwhys ? 2 * s->capwhys : 64;
    char **w = realloc(s->whys, sizeof *w * (size_t)cap);
    if (!w) return -1;
    s->whys = w;
    s->capwhys = cap;
  }
  size_t len = strlen(why);
  char *d = malloc(len + 1);
  if (!d) return -1;
  memcpy(d, why, len + 1);
  s->whys[s->nwhys] = d;
  s->whyhash[k] = s->nwhys + 1;
  return s->nwhys++;
}

static int set_why(bs_search *s, bs_cand *c, const char *why) {
  int k = why_index(s, why);
  if (k < 0) return -1;
  c->why = k;
  return 0;
}

/* c's result from now on (taken: the search frees it). 0, or -1 out of memory (r freed). */
static int keep_result(bs_search *s, bs_cand *c, bs_result *r) {
  if (s->nres == s->capres) {
    int cap = s->capres ? 2 * s->capres : 64;
    bs_result **p = realloc(s->res, sizeof *p * (size_t)cap);
    if (!p) {
      bs_result_free(r);
      free(r);
      return -1;
    }
    s->res = p;
    s->capres = cap;
  }
  s->res[s->nres] = r;
  c->res = s->nres++;
  return 0;
}

const bs_result *bs_search_result(const bs_search *s, int i) { return s->c[i].res >= 0 ? s->res[s->c[i].res] : NULL; }

const char *bs_search_why(const bs_search *s, int i) { return s->c[i].why >= 0 ? s->whys[s->c[i].why] : ""; }

/* What a walk leaves on its candidate: the peak, whether it came back with a capacity; the first
 * candidate's capacity is the search's (the report's). */
static void keep_walk(bs_search *s, int i, const bs_walk *w) {
  bs_cand *c = &s->c[i];
  c->peak_bytes = w->peak_bytes;
  c->flags = (uint8_t)(w->capacity_bytes > 0 ? c->flags | BS_CAND_WALKED : c->flags & ~BS_CAND_WALKED);
  if (i == 0) s->capacity_bytes = w->capacity_bytes;
}

/* ---- twins: candidates that run a plan another one runs ----------------- */

#define TWINS 13 /* the configurations of the candidates walked last: a twin lies at most 12 before */

typedef struct {
  int i, method;
  uint64_t hash; /* of the configuration with its method cleared */
} cp1_point;

typedef struct {
  bs_config cfg[TWINS]; /* candidate i's configuration at cfg[i % TWINS] */
  cp1_point *cp1;       /* the legal candidates at cp = 1 outside method tp, in enumeration order */
  int ncp1, capcp1;
} walk_state;

static uint64_t hash_without_method(const bs_config *c) {
  bs_config y = *c;
  y.par.method = (bs_method)0;
  return hash_bytes(&y, sizeof y);
}

/* The legal candidate before i that differs from it in `field` alone (its twin), when i was spread over
 * that key: the last three keys turn fastest, so a twin lies at most 12 before. -1 if none. */
static int twin_before(const bs_search *s, const walk_state *ws, int i, int spread, size_t field, size_t size) {
  const bs_cand *c = &s->c[i];
  const bs_config *ci = &ws->cfg[i % TWINS];
  if (!(c->spread & spread)) return -1;
  for (int j = i - 1; j >= 0 && j >= i - 12; j--) {
    const bs_cand *x = &s->c[j];
    if (x->status == BS_CAND_ILLEGAL || x->status == BS_CAND_SKIPPED || !(x->spread & spread)) continue;
    bs_config y = ws->cfg[j % TWINS];
    memcpy((char *)&y + field, (const char *)ci + field, size);
    if (!memcmp(&y, ci, sizeof y)) return j;
  }
  return -1;
}

static const char *tristate_name(bs_tristate t) { return t == BS_ON ? "on" : t == BS_OFF ? "off" : "auto"; }

/* Does candidate i run what a legal twin before it runs, so that it is not a second candidate?
 * double_ring: the plan takes the same decision (a ring within one node is one ring, on or off);
 * ulysses_placement: every rank sits on one node of a generated DGX platform, whose GPUs each have
 * their own links to the node's NVSwitch, and no rank is slower (cluster.straggler_*), so the two
 * placements are a renumbering of the same node's GPUs (a PCIe tree is not uniform: kept there). */
static int same_as_twin(const bs_search *s, const walk_state *ws, int i, int rpn, char *why, size_t n) {
  const bs_config *c = &ws->cfg[i % TWINS];
  int j = twin_before(s, ws, i, BS_SPREAD_DOUBLE_RING, offsetof(bs_config, par.double_ring), sizeof c->par.double_ring);
  bs_decision d, t;
  if (j >= 0 && !bs_plan_decide(c, rpn, &d) && !bs_plan_decide(&ws->cfg[j % TWINS], rpn, &t) &&
      t.double_ring == d.double_ring && t.ring_inner == d.ring_inner && t.ring_outer == d.ring_outer) {
    snprintf(why, n, "parallel.double_ring: %s takes the decision %s takes (a ring of %d x %d ranks): the same plan",
             tristate_name(c->par.double_ring), tristate_name(ws->cfg[j % TWINS].par.double_ring), d.ring_inner,
             d.ring_outer);
    return 1;
  }
  /* cp = 1 across base points (a method list is one base point per method): no method splits the
   * sequence, so the first legal one stands for the others */
  if (cp_of(c) == 1 && c->par.method != BS_TP) {
    uint64_t h = hash_without_method(c);
    for (int k = 0; k < ws->ncp1; k++) {
      const cp1_point *x = &ws->cp1[k];
      if (x->method == (int)c->par.method || x->hash != h) continue;
      bs_config y;
      bs_search_config(s, x->i, &y);
      y.par.method = c->par.method;
      if (memcmp(&y, c, sizeof y)) continue;
      snprintf(why, n, "parallel.method: %s at cp = 1 runs the plan %s runs (no method splits the sequence)",
               bs_method_name(c->par.method), bs_method_name((bs_method)x->method));
      return 1;
    }
  }
  j = twin_before(s, ws, i, BS_SPREAD_PLACEMENT, offsetof(bs_config, par.ulysses_placement),
                  sizeof c->par.ulysses_placement);
  if (j >= 0 && rpn > 0 && c->par.gpus <= rpn && c->cluster.straggler_factor <= 0 &&
      bs_topo_has_rails(c->cluster.topology)) {
    snprintf(why, n,
             "parallel.ulysses_placement: %s renumbers the GPUs of one node of %d (%d ranks) as %s does: the same step",
             bs_placement_name(c->par.ulysses_placement), rpn, c->par.gpus,
             bs_placement_name(ws->cfg[j % TWINS].par.ulysses_placement));
    return 1;
  }
  return 0;
}

/* A legal candidate at cp = 1 outside method tp: one the candidates after it may be twins of. 0 or -1. */
static int cp1_add(walk_state *ws, int i, const bs_config *c) {
  if (cp_of(c) != 1 || c->par.method == BS_TP) return 0;
  if (ws->ncp1 == ws->capcp1) {
    int cap = ws->capcp1 ? 2 * ws->capcp1 : 64;
    cp1_point *p = realloc(ws->cp1, sizeof *p * (size_t)cap);
    if (!p) return -1;
    ws->cp1 = p;
    ws->capcp1 = cap;
  }
  ws->cp1[ws->ncp1++] = (cp1_point){i, (int)c->par.method, hash_without_method(c)};
  return 0;
}

/* The first walk of every candidate: the corners where every candidate's walk is shown (--dry-run) or
 * all must be as today (brute force, all ranks), else one rank per stage, refined to the corners
 * when the candidate is reached (bs_search_run). */
static int first_walk(const bs_search_opts *o) {
  if (o->all_ranks) return BS_WALK_ALL;
  return o->dry_run || o->brute_force ? BS_WALK_CORNERS : BS_WALK_STAGES;
}

/* A lower bound of the step taken with the layer shortcut's slack where it applies (search.c's top). */
static double with_slack(const bs_config *c, const bs_search_opts *o, double lb) {
  double slack = bs_sim_layers_apply(c, o->opts) ? LAYERS_SLACK : ROUND_SLACK;
  return lb * (1 - slack);
}

static double bound_of(const bs_config *c, const bs_walk *w, const bs_search_opts *o) {
  return with_slack(c, o, w->replay_s > w->compute_s ? w->replay_s : w->compute_s);
}

/*
 * The first pass over every candidate, in enumeration order (the twins' rule reads the legal ones
 * before it). Walking (lazy = 0): legality and memory of every candidate, the bounds of those that
 * fit. Lazy: every candidate probed (probe.h): legality as the walk's first plan decides it, the
 * twins, and those whose probe alone passes the capacity; the others wait in the heap with the
 * probe's bounds. 0 or -1.
 */
static int first_pass(bs_search *s, const bs_search_opts *o, int lazy, prof_slot *profs, int *np, double t0, char *err,
                      size_t errlen) {
  walk_state *ws = calloc(1, sizeof *ws);
  if (!ws) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int rc = 0, nomem = 0, every = lazy ? 4096 : 64;
  for (int i = 0; i < s->n && !rc && !nomem; i++) {
    bs_cand *c = &s->c[i];
    if (o->stop && *o->stop) {
      c->status = BS_CAND_SKIPPED;
      s->skipped++;
      s->interrupted = 1;
      continue;
    }
    if (o->progress && i && i % every == 0) o->progress(o->progress_ctx, s, i, s->n, NAN, bs_now_s() - t0);
    bs_config *cfg = &ws->cfg[i % TWINS];
    bs_search_config(s, i, cfg);
    const bs_profile *prof = profile_for(profs, np, cfg, o->opts, err, errlen);
    if (!prof) {
      rc = -1;
      break;
    }
    char why[256];
    bs_walk w;
    bs_probe p;
    int refused, rpn, oom;
    if (lazy) {
      refused = bs_search_probe(cfg, o->opts, prof, BS_PROBE_OPS, 1, &p, why, sizeof why) == -2;
      if (i == 0) s->capacity_bytes = p.capacity_bytes;
      rpn = p.ranks_per_node;
      oom = p.oom;
    } else {
      memset(&w, 0, sizeof w);
      int wr = bs_sim_walk(cfg, o->opts, prof, first_walk(o) | BS_WALK_STOP_OOM, &w, why, sizeof why);
      keep_walk(s, i, &w);
      if (first_walk(o) != BS_WALK_STAGES) c->flags |= BS_CAND_REFINED;
      s->walked++;
      refused = wr == -2 || wr == -1; /* -1: a plan that breaks its own invariants is not a candidate either */
      rpn = w.ranks_per_node;
      oom = w.oom;
    }
    if (refused || same_as_twin(s, ws, i, rpn, why, sizeof why)) {
      c->status = BS_CAND_ILLEGAL;
      nomem |= set_why(s, c, why) != 0;
      add_reason(s, why);
      continue;
    }
    s->legal++;
    nomem |= cp1_add(ws, i, cfg) != 0;
    if (lazy) {
      c->flags |= BS_CAND_PROBED | (p.capacity_bytes > 0 ? BS_CAND_WALKED : 0);
      c->peak_bytes = p.peak_bytes;
    }
    if (oom) {
      c->status = BS_CAND_MEMORY;
      s->memory++;
      s->memory_by_probe += lazy;
      continue;
    }
    c->bound = lazy ? with_slack(cfg, o, p.compute_s) : bound_of(cfg, &w, o);
  }
  if (nomem) {
    snprintf(err, errlen, "out of memory");
    rc = -1;
  }
  free(ws->cp1);
  free(ws);
  return rc;
}

/* Candidate i (configuration cfg), reached with its probe's bounds: walked as first_pass walks it. 1
 * when it stays in the race (its bound raised to the walk's where higher: both are lower bounds, and
 * its peak the walk's), 0 when it is now settled (illegal to the walk, or past memory), -1 out of
 * memory. */
static int first_walk_of(bs_search *s, int i, const bs_config *cfg, const bs_search_opts *o, const bs_profile *prof) {
  bs_cand *c = &s->c[i];
  char why[256];
  bs_walk w;
  memset(&w, 0, sizeof w);
  int wr = bs_sim_walk(cfg, o->opts, prof, BS_WALK_STAGES | BS_WALK_STOP_OOM, &w, why, sizeof why);
  s->walked++;
  c->flags = (uint8_t)((c->flags & ~BS_CAND_PROBED) | BS_CAND_REACHED);
  if (wr == -2 || wr == -1) { /* a refusal past the plan the probe built (a shorter step's) */
    c->status = BS_CAND_ILLEGAL;
    s->legal--;
    add_reason(s, why);
    return set_why(s, c, why);
  }
  double b = bound_of(cfg, &w, o);
  /* the probe's figures are at most the walk's (probe.c): a margin of rounding for the sums; a walk
   * stopped at the capacity (peak_partial) saw part of the program, its peak already past the probe's */
  if (c->peak_bytes > w.peak_bytes || (!w.peak_partial && c->bound > b * (1 + 1e-9) + 1e-15)) s->probe_violations++;
  keep_walk(s, i, &w);
  if (w.oom) {
    c->status = BS_CAND_MEMORY;
    s->memory++;
    return 0;
  }
  if (b > c->bound) c->bound = b;
  return 1;
}

/* ---- branch and bound -------------------------------------------------- */

static const bs_search *sort_s;
static int by_bound(const void *x, const void *y) {
  const bs_cand *a = &sort_s->c[*(const int *)x], *b = &sort_s->c[*(const int *)y];
  if (a->bound != b->bound) return a->bound < b->bound ? -1 : 1;
  return *(const int *)x - *(const int *)y;
}
static double step_of(const bs_search *s, int i) { return s->res[s->c[i].res]->time.step; }
static int by_step(const void *x, const void *y) {
  double a = step_of(sort_s, *(const int *)x), b = step_of(sort_s, *(const int *)y);
  if (a != b) return a < b ? -1 : 1;
  return *(const int *)x - *(const int *)y;
}

/* Keeps the K best steps so far (ascending) in top[0..*nt). */
static void top_insert(double *top, int *nt, int K, double step) {
  if (*nt == K) {
    if (step >= top[K - 1]) return;
    top[K - 1] = step;
  } else top[(*nt)++] = step;
  for (int i = *nt - 1; i > 0 && top[i - 1] > top[i]; i--) {
    double t = top[i - 1];
    top[i - 1] = top[i];
    top[i] = t;
  }
}

/* A simulated candidate at least as fast as bound and using at most peak bytes? */
static int dominated(const bs_search *s, const int *sim, int nsim, double bound, int64_t peak) {
  for (int i = 0; i < nsim; i++) {
    const bs_result *x = s->res[s->c[sim[i]].res];
    if (x->time.step <= bound && x->mem.peak_bytes_max <= peak) return 1;
  }
  return 0;
}

/* A binary heap of candidate indices, least bound first (ties: enumeration order). */
static int heap_less(const bs_search *s, int a, int b) {
  if (s->c[a].bound != s->c[b].bound) return s->c[a].bound < s->c[b].bound;
  return a < b;
}
static void heap_push(const bs_search *s, int *h, int *n, int x) {
  int i = (*n)++;
  h[i] = x;
  while (i > 0 && heap_less(s, h[i], h[(i - 1) / 2])) {
    int p = (i - 1) / 2, t = h[p];
    h[p] = h[i];
    h[i] = t;
    i = p;
  }
}
static int heap_pop(const bs_search *s, int *h, int *n) {
  int top = h[0], i = 0;
  h[0] = h[--(*n)];
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < *n && heap_less(s, h[l], h[m])) m = l;
    if (r < *n && heap_less(s, h[r], h[m])) m = r;
    if (m == i) break;
    int t = h[m];
    h[m] = h[i];
    h[i] = t;
    i = m;
  }
  return top;
}

/* Candidate i (configuration cfg) reached with its first walk of one rank per stage: walked over the
 * grid's corners. 1 when it stays in the race (its bound raised to the corners' where higher: both
 * are lower bounds), 0 when it is now settled (past memory, or the walk failed), -1 out of memory. */
static int refine(bs_search *s, int i, const bs_config *cfg, const bs_search_opts *o, const bs_profile *prof) {
  bs_cand *c = &s->c[i];
  char why[256];
  bs_walk w;
  s->refined++;
  c->flags |= BS_CAND_REFINED | BS_CAND_REACHED;
  if (bs_sim_walk(cfg, o->opts, prof, BS_WALK_CORNERS | BS_WALK_STOP_OOM, &w, why, sizeof why)) {
    c->status = BS_CAND_FAILED;
    s->failed++;
    return set_why(s, c, why);
  }
  keep_walk(s, i, &w);
  if (w.oom) {
    c->status = BS_CAND_MEMORY;
    s->memory++;
    return 0;
  }
  double b = bound_of(cfg, &w, o);
  if (b > c->bound) c->bound = b;
  return 1;
}

/* Simulates candidate i (configuration cfg); 1 when it joins the simulated, 0 when not (failed, out of
 * memory, interrupted), -1 out of memory. Only the simulated keep their result. */
static int simulate(bs_search *s, int i, const bs_config *cfg, const bs_search_opts *o) {
  bs_cand *c = &s->c[i];
  char why[512] = "";
  bs_result *r = calloc(1, sizeof *r);
  if (!r) return -1;
  int rc = bs_sim_run(cfg, o->opts, r, why, sizeof why);
  if (o->stop && *o->stop) { /* the signal killed this simulation: not a failure */
    bs_result_free(r);
    free(r);
    s->interrupted = 1;
    c->status = BS_CAND_SKIPPED;
    s->skipped++;
    return 0;
  }
  if (rc) {
    c->status = BS_CAND_FAILED;
    char kept[256];
    const char *reason = why[0] ? why : r->error;
    size_t len = strnlen(reason, sizeof kept - 1); /* kept to the first 255 characters */
    memcpy(kept, reason, len);
    kept[len] = '\0';
    bs_result_free(r);
    free(r);
    s->failed++;
    return set_why(s, c, kept);
  }
  s->simulated++;
  if (r->mem.oom) { /* past the capacity on a rank the corner walk did not see */
    c->status = BS_CAND_MEMORY;
    c->flags |= BS_CAND_SIM_OOM;
    s->memory++;
    s->memory_by_sim++;
    bs_result_free(r);
    free(r);
    return 0;
  }
  c->status = BS_CAND_SIMULATED;
  if (r->time.step < c->bound) s->bound_violations++;
  return keep_result(s, c, r) ? -1 : 1;
}

/* The legal candidates settled with their probe's figures alone (never walked). */
static int not_walked(const bs_search *s) {
  int n = 0;
  for (int i = 0; i < s->n; i++) n += (s->c[i].flags & BS_CAND_PROBED) && s->c[i].status != BS_CAND_ILLEGAL;
  return n;
}

int bs_search_run(bs_search *s, const bs_search_opts *o, char *err, size_t errlen) {
  double t0 = bs_now_s();
  int K = o->top_k > 0 ? o->top_k : 10;
  prof_slot profs[MAX_PROFILES];
  int np = 0, lazy = !o->walk_all && !o->dry_run && !o->brute_force && !o->all_ranks;
  if (first_pass(s, o, lazy, profs, &np, t0, err, errlen)) {
    for (int i = 0; i < np; i++) free(profs[i].prof);
    return -1;
  }
  s->walk_s = bs_now_s() - t0;
  /* the heap starts as the pending candidates sorted by bound (a sorted array is a heap) */
  int *heap = malloc(sizeof *heap * (size_t)(s->n + 1)), *sim = malloc(sizeof *sim * (size_t)(s->n + 1));
  double *top = malloc(sizeof *top * (size_t)K);
  bs_config *cfg = malloc(sizeof *cfg);
  int rc = 0;
  if (!heap || !sim || !top || !cfg) {
    snprintf(err, errlen, "out of memory");
    rc = -1;
  }
  int n = 0, nsim = 0, nt = 0, nh = 0, done = 0;
  for (int i = 0; !rc && i < s->n; i++)
    if (s->c[i].status == BS_CAND_PENDING) heap[n++] = i;
  sort_s = s;
  if (!rc) qsort(heap, (size_t)n, sizeof *heap, by_bound);
  /* under mpirun each rank takes the j-th cheapest first bound when j % parts == part */
  for (int j = 0; !rc && j < n; j++) {
    if (o->parts > 1 && j % o->parts != o->part) s->c[heap[j]].status = BS_CAND_REMOTE;
    else if (!o->dry_run) heap[nh++] = heap[j];
  }
  int todo = nh;
  double best = NAN;
  while (!rc && nh > 0) {
    int i = heap_pop(s, heap, &nh);
    bs_cand *c = &s->c[i];
    if (o->stop && *o->stop) {
      s->interrupted = 1;
      c->status = BS_CAND_SKIPPED;
      s->skipped++;
      continue;
    }
    if (!o->brute_force && nt == K && c->bound > top[K - 1] &&
        (o->top_only || dominated(s, sim, nsim, c->bound, c->peak_bytes))) {
      c->status = BS_CAND_BOUND; /* the first walk's bound and peak are lower bounds too */
      s->bound++;
      done++;
      continue;
    }
    bs_search_config(s, i, cfg);
    if (!(c->flags & BS_CAND_REFINED)) {
      const bs_profile *prof = profile_for(profs, &np, cfg, o->opts, err, errlen);
      double tw = bs_now_s();
      int r = !prof ? -1 : c->flags & BS_CAND_PROBED ? first_walk_of(s, i, cfg, o, prof) : refine(s, i, cfg, o, prof);
      if (lazy) s->walk_s += bs_now_s() - tw;
      if (r > 0) heap_push(s, heap, &nh, i);
      else done++;
      if (r < 0 && prof) snprintf(err, errlen, "out of memory");
      rc = r < 0 ? -1 : 0;
      continue;
    }
    done++;
    int r = simulate(s, i, cfg, o);
    if (r < 0) {
      snprintf(err, errlen, "out of memory");
      rc = -1;
    }
    if (r <= 0) continue;
    sim[nsim++] = i;
    top_insert(top, &nt, K, step_of(s, i));
    best = top[0];
    if (o->progress) o->progress(o->progress_ctx, s, done, todo, best, bs_now_s() - t0);
  }
  for (int i = 0; i < np; i++) free(profs[i].prof);
  free(heap);
  free(sim);
  free(top);
  free(cfg);
  s->not_walked = not_walked(s);
  s->wall_s = bs_now_s() - t0;
  return rc;
}

int *bs_search_ranking(const bs_search *s, int *n) {
  int *r = malloc(sizeof *r * (size_t)(s->n + 1));
  *n = 0;
  if (!r) return NULL;
  for (int i = 0; i < s->n; i++)
    if (s->c[i].status == BS_CAND_SIMULATED) r[(*n)++] = i;
  sort_s = s;
  qsort(r, (size_t)*n, sizeof *r, by_step);
  return r;
}

int *bs_search_front(const bs_search *s, int *n) {
  int nr, *r = bs_search_ranking(s, &nr);
  *n = 0;
  if (!r) return NULL;
  int64_t least = INT64_MAX;
  for (int i = 0; i < nr; i++) {
    int64_t m = s->res[s->c[r[i]].res]->mem.peak_bytes_max;
    if (m < least) {
      least = m;
      r[(*n)++] = r[i];
    }
  }
  return r;
}

void bs_search_recount(bs_search *s) {
  s->legal = s->memory = s->bound = s->simulated = s->failed = s->skipped = s->memory_by_sim = 0;
  for (int i = 0; i < s->n; i++) {
    const bs_cand *c = &s->c[i];
    int sim_oom = (c->flags & BS_CAND_SIM_OOM) != 0;
    s->legal += c->status != BS_CAND_ILLEGAL && !(c->status == BS_CAND_SKIPPED && !(c->flags & BS_CAND_WALKED));
    s->memory += c->status == BS_CAND_MEMORY;
    s->memory_by_sim += sim_oom;
    s->simulated += c->status == BS_CAND_SIMULATED || sim_oom;
    s->bound += c->status == BS_CAND_BOUND;
    s->failed += c->status == BS_CAND_FAILED;
    s->skipped += c->status == BS_CAND_SKIPPED;
  }
  s->not_walked = not_walked(s);
}

int bs_search_settle(bs_search *s, int i, bs_cand_status status, int sim_oom, const char *why, const bs_result *res) {
  bs_cand *c = &s->c[i];
  c->status = (uint8_t)status;
  c->flags = (uint8_t)(sim_oom ? c->flags | BS_CAND_SIM_OOM : c->flags & ~BS_CAND_SIM_OOM);
  /* its owner walked it unless it pruned it by bound (from its probe's figures, or a walk's: not told) */
  if (status != BS_CAND_BOUND) c->flags &= (uint8_t)~BS_CAND_PROBED;
  c->why = -1;
  if (why && why[0] && set_why(s, c, why)) return -1;
  if (c->res >= 0) { /* a result of its own: replaced by the owner's */
    bs_result_free(s->res[c->res]);
    free(s->res[c->res]);
    s->res[c->res] = NULL;
    c->res = -1;
  }
  if (status != BS_CAND_SIMULATED || !res) return 0;
  bs_result *r = malloc(sizeof *r);
  if (!r) return -1;
  *r = *res;
  if (res->ranks && res->nranks > 0) { /* its own copy of the per-rank figures */
    r->ranks = malloc(sizeof *r->ranks * (size_t)res->nranks);
    if (!r->ranks) {
      free(r);
      return -1;
    }
    memcpy(r->ranks, res->ranks, sizeof *r->ranks * (size_t)res->nranks);
  } else {
    r->ranks = NULL;
    r->nranks = 0;
  }
  return keep_result(s, c, r);
}

void bs_search_free(bs_search *s) {
  for (int i = 0; i < s->nres; i++)
    if (s->res[i]) {
      bs_result_free(s->res[i]);
      free(s->res[i]);
    }
  for (int i = 0; i < s->nwhys; i++) free(s->whys[i]);
  free(s->res);
  free(s->whys);
  free(s->whyhash);
  free(s->base);
  free(s->c);
  memset(s, 0, sizeof *s);
}
