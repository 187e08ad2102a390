/*
 * cmd_validate.c — `burstsim validate SCENARIO.ini`: for each rank count of
 * the scenario, calibrates (unless --profile), runs the points for real with
 * mpirun, predicts them with the simulator on the host topology, then prints
 * measured against predicted with error % and writes the entries
 * {"config", "measured", "predicted", "error"} (--out). The spawning,
 * reading and comparing are calib/validate.c; this file parses, prints and
 * writes.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include "calib/validate.h"
#include "cmd_args.h"
#include "commands.h"
#include "output.h"
#include "scenario.h"
#include "sim/sim.h"


static void validate_usage(FILE *f) {
  fprintf(f,
          "usage: burstsim validate SCENARIO.ini [--profile P.json] [--out FILE.json] [--np G]...\n"
          "                         [--set section.key=value]... [--full-calib] [--warmup N]\n"
          "                         [--workdir DIR] [--keep] [--fail-factor F] [--fail-exact]\n"
          "\n"
          "Runs every point of the scenario for real (mpirun -np G burstsim run, on this\n"
          "machine) and in the simulator on the host topology, with a profile calibrated\n"
          "just before on the same rank count (mpirun -np G burstsim calib --quick) unless\n"
          "--profile is given, and prints per point measured and predicted step, fwd, bwd,\n"
          "exposed communication, bytes and peak memory with the error in %%.\n"
          "\n"
          "  --profile P     use this profile for every rank count (no calibration)\n"
          "  --out FILE      entries {config, measured, predicted, error} as JSON\n"
          "  --np G          only the points with G ranks, 1 .. 4096 (repeatable, up to 16 times)\n"
          "  --set k=v       scenario override, as in burstsim sim / run (up to 32)\n"
          "  --full-calib    the full calibration grid instead of --quick (minutes)\n"
          "  --warmup N      untimed executions before each measured run, 0 .. 100 (default 1)\n"
          "  --workdir DIR   where profiles, results and logs go, kept afterwards (default: a new\n"
          "                  directory under $TMPDIR or /tmp, removed at the end, failed or not)\n"
          "  --keep          keep that new directory (its path is printed)\n"
          "  --fail-factor F exit 1 unless bytes are exact, peak memory is within 2 %%, and\n"
          "                  the step error is within F x the targets (median 10 %%, max 25 %%)\n"
          "  --fail-exact    exit 1 unless every point ran, bytes are exact and peak memory is\n"
          "                  within 2 %%; step errors are printed but not judged (timing on a\n"
          "                  loaded or sanitizer-built machine is a benchmark, not a test)\n"
          "\n"
          "Targets: bytes exact, peak memory within 2 %%, step time median |error| <= 10 %%\n"
          "and max <= 25 %% over the points.\n");
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void fmt_err(char *buf, size_t n, double e) {
  if (isnan(e)) snprintf(buf, n, "%7s", "n/a");
  else snprintf(buf, n, "%+6.1f%%", e);
}

/* The result objects of the result contract of docs/design.md, built by the shared writer (output.c). */
static cJSON *result_objects(const char *mode, const bs_result *r, int n, char *err, size_t errlen) {
  cJSON *root = bs_output_json_tree(mode, r, n);
  cJSON *rs = root ? cJSON_DetachItemFromObjectCaseSensitive(root, "results") : NULL;
  cJSON_Delete(root);
  if (!rs) snprintf(err, errlen, "out of memory formatting the results");
  return rs;
}

static cJSON *error_json(const bs_validate_error *e) {
  cJSON *o = cJSON_CreateObject();
  const char *k[] = {"step_pct", "fwd_pct", "bwd_pct", "comm_exposed_pct", "peak_bytes_pct", "bytes_total_pct"};
  double v[] = {e->step, e->fwd, e->bwd, e->comm_exposed, e->peak, e->bytes};
  for (int i = 0; i < 6; i++) {
    if (isnan(v[i])) cJSON_AddNullToObject(o, k[i]);
    else cJSON_AddNumberToObject(o, k[i], v[i]);
  }
  cJSON_AddBoolToObject(o, "bytes_exact", e->bytes_exact);
  return o;
}



