/*
 * plan_walk.c — an abstract executor for tests (see plan_walk.h). Ranks are
 * advanced round-robin; a SEND completes only when its RECV is posted (the
 * strictest MPI semantics), so a plan that relies on buffering is reported as
 * a deadlock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plan_walk.h"
#include "base/vec.h"

typedef struct {
  int kind;
  int peer;
  int32_t tag;
  int64_t bytes;
  int done;
  int gid;
  int seq;
  int used;
} hstate;
typedef struct {
  int32_t tag;
  int64_t bytes;
  int rank;
  int32_t handle;
} post;
typedef struct {
  post *v;
  int n, head;
  size_t cap;
} pq;

static void pq_push(pq *q, post p) {
  post *v = bs_vec_grow(q->v, sizeof *v, (size_t)q->n + 1, &q->cap, 64);
  if (!v) abort();
  q->v = v;
  q->v[q->n++] = p;
}

#define MAXG 64
typedef struct {
  bs_group g[MAXG];
  int ng;
  int count[MAXG][WALK_MAX_RANKS];
  int *kinds[MAXG][WALK_MAX_RANKS]; /* kind*1e0 per call, for consistency */
  int64_t *bytes[MAXG][WALK_MAX_RANKS];
  int cap[MAXG][WALK_MAX_RANKS];
} colls;

static int group_id(colls *c, bs_group g) {
  for (int i = 0; i < c->ng; i++)
    if (c->g[i].first == g.first && c->g[i].stride == g.stride && c->g[i].size == g.size) return i;
  if (c->ng == MAXG) return -1;
  c->g[c->ng] = g;
  return c->ng++;
}

/* The walk's state: every rank's iterator and current op, its handles and buffers, the point-to-point
 * queues per (rank, peer) and the collectives per group. */
typedef struct {
  walk_result *w;
  int G;
  bs_plan_iter *it[WALK_MAX_RANKS];
  bs_op cur[WALK_MAX_RANKS];
  int have[WALK_MAX_RANKS], done[WALK_MAX_RANKS];
  hstate hs[WALK_MAX_RANKS][BS_PLAN_MAX_HANDLES];
  int64_t bsize[WALK_MAX_RANKS][BS_PLAN_MAX_BUFS];
  int blive[WALK_MAX_RANKS][BS_PLAN_MAX_BUFS], brole[WALK_MAX_RANKS][BS_PLAN_MAX_BUFS];
  bs_mem_class bcls[WALK_MAX_RANKS][BS_PLAN_MAX_BUFS];
  int64_t live[WALK_MAX_RANKS], live_cls[WALK_MAX_RANKS][BS_MEM_CLASS_COUNT];
  pq *sq, *rq; /* [rank * G + peer]: sends to peer, receives from peer */
  colls cl;
} walker;

#define FAIL(...)                                       \
  do {                                                  \
    snprintf(k->w->err, sizeof k->w->err, __VA_ARGS__); \
    return -1;                                          \
  } while (0)

static int walk_alloc(walker *k, int r, const bs_op *op) {
  walk_result *w = k->w;
  int b = op->u.alloc.buf;
  if (b < 0 || b >= BS_PLAN_MAX_BUFS || k->blive[r][b]) FAIL("rank %d: bad ALLOC of buffer %d", r, b);
  if (op->u.alloc.bytes <= 0) FAIL("rank %d: ALLOC of %lld bytes", r, (long long)op->u.alloc.bytes);
  k->blive[r][b] = 1;
  k->bsize[r][b] = op->u.alloc.bytes;
  k->bcls[r][b] = op->u.alloc.cls;
  k->brole[r][b] = op->u.alloc.role;
  k->live[r] += k->bsize[r][b];
  k->live_cls[r][k->bcls[r][b]] += k->bsize[r][b];
  if (k->live[r] > w->peak[r]) {
    w->peak[r] = k->live[r];
    memcpy(w->peak_cls[r], k->live_cls[r], sizeof k->live_cls[r]);
  }
  return 0;
}

