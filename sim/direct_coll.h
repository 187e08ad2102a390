/*
 * direct_coll.h — a COLL op in the direct engine (direct.c): the member's part lowered once
 * (coll_lower.h), the same program coll.c runs in SimGrid (the call's base cost; NCCL's ring in
 * steps, as a flow floored at the lockstep time, or that time alone; the all-to-all; NCCL's double
 * binary tree in pipelined chunks or timed as a whole; Open MPI's binomial allreduce), stepped
 * through here. Its transfers run on the direct engine's network (direct_net.h) and its timers in
 * the engine's event queue.
 */
#ifndef BURSTSIM_SIM_DIRECT_COLL_H
#define BURSTSIM_SIM_DIRECT_COLL_H

#include <stddef.h>
#include "sim/direct_heap.h"
#include "sim/direct_net.h"
#include "sim/point.h"

/* Transfers of collectives are numbered from here on the network (below: the engine's messages). */
#define DCOLL_MSG_BASE (1 << 30)

typedef struct dcoll dcoll;

/* A member's part ended at the current time: the engine marks handle hd of actor slot done and
 * goes on; 0, 1 declined, -1 failed. */
typedef int (*dcoll_done_fn)(void *engine, int slot, int hd);

/* The collectives of c's point on network net; timers are queued on ev as events of kind
 * ev_kind; why receives what a declined collective needs. NULL when out of memory. */
dcoll *dcoll_new(sim_ctx *c, dnet *net, dev_heap *ev, int ev_kind, dcoll_done_fn done, void *engine, char *why,
                 size_t whylen);
void dcoll_free(dcoll *dc);

/* Rank rs posts COLL op at time now (checked and its handle set by sim_op_post_coll): 0, 1 declined
 * (why says which algorithm), -1 failed (c->error). The same for the two below. */
int dcoll_start(dcoll *dc, rank_state *rs, const bs_op *op, double now);
/* A timer of kind ev_kind with this id is due at now. */
int dcoll_timer(dcoll *dc, int id, double now);
/* The network ended transfer msg (>= DCOLL_MSG_BASE) at now. */
int dcoll_transfer_done(dcoll *dc, int msg, double now);

#endif
