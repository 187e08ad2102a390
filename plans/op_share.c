/*
 * op_share.c — one record of the attention plan's ops per attention rank, shared by every
 * iterator of a layer or model plan (issue 27). A fresh iterator of p->attn at attention rank
 * `local` always yields the same ops (a function of the plan and the rank alone), and every
 * rank of the plan whose attention group places it at `local` streams that sequence once per
 * layer and microbatch (workload_stream.c). Each iterator used to keep its own record of it; a
 * 16,384-GPU step simulates a thousand ranks at once, whose thousand copies of four sequences
 * did not stay in the caches, and reading them was most of what copying an op cost. The first
 * iterator opened at `local` records the whole sequence here, once; later ones read it.
 *
 * Bounded: a sequence longer than WL_SHARE_OPS ops, or one that would take the plan's records
 * past WL_SHARE_BYTES, is not shared (those iterators keep their own record, as before), and
 * bs_plan_set_op_cache(p, 0) turns both records off. Threads (the fold's pre-pass) may open
 * iterators of one plan at once: an entry is claimed by one of them with an atomic exchange and
 * published with a release store; an iterator that finds it being recorded keeps its own record.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include "workload_impl.h"

/* A sequence is shared up to this many ops (456 bytes each: under 1 MB), and a plan's shared
 * records up to this many bytes in all. */
#define WL_SHARE_OPS 2048
#define WL_SHARE_BYTES ((int64_t)64 << 20)

enum { SHARE_EMPTY = 0, SHARE_BUSY, SHARE_READY, SHARE_NONE };

typedef struct {
  atomic_int state;
  bs_op *op;
  int64_t n;
} share_entry;

struct plan_op_share {
  int ranks;          /* the attention plan's */
  atomic_llong bytes; /* held by the ready entries */
  share_entry e[];    /* per attention rank */
};

plan_op_share *plan_op_share_new(int ranks) {
  if (ranks < 1) return NULL;
  plan_op_share *s = calloc(1, sizeof *s + sizeof(share_entry) * (size_t)ranks);
  if (!s) return NULL;
  s->ranks = ranks;
  atomic_init(&s->bytes, 0);
  for (int i = 0; i < ranks; i++) atomic_init(&s->e[i].state, SHARE_EMPTY);
  return s;
}

void plan_op_share_free(plan_op_share *s) {
  if (!s) return;
  for (int i = 0; i < s->ranks; i++) free(s->e[i].op);
  free(s);
}

/* The whole sequence of a fresh iterator of attn at `local`, or NULL (too long, out of memory, an
 * iterator error: the stream regenerates it and reports the error itself). */
static bs_op *record(const bs_plan *attn, int local, int64_t *n) {
  bs_plan_iter *in = bs_plan_iter_new(attn, local);
  bs_op *ops = NULL;
  int64_t k = 0, cap = 0;
  const bs_op *op = NULL;
  while (in && (op = plan_next_ref(in))) {
    if (k == cap) {
      int64_t c = cap ? 2 * cap : 256;
      bs_op *g = c <= WL_SHARE_OPS ? realloc(ops, sizeof *g * (size_t)c) : NULL;
      if (!g) break; /* too long, or no memory: op stays non-NULL */
      ops = g;
      cap = c;
    }
    plan_op_copy(&ops[k++], op);
  }
  int whole = in && !op && !bs_plan_iter_error(in);
  bs_plan_iter_free(in);
  if (!whole) {
    free(ops);
    return NULL;
  }
  *n = k;
  return ops;
}

const bs_op *plan_op_share_get(const bs_plan *p, int local, int64_t *n) {
  plan_op_share *s = p->share;
  if (!s || !p->attn || local < 0 || local >= s->ranks) return NULL;
  share_entry *e = &s->e[local];
  int st = atomic_load_explicit(&e->state, memory_order_acquire);
  if (st == SHARE_EMPTY) {
    int want = SHARE_EMPTY;
    if (!atomic_compare_exchange_strong_explicit(&e->state, &want, SHARE_BUSY, memory_order_acq_rel,
                                                 memory_order_acquire))
      return NULL; /* another thread is recording it, or just did: this iterator keeps its own */
    int64_t k = 0;
    bs_op *ops = record(p->attn, local, &k);
    int64_t b = k * (int64_t)sizeof *ops;
    if (ops && atomic_fetch_add(&s->bytes, b) + b > WL_SHARE_BYTES) {
      atomic_fetch_sub(&s->bytes, b);
      free(ops);
      ops = NULL;
    }
    e->op = ops;
    e->n = k;
    atomic_store_explicit(&e->state, ops ? SHARE_READY : SHARE_NONE, memory_order_release);
    st = ops ? SHARE_READY : SHARE_NONE;
  }
  if (st != SHARE_READY) return NULL;
  *n = e->n;
  return e->op;
}

int64_t bs_plan_op_share_bytes(const bs_plan *p) { return p->share ? (int64_t)atomic_load(&p->share->bytes) : 0; }