static int walk_free(walker *k, int r, const bs_op *op) {
  int b = op->u.free.buf;
  if (b < 0 || b >= BS_PLAN_MAX_BUFS || !k->blive[r][b]) FAIL("rank %d: bad FREE of buffer %d", r, b);
  if (k->brole[r][b] != BS_ROLE_TMP) FAIL("rank %d: FREE of role buffer %d", r, b);
  k->blive[r][b] = 0;
  k->live[r] -= k->bsize[r][b];
  k->live_cls[r][k->bcls[r][b]] -= k->bsize[r][b];
  return 0;
}

static int walk_compute(walker *k, int r, const bs_op *op) {
  const bs_compute *c = &op->u.compute;
  for (int j = 0; j < BS_OP_IN; j++)
    if (c->in[j].buf >= 0 &&
        (c->in[j].buf >= BS_PLAN_MAX_BUFS || !k->blive[r][c->in[j].buf] || c->in[j].off >= k->bsize[r][c->in[j].buf]))
      FAIL("rank %d step %d: %s reads dead buffer %d", r, op->step, bs_kernel_name(c->kernel), c->in[j].buf);
  for (int j = 0; j < BS_OP_OUT; j++)
    if (c->out[j].buf >= 0 && (c->out[j].buf >= BS_PLAN_MAX_BUFS || !k->blive[r][c->out[j].buf] ||
                               c->out[j].off >= k->bsize[r][c->out[j].buf]))
      FAIL("rank %d step %d: %s writes dead buffer %d", r, op->step, bs_kernel_name(c->kernel), c->out[j].buf);
  k->w->flops[r] += c->flops;
  k->w->ncompute[r][c->kernel]++;
  return 0;
}

/* A SEND or RECV: queued, then matched in order against the other side's queue (tag and bytes equal). */
static int walk_p2p(walker *k, int r, const bs_op *op) {
  const int G = k->G;
  int h = op->handle, peer = op->u.p2p.peer, b = op->u.p2p.buf.buf;
  if (h < 0 || h >= BS_PLAN_MAX_HANDLES || k->hs[r][h].used) FAIL("rank %d: bad handle %d", r, h);
  if (peer < 0 || peer >= G || peer == r) FAIL("rank %d step %d: bad peer %d", r, op->step, peer);
  if (b < 0 || b >= BS_PLAN_MAX_BUFS || !k->blive[r][b] || op->u.p2p.buf.off + op->u.p2p.bytes > k->bsize[r][b])
    FAIL("rank %d step %d: %s outside buffer %d", r, op->step, bs_op_kind_name(op->kind), b);
  if (op->u.p2p.tag < 0 || op->u.p2p.tag > 32767) FAIL("rank %d: tag %d out of range", r, op->u.p2p.tag);
  k->hs[r][h] = (hstate){op->kind, peer, op->u.p2p.tag, op->u.p2p.bytes, 0, -1, 0, 1};
  post me = {op->u.p2p.tag, op->u.p2p.bytes, r, h};
  pq *mine = op->kind == BS_OP_SEND ? &k->sq[r * G + peer] : &k->rq[r * G + peer];
  pq_push(mine, me);
  pq *s = op->kind == BS_OP_SEND ? &k->sq[r * G + peer] : &k->sq[peer * G + r];
  pq *q = op->kind == BS_OP_SEND ? &k->rq[peer * G + r] : &k->rq[r * G + peer];
  while (s->head < s->n && q->head < q->n) {
    post a = s->v[s->head++], c = q->v[q->head++];
    if (a.tag != c.tag || a.bytes != c.bytes)
      FAIL("mismatch: rank %d sends tag %d (%lld B) to %d, which receives tag %d (%lld B)", a.rank, a.tag,
           (long long)a.bytes, c.rank, c.tag, (long long)c.bytes);
    k->hs[a.rank][a.handle].done = 1;
    k->hs[c.rank][c.handle].done = 1;
  }
  if (op->kind == BS_OP_SEND) {
    k->w->sent[r] += op->u.p2p.bytes;
    k->w->sent_to[r][peer] += op->u.p2p.bytes;
  }
  return 0;
}

