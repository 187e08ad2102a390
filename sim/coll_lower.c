/*
 * coll_lower.c — see coll_lower.h: every collective's algorithm and model lowered once into a
 * member's program of primitive steps, which coll.c runs as SimGrid actors and direct_coll.c as
 * the direct engine's state machine.
 */
#include "sim/coll_lower.h"
#include "sim/coll_setup.h"
#include "base/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <simgrid/host.h>

/* A lowering under way: the program, the member's setup, and whether an append ran out of memory. */
typedef struct {
  sim_ctx *c;
  rank_state *rs;
  const bs_group *g;
  int64_t bytes;
  bs_coll_kind kind;
  sim_coll_setup *s;
  cl_prog *p;
  int oom;
  cl_op spare; /* where appends go once out of memory */
} lower;

static cl_op *emit(lower *w, int kind) {
  cl_prog *p = w->p;
  size_t cap = (size_t)p->cap;
  cl_op *op = w->oom ? NULL : bs_vec_grow(p->op, sizeof *p->op, (size_t)p->nop + 1, &cap, 32);
  if (!op) {
    w->oom = 1;
    memset(&w->spare, 0, sizeof w->spare);
    return &w->spare;
  }
  p->op = op;
  p->cap = (int)cap;
  cl_op *o = &op[p->nop++];
  *o = (cl_op){.kind = (uint8_t)kind, .ch = -1, .peer = -1};
  return o;
}

static cl_op *op_post(lower *w, int kind, int box, int ch, int peer, int64_t bytes, int flags) {
  cl_op *o = emit(w, kind);
  o->box = (uint8_t)box;
  o->ch = ch;
  o->peer = peer;
  o->bytes = bytes;
  o->flags = (uint8_t)flags;
  return o;
}

static void op_wait(lower *w, int flags) { emit(w, CL_WAIT)->flags = (uint8_t)flags; }

static void op_time(lower *w, int kind, double t) { emit(w, kind)->t = t; }

static void op_account(lower *w, int peer, int64_t bytes) {
  cl_op *o = emit(w, CL_ACCOUNT);
  o->peer = peer;
  o->bytes = bytes;
}

static void op_sem(lower *w, int kind, int sem) { emit(w, kind)->ch = sem; }

/* A loop of `times` over the steps emitted until loop_end. */
static int loop_begin(lower *w, int64_t times) {
  emit(w, CL_LOOP)->bytes = times;
  return w->p->nop - 1;
}

static void loop_end(lower *w, int at) {
  if (!w->oom) w->p->op[at].n = w->p->nop - at - 1;
}

static void thread_begin(lower *w, const char *tag) {
  cl_thread *t = &w->p->th[w->p->nth];
  t->first = w->p->nop;
  snprintf(t->tag, sizeof t->tag, "%s", tag);
}

static void thread_end(lower *w) {
  cl_prog *p = w->p;
  cl_thread *t = &p->th[p->nth++];
  t->nop = p->nop - t->first;
  t->posts = 0;
  for (int i = t->first; !w->oom && i < p->nop; i++) t->posts += p->op[i].kind == CL_RECV || p->op[i].kind == CL_SEND;
}

/* ------------------------------------------------------------------ */
/* Tree allreduce                                                      */
/* ------------------------------------------------------------------ */

/* One direction of one tree in pipelined chunks: up, a chunk's receives from every child, then
 * (after the previous chunk's send) its send to the parent, or at the root the chunk handed to
 * the broadcast; down, a chunk from the parent (at the root: from the reduction), then (after the
 * previous chunk's sends) to every child. One chunk in flight behind the one being received. */
