/*
 * walk.c — a point's memory peak and busiest-rank compute read off its plan
 * without SimGrid (walk.h), for `burstsim search`'s pruning. A rank's memory
 * depends only on the order of its own ALLOC and FREE ops, never on timing,
 * so walking the ops in order gives the simulator's peak exactly, provided the
 * bytes an ALLOC holds are counted as the actor counts them
 * (bs_sim_alloc_held, which actor.c calls).
 */
#include "sim/walk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sim/coll_algo.h"
#include "sim/platform.h"

int64_t bs_sim_alloc_held(const bs_profile *prof, const bs_op *op) {
  bs_mem_class cls = op->u.alloc.cls;
  if (cls == BS_MEM_WEIGHTS || cls == BS_MEM_GRADS || cls == BS_MEM_OPTIMIZER) return op->u.alloc.bytes;
  return bs_profile_alloc_bytes(prof, op->u.alloc.bytes);
}

#define WALK_MAX_BUFS 2048 /* as the actor's buffer table (point.h MAX_BUFS) */
#define WALK_MAX_HANDLES 256

/* A handle of the replay: what it waits for and when that completes (< 0: not yet known). */
typedef struct {
  int kind; /* 0 free, 1 send, 2 recv, 3 collective */
  double post, done;
} hslot;

/* A send or receive posted and not yet matched by its peer's. */
typedef struct {
  int src, dst, is_send, owner, handle;
  double post;
} unmatched;

typedef struct {
  int rank;
  bs_plan_iter *it;
  int64_t bytes[WALK_MAX_BUFS];
  int8_t cls[WALK_MAX_BUFS];
  uint8_t used[WALK_MAX_BUFS];
  int64_t cur, peak, cls_cur[BS_MEM_CLASS_COUNT], cls_at_peak[BS_MEM_CLASS_COUNT];
  double t, compute;
  hslot h[WALK_MAX_HANDLES];
  bs_op pending;
  int has_pending, finished;
} rstate;

/* A collective's floor (coll_floor), remembered per group, kind and size. */
typedef struct {
  bs_group g;
  int kind;
  int64_t bytes;
  double t;
} cfloor;

#define WALK_FLOORS 64

typedef struct {
  const bs_config *cfg;
  const bs_profile *prof;
  const bs_platform_spec *ps;
  bs_coll_model model; /* opts' */
  int rpn, routes;     /* routes: the platform's route model is coll.c's links (coll_floor) */
  cfloor floors[WALK_FLOORS];
  int nfloors;
  rstate *rs;
  int n;
  int *idx_of; /* real rank -> index in rs, or -1 */
  unmatched *um;
  int num, cap;
  char *err;
  size_t errlen;
} replay;

/* A send (or receive) of rank index i to (from) real rank peer: matched in order with the peer's. */
static int post_p2p(replay *R, int i, const bs_op *op) {
  rstate *r = &R->rs[i];
  int hd = op->handle, is_send = op->kind == BS_OP_SEND, peer = op->u.p2p.peer;
  if (hd < 0 || hd >= WALK_MAX_HANDLES || peer < 0 || peer >= R->cfg->par.gpus) {
    snprintf(R->err, R->errlen, "rank %d: %s with handle %d, peer %d", r->rank, bs_op_kind_name(op->kind), hd, peer);
    return -1;
  }
  r->h[hd] = (hslot){is_send ? 1 : 2, r->t, -1};
  int j = R->idx_of[peer];
  if (j < 0) { /* a rank outside the replay: taken as ready (a relaxation: still a lower bound) */
    r->h[hd].done = r->t;
    return 0;
  }
  int src = is_send ? r->rank : peer, dst = is_send ? peer : r->rank;
  for (int k = 0; k < R->num; k++) {
    unmatched *u = &R->um[k];
    if (u->src == src && u->dst == dst && u->is_send != is_send) {
      double done = u->post > r->t ? u->post : r->t;
      R->rs[u->owner].h[u->handle].done = done;
      r->h[hd].done = done;
      memmove(u, u + 1, sizeof *u * (size_t)(R->num - k - 1)); /* keep the order of the rest */
      R->num--;
      return 0;
    }
  }
  if (R->num == R->cap) {
    int nc = R->cap ? 2 * R->cap : 256;
    unmatched *p = realloc(R->um, sizeof *p * (size_t)nc);
    if (!p) {
      snprintf(R->err, R->errlen, "out of memory");
      return -1;
    }
    R->um = p;
    R->cap = nc;
  }
  R->um[R->num++] = (unmatched){src, dst, is_send, i, hd, r->t};
  return 0;
}

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

