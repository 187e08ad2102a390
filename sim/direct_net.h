/*
 * direct_net.h — the network of the direct engine: SimGrid 3.32's CM02 model
 * (src/surf/network_cm02.cpp, src/kernel/lmm/maxmin.cpp) as this project runs
 * it (no cross traffic, TCP-gamma 0, weight-S 0), without SimGrid's activity
 * machinery. A transfer first spends its route's latency (times the latency
 * factor of its size), then shares the links' bandwidth max-min fairly with
 * every other active transfer, weighted by its route latency (SimGrid's
 * sharing penalty: a flow's share of a saturated link is inversely
 * proportional to it) and progressing at its share times the bandwidth factor
 * of its size. Shares are recomputed, when the set of active transfers
 * changes, only on the links connected to the change; a transfer alone on all
 * of its links takes the narrowest one at once. Routes, bandwidths and
 * policies come from the loaded platform.
 */
#ifndef BURSTSIM_SIM_DIRECT_NET_H
#define BURSTSIM_SIM_DIRECT_NET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
/* direct_route.cpp: 1 a SHARED link, 2 a SPLITDUPLEX pair's parent, 0 any other policy (FATPIPE, WIFI, ...). */
int bs_direct_link_shared(const void *link);
/* Seals the loaded platform (SimGrid builds its routing tables then); before any route. */
void bs_direct_seal(void);
/* The route from host src to host dst (sg_host_t): its links (at most max) and summed latency;
 * the number of links, or -1 (no route, or more than max links). */
int bs_direct_route(const void *src, const void *dst, void **links, int max, double *lat);
#ifdef __cplusplus
}
#endif

#ifndef __cplusplus
#include "sim/factors.h"

typedef struct dnet dnet;

/* The network of the loaded platform with the profile's size factors (the table SimGrid's
 * callbacks were given); NULL with a reason in why when a link's policy is not modelled. */
dnet *dnet_new(const bs_factor_table *factors, char *why, size_t whylen);
void dnet_free(dnet *n);
/* The route between two hosts (sg_host_t), its id; -1 with why when it has a link the engine does
 * not model or none. */
int dnet_route(dnet *n, const void *src, const void *dst, char *why, size_t whylen);
/* A transfer of `bytes` (the size SimGrid moves) on route r starting at now, for message msg;
 * 0 or -1 when out of memory. */
int dnet_start(dnet *n, int r, double bytes, double now, int msg);
/* The time of the network's next event (INFINITY: none). When the active set changed and no
 * other event (t_other, the ranks' next) is due at now, shares are recomputed first; -1 when out
 * of memory. */
double dnet_next(dnet *n, double now, double t_other);
/* Handles the network's next event (at time now, as dnet_next said): 1 and *msg when a transfer
 * ended, 0 when it was some other step (a latency paid), -1 when out of memory. */
int dnet_pop(dnet *n, double now, int *msg);
/* How many max-min recomputations ran and over how many flows (the engine's own statistics). */
void dnet_stats(const dnet *n, int64_t *solves, int64_t *solved_flows, int64_t *fast);
#endif

#endif
