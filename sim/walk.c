/*
 * walk.c — a point's memory peak and busiest-rank compute read off its plan
 * without SimGrid (walk.h), for `burstsim search`'s pruning: the zero-time
 * transport of the rank interpreter (transport.h, rank.c). A rank's memory
 * depends only on the order of its own ALLOC and FREE ops, never on timing,
 * so the interpreter's count (bs_sim_alloc_held, memory.h) gives the
 * simulator's peak exactly; time is each rank's own clock: a COMPUTE at the
 * profile's rates, a message done when both sides have posted, a collective
 * its floor after its post (the proof that the latest end bounds the step is
 * at the top of search.c).
 */
#include "sim/walk.h"
#include "sim/transport.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sim/coll_algo.h"
#include "sim/platform.h"

/* A send or receive posted and not yet matched by its peer's: slots (= real ranks) and handle. */
typedef struct {
  int src, dst, is_send, owner, handle;
} unmatched;

/* A collective's floor (coll_floor), remembered per group, kind and size. */
typedef struct {
  bs_group g;
  int kind;
  int64_t bytes;
  double t;
} cfloor;

#define WALK_FLOORS 64

/* The zero-time transport: every rank of the plan has the interpreter's state (slot = rank, no
 * fold, no SimGrid), the replayed ones an iterator and a clock of their own. */
typedef struct {
  const bs_config *cfg;
  const bs_profile *prof;
  const bs_platform_spec *ps;
  bs_coll_model model; /* opts' */
  int rpn, routes;     /* routes: the platform's route model is coll.c's links (coll_floor) */
  cfloor floors[WALK_FLOORS];
  int nfloors;
  sim_ctx c;         /* the interpreter's point */
  bs_config cfg_run; /* cfg as the interpreter reads it: no straggler (the profile's rates) */
  bs_sim_source src;
  double *t;       /* per rank: its clock */
  double *compute; /* per rank: its COMPUTE seconds */
  double *done;    /* per (rank, handle): when it completes (< 0: not yet known) */
  uint8_t *in_wait;
  int *ranks, n; /* the replayed ranks, in rank order */
  int *idx_of;   /* real rank -> index in ranks, or -1 */
  unmatched *um;
  int num, cap;
} replay;

static double *done_of(replay *R, const rank_state *rs, int hd) {
  return &R->done[(size_t)rs->slot * MAX_HANDLES + (size_t)hd];
}

static double w_now(void *eng, const rank_state *rs) { return ((replay *)eng)->t[rs->slot]; }

/* A send (or receive) of rs to (from) the actor ps: matched in order with the peer's, both complete
 * when the later side posts (a receive's payload is its send's tag and size). */
static int w_p2p(replay *R, rank_state *rs, int hd, int ps, int is_send) {
  handle *h = &rs->h[hd];
  double t = R->t[rs->slot];
  *done_of(R, rs, hd) = -1;
  if (R->idx_of[ps] < 0) { /* a rank outside the replay: taken as ready (a relaxation: still a lower bound) */
    *done_of(R, rs, hd) = t;
    h->rx = is_send ? NULL : sim_msg_encode(h->tag, h->bytes);
    return 0;
  }
  int src = is_send ? rs->slot : ps, dst = is_send ? ps : rs->slot;
  for (int k = 0; k < R->num; k++) {
    unmatched *u = &R->um[k];
    if (u->src == src && u->dst == dst && u->is_send != is_send) {
      rank_state *o = &R->c.rs[u->owner];
      handle *oh = &o->h[u->handle];
      double done = oh->t_post > t ? oh->t_post : t;
      *done_of(R, o, u->handle) = done;
      *done_of(R, rs, hd) = done;
      if (is_send) oh->rx = sim_msg_encode(h->tag, h->bytes);
      else h->rx = sim_msg_encode(oh->tag, oh->bytes);
      memmove(u, u + 1, sizeof *u * (size_t)(R->num - k - 1)); /* keep the order of the rest */
      R->num--;
      return 0;
    }
  }
  if (R->num == R->cap) {
    int nc = R->cap ? 2 * R->cap : 256;
    unmatched *p = realloc(R->um, sizeof *p * (size_t)nc);
    if (!p) {
      sim_error(&R->c, "out of memory");
      return -1;
    }
    R->um = p;
    R->cap = nc;
  }
  R->um[R->num++] = (unmatched){src, dst, is_send, rs->slot, hd};
  return 0;
}

static int w_send(void *eng, rank_state *rs, int hd, int ps) { return w_p2p(eng, rs, hd, ps, 1); }
static int w_recv(void *eng, rank_state *rs, int hd, int ps) { return w_p2p(eng, rs, hd, ps, 0); }

