/*
 * direct.h — the direct engine: the rank programs of a point run as a plain
 * discrete-event simulation (direct.c) on the loaded platform's links, with
 * SimGrid's network model reproduced (direct_net.h), instead of as SimGrid
 * actors and activities (actor.c). Same ops, same state (rank_state), same
 * result; only the simulator's own cost differs. It declines what it does not
 * model, and the point then runs in SimGrid.
 */
#ifndef BURSTSIM_SIM_DIRECT_H
#define BURSTSIM_SIM_DIRECT_H

#include <stddef.h>
#include "sim/point.h"

/* Whether the direct engine models c's point (its platform loaded, c set up, the network settings
 * the point runs with): 1, or 0 with the reason in why ("the host topology's shared CPU"). */
int sim_direct_supports(const sim_ctx *c, int generated, const char *model, int crosstraffic, double tcp_gamma,
                        char *why, size_t whylen);

/* Runs c's ranks to the end: 0 with c filled as the actors would leave it; 1 when it met what it does
 * not model (why says what: a link's sharing policy), c then half run and to be set up again;
 * -1 when the point failed (c->error). */
int sim_direct_run(sim_ctx *c, char *why, size_t whylen);

#endif
