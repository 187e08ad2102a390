/*
 * hostmem.c — see hostmem.h. Reads /proc/meminfo and the process limits
 * only; allocates nothing but the plan it measures.
 */
#include "runtime/hostmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "plans/plan.h"
#include "runtime/devplan.h"

int64_t bs_host_mem_available(const char **src) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    fclose(f);
    if (kb >= 0 && kb < INT64_MAX / 1024) {
      if (src) *src = "MemAvailable in /proc/meminfo";
      return (int64_t)kb * 1024;
    }
  }
  long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && pages < INT64_MAX / page) {
    if (src) *src = "free pages, sysconf";
    return (int64_t)pages * page;
  }
  return -1;
}

int64_t bs_host_addr_limit(const char **which) {
  static const struct {
    int res;
    const char *name;
  } lims[] = {{RLIMIT_AS, "ulimit -v"}, {RLIMIT_DATA, "ulimit -d"}};
  int64_t best = -1;
  for (size_t i = 0; i < sizeof lims / sizeof lims[0]; i++) {
    struct rlimit rl;
    if (getrlimit(lims[i].res, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)INT64_MAX) continue;
    if (best < 0 || (int64_t)rl.rlim_cur < best) {
      best = (int64_t)rl.rlim_cur;
      if (which) *which = lims[i].name;
    }
  }
  return best;
}

static double gib(int64_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

int bs_host_mpi_limit_ok(char *err, size_t errlen) {
  const char *which = "";
  int64_t lim = bs_host_addr_limit(&which);
  if (lim < 0 || lim >= BS_HOST_MIN_ADDR_BYTES) return 0;
  snprintf(err, errlen,
           "an address-space limit of %.2f MiB (%s) is below the %.0f MiB that MPI start-up maps before any "
           "plan buffer (Open MPI crashes in MPI_Init when its mmap fails); raise the limit",
           (double)lim / 1048576.0, which, (double)BS_HOST_MIN_ADDR_BYTES / 1048576.0);
  return -1;
}

int bs_host_plan_bytes(const bs_config *cfg, int ranks_per_node, int ranks, int64_t *per_rank, int64_t *sum, char *err,
                       size_t errlen) {
  bs_plan *plan = NULL;
  *per_rank = 0;
  if (sum) *sum = 0;
  if (bs_plan_create(cfg, ranks_per_node, &plan, err, errlen)) return -1;
  int n = bs_plan_ranks(plan) < ranks ? bs_plan_ranks(plan) : ranks;
  for (int r = 0; r < n; r++) {
    bs_dev_bytes b;
    if (bs_dev_bytes_of(plan, r, &b, err, errlen)) {
      bs_plan_free(plan);
      return -1;
    }
    if (b.peak > *per_rank) *per_rank = b.peak;
    if (sum && __builtin_add_overflow(*sum, b.peak, sum)) *sum = INT64_MAX;
  }
  bs_plan_free(plan);
  return 0;
}

int bs_host_fits(int64_t local, int64_t per_rank, int local_ranks, char *err, size_t errlen) {
  const char *which = "";
  int64_t lim = bs_host_addr_limit(&which);
  if (lim >= 0 && per_rank > lim) {
    snprintf(err, errlen,
             "a rank's plan buffers need at least %.2f GiB, more than this process's limit of %.2f GiB (%s); "
             "raise the limit or lower the sizes (workload.seq_len, workload.batch) or give more ranks",
             gib(per_rank), gib(lim), which);
    return -1;
  }
  const char *src = "";
  int64_t avail = bs_host_mem_available(&src);
  if (avail >= 0 && local > avail) {
    snprintf(err, errlen,
             "the plan's buffers need at least %.2f GiB on this host (%d rank(s), up to %.2f GiB each), more than "
             "the %.2f GiB it has available (%s); lower the sizes (workload.seq_len, workload.batch) or spread "
             "the ranks over more hosts",
             gib(local), local_ranks, gib(per_rank), gib(avail), src);
    return -1;
  }
  return 0;
}
