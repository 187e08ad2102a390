/*
 * calib.c — `burstsim calib` (calib.h) from end to end: where the ranks sit
 * and what the machine is, the FMA peak and memcpy bandwidth, then the kernel
 * benchmarks (measure_kernels.c) and the link benchmarks (measure_links.c);
 * afterwards the profile built from their fits (profile_build.c) is checked to
 * load back, the plots are drawn (plots.c), and the profile is written once.
 */
#include "calib/calib.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "base/clock.h"
#include "base/fileio.h"
#include "calib/bench_kernels.h"
#include "calib/measure.h"
#include "calib/measure_cuda.h"
#include "calib/plots.h"
#include "calib/profile_build.h"
#include "kernels/attn.h"
#include "profile/profile.h"

void bs_calib_opts_default(bs_calib_opts *o) {
  memset(o, 0, sizeof *o);
  o->log = NULL;
}

void bs_calib_data_free(bs_calib_data *d) {
  free(d->k);
  free(d->l);
  memset(d, 0, sizeof *d);
}

/* -------------------------------------------------------------- machine */

static void machine_info(bs_calib_data *d) {
  struct utsname u;
  if (uname(&u) == 0)
    snprintf(d->machine, sizeof d->machine, "%s %s %s %s", u.sysname, u.nodename, u.release, u.machine);
  FILE *f = fopen("/proc/cpuinfo", "r");
  snprintf(d->cpu_model, sizeof d->cpu_model, "unknown");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "model name", 10)) {
        char *c = strchr(line, ':');
        if (c) {
          c++;
          while (*c == ' ' || *c == '\t') c++;
          c[strcspn(c, "\n")] = 0;
          snprintf(d->cpu_model, sizeof d->cpu_model, "%s", c);
        }
        break;
      }
    fclose(f);
  }
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(d->date, sizeof d->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  long pages = sysconf(_SC_PHYS_PAGES), ps = sysconf(_SC_PAGESIZE);
  d->mem_total = pages > 0 && ps > 0 ? (int64_t)pages * ps : 0;
}

/*
 * Which ranks share a node: rank r is on node r / ranks_per_node when that is
 * given (as `ranks_per_node` groups ranks in real runs), else ranks with the same
 * host name (MPI_Get_processor_name) share one. Picks rank 0's ping-pong partners.
 */
static int find_nodes(MPI_Comm comm, int ranks_per_node, bs_calib_data *d, char *err, size_t errlen) {
  int G = d->ranks;
  int *node = calloc((size_t)G, sizeof *node);
  char *names = calloc((size_t)G, MPI_MAX_PROCESSOR_NAME);
  char mine[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0, ok = node && names;
  if (!bs_calib_all_ok(comm, ok)) {
    free(node);
    free(names);
    snprintf(err, errlen, "calib: out of memory for the rank placement");
    return -1;
  }
  MPI_Get_processor_name(mine, &len);
  MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm);
  d->nodes = 0;
  for (int r = 0; r < G; r++) {
    if (ranks_per_node > 0) {
      node[r] = r / ranks_per_node;
    } else {
      node[r] = -1;
      for (int q = 0; q < r && node[r] < 0; q++)
        if (!strncmp(names + (size_t)q * MPI_MAX_PROCESSOR_NAME, names + (size_t)r * MPI_MAX_PROCESSOR_NAME,
                     MPI_MAX_PROCESSOR_NAME))
          node[r] = node[q];
      if (node[r] < 0) node[r] = d->nodes;
    }
    if (node[r] + 1 > d->nodes) d->nodes = node[r] + 1;
  }
  d->peer_intra = d->peer_inter = -1;
  for (int r = 1; r < G; r++) {
    if (node[r] == node[0] && d->peer_intra < 0) d->peer_intra = r;
    if (node[r] != node[0] && d->peer_inter < 0) d->peer_inter = r;
  }
  free(node);
  free(names);
  return 0;
}

typedef struct {
  char *a, *b;
  size_t n;
} copy_call;

static int copy_op(void *vctx) {
  copy_call *c = vctx;
  memcpy(c->b, c->a, c->n);
  return 0;
}