/*
 * The least time a COLL holds each member (coll.c, coll_main): the profile's per-call base cost,
 * then, where the algorithm sleeps out a modelled time, that time: a ring run as flows never ends
 * before its lockstep alpha-beta time (nor does an analytic one), and a tree timed whole (or
 * analytic) takes bs_tree_allreduce_time. What runs as steps of flows, and all-to-alls, get the
 * base cost alone (their times come from SimGrid's sharing). The algorithm and the links are
 * decided as coll.c decides them, from the generated platform's route model (which coll.c checks
 * against SimGrid's routes); on other platforms, and with what-ifs that reroute or slow links,
 * the base cost alone. A group of one runs nothing.
 */
static double coll_floor(replay *R, const bs_op *op) {
  const bs_group *g = &op->u.coll.group;
  int n = g->size, kind = (int)op->u.coll.kind;
  int64_t bytes = op->u.coll.bytes;
  if (n <= 1) return 0;
  double base = R->prof->coll_base_s > 0 ? R->prof->coll_base_s : 0;
  if (!R->routes || kind < 0 || kind >= BS_COLL_COUNT) return base;
  for (int i = 0; i < R->nfloors; i++) {
    const cfloor *f = &R->floors[i];
    if (f->kind == kind && f->bytes == bytes && f->g.first == g->first && f->g.stride == g->stride && f->g.size == n)
      return f->t;
  }
  int *node = malloc(sizeof *node * (size_t)n), multi = 0;
  if (!node) return base;
  for (int i = 0; i < n; i++) {
    node[i] = sim_member(g, i) / R->rpn;
    multi |= node[i] != node[0];
  }
  bs_coll_links l;
  double t = 0;
  if (!sim_group_links_model(R->ps, g, node, &l)) {
    int steps = kind == BS_COLL_ALLREDUCE ? 2 * (n - 1) : kind == BS_COLL_ALLTOALL ? -1 : n - 1;
    int64_t chunk = kind == BS_COLL_ALLGATHER ? bytes : bytes / n;
    if (chunk < 1) chunk = 1;
    bs_coll_model model = R->model == BS_COLL_MODEL_AUTO ? (multi ? BS_COLL_FLOW : BS_COLL_STEPS) : R->model;
    int C = steps < 0 ? 1 : sim_ring_channels(1, R->rpn, g);
    bs_coll_algo algo = kind == BS_COLL_ALLREDUCE ? R->cfg->cluster.coll_algo : BS_COLL_ALGO_RING;
    double t_tree = -1;
    if (algo == BS_COLL_ALGO_AUTO) algo = sim_auto_algo(n, node, multi, bytes, &l, C, &t_tree);
    if (algo == BS_COLL_ALGO_TREE) {
      if (model == BS_COLL_ANALYTIC || (model != BS_COLL_STEPS && sim_whole_tree(R->cfg->par.gpus, g)))
        t = t_tree >= 0 ? t_tree : bs_tree_allreduce_time(n, node, bytes, &l);
    } else if (steps >= 0 && model != BS_COLL_STEPS)
      t = sim_ring_lockstep_time(&l, multi, steps, chunk / C + (chunk % C != 0)); /* the first ring's part */
  }
  free(node);
  t = base + (t > 0 ? t : 0);
  R->floors[R->nfloors % WALK_FLOORS] = (cfloor){*g, kind, bytes, t};
  if (R->nfloors < WALK_FLOORS) R->nfloors++;
  return t;
}

/* A COLL completes its floor after its post: a relaxation (the members' arrivals are not synced). */
static int w_coll(void *eng, rank_state *rs, const bs_op *op) {
  replay *R = eng;
  double t = R->t[rs->slot];
  *done_of(R, rs, op->handle) = t + coll_floor(R, op);
  return 0;
}

static int w_compute(void *eng, rank_state *rs, double d) {
  replay *R = eng;
  R->t[rs->slot] += d;
  R->compute[rs->slot] += d;
  return 0;
}

/* A WAIT: done when every handle's completion is known, at the latest of them. */
static int w_wait(void *eng, rank_state *rs, int *last) {
  replay *R = eng;
  double t = R->t[rs->slot];
  for (int k = 0; k < rs->nwait; k++) {
    double d = *done_of(R, rs, rs->wait[k]);
    if (d < 0) {
      R->in_wait[rs->slot] = 1;
      return SIM_SUSPENDED;
    }
    if (d > t) t = d;
  }
  R->t[rs->slot] = t;
  R->in_wait[rs->slot] = 0;
  *last = -1; /* no route classes without SimGrid: explain is not the walk's */
  return 0;
}