/* One op of rank index i: 1 done, 0 blocked (a WAIT on a message not yet matched), -1 error. */
static int replay_op(replay *R, int i, const bs_op *op) {
  rstate *r = &R->rs[i];
  switch (op->kind) {
  case BS_OP_ALLOC: {
    int b = op->u.alloc.buf;
    if (b < 0 || b >= WALK_MAX_BUFS || r->used[b] || op->u.alloc.bytes < 0 || op->u.alloc.cls < 0 ||
        op->u.alloc.cls >= BS_MEM_CLASS_COUNT) {
      snprintf(R->err, R->errlen, "rank %d: ALLOC of buffer %d is invalid or the buffer is already allocated", r->rank,
               b);
      return -1;
    }
    int64_t held = bs_sim_alloc_held(R->prof, op);
    r->used[b] = 1;
    r->bytes[b] = held;
    r->cls[b] = (int8_t)op->u.alloc.cls;
    r->cur += held;
    r->cls_cur[op->u.alloc.cls] += held;
    if (r->cur > r->peak) {
      r->peak = r->cur;
      memcpy(r->cls_at_peak, r->cls_cur, sizeof r->cls_cur);
    }
    return 1;
  }
  case BS_OP_FREE: {
    int b = op->u.free.buf;
    if (b < 0 || b >= WALK_MAX_BUFS || !r->used[b]) {
      snprintf(R->err, R->errlen, "rank %d: FREE of buffer %d that is not allocated", r->rank, b);
      return -1;
    }
    r->cur -= r->bytes[b];
    r->cls_cur[r->cls[b]] -= r->bytes[b];
    r->used[b] = 0;
    return 1;
  }
  case BS_OP_COMPUTE: {
    double d = bs_profile_kernel_time(R->prof, &op->u.compute, R->cfg->model.dtype, R->err, R->errlen);
    if (d < 0) return -1;
    r->t += d;
    r->compute += d;
    return 1;
  }
  case BS_OP_SEND:
  case BS_OP_RECV: return post_p2p(R, i, op) ? -1 : 1;
  case BS_OP_COLL: /* complete its floor after its post: a relaxation (the members' arrivals are not synced) */
    if (op->handle < 0 || op->handle >= WALK_MAX_HANDLES) {
      snprintf(R->err, R->errlen, "rank %d: COLL with handle %d", r->rank, op->handle);
      return -1;
    }
    r->h[op->handle] = (hslot){3, r->t, r->t + coll_floor(R, op)};
    return 1;
  case BS_OP_WAIT: {
    double t = r->t;
    for (int k = 0; k < op->u.wait.n && k < BS_MAX_WAIT; k++) {
      int hd = op->u.wait.handles[k];
      if (hd < 0 || hd >= WALK_MAX_HANDLES || !r->h[hd].kind) {
        snprintf(R->err, R->errlen, "rank %d: WAIT on handle %d that no pending operation created", r->rank, hd);
        return -1;
      }
      if (r->h[hd].done < 0) return 0;
      if (r->h[hd].done > t) t = r->h[hd].done;
    }
    for (int k = 0; k < op->u.wait.n && k < BS_MAX_WAIT; k++) r->h[op->u.wait.handles[k]].kind = 0;
    r->t = t;
    return 1;
  }
  default: return 1;
  }
}

/* Runs rank index i until it blocks or ends: 1 when it did something, 0 when not, -1 on error. */
static int replay_rank(replay *R, int i) {
  rstate *r = &R->rs[i];
  int did = 0;
  for (;;) {
    if (!r->has_pending) {
      if (!bs_plan_next(r->it, &r->pending)) {
        if (bs_plan_iter_errmsg(r->it)) {
          snprintf(R->err, R->errlen, "rank %d: %s", r->rank, bs_plan_iter_errmsg(r->it));
          return -1;
        }
        r->finished = 1;
        return 1;
      }
      r->has_pending = 1;
    }
    int rc = replay_op(R, i, &r->pending);
    if (rc < 0) return -1;
    if (rc == 0) return did;
    r->has_pending = 0;
    did = 1;
  }
}

/*
 * The ranks to replay: all, or every combination of the first and the last coordinate of tp, cp
 * and dp with every pipeline stage (a 1F1B step's bubble runs through every stage). Rank order.
 */
