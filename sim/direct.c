/*
 * direct.c — the direct engine (direct.h): a transport of the rank
 * interpreter (transport.h, rank.c) that drives every simulated rank from one
 * event loop. A rank runs its ops at the current time until one suspends it:
 * a COMPUTE until its duration has passed, a WAIT until its handles are done;
 * the event that ends it resumes the rank. SEND/RECV meet on one queue per ordered pair of
 * ranks, in order (SimGrid's mailbox: the k-th put meets the k-th get), and a
 * transfer starts once both sides have posted; a send that pays the profile's
 * p2p base cost is put that much later, in post order. Transfers run on
 * direct_net.c's model of SimGrid's network. The ops, their checks, messages
 * and figures are the interpreter's, shared with the actors (actor.c).
 * A COLL runs as direct_coll.c's parts, as coll.c's actors run it in SimGrid.
 */
#include "sim/direct.h"
#include "base/vec.h"
#include "sim/direct_coll.h"
#include "sim/direct_heap.h"
#include "sim/direct_net.h"
#include "sim/transport.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EV_WAKE = 0, EV_PUT = 1, EV_COLL = 2 };

typedef struct {
  int src, dst;                 /* slots */
  int route;                    /* direct_net's route, -1 until the first transfer */
  int w;                        /* 0 intra-node, 1 inter-node */
  int sq, sq_tail, rq, rq_tail; /* put sends and posted receives not met yet (message lists) */
} dpair;

typedef struct {
  int pair, hs, hr; /* the pair, the send's handle at src, the receive's at dst */
  int tag, base, next;
  int64_t bytes;
  double wire, t_put;
} dmsg;

typedef struct {
  double tdone; /* when its transfer ended ... */
  uint8_t done; /* ... if it did */
  uint8_t wait; /* the rank's WAIT waits for it */
} dhandle;

typedef struct {
  sim_ctx *c;
  dnet *net;
  dcoll *coll;
  dev_heap ev;
  int *npend;  /* per slot: the handles its WAIT still waits for */
  dhandle *hs; /* per (slot, handle) */
  dpair *pair;
  int npair;
  size_t cappair;
  int *phash; /* open addressing over (src, dst): pair + 1 */
  size_t pmask;
  dmsg *msg;
  int nmsg, free_msg;
  size_t capmsg;
  double now;
  int declined;
  char *why;
  size_t whylen;
} direct;

static int oom(direct *d) {
  sim_error(d->c, "out of memory");
  return -1;
}

static size_t pair_hash(int src, int dst) {
  uint64_t x = ((uint64_t)(uint32_t)src << 32) | (uint32_t)dst;
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  return (size_t)x;
}

static int rehash(direct *d, size_t size) {
  int *h = calloc(size, sizeof *h);
  if (!h) return -1;
  free(d->phash);
  d->phash = h;
  d->pmask = size - 1;
  for (int p = 0; p < d->npair; p++) {
    size_t i = pair_hash(d->pair[p].src, d->pair[p].dst) & d->pmask;
    while (h[i]) i = (i + 1) & d->pmask;
    h[i] = p + 1;
  }
  return 0;
}

/* The pair (src -> dst), created on first use; -1 when out of memory. */
static int pair_of(direct *d, int src, int dst) {
  size_t i = pair_hash(src, dst) & d->pmask;
  for (;; i = (i + 1) & d->pmask) {
    int v = d->phash[i];
    if (!v) break;
    if (d->pair[v - 1].src == src && d->pair[v - 1].dst == dst) return v - 1;
  }
  dpair *grown = bs_vec_grow(d->pair, sizeof *d->pair, (size_t)d->npair + 1, &d->cappair, 256);
  if (!grown) return -1;
  d->pair = grown;
  int p = d->npair++;
  const sim_ctx *c = d->c;
  d->pair[p] =
    (dpair){src, dst, -1, node_of_rank(c, real_of(c, src)) != node_of_rank(c, real_of(c, dst)), -1, -1, -1, -1};
  if ((size_t)d->npair * 2 > d->pmask) return rehash(d, 2 * (d->pmask + 1)) ? -1 : p;
  d->phash[i] = p + 1;
  return p;
}

static int msg_new(direct *d) {
  if (d->free_msg >= 0) {
    int m = d->free_msg;
    d->free_msg = d->msg[m].next;
    return m;
  }
  dmsg *grown = bs_vec_grow(d->msg, sizeof *d->msg, (size_t)d->nmsg + 1, &d->capmsg, 256);
  if (!grown) return -1;
  d->msg = grown;
  return d->nmsg++;
}

