/*
 * platform.h — turns a scenario's topology (generator name or user XML) and a
 * profile into the SimGrid platform the engine loads: which XML, how many
 * ranks per node, and after loading, each rank's host and node.
 */
#ifndef BURSTSIM_PLATFORM_H
#define BURSTSIM_PLATFORM_H

#include <stddef.h>
#include "plans/config.h"
#include "profile/profile.h"
#include "sim/sim.h"
#include "topologies/topo.h"

typedef struct {
  int generated;       /* 1: a generator, topo valid; 0: a user XML file */
  bs_topo_params topo; /* generated: the topology's full-size parameters */
  char file[512];      /* user XML path */
  int ranks_per_node;  /* generated: exact; file: provisional until loaded */
  int shared_host;     /* all ranks on one host (host topology) */
  int node_gpus;       /* generated: the GPUs of the topology's whole node (topo.gpus_per_node is fewer when
                          the point runs on part of one node) */
} bs_platform_spec;

/* Resolves cfg's topology for cfg->par.gpus ranks. Returns 0 or -1 with a message. */
int bs_platform_resolve(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof, bs_platform_spec *ps,
                        char *err, size_t errlen);

/* The XML of a generated platform of nodes x per_node ranks (the full size or a fold;
 * wrap > 0: the fold quotient of bs_topo_fold_quotient). */
char *bs_platform_xml(const bs_platform_spec *ps, int nodes, int per_node, int wrap, char *err, size_t errlen);

/*
 * After simgrid_load_platform: sets profile bandwidth/latency on links whose
 * names carry a class prefix (topo.h), installs the profile's message-size
 * factors when they are not all 1 (*factors = 1 then), and returns how many
 * links were set (0 or more), or -1 when the factors could not be installed.
 * generated: the platform was written from the profile already, and keeps its
 * values (a leaf's fabric uplink aggregates its ports); links are counted only.
 */
int bs_platform_apply_profile(const bs_profile *prof, int generated, int *factors);

/*
 * A user platform file once loaded and the profile applied: cluster.degrade's class at its
 * factor of the bandwidth (generated platforms are written with it). 0, or -1 with
 * "cluster.degrade: ..." when the file has no link of that class.
 */
int bs_platform_apply_degrade(const bs_config *cfg, const char *file, char *err, size_t errlen);

/*
 * The route between real ranks a != b of a generated dgx platform at its full
 * size, as the generator lays it out: inside a node GPU - NVSwitch - GPU; on
 * one rail under one leaf NIC - leaf - NIC; otherwise NIC - leaf uplink - core
 * - leaf uplink - NIC. *lat: the summed latency, *bw: the narrowest link, as
 * SimGrid reports the route (a NIC that several GPUs share counts whole: the
 * sharing happens in the simulated flows).
 * Returns 0, or -1 when the platform is not a generated dgx one.
 */
int bs_platform_route(const bs_platform_spec *ps, int a, int b, double *lat, double *bw);

/*
 * After loading: the host of each of `n` actors (gpu<i>, or the only host),
 * and each actor's node (the host's "node" property, a whole number >= 0, else
 * i / rpn_fallback). Returns 0, or -1 with a message naming the missing host or
 * the bad property.
 */
int bs_platform_hosts(int n, int rpn_fallback, void **hosts, int *node, char *err, size_t errlen);

/* A topology name: a generator, or a FILE.xml that bs_platform_check_file accepts. 0 or -1 with a message. */
int bs_platform_check_name(const char *topo, char *err, size_t errlen);

/*
 * A user platform file before SimGrid reads it: 0 when it is a readable regular
 * file, or -1 with "cluster.topology: FILE: ..." (SimGrid's parser fails on a
 * directory with no message).
 */
int bs_platform_check_file(const char *file, char *err, size_t errlen);

/*
 * A user platform file's attributes that SimGrid aborts on instead of reporting
 * (platform_attrs.c): a zone's routing, a route in a None zone, a link latency in
 * a Wifi zone, a host's core and pstate. 0, or -1 with "cluster.topology:
 * FILE:LINE: zone 'z': routing='Fulll' is not a routing SimGrid knows (...)".
 */
int bs_platform_check_attrs(const char *file, char *err, size_t errlen);

/*
 * After loading a user platform file: every link's bandwidth at least 1 kB/s and
 * latency in [0, 1] s (finite), each of the n hosts at least 1e6 flop/s, and a
 * route between every two of them (distinct ones; beyond 1024 hosts, each to and
 * from the first and its neighbours); SimGrid would abort on a zero bandwidth or
 * a missing route, and a bandwidth near 0 overflows its clock. Returns 0, or -1
 * with "cluster.topology: FILE: link 'L': ..." or "...: no route from H1 to H2".
 */
int bs_platform_check_loaded(const char *file, void *const *hosts, int n, char *err, size_t errlen);

#endif
