/*
 * actor.c — the SimGrid transport (transport.h): one SimGrid actor per
 * simulated rank runs its program through the rank interpreter (rank.c),
 * which calls here for what takes time, and every call blocks until that time
 * has passed (SIM_DONE). SEND/RECV are asynchronous communications on one
 * mailbox per ordered pair of actors, whose payload carries the tag and size
 * that the interpreter's WAIT checks; a send that pays the profile's per-send
 * base cost runs in an actor of its own; COLL starts the collective's actor
 * (coll.c); WAIT waits for the messages and joins the actors; COMPUTE sleeps
 * for its duration, or executes on the shared CPU of the host topology.
 */
#include "sim/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/mailbox.h>

/* The SimGrid transport's own state of a rank: SimGrid's objects behind its handles (point.h's
 * shared state holds none), its mailboxes, and the order of its base-paying sends. */
struct sim_sg_rank {
  int nmbc;
  struct {
    int peer, dir; /* slot of the peer; 0 send (me -> peer), 1 recv (peer -> me) */
    sg_mailbox_t mb;
  } mbc[MAX_PEERS];
  /* sends that pay p2p.base_s, per route (0 intra-node, 1 inter-node): how many were posted and how
   * many have reached their mailbox; their actors put them in post order */
  int64_t p2p_posted[2], p2p_put[2];
  sg_comm_t comm[MAX_HANDLES]; /* a SEND's or RECV's communication */
  sg_actor_t act[MAX_HANDLES]; /* a COLL's actor, or a base-paying SEND's (referenced until joined) */
};

static sg_mailbox_t mailbox(sim_sg_rank *g, rank_state *rs, int peer_slot, int dir) {
  for (int i = 0; i < g->nmbc; i++)
    if (g->mbc[i].peer == peer_slot && g->mbc[i].dir == dir) return g->mbc[i].mb;
  char name[48];
  int src = dir ? peer_slot : rs->slot, dst = dir ? rs->slot : peer_slot;
  snprintf(name, sizeof name, "p%d:%d", src, dst);
  sg_mailbox_t mb = sg_mailbox_by_name(name);
  if (g->nmbc < MAX_PEERS) {
    g->mbc[g->nmbc].peer = peer_slot;
    g->mbc[g->nmbc].dir = dir;
    g->mbc[g->nmbc++].mb = mb;
  }
  return mb;
}

/*
 * A SEND that pays the profile's per-send base cost (p2p.*.base_s): its own actor sleeps the
 * base, then moves the message and accounts it as wait_each does, while the rank goes on (an
 * ncclSend returns at once; its kernel starts the transfer after the call's fixed cost). The
 * rank's WAIT joins the actor.
 */
typedef struct {
  rank_state *rs;
  sim_sg_rank *g;
  int ps, peer, tag, route;
  int64_t seq;   /* the send's number among the rank's base-paying sends on its route */
  int64_t bytes; /* the message's size, for every byte counter */
  uint64_t wire; /* the size SimGrid moves: bytes / p2p efficiency */
  double base, t_post;
} p2p_job;

static void p2p_send_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  p2p_job *job = sg_actor_self_get_data();
  rank_state *rs = job->rs;
  sim_ctx *c = rs->ctx;
  sg_actor_sleep_for(job->base);
  /* Messages of a pair must reach the mailbox in post order. Sends on one route pay the same
   * base, so an earlier one wakes no later than this one: at most a tie at this instant, which
   * yielding resolves without advancing the clock. */
  while (job->g->p2p_put[job->route] != job->seq) sg_actor_yield();
  double t0 = simgrid_get_clock();
  sg_comm_t comm =
    sg_mailbox_put_async(mailbox(job->g, rs, job->ps, 0), sim_msg_encode(job->tag, job->bytes), job->wire);
  job->g->p2p_put[job->route]++;
  sg_comm_wait(comm);
  double t = simgrid_get_clock();
  if (c->nlinks || c->trace) {
    sim_link_account(c, c->hosts[rs->slot], c->hosts[job->ps], job->bytes, t - t0);
    char nm[48];
    snprintf(nm, sizeof nm, "send to %d", job->peer);
    sim_trace_event(c, nm, rs->rank, rs->node, job->t_post, t, "comm");
  }
  free(job);
}

static double sg_now(void *eng, const rank_state *rs) {
  (void)eng;
  (void)rs;
  return simgrid_get_clock();
}

static int sg_send(void *eng, rank_state *rs, int hd, int ps) {
  sim_sg_rank *g = eng;
  sim_ctx *c = rs->ctx;
  handle *h = &rs->h[hd];
  int w = node_of_rank(c, rs->rank) != node_of_rank(c, h->peer); /* 0 intra-node, 1 inter-node */
  uint64_t wire = sim_p2p_wire_bytes(c->prof, w, h->bytes);
  double base = c->prof ? c->prof->p2p_base_s[w] : 0;
  g->act[hd] = NULL;
  g->comm[hd] = NULL;
  if (base > 0) {
    p2p_job *job = malloc(sizeof *job);
    if (!job) {
      sim_error(c, "out of memory");
      return -1;
    }
    *job = (p2p_job){rs, g, ps, h->peer, h->tag, w, g->p2p_posted[w]++, h->bytes, wire, base, h->t_post};
    char name[40];
    snprintf(name, sizeof name, "send%d.%lld", rs->slot, (long long)rs->op_index);
    sg_actor_t a = sg_actor_init(name, c->hosts[rs->slot]);
    sg_actor_ref(a);
    sg_actor_set_data(a, job);
    sg_actor_start_(a, p2p_send_main, 0, NULL);
    g->act[hd] = a;
  } else {
    g->comm[hd] = sg_mailbox_put_async(mailbox(g, rs, ps, 0), sim_msg_encode(h->tag, h->bytes), wire);
  }
  return SIM_DONE;
}