static void msg_free(direct *d, int m) {
  d->msg[m].next = d->free_msg;
  d->free_msg = m;
}

/* Appends message m to a list (head, tail). */
static void list_push(direct *d, int *head, int *tail, int m) {
  d->msg[m].next = -1;
  if (*tail >= 0) d->msg[*tail].next = m;
  else *head = m;
  *tail = m;
}

static int list_pop(direct *d, int *head, int *tail) {
  int m = *head;
  *head = d->msg[m].next;
  if (*head < 0) *tail = -1;
  return m;
}

/* Both sides of message m have posted: its transfer starts now. 0, 1 declined, -1 failed. */
static int transfer(direct *d, int m) {
  dmsg *g = &d->msg[m];
  dpair *p = &d->pair[g->pair];
  if (p->route < 0) {
    char why[200];
    p->route = dnet_route(d->net, d->c->hosts[p->src], d->c->hosts[p->dst], why, sizeof why);
    if (p->route < 0) {
      snprintf(d->why, d->whylen, "%s", why);
      return 1;
    }
  }
  return dnet_start(d->net, p->route, g->wire, d->now, m) ? oom(d) : 0;
}

/* A send reaches its pair's queue (at its post, or after the p2p base cost). */
static int put(direct *d, int m) {
  dmsg *g = &d->msg[m];
  dpair *p = &d->pair[g->pair];
  g->t_put = d->now;
  if (p->rq < 0) {
    list_push(d, &p->sq, &p->sq_tail, m);
    return 0;
  }
  int rm = list_pop(d, &p->rq, &p->rq_tail);
  g->hr = d->msg[rm].hr;
  msg_free(d, rm);
  return transfer(d, m);
}

static int post_recv(direct *d, int pi, int hd) {
  dpair *p = &d->pair[pi];
  if (p->sq < 0) {
    int m = msg_new(d);
    if (m < 0) return oom(d);
    d->msg[m].hr = hd;
    list_push(d, &p->rq, &p->rq_tail, m);
    return 0;
  }
  int m = list_pop(d, &p->sq, &p->sq_tail);
  d->msg[m].hr = hd;
  return transfer(d, m);
}

static double d_now(void *eng, const rank_state *rs) {
  (void)rs;
  return ((direct *)eng)->now;
}

/* A handle of rs posted: not done, not waited for. */
static void handle_new(direct *d, rank_state *rs, int hd) {
  rs->h[hd].rx = NULL;
  size_t hi = (size_t)rs->slot * MAX_HANDLES + (size_t)hd;
  d->hs[hi].done = 0;
  d->hs[hi].wait = 0;
}

static int d_recv(void *eng, rank_state *rs, int hd, int ps) {
  direct *d = eng;
  handle_new(d, rs, hd);
  int pi = pair_of(d, ps, rs->slot);
  return pi < 0 ? oom(d) : post_recv(d, pi, hd);
}

static int d_send(void *eng, rank_state *rs, int hd, int ps) {
  direct *d = eng;
  sim_ctx *c = d->c;
  handle_new(d, rs, hd);
  const handle *h = &rs->h[hd];
  int pi = pair_of(d, rs->slot, ps);
  if (pi < 0) return oom(d);
  int m = msg_new(d);
  if (m < 0) return oom(d);
  int w = d->pair[pi].w;
  double base = c->prof ? c->prof->p2p_base_s[w] : 0;
  d->msg[m] = (dmsg){pi, hd, -1, h->tag, base > 0, -1, h->bytes, (double)sim_p2p_wire_bytes(c->prof, w, h->bytes), 0};
  if (base > 0) return dev_push(&d->ev, d->now + base, EV_PUT, m, 0) ? oom(d) : 0;
  return put(d, m);
}

static int d_coll(void *eng, rank_state *rs, const bs_op *op) {
  direct *d = eng;
  size_t hi = (size_t)rs->slot * MAX_HANDLES + (size_t)op->handle;
  d->hs[hi].done = 0;
  d->hs[hi].wait = 0;
  return dcoll_start(d->coll, rs, op, d->now);
}

static int d_compute(void *eng, rank_state *rs, double t) {
  direct *d = eng;
  return dev_push(&d->ev, d->now + t, EV_WAKE, rs->slot, 0) ? oom(d) : SIM_SUSPENDED;
}