int bs_calib_measure(MPI_Comm comm, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
  double t_start = bs_now_s();
  int rank;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &d->ranks);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  d->cores = cores > 0 ? (int)cores : 1;
  d->threads = o->threads > 0 ? o->threads : (d->cores / d->ranks > 0 ? d->cores / d->ranks : 1);
  d->quick = o->quick;
  machine_info(d);
  if (find_nodes(comm, o->ranks_per_node, d, err, errlen)) return -1;
  if (o->device) { /* a GPU: its kernels and links (measure_cuda.c) */
    int rc = bs_calib_measure_device(comm, o, d, err, errlen);
    d->wall_s = bs_now_s() - t_start;
    return rc;
  }
  snprintf(d->kernel_path, sizeof d->kernel_path, "%s", attn_cpu_variant());
  const char *isa = "?";
  /* FMA peak of every rank at once (each bs_bench_fma_peak is a best of 5 on its threads). */
  {
    double mine = bs_bench_fma_peak(d->threads, &isa) * 1e9, sum;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
    d->fma_peak = sum;
    snprintf(d->isa, sizeof d->isa, "%s", isa);
  }
  {
    bs_calib_policy pol = bs_calib_policy_of(o->quick);
    copy_call c = {malloc(64 << 20), malloc(64 << 20), 64 << 20};
    int ok = c.a && c.b;
    if (!bs_calib_all_ok(comm, ok)) {
      free(c.a);
      free(c.b);
      snprintf(err, errlen, "calib: out of memory for the copy bandwidth buffers");
      return -1;
    }
    memset(c.a, 3, c.n);
    memset(c.b, 0, c.n);
    double med, mn, mx;
    int reps;
    bs_calib_time(comm, &pol, copy_op, &c, &med, &mn, &mx, &reps);
    d->copy_Bps = 2.0 * (double)c.n * d->ranks / med;
    free(c.a);
    free(c.b);
  }
  if (o->log)
    fprintf(o->log,
            "# burstsim calib: %d rank(s), %d core(s), %d thread(s) per rank, kernel path %s\n"
            "# FMA peak (all ranks at once): %.1f GFLOP/s; memcpy (read + write): %.2f GB/s\n",
            d->ranks, d->cores, d->threads, d->kernel_path, d->fma_peak / 1e9, d->copy_Bps / 1e9);
  if (!o->no_kernels && bs_calib_measure_kernels(comm, o, d, err, errlen)) return -1;
  if (!o->no_links && bs_calib_measure_links(comm, o, d, err, errlen)) return -1;
  d->wall_s = bs_now_s() - t_start;
  (void)rank;
  return 0;
}

/* The profile's name: the file name of path without ".json". */
static void profile_name(const char *path, char *name, size_t len) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  snprintf(name, len, "%.*s", (int)(n > 5 && !strcmp(base + n - 5, ".json") ? n - 5 : n), base);
}

int bs_calib_write_profile(const bs_calib_data *d, const bs_calib_opts *o, const char *path, const char *plots_dir,
                           char *err, size_t errlen) {
  char name[64];
  profile_name(path, name, sizeof name);
  bs_profile *p = calloc(1, sizeof *p);
  int rc = -1;
  char *text = NULL;
  cJSON *root = NULL;
  bs_outfile *po = NULL;
  if (!p) {
    snprintf(err, errlen, "calib: out of memory");
    goto out;
  }
  if (!(root = bs_calib_profile_json(d, o, name, p, err, errlen))) goto out;
  text = cJSON_Print(root);
  if (!text) {
    snprintf(err, errlen, "calib: out of memory");
    goto out;
  }
  /* The profile replaces PATH last: only once it loads back and the plots are written. */
  if (!(po = bs_out_open(path, err, errlen))) goto out;
  if (fputs(text, bs_out_stream(po)) < 0 || fputc('\n', bs_out_stream(po)) == EOF || fflush(bs_out_stream(po))) {
    snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
    goto out;
  }
  const char *written = bs_out_temp_path(po);
  if (written) { /* a device or FIFO is written in place and cannot be read back */
    bs_profile check;
    char lerr[512];
    if (bs_profile_load(written, &check, lerr, sizeof lerr)) {
      snprintf(err, errlen, "%s: the profile does not load back (%s); not written", path, lerr);
      goto out;
    }
  }
  if (plots_dir && bs_calib_write_plots(d, p, o, plots_dir, err, errlen)) goto out;
  rc = bs_out_commit(po, err, errlen);
  po = NULL;
out:
  bs_out_abort(po);
  free(text);
  cJSON_Delete(root);
  free(p);
  return rc;
}
