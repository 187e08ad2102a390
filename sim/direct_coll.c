/*
 * direct_coll.c — collectives in the direct engine (direct_coll.h). Each member's part is the
 * program coll_lower.c lowers it to, the same one coll.c runs as SimGrid actors, stepped through
 * by one state machine per thread: posts meet their other side on mailboxes named by (family,
 * channel, collective's number, sending and receiving actor slots), matched first in, first out,
 * and run on direct_net.c's model of SimGrid's network; times are timers in the engine's queue; a
 * wait, a semaphore or the threads CL_SPAWN starts hold a thread until they are done.
 */
#include "sim/direct_coll.h"
#include "sim/coll_lower.h"
#include "base/vec.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MB_ROUTE = 15 }; /* the table's key family of routes (mailboxes: coll_lower.h's CL_BOX_*) */
enum { T_RUN = 0, T_WAIT, T_SEM, T_TIMER, T_JOIN, T_DONE };

/* Who a transfer's side or a timer belongs to: a part, one of its threads, the incoming or outgoing side. */
#define OWNER(pi, k, out) (((pi) << 4) | ((k) << 1) | (out))
#define OWNER_PART(o) ((o) >> 4)
#define OWNER_THREAD(o) (((o) >> 1) & 7)

/* A thread of a part: where it stands in the program, what holds it, its posts not yet done. */
typedef struct {
  cl_cursor cur;
  int state, pend[2]; /* pend: receives, sends */
  double t0;          /* CL_MARK's time */
} dthread;

/* One member's part of one collective: its program and its threads. */
typedef struct {
  int slot, hd, next_free;
  int alive, sem[CL_MAX_SEMS]; /* threads started by CL_SPAWN still running; the semaphores */
  cl_prog prog;
  dthread th[CL_MAX_THREADS];
} dpart;

/* A posted side of a transfer waiting on its mailbox for the other side. */
typedef struct {
  int part, next;
  int64_t bytes;
} dpost;

/* A transfer between two parts' threads (OWNER). */
typedef struct {
  int src, dst;
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
  size_t np, capp;
  int free_p;
  dpost *q;
  size_t nq, capq;
  int free_q;
  dxfer *x;
  size_t nx, capx;
  int free_x;
  kslot *k;
  size_t kmask, kused;
};

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
  for (size_t i = 0; i < dc->np; i++) cl_prog_free(&dc->p[i].prog);
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
  if (s->val < 0) s->val = dnet_route(dc->net, dc->c->hosts[src], dc->c->hosts[dst], dc->why, dc->whylen);
  return s->val;
}

/* ------------------------------------------------------------------ */
/* Transfers                                                           */
/* ------------------------------------------------------------------ */

/* A slot of a pool of elem-byte items (*n used of *cap, base/vec.h) whose free ones are chained from
 * *free_head through the int at offset next in each: its index, or -1 when out of memory. */
static int pool_take(void **items, size_t elem, size_t *n, size_t *cap, int *free_head, size_t next) {
  if (*free_head >= 0) {
    int i = *free_head;
    memcpy(free_head, (char *)*items + (size_t)i * elem + next, sizeof i);
    return i;
  }
  void *a = bs_vec_grow(*items, elem, *n + 1, cap, 64);
  if (!a) return -1;
  *items = a;
  return (int)(*n)++;
}

/* A free part slot; a slot used before keeps its program's steps buffer (prog.op, prog.cap) for the
 * next program, a new one has none. */
static int part_new(dcoll *dc) {
  size_t n0 = dc->np;
  int pi = pool_take((void **)&dc->p, sizeof *dc->p, &dc->np, &dc->capp, &dc->free_p, offsetof(dpart, next_free));
  if (pi >= 0 && dc->np > n0) dc->p[pi].prog = (cl_prog){0};
  return pi;
}

/* Part slot pi back to the free list, its steps buffer kept for the next part. */
static void part_release(dcoll *dc, int pi) {
  dc->p[pi].next_free = dc->free_p;
  dc->free_p = pi;
}

