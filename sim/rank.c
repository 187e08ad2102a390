/*
 * rank.c — the rank interpreter (transport.h): a simulated rank's ops handled
 * in one place, whichever transport moves its messages and its time (SimGrid's
 * actors, actor.c; the direct event loop, direct.c; the search's zero-time
 * walk, walk.c). The op switch, the checks
 * of a SEND, RECV and WAIT and their messages, a COMPUTE's duration (the
 * profile's time times cluster.straggler's factor), the bytes a message counts
 * (sent, received, by group), the figures at the end of a COMPUTE and of a
 * WAIT (compute, exposed, time_s.wait_for_peers, explain's parts, the trace,
 * a collective's last arrival), a COLL posted once (rankops.c's
 * sim_op_post_coll) before its transport moves it, and the end of the program
 * are here; what an op does to the rank's own
 * state is rankops.c's. It is resumable: a transport that cannot finish a
 * COMPUTE or WAIT at once suspends the rank and resumes it later
 * (sim_rank_resume), so that the engines give the same figures.
 */
#include "sim/transport.h"

#include <stdio.h>
#include <string.h>

enum { RUN = 0, IN_COMPUTE, IN_WAIT };

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

/* A SEND or RECV: checked, matched, its bytes counted, then moved by the transport. */
static int post_p2p(rank_state *rs, const sim_transport *tp, void *eng, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  int hd = op->handle, peer = op->u.p2p.peer;
  if (sim_op_post_p2p(rs, op, tp->now(eng, rs))) return -1;
  handle *h = &rs->h[hd];
  int ps = slot_of(c, peer);
  sim_note_match(rs, ps, op->kind == BS_OP_SEND ? 0 : 1, hd);
  if (op->kind == BS_OP_RECV) {
    h->kind = H_RECV;
    sim_add_bytes(rs, &rs->recvd, h->bytes, "bytes received");
    return tp->recv(eng, rs, hd, ps);
  }
  h->kind = H_SEND;
  sim_account_sent(rs, peer, h->bytes);
  if (c->mesh.size[0] > 0) {
    int k = bs_mesh_pair_kind(&c->mesh, rs->rank, peer);
    if (k >= 0) rs->by_group[k] += h->bytes;
  }
  c->events++;
  return tp->send(eng, rs, hd, ps);
}

/* The COMPUTE that began at rs->t0 ended at t1 (op: it, for the trace's name; NULL when resumed, a
 * transport that suspends runs without a trace). */
static void compute_end(rank_state *rs, const bs_op *op, double t1) {
  sim_ctx *c = rs->ctx;
  double t0 = rs->t0;
  rs->compute += t1 - t0;
  bs_explain_compute(&rs->explain, rs->kernel, t1 - t0, c->prof->kernel[rs->kernel].launch_s);
  if (c->trace && op) {
    const bs_compute *k = &op->u.compute;
    char nm[80];
    if (k->label) snprintf(nm, sizeof nm, "%s", k->label);
    else if (k->kernel <= BS_K_ATTN_BWD_UNFUSED && op->step >= 0)
      snprintf(nm, sizeof nm, "attention %s, step %d", k->kernel <= BS_K_ATTN_FWD_UNFUSED ? "forward" : "backward",
               op->step);
    else snprintf(nm, sizeof nm, "%s", bs_kernel_name(k->kernel));
    sim_trace_event(c, nm, rs->rank, rs->node, t0, t1, "compute");
  }
}

static int op_compute(rank_state *rs, const sim_transport *tp, void *eng, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  char err[256];
  double d = bs_profile_kernel_time(c->prof, &op->u.compute, c->cfg->model.dtype, err, sizeof err);
  if (d < 0) {
    if (!c->error[0]) snprintf(c->cause, sizeof c->cause, "%s", err);
    sim_error(c, "rank %d op #%lld: %s", rs->rank, (long long)rs->op_index, err);
    return -1;
  }
  d *= sim_compute_factor(c->cfg, rs->rank); /* cluster.straggler */
  c->events++;
  rs->t0 = tp->now(eng, rs);
  rs->kernel = op->u.compute.kernel;
  int rc = tp->compute(eng, rs, d);
  if (rc == SIM_SUSPENDED) rs->run = IN_COMPUTE;
  if (rc) return rc;
  compute_end(rs, op, tp->now(eng, rs));
  return 0;
}

/* A WAIT's handles checked, and where the rank blocks noted for a deadlock's message: its first
 * point-to-point handle, or its first collective when it waits for collectives alone. */