/* A collective: recorded as the rank's next call on its group; matched when waited. */
static int walk_coll(walker *k, int r, const bs_op *op) {
  walk_result *w = k->w;
  colls *cl = &k->cl;
  int h = op->handle;
  bs_group g = op->u.coll.group;
  if (h < 0 || h >= BS_PLAN_MAX_HANDLES || k->hs[r][h].used) FAIL("rank %d: bad handle %d", r, h);
  if (g.size < 1 || g.first < 0 || g.first + (int64_t)g.stride * (g.size - 1) >= k->G) FAIL("rank %d: bad group", r);
  const int stride = g.stride ? g.stride : 1;
  int mine = (r - g.first) % stride == 0 && (r - g.first) / stride < g.size && r >= g.first;
  if (!mine) FAIL("rank %d: collective on a group it is not in", r);
  int gid = group_id(cl, g);
  if (gid < 0) FAIL("too many groups");
  int n = cl->count[gid][r]++;
  if (n >= cl->cap[gid][r]) {
    cl->cap[gid][r] = cl->cap[gid][r] ? 2 * cl->cap[gid][r] : 16;
    cl->kinds[gid][r] = realloc(cl->kinds[gid][r], (size_t)cl->cap[gid][r] * sizeof(int));
    cl->bytes[gid][r] = realloc(cl->bytes[gid][r], (size_t)cl->cap[gid][r] * sizeof(int64_t));
  }
  cl->kinds[gid][r][n] = op->u.coll.kind;
  cl->bytes[gid][r][n] = op->u.coll.bytes;
  k->hs[r][h] = (hstate){BS_OP_COLL, -1, 0, op->u.coll.bytes, 0, gid, n, 1};
  w->coll_sent[r] += bs_coll_bytes_sent(op->u.coll.kind, op->u.coll.bytes, g.size);
  w->coll_bytes[r][op->u.coll.kind] += op->u.coll.bytes;
  w->ncoll[r][op->u.coll.kind]++;
  return 0;
}

/* A WAIT: 0 when every handle is complete (and they are released), 1 when the rank must block, -1 on error. */
static int walk_wait(walker *k, int r, const bs_op *op) {
  colls *cl = &k->cl;
  int ready = 1;
  for (int j = 0; j < op->u.wait.n; j++) {
    int h = op->u.wait.handles[j];
    if (h < 0 || h >= BS_PLAN_MAX_HANDLES || !k->hs[r][h].used)
      FAIL("rank %d step %d: WAIT on unknown handle %d", r, op->step, h);
    if (k->hs[r][h].kind == BS_OP_COLL && !k->hs[r][h].done) {
      int gid = k->hs[r][h].gid, n = k->hs[r][h].seq, ok = 1;
      bs_group g = cl->g[gid];
      for (int m = 0; m < g.size; m++) {
        int mr = g.first + m * g.stride;
        if (cl->count[gid][mr] <= n) {
          ok = 0;
          break;
        }
        if (cl->kinds[gid][mr][n] != cl->kinds[gid][r][n] || cl->bytes[gid][mr][n] != cl->bytes[gid][r][n])
          FAIL("collective mismatch between ranks %d and %d", r, mr);
      }
      k->hs[r][h].done = ok;
    }
    if (!k->hs[r][h].done) ready = 0;
  }
  if (!ready) return 1;
  for (int j = 0; j < op->u.wait.n; j++) k->hs[r][op->u.wait.handles[j]].used = 0;
  return 0;
}