/*
 * A validation file may hold several grids: lines before the first "[grid NAME]"
 * line are common, each "[grid NAME]" starts a grid (a scenario of its own, since
 * one INI is one cross product). Each grid is written to the work directory with
 * the other grids' lines blanked, so that line numbers in errors stay those of the
 * original file. Returns the number of grids (0 = a plain scenario), -1 on error.
 */
#define MAX_GRIDS 16
#define MAX_GRID_LINES 65536
static int split_grids(const char *path, const char *wd, char paths[][600], char names[][64], char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return -1;
  }
  struct stat sb;
  if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
    snprintf(err, errlen, "%s: is a directory, not a scenario file", path);
    fclose(f);
    return -1;
  }
  char **lines = NULL, *buf = NULL;
  size_t bufcap = 0;
  int n = 0, cap = 0, ng = 0;
  static int grid_of[MAX_GRID_LINES];
  errno = 0;
  while (getline(&buf, &bufcap, f) >= 0) { /* whole lines: a grid file has no line length limit */
    if (n == MAX_GRID_LINES) {
      snprintf(err, errlen, "%s:%d: more than %d lines in a file with grids", path, n + 1, MAX_GRID_LINES);
      ng = -1;
      break;
    }
    if (n == cap) {
      cap = cap ? 2 * cap : 256;
      char **l = realloc(lines, (size_t)cap * sizeof *l);
      if (!l) {
        snprintf(err, errlen, "%s: out of memory", path);
        ng = -1;
        break;
      }
      lines = l;
    }
    if (!(lines[n] = strdup(buf))) {
      snprintf(err, errlen, "%s: out of memory", path);
      ng = -1;
      break;
    }
    const char *t = buf;
    while (*t == ' ' || *t == '\t') t++;
    if (!strncmp(t, "[grid", 5) && (t[5] == ']' || t[5] == ' ')) {
      if (ng == MAX_GRIDS) {
        snprintf(err, errlen, "%s:%d: at most %d grids", path, n + 1, MAX_GRIDS);
        ng = -1;
        n++;
        break;
      }
      const char *nm = t + 5;
      while (*nm == ' ') nm++;
      snprintf(names[ng], 64, "%.*s", (int)strcspn(nm, "]\r\n"), nm);
      if (!names[ng][0]) snprintf(names[ng], 64, "grid%d", ng + 1);
      ng++;
      grid_of[n] = -2; /* the marker itself */
    } else grid_of[n] = ng - 1; /* -1: common */
    n++;
  }
  if (ng >= 0 && ferror(f)) {
    snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno ? errno : EIO));
    ng = -1;
  }
  free(buf);
  fclose(f);
  for (int g = 0; ng > 0 && g < ng; g++) {
    snprintf(paths[g], 600, "%s/grid-%d-%s.ini", wd, g + 1, names[g]);
    char oerr[700];
    bs_outfile *o = bs_out_open(paths[g], oerr, sizeof oerr);
    if (!o) {
      snprintf(err, errlen, "%.1000s", oerr);
      ng = -1;
      break;
    }
    for (int i = 0; i < n; i++) fputs(grid_of[i] == -1 || grid_of[i] == g ? lines[i] : "\n", bs_out_stream(o));
    if (bs_out_commit(o, oerr, sizeof oerr)) {
      snprintf(err, errlen, "%.1000s", oerr);
      ng = -1;
      break;
    }
  }
  for (int i = 0; i < n; i++) free(lines[i]);
  free(lines);
  return ng;
}

/* Error messages name the grid file: put the original path and its grid name back. */
static void unmap_path(char *err, size_t errlen, const char *gridpath, const char *orig, const char *name) {
  char *at = strstr(err, gridpath);
  if (!at) return;
  char tmp[1200];
  snprintf(tmp, sizeof tmp, "%.*s%s [grid %s]%s", (int)(at - err), err, orig, name, at + strlen(gridpath));
  snprintf(err, errlen, "%.1000s", tmp);
}

/* Removes the work directory and what the jobs wrote in it (files only, links not followed). */
static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path) ? -1 : 0;
}

