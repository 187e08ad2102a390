/*
 * coll_lower.h — a member's part of a COLL written once, as a program of primitive steps that both
 * engines run: the SimGrid actors (coll.c) and the direct engine's state machine (direct_coll.c).
 * Every algorithm and model is lowered here, from the member's setup (coll_setup.h):
 *
 *   base       the profile's per-call cost (collectives.base_s): time, first;
 *   ring       NCCL's ring per channel: a receive from the previous member and a send to the next,
 *              waited together, `steps` times (steps), or once with every step's bytes and then
 *              the rest of the lockstep time (flow), or that time alone (analytic);
 *   tree       NCCL's double binary tree: per tree and direction a thread of its own, reducing up
 *              and broadcasting down in pipelined chunks (one in flight behind the one received;
 *              the root's reduced chunks pass up -> down through a semaphore), or time alone;
 *   all-to-all every pair at once, or its alpha-beta time alone;
 *   binomial   Open MPI libnbc's allreduce: reduce rounds to member 0, then the broadcast back.
 *
 * A program promises the exact order of posts, waits, counts and times the actors of coll.c ran
 * before it existed, so the two engines, and the predictions, stay as they were.
 */
#ifndef BURSTSIM_SIM_COLL_LOWER_H
#define BURSTSIM_SIM_COLL_LOWER_H

#include <stdint.h>
#include "sim/coll_algo.h"
#include "sim/point.h"

/* The primitive steps. */
typedef enum {
  CL_RECV = 0, /* post a receive from peer on mailbox (box, ch) */
  CL_SEND,     /* post a send of bytes to peer (CL_CHUNKED: chunk `iteration` of bytes in n chunks) */
  CL_WAIT,     /* wait for the posted receives and/or sends (flags: CL_W_*) */
  CL_SLEEP,    /* take time t */
  CL_ACCOUNT,  /* count bytes as sent to peer */
  CL_EVENT,    /* count one event */
  CL_SEM_POST, /* release semaphore ch */
  CL_SEM_TAKE, /* acquire semaphore ch */
  CL_MARK,     /* remember the current time */
  CL_FLOOR,    /* take the rest of t since the mark, if any */
  CL_LOOP,     /* run the next n steps `bytes` times (not nested) */
  CL_SPAWN     /* start threads 1.. of the program and wait for them all */
} cl_kind;

/* Flags of a send: count its bytes to the peer, count an event, size it as a tree chunk. */
enum { CL_ACCT = 1, CL_EV = 2, CL_CHUNKED = 4 };
/* Flags of a wait: which posts, and whether the engine waits on one transfer as one (not a set). */
enum { CL_W_RECV = 1, CL_W_SEND = 2, CL_W_ONE = 4 };
/* Mailbox families: a transfer meets its other side on (box, ch, seq, from slot, to slot). */
enum { CL_BOX_A2A = 1, CL_BOX_RING, CL_BOX_TREE_UP, CL_BOX_TREE_DOWN, CL_BOX_BIN_UP, CL_BOX_BIN_DOWN };

typedef struct {
  uint8_t kind, box, flags;
  int ch;        /* channel, tree or semaphore; -1 none */
  int peer;      /* real rank */
  int n;         /* LOOP: steps in the body; CHUNKED: chunks */
  int64_t bytes; /* SEND, ACCOUNT; LOOP: times */
  double t;      /* SLEEP, FLOOR */
} cl_op;

#define CL_MAX_THREADS 5 /* the first, and a tree's two trees up and down */
#define CL_MAX_SEMS 2    /* a tree's roots, up -> down */

/* A thread: the steps [first, first + nop) of the program. */
typedef struct {
  int first, nop;
  int posts; /* the most posts it has waiting at once */
  char tag[8];
} cl_thread;

/* One member's lowered part: thread 0 runs first; CL_SPAWN starts the others. */
typedef struct {
  int seq; /* the member's number of the collective */
  int nth;
  cl_thread th[CL_MAX_THREADS];
  cl_op *op;
  int nop, cap;
} cl_prog;

/* Lowers rank rs's part of the collective (kind, g, bytes), its seq-th: 0 with *p to run (free it
 * with cl_prog_free), 1 nothing to run (a group of one), -1 failed (c->error). p->op and p->cap come
 * in set: NULL and 0, or the steps buffer of a program done with, which the new one reuses (the
 * direct engine lowers a program at every call of every member); the rest of *p is written. */
int cl_lower(sim_ctx *c, rank_state *rs, bs_coll_kind kind, const bs_group *g, int64_t bytes, int seq, cl_prog *p);
void cl_prog_free(cl_prog *p);

/* Where a thread stands: its step, and the loop it is in (-1 none) at which iteration. */
typedef struct {
  int pc, loop, iter;
} cl_cursor;

/* Thread k's cursor at its start. */
cl_cursor cl_begin(const cl_prog *p, int k);
/* The step to run at cur (loops are entered and skipped here, so it is never a CL_LOOP), or NULL
 * at the thread's end. */
const cl_op *cl_next(const cl_prog *p, int k, cl_cursor *cur);
/* The step at cur is done: on to the next one (back to the loop's start after its last step). */
void cl_done(const cl_prog *p, cl_cursor *cur);
/* The bytes of send o at loop iteration iter. */
int64_t cl_send_bytes(const cl_op *o, int iter);

#endif
