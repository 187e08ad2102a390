/*
 * plots.c — see plots.h: per kernel, the measured rate (GFLOP/s or G
 * elements/s) against size beside the profile's model; per link test, the
 * measured time against bytes beside the profile's shm link.
 */
#include "calib/plots.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "base/fileio.h"
#include "calib/profile_build.h"

/* gnuplot data, script and PNGs: per kernel GFLOP/s (or GB/s) against size, per link time against bytes. */
int bs_calib_write_plots(const bs_calib_data *d, const bs_profile *p, const bs_calib_opts *o, const char *dir,
                         char *err, size_t errlen) {
  if (mkdir(dir, 0755) && errno != EEXIST) {
    snprintf(err, errlen, "%s: cannot create the plot directory: %s", dir, strerror(errno));
    return -1;
  }
  char path[1100];
  snprintf(path, sizeof path, "%s/plots.gp", dir);
  bs_outfile *gpo = bs_out_open(path, err, errlen);
  if (!gpo) return -1;
  FILE *gp = bs_out_stream(gpo);
  fprintf(gp,
          "# burstsim calib: measured (points) against the profile's model (lines). Run: gnuplot plots.gp\n"
          "set terminal pngcairo size 1000,650\nset logscale x 2\nset key outside right\nset grid\n");
  int primary = o->primary_bf16 ? 1 : 0;
  for (int kernel = 0; kernel < BS_K_COUNT; kernel++) {
    snprintf(path, sizeof path, "%s/kernel_%s.dat", dir, bs_kernel_name((bs_kernel)kernel));
    bs_outfile *fo = NULL;
    FILE *f = NULL;
    char last[48] = "";
    int blocks = 0;
    char titles[16][48];
    for (int i = 0; i < d->nk; i++) {
      const bs_calib_kpoint *k = &d->k[i];
      if (k->kernel != kernel || (k->bf16 != primary && kernel <= BS_K_ATTN_DELTA)) continue;
      if (!f) {
        if (!(fo = bs_out_open(path, err, errlen))) {
          bs_out_abort(gpo);
          return -1;
        }
        f = bs_out_stream(fo);
      }
      if (strcmp(last, k->series)) {
        if (blocks >= 16) break;
        if (blocks) fprintf(f, "\n\n");
        snprintf(last, sizeof last, "%s", k->series);
        snprintf(titles[blocks++], 48, "%s", k->series);
        fprintf(f, "# %s: size  measured_s  model_s  measured_rate  model_rate\n", k->series);
      }
      double size = kernel == BS_K_COPY ? (double)k->elems : (k->x > 0 ? k->x : (double)k->nq);
      double work = k->flops > 0 ? k->flops : (double)(kernel == BS_K_COPY ? 2 * k->elems : k->elems);
      double mt = bs_calib_model_time(p, k);
      fprintf(f, "%g %g %g %g %g\n", size, k->t_eff, mt, work / k->t_eff / 1e9, mt > 0 ? work / mt / 1e9 : 0);
    }
    if (!f) continue;
    if (bs_out_commit(fo, err, errlen)) {
      bs_out_abort(gpo);
      return -1;
    }
    fprintf(gp,
            "set output 'kernel_%s.png'\nset title '%s: measured vs profile (whole-CPU-equivalent, %d rank(s))'\n"
            "set xlabel '%s'\nset ylabel '%s'\nplot ",
            bs_kernel_name((bs_kernel)kernel), bs_kernel_name((bs_kernel)kernel), d->ranks,
            kernel <= BS_K_ATTN_BWD_UNFUSED ? "x = sqrt(nq * nk)"
            : kernel == BS_K_COPY           ? "bytes"
                                            : "rows / n",
            kernel == BS_K_COPY || kernel == BS_K_ELEMWISE || kernel == BS_K_ATTN_MERGE ? "G elements/s" : "GFLOP/s");
    for (int b = 0; b < blocks; b++)
      fprintf(gp,
              "%s'kernel_%s.dat' index %d using 1:4 with points pt 7 lc %d title '%s measured', "
              "'' index %d using 1:5 with lines lc %d title '%s model'",
              b ? ", \\\n     " : "", bs_kernel_name((bs_kernel)kernel), b, b + 1, titles[b], b, b + 1, titles[b]);
    fprintf(gp, "\n");
  }
  if (d->nl) {
    static const char *tests[] = {"pingpong", "bidir", "ring", "allreduce", "allgather", "reduce_scatter", "alltoall"};
    snprintf(path, sizeof path, "%s/links.dat", dir);
    bs_outfile *fo = bs_out_open(path, err, errlen);
    if (!fo) {
      bs_out_abort(gpo);
      return -1;
    }
    FILE *f = bs_out_stream(fo);
    const bs_prof_link *shm = &p->link[BS_LINK_SHM];
    for (int t = 0; t < 7; t++) {
      fprintf(f, "%s# %s: bytes measured_s model_s (pingpong, ring: the shm link of the profile)\n", t ? "\n\n" : "",
              tests[t]);
      for (int i = 0; i < d->nl; i++) {
        const bs_calib_lpoint *l = &d->l[i];
        if (strcmp(l->test, tests[t]) || !strcmp(l->cls, "inter")) continue;
        double flows = !strcmp(l->test, "ring") ? l->ranks : 1;
        double mt = shm->lat_s + (double)l->bytes * flows / shm->bw_Bps;
        fprintf(f, "%lld %g %g\n", (long long)l->bytes, l->t_med, mt);
      }
    }
    if (bs_out_commit(fo, err, errlen)) {
      bs_out_abort(gpo);
      return -1;
    }
    fprintf(gp,
            "set output 'links.png'\nset logscale xy\nset title 'links (%d ranks): measured (points), shm link model "
            "(lines)'\n"
            "set xlabel 'bytes'\nset ylabel 'seconds'\nplot ",
            d->ranks);
    for (int t = 0; t < 7; t++)
      fprintf(gp, "%s'links.dat' index %d using 1:2 with points pt 7 lc %d title '%s'%s", t ? ", \\\n     " : "", t,
              t + 1, tests[t], t <= 2 ? "" : "");
    fprintf(gp,
            ", \\\n     'links.dat' index 0 using 1:3 with lines lc 1 title 'pingpong model', "
            "'links.dat' index 2 using 1:3 with lines lc 3 title 'ring model'\n");
  }
  if (bs_out_commit(gpo, err, errlen)) return -1;
  char cmd[1300];
  snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot plots.gp", dir);
  int rc = system(cmd);
  if (rc != 0 && o->log) fprintf(o->log, "# calib: gnuplot failed (exit %d); data and script are in %s\n", rc, dir);
  return 0;
}
