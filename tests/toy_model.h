/*
 * tests/toy_model.h — the toy model that tests on several floors compute by hand (hidden 64, 4 heads
 * and 4 KV heads of 16, ffn 128, vocab 256, 2 layers, 256 tokens) and the plan made from a config,
 * failing the test with the planner's message: one copy for the plans tests (plan_toy.c) and the
 * runtime's test_scratch.c and test_devplan.c. Header only, like run_named.h.
 */
#ifndef BS_TESTS_TOY_MODEL_H
#define BS_TESTS_TOY_MODEL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "plans/plan.h"

/* The toy's model and sequence length over *c; every other field of *c is left as it is. */
static inline void toy_model(bs_config *c) {
  c->model.preset[0] = 0;
  c->model.hidden = 64;
  c->model.heads = 4;
  c->model.kv_heads = 4;
  c->model.head_dim = 16;
  c->model.ffn = 128;
  c->model.vocab = 256;
  c->model.layers = 2;
  c->work.seq_len = 256;
}

/* bs_plan_create on c->par.ranks_per_node ranks a node; the test fails when the planner refuses. */
static inline bs_plan *toy_plan_make(const bs_config *c) {
  bs_plan *p = NULL;
  char err[256] = "";
  int rc = bs_plan_create(c, c->par.ranks_per_node, &p, err, sizeof err);
  if (rc) print_error("plan: %s\n", err);
  assert_int_equal(rc, 0);
  return p;
}

#endif