static const sim_transport walk_transport = {w_now, w_send, w_recv, w_coll, w_compute, w_wait};

/* Runs rank rs until it blocks or ends: 1 when it did something, 0 when not, -1 on error. */
static int replay_rank(replay *R, rank_state *rs) {
  if (!R->in_wait[rs->slot]) return sim_rank_run(rs, &walk_transport, R) ? -1 : 1;
  int last;
  if (w_wait(R, rs, &last) == SIM_SUSPENDED) return 0;
  return sim_rank_resume(rs, &walk_transport, R, last) ? -1 : 1;
}

/*
 * The ranks to replay: all, or every combination of the first and the last coordinate of tp, cp
 * and dp with every pipeline stage (a 1F1B step's bubble runs through every stage), or the cp-last
 * of those alone with every stage (BS_WALK_STAGES). Rank order.
 */
static int replay_ranks(const bs_mesh *mesh, int corners, int G, int *ranks) {
  if (corners == BS_WALK_ALL) {
    for (int r = 0; r < G; r++) ranks[r] = r;
    return G;
  }
  int n = 0, att = mesh->att_dim; /* the last rank of the ring attention runs over */
  int stages_mask = att >= 0 && att < 3 && mesh->size[att] > 1 ? 1 << att : 0;
  for (int mask = 0; mask < 1 << 3; mask++) {
    if (corners == BS_WALK_STAGES && mask != stages_mask) continue;
    int r = 0, dup = 0;
    for (int d = 0; d < 3; d++) { /* tp, cp, dp */
      int last = mask >> d & 1;
      if (last && mesh->size[d] == 1) dup = 1;
      r += (last ? mesh->size[d] - 1 : 0) * mesh->stride[d];
    }
    if (dup) continue;
    for (int s = 0; s < mesh->size[BS_DIM_PP]; s++) ranks[n++] = r + s * mesh->stride[BS_DIM_PP];
  }
  for (int i = 1; i < n; i++) /* rank order, as the simulator scans its ranks */
    for (int j = i; j > 0 && ranks[j - 1] > ranks[j]; j--) {
      int t = ranks[j];
      ranks[j] = ranks[j - 1];
      ranks[j - 1] = t;
    }
  return n;
}

/*
 * One depth: the ranks' programs replayed together with every message taking no time (a send and
 * its receive complete when both are posted, a collective its floor after its post, a rank
 * outside the replay is always ready): the highest peak (the first such rank's classes), the
 * busiest rank's compute, and the latest end. Every dropped constraint and every time taken at
 * most as long as the simulation takes it only makes a rank end earlier than in the simulation,
 * so the latest end is a lower bound of the step.
 */
static int w_next(void *it, bs_op *op) { return bs_plan_next(it, op); }
static const char *w_iter_error(void *it) { return bs_plan_iter_errmsg(it); }

/* The point the interpreter runs the replayed ranks in: every rank's state, the replayed ones'
 * iterators; 0 or -1 when out of memory. */
static int replay_setup(replay *R, bs_plan *plan, int G, int corners) {
  R->cfg_run = *R->cfg;
  R->cfg_run.cluster.straggler_factor = 0;
  R->src = (bs_sim_source){.ctx = plan, .ranks = G, .next = w_next, .iter_error = w_iter_error};
  sim_ctx *c = &R->c;
  c->cfg = &R->cfg_run;
  c->prof = R->prof;
  c->src = &R->src;
  c->G = c->A = G;
  c->rpn = R->rpn;
  c->buf_ids = bs_plan_buf_ids(plan);
  c->rs = malloc(sizeof *c->rs * (size_t)G);
  R->t = calloc((size_t)G, sizeof *R->t);
  R->compute = calloc((size_t)G, sizeof *R->compute);
  R->done = malloc(sizeof *R->done * (size_t)G * MAX_HANDLES);
  R->in_wait = calloc((size_t)G, 1);
  R->ranks = malloc(sizeof *R->ranks * (size_t)G);
  R->idx_of = malloc(sizeof *R->idx_of * (size_t)G);
  if (!c->rs || !R->t || !R->compute || !R->done || !R->in_wait || !R->ranks || !R->idx_of) return -1;
  for (int r = 0; r < G; r++) R->idx_of[r] = -1;
  R->n = replay_ranks(bs_plan_mesh(plan), corners, G, R->ranks);
  for (int i = 0; i < R->n; i++) R->idx_of[R->ranks[i]] = i;
  for (int r = 0; r < G; r++) {
    /* a rank outside the replay is only ever a peer: the interpreter reads its scalars and its side
     * of the pairs (rank_state up to h), so only those are cleared (a whole state is 83 KB) */
    rank_state *rs = &c->rs[r];
    memset(rs, 0, R->idx_of[r] >= 0 ? sizeof *rs : offsetof(rank_state, h));
    rs->ctx = c;
    rs->slot = rs->rank = r;
    rs->node = r / R->rpn;
  }
  for (int i = 0; i < R->n; i++)
    if (!(c->rs[R->ranks[i]].it = bs_plan_iter_new(plan, R->ranks[i]))) return -1;
  return 0;
}

