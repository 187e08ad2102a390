/*
 * direct_coll.c — collectives in the direct engine (direct_coll.h). Each
 * member's part is a small state machine that follows coll.c's actor step by
 * step, so that both engines move the same bytes at the same times:
 *
 *   base    the profile's collectives.base_s, slept first;
 *   sleep   an alpha-beta time (the analytic model, a tree timed as a whole);
 *   a2a     2(n-1) transfers posted at once, done when all are;
 *   flow    one exchange of every step's bytes per channel, then the rest of
 *           the lockstep time, if any;
 *   steps   the ring's exchanges one after the other;
 *   tree    per tree and direction an actor of its own there: chunks reduced
 *           up and broadcast down, one in flight behind the one received;
 *   binomial Open MPI's rounds, one blocking transfer after the other.
 *
 * Transfers meet on mailboxes named as coll.c names them (the collective's
 * number, the channel, the sending and receiving actor slots), matched first
 * in, first out, and run on direct_net.c's model of SimGrid's network.
 */
#include "sim/direct_coll.h"
#include "sim/coll_algo.h"
#include "sim/coll_setup.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <simgrid/host.h>

enum { ST_BASE = 0, ST_RUN, ST_SLEEP };
enum { A_SLEEP = 0, A_A2A, A_FLOW, A_STEPS, A_TREE, A_BINOMIAL };
enum { MB_A2A = 1, MB_RING, MB_ROUTE, MB_TREE_UP, MB_TREE_DOWN, MB_BINOMIAL_UP, MB_BINOMIAL_DOWN };
enum { TS_START = 0, TS_IN, TS_OUT, TS_SEM, TS_END, TS_DONE };

/* Who a transfer's side belongs to: a part, one of its tree actors, its incoming or outgoing side. */
#define OWNER(pi, sub, out) (((pi) << 3) | ((sub) << 1) | (out))

/* One direction of one tree of a tree allreduce (coll.c's tree_part): an actor of its own there. */
typedef struct {
  int tree, up, parent; /* parent: real rank, -1 at the root */
  int nchild, child[BS_TREE_MAX_CHILDREN];
  int64_t half;
  int chunks, ch, stage, nin, nout;
} dtsub;

/* One member's part of one collective. */
typedef struct {
  int slot, hd, rank, seq, next_free;
  int algo, stage, npend, step;
  int n, me, steps;
  int64_t chunk;
  double t0, t_ring, t_sleep;
  bs_group group;
  int nch;
  int ch[BS_MAX_CHANNELS], next[BS_MAX_CHANNELS], prev[BS_MAX_CHANNELS]; /* channel, neighbours' real ranks */
  int64_t part[BS_MAX_CHANNELS];
  int nsub, alive, sem[2]; /* tree: its actors, those still running, each root's reduced chunks */
  dtsub sub[4];
  int64_t bytes;
  bs_coll_kind kind;
} dpart;

/* A posted side of a transfer waiting on its mailbox for the other side. */
typedef struct {
  int part, next;
  int64_t bytes;
} dpost;

/* A transfer between two parts. */
typedef struct {
  int src, dst; /* parts */
  int next_free;
} dxfer;

/* A slot of the table keyed by (k1, k2): a mailbox's waiting sides (a list of one kind), or a route. */
typedef struct {
  uint64_t k1, k2;
  int used, val, head, tail; /* val: a route's id; a mailbox's side waiting (0 puts, 1 gets) */
} kslot;

struct dcoll {
  sim_ctx *c;
  dnet *net;
  dev_heap *ev;
  int ev_kind;
  dcoll_done_fn done;
  void *engine;
  char *why; /* what a declined collective needs */
  size_t whylen;
  dpart *p;
  int np, capp, free_p;
  dpost *q;
  int nq, capq, free_q;
  dxfer *x;
  int nx, capx, free_x;
  kslot *k;
  size_t kmask, kused;
};

static int grow(void **p, int *cap, int need, size_t elem) {
  if (need <= *cap) return 0;
  int c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *q = realloc(*p, (size_t)c * elem);
  if (!q) return -1;
  *p = q;
  *cap = c;
  return 0;
}

