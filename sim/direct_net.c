/*
 * direct_net.c — the direct engine's network (see direct_net.h): links and
 * routes of the loaded platform, transfers in their latency and bandwidth
 * phases, and SimGrid's max-min sharing recomputed over the connected links
 * of a change. The arithmetic follows SimGrid 3.32 step by step, precisions
 * included (maxmin/precision 1e-5 on link capacities and usages, 1e-14 on a
 * transfer's remaining bytes), so that the two engines agree to rounding.
 */
#include "sim/direct_net.h"
#include "sim/direct_heap.h"
#include "base/vec.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <simgrid/link.h>

#include "topologies/topo.h"

#define MAX_HOPS 8
#define MAXMIN_PRECISION 1e-5   /* SimGrid's maxmin/precision default */
#define REMAINS_PRECISION 1e-14 /* maxmin/precision x surf/precision, on a transfer's remains */

/* A flow on a link's list, with the link's place on the flow's route: the flow that fills a
 * removed one's slot is told its new place without a look at its route. Its route, weight and
 * bound ride along (fixed while it is on the list), so that a recomputation reads the flows of
 * a link from the list itself. */
typedef struct {
  int fi, hop, route;
  double w, bound;
} lentry;

typedef struct {
  lentry *f; /* active flows on the link */
  int n;
  size_t cap;
  double bw;
  int cls;
  /* recomputation scratch */
  uint32_t mark, hver;
  int dirty, alive, touched;
  double rem, usage;
} dlink;

typedef struct {
  int nl, l0; /* its links: n->rl[l0 .. l0 + nl) */
  double lat, minbw;
  int cls; /* the class of its narrowest classified link, for the size factors (-1: none) */
} droute;

/* The integers an event's bookkeeping reads come first, on one cache line; the rates after. */
typedef struct {
  int route, msg, state; /* state 0 free, 1 paying latency, 2 sharing bandwidth */
  int pos[MAX_HOPS];     /* its index in each of its links' lists */
  int next_free;
  double rem, w, bwf, bound, rate, last;
} dflow;

/* A flow's share as the recomputation works on it, apart from the flows (a small dense array). */
typedef struct {
  uint32_t mark;
  int fixed;
  double nv, value; /* the share being computed, the share it has */
} fshare;

typedef struct hent {
  double at;    /* the flow's next event: its latency paid (state 1) or its end (state 2) */
  uint64_t seq; /* ... and its order among simultaneous ones */
  int fi;
} hent;

typedef struct lfifo {
  double lat;
  hent *e; /* a ring of cap entries, n of them from head */
  int head, n, cap;
} lfifo;

struct dnet {
  bs_factor_table ft;
  dlink *link;
  const void **lptr; /* link pointers, for the pointer -> index table */
  int nlink;
  int *lhash; /* open addressing: index + 1, 0 empty */
  size_t hmask;
  droute *route;
  int nroute;
  size_t caproute;
  int *rl;
  int nrl;
  size_t caprl;
  dflow *flow;
  int nflow, free_head;
  size_t capflow;
  hent *hp;   /* the flows' event heap (4-ary): one event per flow at most */
  int *hpos;  /* each flow's place in it, -1 none (apart from the flows: a small hot array) */
  fshare *fs; /* each flow's share */
  int nh;
  size_t caph;
  lfifo *lq; /* flows paying a latency, a queue per latency value (lq_push) */
  int nlq, lq_last, lq_min;
  size_t caplq;
  uint64_t seq;
  int *dirty;
  int ndirty;
  size_t capdirty;
  uint32_t epoch;
  int *cl, *cf, *touch;
  int ncl, ncf, ntouch;
  size_t capcl, capcf, captouch;
  dev_heap sh;
  int64_t solves, solved_flows, fast;
};

/* Makes *items (elem bytes each) hold need of them (base/vec.h); -1 when out of memory. */
static int reserve(void **items, size_t *cap, size_t need, size_t elem) {
  void *p = bs_vec_grow(*items, elem, need, cap, 64);
  if (!p) return -1;
  *items = p;
  return 0;
}

