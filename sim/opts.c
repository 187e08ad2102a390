/*
 * opts.c — the simulator's options as a point runs them when nobody says
 * otherwise (sim.h): fold and layer shortcut when proven exact, collectives
 * modelled by group, SimGrid's network settings from the profile; and
 * whether the layer shortcut (layers.c) and the micro-batch shortcut
 * (micro.c) apply to a point, which bs_sim_run,
 * the search and its walk read (a rule of the options, below all of them).
 */
#include "sim/sim.h"

#include <string.h>

void bs_sim_opts_default(bs_sim_opts *o) {
  memset(o, 0, sizeof *o);
  o->fold = BS_AUTO;
  o->coll_model = BS_COLL_MODEL_AUTO;
  o->layers = BS_AUTO;
  o->micro_batches = BS_AUTO;
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

int bs_sim_micro_apply(const bs_config *cfg, const bs_sim_opts *opts) {
  /* a training step through pipeline stages whose micro-batches are more than the two reduced steps
   * simulate together (else the shortcut saves nothing); not with packed documents, whose lengths
   * are the same in every micro-batch but whose plans the shortcut's tests do not cover */
  bs_mesh m;
  char err[256];
  int64_t ma, g;
  if (!opts || opts->micro_batches == BS_OFF || cfg->work.scope != BS_SCOPE_MODEL || cfg->work.phase != BS_TRAIN ||
      cfg->par.pp <= 1 || cfg->work.docs > 0 || cfg->work.documents[0] || bs_mesh_of(cfg, &m, err, sizeof err) ||
      bs_sim_micro_plan(cfg, &ma, &g))
    return 0;
  return 2 * ma + g < m.microbatches;
}
