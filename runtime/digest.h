/*
 * digest.h — every rank of a job must run the same scenario: ranks started
 * with different files or --set options would otherwise run silently, with
 * the result recording rank 0's settings. At start-up each rank hashes its
 * resolved points (after presets and --set), key by key, and the ranks
 * compare the hashes.
 */
#ifndef BURSTSIM_DIGEST_H
#define BURSTSIM_DIGEST_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>
#include "plans/config.h"

/* The digest of n resolved points (FNV-1a over every key of every point, member by member). */
uint64_t bs_points_digest(const bs_config *points, int n);

/*
 * Collective over comm: 0 when every rank holds the same points; otherwise -1
 * on every rank with, in err, the ranks whose scenario differs from rank 0's
 * and the first key that differs ("rank 1 resolved a different scenario from
 * rank 0 (first at parallel.lao; ...)"). Bounded by the watchdog when armed.
 */
int bs_points_same(MPI_Comm comm, const bs_config *points, int n, char *err, size_t errlen);

/* The same check for a command's options with no scenario (calib): `what` names them. */
int bs_bytes_same(MPI_Comm comm, const void *data, size_t len, const char *what, char *err, size_t errlen);

#endif