static int oom(dcoll *dc) {
  sim_error(dc->c, "out of memory");
  return -1;
}

dcoll *dcoll_new(sim_ctx *c, dnet *net, dev_heap *ev, int ev_kind, dcoll_done_fn done, void *engine, char *why,
                 size_t whylen) {
  dcoll *dc = calloc(1, sizeof *dc);
  if (!dc) return NULL;
  *dc = (dcoll){
    .c = c, .net = net, .ev = ev, .ev_kind = ev_kind, .done = done, .engine = engine, .why = why, .whylen = whylen};
  dc->free_p = dc->free_q = dc->free_x = -1;
  dc->k = calloc(1024, sizeof *dc->k);
  dc->kmask = 1023;
  if (!dc->k) {
    free(dc);
    return NULL;
  }
  return dc;
}

void dcoll_free(dcoll *dc) {
  if (!dc) return;
  free(dc->p);
  free(dc->q);
  free(dc->x);
  free(dc->k);
  free(dc);
}

/* ------------------------------------------------------------------ */
/* The table of mailboxes and routes                                   */
/* ------------------------------------------------------------------ */

static size_t khash(uint64_t k1, uint64_t k2) {
  uint64_t x = k1 * 0x9e3779b97f4a7c15ull ^ k2;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return (size_t)x;
}

/* The slot of (k1, k2), or the empty slot where it would go. */
static size_t kfind(const dcoll *dc, uint64_t k1, uint64_t k2) {
  size_t i = khash(k1, k2) & dc->kmask;
  while (dc->k[i].used && (dc->k[i].k1 != k1 || dc->k[i].k2 != k2)) i = (i + 1) & dc->kmask;
  return i;
}

/* The slot of (k1, k2), created empty when new; -1 when out of memory. */
static long kget(dcoll *dc, uint64_t k1, uint64_t k2) {
  if (2 * (dc->kused + 1) > dc->kmask + 1) {
    size_t size = 2 * (dc->kmask + 1);
    kslot *old = dc->k;
    size_t oldn = dc->kmask + 1;
    dc->k = calloc(size, sizeof *dc->k);
    if (!dc->k) {
      dc->k = old;
      return -1;
    }
    dc->kmask = size - 1;
    for (size_t i = 0; i < oldn; i++)
      if (old[i].used) dc->k[kfind(dc, old[i].k1, old[i].k2)] = old[i];
    free(old);
  }
  size_t i = kfind(dc, k1, k2);
  if (!dc->k[i].used) {
    dc->k[i] = (kslot){k1, k2, 1, -1, -1, -1};
    dc->kused++;
  }
  return (long)i;
}

/* Removes slot i (linear probing: the entries after it move back into the gap). */
static void kdel(dcoll *dc, size_t i) {
  dc->k[i].used = 0;
  dc->kused--;
  for (size_t j = (i + 1) & dc->kmask; dc->k[j].used; j = (j + 1) & dc->kmask) {
    size_t h = khash(dc->k[j].k1, dc->k[j].k2) & dc->kmask;
    /* j's entry stays unless the gap i lies cyclically between its home h and j */
    if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
      dc->k[i] = dc->k[j];
      dc->k[j].used = 0;
      i = j;
    }
  }
}

/* The network's route between two actor slots (looked up once); -1 with why. */
static int route_of(dcoll *dc, int src, int dst) {
  long i = kget(dc, (uint64_t)MB_ROUTE << 60, ((uint64_t)(uint32_t)src << 32) | (uint32_t)dst);
  if (i < 0) {
    snprintf(dc->why, dc->whylen, "out of memory");
    return -1;
  }
  kslot *s = &dc->k[i];
  if (s->val < 0) s->val = dnet_route(dc->net, dc->c->rs[src].host, dc->c->rs[dst].host, dc->why, dc->whylen);
  return s->val;
}

/* ------------------------------------------------------------------ */
/* Transfers                                                           */
/* ------------------------------------------------------------------ */

static int part_new(dcoll *dc) {
  if (dc->free_p >= 0) {
    int i = dc->free_p;
    dc->free_p = dc->p[i].next_free;
    return i;
  }
  if (grow((void **)&dc->p, &dc->capp, dc->np + 1, sizeof *dc->p)) return -1;
  return dc->np++;
}