static size_t ptr_hash(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

static int link_index(const dnet *n, const void *p) {
  for (size_t i = ptr_hash(p) & n->hmask;; i = (i + 1) & n->hmask) {
    int v = n->lhash[i];
    if (!v) return -1;
    if (n->lptr[v - 1] == p) return v - 1;
  }
}

dnet *dnet_new(const bs_factor_table *factors, char *why, size_t whylen) {
  dnet *n = calloc(1, sizeof *n);
  if (!n) {
    snprintf(why, whylen, "out of memory");
    return NULL;
  }
  n->ft = *factors;
  bs_direct_seal();
  size_t nl = sg_link_count();
  sg_link_t *ll = sg_link_list();
  size_t hs = 16;
  while (hs < 2 * nl + 16) hs *= 2;
  n->link = calloc(nl + 1, sizeof *n->link);
  n->lptr = calloc(nl + 1, sizeof *n->lptr);
  n->lhash = calloc(hs, sizeof *n->lhash);
  n->hmask = hs - 1;
  if (!ll || !n->link || !n->lptr || !n->lhash) {
    free(ll);
    dnet_free(n);
    snprintf(why, whylen, "out of memory");
    return NULL;
  }
  for (size_t i = 0; i < nl; i++) {
    n->lptr[i] = ll[i];
    n->link[i].bw = sg_link_get_bandwidth(ll[i]);
    n->link[i].cls = bs_link_class_of(sg_link_get_name(ll[i]));
    size_t k = ptr_hash(ll[i]) & n->hmask;
    while (n->lhash[k]) k = (k + 1) & n->hmask;
    n->lhash[k] = (int)i + 1;
  }
  n->nlink = (int)nl;
  free(ll);
  n->free_head = -1;
  n->lq_min = -1;
  return n;
}

void dnet_free(dnet *n) {
  if (!n) return;
  for (int i = 0; i < n->nlink; i++) free(n->link[i].f);
  free(n->link);
  free(n->lptr);
  free(n->lhash);
  free(n->route);
  free(n->rl);
  free(n->flow);
  free(n->hp);
  free(n->hpos);
  free(n->fs);
  for (int i = 0; i < n->nlq; i++) free(n->lq[i].e);
  free(n->lq);
  free(n->sh.e);
  free(n->dirty);
  free(n->cl);
  free(n->cf);
  free(n->touch);
  free(n);
}

int dnet_route(dnet *n, const void *src, const void *dst, char *why, size_t whylen) {
  void *lk[MAX_HOPS];
  double lat = 0;
  int k = bs_direct_route(src, dst, lk, MAX_HOPS, &lat);
  if (k < 1) {
    snprintf(why, whylen, "a route with no link or more than %d", MAX_HOPS);
    return -1;
  }
  if (reserve((void **)&n->route, &n->caproute, n->nroute + 1, sizeof *n->route) ||
      reserve((void **)&n->rl, &n->caprl, n->nrl + k, sizeof *n->rl)) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  droute *r = &n->route[n->nroute];
  r->nl = k;
  r->l0 = n->nrl;
  r->lat = lat;
  r->minbw = -1;
  r->cls = -1;
  double slowest = 0;
  for (int i = 0; i < k; i++) {
    int li = link_index(n, lk[i]);
    if (li < 0 || bs_direct_link_shared(lk[i]) != 1) {
      snprintf(why, whylen, "link '%s' is not a shared (or split-duplex) link", sg_link_get_name(lk[i]));
      return -1;
    }
    for (int j = 0; j < i; j++)
      if (n->rl[r->l0 + j] == li) {
        snprintf(why, whylen, "a route crosses link '%s' twice", sg_link_get_name(lk[i]));
        return -1;
      }
    n->rl[r->l0 + i] = li;
    const dlink *l = &n->link[li];
    if (r->minbw < 0 || l->bw < r->minbw) r->minbw = l->bw; /* comm_action_set_bounds */
    if (l->cls >= 0 && (r->cls < 0 || l->bw < slowest)) {   /* factors.cpp: the bottleneck's class */
      r->cls = l->cls;
      slowest = l->bw;
    }
  }
  n->nrl += k;
  return n->nroute++;
}

/* The profile's factor for a message of `size` bytes on route r (factors.cpp). */
static double size_factor(const dnet *n, const droute *r, double size, int bw) {
  if (r->cls < 0) return 1.0;
  const bs_factor_class *f = &n->ft.cls[r->cls];
  double v = 1.0;
  for (int i = 0; i < f->n; i++)
    if (size >= f->min_bytes[i]) v = bw ? f->bw[i] : f->lat[i];
  return v;
}

static int h_before(const hent *a, const hent *b) { return a->at < b->at || (a->at == b->at && a->seq < b->seq); }

static void fl_place(dnet *n, int i, hent e) {
  n->hp[i] = e;
  n->hpos[e.fi] = i;
}

/* A 4-ary heap: half the levels of a binary one, so half the moves (each a write to a flow's
 * hpos, a line of its own), and the children to compare side by side. */
static void fl_up(dnet *n, int i) {
  hent e = n->hp[i];
  while (i > 0) {
    int p = (i - 1) / 4;
    if (!h_before(&e, &n->hp[p])) break;
    fl_place(n, i, n->hp[p]);
    i = p;
  }
  fl_place(n, i, e);
}

static void fl_down(dnet *n, int i) {
  hent e = n->hp[i];
  for (;;) {
    int c = 4 * i + 1;
    if (c >= n->nh) break;
    int end = c + 4 < n->nh ? c + 4 : n->nh;
    for (int k = c + 1; k < end; k++)
      if (h_before(&n->hp[k], &n->hp[c])) c = k;
    if (!h_before(&n->hp[c], &e)) break;
    fl_place(n, i, n->hp[c]);
    i = c;
  }
  fl_place(n, i, e);
}

/*
 * Flows paying their latency wait in a FIFO per latency value rather than in the heap: a flow
 * queued at now leaves at now + lat, and now never decreases, so each FIFO is in (time, sequence)
 * order already. The network's next event is the earlier of the heap's top and the earliest FIFO
 * head (lq_min), compared by (time, sequence) as the heap compares: the same order as one heap.
 */

static const hent *lq_head(const dnet *n) { return n->lq_min >= 0 ? &n->lq[n->lq_min].e[n->lq[n->lq_min].head] : NULL; }

static void lq_find_min(dnet *n) {
  n->lq_min = -1;
  for (int q = 0; q < n->nlq; q++) {
    const lfifo *f = &n->lq[q];
    if (f->n && (n->lq_min < 0 || h_before(&f->e[f->head], lq_head(n)))) n->lq_min = q;
  }
}

/* Flow fi's latency ends at t = now + lat: queued in lat's FIFO; 1 when t would come before the
 * FIFO's last entry (never, as now never decreases; then the caller uses the heap), -1 out of memory. */
static int lq_push(dnet *n, int fi, double t, double lat) {
  int q = n->lq_last;
  if (q >= n->nlq || n->lq[q].lat != lat) {
    for (q = 0; q < n->nlq && n->lq[q].lat != lat; q++) continue;
    if (q == n->nlq) {
      if (reserve((void **)&n->lq, &n->caplq, n->nlq + 1, sizeof *n->lq)) return -1;
      n->lq[n->nlq++] = (lfifo){lat, NULL, 0, 0, 0};
    }
    n->lq_last = q;
  }
  lfifo *f = &n->lq[q];
  if (f->n && t < f->e[(f->head + f->n - 1) % f->cap].at) return 1;
  if (f->n == f->cap) { /* unroll the ring into a larger one */
    int cap = f->cap ? 2 * f->cap : 256;
    hent *e = malloc((size_t)cap * sizeof *e);
    if (!e) return -1;
    for (int k = 0; k < f->n; k++) e[k] = f->e[(f->head + k) % f->cap];
    free(f->e);
    f->e = e;
    f->cap = cap;
    f->head = 0;
  }
  hent *slot = &f->e[(f->head + f->n++) % f->cap];
  *slot = (hent){t, n->seq++, fi};
  if (f->n == 1 && (n->lq_min < 0 || h_before(slot, lq_head(n)))) n->lq_min = q;
  return 0;
}

/* The earliest FIFO head leaves; its flow. */
static int lq_pop(dnet *n) {
  lfifo *f = &n->lq[n->lq_min];
  int fi = f->e[f->head].fi;
  f->head = (f->head + 1) % f->cap;
  f->n--;
  lq_find_min(n);
  return fi;
}

/* The network's next event comes from the latency FIFOs rather than the heap. */
static int lq_next(const dnet *n) {
  const hent *l = lq_head(n);
  return l && (!n->nh || h_before(l, &n->hp[0]));
}

/* Flow fi's next event at t (queued, or moved there). 0 or -1 when out of memory. */
static int fl_at(dnet *n, int fi, double t) {
  int i = n->hpos[fi];
  hent e = {t, n->seq++, fi};
  if (i < 0) {
    if (reserve((void **)&n->hp, &n->caph, n->nh + 1, sizeof *n->hp)) return -1;
    i = n->nh++;
    n->hp[i] = e;
    fl_up(n, i);
    return 0;
  }
  int later = h_before(&n->hp[i], &e);
  n->hp[i] = e;
  if (later) fl_down(n, i);
  else fl_up(n, i);
  return 0;
}

/* Flow fi leaves the event heap. */
static void fl_unqueue(dnet *n, int fi) {
  int i = n->hpos[fi];
  if (i < 0) return;
  n->hpos[fi] = -1;
  hent last = n->hp[--n->nh];
  if (i == n->nh) return;
  fl_place(n, i, last);
  fl_up(n, i);
  fl_down(n, n->hpos[last.fi]);
}

static int mark_dirty(dnet *n, int li) {
  dlink *l = &n->link[li];
  if (l->dirty) return 0;
  if (reserve((void **)&n->dirty, &n->capdirty, n->ndirty + 1, sizeof *n->dirty)) return -1;
  l->dirty = 1;
  n->dirty[n->ndirty++] = li;
  return 0;
}

/* A flow's new share: progress so far at the old rate, then its completion at the new one. */
static int set_value(dnet *n, int fi, double value, double now) {
  dflow *f = &n->flow[fi];
  if (f->rate > 0 && now > f->last) {
    f->rem -= f->rate * (now - f->last);
    if (f->rem < REMAINS_PRECISION) f->rem = 0;
  }
  f->last = now;
  n->fs[fi].value = value;
  f->rate = value * f->bwf;
  if (!(f->rate > 0) && f->rem > 0) { /* starved (rounding): no completion until a share */
    fl_unqueue(n, fi);
    return 0;
  }
  return fl_at(n, fi, f->rem > 0 ? now + f->rem / f->rate : now);
}

static int activate(dnet *n, int fi, double now) {
  dflow *f = &n->flow[fi];
  const droute *r = &n->route[f->route];
  int alone = 1;
  f->state = 2;
  f->last = now;
  for (int i = 0; i < r->nl; i++) {
    dlink *l = &n->link[n->rl[r->l0 + i]];
    if (l->n) alone = 0;
    if (reserve((void **)&l->f, &l->cap, l->n + 1, sizeof *l->f)) return -1;
    f->pos[i] = l->n;
    l->f[l->n++] = (lentry){fi, i, f->route, f->w, f->bound};
  }
  if (alone) { /* the max-min solution of one flow: its narrowest link, as maxmin.cpp computes it */
    n->fast++;
    double lambda = -1;
    for (int i = 0; i < r->nl; i++) {
      double key = n->link[n->rl[r->l0 + i]].bw / (1.0 / f->w);
      if (lambda < 0 || key < lambda) lambda = key;
    }
    double v = f->bound > 0 && f->bound * f->w < lambda ? f->bound : lambda / f->w;
    return set_value(n, fi, v, now);
  }
  for (int i = 0; i < r->nl; i++)
    if (mark_dirty(n, n->rl[r->l0 + i])) return -1;
  return 0;
}

int dnet_start(dnet *n, int r, double bytes, double now, int msg) {
  int fi;
  if (n->free_head >= 0) {
    fi = n->free_head;
    n->free_head = n->flow[fi].next_free;
  } else {
    size_t cap = n->capflow;
    if (reserve((void **)&n->flow, &n->capflow, n->nflow + 1, sizeof *n->flow)) return -1;
    if (n->capflow != cap) {
      int *h = realloc(n->hpos, (size_t)n->capflow * sizeof *h);
      if (h) n->hpos = h;
      fshare *fs = h ? realloc(n->fs, (size_t)n->capflow * sizeof *fs) : NULL;
      if (!fs) return -1;
      n->fs = fs;
    }
    fi = n->nflow++;
  }
  dflow *f = &n->flow[fi];
  const droute *rt = &n->route[r];
  memset(f, 0, sizeof *f);
  memset(&n->fs[fi], 0, sizeof n->fs[fi]);
  n->hpos[fi] = -1;
  f->route = r;
  f->msg = msg;
  f->rem = bytes;
  f->bwf = size_factor(n, rt, bytes, 1);
  double lat = rt->lat * size_factor(n, rt, bytes, 0);
  /* network_cm02.cpp: the sharing penalty is the route's latency (weight-S 0), 1 when there is
   * none to pay; the bound is the narrowest link only without latency (TCP-gamma 0 otherwise
   * leaves the flow unbounded) */
  f->bound = rt->lat > 0 ? 0 : rt->minbw;
  if (lat > 0) {
    f->w = rt->lat;
    f->state = 1;
    int rc = lq_push(n, fi, now + lat, lat);
    return rc == 1 ? fl_at(n, fi, now + lat) : rc;
  }
  f->w = 1.0;
  return activate(n, fi, now);
}

/* The links' share of the flows connected to the dirty links, recomputed as maxmin.cpp does. */
static int solve(dnet *n, double now) {
  uint32_t ep = ++n->epoch;
  n->ncl = n->ncf = 0;
  for (int d = 0; d < n->ndirty; d++) {
    int li = n->dirty[d];
    n->link[li].dirty = 0;
    if (!n->link[li].n || n->link[li].mark == ep) continue;
    if (reserve((void **)&n->cl, &n->capcl, n->ncl + 1, sizeof *n->cl)) return -1;
    n->link[li].mark = ep;
    n->cl[n->ncl++] = li;
  }
  n->ndirty = 0;
  for (int q = 0; q < n->ncl; q++) {
    dlink *l = &n->link[n->cl[q]];
    for (int j = 0; j < l->n; j++) {
      const lentry *e = &l->f[j];
      if (n->fs[e->fi].mark == ep) continue;
      n->fs[e->fi].mark = ep;
      if (reserve((void **)&n->cf, &n->capcf, n->ncf + 1, sizeof *n->cf)) return -1;
      n->cf[n->ncf++] = e->fi;
      const droute *r = &n->route[e->route];
      for (int i = 0; i < r->nl; i++) {
        int li = n->rl[r->l0 + i];
        if (n->link[li].mark == ep) continue;
        if (reserve((void **)&n->cl, &n->capcl, n->ncl + 1, sizeof *n->cl)) return -1;
        n->link[li].mark = ep;
        n->cl[n->ncl++] = li;
      }
    }
  }
  n->solves++;
  n->solved_flows += n->ncf;
  n->sh.n = 0;
  for (int q = 0; q < n->ncl; q++) {
    int li = n->cl[q];
    dlink *l = &n->link[li];
    l->rem = l->bw;
    l->usage = 0;
    for (int j = 0; j < l->n; j++) l->usage += 1.0 / l->f[j].w;
    l->alive = l->usage > 0 && l->rem > l->bw * MAXMIN_PRECISION;
    l->touched = 0;
    if (l->alive && dev_push(&n->sh, l->rem / l->usage, 0, li, ++l->hver)) return -1;
  }
  for (int j = 0; j < n->ncf; j++) {
    n->fs[n->cf[j]].fixed = 0;
    n->fs[n->cf[j]].nv = 0;
  }
  while (n->sh.n) {
    dev_event top = dev_pop(&n->sh);
    dlink *l0 = &n->link[top.id];
    if (!l0->alive || top.ver != l0->hver) continue;
    double min_usage = top.t;
    n->ntouch = 0;
    /* every constraint at exactly this level saturates together (maxmin.cpp's ties) */
    int nsat;
    if (reserve((void **)&n->touch, &n->captouch, 1, sizeof *n->touch)) return -1;
    n->touch[n->ntouch++] = top.id;
    l0->touched = 1;
    nsat = 1;
    while (n->sh.n) {
      dev_event nx = n->sh.e[0];
      dlink *ln = &n->link[nx.id];
      if (!ln->alive || nx.ver != ln->hver || ln->touched) {
        dev_pop(&n->sh);
        continue;
      }
      if (nx.t != min_usage) break;
      dev_pop(&n->sh);
      if (reserve((void **)&n->touch, &n->captouch, n->ntouch + 1, sizeof *n->touch)) return -1;
      n->touch[n->ntouch++] = nx.id;
      ln->touched = 1;
      nsat++;
    }
    double min_bound = -1;
    for (int s = 0; s < nsat; s++) {
      const dlink *l = &n->link[n->touch[s]];
      for (int j = 0; j < l->n; j++) {
        const lentry *e = &l->f[j];
        if (n->fs[e->fi].fixed) continue;
        if (e->bound > 0 && e->bound * e->w < min_usage)
          min_bound = min_bound < 0 ? e->bound * e->w : fmin(min_bound, e->bound * e->w);
      }
    }
    for (int s = 0; s < nsat; s++) {
      int sli = n->touch[s];
      for (int j = 0; j < n->link[sli].n; j++) {
        const lentry *e = &n->link[sli].f[j];
        fshare *f = &n->fs[e->fi];
        if (f->fixed) continue;
        if (min_bound < 0) f->nv = min_usage / e->w;
        else if (fabs(min_bound - e->bound * e->w) < MAXMIN_PRECISION) f->nv = e->bound;
        else continue;
        f->fixed = 1;
        const droute *r = &n->route[e->route];
        for (int i = 0; i < r->nl; i++) {
          int li = n->rl[r->l0 + i];
          dlink *l = &n->link[li];
          l->rem -= f->nv;
          if (l->rem < l->bw * MAXMIN_PRECISION) l->rem = 0;
          l->usage -= 1.0 / e->w;
          if (l->usage < MAXMIN_PRECISION) l->usage = 0;
          if (!(l->usage > MAXMIN_PRECISION) || !(l->rem > l->bw * MAXMIN_PRECISION)) l->alive = 0;
          if (!l->touched) {
            if (reserve((void **)&n->touch, &n->captouch, n->ntouch + 1, sizeof *n->touch)) return -1;
            n->touch[n->ntouch++] = li;
            l->touched = 1;
          }
        }
      }
    }
    for (int s = 0; s < n->ntouch; s++) {
      dlink *l = &n->link[n->touch[s]];
      l->touched = 0;
      if (l->alive && dev_push(&n->sh, l->rem / l->usage, 0, n->touch[s], ++l->hver)) return -1;
    }
  }
  for (int j = 0; j < n->ncf; j++) {
    int fi = n->cf[j];
    if (n->fs[fi].nv != n->fs[fi].value && set_value(n, fi, n->fs[fi].nv, now)) return -1;
  }
  return 0;
}

/* The time of the network's own next event (INFINITY: none). */
static double t_own(const dnet *n) {
  const hent *l = lq_head(n);
  double t = n->nh ? n->hp[0].at : INFINITY;
  return l && l->at < t ? l->at : t;
}

double dnet_next(dnet *n, double now, double t_other) {
  if (n->ndirty && fmin(t_own(n), t_other) > now && solve(n, now)) return -1;
  return t_own(n);
}

int dnet_pop(dnet *n, double now, int *msg) {
  if (lq_next(n)) return activate(n, lq_pop(n), now) ? -1 : 0;
  int fi = n->hp[0].fi;
  dflow *f = &n->flow[fi];
  fl_unqueue(n, fi);
  if (f->state == 1) return activate(n, fi, now) ? -1 : 0;
  const droute *r = &n->route[f->route];
  for (int i = 0; i < r->nl; i++) {
    int li = n->rl[r->l0 + i];
    dlink *l = &n->link[li];
    int p = f->pos[i];
    lentry last = l->f[--l->n];
    if (p != l->n) { /* the last flow of the list takes this one's place */
      l->f[p] = last;
      n->flow[last.fi].pos[last.hop] = p;
    }
    if (l->n && mark_dirty(n, li)) return -1;
  }
  *msg = f->msg;
  f->state = 0;
  f->next_free = n->free_head;
  n->free_head = fi;
  return 1;
}

void dnet_stats(const dnet *n, int64_t *solves, int64_t *solved_flows, int64_t *fast) {
  *solves = n->solves;
  *solved_flows = n->solved_flows;
  *fast = n->fast;
}
