/*
 * coll_algo.h — the decisions that shape a collective before it runs, shared
 * by the actors that run it (coll.c) and the fold pre-pass that must predict
 * them (fold.c): which member pairs stand for a group's links, how many rings
 * (one per rail on whole dgx nodes), a ring member's neighbours, and NCCL's
 * choice between ring and tree for cluster.coll_algo = auto. Pure functions.
 */
#ifndef BURSTSIM_SIM_COLL_ALGO_H
#define BURSTSIM_SIM_COLL_ALGO_H

#include <stdint.h>
#include "plans/plan.h"
#include "sim/coll_shape.h"
#include "sim/platform.h"

/* At most this many rings per collective (one per rail). */
#define BS_MAX_CHANNELS 72

/* The real rank of a group's member idx. */
static inline int sim_member(const bs_group *g, int idx) { return g->first + g->stride * idx; }

/* The group's first pair of members inside a node (p[0], p[1]) and across nodes (p[2], p[3]);
 * an absent kind copies the other. Member indices; node: each member's node. */
void sim_group_pairs(const bs_group *g, const int *node, int p[4]);

/* The route figures of a generated dgx platform (sim/platform.h) for a group's first
 * intra-node and inter-node member pairs, as coll.c reads them from SimGrid. 0 or -1. */
int sim_group_links_model(const bs_platform_spec *ps, const bs_group *g, const int *node, bs_coll_links *l);

/* Rings per collective: one per rail when the group is whole nodes (at least two) of a
 * rail-optimized fabric (coll_shape.h, bs_ring_channel_peer); else NCCL's single ring. */
int sim_ring_channels(int rails, int rpn, const bs_group *g);

/* Member index of me's ring neighbour on channel ch (dir +1 next, -1 previous). */
int sim_ring_peer(int C, int rpn, int n, int ch, int me, int dir);

/* A lockstep ring's alpha-beta time: every step as slow as the group's slowest link class
 * (multi: the group spans nodes). */
double sim_ring_lockstep_time(const bs_coll_links *l, int multi, int steps, int64_t chunk);

/* cluster.coll_algo = auto for an allreduce of n members over C rings; *t_tree: the tree's
 * modelled time (< 0: out of memory, then the ring). */
bs_coll_algo sim_auto_algo(int n, const int *node, int multi, int64_t bytes, const bs_coll_links *l, int C,
                           double *t_tree);

/* A group of every one of G ranks, or of every rank of one residue modulo its stride (composed
 * parallelism's gradient group of a tensor-parallel index): its tree allreduce, when not run as
 * steps, is timed as a whole. */
int sim_whole_tree(int G, const bs_group *g);

#endif