static int post_new(dcoll *dc) {
  if (dc->free_q >= 0) {
    int i = dc->free_q;
    dc->free_q = dc->q[i].next;
    return i;
  }
  if (grow((void **)&dc->q, &dc->capq, dc->nq + 1, sizeof *dc->q)) return -1;
  return dc->nq++;
}

static int xfer_new(dcoll *dc) {
  if (dc->free_x >= 0) {
    int i = dc->free_x;
    dc->free_x = dc->x[i].next_free;
    return i;
  }
  if (grow((void **)&dc->x, &dc->capx, dc->nx + 1, sizeof *dc->x)) return -1;
  return dc->nx++;
}

/*
 * Owner pi (OWNER: a part's side) posts one side (get: 0 put, 1 get) of a transfer on mailbox (type, seq, ch, from slot,
 * to slot), as coll.c's sg_mailbox_put_async / get_async: it meets the first waiting side of the
 * other kind, and their transfer starts now. 0, 1 declined, -1 failed.
 */
static int post(dcoll *dc, int type, int ch, int from, int to, int get, int pi, int64_t bytes, double now) {
  uint64_t k1 = ((uint64_t)type << 60) | ((uint64_t)(ch + 1) << 52) | (uint32_t)dc->p[pi >> 3].seq;
  uint64_t k2 = ((uint64_t)(uint32_t)from << 32) | (uint32_t)to;
  long si = kget(dc, k1, k2);
  if (si < 0) return oom(dc);
  kslot *s = &dc->k[si];
  if (s->head < 0 || s->val == get) { /* nobody of the other kind waits: this side waits */
    int q = post_new(dc);
    if (q < 0) return oom(dc);
    s = &dc->k[si];
    dc->q[q] = (dpost){pi, -1, bytes};
    if (s->tail >= 0) dc->q[s->tail].next = q;
    else s->head = q;
    s->tail = q;
    s->val = get;
    return 0;
  }
  int q = s->head;
  dpost other = dc->q[q];
  s->head = other.next;
  if (s->head < 0) kdel(dc, (size_t)si);
  dc->q[q].next = dc->free_q;
  dc->free_q = q;
  int xi = xfer_new(dc);
  if (xi < 0) return oom(dc);
  int src = get ? other.part : pi, dst = get ? pi : other.part;
  dc->x[xi] = (dxfer){src, dst, -1};
  int r = route_of(dc, from, to);
  if (r < 0) return 1;
  return dnet_start(dc->net, r, (double)(get ? other.bytes : bytes), now, DCOLL_MSG_BASE + xi) ? oom(dc) : 0;
}

/* ------------------------------------------------------------------ */
/* A member's part                                                     */
/* ------------------------------------------------------------------ */

/* Bytes a member sends in a tree allreduce (the analytic model's accounting). */
static void tree_account(rank_state *rs, const bs_group *g, int64_t bytes, int me, const int *node) {
  int64_t half[2] = {bytes / 2, bytes - bytes / 2};
  for (int t = 0; t < 2; t++) {
    bs_tree_vertex v;
    if (half[t] < 1 || bs_dtree_vertex(g->size, node, t, me, &v)) continue;
    if (v.parent >= 0) sim_account_sent(rs, sim_member(g, v.parent), half[t]);
    for (int k = 0; k < v.nchild; k++) sim_account_sent(rs, sim_member(g, v.child[k]), half[t]);
  }
}

/* The part ends: its rank's handle is done. */
static int part_end(dcoll *dc, int pi) {
  int slot = dc->p[pi].slot, hd = dc->p[pi].hd;
  dc->p[pi].next_free = dc->free_p;
  dc->free_p = pi;
  return dc->done(dc->engine, slot, hd);
}

/* One exchange of the ring: every channel sends `times` parts to its next member and receives as
 * much from its previous one (coll.c's ring_exchange). */
