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
#include "sim/extend.h"

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

/*
 * The early stop (BS_WALK_STOP_OOM): a rank's held bytes at any point of its program are at most
 * its peak, so once a replayed rank holds h bytes, the walk's peak is at least h. The point's peak
 * is a + k (peak - a) of this walk's (a = 0, k = 1 for a walk of the point itself; for the 4-layer
 * walk of the layer shortcut, a the 3-layer walk's whole peak and k = L - 3 >= 1: increasing in the
 * 4-layer peak), and bs_mem_over is increasing in the peak (the reserve grows with it), so once
 * a + k (h - a) is over the capacity the point is out of memory whatever the rest of the walk does:
 * the walk stops there. need_cap: only with a capacity (the layer shortcut's oom reads it so).
 * An extension that passes 2^63 - 1 never stops it (the whole walk says why).
 */
typedef struct {
  const bs_config *cfg; /* the point's (its reserve) */
  int64_t a, k, cap;
  int need_cap;
} walk_stop;

static int stop_proven(const walk_stop *st, int64_t h) {
  int64_t x;
  if (st->need_cap && st->cap <= 0) return 0;
  return !sim_extend_count(st->a, h, st->k, &x) && bs_mem_over(st->cfg, x, st->cap);
}

/* The pipeline sends a rank of the interleaved schedule keeps in flight, each holding its buffer
 * until it is joined (PP_SENDS, plans/workload_impl.h): its memory grows until that many are
 * posted (pipeline_shortcut counts them). */
#define PIPE_SENDS 32

struct replay;

/* A replayed rank's source of ops (rank_state.it): its plan iterator, and the replay whose peers'
 * states it prepares (w_next). */
typedef struct {
  bs_plan_iter *it;
  struct replay *R;
  uint8_t *ready; /* R's (below), and its ranks: read on every message and collective op */
  int G;
} walk_it;

/* The zero-time transport: every rank of the plan has the interpreter's state (slot = rank, no
 * fold, no SimGrid), the replayed ones an iterator and a clock of their own. */
typedef struct replay {
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
  int *ranks, n;  /* the replayed ranks, in rank order */
  int *idx_of;    /* real rank -> index in ranks, or -1 */
  walk_it *its;   /* the replayed ranks' sources, by index in ranks */
  uint8_t *ready; /* per rank: 1 its state prepared (replayed, or a peer met), 2 its collective count
                     alone (a member of a collective met): w_next */
  /* the pipeline shortcut's relaxation (pipeline_shortcut): a message between two pipeline stages
   * of a microbatch in [relax_lo, relax_hi) takes no time on either side, as if its peer were
   * outside the replay; pp_stride, pp_size: the mesh's pipeline dimension */
  int64_t relax_lo, relax_hi;
  int pp_stride, pp_size;
  int64_t *sends; /* under the relaxation, per rank: [2 r] its sends to other stages, [2 r + 1] those posted
                     before its first message of microbatch relax_hi (the tail's first: -1 before it) */
  unmatched *um;
  int num, cap;
  const walk_stop *stop; /* the early stop, or NULL */
  int64_t stop_seen;     /* the highest peak of a replayed rank checked so far */
  int stopped;           /* the stop proved the point out of memory: the replay ends */
} replay;

static double *done_of(replay *R, const rank_state *rs, int hd) {
  return &R->done[(size_t)rs->slot * MAX_HANDLES + (size_t)hd];
}

static double w_now(void *eng, const rank_state *rs) { return ((replay *)eng)->t[rs->slot]; }

/* The stage of rank r (the mesh's pipeline coordinate). */
static int stage_of(const replay *R, int r) { return r / R->pp_stride % R->pp_size; }

/* Under the pipeline shortcut's relaxation (relax_lo < relax_hi, pipeline_shortcut): a message
 * between stages of a microbatch in [relax_lo, relax_hi) takes no time on either side, as a peer
 * outside the replay; every other message between stages completes at its send's post for the
 * sender (free: the sender never waits for its receiver) and when both have posted for the receiver.
 * Both sides see the same stages and the same step (the plan's step of a pipeline message is its
 * microbatch, workload_pipe.c). */