/* One op of rank r: 0 done, 1 blocked, -1 error. */
static int walk_op(walker *k, int r, const bs_op *op) {
  switch (op->kind) {
  case BS_OP_ALLOC: return walk_alloc(k, r, op);
  case BS_OP_FREE: return walk_free(k, r, op);
  case BS_OP_COMPUTE: return walk_compute(k, r, op);
  case BS_OP_SEND:
  case BS_OP_RECV: return walk_p2p(k, r, op);
  case BS_OP_COLL: return walk_coll(k, r, op);
  case BS_OP_WAIT: return walk_wait(k, r, op);
  case BS_OP_PHASE: return 0;
  default: FAIL("rank %d: unknown op kind %d", r, op->kind);
  }
}

/* Advances rank r until it blocks or ends; *progress is set when an op completed. */
static int walk_rank(walker *k, int r, int *progress) {
  while (!k->done[r]) {
    if (!k->have[r]) {
      if (!bs_plan_next(k->it[r], &k->cur[r])) {
        if (bs_plan_iter_error(k->it[r])) FAIL("rank %d: iterator error", r);
        k->done[r] = 1;
        break;
      }
      k->have[r] = 1;
      k->w->ops[r]++;
    }
    int rc = walk_op(k, r, &k->cur[r]);
    if (rc < 0) return -1;
    if (rc > 0) break;
    k->have[r] = 0;
    *progress = 1;
  }
  return 0;
}

/* No rank can move: names each unfinished rank and its step. */
static int deadlock(walker *k) {
  char *e = k->w->err;
  size_t left = sizeof k->w->err;
  int n = snprintf(e, left, "deadlock:");
  for (int r = 0; r < k->G && n < (int)left; r++)
    if (!k->done[r]) n += snprintf(e + n, left - (size_t)n, " rank %d at step %d;", r, k->cur[r].step);
  return -1;
}

/* After the last op: every handle waited, every TMP buffer freed. */
static int walk_end(walker *k) {
  for (int r = 0; r < k->G; r++) {
    for (int h = 0; h < BS_PLAN_MAX_HANDLES; h++)
      if (k->hs[r][h].used) FAIL("rank %d: handle %d never waited", r, h);
    for (int b = 0; b < BS_PLAN_MAX_BUFS; b++)
      if (k->blive[r][b] && k->brole[r][b] == BS_ROLE_TMP) FAIL("rank %d: TMP buffer %d never freed", r, b);
  }
  return 0;
}

static int walk_all(walker *k) {
  for (;;) {
    int progress = 0, all = 1;
    for (int r = 0; r < k->G; r++) {
      if (walk_rank(k, r, &progress)) return -1;
      if (!k->done[r]) all = 0;
    }
    if (all) return walk_end(k);
    if (!progress) return deadlock(k);
  }
}

#undef FAIL

int plan_walk(const bs_plan *p, walk_result *w) {
  memset(w, 0, sizeof *w);
  int G = bs_plan_ranks(p);
  if (G > WALK_MAX_RANKS) {
    snprintf(w->err, sizeof w->err, "too many ranks for the walker");
    return -1;
  }
  walker *k = calloc(1, sizeof *k);
  k->w = w;
  k->G = G;
  k->sq = calloc((size_t)G * G, sizeof *k->sq);
  k->rq = calloc((size_t)G * G, sizeof *k->rq);
  for (int r = 0; r < G; r++) k->it[r] = bs_plan_iter_new(p, r);
  int rc = walk_all(k);
  for (int r = 0; r < G; r++) bs_plan_iter_free(k->it[r]);
  for (int i = 0; i < G * G; i++) {
    free(k->sq[i].v);
    free(k->rq[i].v);
  }
  for (int g = 0; g < MAXG; g++)
    for (int r = 0; r < WALK_MAX_RANKS; r++) {
      free(k->cl.kinds[g][r]);
      free(k->cl.bytes[g][r]);
    }
  free(k->sq);
  free(k->rq);
  free(k);
  return rc;
}
