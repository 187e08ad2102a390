/*
 * opts.c — the simulator's options as a point runs them when nobody says
 * otherwise (sim.h): fold and layer shortcut when proven exact, collectives
 * modelled by group, SimGrid's network settings from the profile.
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