static int wait_begin(rank_state *rs, const bs_op *op, double now) {
  sim_ctx *c = rs->ctx;
  int n = op->u.wait.n;
  if (n < 0 || n > BS_MAX_WAIT) {
    sim_error(c, "rank %d op #%lld: WAIT on %d handles", rs->rank, (long long)rs->op_index, n);
    return -1;
  }
  rs->nwait = n;
  memcpy(rs->wait, op->u.wait.handles, (size_t)n * sizeof *rs->wait);
  rs->t0 = now;
  rs->blk_kind = 1;
  rs->blk_op = rs->op_index;
  rs->blk_n = n;
  rs->blk_peer = -1;
  for (int i = 0; i < n; i++) {
    int hd = op->u.wait.handles[i];
    if (hd < 0 || hd >= MAX_HANDLES || rs->h[hd].kind == H_FREE) {
      sim_error(c, "rank %d op #%lld: WAIT on handle %d that no pending operation created", rs->rank,
                (long long)rs->op_index, hd);
      return -1;
    }
    const handle *h = &rs->h[hd];
    if (h->kind == H_COLL) {
      if (rs->blk_peer < 0 && rs->blk_kind != 2) {
        rs->blk_kind = 2;
        rs->blk_post_op = h->op_index;
      }
    } else if (rs->blk_peer < 0) {
      rs->blk_kind = 1;
      rs->blk_send = h->kind == H_SEND;
      rs->blk_peer = h->peer;
      rs->blk_tag = h->tag;
      rs->blk_step = h->step;
      rs->blk_post_op = h->op_index;
    }
  }
  return 0;
}

/* The WAIT's handles all done at t1, handle `last` (-1: none) the one that finished last: the
 * RECVs' payloads checked, the handles freed, the rank's exposed time, its wait for peers (until
 * the last peer had posted), explain's parts and the trace's event. */
static int wait_end(rank_state *rs, double t1, int last) {
  sim_ctx *c = rs->ctx;
  double t0 = rs->t0, ready = t0; /* the last peer's post: before it the rank waits for peers */
  handle lh = last >= 0 ? rs->h[last] : (handle){0};
  char nm[80] = "wait";
  if (c->trace && rs->nwait > 0 && rs->h[rs->wait[0]].kind != H_FREE) wait_name(rs, &rs->h[rs->wait[0]], nm, sizeof nm);
  for (int i = 0; i < rs->nwait; i++) {
    handle *h = &rs->h[rs->wait[i]];
    if (h->kind == H_FREE) continue; /* listed twice */
    if (h->kind == H_COLL) {
      double a = coll_last_arrival(rs, h);
      if (a > ready) ready = a;
    } else {
      if (h->kind == H_RECV && sim_check_recv(rs, h)) {
        h->kind = H_FREE;
        return -1;
      }
      if (h->t_match > ready) ready = h->t_match;
    }
    h->kind = H_FREE;
  }
  rs->blk_kind = 0;
  rs->exposed += t1 - t0;
  rs->peer_wait += (ready < t1 ? ready : t1) - t0;
  bs_explain_wait(&rs->explain, t0, ready, t1, last >= 0 && t1 > ready ? sim_handle_link(rs, &lh) : BS_XL_OTHER);
  if (t1 > t0) sim_trace_event(c, nm, rs->rank, rs->node, t0, t1, "wait");
  return 0;
}

static int op_wait(rank_state *rs, const sim_transport *tp, void *eng, const bs_op *op) {
  if (wait_begin(rs, op, tp->now(eng, rs))) return -1;
  int last = -1, rc = tp->wait(eng, rs, &last);
  if (rc == SIM_SUSPENDED) rs->run = IN_WAIT;
  if (rc) return rc;
  return wait_end(rs, tp->now(eng, rs), last);
}

static int do_op(rank_state *rs, const sim_transport *tp, void *eng, const bs_op *op) {
  switch (op->kind) {
  case BS_OP_ALLOC: return sim_op_alloc(rs, op);
  case BS_OP_FREE: return sim_op_free(rs, op);
  case BS_OP_COMPUTE: return op_compute(rs, tp, eng, op);
  case BS_OP_SEND:
  case BS_OP_RECV: return post_p2p(rs, tp, eng, op);
  case BS_OP_COLL: return sim_op_post_coll(rs, op, tp->now(eng, rs)) ? -1 : tp->coll(eng, rs, op);
  case BS_OP_WAIT: return op_wait(rs, tp, eng, op);
  case BS_OP_PHASE: sim_op_phase(rs, op, tp->now(eng, rs)); return 0;
  default:
    sim_error(rs->ctx, "rank %d op #%lld: unknown op kind %d", rs->rank, (long long)rs->op_index, (int)op->kind);
    return -1;
  }
}

int sim_rank_run(rank_state *rs, const sim_transport *tp, void *eng) {
  sim_ctx *c = rs->ctx;
  bs_op buf;
  for (;;) {
    if (c->error[0]) return -1;
    const bs_op *op = &buf; /* the source's op in place when it offers it (not copied) */
    if (c->src->next_ref ? !(op = c->src->next_ref(rs->it)) : !c->src->next(rs->it, &buf)) break;
    int rc = do_op(rs, tp, eng, op);
    if (rc == SIM_SUSPENDED) {
      rs->op_index++;
      return 0;
    }
    if (rc) return rc;
    rs->op_index++;
  }
  if (c->error[0] || sim_check_end(rs)) return -1;
  rs->end = tp->now(eng, rs);
  rs->finished = 1;
  c->nfinished++;
  return 0;
}

int sim_rank_resume(rank_state *rs, const sim_transport *tp, void *eng, int last) {
  int was = rs->run;
  rs->run = RUN;
  if (was == IN_COMPUTE) compute_end(rs, NULL, tp->now(eng, rs));
  else if (was == IN_WAIT && wait_end(rs, tp->now(eng, rs), last)) return -1;
  return sim_rank_run(rs, tp, eng);
}
