/*
 * actor.c — the rank actor: one SimGrid actor per simulated rank iterates its
 * rank's plan and turns every op into SimGrid activity. ALLOC/FREE drive the
 * rank's memory counter (peak and its breakdown by class); SEND/RECV are
 * asynchronous communications on one mailbox per ordered pair of actors, whose
 * payload carries the tag and size so that a RECV checks what it got (messages
 * between a pair must match in order, tag and size, as NCCL requires); COLL
 * starts the collective's actor (coll.c); WAIT joins them; COMPUTE sleeps for
 * the profile's modelled duration, or executes on the shared CPU of the host
 * topology. Where a rank waits is kept, so that a deadlock names it (rankops.c). What an
 * op does to the rank's own state (memory, phases, matching, the RECV's check)
 * is in rankops.c, which the direct engine (direct.c) shares.
 */
#include "sim/point.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/mailbox.h>

static sg_mailbox_t mailbox(rank_state *rs, int peer_slot, int dir) {
  for (int i = 0; i < rs->nmbc; i++)
    if (rs->mbc[i].peer == peer_slot && rs->mbc[i].dir == dir) return rs->mbc[i].mb;
  char name[48];
  int src = dir ? peer_slot : rs->slot, dst = dir ? rs->slot : peer_slot;
  snprintf(name, sizeof name, "p%d:%d", src, dst);
  sg_mailbox_t mb = sg_mailbox_by_name(name);
  if (rs->nmbc < MAX_PEERS) rs->mbc[rs->nmbc++] = (mbcache){peer_slot, dir, mb};
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
  while (rs->p2p_put[job->route] != job->seq) sg_actor_yield();
  double t0 = simgrid_get_clock();
  sg_comm_t comm = sg_mailbox_put_async(mailbox(rs, job->ps, 0), sim_msg_encode(job->tag, job->bytes), job->wire);
  rs->p2p_put[job->route]++;
  sg_comm_wait(comm);
  double t = simgrid_get_clock();
  if (c->nlinks || c->trace) {
    sim_link_account(c, rs->host, c->rs[job->ps].host, job->bytes, t - t0);
    char nm[48];
    snprintf(nm, sizeof nm, "send to %d", job->peer);
    sim_trace_event(c, nm, rs->rank, rs->node, job->t_post, t, "comm");
  }
  free(job);
}

static int do_p2p(rank_state *rs, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  int hd = op->handle, peer = op->u.p2p.peer;
  if (sim_op_post_p2p(rs, op, simgrid_get_clock())) return -1;
  handle *h = &rs->h[hd];
  int ps = slot_of(c, peer);
  sim_note_match(rs, ps, op->kind == BS_OP_SEND ? 0 : 1, hd);
  if (op->kind == BS_OP_SEND) {
    h->kind = H_SEND;
    int w = node_of_rank(c, rs->rank) != node_of_rank(c, peer); /* 0 intra-node, 1 inter-node */
    uint64_t wire = sim_p2p_wire_bytes(c->prof, w, h->bytes);
    double base = c->prof ? c->prof->p2p_base_s[w] : 0;
    h->coll = NULL;
    h->comm = NULL;
    if (base > 0) {
      p2p_job *job = malloc(sizeof *job);
      if (!job) {
        sim_error(c, "out of memory");
        return -1;
      }
      *job = (p2p_job){rs, ps, peer, h->tag, w, rs->p2p_posted[w]++, h->bytes, wire, base, h->t_post};
      char name[40];
      snprintf(name, sizeof name, "send%d.%lld", rs->slot, (long long)rs->op_index);
      sg_actor_t a = sg_actor_init(name, rs->host);
      sg_actor_ref(a);
      sg_actor_set_data(a, job);
      sg_actor_start_(a, p2p_send_main, 0, NULL);
      h->coll = a;
    } else {
      h->comm = sg_mailbox_put_async(mailbox(rs, ps, 0), sim_msg_encode(h->tag, h->bytes), wire);
    }
    sim_account_sent(rs, peer, h->bytes);
    if (c->mesh.size[0] > 0) {
      int k = bs_mesh_pair_kind(&c->mesh, rs->rank, peer);
      if (k >= 0) rs->by_group[k] += h->bytes;
    }
    c->events++;
  } else {
    h->kind = H_RECV;
    h->coll = NULL;
    h->rx = NULL;
    h->comm = sg_mailbox_get_async(mailbox(rs, ps, 1), &h->rx);
    sim_add_bytes(rs, &rs->recvd, h->bytes, "bytes received");
  }
  return 0;
}

/* When the last member of a finished collective arrived at it (its members' COLL posts). */
static double coll_last_arrival(const rank_state *rs, const handle *h) {
  const sim_ctx *c = rs->ctx;
  double last = h->t_post;
  for (int i = 0; i < h->group.size; i++) {
    const rank_state *m = &c->rs[slot_of(c, h->group.first + h->group.stride * i)];
    if (h->coll_seq < m->coll_seq && m->coll_arr[h->coll_seq] > last) last = m->coll_arr[h->coll_seq];
  }
  return last;
}

