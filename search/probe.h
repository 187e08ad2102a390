/*
 * probe.h — a candidate's cheap lower bounds, read off the first ops of its plan without a walk:
 * the bytes a rank holds (at most the simulated peak) and the compute it does (at most the step),
 * so that the search (search.c) walks a candidate only when the branch and bound reaches it. The
 * proofs are in probe.c; tests/search (search.probe_below_walk) checks both against the walk.
 */
#ifndef BURSTSIM_SEARCH_PROBE_H
#define BURSTSIM_SEARCH_PROBE_H

#include <stddef.h>
#include <stdint.h>
#include "plans/config.h"
#include "profile/profile.h"
#include "sim/sim.h"

typedef struct {
  int64_t peak_bytes;     /* at most the simulated peak (and the first walk's): 0 when unknown */
  double compute_s;       /* at most the busiest rank's simulated compute, so the step: 0 when unknown */
  int64_t capacity_bytes; /* the profile's capacity less its reserve, as the walk reads it */
  int oom;                /* peak_bytes past the capacity: the candidate cannot fit (exact) */
  int ranks_per_node;     /* the platform's, as the walk reads it */
} bs_probe;

/* The ops of each probed rank's program read at most (the prefix). */
#define BS_PROBE_OPS 8192

/*
 * Probes cfg: the platform and the plan the walk builds first (bs_sim_walk), then the first max_ops
 * ops of one rank per pipeline stage (those the walk's first pass replays). Returns 0 (out set),
 * -2 when the walk would refuse the point the same way (the platform's or the plan's message in
 * err), 1 when nothing is known but the platform (out's bounds 0: the walk decides).
 * deep: where the point fits by the probe, its compute bound also from a layer's forward and
 * backward, read off the whole program of a short point (a few layers, one micro-batch; probe.c).
 */
int bs_search_probe(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof, int max_ops, int deep,
                    bs_probe *out, char *err, size_t errlen);

#endif
