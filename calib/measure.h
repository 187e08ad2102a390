/*
 * measure.h — the measuring half of `burstsim calib`, shared by its files:
 * the repetition policy and collective timer (timing.c), the growable point
 * lists of bs_calib_data, and the two benchmark sets (measure_kernels.c,
 * measure_links.c). Everything here is collective over an MPI communicator.
 */
#ifndef BURSTSIM_CALIB_MEASURE_H
#define BURSTSIM_CALIB_MEASURE_H

#include <mpi.h>
#include <stddef.h>
#include "calib/calib.h"

/* Repetition policy shared by every benchmark: decided on allreduced times, so every rank agrees. */
typedef struct {
  int warmup, min_reps, max_reps;
  double budget_s;
  double min_call_s; /* kernels: shorter calls are repeated within a repetition (0 = never) */
} bs_calib_policy;

bs_calib_policy bs_calib_policy_of(int quick);

typedef int (*bs_calib_fn)(void *ctx);

/*
 * Times fn on every rank at once: warm-up, then repetitions (quiet barrier,
 * call, slowest rank's time). Fills med/min/max/reps. Returns 0, or -1 when
 * fn failed on some rank.
 */
int bs_calib_time(MPI_Comm comm, const bs_calib_policy *p, bs_calib_fn fn, void *ctx, double *med, double *mn,
                  double *mx, int *reps);

/* Every rank must agree that an allocation worked before anyone times anything: the minimum of ok. */
int bs_calib_all_ok(MPI_Comm comm, int ok);

/* A new zeroed point at the end of d's kernel / link list (NULL: out of memory). */
bs_calib_kpoint *bs_calib_add_k(bs_calib_data *d);
bs_calib_lpoint *bs_calib_add_l(bs_calib_data *d);
/* A point's kernel, series and shape, as every backend's calibration names them: delta, merge, the
 * elementwise pass and a copy of `size` rows (bytes for a copy) of head dimension d, or the score
 * GEMM size x size x d; and a projection GEMM [m x kin] x [kin x n]. */
void bs_calib_kpoint_misc(bs_calib_kpoint *k, int kernel, int d, int bf16, int64_t size);
void bs_calib_kpoint_proj(bs_calib_kpoint *k, int64_t m, int64_t kin, int64_t n);

/* The kernel and the link benchmarks; each returns 0, or -1 with a message (same on every rank). */
int bs_calib_measure_kernels(MPI_Comm comm, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen);
int bs_calib_measure_links(MPI_Comm comm, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen);

#endif
