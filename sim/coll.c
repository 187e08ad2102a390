/*
 * coll.c — a COLL op as SimGrid activity. Each member's part is lowered once (coll_lower.h) into a
 * program of primitive steps, the same one the direct engine runs (direct_coll.c); here an actor of
 * its own (started by the rank actor, joined by its WAIT) runs the program's first thread, and
 * CL_SPAWN starts the others (a tree's four directions) as actors of their own and joins them.
 * Receives and sends are S4U asynchronous gets and puts; waits, sleeps and semaphores are S4U's.
 *
 * Groups are written in real ranks; mailboxes are named by actor slots, so a folded run folds them.
 */
#include "sim/point.h"
#include "sim/coll_lower.h"

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

/* One thread of a lowered part, run by an actor. */
typedef struct {
  rank_state *rs;
  const cl_prog *p;
  int k;
  sg_sem_t *sem;
} coll_thread;

static int payload; /* SimGrid aborts on NULL payloads */

static sg_mailbox_t mailbox(const sim_ctx *c, int seq, const cl_op *o, int from_rank, int to_rank) {
  char nm[64];
  snprintf(nm, sizeof nm, "c%d.%d.%d:%d:%d", seq, o->box, o->ch, slot_of(c, from_rank), slot_of(c, to_rank));
  return sg_mailbox_by_name(nm);
}

static void thread_main(int argc, char **argv);

/* An actor running fn with data on host, referenced for the caller's join. */
static sg_actor_t start(const char *name, sg_host_t host, void (*fn)(int, char **), void *data) {
  sg_actor_t a = sg_actor_init(name, host);
  sg_actor_ref(a);
  sg_actor_set_data(a, data);
  sg_actor_start_(a, fn, 0, NULL);
  return a;
}

/* Starts threads 1.. of p, each an actor of its own, and joins them. */
static void spawn(coll_thread *self) {
  const cl_prog *p = self->p;
  rank_state *rs = self->rs;
  sg_sem_t sem[CL_MAX_SEMS];
  for (int i = 0; i < CL_MAX_SEMS; i++) sem[i] = sg_sem_init(0);
  coll_thread th[CL_MAX_THREADS];
  sg_actor_t a[CL_MAX_THREADS];
  for (int k = 1; k < p->nth; k++) {
    th[k] = (coll_thread){rs, p, k, sem};
    char name[48];
    snprintf(name, sizeof name, "coll%d.%d.%s", rs->slot, p->seq, p->th[k].tag);
    a[k] = start(name, rs->ctx->hosts[rs->slot], thread_main, &th[k]);
  }
  for (int k = 1; k < p->nth; k++) {
    sg_actor_join(a[k], -1);
    sg_actor_unref(a[k]);
  }
  for (int i = 0; i < CL_MAX_SEMS; i++) sg_sem_destroy(sem[i]);
}

/* Waits for the posted transfers that flags name (in the order they were posted) and forgets them. */
static void wait_posted(sg_comm_t *cm, char *recv, int *n, sg_comm_t *w, int flags) {
  int nw = 0, keep = 0;
  for (int i = 0; i < *n; i++) {
    if (flags & (recv[i] ? CL_W_RECV : CL_W_SEND)) w[nw++] = cm[i];
    else {
      cm[keep] = cm[i];
      recv[keep++] = recv[i];
    }
  }
  *n = keep;
  if (nw == 1 && (flags & CL_W_ONE)) sg_comm_wait(w[0]);
  else if (nw) sg_comm_wait_all(w, (size_t)nw);
}

/* Runs thread k of the lowered part, step by step. */
static void run_thread(coll_thread *self) {
  const cl_prog *p = self->p;
  rank_state *rs = self->rs;
  sim_ctx *c = rs->ctx;
  int max = p->th[self->k].posts, n = 0;
  sg_comm_t *cm = malloc(sizeof *cm * 2 * (size_t)(max ? max : 1));
  char *recv = malloc((size_t)(max ? max : 1));
  if (!cm || !recv) {
    sim_error(c, "out of memory");
    free(cm);
    free(recv);
    return;
  }
  void *rx;
  double t0 = 0;
  cl_cursor cur = cl_begin(p, self->k);
  for (const cl_op *o; (o = cl_next(p, self->k, &cur)); cl_done(p, &cur)) {
    switch (o->kind) {
    case CL_RECV:
    case CL_SEND:
      if (n == max) { /* never: posts are bounded by the thread's */
        sim_error(c, "internal: a collective's thread posts more than %d transfers", max);
        goto out;
      }
      recv[n] = o->kind == CL_RECV;
      if (recv[n]) cm[n++] = sg_mailbox_get_async(mailbox(c, p->seq, o, o->peer, rs->rank), &rx);
      else {
        int64_t b = cl_send_bytes(o, cur.iter);
        cm[n++] = sg_mailbox_put_async(mailbox(c, p->seq, o, rs->rank, o->peer), &payload, b);
        if (o->flags & CL_ACCT) sim_account_sent(rs, o->peer, b);
        if (o->flags & CL_EV) c->events++;
      }
      break;
    case CL_WAIT: wait_posted(cm, recv, &n, cm + max, o->flags); break;
    case CL_SLEEP: sg_actor_sleep_for(o->t); break;
    case CL_ACCOUNT: sim_account_sent(rs, o->peer, o->bytes); break;
    case CL_EVENT: c->events++; break;
    case CL_SEM_POST: sg_sem_release(self->sem[o->ch]); break;
    case CL_SEM_TAKE: sg_sem_acquire(self->sem[o->ch]); break;
    case CL_MARK: t0 = simgrid_get_clock(); break;
    case CL_FLOOR: {
      double left = t0 + o->t - simgrid_get_clock();
      if (left > 0) sg_actor_sleep_for(left);
      break;
    }
    case CL_SPAWN: spawn(self); break;
    default: break;
    }
  }
out:
  free(cm);
  free(recv);
}

static void thread_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  run_thread(sg_actor_self_get_data());
}

/* The actor of one member's part of a collective: its lowered program's first thread. */
static void coll_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  coll_job *job = sg_actor_self_get_data();
  rank_state *rs = job->rs;
  cl_prog p = {0};
  if (cl_lower(rs->ctx, rs, job->kind, &job->group, job->bytes, job->seq, &p) == 0) {
    coll_thread self = {rs, &p, 0, NULL};
    run_thread(&self);
    cl_prog_free(&p);
  }
  free(job);
}

sg_actor_t sim_coll_start(rank_state *rs, bs_coll_kind kind, const bs_group *g, int64_t bytes, int seq) {
  coll_job *job = malloc(sizeof *job);
  if (!job) {
    sim_error(rs->ctx, "out of memory");
    return NULL;
  }
  *job = (coll_job){rs, kind, *g, bytes, seq};
  char name[32];
  snprintf(name, sizeof name, "coll%d.%d", rs->slot, job->seq);
  return start(name, rs->ctx->hosts[rs->slot], coll_main, job);
}
