/*
 * coll.c — a COLL op as SimGrid activity. Each member's part runs in an actor
 * of its own (started by the rank actor, joined by its WAIT), which reads like
 * the protocol it stands for:
 *
 *   ring       NCCL's ring, one per rail on whole dgx nodes (coll_algo.h): as
 *              lockstep steps, as one flow per hop and channel never faster
 *              than the lockstep time, or as that alpha-beta time alone;
 *   tree       NCCL's double binary tree (coll_shape.h): each half reduced up
 *              and broadcast down in pipelined chunks by two actors per tree,
 *              or timed as a whole (an all-rank tree's bytes are added once,
 *              when the result is filled, so that it folds);
 *   all-to-all every pair at once, as NCCL's grouped send/recv does;
 *   binomial   Open MPI libnbc's small allreduce (coll_shape.h), for a profile whose
 *              collectives.allreduce is open-mpi-libnbc: reduce rounds to the first
 *              member, then the broadcast back, each transfer the whole buffer.
 *
 * Every call first pays the profile's per-call base cost (collectives.base_s),
 * once, whatever the algorithm.
 *
 * Groups are written in real ranks; mailboxes are named by actor slots, so a
 * folded run folds them.
 */
#include "sim/point.h"
#include "sim/coll_algo.h"
#include "sim/coll_setup.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <simgrid/semaphore.h>

typedef struct {
  rank_state *rs;
  bs_coll_kind kind;
  bs_group group;
  int64_t bytes;
  int seq;
} coll_job;

static int payload; /* SimGrid aborts on NULL payloads */

/* ------------------------------------------------------------------ */
/* Tree allreduce                                                      */
/* ------------------------------------------------------------------ */

/* One direction of one tree of a tree allreduce, run by its own actor. */
typedef struct {
  rank_state *rs;
  int seq, tree, up; /* up: reduce towards the root; else broadcast down */
  int parent;        /* real rank, -1 at the root */
  int nchild, child[BS_TREE_MAX_CHILDREN];
  int64_t half;
  int chunks;
  sg_sem_t root_sem; /* the root's reduced chunks, up -> down */
} tree_part;

static sg_mailbox_t tree_mailbox(const tree_part *tp, int from_rank, int to_rank) {
  const sim_ctx *c = tp->rs->ctx;
  char nm[64];
  snprintf(nm, sizeof nm, "t%d.%d%c:%d:%d", tp->seq, tp->tree, tp->up ? 'u' : 'd', slot_of(c, from_rank),
           slot_of(c, to_rank));
  return sg_mailbox_by_name(nm);
}

static void tree_part_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  tree_part *tp = sg_actor_self_get_data();
  rank_state *rs = tp->rs;
  sim_ctx *c = rs->ctx;
  int me = rs->rank;
  sg_mailbox_t from_parent = NULL, to_parent = NULL, from_child[BS_TREE_MAX_CHILDREN], to_child[BS_TREE_MAX_CHILDREN];
  if (tp->parent >= 0) {
    from_parent = tree_mailbox(tp, tp->parent, me);
    to_parent = tree_mailbox(tp, me, tp->parent);
  }
  for (int k = 0; k < tp->nchild; k++) {
    from_child[k] = tree_mailbox(tp, tp->child[k], me);
    to_child[k] = tree_mailbox(tp, me, tp->child[k]);
  }
  /* One chunk in flight behind the one being received: the pipeline. */
  sg_comm_t out[BS_TREE_MAX_CHILDREN];
  int nout = 0;
  for (int ch = 0; ch < tp->chunks; ch++) {
    int64_t s = bs_tree_chunk_size(tp->half, tp->chunks, ch);
    if (tp->up) {
      sg_comm_t in[BS_TREE_MAX_CHILDREN];
      void *rx[BS_TREE_MAX_CHILDREN];
      for (int k = 0; k < tp->nchild; k++) in[k] = sg_mailbox_get_async(from_child[k], &rx[k]);
      if (tp->nchild) sg_comm_wait_all(in, (size_t)tp->nchild);
      if (tp->parent < 0) {
        sg_sem_release(tp->root_sem);
        continue;
      }
      if (nout) sg_comm_wait_all(out, (size_t)nout);
      out[0] = sg_mailbox_put_async(to_parent, &payload, s);
      nout = 1;
      sim_account_sent(rs, tp->parent, s);
      c->events++;
    } else {
      if (tp->parent < 0) sg_sem_acquire(tp->root_sem);
      else {
        void *rx;
        sg_comm_wait(sg_mailbox_get_async(from_parent, &rx));
      }
      if (nout) sg_comm_wait_all(out, (size_t)nout);
      for (int k = 0; k < tp->nchild; k++) {
        out[k] = sg_mailbox_put_async(to_child[k], &payload, s);
        sim_account_sent(rs, tp->child[k], s);
        c->events++;
      }
      nout = tp->nchild;
    }
  }
  if (nout) sg_comm_wait_all(out, (size_t)nout);
}

