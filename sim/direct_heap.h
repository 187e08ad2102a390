/*
 * direct_heap.h — the direct engine's event queue (direct.c, direct_net.c):
 * a binary min-heap of (time, sequence) keyed events. The sequence number
 * breaks ties first in, first out, so the order of simultaneous events never
 * depends on the heap's layout; an event carries an id and a version, and a
 * consumer drops one whose version is no longer its object's (lazy removal).
 */
#ifndef BURSTSIM_SIM_DIRECT_HEAP_H
#define BURSTSIM_SIM_DIRECT_HEAP_H

#include <stdint.h>
#include <stdlib.h>

typedef struct {
  double t;
  uint64_t seq;
  int id;       /* what the event is about (a rank, a flow, a message) */
  int kind;     /* the consumer's event kind */
  uint32_t ver; /* the object's version when the event was queued */
} dev_event;

typedef struct {
  dev_event *e;
  size_t n, cap;
  uint64_t seq;
} dev_heap;

static inline int dev_before(const dev_event *a, const dev_event *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

/* Queues an event; 0, or -1 when out of memory. */
static inline int dev_push(dev_heap *h, double t, int kind, int id, uint32_t ver) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? 2 * h->cap : 1024;
    dev_event *e = realloc(h->e, cap * sizeof *e);
    if (!e) return -1;
    h->e = e;
    h->cap = cap;
  }
  dev_event ev = {t, h->seq++, id, kind, ver};
  size_t i = h->n++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!dev_before(&ev, &h->e[p])) break;
    h->e[i] = h->e[p];
    i = p;
  }
  h->e[i] = ev;
  return 0;
}

/* Removes the earliest event (the heap is not empty). */
static inline dev_event dev_pop(dev_heap *h) {
  dev_event top = h->e[0], last = h->e[--h->n];
  size_t i = 0, n = h->n;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && dev_before(&h->e[c + 1], &h->e[c])) c++;
    if (!dev_before(&h->e[c], &last)) break;
    h->e[i] = h->e[c];
    i = c;
  }
  if (n) h->e[i] = last;
  return top;
}

#endif
