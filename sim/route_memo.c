/*
 * route_memo.c — the latency and bandwidth of the route between two hosts as
 * SimGrid reports them (sg_host_get_route_latency, _bandwidth), asked once per
 * pair of hosts and point. A collective's setup reads its group's links at
 * every call of every member (coll_setup.c), and each SimGrid call walks the
 * route again through its routing zone: on the 64-GPU 70B step that was a
 * third of the CPU. Routes do not change once the platform is loaded, so the
 * figures remembered are SimGrid's own, bit for bit.
 */
#include "sim/point.h"

#include <stdint.h>
#include <stdlib.h>
#include <simgrid/host.h>

typedef struct {
  sg_host_t a, b; /* a NULL: empty */
  double lat, bw;
} memo_entry;

struct sim_route_memo {
  memo_entry *e;
  size_t mask, n; /* capacity mask + 1 a power of two; n entries, at most half of it */
};

static size_t pair_hash(sg_host_t a, sg_host_t b) {
  uint64_t x = (uint64_t)(uintptr_t)a * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)b;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

/* The slot of (a, b): its entry, or the empty slot where it goes. */
static memo_entry *slot(const struct sim_route_memo *m, sg_host_t a, sg_host_t b) {
  for (size_t i = pair_hash(a, b) & m->mask;; i = (i + 1) & m->mask) {
    memo_entry *e = &m->e[i];
    if (!e->a || (e->a == a && e->b == b)) return e;
  }
}

/* The table doubled (or made, 64 slots); 0, or -1 when out of memory (the table as it was). */
static int grow(struct sim_route_memo *m) {
  size_t cap = m->e ? 2 * (m->mask + 1) : 64;
  memo_entry *old = m->e;
  size_t oldcap = old ? m->mask + 1 : 0;
  memo_entry *e = calloc(cap, sizeof *e);
  if (!e) return -1;
  m->e = e;
  m->mask = cap - 1;
  for (size_t i = 0; i < oldcap; i++)
    if (old[i].a) *slot(m, old[i].a, old[i].b) = old[i];
  free(old);
  return 0;
}

void sim_route_figures(sim_ctx *c, sg_host_t a, sg_host_t b, double *lat, double *bw) {
  struct sim_route_memo *m = c->route_memo;
  if (!m) m = c->route_memo = calloc(1, sizeof *m);
  if (m && 2 * (m->n + 1) > m->mask + 1 && grow(m)) m = NULL; /* at most half full */
  if (m) {
    memo_entry *e = slot(m, a, b);
    if (e->a) {
      *lat = e->lat;
      *bw = e->bw;
      return;
    }
    *e = (memo_entry){a, b, sg_host_get_route_latency(a, b), sg_host_get_route_bandwidth(a, b)};
    m->n++;
    *lat = e->lat;
    *bw = e->bw;
    return;
  }
  /* out of memory: ask SimGrid every time, as before */
  *lat = sg_host_get_route_latency(a, b);
  *bw = sg_host_get_route_bandwidth(a, b);
}

void sim_route_memo_free(sim_ctx *c) {
  if (c->route_memo) free(c->route_memo->e);
  free(c->route_memo);
  c->route_memo = NULL;
}
