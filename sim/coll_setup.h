/*
 * coll_setup.h — what every member of a collective works out before its part runs: its place in the
 * group, the ring steps and chunk, each member's node, the group's links from SimGrid's routes, the
 * rings, the algorithm (NCCL's ring or tree, Open MPI libnbc's binomial allreduce) and the transfer
 * model. One function, for the lowering (coll_lower.c) that both engines run.
 */
#ifndef BURSTSIM_SIM_COLL_SETUP_H
#define BURSTSIM_SIM_COLL_SETUP_H

#include <stdint.h>
#include "sim/coll_algo.h"
#include "sim/point.h"

#define SIM_COLL_NODE_INLINE 128 /* groups up to this size keep their members' nodes in the setup */

typedef struct {
  int n, me;       /* group size, my member index */
  int steps;       /* ring steps (-1: all-to-all) */
  int64_t chunk;   /* bytes per step (all-to-all: per pair) */
  int *node;       /* each member's node: node_in, or allocated for a larger group (sim_coll_setup_free) */
  int multi;       /* the group spans nodes */
  bs_coll_links l; /* the group's links, from SimGrid's routes */
  int C;           /* rings */
  bs_coll_algo algo;
  double t_tree; /* the tree's modelled time, when auto computed it (else < 0) */
  bs_coll_model model;
  int binomial;                      /* Open MPI libnbc's binomial allreduce instead of algo */
  int node_in[SIM_COLL_NODE_INLINE]; /* a collective is set up at every call of every member: most groups
                                        need no allocation (the setup is not copied: node may point here) */
} sim_coll_setup;

/* Rank rs's setup for a collective `kind` of `bytes` over group g: 0 to run its part, 1 when there is
 * nothing to run (a group of one), -1 on an error (recorded in c). sim_coll_setup_free(s) after, whatever
 * the outcome. */
int sim_coll_prepare(sim_ctx *c, const rank_state *rs, bs_coll_kind kind, const bs_group *g, int64_t bytes,
                     sim_coll_setup *s);
/* What sim_coll_prepare allocated for s (a large group's nodes), released. */
void sim_coll_setup_free(sim_coll_setup *s);

#endif