/* Tree allreduce as steps: each tree's half reduced up and broadcast down, chunk by chunk. */
static void tree_allreduce(rank_state *rs, const coll_job *job, int me, const int *node) {
  sim_ctx *c = rs->ctx;
  const bs_group *g = &job->group;
  int64_t half[2] = {job->bytes / 2, job->bytes - job->bytes / 2};
  tree_part tp[4];
  sg_actor_t a[4];
  sg_sem_t sem[2] = {sg_sem_init(0), sg_sem_init(0)};
  int na = 0;
  for (int t = 0; t < 2; t++) {
    if (half[t] < 1) continue;
    bs_tree_vertex v;
    if (bs_dtree_vertex(g->size, node, t, me, &v)) {
      sim_error(c, "out of memory");
      break;
    }
    for (int up = 1; up >= 0; up--) {
      tree_part *p = &tp[na];
      *p = (tree_part){rs,
                       job->seq,
                       t,
                       up,
                       v.parent >= 0 ? sim_member(g, v.parent) : -1,
                       v.nchild,
                       {0},
                       half[t],
                       bs_tree_chunks(half[t]),
                       sem[t]};
      for (int k = 0; k < v.nchild; k++) p->child[k] = sim_member(g, v.child[k]);
      char name[48];
      snprintf(name, sizeof name, "tree%d.%d.%d%c", rs->slot, job->seq, t, up ? 'u' : 'd');
      a[na] = sg_actor_init(name, rs->host);
      sg_actor_ref(a[na]);
      sg_actor_set_data(a[na], p);
      sg_actor_start_(a[na], tree_part_main, 0, NULL);
      na++;
    }
  }
  for (int i = 0; i < na; i++) {
    sg_actor_join(a[i], -1);
    sg_actor_unref(a[i]);
  }
  sg_sem_destroy(sem[0]);
  sg_sem_destroy(sem[1]);
}