static void tree_thread(lower *w, int t, int up, const bs_tree_vertex *v, int64_t half) {
  const bs_group *g = w->g;
  char tag[8];
  snprintf(tag, sizeof tag, "%d%c", t, up ? 'u' : 'd');
  thread_begin(w, tag);
  int parent = v->parent >= 0 ? sim_member(g, v->parent) : -1, chunks = bs_tree_chunks(half);
  int box = up ? CL_BOX_TREE_UP : CL_BOX_TREE_DOWN;
  int at = loop_begin(w, chunks);
  if (up) {
    for (int k = 0; k < v->nchild; k++) op_post(w, CL_RECV, box, t, sim_member(g, v->child[k]), 0, 0);
    if (v->nchild) op_wait(w, CL_W_RECV);
    if (parent < 0) op_sem(w, CL_SEM_POST, t);
    else {
      op_wait(w, CL_W_SEND);
      op_post(w, CL_SEND, box, t, parent, half, CL_ACCT | CL_EV | CL_CHUNKED)->n = chunks;
    }
  } else {
    if (parent < 0) op_sem(w, CL_SEM_TAKE, t);
    else {
      op_post(w, CL_RECV, box, t, parent, 0, 0);
      op_wait(w, CL_W_RECV | CL_W_ONE);
    }
    op_wait(w, CL_W_SEND);
    for (int k = 0; k < v->nchild; k++)
      op_post(w, CL_SEND, box, t, sim_member(g, v->child[k]), half, CL_ACCT | CL_EV | CL_CHUNKED)->n = chunks;
  }
  loop_end(w, at);
  op_wait(w, CL_W_SEND);
  thread_end(w);
}

/* Bytes a member sends in a tree allreduce (both trees, to its parent and children), counted. */
static void tree_account(lower *w) {
  const bs_group *g = w->g;
  int64_t half[2] = {w->bytes / 2, w->bytes - w->bytes / 2};
  for (int t = 0; t < 2; t++) {
    bs_tree_vertex v;
    if (half[t] < 1 || bs_dtree_vertex(g->size, w->s->node, t, w->s->me, &v)) continue;
    if (v.parent >= 0) op_account(w, sim_member(g, v.parent), half[t]);
    for (int k = 0; k < v.nchild; k++) op_account(w, sim_member(g, v.child[k]), half[t]);
  }
}

/* An all-rank tree timed as a whole: its bytes, per size and group, counted once by the group's
 * first member (rs), which keeps the count: a plan has as many groups as the stride. */
int sim_wtree_add(rank_state *rs, int64_t bytes, const bs_group *g) {
  for (int i = 0; i < rs->nwtree; i++)
    if (rs->wtree[i].bytes == bytes && rs->wtree[i].stride == g->stride) {
      rs->wtree[i].count++;
      return 0;
    }
  if (rs->nwtree == (int)(sizeof rs->wtree / sizeof rs->wtree[0])) {
    sim_error(rs->ctx, "rank %d: more than %d sizes of all-rank tree allreduce in one plan", rs->rank, rs->nwtree);
    return -1;
  }
  rs->wtree[rs->nwtree].bytes = bytes;
  rs->wtree[rs->nwtree].stride = g->stride;
  rs->wtree[rs->nwtree++].count = 1;
  return 0;
}

/*
 * A tree allreduce: timed as a whole when analytic, or (flow) over every rank, the same on every
 * member so that it folds (an all-rank tree's bytes are added once, when the result is filled);
 * otherwise each tree's half reduced up and broadcast down by a thread per tree and direction.
 * Thread 0 has its steps so far (the base cost); it ends here.
 */