/* The WAIT's handles all done: the one whose transfer ended last (messages by their end, then the
 * collectives joined after them in list order, as actor.c joins them: one whose end moves the
 * clock, or the first when there is no message), the sends' links accounted, the handles reset. */
static int wait_done(direct *d, rank_state *rs) {
  sim_ctx *c = d->c;
  double t0 = rs->t0, t_last = -1;
  int last = -1;
  for (int i = 0; i < rs->nwait; i++) {
    int hd = rs->wait[i];
    size_t hi = (size_t)rs->slot * MAX_HANDLES + (size_t)hd;
    if (rs->h[hd].kind != H_COLL && d->hs[hi].tdone > t_last) {
      t_last = d->hs[hi].tdone;
      last = hd;
    }
  }
  double clock = t_last > t0 ? t_last : t0;
  for (int i = 0; i < rs->nwait; i++) {
    int hd = rs->wait[i];
    if (rs->h[hd].kind != H_COLL) continue;
    size_t hi = (size_t)rs->slot * MAX_HANDLES + (size_t)hd;
    if (t_last < 0 || d->hs[hi].tdone > clock) {
      last = hd;
      t_last = d->hs[hi].tdone;
    }
    if (d->hs[hi].tdone > clock) clock = d->hs[hi].tdone;
  }
  for (int i = 0; i < rs->nwait; i++) {
    int hd = rs->wait[i];
    const handle *h = &rs->h[hd];
    size_t hi = (size_t)rs->slot * MAX_HANDLES + (size_t)hd;
    int again = 0; /* listed twice: accounted once */
    for (int j = 0; j < i; j++) again |= rs->wait[j] == hd;
    if (h->kind == H_SEND && c->nlinks && !again) {
      int direct_put = !(c->prof && c->prof->p2p_base_s[node_of_rank(c, rs->rank) != node_of_rank(c, h->peer)] > 0);
      if (direct_put) { /* a base-paying send was accounted when it ended */
        double t = d->hs[hi].tdone > t0 ? d->hs[hi].tdone : t0;
        sim_link_account(c, c->hosts[rs->slot], host_of(c, h->peer), h->bytes, t - h->t_post);
      }
    }
    d->hs[hi].done = 0;
    d->hs[hi].wait = 0;
  }
  return last;
}

static int d_wait(void *eng, rank_state *rs, int *last) {
  direct *d = eng;
  int *npend = &d->npend[rs->slot];
  *npend = 0;
  for (int i = 0; i < rs->nwait; i++) {
    size_t hi = (size_t)rs->slot * MAX_HANDLES + (size_t)rs->wait[i];
    if (!d->hs[hi].done && !d->hs[hi].wait) {
      d->hs[hi].wait = 1;
      (*npend)++;
    }
  }
  if (*npend) return SIM_SUSPENDED;
  *last = wait_done(d, rs);
  return SIM_DONE;
}

static const sim_transport direct_transport = {d_now, d_send, d_recv, d_coll, d_compute, d_wait};

/* A handle's transfer ended: its rank goes on when it was the last its WAIT waited for. */
static int handle_done(direct *d, int slot, int hd) {
  size_t hi = (size_t)slot * MAX_HANDLES + (size_t)hd;
  d->hs[hi].done = 1;
  d->hs[hi].tdone = d->now;
  rank_state *rs = &d->c->rs[slot];
  if (!d->hs[hi].wait || !d->npend[slot] || --d->npend[slot] > 0) return 0;
  return sim_rank_resume(rs, &direct_transport, d, wait_done(d, rs));
}

/* A collective's part ended (direct_coll.h's callback). */
static int coll_done(void *engine, int slot, int hd) { return handle_done(engine, slot, hd); }

static int transfer_done(direct *d, int m) {
  sim_ctx *c = d->c;
  if (m >= DCOLL_MSG_BASE) return dcoll_transfer_done(d->coll, m, d->now);
  dmsg g = d->msg[m];
  const dpair *p = &d->pair[g.pair];
  msg_free(d, m);
  c->rs[p->dst].h[g.hr].rx = sim_msg_encode(g.tag, g.bytes);
  if (g.base && c->nlinks) sim_link_account(c, c->hosts[p->src], c->hosts[p->dst], g.bytes, d->now - g.t_put);
  int rc = handle_done(d, p->src, g.hs);
  return rc ? rc : handle_done(d, p->dst, g.hr);
}