static int sg_recv(void *eng, rank_state *rs, int hd, int ps) {
  sim_sg_rank *g = eng;
  handle *h = &rs->h[hd];
  g->act[hd] = NULL;
  h->rx = NULL;
  g->comm[hd] = sg_mailbox_get_async(mailbox(g, rs, ps, 1), &h->rx);
  return SIM_DONE;
}

static int sg_coll(void *eng, rank_state *rs, const bs_op *op) {
  sim_sg_rank *g = eng;
  sg_actor_t a = sim_coll_start(rs, op->u.coll.kind, &op->u.coll.group, op->u.coll.bytes, rs->h[op->handle].coll_seq);
  if (!a) return -1;
  g->act[op->handle] = a;
  return SIM_DONE;
}

/* The communications of a WAIT one at a time, to know when each finished (links, trace). */
static void wait_each(rank_state *rs, sg_comm_t *comms, int *which, int nc) {
  sim_ctx *c = rs->ctx;
  int left = nc;
  while (left > 0) {
    ssize_t k = sg_comm_wait_any(comms, (size_t)left);
    if (k < 0) break;
    handle *h = &rs->h[which[k]];
    double t = simgrid_get_clock();
    if (h->kind == H_SEND) {
      sim_link_account(c, c->hosts[rs->slot], host_of(c, h->peer), h->bytes, t - h->t_post);
      char nm[48];
      snprintf(nm, sizeof nm, "send to %d", h->peer);
      sim_trace_event(c, nm, rs->rank, rs->node, h->t_post, t, "comm");
    }
    comms[k] = comms[left - 1];
    which[k] = which[left - 1];
    which[left - 1] = (int)(h - rs->h);
    left--;
  }
}

/* Waits for the WAIT's messages, then joins its collectives and base-paying sends in list order;
 * *last: the one that finished last (the last message, or a join that moved the clock). */
static int sg_wait(void *eng, rank_state *rs, int *last) {
  sim_sg_rank *g = eng;
  sim_ctx *c = rs->ctx;
  sg_comm_t comms[BS_MAX_WAIT];
  int which[BS_MAX_WAIT], nc = 0;
  for (int i = 0; i < rs->nwait; i++) {
    int hd = rs->wait[i];
    if (rs->h[hd].kind == H_COLL || g->act[hd]) continue; /* joined below */
    which[nc] = hd;
    comms[nc++] = g->comm[hd];
  }
  /* explain: messages on routes of different classes are waited one at a time, to know which finished last */
  int mixed = 0;
  for (int i = 1; i < nc && !mixed; i++)
    mixed = sim_handle_link(rs, &rs->h[which[i]]) != sim_handle_link(rs, &rs->h[which[0]]);
  if (c->nlinks || c->trace || mixed) wait_each(rs, comms, which, nc);
  else if (nc) sg_comm_wait_all(comms, (size_t)nc);
  *last = nc ? which[0] : -1; /* wait_each puts the last first; else all share a class */
  for (int i = 0; i < rs->nwait; i++) {
    int hd = rs->wait[i];
    const handle *h = &rs->h[hd];
    if (!g->act[hd]) continue;           /* a message, or an actor joined already (listed twice) */
    double before = simgrid_get_clock(); /* a join that moves the clock finished after all before it */
    if (h->kind == H_COLL) {
      rs->blk_kind = 2;
      rs->blk_post_op = h->op_index;
    }
    sg_actor_join(g->act[hd], -1);
    sg_actor_unref(g->act[hd]);
    g->act[hd] = NULL;
    if (*last < 0 || simgrid_get_clock() > before) *last = rs->wait[i];
  }
  return SIM_DONE;
}

static int sg_compute(void *eng, rank_state *rs, double d) {
  (void)eng;
  sim_ctx *c = rs->ctx;
  if (c->shared_host) {
    /* Profile times are per rank with every rank busy, scaled to the whole CPU
     * (calib: t_eff = t / ranks), so d x host_speed is the work. A rank with T
     * threads never runs on more than T of the C cores, even when the others
     * wait: its execution is bounded at T / C of the host. */
    sg_exec_t e = sg_actor_exec_init(d * c->host_speed);
    sg_exec_set_bound(e, c->exec_bound);
    sg_exec_start(e);
    sg_exec_wait(e);
  } else {
    sg_actor_sleep_for(d);
  }
  return SIM_DONE;
}

static const sim_transport simgrid_transport = {sg_now, sg_send, sg_recv, sg_coll, sg_compute, sg_wait};

static void rank_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  rank_state *rs = sg_actor_self_get_data();
  sim_rank_run(rs, &simgrid_transport, &rs->ctx->sg[rs->slot]);
}

void sim_start_ranks(sim_ctx *c) {
  free(c->sg);
  c->sg = calloc((size_t)c->A, sizeof *c->sg);
  if (!c->sg) {
    sim_error(c, "out of memory");
    return;
  }
  for (int s = 0; s < c->A; s++) {
    char name[24];
    snprintf(name, sizeof name, "rank%d", s);
    sg_actor_t a = sg_actor_init(name, c->hosts[s]);
    sg_actor_set_data(a, &c->rs[s]);
    sg_actor_start_(a, rank_main, 0, NULL);
  }
}