static int do_coll(rank_state *rs, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  int hd = op->handle;
  const bs_group *g = &op->u.coll.group;
  if (sim_op_check_coll(rs, op)) return -1;
  if (sim_note_coll_arrival(rs, simgrid_get_clock())) return -1;
  int seq = rs->coll_seq;
  if (c->mesh.size[0] > 0) {
    int k = bs_mesh_group_kind(&c->mesh, g->first, g->stride, g->size);
    if (k >= 0) rs->by_group[k] += bs_coll_bytes_sent(op->u.coll.kind, op->u.coll.bytes, g->size);
  }
  sg_actor_t a = sim_coll_start(rs, op->u.coll.kind, g, op->u.coll.bytes);
  if (!a) return -1;
  handle *h = &rs->h[hd];
  h->coll_seq = seq;
  h->group = *g;
  h->ckind = op->u.coll.kind;
  h->kind = H_COLL;
  h->coll = a;
  h->t_post = simgrid_get_clock();
  h->op_index = rs->op_index;
  return 0;
}

/* Where the rank blocks, for a deadlock's message: the first point-to-point handle of the WAIT. */
static void note_blocked(rank_state *rs, int n, const int *which, int nc) {
  rs->blk_kind = 1;
  rs->blk_op = rs->op_index;
  rs->blk_n = n;
  rs->blk_peer = -1;
  if (nc) {
    const handle *h0 = &rs->h[which[0]];
    rs->blk_send = h0->kind == H_SEND;
    rs->blk_peer = h0->peer;
    rs->blk_tag = h0->tag;
    rs->blk_step = h0->step;
    rs->blk_post_op = h0->op_index;
  }
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
      sg_host_t dst = c->rs[slot_of(c, h->peer)].host;
      sim_link_account(c, rs->host, dst, h->bytes, t - h->t_post);
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

/* The trace's name of a wait: what its first handle is ("wait: dp x cp gradients reduce_scatter",
 * "wait: recv from 3, step 2"). */
static void wait_name(const rank_state *rs, const handle *h, char *nm, size_t n) {
  static const char *const kind[] = {"tp", "cp", "dp x cp gradients", "pp"};
  const sim_ctx *c = rs->ctx;
  if (h->kind == H_COLL) {
    int k = c->mesh.size[0] > 0 ? bs_mesh_group_kind(&c->mesh, h->group.first, h->group.stride, h->group.size) : -1;
    snprintf(nm, n, "wait: %s%s%s", k >= 0 ? kind[k] : "", k >= 0 ? " " : "", bs_coll_name((bs_coll_kind)h->ckind));
  } else if (h->step >= 0) {
    snprintf(nm, n, "wait: %s %d, step %d", h->kind == H_SEND ? "send to" : "recv from", h->peer, h->step);
  } else {
    snprintf(nm, n, "wait: %s %d", h->kind == H_SEND ? "send to" : "recv from", h->peer);
  }
}

static int do_wait(rank_state *rs, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  int n = op->u.wait.n;
  if (n < 0 || n > BS_MAX_WAIT) {
    sim_error(c, "rank %d op #%lld: WAIT on %d handles", rs->rank, (long long)rs->op_index, n);
    return -1;
  }
  sg_comm_t comms[BS_MAX_WAIT];
  int which[BS_MAX_WAIT], nc = 0;
  double t0 = simgrid_get_clock();
  char nm[80] = "wait";
  if (c->trace && n > 0 && op->u.wait.handles[0] >= 0 && op->u.wait.handles[0] < MAX_HANDLES &&
      rs->h[op->u.wait.handles[0]].kind != H_FREE)
    wait_name(rs, &rs->h[op->u.wait.handles[0]], nm, sizeof nm);
  for (int i = 0; i < n; i++) {
    int hd = op->u.wait.handles[i];
    if (hd < 0 || hd >= MAX_HANDLES || rs->h[hd].kind == H_FREE) {
      sim_error(c, "rank %d op #%lld: WAIT on handle %d that no pending operation created", rs->rank,
                (long long)rs->op_index, hd);
      return -1;
    }
    if (rs->h[hd].kind == H_COLL || rs->h[hd].coll) continue; /* joined below */
    which[nc] = hd;
    comms[nc++] = rs->h[hd].comm;
  }
  note_blocked(rs, n, which, nc);
  /* explain: messages on routes of different classes are waited one at a time, to know which finished last */
  int mixed = 0;
  for (int i = 1; i < nc && !mixed; i++)
    mixed = sim_handle_link(rs, &rs->h[which[i]]) != sim_handle_link(rs, &rs->h[which[0]]);
  if (c->nlinks || c->trace || mixed) wait_each(rs, comms, which, nc);
  else if (nc) sg_comm_wait_all(comms, (size_t)nc);
  handle last; /* one that finished last (wait_each puts it first; else all share a class), for explain */
  int have = nc > 0;
  if (have) last = rs->h[which[0]];
  double ready = t0; /* the last peer's post: before it the rank waits for peers, after it for transfers */
  for (int i = 0; i < n; i++) {
    int hd = op->u.wait.handles[i];
    handle *h = &rs->h[hd];
    double before = simgrid_get_clock(); /* a join that moves the clock finished after all before it */
    int joined = h->kind == H_COLL;
    if (h->kind == H_COLL) {
      rs->blk_kind = 2;
      rs->blk_post_op = h->op_index;
      sg_actor_join(h->coll, -1);
      sg_actor_unref(h->coll);
      double a = coll_last_arrival(rs, h);
      if (a > ready) ready = a;
    } else if (h->kind == H_SEND && h->coll) { /* a send that pays p2p.base_s: its actor */
      sg_actor_join(h->coll, -1);
      sg_actor_unref(h->coll);
      h->coll = NULL;
      joined = 1;
    } else if (h->kind == H_RECV && sim_check_recv(rs, h)) {
      h->kind = H_FREE;
      return -1;
    }
    /* read once the handle is done (a joined send's match may be stamped while it is joined) */
    double m = h->kind == H_COLL ? -1 : h->t_match;
    if (m > ready) ready = m;
    if (joined && (!have || simgrid_get_clock() > before)) {
      last = *h;
      have = 1;
    }
    h->kind = H_FREE;
  }
  rs->blk_kind = 0;
  double t1 = simgrid_get_clock();
  rs->exposed += t1 - t0;
  rs->peer_wait += (ready < t1 ? ready : t1) - t0;
  bs_explain_wait(&rs->explain, t0, ready, t1, have && t1 > ready ? sim_handle_link(rs, &last) : BS_XL_OTHER);
  if (t1 > t0) sim_trace_event(c, nm, rs->rank, rs->node, t0, t1, "wait");
  return 0;
}

static int do_compute(rank_state *rs, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  char err[256];
  double d = bs_profile_kernel_time(c->prof, &op->u.compute, c->cfg->model.dtype, err, sizeof err);
  if (d < 0) {
    sim_error(c, "rank %d op #%lld: %s", rs->rank, (long long)rs->op_index, err);
    return -1;
  }
  d *= sim_compute_factor(c->cfg, rs->rank); /* cluster.straggler */
  double t0 = simgrid_get_clock();
  c->events++;
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
  double t1 = simgrid_get_clock();
  rs->compute += t1 - t0;
  bs_explain_compute(&rs->explain, op->u.compute.kernel, t1 - t0, c->prof->kernel[op->u.compute.kernel].launch_s);
  if (c->trace) {
    const bs_compute *k = &op->u.compute;
    char nm[80];
    if (k->label) snprintf(nm, sizeof nm, "%s", k->label);
    else if (k->kernel <= BS_K_ATTN_BWD_UNFUSED && op->step >= 0)
      snprintf(nm, sizeof nm, "attention %s, step %d", k->kernel <= BS_K_ATTN_FWD_UNFUSED ? "forward" : "backward",
               op->step);
    else snprintf(nm, sizeof nm, "%s", bs_kernel_name(k->kernel));
    sim_trace_event(c, nm, rs->rank, rs->node, t0, t1, "compute");
  }
  return 0;
}

static int do_op(rank_state *rs, const bs_op *op) {
  switch (op->kind) {
  case BS_OP_ALLOC: return sim_op_alloc(rs, op);
  case BS_OP_FREE: return sim_op_free(rs, op);
  case BS_OP_COMPUTE: return do_compute(rs, op);
  case BS_OP_SEND:
  case BS_OP_RECV: return do_p2p(rs, op);
  case BS_OP_COLL: return do_coll(rs, op);
  case BS_OP_WAIT: return do_wait(rs, op);
  case BS_OP_PHASE: sim_op_phase(rs, op, simgrid_get_clock()); return 0;
  default:
    sim_error(rs->ctx, "rank %d op #%lld: unknown op kind %d", rs->rank, (long long)rs->op_index, (int)op->kind);
    return -1;
  }
}

static void rank_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  rank_state *rs = sg_actor_self_get_data();
  sim_ctx *c = rs->ctx;
  bs_op op;
  int rc = 0;
  while (!rc && !c->error[0] && c->src->next(rs->it, &op)) {
    rc = do_op(rs, &op);
    rs->op_index++;
  }
  if (rc || c->error[0] || sim_check_end(rs)) return;
  rs->end = simgrid_get_clock();
  rs->finished = 1;
  c->nfinished++;
}

void sim_start_ranks(sim_ctx *c) {
  for (int s = 0; s < c->A; s++) {
    char name[24];
    snprintf(name, sizeof name, "rank%d", s);
    sg_actor_t a = sg_actor_init(name, c->rs[s].host);
    sg_actor_set_data(a, &c->rs[s]);
    sg_actor_start_(a, rank_main, 0, NULL);
  }
}
