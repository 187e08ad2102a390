/*
 * toy.h — what the simulator tests share: hand-written per-rank programs
 * (toy plans) and toy platforms of n hosts gpu0..gpu(n-1), each with its own
 * split-duplex link w<i>, every route i->j being w_i up then w_j down (two
 * links, so one message takes 2·latency + bytes / bandwidth), plus a toy
 * profile (CM02, no cross traffic, TCP-gamma 0: exact arithmetic).
 */
#ifndef BURSTSIM_TESTS_SIM_TOY_H
#define BURSTSIM_TESTS_SIM_TOY_H

#include <stddef.h>
#include <stdint.h>

#include "sim/sim.h"

#define TOY_MAX_OPS 4096
#define TOY_MAX_RANKS 32
typedef struct {
  int ranks;
  int n[TOY_MAX_RANKS];
  bs_op ops[TOY_MAX_RANKS][TOY_MAX_OPS];
} toy_plan;

typedef struct {
  char xml[256], prof[256];
} toy_files;

/* Toy figures (not hardware): per-link latency and bandwidth, device memory bandwidth. */
#define LINK_LAT 3e-6
#define LINK_BW 5e9
#define MEM_BW 2e9
#define CAPACITY 1e6

bs_sim_source toy_source(toy_plan *p);
bs_op *toy_push(toy_plan *p, int r, bs_op_kind k);
void toy_p2p(toy_plan *p, int r, bs_op_kind k, int h, int peer, int tag, int64_t bytes);
void toy_wait(toy_plan *p, int r, int n, const int *h);
/* A COPY of `bytes` bytes: 2 * bytes / mem_bw seconds in the toy profile. */
void toy_copy(toy_plan *p, int r, int64_t bytes);
void toy_alloc(toy_plan *p, int r, int buf, int64_t bytes, bs_mem_class cls);
void toy_free_buf(toy_plan *p, int r, int buf);

/* Writes text to path (fails the test on error). */
void write_text(const char *path, const char *text);
/* n hosts, per_node to a node (host property "node"), links of LINK_LAT and LINK_BW. */
void toy_setup(toy_files *t, int n, int per_node);
/* The same with other link figures. */
void toy_setup_links(toy_files *t, int n, int per_node, double link_lat, double link_bw);
void toy_teardown(toy_files *t);
void toy_config(bs_config *c, const toy_files *t, int ranks);
/* Simulates p on t with the default options. */
int run_toy(toy_plan *p, const toy_files *t, bs_result *r, char *err, size_t errlen);
/* Fails unless |got - want| <= rel * |want|. */
void assert_close(double got, double want, double rel);

#endif
