/*
 * plan_toy.h — the toy model the plans tests compute by hand (tests/toy_model.h) as a whole config
 * under a method, scope and phase: one copy for test_workload.c, test_memory_terms.c, test_moe.c and
 * the others; toy_plan_make makes its plan.
 */
#ifndef BURSTSIM_TEST_PLAN_TOY_H
#define BURSTSIM_TEST_PLAN_TOY_H

#include "plans/plan.h"
#include "tests/toy_model.h"

/* The toy model under method m on G ranks of one node, double ring off. */
bs_config plan_toy(bs_method m, int G, bs_scope scope, bs_phase ph);

#endif