static int ring_exchange(dcoll *dc, int pi, int64_t times, double now) {
  sim_ctx *c = dc->c;
  dpart *p = &dc->p[pi];
  int nch = p->nch, slot = p->slot;
  p->npend = 2 * nch;
  for (int k = 0; k < nch; k++) {
    p = &dc->p[pi];
    int ch = p->ch[k], prev = slot_of(c, p->prev[k]), next = slot_of(c, p->next[k]), to = p->next[k];
    int64_t b = p->part[k] * times;
    int rc = post(dc, MB_RING, ch, prev, slot, 1, OWNER(pi, 0, 0), 0, now);
    if (!rc) rc = post(dc, MB_RING, ch, slot, next, 0, OWNER(pi, 0, 0), b, now);
    if (rc) return rc;
    sim_account_sent(&c->rs[slot], to, b);
    c->events++;
  }
  return 0;
}

/* Wakes the broadcast actor of the tree whose root just reduced a chunk (coll.c's semaphore). */
static int tree_advance(dcoll *dc, int pi, int k, double now);
static int tree_wake(dcoll *dc, int pi, int tree, double now) {
  const dpart *p = &dc->p[pi];
  for (int k = 0; k < p->nsub; k++)
    if (!p->sub[k].up && p->sub[k].tree == tree && p->sub[k].stage == TS_SEM) return tree_advance(dc, pi, k, now);
  return 0;
}

/*
 * Actor k of a tree allreduce (coll.c's tree_part_main) goes as far as it can: up, a chunk's
 * receives from every child, then (after the previous chunk's send) its send to the parent, or at
 * the root the chunk handed to the broadcast; down, a chunk from the parent (at the root: from the
 * reduction), then (after the previous chunk's sends) to every child. One chunk in flight behind
 * the one being received: the pipeline.
 */
static int tree_advance(dcoll *dc, int pi, int k, double now) {
  sim_ctx *c = dc->c;
  for (;;) {
    dpart *p = &dc->p[pi];
    dtsub *t = &p->sub[k];
    int slot = p->slot, type = t->up ? MB_TREE_UP : MB_TREE_DOWN, rc = 0;
    switch (t->stage) {
    case TS_START:
      if (t->ch == t->chunks) {
        t->stage = TS_END;
        continue;
      }
      if (t->up) {
        t->stage = TS_IN;
        t->nin = t->nchild;
        for (int j = 0; j < t->nchild && !rc; j++)
          rc = post(dc, type, t->tree, slot_of(c, t->child[j]), slot, 1, OWNER(pi, k, 0), 0, now);
      } else if (t->parent < 0) {
        t->stage = TS_SEM;
      } else {
        t->stage = TS_IN;
        t->nin = 1;
        rc = post(dc, type, t->tree, slot_of(c, t->parent), slot, 1, OWNER(pi, k, 0), 0, now);
      }
      if (rc) return rc;
      continue;
    case TS_SEM:
      if (p->sem[t->tree] == 0) return 0;
      p->sem[t->tree]--;
      t->stage = TS_OUT;
      continue;
    case TS_IN:
      if (t->nin > 0) return 0;
      if (t->up && t->parent < 0) {
        p->sem[t->tree]++;
        t->ch++;
        t->stage = TS_START;
        rc = tree_wake(dc, pi, t->tree, now);
        if (rc) return rc;
        continue;
      }
      t->stage = TS_OUT;
      continue;
    case TS_OUT: {
      if (t->nout > 0) return 0;
      int64_t size = bs_tree_chunk_size(t->half, t->chunks, t->ch);
      rank_state *rs = &c->rs[slot];
      int n = t->up ? 1 : t->nchild;
      t->nout = n;
      for (int j = 0; j < n && !rc; j++) {
        int to = t->up ? t->parent : t->child[j];
        rc = post(dc, type, t->tree, slot, slot_of(c, to), 0, OWNER(pi, k, 1), size, now);
        sim_account_sent(rs, to, size);
        c->events++;
      }
      if (rc) return rc;
      t->ch++;
      t->stage = TS_START;
      continue;
    }
    case TS_END:
      if (t->nout > 0) return 0;
      t->stage = TS_DONE;
      return --p->alive == 0 ? part_end(dc, pi) : 0;
    default: return 0;
    }
  }
}

/*
 * Open MPI libnbc's binomial allreduce (coll.c's coll_binomial), one blocking step at a time: the
 * whole buffer up the binomial tree to member 0 round by round, then down again; the bytes counted
 * as the runtime counts an allreduce (to the next member).
 */
