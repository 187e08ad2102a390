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

typedef struct { int kind; int peer; int32_t tag; int64_t bytes; int done; int gid; int seq; int used; } hstate;
typedef struct { int32_t tag; int64_t bytes; int rank; int32_t handle; } post;
typedef struct { post *v; int n, cap, head; } pq;

static void pq_push(pq *q, post p) {
  if (q->n == q->cap) { q->cap = q->cap ? 2 * q->cap : 64; q->v = realloc(q->v, (size_t)q->cap * sizeof *q->v); }
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

int plan_walk(const bs_plan *p, walk_result *w) {
  memset(w, 0, sizeof *w);
  int G = bs_plan_ranks(p);
  if (G > WALK_MAX_RANKS) { snprintf(w->err, sizeof w->err, "too many ranks for the walker"); return -1; }
  bs_plan_iter *it[WALK_MAX_RANKS];
  bs_op cur[WALK_MAX_RANKS];
  int have[WALK_MAX_RANKS] = {0}, done[WALK_MAX_RANKS] = {0};
  hstate (*hs)[BS_PLAN_MAX_HANDLES] = calloc(WALK_MAX_RANKS, sizeof *hs);
  int64_t bsize[WALK_MAX_RANKS][BS_PLAN_MAX_BUFS];
  int blive[WALK_MAX_RANKS][BS_PLAN_MAX_BUFS], brole[WALK_MAX_RANKS][BS_PLAN_MAX_BUFS];
  bs_mem_class bcls[WALK_MAX_RANKS][BS_PLAN_MAX_BUFS];
  int64_t live[WALK_MAX_RANKS] = {0}, live_cls[WALK_MAX_RANKS][BS_MEM_CLASS_COUNT];
  memset(blive, 0, sizeof blive);
  memset(live_cls, 0, sizeof live_cls);
  pq *sq = calloc((size_t)G * G, sizeof *sq), *rq = calloc((size_t)G * G, sizeof *rq);
  colls *cl = calloc(1, sizeof *cl);
  int rc = 0;
  for (int r = 0; r < G; r++) it[r] = bs_plan_iter_new(p, r);
#define FAIL(...) do { snprintf(w->err, sizeof w->err, __VA_ARGS__); rc = -1; goto out; } while (0)
  for (;;) {
    int progress = 0, all = 1;
    for (int r = 0; r < G; r++) {
      while (!done[r]) {
        if (!have[r]) {
          if (!bs_plan_next(it[r], &cur[r])) {
            if (bs_plan_iter_error(it[r])) FAIL("rank %d: iterator error", r);
            done[r] = 1;
            break;
          }
          have[r] = 1;
          w->ops[r]++;
        }
        bs_op *op = &cur[r];
        switch (op->kind) {
        case BS_OP_ALLOC: {
          int b = op->u.alloc.buf;
          if (b < 0 || b >= BS_PLAN_MAX_BUFS || blive[r][b]) FAIL("rank %d: bad ALLOC of buffer %d", r, b);
          if (op->u.alloc.bytes <= 0) FAIL("rank %d: ALLOC of %lld bytes", r, (long long)op->u.alloc.bytes);
          blive[r][b] = 1; bsize[r][b] = op->u.alloc.bytes; bcls[r][b] = op->u.alloc.cls; brole[r][b] = op->u.alloc.role;
          live[r] += bsize[r][b]; live_cls[r][bcls[r][b]] += bsize[r][b];
          if (live[r] > w->peak[r]) { w->peak[r] = live[r]; memcpy(w->peak_cls[r], live_cls[r], sizeof live_cls[r]); }
          break;
        }
        case BS_OP_FREE: {
          int b = op->u.free.buf;
          if (b < 0 || b >= BS_PLAN_MAX_BUFS || !blive[r][b]) FAIL("rank %d: bad FREE of buffer %d", r, b);
          if (brole[r][b] != BS_ROLE_TMP) FAIL("rank %d: FREE of role buffer %d", r, b);
          blive[r][b] = 0; live[r] -= bsize[r][b]; live_cls[r][bcls[r][b]] -= bsize[r][b];
          break;
        }
        case BS_OP_COMPUTE: {
          const bs_compute *c = &op->u.compute;
          for (int j = 0; j < BS_OP_IN; j++)
            if (c->in[j].buf >= 0 && (c->in[j].buf >= BS_PLAN_MAX_BUFS || !blive[r][c->in[j].buf] ||
                                       c->in[j].off >= bsize[r][c->in[j].buf]))
              FAIL("rank %d step %d: %s reads dead buffer %d", r, op->step, bs_kernel_name(c->kernel), c->in[j].buf);
          for (int j = 0; j < BS_OP_OUT; j++)
            if (c->out[j].buf >= 0 && (c->out[j].buf >= BS_PLAN_MAX_BUFS || !blive[r][c->out[j].buf] ||
                                        c->out[j].off >= bsize[r][c->out[j].buf]))
              FAIL("rank %d step %d: %s writes dead buffer %d", r, op->step, bs_kernel_name(c->kernel), c->out[j].buf);
          w->flops[r] += c->flops;
          w->ncompute[r][c->kernel]++;
          break;
        }
        case BS_OP_SEND: case BS_OP_RECV: {
          int h = op->handle, peer = op->u.p2p.peer, b = op->u.p2p.buf.buf;
          if (h < 0 || h >= BS_PLAN_MAX_HANDLES || hs[r][h].used) FAIL("rank %d: bad handle %d", r, h);
          if (peer < 0 || peer >= G || peer == r) FAIL("rank %d step %d: bad peer %d", r, op->step, peer);
          if (b < 0 || b >= BS_PLAN_MAX_BUFS || !blive[r][b] || op->u.p2p.buf.off + op->u.p2p.bytes > bsize[r][b])
            FAIL("rank %d step %d: %s outside buffer %d", r, op->step, bs_op_kind_name(op->kind), b);
          if (op->u.p2p.tag < 0 || op->u.p2p.tag > 32767) FAIL("rank %d: tag %d out of range", r, op->u.p2p.tag);
          hs[r][h] = (hstate){op->kind, peer, op->u.p2p.tag, op->u.p2p.bytes, 0, -1, 0, 1};
          post me = {op->u.p2p.tag, op->u.p2p.bytes, r, h};
          pq *mine = op->kind == BS_OP_SEND ? &sq[r * G + peer] : &rq[r * G + peer];
          pq_push(mine, me);
          pq *s = op->kind == BS_OP_SEND ? &sq[r * G + peer] : &sq[peer * G + r];
          pq *q = op->kind == BS_OP_SEND ? &rq[peer * G + r] : &rq[r * G + peer];
          while (s->head < s->n && q->head < q->n) {
            post a = s->v[s->head++], c = q->v[q->head++];
            if (a.tag != c.tag || a.bytes != c.bytes)
              FAIL("mismatch: rank %d sends tag %d (%lld B) to %d, which receives tag %d (%lld B)", a.rank, a.tag,
                   (long long)a.bytes, c.rank, c.tag, (long long)c.bytes);
            hs[a.rank][a.handle].done = 1;
            hs[c.rank][c.handle].done = 1;
          }
          if (op->kind == BS_OP_SEND) { w->sent[r] += op->u.p2p.bytes; w->sent_to[r][peer] += op->u.p2p.bytes; }
          break;
        }
        case BS_OP_COLL: {
          int h = op->handle;
          bs_group g = op->u.coll.group;
          if (h < 0 || h >= BS_PLAN_MAX_HANDLES || hs[r][h].used) FAIL("rank %d: bad handle %d", r, h);
          if (g.size < 1 || g.first < 0 || g.first + (int64_t)g.stride * (g.size - 1) >= G)
            FAIL("rank %d: bad group", r);
          int mine = (r - g.first) % (g.stride ? g.stride : 1) == 0 && (r - g.first) / (g.stride ? g.stride : 1) < g.size && r >= g.first;
          if (!mine) FAIL("rank %d: collective on a group it is not in", r);
          int gid = group_id(cl, g);
          if (gid < 0) FAIL("too many groups");
          int k = cl->count[gid][r]++;
          if (k >= cl->cap[gid][r]) {
            cl->cap[gid][r] = cl->cap[gid][r] ? 2 * cl->cap[gid][r] : 16;
            cl->kinds[gid][r] = realloc(cl->kinds[gid][r], (size_t)cl->cap[gid][r] * sizeof(int));
            cl->bytes[gid][r] = realloc(cl->bytes[gid][r], (size_t)cl->cap[gid][r] * sizeof(int64_t));
          }
          cl->kinds[gid][r][k] = op->u.coll.kind;
          cl->bytes[gid][r][k] = op->u.coll.bytes;
          hs[r][h] = (hstate){BS_OP_COLL, -1, 0, op->u.coll.bytes, 0, gid, k, 1};
          w->coll_sent[r] += bs_coll_bytes_sent(op->u.coll.kind, op->u.coll.bytes, g.size);
          w->coll_bytes[r][op->u.coll.kind] += op->u.coll.bytes;
          w->ncoll[r][op->u.coll.kind]++;
          break;
        }
        case BS_OP_WAIT: {
          int ready = 1;
          for (int j = 0; j < op->u.wait.n; j++) {
            int h = op->u.wait.handles[j];
            if (h < 0 || h >= BS_PLAN_MAX_HANDLES || !hs[r][h].used) FAIL("rank %d step %d: WAIT on unknown handle %d", r, op->step, h);
            if (hs[r][h].kind == BS_OP_COLL && !hs[r][h].done) {
              int gid = hs[r][h].gid, k = hs[r][h].seq, ok = 1;
              bs_group g = cl->g[gid];
              for (int m = 0; m < g.size; m++) {
                int mr = g.first + m * g.stride;
                if (cl->count[gid][mr] <= k) { ok = 0; break; }
                if (cl->kinds[gid][mr][k] != cl->kinds[gid][r][k] || cl->bytes[gid][mr][k] != cl->bytes[gid][r][k])
                  FAIL("collective mismatch between ranks %d and %d", r, mr);
              }
              hs[r][h].done = ok;
            }
            if (!hs[r][h].done) ready = 0;
          }
          if (!ready) goto blocked;
          for (int j = 0; j < op->u.wait.n; j++) hs[r][op->u.wait.handles[j]].used = 0;
          break;
        }
        case BS_OP_PHASE: break;
        default: FAIL("rank %d: unknown op kind %d", r, op->kind);
        }
        have[r] = 0;
        progress = 1;
      }
    blocked:
      if (!done[r]) all = 0;
    }
    if (all) break;
    if (!progress) {
      char *e = w->err;
      size_t left = sizeof w->err;
      int n = snprintf(e, left, "deadlock:");
      for (int r = 0; r < G && n < (int)left; r++)
        if (!done[r]) n += snprintf(e + n, left - (size_t)n, " rank %d at step %d;", r, cur[r].step);
      rc = -1;
      goto out;
    }
  }
  for (int r = 0; r < G; r++) {
    for (int h = 0; h < BS_PLAN_MAX_HANDLES; h++)
      if (hs[r][h].used) FAIL("rank %d: handle %d never waited", r, h);
    for (int b = 0; b < BS_PLAN_MAX_BUFS; b++)
      if (blive[r][b] && brole[r][b] == BS_ROLE_TMP) FAIL("rank %d: TMP buffer %d never freed", r, b);
  }
out:
  for (int r = 0; r < G; r++) bs_plan_iter_free(it[r]);
  for (int i = 0; i < G * G; i++) { free(sq[i].v); free(rq[i].v); }
  for (int g = 0; g < MAXG; g++)
    for (int r = 0; r < WALK_MAX_RANKS; r++) { free(cl->kinds[g][r]); free(cl->bytes[g][r]); }
  free(sq); free(rq); free(cl); free(hs);
  return rc;
}
