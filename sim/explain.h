/*
 * explain.h — where a step's time goes (bs_explain, plans/result.h): plain
 * bookkeeping that an execution engine calls as it runs a rank's ops. It
 * makes no simulator call, so any engine that knows when an op started and
 * ended can feed it.
 *
 * Per rank, the engine keeps one bs_explain_parts (zeroed at the start) and
 * calls:
 *   bs_explain_compute  after each COMPUTE op: its kernel, the seconds it
 *                       took and the profile's launch cost of its kernel;
 *   bs_explain_wait     after each WAIT: when it began (t0), when the last
 *                       peer of its handles had posted (ready, >= t0; the
 *                       definition of time_s.wait_for_peers) and when it ended
 *                       (t1), with the link class of the handle that finished
 *                       last (bs_explain_route for a message's route,
 *                       bs_explain_group for a collective).
 * Nothing else takes a rank's time, so the parts add up to its step:
 * compute + launch = the rank's time in COMPUTE, exposed (all classes) +
 * wait_for_peers = its time in WAIT.
 *
 * After the run, per point: bs_explain_begin, bs_explain_add for every rank
 * (its end and its parts), bs_explain_end; the result holds the critical
 * rank's parts (the rank that finished last) and the mean over the ranks.
 * The layer shortcut extends two results with bs_explain_extend.
 */
#ifndef BURSTSIM_SIM_EXPLAIN_H
#define BURSTSIM_SIM_EXPLAIN_H

#include <stdint.h>
#include "plans/plan.h"
#include "plans/result.h"

/* The kind a kernel is reported under. */
bs_explain_kind bs_explain_kind_of(bs_kernel kernel);

/* A COMPUTE op of `kernel` that took `seconds`, of which up to `launch_s` is its launch cost. */
void bs_explain_compute(bs_explain_parts *x, bs_kernel kernel, double seconds, double launch_s);

/* A WAIT blocked from t0 to t1 whose last peer posted at `ready`: [t0, min(ready, t1)] is waiting
 * for peers, the rest exposed transfer time on `link`. */
void bs_explain_wait(bs_explain_parts *x, double t0, double ready, double t1, bs_explain_link link);

/* The class of a route from the topology classes of its n links (bs_link_class, or -1 for a link
 * of no class): the widest it crosses (network over PCIe over NVLink over shared memory); a route
 * with no classed link is BS_XL_OTHER. */
bs_explain_link bs_explain_route(const int *link_classes, int n);

/* The class of a collective by the span of its group: across nodes the network, inside one node
 * the class of the node's route between two members (`intra`). */
bs_explain_link bs_explain_group(int spans_nodes, bs_explain_link intra);

/* The sum of the parts: the rank's step. */
double bs_explain_total(const bs_explain_parts *x);
/* Compute and launch: the rank's time in COMPUTE. */
double bs_explain_compute_total(const bs_explain_parts *x);
/* Exposed (all classes) and waiting for peers: the rank's time in WAIT. */
double bs_explain_blocked_total(const bs_explain_parts *x);

/* The per-point summary: begin, one add per rank (the time it ended and its parts), end. */
void bs_explain_begin(bs_explain *e);
void bs_explain_add(bs_explain *e, int rank, double end, const bs_explain_parts *x);
void bs_explain_end(bs_explain *e);

/* The layer shortcut: every part X = a + k (b - a), into b (its critical rank is kept). */
void bs_explain_extend(const bs_explain *a, bs_explain *b, int64_t k);

/* Names: "attn_fwd", "attn_bwd", "merge", "gemm", "elemwise", "other"; "nvlink", "pcie", "shm",
 * "network", "other" (the JSON keys under explain.*.compute and explain.*.exposed). */
const char *bs_explain_kind_name(bs_explain_kind k);
const char *bs_explain_link_name(bs_explain_link l);

#endif
