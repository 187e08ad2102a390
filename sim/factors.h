/*
 * factors.h — SimGrid's per-message bandwidth and latency factors, piecewise
 * by message size and chosen by the class of the route's bottleneck link
 * (the profile's "factors"). SimGrid offers this only through a C++
 * callback, so factors.cpp is the one C++ file of burstsim.
 */
#ifndef BURSTSIM_FACTORS_H
#define BURSTSIM_FACTORS_H

#include "topologies/topo.h"

#define BS_FACTOR_PIECES 8

typedef struct {
  int n;                              /* pieces; 0 = identity */
  double min_bytes[BS_FACTOR_PIECES]; /* piece i applies from min_bytes[i] on */
  double bw[BS_FACTOR_PIECES], lat[BS_FACTOR_PIECES];
} bs_factor_class;

typedef struct {
  bs_factor_class cls[BS_LINK_CLASS_COUNT];
} bs_factor_table;

#ifdef __cplusplus
extern "C" {
#endif
/* After the platform is loaded: installs the callbacks (the table is copied). 0 or -1. */
int bs_sim_install_factors(const bs_factor_table *t);
#ifdef __cplusplus
}
#endif

#endif