static int binomial_advance(dcoll *dc, int pi, double now) {
  sim_ctx *c = dc->c;
  for (;;) {
    dpart *p = &dc->p[pi];
    if (p->npend > 0) return 0;
    int slot = p->slot, me = p->me, n = p->n, rc = 0;
    bs_group g = p->group;
    if (p->stage == TS_START) { /* reduce round p->step */
      int rounds = bs_binomial_rounds(n), peer = -1;
      if (p->step > rounds) {
        p->stage = TS_IN;
        continue;
      }
      int d = bs_binomial_reduce_step(n, me, p->step++, &peer);
      if (!d) continue;
      c->events++;
      p->npend = 1;
      int ps = slot_of(c, sim_member(&g, peer));
      if (d > 0) rc = post(dc, MB_BINOMIAL_UP, -1, ps, slot, 1, OWNER(pi, 0, 0), 0, now);
      else {
        rc = post(dc, MB_BINOMIAL_UP, -1, slot, ps, 0, OWNER(pi, 0, 0), p->bytes, now);
        p->step = rounds + 1; /* it leaves the reduce */
      }
    } else if (p->stage == TS_IN) { /* the broadcast: the result from the parent */
      int parent = bs_binomial_bcast_parent(me);
      p->stage = TS_OUT;
      if (parent >= 0) {
        p->npend = 1;
        rc = post(dc, MB_BINOMIAL_DOWN, -1, slot_of(c, sim_member(&g, parent)), slot, 1, OWNER(pi, 0, 0), 0, now);
      }
    } else if (p->stage == TS_OUT) { /* then to every child at once */
      int kids[32], nk = bs_binomial_bcast_children(n, me, kids);
      p->stage = TS_END;
      p->npend = nk;
      for (int k = 0; k < nk && !rc; k++) {
        rc =
          post(dc, MB_BINOMIAL_DOWN, -1, slot, slot_of(c, sim_member(&g, kids[k])), 0, OWNER(pi, 0, 0), p->bytes, now);
        c->events++;
      }
    } else {
      sim_account_sent(&c->rs[slot], sim_member(&g, (me + 1) % n), bs_coll_bytes_sent(p->kind, p->bytes, n));
      return part_end(dc, pi);
    }
    if (rc) return rc;
  }
}

/* After the base cost: the algorithm begins. */
static int part_run(dcoll *dc, int pi, double now) {
  sim_ctx *c = dc->c;
  dpart *p = &dc->p[pi];
  rank_state *rs = &c->rs[p->slot];
  p->stage = ST_RUN;
  p->t0 = now;
  if (p->algo == A_TREE) {
    p->alive = p->nsub;
    if (!p->nsub) return part_end(dc, pi);
    for (int k = 0, n = p->nsub; k < n; k++) {
      int rc = tree_advance(dc, pi, k, now);
      if (rc) return rc;
    }
    return 0;
  }
  if (p->algo == A_BINOMIAL) {
    p->stage = TS_START;
    return binomial_advance(dc, pi, now);
  }
  if (p->algo == A_SLEEP) {
    c->events++;
    p->stage = ST_SLEEP;
    return dev_push(dc->ev, now + (p->t_sleep > 0 ? p->t_sleep : 0), dc->ev_kind, pi, 0) ? oom(dc) : 0;
  }
  if (p->algo == A_A2A) {
    int n = p->n, me = p->me, slot = p->slot;
    bs_group g = p->group;
    int64_t chunk = p->chunk;
    p->npend = 2 * (n - 1);
    for (int d = 1; d < n; d++) {
      int to = sim_member(&g, (me + d) % n), from = sim_member(&g, (me + n - d) % n);
      int rc = post(dc, MB_A2A, -1, slot_of(c, from), slot, 1, OWNER(pi, 0, 0), 0, now);
      if (!rc) rc = post(dc, MB_A2A, -1, slot, slot_of(c, to), 0, OWNER(pi, 0, 0), chunk, now);
      if (rc) return rc;
      sim_account_sent(rs, to, chunk);
      c->events++;
    }
    return 0;
  }
  return ring_exchange(dc, pi, p->algo == A_FLOW ? p->steps : 1, now);
}

