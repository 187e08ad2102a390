/*
 * plan_toy.h — the toy model the plans tests compute by hand (hidden 64, 4 heads of 16, ffn 128,
 * vocab 256, 2 layers, 256 tokens) and the plan made from a config, failing the test with the
 * planner's message: one copy for test_workload.c, test_memory_terms.c and test_moe.c.
 */
#ifndef BURSTSIM_TEST_PLAN_TOY_H
#define BURSTSIM_TEST_PLAN_TOY_H

#include "plans/plan.h"

/* The toy model under method m on G ranks of one node, double ring off. */
bs_config plan_toy(bs_method m, int G, bs_scope scope, bs_phase ph);
/* bs_plan_create on c->par.ranks_per_node ranks a node; the test fails when the planner refuses. */
bs_plan *plan_toy_make(const bs_config *c);

#endif