/* Bytes a member sends in a tree allreduce (for the analytic option's accounting). */
static void tree_account(rank_state *rs, const coll_job *job, int me, const int *node) {
  const bs_group *g = &job->group;
  int64_t half[2] = {job->bytes / 2, job->bytes - job->bytes / 2};
  for (int t = 0; t < 2; t++) {
    bs_tree_vertex v;
    if (half[t] < 1 || bs_dtree_vertex(g->size, node, t, me, &v)) continue;
    if (v.parent >= 0) sim_account_sent(rs, sim_member(g, v.parent), half[t]);
    for (int k = 0; k < v.nchild; k++) sim_account_sent(rs, sim_member(g, v.child[k]), half[t]);
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
 * A tree allreduce: timed as a whole when analytic, or (flow) over every rank,
 * the same on every member so that it folds; otherwise the tree's steps.
 */
static void coll_tree(rank_state *rs, const coll_job *job, sim_coll_setup *s) {
  sim_ctx *c = rs->ctx;
  int whole = s->model != BS_COLL_STEPS && sim_whole_tree(c->G, &job->group);
  if (!whole && s->model != BS_COLL_ANALYTIC) {
    tree_allreduce(rs, job, s->me, s->node);
    return;
  }
  if (!whole) tree_account(rs, job, s->me, s->node);
  else if (rs->rank == job->group.first && sim_wtree_add(rs, job->bytes, &job->group)) return;
  if (s->t_tree < 0) s->t_tree = bs_tree_allreduce_time(s->n, s->node, job->bytes, &s->l);
  c->events++;
  sg_actor_sleep_for(s->t_tree > 0 ? s->t_tree : 0);
}

/* ------------------------------------------------------------------ */
/* All-to-all and ring                                                 */
/* ------------------------------------------------------------------ */

/* All-to-all: n-1 chunks out and in at once (analytic: through the same route class). */
static void coll_alltoall(rank_state *rs, const coll_job *job, const sim_coll_setup *s) {
  sim_ctx *c = rs->ctx;
  const bs_group *g = &job->group;
  int n = s->n, me = s->me;
  int64_t chunk = s->chunk;
  if (s->model == BS_COLL_ANALYTIC) {
    sg_host_t hb = host_of(c, sim_member(g, (me + 1) % n));
    double lat = sg_host_get_route_latency(rs->host, hb), bw = sg_host_get_route_bandwidth(rs->host, hb);
    for (int k = 1; k < n; k++) sim_account_sent(rs, sim_member(g, (me + k) % n), chunk);
    c->events++;
    sg_actor_sleep_for(lat + (double)chunk * (n - 1) / bw);
    return;
  }
  sg_comm_t *cm = malloc(sizeof *cm * 2 * (size_t)n);
  void **rx = malloc(sizeof *rx * (size_t)n);
  if (!cm || !rx) {
    sim_error(c, "out of memory");
    free(cm);
    free(rx);
    return;
  }
  char name[64];
  int k = 0;
  for (int d = 1; d < n; d++) {
    int to = sim_member(g, (me + d) % n), from = sim_member(g, (me + n - d) % n);
    snprintf(name, sizeof name, "c%d:%d:%d", job->seq, slot_of(c, from), rs->slot);
    cm[k++] = sg_mailbox_get_async(sg_mailbox_by_name(name), &rx[d]);
    snprintf(name, sizeof name, "c%d:%d:%d", job->seq, rs->slot, slot_of(c, to));
    cm[k++] = sg_mailbox_put_async(sg_mailbox_by_name(name), &payload, chunk);
    sim_account_sent(rs, to, chunk);
    c->events++;
  }
  sg_comm_wait_all(cm, (size_t)k);
  free(cm);
  free(rx);
}

/* The rings of one member: its share of every step's chunk, neighbours and mailboxes per channel. */
typedef struct {
  int nch;
  int next[BS_MAX_CHANNELS];
  int64_t part[BS_MAX_CHANNELS];
  sg_mailbox_t in[BS_MAX_CHANNELS], out[BS_MAX_CHANNELS];
} ring_side;

static void ring_open(rank_state *rs, const coll_job *job, const sim_coll_setup *s, ring_side *r) {
  sim_ctx *c = rs->ctx;
  const bs_group *g = &job->group;
  char name[64];
  r->nch = 0;
  for (int ch = 0; ch < s->C; ch++) {
    int64_t p = s->chunk / s->C + (ch < s->chunk % s->C);
    if (p < 1) continue;
    int k = r->nch++, prev = sim_member(g, sim_ring_peer(s->C, c->rpn, s->n, ch, s->me, -1));
    r->part[k] = p;
    r->next[k] = sim_member(g, sim_ring_peer(s->C, c->rpn, s->n, ch, s->me, +1));
    snprintf(name, sizeof name, "c%d.%d:%d:%d", job->seq, ch, slot_of(c, prev), rs->slot);
    r->in[k] = sg_mailbox_by_name(name);
    snprintf(name, sizeof name, "c%d.%d:%d:%d", job->seq, ch, rs->slot, slot_of(c, r->next[k]));
    r->out[k] = sg_mailbox_by_name(name);
  }
}

/* Every channel sends `times` parts to its next member and receives as much from its previous one. */
static void ring_exchange(rank_state *rs, const ring_side *r, int64_t times) {
  sg_comm_t cm[2 * BS_MAX_CHANNELS];
  void *rx[BS_MAX_CHANNELS];
  for (int k = 0; k < r->nch; k++) {
    cm[2 * k] = sg_mailbox_get_async(r->in[k], &rx[k]);
    cm[2 * k + 1] = sg_mailbox_put_async(r->out[k], &payload, r->part[k] * times);
    sim_account_sent(rs, r->next[k], r->part[k] * times);
    rs->ctx->events++;
  }
  sg_comm_wait_all(cm, 2 * (size_t)r->nch);
}

/* Rings: C channels, each carrying its share of every step's chunk. */
static void coll_ring(rank_state *rs, const coll_job *job, const sim_coll_setup *s) {
  sim_ctx *c = rs->ctx;
  ring_side r;
  ring_open(rs, job, s, &r);
  double t_ring = sim_ring_lockstep_time(&s->l, s->multi, s->steps, r.part[0]);
  if (s->model == BS_COLL_ANALYTIC) {
    for (int k = 0; k < r.nch; k++) sim_account_sent(rs, r.next[k], r.part[k] * s->steps);
    c->events++;
    sg_actor_sleep_for(t_ring);
  } else if (s->model == BS_COLL_FLOW) {
    double t0 = simgrid_get_clock();
    ring_exchange(rs, &r, s->steps);
    double left = t0 + t_ring - simgrid_get_clock();
    if (left > 0) sg_actor_sleep_for(left);
  } else {
    for (int step = 0; step < s->steps; step++) ring_exchange(rs, &r, 1);
  }
}

/* ------------------------------------------------------------------ */
/* Binomial allreduce (Open MPI libnbc)                                */
/* ------------------------------------------------------------------ */

static sg_mailbox_t binomial_mailbox(const sim_ctx *c, const coll_job *job, char phase, int from_rank, int to_rank) {
  char nm[64];
  snprintf(nm, sizeof nm, "b%d.%c:%d:%d", job->seq, phase, slot_of(c, from_rank), slot_of(c, to_rank));
  return sg_mailbox_by_name(nm);
}

/* The whole buffer up the binomial tree to member 0 round by round, then down again; the bytes
 * are counted as the runtime counts an allreduce (the ring convention: to the next member). */
static void coll_binomial(rank_state *rs, const coll_job *job, const sim_coll_setup *s) {
  sim_ctx *c = rs->ctx;
  const bs_group *g = &job->group;
  int me = rs->rank, rounds = bs_binomial_rounds(s->n), peer = -1;
  void *rx;
  for (int r = 1; r <= rounds; r++) {
    int d = bs_binomial_reduce_step(s->n, s->me, r, &peer);
    if (d > 0) sg_comm_wait(sg_mailbox_get_async(binomial_mailbox(c, job, 'u', sim_member(g, peer), me), &rx));
    if (d < 0)
      sg_comm_wait(sg_mailbox_put_async(binomial_mailbox(c, job, 'u', me, sim_member(g, peer)), &payload, job->bytes));
    if (d) c->events++;
    if (d < 0) break;
  }
  int parent = bs_binomial_bcast_parent(s->me), kids[32];
  if (parent >= 0) sg_comm_wait(sg_mailbox_get_async(binomial_mailbox(c, job, 'd', sim_member(g, parent), me), &rx));
  int nk = bs_binomial_bcast_children(s->n, s->me, kids);
  sg_comm_t out[32];
  for (int k = 0; k < nk; k++) {
    out[k] = sg_mailbox_put_async(binomial_mailbox(c, job, 'd', me, sim_member(g, kids[k])), &payload, job->bytes);
    c->events++;
  }
  if (nk) sg_comm_wait_all(out, (size_t)nk);
  sim_account_sent(rs, sim_member(g, (s->me + 1) % s->n), bs_coll_bytes_sent(job->kind, job->bytes, s->n));
}

/* ------------------------------------------------------------------ */
/* One member's part                                                   */
/* ------------------------------------------------------------------ */

/* The actor of one member's part of a collective. */
static void coll_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  coll_job *job = sg_actor_self_get_data();
  rank_state *rs = job->rs;
  sim_coll_setup s;
  if (sim_coll_prepare(rs->ctx, rs, job->kind, &job->group, job->bytes, &s) == 0) {
    /* The call's fixed cost (the profile's collectives.base_s), before any step. */
    double base = rs->ctx->prof ? rs->ctx->prof->coll_base_s : 0;
    if (base > 0) sg_actor_sleep_for(base);
    if (s.binomial) coll_binomial(rs, job, &s);
    else if (s.algo == BS_COLL_ALGO_TREE) coll_tree(rs, job, &s);
    else if (s.steps < 0) coll_alltoall(rs, job, &s);
    else coll_ring(rs, job, &s);
  }
  free(s.node);
  free(job);
}

sg_actor_t sim_coll_start(rank_state *rs, bs_coll_kind kind, const bs_group *g, int64_t bytes) {
  coll_job *job = malloc(sizeof *job);
  if (!job) {
    sim_error(rs->ctx, "out of memory");
    return NULL;
  }
  *job = (coll_job){rs, kind, *g, bytes, rs->coll_seq++};
  char name[32];
  snprintf(name, sizeof name, "coll%d.%d", rs->slot, job->seq);
  sg_actor_t a = sg_actor_init(name, rs->host);
  sg_actor_ref(a);
  sg_actor_set_data(a, job);
  sg_actor_start_(a, coll_main, 0, NULL);
  return a;
}
