/*
 * transport.h — the seam between the one rank interpreter (rank.c) and what
 * moves a rank's messages and its time. The interpreter reads a rank's ops,
 * checks them, keeps its state (memory, handles, matching, byte counters, the
 * figures of a WAIT and of a COMPUTE) and calls a transport for what takes
 * time: a message posted, a collective posted, seconds of compute, a wait on
 * handles. A transport answers each call with SIM_DONE (the time has passed:
 * a blocking transport, the SimGrid actor of actor.c; or a zero-time one, the
 * search's walk.c) or SIM_SUSPENDED (it will call sim_rank_resume when the
 * time has passed: the event loop of direct.c; the walk's WAIT), SIM_DECLINED (the direct engine met what it does not model) or
 * -1 (the error recorded with sim_error). A new transport fills one table.
 */
#ifndef BURSTSIM_SIM_TRANSPORT_H
#define BURSTSIM_SIM_TRANSPORT_H

#include "sim/point.h"

enum { SIM_DONE = 0, SIM_DECLINED = 1, SIM_SUSPENDED = 2 };

typedef struct sim_transport {
  /* The simulated time now (of rank rs: a transport may keep a clock per rank). */
  double (*now)(void *eng, const rank_state *rs);
  /* SEND handle hd of rs to the actor peer_slot, its handle set and its bytes counted: move it. */
  int (*send)(void *eng, rank_state *rs, int hd, int peer_slot);
  /* RECV handle hd of rs from the actor peer_slot, its handle set: post it (its payload lands in
   * the handle's rx, which the WAIT checks). */
  int (*recv)(void *eng, rank_state *rs, int hd, int peer_slot);
  /* COLL op of rs, checked and its handle set (sim_op_post_coll): post it (coll.c's actors,
   * direct_coll.c's parts). */
  int (*coll)(void *eng, rank_state *rs, const bs_op *op);
  /* d seconds of COMPUTE from now (rs->t0). */
  int (*compute)(void *eng, rank_state *rs, double d);
  /* WAIT on rs->wait[0 .. rs->nwait), every handle checked: SIM_DONE once all are done, with *last
   * the handle that finished last (-1: none known), which explain counts the transfer time to. */
  int (*wait)(void *eng, rank_state *rs, int *last);
} sim_transport;

/* Runs rs's ops until one suspends it or its program ends: 0 (suspended, or finished with
 * rs->finished set), SIM_DECLINED, or -1 (c->error). */
int sim_rank_run(rank_state *rs, const sim_transport *tp, void *eng);
/* The COMPUTE or WAIT that suspended rs ended now (last: as the transport's wait gives it); its
 * figures counted, the rank runs on (sim_rank_run's return values). */
int sim_rank_resume(rank_state *rs, const sim_transport *tp, void *eng, int last);

#endif