/* The profile's message-size factors, as bs_platform_apply_profile gave them to SimGrid. */
static void factor_table(const bs_profile *prof, bs_factor_table *t) {
  memset(t, 0, sizeof *t);
  for (int c = 0; c < BS_LINK_CLASS_COUNT; c++) {
    const bs_prof_link *l = &prof->link[c];
    for (int k = 0; k < l->nfactors && k < BS_FACTOR_PIECES; k++) {
      t->cls[c].min_bytes[k] = l->factors[k].min_bytes;
      t->cls[c].bw[k] = l->factors[k].bandwidth;
      t->cls[c].lat[k] = l->factors[k].latency;
      t->cls[c].n = k + 1;
    }
  }
}

int sim_direct_supports(const sim_ctx *c, int generated, const char *model, int crosstraffic, double tcp_gamma,
                        char *why, size_t whylen) {
  if (c->shared_host) snprintf(why, whylen, "the host topology's shared CPU");
  else if (!generated && c->opts->engine != BS_ENGINE_DIRECT) snprintf(why, whylen, "a platform file");
  else if (c->trace) snprintf(why, whylen, "--trace");
  else if (strcmp(model, "CM02")) snprintf(why, whylen, "network model %.24s", model);
  else if (crosstraffic) snprintf(why, whylen, "cross traffic");
  else if (tcp_gamma > 0) snprintf(why, whylen, "TCP-gamma > 0");
  else return 1;
  return 0;
}

static void direct_free(direct *d) {
  dcoll_free(d->coll);
  dnet_free(d->net);
  free(d->ev.e);
  free(d->npend);
  free(d->hs);
  free(d->pair);
  free(d->phash);
  free(d->msg);
}

/* The lines a rank's wake reads first, fetched while the event before it runs: with a thousand
 * ranks taking turns, each rank's state has left the cache by its next turn. */
static void prefetch_rank(const direct *d, int slot) {
  const char *rs = (const char *)&d->c->rs[slot];
  for (size_t o = 0; o < offsetof(rank_state, pm); o += 64) __builtin_prefetch(rs + o);
}

static int loop(direct *d) {
  sim_ctx *c = d->c;
  for (int s = 0; s < c->A; s++) {
    int rc = sim_rank_run(&c->rs[s], &direct_transport, d);
    if (rc) return rc;
  }
  for (;;) {
    double tr = d->ev.n ? d->ev.e[0].t : INFINITY;
    double tn = dnet_next(d->net, d->now, tr);
    if (tn < 0) return oom(d);
    if (isinf(tn) && isinf(tr)) break;
    int rc;
    if (tn <= tr) {
      int m = -1;
      d->now = tn;
      rc = dnet_pop(d->net, d->now, &m);
      if (rc < 0) return oom(d);
      rc = rc == 1 ? transfer_done(d, m) : 0;
    } else {
      dev_event e = dev_pop(&d->ev);
      d->now = e.t;
      if (d->ev.n && d->ev.e[0].kind == EV_WAKE) prefetch_rank(d, d->ev.e[0].id);
      if (e.kind == EV_PUT) rc = put(d, e.id);
      else if (e.kind == EV_COLL) rc = dcoll_timer(d->coll, e.id, d->now);
      else rc = sim_rank_resume(&c->rs[e.id], &direct_transport, d, -1);
    }
    if (rc) return rc;
  }
  if (c->nfinished < c->A) sim_deadlock_error(c);
  return c->error[0] ? -1 : 0;
}

int sim_direct_run(sim_ctx *c, char *why, size_t whylen) {
  direct d;
  memset(&d, 0, sizeof d);
  d.c = c;
  d.why = why;
  d.whylen = whylen;
  d.free_msg = -1;
  bs_factor_table ft;
  factor_table(c->prof, &ft);
  size_t nh = (size_t)c->A * MAX_HANDLES, hs = 1024;
  while (hs < (size_t)c->A * 8) hs *= 2;
  d.net = dnet_new(&ft, why, whylen);
  d.npend = calloc((size_t)c->A, sizeof *d.npend);
  d.hs = calloc(nh, sizeof *d.hs);
  d.phash = calloc(hs, sizeof *d.phash);
  d.pmask = hs - 1;
  if (d.net) d.coll = dcoll_new(c, d.net, &d.ev, EV_COLL, coll_done, &d, why, whylen);
  int rc;
  if (!d.net || !d.coll || !d.npend || !d.hs || !d.phash) rc = oom(&d);
  else rc = loop(&d);
  direct_free(&d);
  return rc;
}