static int remove_tree(const char *dir) { return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static int validate_in(const bs_validate_args *A, const char *wd);

int cmd_validate(int argc, char **argv) {
  bs_validate_args A;
  char aerr[512];
  if (bs_validate_args_parse(argc, argv, &A, aerr, sizeof aerr)) {
    fprintf(stderr, "burstsim validate: %s\n", aerr);
    validate_usage(stderr);
    return 2;
  }
  if (A.help) {
    validate_usage(stdout);
    return 0;
  }
  /* The predictions fork simulations: no OpenBLAS pool here; mpirun gets the user's setting back. */
  bs_sim_single_blas_thread();
  if (A.profile) {
    FILE *f = fopen(A.profile, "r");
    if (!f) {
      fprintf(stderr, "burstsim validate: --profile %s: cannot open\n", A.profile);
      return 2;
    }
    fclose(f);
  }
  { /* the output is checked before any work, creating nothing */
    char err[1024];
    const bs_path_role outs[] = {{"--out", A.out}};
    if (bs_output_precheck(outs, 1, A.scenario, NULL, A.profile, err, sizeof err)) {
      fprintf(stderr, "burstsim validate: %s\n", err);
      return 2;
    }
  }
  char wd[512];
  if (A.workdir) {
    if (snprintf(wd, sizeof wd, "%s", A.workdir) >= (int)sizeof wd) {
      fprintf(stderr, "burstsim validate: --workdir: longer than %zu bytes\n", sizeof wd - 1);
      return 2;
    }
    if (mkdir(wd, 0755) && errno != EEXIST) {
      fprintf(stderr, "burstsim validate: --workdir %s: %s\n", wd, strerror(errno));
      return 2;
    }
  } else {
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp || strlen(tmp) > 400) tmp = "/tmp";
    snprintf(wd, sizeof wd, "%s/burstsim-validate-XXXXXX", tmp);
    if (!mkdtemp(wd)) {
      fprintf(stderr, "burstsim validate: cannot create a work directory: %s\n", strerror(errno));
      return 1;
    }
  }
  int rc = validate_in(&A, wd);
  /* A directory of its own is removed, whatever the outcome, unless --keep; one given by --workdir stays. */
  if (!A.workdir && !A.keep) {
    if (remove_tree(wd)) {
      fprintf(stderr, "burstsim validate: cannot remove the work directory %s: %s\n", wd, strerror(errno));
      if (rc == 0) rc = 1;
    }
  } else {
    fprintf(stderr, "burstsim validate: work directory kept: %s\n", wd);
  }
  return rc;
}