static void replay_free(replay *R) {
  for (int i = 0; R->c.rs && i < R->n; i++) {
    rank_state *rs = &R->c.rs[R->ranks[i]];
    if (rs->it) bs_plan_iter_free(rs->it);
    free(rs->coll_arr);
    free(rs->buf);
  }
  free(R->c.rs);
  free(R->t);
  free(R->compute);
  free(R->done);
  free(R->in_wait);
  free(R->ranks);
  free(R->idx_of);
  free(R->um);
}

static int walk_plan(const bs_config *cfg, const bs_platform_spec *ps, const bs_sim_opts *opts, const bs_profile *prof,
                     int corners, bs_walk *out, char *err, size_t errlen) {
  bs_plan *plan = NULL;
  bs_coll_model model = opts->coll_model;
  int rpn = ps->ranks_per_node;
  if (bs_plan_create(cfg, rpn, &plan, err, errlen)) return -2;
  bs_plan_set_op_cache(plan, !opts->no_op_cache);
  int G = bs_plan_ranks(plan), rc = 0;
  replay *R = calloc(1, sizeof *R);
  if (R) {
    R->cfg = cfg;
    R->prof = prof;
    R->ps = ps;
    R->model = model;
    R->rpn = rpn;
    R->routes = ps->generated && !ps->shared_host && bs_topo_has_rails(ps->topo.name) &&
                cfg->cluster.degrade_factor == 0 && cfg->cluster.failed_nics == 0;
  }
  if (!R || replay_setup(R, plan, G, corners)) {
    snprintf(err, errlen, "out of memory");
    rc = -1;
  }
  while (!rc) {
    int alive = 0, moved = 0;
    for (int i = 0; i < R->n && !rc; i++) {
      rank_state *rs = &R->c.rs[R->ranks[i]];
      if (rs->finished) continue;
      alive++;
      int x = replay_rank(R, rs);
      if (x < 0) {
        snprintf(err, errlen, "%s", R->c.cause[0] ? R->c.cause : R->c.error); /* a profile's reason as it is */
        rc = -1;
      }
      moved |= x > 0;
    }
    if (!alive) break;
    if (!rc && !moved) {
      snprintf(err, errlen, "the replay of the plan without message times deadlocked");
      rc = -1;
    }
  }
  memset(out->breakdown, 0, sizeof out->breakdown);
  out->peak_bytes = 0;
  out->compute_s = out->replay_s = 0;
  for (int i = 0; !rc && i < R->n; i++) {
    int r = R->ranks[i];
    const rank_state *rs = &R->c.rs[r];
    if (rs->mem_peak > out->peak_bytes || i == 0) {
      out->peak_bytes = rs->mem_peak;
      memcpy(out->breakdown, rs->cls_at_peak, sizeof out->breakdown);
    }
    if (R->compute[r] > out->compute_s) out->compute_s = R->compute[r];
    if (R->t[r] > out->replay_s) out->replay_s = R->t[r];
  }
  if (R) replay_free(R);
  free(R);
  bs_plan_free(plan);
  return rc;
}

/* a + k (b - a), as layers.c extends a byte count; -1 past int64. */
static int exti(int64_t a, int64_t b, int64_t k, int64_t *x) {
  int64_t d, kd;
  return __builtin_sub_overflow(b, a, &d) || __builtin_mul_overflow(k, d, &kd) || __builtin_add_overflow(a, kd, x) ? -1
                                                                                                                   : 0;
}

/*
 * The microbatch shortcut of the first pass (BS_WALK_STAGES, one pipeline stage: one rank replayed,
 * its peers always ready): the rank's program is its microbatches one after another, then the
 * step's end (gradient reduction, optimizer), and with every peer ready each op takes the same time
 * wherever it falls, so every middle microbatch adds the same COMPUTE and the same replayed time.
 * Walked with 2 and 3 microbatches, M of them extend as 2 + (M - 2) x (3 - 2), exact for that rank;
 * the peak is the 3-microbatch walk's (each middle microbatch frees what it takes, so more of them
 * repeat the same peak): a lower bound of the corners' (tests/search: search.stages_shortcut checks
 * both against the walk of every microbatch). 1 when it applied (out set, or rc in *rc), 0 when not.
 */
