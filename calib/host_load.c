/*
 * host_load.c — the CPU other work takes while a job runs (host_load.h).
 */
#include "host_load.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/clock.h"

/* The busy CPU time of the machine, in seconds: the "cpu" line of /proc/stat less idle and iowait. */
static double proc_busy_s(void) {
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return -1;
  unsigned long long v[10] = {0};
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                 &v[6], &v[7], &v[8], &v[9]);
  fclose(f);
  if (n < 4) return -1;
  long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0) return -1;
  /* user nice system idle iowait irq softirq steal (guest time is inside user already) */
  unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return (double)busy / (double)hz;
}

void bs_load_mark_now(bs_load_mark *m) {
  struct rusage ru;
  m->wall_s = bs_now_s();
  m->busy_s = proc_busy_s();
  m->children_s = 0;
  if (!getrusage(RUSAGE_CHILDREN, &ru))
    m->children_s = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
                    1e-6 * (double)ru.ru_stime.tv_usec;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  m->ncpu = n > 0 ? (int)n : 1;
}

double bs_load_others_share(const bs_load_mark *a, const bs_load_mark *b) {
  double wall = b->wall_s - a->wall_s;
  if (a->busy_s < 0 || b->busy_s < 0 || wall <= 0) return -1;
  double others = (b->busy_s - a->busy_s) - (b->children_s - a->children_s);
  double share = others / (wall * (double)b->ncpu);
  return share < 0 ? 0 : share > 1 ? 1 : share;
}
