/*
 * calib.h — `burstsim calib`: microbenchmarks of every kernel the plans use
 * and of the links between ranks (through the communicator of comm.h), then
 * GSL fits (fit.h) turned into a profile the simulator reads (profile/profile.h).
 *
 * The files: calib.c runs it end to end (placement, machine, peaks, then the
 * benchmarks; the profile written once); timing.c times anything on all ranks
 * at once (measure.h); measure_kernels.c times every kernel through the
 * runtime's COMPUTE executor (runtime/compute.h), so the profile measures the
 * calls a run makes; measure_links.c times the communicator; profile_build.c
 * builds the profile as one cJSON tree (profile_build.h); plots.c draws it
 * against the measurements. bench_kernels.c serves `burstsim bench`, fit.c
 * the fits, validate.c `burstsim validate`.
 *
 * Measuring is collective over an MPI communicator: every rank runs the same
 * kernel at the same time (threads per rank = online cores / ranks, as the
 * runtime does), so oversubscription and shared caches are part of what is
 * measured. Each repetition's time is the slowest rank's.
 *
 * Time convention of the profile written for the `host` topology: the
 * simulator runs every rank's COMPUTE on one shared CPU, each of K busy ranks
 * getting 1/K of it; a kernel's profile time is therefore the measured time
 * with all G ranks busy divided by G ("whole-CPU-equivalent"), which makes the
 * simulated time of G concurrent kernels equal to the measured one.
 */
#ifndef BURSTSIM_CALIB_H
#define BURSTSIM_CALIB_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "runtime/device.h"

typedef struct {
  int quick;        /* small grid, few repetitions (well under a minute) */
  int threads;      /* kernel threads per rank; 0 = online cores / ranks (at least 1) */
  int fp32, bf16;   /* storage types to measure (both 0: both) */
  int primary_bf16; /* which type's tables the simulator reads (it ignores "dtype") */
  int no_kernels, no_links;
  int head_dim; /* > 0: only this head dimension (default 64 and 128) */
  int64_t
    max_block; /* > 0: attention blocks up to the first size >= this (default: the grid, within the time budget) */
  int ranks_per_node; /* > 0: rank r sits on node r / ranks_per_node; 0: nodes from the host names */
  FILE *log;          /* rank 0: progress and nccl-tests-style tables (NULL = quiet) */
  /* The GPU to calibrate (runtime/device.h; NULL: the CPU kernels and Open MPI): its kernels through
   * the same executor, and the links over NCCL (measure_cuda.h). */
  const bs_rt_device *device;
} bs_calib_opts;

void bs_calib_opts_default(bs_calib_opts *o);

/* One kernel measurement. */
typedef struct {
  int kernel;      /* bs_kernel */
  char series[48]; /* e.g. "d64/full/fp32/block", "d128/full/bf16/decode" */
  int d, causal, bf16, decode;
  int64_t nq, nk;             /* attention: rows of the query and key block (one head); gemm: m = nq, n = nk,
                          k = d (series "d64/fp32", ...: the score shape n x n x d; "proj/k4096/fp32",
                          ...: the projection shapes of a transformer layer) */
  int heads;                  /* attention: heads per launch (0 or 1: one; the GPU's are 16) */
  int64_t elems;              /* delta, merge, elemwise: rows * d; copy: bytes */
  double flops;               /* useful FLOPs, the plans' convention */
  double x;                   /* attention: sqrt(nq * nk), the profile tables' axis */
  double t_med, t_min, t_max; /* seconds, all ranks busy (slowest rank per repetition) */
  double t_eff;               /* t_med / ranks: the profile's whole-CPU-equivalent time */
  int reps;
} bs_calib_kpoint;

/* One link / collective measurement. */
typedef struct {
  char test[16]; /* pingpong, bidir, ring, allreduce, allgather, reduce_scatter, alltoall */
  char cls[8];   /* pingpong, bidir: "intra" (both ranks on one node) or "inter"; "" otherwise */
  int ranks;
  int64_t bytes; /* message bytes (collectives: the comm.h convention) */
  double t_med, t_min, t_max;
  double algbw, busbw; /* bytes / s, nccl-tests conventions */
  int reps;
} bs_calib_lpoint;

typedef struct {
  bs_calib_kpoint *k;
  int nk;
  size_t capk;
  bs_calib_lpoint *l;
  int nl;
  size_t capl;
  int ranks, threads, cores, quick;
  int nodes;         /* nodes the ranks sit on */
  int peer_intra;    /* the rank rank 0 ping-pongs with on its own node (-1: none) */
  int peer_inter;    /* ... on another node (-1: one node) */
  double fma_peak;   /* FLOP/s of the whole CPU, FMA loop on all ranks at once */
  double copy_Bps;   /* memcpy bytes (read + write) / s of the whole CPU */
  int64_t mem_total; /* bytes of RAM */
  char isa[16], kernel_path[16];
  char machine[400], cpu_model[128], date[40];
  double wall_s;
} bs_calib_data;

/*
 * Runs the microbenchmarks (collective over comm). Every rank gets the same
 * data back. Returns 0, or -1 with a message (same on every rank).
 */
int bs_calib_measure(MPI_Comm comm, const bs_calib_opts *o, bs_calib_data *out, char *err, size_t errlen);
void bs_calib_data_free(bs_calib_data *d);

/*
 * Fits the measurements and writes the profile JSON to path: the tree of
 * bs_calib_profile_json (profile_build.h), written once, and only after it
 * loads back through the simulator's profile loader and the plots are done.
 * plots_dir: when not NULL, gnuplot data, script and PNGs (measured against
 * fitted) go there. Returns 0, or -1 with a message.
 */
int bs_calib_write_profile(const bs_calib_data *d, const bs_calib_opts *o, const char *path, const char *plots_dir,
                           char *err, size_t errlen);

#endif
