/*
 * opts.c — the simulator's options as a point runs them when nobody says
 * otherwise (sim.h): fold and layer shortcut when proven exact, collectives
 * modelled by group, SimGrid's network settings from the profile; and
 * whether the layer shortcut (layers.c) applies to a point, which bs_sim_run,
 * the search and its walk read (a rule of the options, below all of them).
 */
#include "sim/sim.h"

#include <string.h>

void bs_sim_opts_default(bs_sim_opts *o) {
  memset(o, 0, sizeof *o);
  o->fold = BS_AUTO;
  o->coll_model = BS_COLL_MODEL_AUTO;
  o->layers = BS_AUTO;
  o->crosstraffic = -1;
  o->tcp_gamma = -1;
}

int bs_sim_layers_apply(const bs_config *cfg, const bs_sim_opts *opts) {
  /* more layers than layers.c simulates (3 and 4), and no pipeline stages; not under a skewed MoE
   * router, whose hot expert-parallel ranks do more than the others in every layer: the step's
   * figures extend, but the critical path (explain, the table's exposed and peers) may pass through
   * another rank at 3 layers than at 4, and its line then describes no rank */
  int skewed = cfg->model.experts > 0 && cfg->model.routing_skew > 0 && cfg->model.capacity_factor <= 0;
  return opts && opts->layers != BS_OFF && cfg->work.scope == BS_SCOPE_MODEL && cfg->model.layers > 4 &&
         cfg->par.pp <= 1 && !skewed;
}