static int validate_in(const bs_validate_args *A, const char *wd) {
  const char *scenario = A->scenario, *profile = A->profile, *out = A->out;
  char **sets = (char **)A->sets;
  int nsets = A->nsets, nnp = A->nnp, full = A->full_calib, warmup = A->warmup, fail_exact = A->fail_exact;
  const int *nps = A->nps;
  double fail_factor = A->fail_factor;
  char err[1024];
  /* The grids: one scenario each (a plain file is one grid). */
  static char gpaths[MAX_GRIDS][600], gnames[MAX_GRIDS][64];
  int ngrids = split_grids(scenario, wd, gpaths, gnames, err, sizeof err);
  if (ngrids < 0) {
    fprintf(stderr, "burstsim validate: %s\n", err);
    return 2;
  }
  if (ngrids == 0) {
    ngrids = 1;
    snprintf(gpaths[0], sizeof gpaths[0], "%s", scenario);
    snprintf(gnames[0], sizeof gnames[0], "%s", "scenario");
  }
  bs_scenario scs[MAX_GRIDS];
  int total = 0;
  for (int g = 0; g < ngrids; g++) {
    if (bs_scenario_load(gpaths[g], sets, nsets, &scs[g], err, sizeof err)) {
      if (strcmp(gpaths[g], scenario)) unmap_path(err, sizeof err, gpaths[g], scenario, gnames[g]);
      fprintf(stderr, "burstsim validate: %s\n", err);
      for (int k = 0; k < g; k++) bs_scenario_free(&scs[k]);
      return 2;
    }
    total += scs[g].npoints;
    const bs_path_role outs[] = {{"--out", out}};
    if (bs_output_precheck(outs, 1, NULL, &scs[g], profile, err, sizeof err)) {
      fprintf(stderr, "burstsim validate: %s\n", err);
      for (int k = 0; k <= g; k++) bs_scenario_free(&scs[k]);
      return 2;
    }
  }
  /* Rank counts, in order of first appearance. */
  int gs[64], ng = 0;
  for (int g = 0; g < ngrids; g++)
    for (int i = 0; i < scs[g].npoints; i++) {
      int G = scs[g].points[i].par.gpus, seen = 0, wanted = nnp == 0;
      for (int j = 0; j < nnp; j++) wanted |= nps[j] == G;
      for (int j = 0; j < ng; j++) seen |= gs[j] == G;
      if (wanted && !seen && ng < 64) gs[ng++] = G;
    }
  bs_validate_opts vo = {NULL, NULL, wd, full, warmup, stderr};
  int np = 0, cap = total > 0 ? total : 1;
  bs_config *cfgs = calloc((size_t)cap, sizeof *cfgs);
  bs_result *meas = calloc((size_t)cap, sizeof *meas), *pred = calloc((size_t)cap, sizeof *pred);
  bs_validate_error *errs = calloc((size_t)cap, sizeof *errs);
  char (*profs)[600] = calloc((size_t)cap, sizeof *profs);
  int rc = 1;
  if (!ng) {
    fprintf(stderr, "burstsim validate: %s: no point with the rank count(s) given by --np\n", scenario);
    rc = 2;
    goto out;
  }
  if (!cfgs || !meas || !pred || !errs || !profs) {
    fprintf(stderr, "burstsim validate: out of memory\n");
    goto out;
  }
  for (int gi = 0; gi < ng; gi++) {
    int G = gs[gi];
    char prof[600], results[700];
    if (profile) snprintf(prof, sizeof prof, "%s", profile);
    else {
      /* Calibrate for the points of this rank count: their storage types, head dimension, largest block. */
      int f32 = 0, b16 = 0, hd = -1;
      int64_t mb = 0;
      for (int g = 0; g < ngrids; g++)
        for (int i = 0; i < scs[g].npoints; i++) {
          const bs_config *c = &scs[g].points[i];
          if (c->par.gpus != G) continue;
          if (c->model.dtype == BS_FP32) f32 = 1;
          else b16 = 1;
          hd = hd == -1 || hd == c->model.head_dim ? (int)c->model.head_dim : 0;
          int64_t blk = c->work.seq_len / G / (c->par.layout == BS_ZIGZAG ? 2 : 1);
          if (c->par.method == BS_ULYSSES || c->par.method == BS_USP) blk = c->work.seq_len;
          if (blk > mb) mb = blk;
        }
      const char *dt = f32 && b16 ? "both" : b16 ? "bf16" : "fp32";
      snprintf(prof, sizeof prof, "%s/profile-g%d.json", wd, G);
      if (bs_validate_calibrate(&vo, G, dt, hd > 0 ? hd : 0, mb, prof, err, sizeof err)) {
        fprintf(stderr, "burstsim validate: %s\n", err);
        goto out;
      }
    }
    for (int g = 0; g < ngrids; g++) {
      const bs_scenario *sc = &scs[g];
      int any = 0;
      for (int i = 0; i < sc->npoints; i++) any |= sc->points[i].par.gpus == G;
      if (!any) continue;
      snprintf(results, sizeof results, "%s/run-g%d-%d.json", wd, G, g + 1);
      if (bs_validate_run(&vo, G, gpaths[g], sets, nsets, results, err, sizeof err)) {
        fprintf(stderr, "burstsim validate: %s\n", err);
        goto out;
      }
      bs_result *rr = NULL;
      int nr = 0;
      if (bs_validate_read_results(results, &rr, &nr, err, sizeof err)) {
        fprintf(stderr, "burstsim validate: %s\n", err);
        goto out;
      }
      int j = 0, bad = 0;
      for (int i = 0; i < sc->npoints && !bad; i++) {
        const bs_config *c = &sc->points[i];
        if (c->par.gpus != G) continue;
        if (j >= nr || !bs_validate_same_point(c, &rr[j])) {
          fprintf(stderr, "burstsim validate: %s: result %d does not match point %d of grid %s (%s, G=%d)\n", results, j,
                  i, gnames[g], bs_method_name(c->par.method), G);
          bad = 1;
          break;
        }
        cfgs[np] = *c;
        meas[np] = rr[j];
        meas[np].cfg = *c;
        meas[np].mode = "run";
        memset(&rr[j], 0, sizeof rr[j]);
        snprintf(profs[np], sizeof profs[np], "%s", prof);
        j++;
        np++;
      }
      for (int k = 0; k < nr; k++) bs_result_free(&rr[k]);
      free(rr);
      if (bad) goto out;
    }
  }
  /* Predictions (the simulator forks per point: cheap next to the runs). */
  for (int i = 0; i < np; i++) {
    if (meas[i].error[0]) {
      pred[i].cfg = cfgs[i];
      snprintf(pred[i].error, sizeof pred[i].error, "not simulated: the run failed");
      continue;
    }
    char e[512];
    if (bs_validate_predict(&cfgs[i], profs[i], &pred[i], e, sizeof e)) {
      snprintf(pred[i].error, sizeof pred[i].error, "%.250s", e);
      pred[i].cfg = cfgs[i];
    }
    pred[i].mode = "sim";
    bs_validate_compare(&meas[i], &pred[i], &errs[i]);
  }
  /* The table. */
  printf("# burstsim validate %s: %d point(s); measured (real run) vs predicted (sim, host topology)\n", scenario, np);
  printf("%-6s %-7s %2s %6s %-6s %-4s %-5s %10s %10s %8s %8s %8s %8s %10s %7s %8s\n", "method", "variant", "G", "N",
         "layout", "mask", "phase", "step_meas", "step_pred", "step", "fwd", "bwd", "exposed", "bytes", "exact", "peak");
  double abs_step[1024];
  int nstep = 0, nbytes_ok = 0, nmem_ok = 0, nok = 0;
  for (int i = 0; i < np; i++) {
    const bs_config *c = &cfgs[i];
    char variant[16] = "-", seq[32];
    if (c->par.method == BS_BURST) snprintf(variant, sizeof variant, "%s%s", c->par.bwd_opt ? "opt" : "plain", c->par.lao ? "" : "-nolao");
    if (c->work.seq_len % 1024 == 0) snprintf(seq, sizeof seq, "%lldK", (long long)(c->work.seq_len / 1024));
    else snprintf(seq, sizeof seq, "%lld", (long long)c->work.seq_len);
    if (meas[i].error[0] || pred[i].error[0]) {
      printf("%-6s %-7s %2d %6s %-6s %-4s %-5s  error: %s\n", bs_method_name(c->par.method), variant, c->par.gpus, seq,
             bs_layout_name(c->par.layout), c->work.causal ? "caus" : "full", bs_phase_name(c->work.phase),
             meas[i].error[0] ? meas[i].error : pred[i].error);
      continue;
    }
    nok++;
    const bs_validate_error *e = &errs[i];
    char es[4][16], ep[16], eb[16];
    fmt_err(es[0], 16, e->step);
    fmt_err(es[1], 16, e->fwd);
    fmt_err(es[2], 16, e->bwd);
    fmt_err(es[3], 16, e->comm_exposed);
    fmt_err(ep, 16, e->peak);
    snprintf(eb, sizeof eb, "%lld", (long long)meas[i].comm.total);
    printf("%-6s %-7s %2d %6s %-6s %-4s %-5s %9.4fs %9.4fs %8s %8s %8s %8s %10s %7s %8s\n", bs_method_name(c->par.method),
           variant, c->par.gpus, seq, bs_layout_name(c->par.layout), c->work.causal ? "caus" : "full",
           bs_phase_name(c->work.phase), meas[i].time.step, pred[i].time.step, es[0], es[1], es[2], es[3], eb,
           e->bytes_exact ? "yes" : "NO", ep);
    if (!isnan(e->step) && nstep < 1024) abs_step[nstep++] = fabs(e->step);
    nbytes_ok += e->bytes_exact;
    nmem_ok += !isnan(e->peak) && fabs(e->peak) <= 2.0;
  }
  double med = 0, mx = 0;
  if (nstep) {
    qsort(abs_step, (size_t)nstep, sizeof abs_step[0], cmp_double);
    med = nstep % 2 ? abs_step[nstep / 2] : 0.5 * (abs_step[nstep / 2 - 1] + abs_step[nstep / 2]);
    mx = abs_step[nstep - 1];
  }
  /* Every point ran, bytes exact and memory within 2 % everywhere. */
  int exact = nok == np && nbytes_ok == nok && nmem_ok == nok;
  int met = exact && med <= 10.0 && mx <= 25.0;
  printf("#\n# %d of %d point(s) ran; bytes exact %d/%d; peak memory within 2%% %d/%d; step |error| median %.1f%% "
         "(target 10%%), max %.1f%% (target 25%%): targets %s\n",
         nok, np, nbytes_ok, nok, nmem_ok, nok, med, mx, met ? "met" : "NOT met");
  rc = 0;
  if (fail_factor > 0) {
    int ok = exact && med <= 10.0 * fail_factor && mx <= 25.0 * fail_factor;
    if (!ok) {
      fprintf(stderr, "burstsim validate: outside %.3gx the targets (or a point failed)\n", fail_factor);
      rc = 1;
    }
  }
  if (fail_exact && !exact) {
    fprintf(stderr, "burstsim validate: a point failed, or bytes or peak memory do not match\n");
    rc = 1;
  }
  if (out) {
    cJSON *mj = result_objects("run", meas, np, err, sizeof err);
    cJSON *pj = mj ? result_objects("sim", pred, np, err, sizeof err) : NULL;
    if (!mj || !pj) {
      fprintf(stderr, "burstsim validate: %s\n", err);
      cJSON_Delete(mj);
      rc = 1;
      goto out;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "tool", "burstsim");
    cJSON_AddStringToObject(root, "version", BURSTSIM_VERSION);
    cJSON_AddStringToObject(root, "mode", "validate");
    cJSON_AddStringToObject(root, "scenario", scenario);
    cJSON *entries = cJSON_AddArrayToObject(root, "entries");
    for (int i = 0; i < np; i++) {
      cJSON *m = cJSON_DetachItemFromArray(mj, 0), *p = cJSON_DetachItemFromArray(pj, 0);
      cJSON *cfg = cJSON_Duplicate(m, 1);
      static const char *drop[] = {"time_s", "comm_bytes", "memory", "ranks", "sim", "error", "threads_per_rank"};
      for (size_t k = 0; k < sizeof drop / sizeof drop[0]; k++) cJSON_DeleteItemFromObjectCaseSensitive(cfg, drop[k]);
      cJSON_ReplaceItemInObjectCaseSensitive(cfg, "profile", cJSON_CreateString(profs[i]));
      cJSON *e = cJSON_CreateObject();
      cJSON_AddItemToObject(e, "config", cfg);
      cJSON_AddItemToObject(e, "measured", m);
      cJSON_AddItemToObject(e, "predicted", p);
      cJSON_AddItemToObject(e, "error", meas[i].error[0] || pred[i].error[0] ? cJSON_CreateNull() : error_json(&errs[i]));
      cJSON_AddItemToArray(entries, e);
    }
    cJSON *s = cJSON_AddObjectToObject(root, "summary");
    cJSON_AddNumberToObject(s, "points", np);
    cJSON_AddNumberToObject(s, "ran", nok);
    cJSON_AddNumberToObject(s, "bytes_exact", nbytes_ok);
    cJSON_AddNumberToObject(s, "peak_within_2pct", nmem_ok);
    cJSON_AddNumberToObject(s, "step_abs_error_median_pct", med);
    cJSON_AddNumberToObject(s, "step_abs_error_max_pct", mx);
    cJSON_AddBoolToObject(s, "targets_met", met);
    cJSON_Delete(mj);
    cJSON_Delete(pj);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text || bs_write_file(out, text, strlen(text), err, sizeof err)) {
      fprintf(stderr, "burstsim validate: --out %s\n", text ? err : "out of memory");
      free(text);
      rc = 1;
      goto out;
    }
    free(text);
  }
out:
  for (int i = 0; meas && pred && i < np; i++) {
    bs_result_free(&meas[i]);
    bs_result_free(&pred[i]);
  }
  free(cfgs);
  free(meas);
  free(pred);
  free(errs);
  free(profs);
  for (int g = 0; g < ngrids; g++) bs_scenario_free(&scs[g]);
  return rc;
}
