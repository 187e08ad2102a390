/*
 * plan_walk.h — executes every rank's plan abstractly (no data), the way an
 * executor would, to check a plan's structure in tests: ids in range, ALLOC
 * and FREE paired, every handle waited, SENDs matching RECVs (peer, tag,
 * bytes, in order), collectives matching over their group, no deadlock; and
 * it adds up bytes sent per rank, FLOPs per rank and the allocator's peak.
 */
#ifndef BURSTSIM_TEST_PLAN_WALK_H
#define BURSTSIM_TEST_PLAN_WALK_H

#include <stdint.h>
#include "plans/plan.h"

#define WALK_MAX_RANKS 16

typedef struct {
  int64_t sent[WALK_MAX_RANKS]; /* p2p bytes sent per rank */
  int64_t sent_to[WALK_MAX_RANKS][WALK_MAX_RANKS];
  int64_t coll_sent[WALK_MAX_RANKS];                 /* collective bytes (bs_coll_bytes_sent) per rank */
  int64_t coll_bytes[WALK_MAX_RANKS][BS_COLL_COUNT]; /* sum of op bytes per kind */
  int ncoll[WALK_MAX_RANKS][BS_COLL_COUNT];
  double flops[WALK_MAX_RANKS];
  int ncompute[WALK_MAX_RANKS][BS_K_COUNT];
  int64_t peak[WALK_MAX_RANKS];
  int64_t peak_cls[WALK_MAX_RANKS][BS_MEM_CLASS_COUNT];
  int64_t ops[WALK_MAX_RANKS];
  char err[512]; /* "" when the plan is well formed */
} walk_result;

/* Runs all ranks of p; returns 0, or -1 with w->err set. */
int plan_walk(const bs_plan *p, walk_result *w);

#endif
