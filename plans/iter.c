/*
 * iter.c — the per-rank iterator: made with the method's zeroed generator
 * state (and, in layer and model scope, the scope's own state through the
 * plan's scope row), it hands out one op at a time from the queue the
 * generator fills a segment at a time, so a large plan never exists whole in
 * memory. It reaches a method only through its row (methods.c) and the scope
 * only through the row creation set, never calling up into either.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "plan_impl.h"

bs_plan_iter *bs_plan_iter_new(const bs_plan *p, int rank) {
  if (!p || rank < 0 || rank >= p->G) return NULL;
  /* zeroed but for the op queue (most of it, and written before it is read): the layer and model
   * scopes make an iterator per layer and rank, and zeroing a queue that size each time evicted the
   * simulation's own state from the caches */
  bs_plan_iter *it = malloc(sizeof *it);
  if (!it) return NULL;
  memset(it, 0, offsetof(bs_plan_iter, q));
  memset(&it->bufs_used, 0, sizeof *it - offsetof(bs_plan_iter, bufs_used));
  it->p = p;
  it->rank = rank;
  it->step = -1;
  it->state = calloc(1, plan_method_of(p->cfg.par.method)->state_size);
  if (!it->state || (p->scope && !(it->wl = p->scope->open(it)))) {
    free(it->state);
    free(it);
    return NULL;
  }
  return it;
}

void bs_plan_iter_free(bs_plan_iter *it) {
  if (it) {
    if (it->wl) it->p->scope->close(it->wl);
    free(it->state);
  }
  free(it);
}
int bs_plan_iter_error(const bs_plan_iter *it) { return it->err; }

const char *bs_plan_iter_errmsg(const bs_plan_iter *it) {
  if (!it->err) return NULL;
  return it->errmsg[0] ? it->errmsg : "the plan iterator failed (internal error: op queue or ids exhausted)";
}

size_t bs_op_used_bytes(bs_op_kind kind) {
  const bs_op *o = NULL;
  size_t head = offsetof(bs_op, u);
  switch (kind) {
  case BS_OP_ALLOC: return head + sizeof o->u.alloc;
  case BS_OP_FREE: return head + sizeof o->u.free;
  case BS_OP_COMPUTE: return head + sizeof o->u.compute;
  case BS_OP_SEND:
  case BS_OP_RECV: return head + sizeof o->u.p2p;
  case BS_OP_COLL: return head + sizeof o->u.coll;
  case BS_OP_WAIT: return head + sizeof o->u.wait;
  case BS_OP_PHASE: return head + sizeof o->u.phase;
  }
  return sizeof *o;
}

/* The op at the queue's head, left in place: valid until the iterator's next call (which may
 * refill the queue over it); NULL at the end or on an error. The streams that copy an inner plan's
 * ops into their own queue (compose.c, workload.c) read it there, one copy instead of two. */
const bs_op *plan_next_ref(bs_plan_iter *it) {
  while (it->qn == 0) {
    if (it->done || it->err) return NULL;
    it->qh = 0;
    int more = it->wl ? it->p->scope->gen(it) : plan_method_of(it->p->cfg.par.method)->gen(it, it->state);
    if (!more) it->done = 1;
  }
  if (it->err) return NULL;
  const bs_op *q = &it->q[it->qh];
  it->qh = (it->qh + 1) % QCAP;
  it->qn--;
  return q;
}

/* Hands out the op at the queue's head: only its used bytes are copied (a COMPUTE's are most of
 * an op, a message's a tenth), since the iterator runs once per op of every simulated rank. An
 * empty queue fills again from its first slot, so that the memory a rank's ops pass through is
 * its longest segment, not the whole ring: with a thousand ranks interleaved, that is what keeps
 * their queues in cache. */
const bs_op *bs_plan_next_ref(bs_plan_iter *it) {
  const bs_op *q = plan_next_ref(it);
  if (q && it->qn) __builtin_prefetch(&it->q[it->qh]);
  return q;
}

int bs_plan_next(bs_plan_iter *it, bs_op *op) {
  const bs_op *q = plan_next_ref(it);
  if (!q) return 0;
  plan_op_copy(op, q);
  if (it->qn) __builtin_prefetch(&it->q[it->qh]); /* the rank's next op, read soon after this one */
  return 1;
}