static int microbatch_shortcut(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof, bs_walk *out,
                               int *rc, char *err, size_t errlen) {
  bs_mesh m;
  if (bs_mesh_of(cfg, &m, err, errlen) || m.size[BS_DIM_PP] > 1 || m.microbatches < 4) return 0;
  bs_plan *plan = NULL; /* legality is the point's own, not the shorter steps' */
  bs_platform_spec ps;
  if (bs_platform_resolve(cfg, opts, prof, &ps, err, errlen) ||
      bs_plan_create(cfg, ps.ranks_per_node, &plan, err, errlen)) {
    *rc = -2;
    return 1;
  }
  bs_plan_free(plan);
  bs_config c2 = *cfg, c3 = *cfg;
  c2.par.micro_batch = c3.par.micro_batch = (int)m.micro_batch;
  c2.work.batch = (int64_t)m.size[BS_DIM_DP] * m.micro_batch * 2;
  c3.work.batch = (int64_t)m.size[BS_DIM_DP] * m.micro_batch * 3;
  bs_walk a, b;
  if ((*rc = bs_sim_walk(&c2, opts, prof, BS_WALK_STAGES, &a, err, errlen)) ||
      (*rc = bs_sim_walk(&c3, opts, prof, BS_WALK_STAGES, &b, err, errlen)))
    return 1;
  double k = (double)(m.microbatches - 2);
  *out = b;
  out->compute_s = a.compute_s + k * (b.compute_s - a.compute_s);
  out->replay_s = a.replay_s + k * (b.replay_s - a.replay_s);
  return 1;
}

int bs_sim_walk(const bs_config *cfg, const bs_sim_opts *opts_in, const bs_profile *prof, int corners, bs_walk *out,
                char *err, size_t errlen) {
  bs_sim_opts opts;
  if (opts_in) opts = *opts_in;
  else bs_sim_opts_default(&opts);
  memset(out, 0, sizeof *out);
  int mrc = 0;
  if (corners == BS_WALK_STAGES && microbatch_shortcut(cfg, &opts, prof, out, &mrc, err, errlen)) return mrc;
  if (corners == BS_WALK_STAGES_EVERY) corners = BS_WALK_STAGES;
  bs_platform_spec ps;
  if (bs_platform_resolve(cfg, &opts, prof, &ps, err, errlen)) return -2;
  out->ranks_per_node = ps.ranks_per_node;
  out->capacity_bytes = bs_profile_capacity_bytes(prof);
  int rc;
  if (!bs_sim_layers_apply(cfg, &opts)) {
    rc = walk_plan(cfg, &ps, &opts, prof, corners, out, err, errlen);
    out->oom = bs_mem_over(cfg, out->peak_bytes, out->capacity_bytes);
    return rc;
  }
  /* The layer shortcut: 3 and 4 layers, extended to L as layers.c extends the simulated figures. */
  bs_config ca = *cfg, cb = *cfg;
  ca.model.layers = 3;
  cb.model.layers = 4;
  bs_walk a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  if ((rc = walk_plan(&ca, &ps, &opts, prof, corners, &a, err, errlen)) ||
      (rc = walk_plan(&cb, &ps, &opts, prof, corners, &b, err, errlen)))
    return rc;
  int64_t k = cfg->model.layers - 3;
  if (exti(a.peak_bytes, b.peak_bytes, k, &out->peak_bytes)) {
    snprintf(err, errlen, "memory.peak_bytes: the bytes of %lld layers pass 2^63 - 1", (long long)cfg->model.layers);
    return -1;
  }
  for (int c = 0; c < BS_MEM_CLASS_COUNT; c++)
    if (exti(a.breakdown[c], b.breakdown[c], k, &out->breakdown[c])) {
      snprintf(err, errlen, "memory.breakdown: the bytes of %lld layers pass 2^63 - 1", (long long)cfg->model.layers);
      return -1;
    }
  out->compute_s = a.compute_s + (double)k * (b.compute_s - a.compute_s);
  out->replay_s = a.replay_s + (double)k * (b.replay_s - a.replay_s);
  out->oom = out->capacity_bytes > 0 && bs_mem_over(cfg, out->peak_bytes, out->capacity_bytes);
  return 0;
}