static int relaxed(const replay *R, int a, int b, int64_t mb) {
  return mb >= R->relax_lo && mb < R->relax_hi && stage_of(R, a) != stage_of(R, b);
}

/* A send (or receive) of rs to (from) the actor ps: matched in order with the peer's, both complete
 * when the later side posts (a receive's payload is its send's tag and size), a free send (above)
 * when it posts. */
static int w_p2p(replay *R, rank_state *rs, int hd, int ps, int is_send) {
  handle *h = &rs->h[hd];
  double t = R->t[rs->slot];
  *done_of(R, rs, hd) = -1;
  if (R->idx_of[ps] < 0 || relaxed(R, rs->slot, ps, h->step)) {
    /* a rank outside the replay, or a message the pipeline shortcut relaxes: taken as ready (a
     * relaxation: still a lower bound) */
    if (R->sends && stage_of(R, rs->slot) != stage_of(R, ps)) R->sends[2 * (size_t)rs->slot] += is_send;
    *done_of(R, rs, hd) = t;
    h->rx = is_send ? NULL : sim_msg_encode(h->tag, h->bytes);
    return 0;
  }
  int src = is_send ? rs->slot : ps, dst = is_send ? ps : rs->slot;
  int free_send = R->relax_lo < R->relax_hi && stage_of(R, src) != stage_of(R, dst);
  if (free_send && R->sends) {
    int64_t *n = &R->sends[2 * (size_t)rs->slot];
    if (h->step >= R->relax_hi && n[1] < 0) n[1] = n[0];
    n[0] += is_send;
  }
  if (is_send && free_send) *done_of(R, rs, hd) = t;
  for (int k = 0; k < R->num; k++) {
    unmatched *u = &R->um[k];
    if (u->src == src && u->dst == dst && u->is_send != is_send) {
      rank_state *o = &R->c.rs[u->owner];
      handle *oh = &o->h[u->handle];
      double done = oh->t_post > t ? oh->t_post : t;
      if (is_send || !free_send) *done_of(R, o, u->handle) = done;
      if (!is_send || !free_send) *done_of(R, rs, hd) = done;
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

/* Every COMPUTE checks the early stop (walk_stop) on a rank's new peak: the rank is left suspended
 * and the replay ends (walk_plan). */
static int w_compute(void *eng, rank_state *rs, double d) {
  replay *R = eng;
  if (R->stop && rs->mem_peak > R->stop_seen) {
    R->stop_seen = rs->mem_peak;
    if (stop_proven(R->stop, rs->mem_peak)) {
      R->stopped = 1;
      return SIM_SUSPENDED;
    }
  }
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

/* A rank outside the replay is only ever a peer: the interpreter reads its collective count when a
 * replayed rank waits on a collective it is a member of (coll_seq, coll_last_arrival) and, when a
 * replayed rank posts a message to or from it, its side of the pair (rank_state up to h:
 * sim_note_match). Each is cleared when the first such op is read (w_next), not for every rank up
 * front: a walk meets a handful of peers, and clearing all of them cost as much as the rest of a
 * short walk (1.4 MB per walk of 256 ranks, 13 MB of 2304). */
static void prepare_peer(replay *R, int r) {
  rank_state *rs = &R->c.rs[r];
  memset(rs, 0, offsetof(rank_state, h));
  rs->ctx = &R->c;
  rs->slot = rs->rank = r;
  rs->node = r / R->rpn;
  R->ready[r] = 1;
}

static int w_next(void *x, bs_op *op) {
  walk_it *w = x;
  if (!bs_plan_next(w->it, op)) return 0;
  if (op->kind == BS_OP_SEND || op->kind == BS_OP_RECV) {
    int p = op->u.p2p.peer; /* one out of range is the interpreter's error (sim_op_post_p2p) */
    if (p >= 0 && p < w->G && w->ready[p] != 1) prepare_peer(w->R, p);
  } else if (op->kind == BS_OP_COLL) {
    const bs_group *g = &op->u.coll.group;
    for (int i = 0; i < g->size; i++) {
      int m = sim_member(g, i);
      if (m >= 0 && m < w->G && !w->ready[m]) { /* out of range: the interpreter's error (check_coll) */
        w->R->c.rs[m].coll_seq = 0;
        w->ready[m] = 2;
      }
    }
  }
  return 1;
}
static const char *w_iter_error(void *x) { return bs_plan_iter_errmsg(((walk_it *)x)->it); }

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
  R->ready = calloc((size_t)G, 1);
  if (!c->rs || !R->t || !R->compute || !R->done || !R->in_wait || !R->ranks || !R->idx_of || !R->ready) return -1;
  for (int r = 0; r < G; r++) R->idx_of[r] = -1;
  const bs_mesh *mesh = bs_plan_mesh(plan);
  R->n = replay_ranks(mesh, corners, G, R->ranks);
  R->pp_stride = mesh->stride[BS_DIM_PP] > 0 ? mesh->stride[BS_DIM_PP] : 1;
  R->pp_size = mesh->size[BS_DIM_PP] > 0 ? mesh->size[BS_DIM_PP] : 1;
  for (int i = 0; i < R->n; i++) R->idx_of[R->ranks[i]] = i;
  R->its = calloc((size_t)R->n, sizeof *R->its);
  if (!R->its) return -1;
  for (int i = 0; i < R->n; i++) {
    int r = R->ranks[i];
    rank_state *rs = &c->rs[r];
    memset(rs, 0, sizeof *rs);
    rs->ctx = c;
    rs->slot = rs->rank = r;
    rs->node = r / R->rpn;
    R->ready[r] = 1;
    R->its[i] = (walk_it){NULL, R, R->ready, G};
    rs->it = &R->its[i];
  }
  for (int i = 0; i < R->n; i++)
    if (!(R->its[i].it = bs_plan_iter_new(plan, R->ranks[i]))) return -1;
  return 0;
}

static void replay_free(replay *R) {
  for (int i = 0; R->c.rs && R->its && i < R->n; i++) {
    rank_state *rs = &R->c.rs[R->ranks[i]];
    if (R->its[i].it) bs_plan_iter_free(R->its[i].it);
    free(rs->coll_arr);
    free(rs->buf);
  }
  free(R->its);
  free(R->ready);
  free(R->c.rs);
  free(R->t);
  free(R->compute);
  free(R->done);
  free(R->in_wait);
  free(R->ranks);
  free(R->idx_of);
  free(R->um);
  free(R->sends);
}

/* relax[0 .. 2): the microbatches whose messages between stages take no time (pipeline_shortcut;
 * {0, 0}: none). stop: the early stop (NULL: none); when it ends the replay, out->peak_partial is set,
 * its peak and classes those held then, compute_s and replay_s 0. */
static int walk_plan(const bs_config *cfg, const bs_platform_spec *ps, const bs_sim_opts *opts, const bs_profile *prof,
                     int corners, const int64_t relax[2], int64_t *sends, const walk_stop *stop, bs_walk *out,
                     char *err, size_t errlen) {
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
    R->relax_lo = relax[0];
    R->relax_hi = relax[1];
    R->stop = stop;
    R->routes = ps->generated && !ps->shared_host && bs_topo_has_rails(ps->topo.name) &&
                cfg->cluster.degrade_factor == 0 && cfg->cluster.failed_nics == 0;
  }
  if (R && sends) {
    R->sends = malloc(sizeof *R->sends * 2 * (size_t)G);
    for (int r = 0; R->sends && r < G; r++) {
      R->sends[2 * r] = 0;
      R->sends[2 * r + 1] = -1;
    }
  }
  if (!R || (sends && !R->sends) || replay_setup(R, plan, G, corners)) {
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
      if (R->stopped) break;
    }
    if (!alive || R->stopped) break;
    if (!rc && !moved) {
      snprintf(err, errlen, "the replay of the plan without message times deadlocked");
      rc = -1;
    }
  }
  memset(out->breakdown, 0, sizeof out->breakdown);
  out->peak_bytes = 0;
  out->compute_s = out->replay_s = 0;
  out->peak_partial = !rc && R->stopped;
  for (int i = 0; !rc && i < R->n; i++) {
    int r = R->ranks[i];
    const rank_state *rs = &R->c.rs[r];
    if (rs->mem_peak > out->peak_bytes || i == 0) {
      out->peak_bytes = rs->mem_peak;
      memcpy(out->breakdown, rs->cls_at_peak, sizeof out->breakdown);
    }
    if (out->peak_partial) continue;
    if (R->compute[r] > out->compute_s) out->compute_s = R->compute[r];
    if (R->t[r] > out->replay_s) out->replay_s = R->t[r];
    if (sends) {
      sends[2 * i] = R->sends[2 * r];
      sends[2 * i + 1] = R->sends[2 * r + 1] < 0 ? R->sends[2 * r] : R->sends[2 * r + 1];
    }
  }
  if (out->peak_partial) memset(out->breakdown, 0, sizeof out->breakdown);
  if (R) replay_free(R);
  free(R);
  bs_plan_free(plan);
  return rc;
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
 * With the early stop, the 3-microbatch walk, whose peak is the point's, goes first and stops early:
 * an out-of-memory point is settled without the 2-microbatch walk (whose error, where both fail,
 * is still the one returned).
 */
static int microbatch_shortcut(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof, int stop,
                               bs_walk *out, int *rc, char *err, size_t errlen) {
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
  if (stop) {
    char e3[512] = "";
    int r3 = bs_sim_walk(&c3, opts, prof, BS_WALK_STAGES | BS_WALK_STOP_OOM, &b, e3, sizeof e3);
    if (!r3 && b.peak_partial) {
      *out = b;
      *rc = 0;
      return 1;
    }
    if ((*rc = bs_sim_walk(&c2, opts, prof, BS_WALK_STAGES, &a, err, errlen))) return 1;
    if ((*rc = r3)) {
      snprintf(err, errlen, "%s", e3);
      return 1;
    }
  } else if ((*rc = bs_sim_walk(&c2, opts, prof, BS_WALK_STAGES, &a, err, errlen)) ||
             (*rc = bs_sim_walk(&c3, opts, prof, BS_WALK_STAGES, &b, err, errlen)))
    return 1;
  double k = (double)(m.microbatches - 2);
  *out = b;
  out->compute_s = a.compute_s + k * (b.compute_s - a.compute_s);
  out->replay_s = a.replay_s + k * (b.replay_s - a.replay_s);
  return 1;
}

/*
 * The pipeline shortcut (parallel.pp > 1, the first pass and the corners): the step's M microbatches
 * are walked as Ma and Mb = Ma + g of them and extended: 1F1B pp + 3 and pp + 4 (g = 1), the
 * interleaved schedule 3 pp and 4 pp, or more groups of pp where its ring of sends needs them (g =
 * pp: its microbatches per replica are a multiple of pp, and its task order repeats every group of
 * pp microbatches); when Ma + Mb < M. Exact for the memory, a lower bound for the time:
 *
 * Memory. A rank's peak depends only on the order of its ALLOCs and FREEs. Stage s of 1F1B runs
 * w = pp - s - 1 forwards, then pairs (forward of microbatch i + w, backward of i), then w
 * backwards (workload_pipe.c). Microbatches differ only in the first (an FP8 weight cast) and the
 * last (the gradient reduction, MoE's expert gradients): every pair between them allocates and
 * frees the same bytes (the forward of i + w holds what the backward of i frees; its sends hold at
 * most two buffers from the second on, workload_pipe.c), so each starts with the same bytes held, and one more of them repeats the same trajectory (interleaved: the same
 * for each group of pp microbatches, whose pairs run the chunks in the same order, once its ring of
 * PIPE_SENDS sends in flight is full: the walks count each rank's sends to other stages, and Ma
 * grows by groups until every rank has posted PIPE_SENDS of them a whole period, the sends of
 * Mb's walk less Ma's, before its tail below). Past Ma the peak and
 * its breakdown are therefore those of Mb; the two walks must agree (else the full walk runs).
 *
 * Time. Both walks relax the messages between stages (relaxed, w_p2p): those of the middle
 * microbatches [1, M - 1) take no time on either side, as a peer outside the replay; those of the
 * first and the last complete for the receiver when both sides have posted and for the sender at its
 * post (the sender never waits for its receiver). Dropping constraints only lets ranks end earlier,
 * so the relaxed walk's end T'(M) is at most T(M), the walk's of every microbatch. T' is convex in M
 * (M = Ma + j g). Each stage's program is a head (up to its last op of microbatch 0, relaxed
 * forwards of later ones among them, as many for every M), then n_s(M) relaxed pairs (a forward and
 * a backward of middle microbatches), then a tail (from its first op of microbatch M - 1 to the
 * step's end). 1F1B: n_s = M - 2 - w. Interleaved (v chunks; chunk-microbatch k is microbatch
 * k / (p v) p + k % p, its task order repeats every p v of them, p microbatches): the head ends at
 * the backward k = (v - 1) p, the tail starts at the forward k = (M / p - 1) p v + p - 1, so n_s =
 * M v - 2 p v + 2 p - 2 - W_s, W_s = 2 (p - s - 1) + (v - 1) p the stage's warm-up tasks. The head
 * and the tail are the same ops for every M. The only edges between stages
 * left run from a send's post to its receive's completion of a head's or a tail's microbatch, from
 * head to head or tail to tail, so a path of the DAG whose longest path the replay takes runs
 * through heads, along at most one stage's relaxed pairs (from the first to the last: they are
 * entered and left along that stage's program), then through tails. Relaxed pairs have no peer across
 * stages and repeat the same ops (each COMPUTE its duration, each collective its floor after its
 * post, each WAIT on what the same or the previous pair posted; the corners' ring messages inside a
 * stage keep their rendezvous, between ranks that run the same pairs), so from the second on each
 * pair adds the same time as the pair of its place in the pattern a period earlier, and g more
 * microbatches lengthen a stage's run of pairs by one period (1 pair in 1F1B, p v interleaved), by
 * that stage's constant: every path's length is affine in M, and T', their maximum, is convex (n_s >= 2 on every
 * stage: from Ma on). The secant through (Ma, T'(Ma)), (Mb, T'(Mb)) extended
 * beyond Mb is then at most T'(M) <= T(M): the bound stays a lower bound. The busiest rank's
 * compute is a maximum of per-rank sums affine in M: its secant is at most it (equal when the
 * busiest rank is the same). search.pipeline_shortcut checks the peak equal and the bounds at most
 * the walk of every microbatch on points of 2 to 8 stages, and prints how close they come.
 * 1 when it applied (out set, or rc in *rc), 0 when not (the full walk runs).
 *
 * The early stop (stop): where one of its walks stops (its peak past the capacity), *stopped is set
 * and it does not apply; the caller walks every microbatch with the early stop. If that stops too,
 * the step's peak is past the capacity, and so is the shortcut's where it applies: it is the peak of
 * both walks (the check above), and one of them, with 1F1B's single pair of walks, is the walk that
 * stopped (interleaved points may add periods to Ma: there, the shortcut's peak is that of the step,
 * as argued above and tested). If it does not stop, the step fits and the caller runs this
 * without the early stop: the result is the one without it, whatever the shortcut decides.
 */
static int pipeline_shortcut(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof, int corners,
                             int stop, int *stopped, bs_walk *out, int *rc, char *err, size_t errlen) {
  bs_mesh m;
  if (cfg->work.scope != BS_SCOPE_MODEL || bs_sim_layers_apply(cfg, opts) || bs_mesh_of(cfg, &m, err, errlen) ||
      m.size[BS_DIM_PP] <= 1)
    return 0;
  int64_t p = m.size[BS_DIM_PP], M = m.microbatches, g = 1, Ma = p + 3; /* 1F1B: n_0 = M - 2 - (p - 1) */
  int ring = cfg->par.pp_schedule == BS_PP_INTERLEAVED && cfg->par.pp_chunks > 1;
  if (ring) {
    g = p;
    Ma = 3 * p; /* n_0 = M v - 3 p v + p (stage 0's W_0 = 2 (p - 1) + (v - 1) p): p >= 2 */
    /* a first guess of where stage 0's ring is full a period before its tail (its backwards of
     * chunk 0 send nothing: 2 v - 1 sends in 2 v tasks); the walks count them (below) */
    int64_t v = cfg->par.pp_chunks, W0 = 2 * (p - 1) + (v - 1) * p;
    while (Ma < M && (2 * ((Ma / p - 1) * p * v + p - 1) - W0) * (2 * v - 1) / (2 * v) - (2 * v - 1) * p < PIPE_SENDS)
      Ma += p;
  }
  if (2 * Ma + g >= M || M % g != 0) return 0; /* not worth it */
  bs_plan *plan = NULL;                        /* legality is the point's own, not the shorter steps' */
  bs_platform_spec ps;
  if (bs_platform_resolve(cfg, opts, prof, &ps, err, errlen) ||
      bs_plan_create(cfg, ps.ranks_per_node, &plan, err, errlen)) {
    *rc = -2;
    return 1;
  }
  int G = bs_plan_ranks(plan);
  bs_plan_free(plan);
  /* interleaved: each replayed rank's sends to other stages in both walks ([0, 2 G): Ma's, then Mb's) */
  int64_t *sends = ring ? malloc(sizeof *sends * 4 * (size_t)G) : NULL;
  if (ring && !sends) return 0;
  bs_walk w[2];
  walk_stop st = {cfg, 0, 1, bs_profile_capacity_bytes(prof), 0};
  for (int tries = 0;; tries++) {
    int64_t Mb = Ma + g, more = 0;
    if (Ma + Mb >= M || Mb >= 1024 || tries == 2) { /* not worth it (or a tag's microbatch bits) */
      free(sends);
      return 0;
    }
    for (int i = 0; i < 2; i++) {
      int64_t Mx = i ? Mb : Ma, relax[2] = {1, Mx - 1};
      bs_config c = *cfg;
      c.par.micro_batch = (int)m.micro_batch;
      c.work.batch = (int64_t)m.size[BS_DIM_DP] * m.micro_batch * Mx;
      memset(&w[i], 0, sizeof w[i]);
      for (int j = 0; sends && j < 2 * G; j++) sends[2 * (size_t)G * (size_t)i + (size_t)j] = -1;
      if (walk_plan(&c, &ps, opts, prof, corners, relax, sends ? sends + 2 * (size_t)G * (size_t)i : NULL,
                    stop ? &st : NULL, &w[i], err, errlen)) {
        free(sends);
        return 0; /* the full walk says why */
      }
      if (w[i].peak_partial) { /* past the capacity: the full walk, with the early stop, settles it */
        *stopped = 1;
        free(sends);
        return 0;
      }
    }
    /* the ring full a period before the tail: tail's sends - a period's >= PIPE_SENDS on each rank,
     * else as many periods more (each adds a period's sends before the tail) */
    for (int j = 0; sends && j < G && sends[2 * j] >= 0; j++) {
      int64_t per = sends[2 * (size_t)G + 2 * (size_t)j] - sends[2 * j], need = PIPE_SENDS + per - sends[2 * j + 1];
      if (per <= 0) more = M; /* no sends to count on: not applied */
      else if (need > 0 && (need + per - 1) / per > more) more = (need + per - 1) / per;
    }
    if (!more) break;
    Ma += more * g;
  }
  free(sends);
  int64_t Mb = Ma + g;
  if (w[0].peak_bytes != w[1].peak_bytes || memcmp(w[0].breakdown, w[1].breakdown, sizeof w[0].breakdown)) return 0;
  double k = (double)(M - Mb) / (double)(Mb - Ma);
  *out = w[1];
  out->replay_s = w[1].replay_s + k * (w[1].replay_s - w[0].replay_s);
  out->compute_s = w[1].compute_s + k * (w[1].compute_s - w[0].compute_s);
  out->ranks_per_node = ps.ranks_per_node;
  out->capacity_bytes = bs_profile_capacity_bytes(prof);
  out->oom = bs_mem_over(cfg, out->peak_bytes, out->capacity_bytes);
  *rc = 0;
  return 1;
}

int bs_sim_walk(const bs_config *cfg, const bs_sim_opts *opts_in, const bs_profile *prof, int corners, bs_walk *out,
                char *err, size_t errlen) {
  bs_sim_opts opts;
  if (opts_in) opts = *opts_in;
  else bs_sim_opts_default(&opts);
  memset(out, 0, sizeof *out);
  int mrc = 0, stop = corners & BS_WALK_STOP_OOM, pstopped = 0;
  corners &= ~BS_WALK_STOP_OOM;
  /* FP8 GEMMs on a profile without them: the whole walk is refused at the first (bs_profile_kernel_time),
   * which may come after the held bytes pass the capacity: no early stop, the refusal stays the answer */
  if (cfg->model.fp8 != BS_FP8_OFF && !(prof->peak_flops_fp8 > 0 && prof->kernel[BS_K_GEMM].kind == BS_KM_TILED))
    stop = 0;
  if (corners == BS_WALK_STAGES && microbatch_shortcut(cfg, &opts, prof, stop, out, &mrc, err, errlen)) return mrc;
  if ((corners == BS_WALK_STAGES || corners == BS_WALK_CORNERS) &&
      pipeline_shortcut(cfg, &opts, prof, corners, stop, &pstopped, out, &mrc, err, errlen))
    return mrc;
  if (corners == BS_WALK_STAGES_EVERY) corners = BS_WALK_STAGES;
  if (corners == BS_WALK_CORNERS_EVERY) corners = BS_WALK_CORNERS;
  const int64_t none[2] = {0, 0};
  bs_platform_spec ps;
  if (bs_platform_resolve(cfg, &opts, prof, &ps, err, errlen)) return -2;
  out->ranks_per_node = ps.ranks_per_node;
  out->capacity_bytes = bs_profile_capacity_bytes(prof);
  int rc;
  walk_stop st = {cfg, 0, 1, out->capacity_bytes, 0};
  if (!bs_sim_layers_apply(cfg, &opts)) {
    rc = walk_plan(cfg, &ps, &opts, prof, corners, none, NULL, stop ? &st : NULL, out, err, errlen);
    out->oom = bs_mem_over(cfg, out->peak_bytes, out->capacity_bytes);
    if (!rc && pstopped && !out->peak_partial) { /* the step fits: the walk without the early stop */
      bs_walk w;
      memset(&w, 0, sizeof w);
      if (pipeline_shortcut(cfg, &opts, prof, corners, 0, &pstopped, &w, &mrc, err, errlen)) {
        *out = w;
        return mrc;
      }
    }
    return rc;
  }
  /* The layer shortcut: 3 and 4 layers, extended to L as layers.c extends the simulated figures. */
  bs_config ca = *cfg, cb = *cfg;
  ca.model.layers = 3;
  cb.model.layers = 4;
  bs_walk a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  int64_t k = cfg->model.layers - 3;
  if ((rc = walk_plan(&ca, &ps, &opts, prof, corners, none, NULL, NULL, &a, err, errlen))) return rc;
  /* the early stop in the 4-layer walk, on the extended figure (walk_stop): the 3-layer walk is whole */
  st = (walk_stop){cfg, a.peak_bytes, k, out->capacity_bytes, 1};
  if ((rc = walk_plan(&cb, &ps, &opts, prof, corners, none, NULL, stop ? &st : NULL, &b, err, errlen))) return rc;
  if (sim_extend_count(a.peak_bytes, b.peak_bytes, k, &out->peak_bytes)) {
    snprintf(err, errlen, "memory.peak_bytes: the bytes of %lld layers pass 2^63 - 1", (long long)cfg->model.layers);
    return -1;
  }
  for (int c = 0; !b.peak_partial && c < BS_MEM_CLASS_COUNT; c++)
    if (sim_extend_count(a.breakdown[c], b.breakdown[c], k, &out->breakdown[c])) {
      snprintf(err, errlen, "memory.breakdown: the bytes of %lld layers pass 2^63 - 1", (long long)cfg->model.layers);
      return -1;
    }
  out->compute_s = a.compute_s + (double)k * (b.compute_s - a.compute_s);
  out->replay_s = a.replay_s + (double)k * (b.replay_s - a.replay_s);
  out->oom = out->capacity_bytes > 0 && bs_mem_over(cfg, out->peak_bytes, out->capacity_bytes);
  if ((out->peak_partial = b.peak_partial)) { /* a lower bound past the capacity: no classes, no times */
    memset(out->breakdown, 0, sizeof out->breakdown);
    out->compute_s = out->replay_s = 0;
  }
  return 0;
}
