/*
 * plan_toy.c — the plans tests' toy model and plan maker (plan_toy.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plan_toy.h"

bs_config plan_toy(bs_method m, int G, bs_scope scope, bs_phase ph) {
  bs_config c;
  bs_config_default(&c);
  c.model.preset[0] = 0;
  c.model.hidden = 64;
  c.model.heads = 4;
  c.model.kv_heads = 4;
  c.model.head_dim = 16;
  c.model.ffn = 128;
  c.model.vocab = 256;
  c.model.layers = 2;
  c.work.seq_len = 256;
  c.work.phase = ph;
  c.work.scope = scope;
  c.par.method = m;
  c.par.gpus = G;
  c.par.double_ring = BS_OFF;
  c.par.ranks_per_node = G;
  return c;
}

bs_plan *plan_toy_make(const bs_config *c) {
  bs_plan *p = NULL;
  char err[256] = "";
  int rc = bs_plan_create(c, c->par.ranks_per_node, &p, err, sizeof err);
  if (rc) print_error("plan: %s\n", err);
  assert_int_equal(rc, 0);
  return p;
}