static int post_new(dcoll *dc) {
  return pool_take((void **)&dc->q, sizeof *dc->q, &dc->nq, &dc->capq, &dc->free_q, offsetof(dpost, next));
}

static int xfer_new(dcoll *dc) {
  return pool_take((void **)&dc->x, sizeof *dc->x, &dc->nx, &dc->capx, &dc->free_x, offsetof(dxfer, next_free));
}

/*
 * Owner pi (OWNER: a thread's side) posts one side (get: 0 put, 1 get) of a transfer on mailbox (type, seq, ch, from slot,
 * to slot), as coll.c's sg_mailbox_put_async / get_async: it meets the first waiting side of the
 * other kind, and their transfer starts now. 0, 1 declined, -1 failed.
 */
static int post(dcoll *dc, int type, int ch, int from, int to, int get, int pi, int64_t bytes, double now) {
  uint64_t k1 = ((uint64_t)type << 60) | ((uint64_t)(ch + 1) << 52) | (uint32_t)dc->p[OWNER_PART(pi)].prog.seq;
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
/* A member's part: its program's threads                             */
/* ------------------------------------------------------------------ */

/* The part ends: its rank's handle is done. */
static int part_end(dcoll *dc, int pi) {
  dpart *p = &dc->p[pi];
  int slot = p->slot, hd = p->hd;
  part_release(dc, pi);
  return dc->done(dc->engine, slot, hd);
}

static int timer(dcoll *dc, int pi, int k, double at) {
  dc->p[pi].th[k].state = T_TIMER;
  return dev_push(dc->ev, at, dc->ev_kind, OWNER(pi, k, 0), 0) ? oom(dc) : 0;
}

static int advance(dcoll *dc, int pi, int k, double now);

/* Semaphore sem was released: the thread that waits on it, if any, takes it and goes on. */
static int sem_wake(dcoll *dc, int pi, int sem, double now) {
  const dpart *p = &dc->p[pi];
  for (int j = 0; j < p->prog.nth; j++)
    if (p->th[j].state == T_SEM && p->prog.op[p->th[j].cur.pc].ch == sem) {
      dc->p[pi].th[j].state = T_RUN;
      return advance(dc, pi, j, now);
    }
  return 0;
}

/* Thread k's program has ended: the part ends with thread 0; the others let it go on when the last
 * of them ends. */
static int thread_end(dcoll *dc, int pi, int k, double now) {
  dpart *p = &dc->p[pi];
  p->th[k].state = T_DONE;
  if (k == 0) return part_end(dc, pi);
  if (--p->alive > 0) return 0;
  p->th[0].state = T_RUN;
  return advance(dc, pi, 0, now);
}

/* Posts step o of thread k (a receive or a send) at loop iteration iter. */
static int post_step(dcoll *dc, int pi, int k, const cl_op *o, int iter, double now) {
  sim_ctx *c = dc->c;
  int slot = dc->p[pi].slot, peer = slot_of(c, o->peer), rc;
  if (o->kind == CL_RECV) {
    dc->p[pi].th[k].pend[0]++;
    return post(dc, o->box, o->ch, peer, slot, 1, OWNER(pi, k, 0), 0, now);
  }
  int64_t b = cl_send_bytes(o, iter);
  dc->p[pi].th[k].pend[1]++;
  rc = post(dc, o->box, o->ch, slot, peer, 0, OWNER(pi, k, 1), b, now);
  if (o->flags & CL_ACCT) sim_account_sent(&c->rs[slot], o->peer, b);
  if (o->flags & CL_EV) c->events++;
  return rc;
}

/* Thread k of part pi goes through its program as far as it can at now. */
static int advance(dcoll *dc, int pi, int k, double now) {
  sim_ctx *c = dc->c;
  for (;;) {
    dpart *p = &dc->p[pi];
    dthread *t = &p->th[k];
    const cl_op *o = cl_next(&p->prog, k, &t->cur);
    if (!o) return thread_end(dc, pi, k, now);
    int rc = 0, iter = t->cur.iter;
    switch (o->kind) {
    case CL_RECV:
    case CL_SEND: rc = post_step(dc, pi, k, o, iter, now); break;
    case CL_WAIT:
      if (((o->flags & CL_W_RECV) && t->pend[0]) || ((o->flags & CL_W_SEND) && t->pend[1])) {
        t->state = T_WAIT;
        return 0;
      }
      break;
    case CL_SLEEP: cl_done(&p->prog, &t->cur); return timer(dc, pi, k, now + o->t);
    case CL_ACCOUNT: sim_account_sent(&c->rs[p->slot], o->peer, o->bytes); break;
    case CL_EVENT: c->events++; break;
    case CL_SEM_POST:
      p->sem[o->ch]++;
      cl_done(&p->prog, &t->cur);
      rc = sem_wake(dc, pi, o->ch, now);
      if (rc) return rc;
      continue;
    case CL_SEM_TAKE:
      if (p->sem[o->ch] == 0) {
        t->state = T_SEM;
        return 0;
      }
      p->sem[o->ch]--;
      break;
    case CL_MARK: t->t0 = now; break;
    case CL_FLOOR: {
      double left = t->t0 + o->t - now;
      cl_done(&p->prog, &t->cur);
      if (left > 0) return timer(dc, pi, k, now + left);
      continue;
    }
    case CL_SPAWN:
      cl_done(&p->prog, &t->cur);
      p->alive = p->prog.nth - 1;
      if (!p->alive) continue;
      t->state = T_JOIN;
      for (int j = 1, n = p->prog.nth; j < n; j++) {
        dc->p[pi].th[j].cur = cl_begin(&dc->p[pi].prog, j);
        rc = advance(dc, pi, j, now);
        if (rc) return rc;
      }
      return 0;
    default: break;
    }
    if (rc) return rc;
    cl_done(&dc->p[pi].prog, &dc->p[pi].th[k].cur);
  }
}

int dcoll_start(dcoll *dc, rank_state *rs, const bs_op *op, double now) {
  sim_ctx *c = dc->c;
  int hd = op->handle;
  int pi = part_new(dc);
  if (pi < 0) return oom(dc);
  cl_prog prog = {.op = dc->p[pi].prog.op, .cap = dc->p[pi].prog.cap};
  int rc = cl_lower(c, rs, op->u.coll.kind, &op->u.coll.group, op->u.coll.bytes, rs->h[hd].coll_seq, &prog);
  if (rc) {
    dc->p[pi].prog = prog; /* its buffer, for the next part */
    part_release(dc, pi);
    return rc < 0 ? -1 : dc->done(dc->engine, rs->slot, hd);
  }
  dpart *p = &dc->p[pi];
  memset(p, 0, sizeof *p);
  p->slot = rs->slot;
  p->hd = hd;
  p->prog = prog;
  p->th[0].cur = cl_begin(&p->prog, 0);
  return advance(dc, pi, 0, now);
}

int dcoll_timer(dcoll *dc, int id, double now) {
  int pi = OWNER_PART(id), k = OWNER_THREAD(id);
  dc->p[pi].th[k].state = T_RUN;
  return advance(dc, pi, k, now);
}

/* One side of a transfer of owner (OWNER) ended at now: its thread goes on if it waited for it. */
static int part_done_one(dcoll *dc, int owner, double now) {
  int pi = OWNER_PART(owner), k = OWNER_THREAD(owner);
  dthread *t = &dc->p[pi].th[k];
  t->pend[owner & 1]--;
  if (t->state != T_WAIT) return 0;
  const cl_op *o = &dc->p[pi].prog.op[t->cur.pc];
  if (((o->flags & CL_W_RECV) && t->pend[0]) || ((o->flags & CL_W_SEND) && t->pend[1])) return 0;
  t->state = T_RUN;
  cl_done(&dc->p[pi].prog, &t->cur);
  return advance(dc, pi, k, now);
}

int dcoll_transfer_done(dcoll *dc, int msg, double now) {
  int xi = msg - DCOLL_MSG_BASE;
  dxfer x = dc->x[xi];
  dc->x[xi].next_free = dc->free_x;
  dc->free_x = xi;
  int rc = part_done_one(dc, x.src, now);
  return rc ? rc : part_done_one(dc, x.dst, now);
}