static int lower_tree(lower *w) {
  sim_coll_setup *s = w->s;
  const bs_group *g = w->g;
  int whole = s->model != BS_COLL_STEPS && sim_whole_tree(w->c->G, g);
  if (whole || s->model == BS_COLL_ANALYTIC) {
    if (!whole) tree_account(w);
    else if (w->rs->rank == g->first && sim_wtree_add(w->rs, w->bytes, g)) return -1;
    if (s->t_tree < 0) s->t_tree = bs_tree_allreduce_time(s->n, s->node, w->bytes, &s->l);
    emit(w, CL_EVENT);
    op_time(w, CL_SLEEP, s->t_tree > 0 ? s->t_tree : 0);
    thread_end(w);
    return 0;
  }
  int64_t half[2] = {w->bytes / 2, w->bytes - w->bytes / 2};
  emit(w, CL_SPAWN);
  thread_end(w);
  for (int t = 0; t < 2; t++) {
    if (half[t] < 1) continue;
    bs_tree_vertex v;
    if (bs_dtree_vertex(g->size, s->node, t, s->me, &v)) {
      w->oom = 1;
      return 0;
    }
    for (int up = 1; up >= 0; up--) tree_thread(w, t, up, &v, half[t]);
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* All-to-all, ring, binomial                                          */
/* ------------------------------------------------------------------ */

/* All-to-all: n-1 chunks out and in at once (analytic: through the route to the next member). */
static void lower_alltoall(lower *w) {
  const sim_coll_setup *s = w->s;
  const bs_group *g = w->g;
  int n = s->n, me = s->me;
  if (s->model == BS_COLL_ANALYTIC) {
    sg_host_t hb = host_of(w->c, sim_member(g, (me + 1) % n));
    double lat, bw;
    sim_route_figures(w->c, w->c->hosts[w->rs->slot], hb, &lat, &bw);
    for (int k = 1; k < n; k++) op_account(w, sim_member(g, (me + k) % n), s->chunk);
    emit(w, CL_EVENT);
    op_time(w, CL_SLEEP, lat + (double)s->chunk * (n - 1) / bw);
    return;
  }
  for (int d = 1; d < n; d++) {
    op_post(w, CL_RECV, CL_BOX_A2A, -1, sim_member(g, (me + n - d) % n), 0, 0);
    op_post(w, CL_SEND, CL_BOX_A2A, -1, sim_member(g, (me + d) % n), s->chunk, CL_ACCT | CL_EV);
  }
  op_wait(w, CL_W_RECV | CL_W_SEND);
}

/* Rings: C channels, each carrying its share of every step's chunk from the previous member to the
 * next; as steps, as one exchange of every step's bytes floored at the lockstep time, or that time. */
static void lower_ring(lower *w) {
  const sim_coll_setup *s = w->s;
  const bs_group *g = w->g;
  int nch = 0, ch[BS_MAX_CHANNELS], prev[BS_MAX_CHANNELS], next[BS_MAX_CHANNELS];
  int64_t part[BS_MAX_CHANNELS] = {0};
  for (int c = 0; c < s->C; c++) {
    int64_t p = s->chunk / s->C + (c < s->chunk % s->C);
    if (p < 1) continue;
    ch[nch] = c;
    part[nch] = p;
    prev[nch] = sim_member(g, sim_ring_peer(s->C, w->c->rpn, s->n, c, s->me, -1));
    next[nch++] = sim_member(g, sim_ring_peer(s->C, w->c->rpn, s->n, c, s->me, +1));
  }
  double t_ring = sim_ring_lockstep_time(&s->l, s->multi, s->steps, part[0]);
  if (s->model == BS_COLL_ANALYTIC) {
    for (int k = 0; k < nch; k++) op_account(w, next[k], part[k] * s->steps);
    emit(w, CL_EVENT);
    op_time(w, CL_SLEEP, t_ring);
    return;
  }
  int flow = s->model == BS_COLL_FLOW, at = -1;
  int64_t times = flow ? s->steps : 1;
  if (flow) emit(w, CL_MARK);
  else at = loop_begin(w, s->steps);
  for (int k = 0; k < nch; k++) {
    op_post(w, CL_RECV, CL_BOX_RING, ch[k], prev[k], 0, 0);
    op_post(w, CL_SEND, CL_BOX_RING, ch[k], next[k], part[k] * times, CL_ACCT | CL_EV);
  }
  op_wait(w, CL_W_RECV | CL_W_SEND);
  if (flow) op_time(w, CL_FLOOR, t_ring);
  else loop_end(w, at);
}

/* Open MPI libnbc's binomial allreduce: the whole buffer up the binomial tree to member 0 round by
 * round, then down again; the bytes counted as the runtime counts an allreduce (the ring
 * convention: to the next member). */
static void lower_binomial(lower *w) {
  const sim_coll_setup *s = w->s;
  const bs_group *g = w->g;
  int rounds = bs_binomial_rounds(s->n), peer = -1;
  for (int r = 1; r <= rounds; r++) {
    int d = bs_binomial_reduce_step(s->n, s->me, r, &peer);
    if (d > 0) {
      op_post(w, CL_RECV, CL_BOX_BIN_UP, -1, sim_member(g, peer), 0, 0);
      op_wait(w, CL_W_RECV | CL_W_ONE);
    } else if (d < 0) {
      op_post(w, CL_SEND, CL_BOX_BIN_UP, -1, sim_member(g, peer), w->bytes, 0);
      op_wait(w, CL_W_SEND | CL_W_ONE);
    }
    if (d) emit(w, CL_EVENT);
    if (d < 0) break;
  }
  int parent = bs_binomial_bcast_parent(s->me), kids[32];
  if (parent >= 0) {
    op_post(w, CL_RECV, CL_BOX_BIN_DOWN, -1, sim_member(g, parent), 0, 0);
    op_wait(w, CL_W_RECV | CL_W_ONE);
  }
  int nk = bs_binomial_bcast_children(s->n, s->me, kids);
  for (int k = 0; k < nk; k++) op_post(w, CL_SEND, CL_BOX_BIN_DOWN, -1, sim_member(g, kids[k]), w->bytes, CL_EV);
  op_wait(w, CL_W_SEND);
  op_account(w, sim_member(g, (s->me + 1) % s->n), bs_coll_bytes_sent(w->kind, w->bytes, s->n));
}

/* ------------------------------------------------------------------ */
/* One member's part                                                   */
/* ------------------------------------------------------------------ */

int cl_lower(sim_ctx *c, rank_state *rs, bs_coll_kind kind, const bs_group *g, int64_t bytes, int seq, cl_prog *p) {
  cl_op *keep = p->op; /* the caller's buffer to reuse (cl_lower's contract) */
  int cap = p->cap;
  memset(p, 0, sizeof *p);
  p->op = keep;
  p->cap = cap;
  p->seq = seq;
  sim_coll_setup s;
  int rc = sim_coll_prepare(c, rs, kind, g, bytes, &s);
  if (rc) {
    sim_coll_setup_free(&s);
    return rc;
  }
  lower w = {.c = c, .rs = rs, .g = g, .bytes = bytes, .kind = kind, .s = &s, .p = p};
  thread_begin(&w, "main");
  /* The call's fixed cost (the profile's collectives.base_s), before any step. */
  double base = c->prof ? c->prof->coll_base_s : 0;
  if (base > 0) op_time(&w, CL_SLEEP, base);
  if (s.binomial) lower_binomial(&w);
  else if (s.algo == BS_COLL_ALGO_TREE) rc = lower_tree(&w);
  else if (s.steps < 0) lower_alltoall(&w);
  else lower_ring(&w);
  if (!rc && p->nth == 0) thread_end(&w);
  sim_coll_setup_free(&s);
  if (!rc && w.oom) {
    sim_error(c, "out of memory");
    rc = -1;
  }
  if (rc) cl_prog_free(p);
  return rc;
}

void cl_prog_free(cl_prog *p) {
  free(p->op);
  p->op = NULL;
  p->nop = p->cap = 0;
}

cl_cursor cl_begin(const cl_prog *p, int k) { return (cl_cursor){p->th[k].first, -1, 0}; }

const cl_op *cl_next(const cl_prog *p, int k, cl_cursor *cur) {
  int end = p->th[k].first + p->th[k].nop;
  while (cur->pc < end && p->op[cur->pc].kind == CL_LOOP) {
    const cl_op *o = &p->op[cur->pc];
    if (o->bytes <= 0 || o->n <= 0) cur->pc += 1 + o->n;
    else {
      cur->loop = cur->pc++;
      cur->iter = 0;
    }
  }
  return cur->pc < end ? &p->op[cur->pc] : NULL;
}

void cl_done(const cl_prog *p, cl_cursor *cur) {
  cur->pc++;
  if (cur->loop >= 0 && cur->pc == cur->loop + 1 + p->op[cur->loop].n) {
    if (++cur->iter < p->op[cur->loop].bytes) cur->pc = cur->loop + 1;
    else cur->loop = -1;
  }
}

int64_t cl_send_bytes(const cl_op *o, int iter) {
  return o->flags & CL_CHUNKED ? bs_tree_chunk_size(o->bytes, o->n, iter) : o->bytes;
}