/* Every transfer of the part's current exchange ended at now. */
static int part_exchanged(dcoll *dc, int pi, double now) {
  dpart *p = &dc->p[pi];
  if (p->algo == A_BINOMIAL) return binomial_advance(dc, pi, now);
  if (p->algo == A_STEPS && ++p->step < p->steps) return ring_exchange(dc, pi, 1, now);
  if (p->algo == A_FLOW) {
    double left = p->t0 + p->t_ring - now;
    if (left > 0) {
      p->stage = ST_SLEEP;
      return dev_push(dc->ev, now + left, dc->ev_kind, pi, 0) ? oom(dc) : 0;
    }
  }
  return part_end(dc, pi);
}

/* The part's plan from its setup (coll.c's coll_main, model by model); 0, 1 declined, -1 failed. */
static int part_plan(dcoll *dc, int pi, rank_state *rs, int64_t bytes, sim_coll_setup *s) {
  sim_ctx *c = dc->c;
  dpart *p = &dc->p[pi];
  const bs_group *g = &p->group;
  p->n = s->n;
  p->me = s->me;
  p->steps = s->steps;
  p->chunk = s->chunk;
  p->step = 0;
  p->bytes = bytes;
  if (s->binomial) {
    p->algo = A_BINOMIAL;
    p->step = 1;
    return 0;
  }
  int whole = s->model != BS_COLL_STEPS && sim_whole_tree(c->G, g);
  if (s->algo == BS_COLL_ALGO_TREE && !whole && s->model != BS_COLL_ANALYTIC) { /* in pipelined chunks */
    int64_t half[2] = {bytes / 2, bytes - bytes / 2};
    p->algo = A_TREE;
    p->nsub = 0;
    for (int t = 0; t < 2; t++) {
      bs_tree_vertex v;
      if (half[t] < 1) continue;
      if (bs_dtree_vertex(g->size, s->node, t, s->me, &v)) return oom(dc);
      for (int up = 1; up >= 0; up--) {
        dtsub *ts = &p->sub[p->nsub++];
        memset(ts, 0, sizeof *ts);
        ts->tree = t;
        ts->up = up;
        ts->parent = v.parent >= 0 ? sim_member(g, v.parent) : -1;
        ts->nchild = v.nchild;
        for (int j = 0; j < v.nchild; j++) ts->child[j] = sim_member(g, v.child[j]);
        ts->half = half[t];
        ts->chunks = bs_tree_chunks(half[t]);
      }
    }
    return 0;
  }
  if (s->algo == BS_COLL_ALGO_TREE) { /* analytic, or timed as a whole over every rank */
    if (!whole) tree_account(rs, g, bytes, s->me, s->node);
    else if (rs->rank == g->first && sim_wtree_add(rs, bytes, g)) return -1;
    if (s->t_tree < 0) s->t_tree = bs_tree_allreduce_time(s->n, s->node, bytes, &s->l);
    p->algo = A_SLEEP;
    p->t_sleep = s->t_tree;
    return 0;
  }
  if (s->steps < 0) {
    if (s->model != BS_COLL_ANALYTIC) {
      p->algo = A_A2A;
      return 0;
    }
    sg_host_t hb = host_of(c, sim_member(g, (s->me + 1) % s->n));
    double lat = sg_host_get_route_latency(rs->host, hb), bw = sg_host_get_route_bandwidth(rs->host, hb);
    for (int k = 1; k < s->n; k++) sim_account_sent(rs, sim_member(g, (s->me + k) % s->n), s->chunk);
    p->algo = A_SLEEP;
    p->t_sleep = lat + (double)s->chunk * (s->n - 1) / bw;
    return 0;
  }
  p->nch = 0;
  for (int ch = 0; ch < s->C; ch++) {
    int64_t part = s->chunk / s->C + (ch < s->chunk % s->C);
    if (part < 1) continue;
    int k = p->nch++;
    p->ch[k] = ch;
    p->part[k] = part;
    p->prev[k] = sim_member(g, sim_ring_peer(s->C, c->rpn, s->n, ch, s->me, -1));
    p->next[k] = sim_member(g, sim_ring_peer(s->C, c->rpn, s->n, ch, s->me, +1));
  }
  p->t_ring = sim_ring_lockstep_time(&s->l, s->multi, s->steps, p->part[0]);
  if (s->model == BS_COLL_ANALYTIC) {
    for (int k = 0; k < p->nch; k++) sim_account_sent(rs, p->next[k], p->part[k] * s->steps);
    p->algo = A_SLEEP;
    p->t_sleep = p->t_ring;
  } else p->algo = s->model == BS_COLL_FLOW ? A_FLOW : A_STEPS;
  return 0;
}

