/*
 * plan_toy.c — the plans tests' toy config (plan_toy.h).
 */
#include "plan_toy.h"

bs_config plan_toy(bs_method m, int G, bs_scope scope, bs_phase ph) {
  bs_config c;
  bs_config_default(&c);
  toy_model(&c);
  c.work.phase = ph;
  c.work.scope = scope;
  c.par.method = m;
  c.par.gpus = G;
  c.par.double_ring = BS_OFF;
  c.par.ranks_per_node = G;
  return c;
}
