/*
 * hostmem.h — what this host can give the ranks of a real run, asked before
 * they allocate: a plan whose buffers cannot fit is refused with the figures
 * (exit 2) instead of being killed by the kernel's OOM killer a minute in, or
 * of crashing in Open MPI's start-up under an address-space limit
 * (`ulimit -v`). The figures are lower bounds of what a rank holds: the plan's
 * buffers (the largest sum of live ALLOCs, what `run` reports as peak_B);
 * scratch, MPI and the libraries come on top.
 */
#ifndef BURSTSIM_RUNTIME_HOSTMEM_H
#define BURSTSIM_RUNTIME_HOSTMEM_H

#include <stddef.h>
#include <stdint.h>
#include "plans/config.h"

/*
 * Bytes of memory this host has available now: MemAvailable of /proc/meminfo
 * (src = "MemAvailable in /proc/meminfo"), else free pages from sysconf
 * (src = "free pages, sysconf"). -1 when neither can be read.
 */
int64_t bs_host_mem_available(const char **src);

/*
 * The smaller of this process's soft address-space and data limits
 * (RLIMIT_AS, RLIMIT_DATA) in bytes, with which one ("ulimit -v" / "ulimit -d")
 * in *which; -1 when both are unlimited.
 */
int64_t bs_host_addr_limit(const char **which);

/*
 * Before MPI_Init: an address-space or data limit below BS_HOST_MIN_ADDR_BYTES
 * is refused: -1 with "an address-space limit of 292.97 MiB (ulimit -v) ..." in
 * err; 0 otherwise. Open MPI 4.1's start-up maps its components and the
 * shared-memory segments of the ranks on the host and, when mmap fails,
 * crashes (SIGSEGV in PMIx) or aborts. Measured on a 2-core host: 2 ranks
 * started at 195 MiB, 3 failed at 293 MiB, 4 and 8 failed at 439 MiB and
 * started at 488 MiB, 16 failed at 488 MiB. The floor is 512 MiB for any rank
 * count: it refuses 1 or 2 ranks that might have started, and is a necessary
 * condition only (16 ranks on a host need more).
 */
#define BS_HOST_MIN_ADDR_BYTES ((int64_t)512 << 20)
int bs_host_mpi_limit_ok(char *err, size_t errlen);

/*
 * The plan buffers of one point's ranks: the largest of any rank in *per_rank
 * and, with sum non-NULL, their sum over ranks [0, ranks) in *sum (checked
 * arithmetic: saturates at INT64_MAX). ranks_per_node as bs_plan_create takes it.
 * 0, or -1 with the plan's error.
 */
int bs_host_plan_bytes(const bs_config *cfg, int ranks_per_node, int ranks, int64_t *per_rank, int64_t *sum, char *err,
                       size_t errlen);

/*
 * Whether `local` bytes (the ranks on this host together) and `per_rank` bytes
 * (the largest rank) fit: the host's available memory and the process limits.
 * 0, or -1 with "the plan's buffers need at least 160.00 GiB on this host (32
 * rank(s), up to 5.00 GiB each), more than the 22.91 GiB available (MemAvailable
 * in /proc/meminfo)" in err.
 */
int bs_host_fits(int64_t local, int64_t per_rank, int local_ranks, char *err, size_t errlen);

#endif