double dcoll_last_arrival(const sim_ctx *c, const handle *h) {
  double last = h->t_post;
  for (int i = 0; i < h->group.size; i++) {
    const rank_state *m = &c->rs[slot_of(c, h->group.first + h->group.stride * i)];
    if (h->coll_seq < m->coll_seq && m->coll_arr[h->coll_seq] > last) last = m->coll_arr[h->coll_seq];
  }
  return last;
}

int dcoll_start(dcoll *dc, rank_state *rs, const bs_op *op, double now) {
  sim_ctx *c = dc->c;
  int hd = op->handle;
  const bs_group *g = &op->u.coll.group;
  if (sim_op_check_coll(rs, op)) return -1;
  if (sim_note_coll_arrival(rs, now)) return -1;
  int seq = rs->coll_seq++;
  bs_coll_kind kind = op->u.coll.kind;
  int64_t bytes = op->u.coll.bytes;
  if (c->mesh.size[0] > 0) {
    int k = bs_mesh_group_kind(&c->mesh, g->first, g->stride, g->size);
    if (k >= 0) rs->by_group[k] += bs_coll_bytes_sent(kind, bytes, g->size);
  }
  handle *h = &rs->h[hd];
  h->coll_seq = seq;
  h->group = *g;
  h->ckind = kind;
  h->kind = H_COLL;
  h->comm = NULL;
  h->coll = NULL;
  h->t_post = now;
  h->op_index = rs->op_index;
  h->peer = -1;
  sim_coll_setup s;
  int rc = sim_coll_prepare(c, rs, kind, g, bytes, &s);
  if (rc) {
    free(s.node);
    return rc < 0 ? -1 : dc->done(dc->engine, rs->slot, hd);
  }
  int pi = part_new(dc);
  if (pi < 0) {
    free(s.node);
    return oom(dc);
  }
  dpart *p = &dc->p[pi];
  memset(p, 0, sizeof *p);
  p->slot = rs->slot;
  p->hd = hd;
  p->rank = rs->rank;
  p->seq = seq;
  p->group = *g;
  p->kind = kind;
  rc = part_plan(dc, pi, rs, bytes, &s);
  free(s.node);
  if (rc) return rc;
  double base = c->prof ? c->prof->coll_base_s : 0;
  if (base > 0) {
    dc->p[pi].stage = ST_BASE;
    return dev_push(dc->ev, now + base, dc->ev_kind, pi, 0) ? oom(dc) : 0;
  }
  return part_run(dc, pi, now);
}

int dcoll_timer(dcoll *dc, int id, double now) {
  if (dc->p[id].stage == ST_BASE) return part_run(dc, id, now);
  return part_end(dc, id);
}

/* One side of a transfer of owner (OWNER) ended at now. */
static int part_done_one(dcoll *dc, int owner, double now) {
  int pi = owner >> 3;
  dpart *p = &dc->p[pi];
  if (p->algo == A_TREE) {
    dtsub *t = &p->sub[(owner >> 1) & 3];
    if (owner & 1) t->nout--;
    else t->nin--;
    return tree_advance(dc, pi, (owner >> 1) & 3, now);
  }
  if (--p->npend > 0) return 0;
  return part_exchanged(dc, pi, now);
}

int dcoll_transfer_done(dcoll *dc, int msg, double now) {
  int xi = msg - DCOLL_MSG_BASE;
  dxfer x = dc->x[xi];
  dc->x[xi].next_free = dc->free_x;
  dc->free_x = xi;
  int rc = part_done_one(dc, x.src, now);
  return rc ? rc : part_done_one(dc, x.dst, now);
}