static int replay_ranks(const bs_config *cfg, int corners, int G, int *ranks) {
  bs_mesh m;
  if (!corners || bs_mesh_of(cfg, &m, NULL, 0)) {
    for (int r = 0; r < G; r++) ranks[r] = r;
    return G;
  }
  int n = 0;
  for (int mask = 0; mask < 1 << 3; mask++) {
    int r = 0, dup = 0;
    for (int d = 0; d < 3; d++) { /* tp, cp, dp */
      int last = mask >> d & 1;
      if (last && m.size[d] == 1) dup = 1;
      r += (last ? m.size[d] - 1 : 0) * m.stride[d];
    }
    if (dup) continue;
    for (int s = 0; s < m.size[BS_DIM_PP]; s++) ranks[n++] = r + s * m.stride[BS_DIM_PP];
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
static int walk_plan(const bs_config *cfg, const bs_platform_spec *ps, bs_coll_model model, const bs_profile *prof,
                     int corners, bs_walk *out, char *err, size_t errlen) {
  bs_plan *plan = NULL;
  int rpn = ps->ranks_per_node;
  if (bs_plan_create(cfg, rpn, &plan, err, errlen)) return -2;
  int G = bs_plan_ranks(plan), rc = 0;
  int *ranks = malloc(sizeof *ranks * (size_t)G);
  replay R = {.cfg = cfg,
              .prof = prof,
              .ps = ps,
              .model = model,
              .rpn = rpn,
              .routes = ps->generated && !ps->shared_host && bs_topo_has_rails(ps->tp.name) &&
                        cfg->cluster.degrade_factor == 0 && cfg->cluster.failed_nics == 0,
              .idx_of = calloc((size_t)G, sizeof(int)),
              .err = err,
              .errlen = errlen};
  if (ranks) R.n = replay_ranks(cfg, corners, G, ranks);
  if (ranks) R.rs = calloc((size_t)R.n, sizeof *R.rs);
  if (!ranks || !R.idx_of || !R.rs) {
    snprintf(err, errlen, "out of memory");
    rc = -1;
  }
  for (int r = 0; !rc && r < G; r++) R.idx_of[r] = -1;
  for (int i = 0; !rc && i < R.n; i++) {
    R.rs[i].rank = ranks[i];
    R.idx_of[ranks[i]] = i;
    if (!(R.rs[i].it = bs_plan_iter_new(plan, ranks[i]))) {
      snprintf(err, errlen, "out of memory");
      rc = -1;
    }
  }
  while (!rc) {
    int alive = 0, moved = 0;
    for (int i = 0; i < R.n && !rc; i++) {
      if (R.rs[i].finished) continue;
      alive++;
      int x = replay_rank(&R, i);
      if (x < 0) rc = -1;
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
  for (int i = 0; !rc && i < R.n; i++) {
    const rstate *r = &R.rs[i];
    if (r->peak > out->peak_bytes || i == 0) {
      out->peak_bytes = r->peak;
      memcpy(out->breakdown, r->cls_at_peak, sizeof out->breakdown);
    }
    if (r->compute > out->compute_s) out->compute_s = r->compute;
    if (r->t > out->replay_s) out->replay_s = r->t;
  }
  for (int i = 0; R.rs && i < R.n; i++)
    if (R.rs[i].it) bs_plan_iter_free(R.rs[i].it);
  free(R.rs);
  free(R.idx_of);
  free(R.um);
  free(ranks);
  bs_plan_free(plan);
  return rc;
}

/* a + k (b - a), as layers.c extends a byte count; -1 past int64. */
static int exti(int64_t a, int64_t b, int64_t k, int64_t *x) {
  int64_t d, kd;
  return __builtin_sub_overflow(b, a, &d) || __builtin_mul_overflow(k, d, &kd) || __builtin_add_overflow(a, kd, x) ? -1
                                                                                                                   : 0;
}

int bs_sim_walk(const bs_config *cfg, const bs_sim_opts *opts_in, const bs_profile *prof, int corners, bs_walk *out,
                char *err, size_t errlen) {
  bs_sim_opts opts;
  if (opts_in) opts = *opts_in;
  else bs_sim_opts_default(&opts);
  memset(out, 0, sizeof *out);
  bs_platform_spec ps;
  if (bs_platform_resolve(cfg, &opts, prof, &ps, err, errlen)) return -2;
  out->ranks_per_node = ps.ranks_per_node;
  out->capacity_bytes = bs_profile_capacity_bytes(prof);
  int rc;
  if (!bs_sim_layers_apply(cfg, &opts)) {
    rc = walk_plan(cfg, &ps, opts.coll_model, prof, corners, out, err, errlen);
    out->oom = out->peak_bytes > out->capacity_bytes;
    return rc;
  }
  /* The layer shortcut: 3 and 4 layers, extended to L as layers.c extends the simulated figures. */
  bs_config ca = *cfg, cb = *cfg;
  ca.model.layers = 3;
  cb.model.layers = 4;
  bs_walk a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  if ((rc = walk_plan(&ca, &ps, opts.coll_model, prof, corners, &a, err, errlen)) ||
      (rc = walk_plan(&cb, &ps, opts.coll_model, prof, corners, &b, err, errlen)))
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
  out->oom = out->capacity_bytes > 0 && out->peak_bytes > out->capacity_bytes;
  return 0;
}
