/*
 * walk.h — a point's memory and compute read off its plan without SimGrid.
 *
 * `burstsim search` prunes candidates before it simulates them: memory first
 * (a candidate that cannot fit is never simulated), time second (a lower bound
 * on the step). Both must be the simulator's own figures, not a second model
 * that can drift: the walk runs the simulator's rank interpreter (rank.c) with
 * a zero-time transport, so the bytes an ALLOC holds are counted as the
 * simulator counts them (bs_sim_alloc_held, memory.h), and it applies the layer shortcut
 * (layers.c) exactly as bs_sim_run does. tests/sim/test_walk.c checks that
 * the walk's peak equals the simulated peak byte for byte.
 */
#ifndef BURSTSIM_SIM_WALK_H
#define BURSTSIM_SIM_WALK_H

#include <stddef.h>
#include <stdint.h>
#include "plans/plan.h"
#include "profile/profile.h"
#include "sim/memory.h"
#include "sim/sim.h"

typedef struct {
  int64_t peak_bytes;                    /* the highest rank's peak: the result's memory.peak_bytes */
  int64_t breakdown[BS_MEM_CLASS_COUNT]; /* that rank's classes at its peak: memory.breakdown */
  int64_t capacity_bytes;                /* the profile's capacity less its reserve: memory.capacity_bytes */
  int oom;                               /* peak_bytes > capacity_bytes, as the result's memory.oom */
  double compute_s;                      /* the busiest rank's COMPUTE time at the profile's rates */
  double replay_s;    /* the latest end with every message taking no time and every collective its floor
                         (walk.c): a lower bound of the step */
  int ranks_per_node; /* what the plan was built with (the platform's) */
  int peak_partial;   /* BS_WALK_STOP_OOM: the walk stopped once a rank's held bytes proved the point out of
                         memory (oom = 1): peak_bytes is then a lower bound of the peak, already past the
                         capacity, breakdown is zero, compute_s and replay_s are 0 (not bounds) */
} bs_walk;

/*
 * Replays every rank's plan of cfg on the platform opts and prof give, with
 * compute at the profile's rates, every message taking no time and every
 * collective the least time coll.c gives it (walk.c). With the layer shortcut (bs_sim_layers_apply)
 * the 3- and 4-layer models are walked and extended to L layers as bs_sim_run
 * extends them.
 * corners = 1 replays only the corner ranks of the grid (the first and the last coordinate of
 * each of tp, cp, dp, with every pipeline stage: at most 8 pp ranks) instead of all: the peak and the compute are then
 * those of a subset of the ranks, so at most the simulator's (equal when the rank that holds
 * the peak, or the busiest, is a corner: the last rank of a contiguous causal ring, the first
 * pipeline stage); still a lower bound of the step, and a peak past the capacity is still an
 * out-of-memory point. Search walks the corners (a 256-rank ring walked whole costs seconds).
 * corners = BS_WALK_STAGES replays one rank per pipeline stage, the last of the attention's ring
 * (cp, or tp for method tp; first of the others), which holds the causal peak of a contiguous ring:
 * fewer ranks again, so a lower bound of the corners' peak and step, several times cheaper; search
 * walks every candidate so first and walks the corners of those it reaches (search.c). Without
 * pipeline stages and with 4 microbatches or more it walks 2 and 3 of them and extends (walk.c,
 * microbatch_shortcut); BS_WALK_STAGES_EVERY walks every microbatch (the tests' reference).
 * With pipeline stages, both the first pass and the corners walk fewer microbatches (pp + 3, pp + 4
 * for 1F1B; multiples of pp for interleaved) with the messages between stages of the middle ones
 * taking no time, and extend: the same peak, a time bound at most the full walk's (walk.c,
 * pipeline_shortcut); BS_WALK_STAGES_EVERY and BS_WALK_CORNERS_EVERY walk every microbatch.
 * BS_WALK_STOP_OOM or'd into corners stops the walk as soon as a replayed rank's held bytes prove the
 * point out of memory (walk.c, walk_stop): peak_partial is then set. Its oom is the whole walk's exactly
 * (tests/search: search.walk_stop), and a point that fits walks as without it, byte for byte. What
 * it never reads past the stop cannot refuse the point: FP8 on a profile without FP8 GEMMs walks
 * whole (refused as without the stop); a plan that would break its own invariants past the stop
 * (a bug, -1), or a point whose counts would pass 2^63 - 1 past it (too large), is out of memory there.
 * Returns 0; -2 when the point is not valid (bs_plan_create's
 * error, or the platform's: the message names the key); -1 on a broken plan.
 */
enum { BS_WALK_ALL = 0, BS_WALK_CORNERS = 1, BS_WALK_STAGES = 2, BS_WALK_STAGES_EVERY = 3, BS_WALK_CORNERS_EVERY = 4 };
enum { BS_WALK_STOP_OOM = 8 }; /* or'd into the mode: stop once the point is proven out of memory */

int bs_sim_walk(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof, int corners, bs_walk *out,
                char *err, size_t errlen);

#endif
