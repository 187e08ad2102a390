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
#include <fnmatch.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>
#include "base/vec.h"
#include "calib/validate.h"
#include "calib/blas_core.h"
#include "cmd_args.h"
#include "commands.h"
#include "output.h"
#include "scenario.h"
#include "sim/sim.h"
#include "runtime/devplan.h"
#include "runtime/hostmem.h"
#include "cuda_module.h"
#include "calib/host_load.h"

static void validate_usage(FILE *f) {
  fprintf(f,
          "usage: burstsim validate SCENARIO.ini [--profile P.json] [--out FILE.json] [--np G]...\n"
          "                         [--set section.key=value]... [--full-calib] [--warmup N]\n"
          "                         [--workdir DIR] [--keep] [--fail-factor F] [--fail-exact]\n"
          "                         [--backend cpu|cuda] [--comm mpi|nccl]\n"
          "\n"
          "Runs every point of the scenario for real (mpirun -np G burstsim run, on this\n"
          "machine) and in the simulator on the host topology, with a profile calibrated\n"
          "just before on the same rank count (mpirun -np G burstsim calib --quick) unless\n"
          "--profile is given, and prints per point measured and predicted step, fwd, bwd,\n"
          "exposed communication, bytes and peak memory with the error in %%.\n"
          "\n"
          "  --profile P     use this profile for every rank count (no calibration): a name of\n"
          "                  calib/profiles (as sim takes it) or FILE.json\n"
          "  --out FILE      entries {config, measured, predicted, error} as JSON (\"-\": stdout, the\n"
          "                  table then on stderr); not a file of the work directory\n"
          "  --np G          only the points with G ranks, 1 .. 4096 (repeatable, up to 16 times)\n"
          "  --set k=v       scenario override, as in burstsim sim / run (up to 32)\n"
          "  --full-calib    the full calibration grid instead of --quick (minutes)\n"
          "  --warmup N      untimed executions before each measured run, 0 .. 100 (default 1)\n"
          "  --backend B     calibrate and run with the cpu (default) or cuda kernels (burstsim run and\n"
          "                  calib --backend); cuda exits %d at once when this build or machine has no\n"
          "                  CUDA device; the prediction still uses the host topology\n"
          "  --comm C        the runs' communicator: mpi (default) or nccl (cuda only)\n"
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
          "and max <= 25 %% over the points. Exit 1 when no point could be compared; SIGINT or\n"
          "SIGTERM ends the running mpirun job's whole process group first (exit 130, 143).\n",
          BS_EXIT_NO_DEVICE);
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
static int split_grids(const char *path, const char *wd, char paths[][600], char names[][64], char *err,
                       size_t errlen) {
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
  int n = 0, ng = 0;
  size_t cap = 0;
  static int grid_of[MAX_GRID_LINES];
  errno = 0;
  while (getline(&buf, &bufcap, f) >= 0) { /* whole lines: a grid file has no line length limit */
    if (n == MAX_GRID_LINES) {
      snprintf(err, errlen, "%s:%d: more than %d lines in a file with grids", path, n + 1, MAX_GRID_LINES);
      ng = -1;
      break;
    }
    char **l = bs_vec_grow(lines, sizeof *l, (size_t)n + 1, &cap, 256);
    if (!l) {
      snprintf(err, errlen, "%s: out of memory", path);
      ng = -1;
      break;
    }
    lines = l;
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
      grid_of[n] = -2;          /* the marker itself */
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

/* The names validate writes in its work directory (profile_for, run_grid, calib/validate.c, split_grids). */
static const char *const work_files[] = {"profile-g*.json", "calib-g*.log", "run-g*.json", "run-g*.log", "grid-*.ini"};

/* --out must not be one of the files the work directory wd receives (it would be overwritten, or
 * overwrite them): 0, or -1 with a message. A link is judged by the file it writes to. */
static int out_in_workdir(const char *out, const char *wd, char *err, size_t errlen) {
  if (!out || !strcmp(out, "-")) return 0;
  char real[PATH_MAX], dir[PATH_MAX];
  const char *path = realpath(out, real) ? real : out;
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
  struct stat d, w;
  if (stat(dir, &d) || stat(wd, &w) || d.st_dev != w.st_dev || d.st_ino != w.st_ino) return 0;
  for (size_t i = 0; i < sizeof work_files / sizeof work_files[0]; i++)
    if (!fnmatch(work_files[i], base, 0)) {
      snprintf(err, errlen,
               "--out %s: is a file of the work directory %s, where validate writes its %s files; "
               "name the output otherwise",
               out, wd, work_files[i]);
      return -1;
    }
  return 0;
}

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
  if (A.backend) { /* no device: say so now, not after a failed calibration */
    char msg[600] = "", why[200] = "";
    int ndev = 0;
    bs_cuda_module mod;
    if (bs_cuda_module_load(&mod, msg, sizeof msg) == 0 && (mod.device_count(&ndev, why, sizeof why) != 0 || ndev < 1))
      snprintf(msg, sizeof msg, "no CUDA device on this machine (%s)", why[0] ? why : "0 devices");
    if (ndev < 1) {
      fprintf(stderr, "burstsim validate: --backend cuda: %s\n", msg);
      return BS_EXIT_NO_DEVICE;
    }
  }
  /* The predictions fork simulations: no OpenBLAS pool here; mpirun gets the user's setting back. */
  bs_sim_single_blas_thread();
  if (!A.backend) bs_blas_core_warn("validate");
  if (A.profile) { /* a name of calib/profiles (as sim takes it) or a FILE.json, loaded and checked now */
    char err[1024];
    bs_config c;
    bs_config_default(&c);
    bs_sim_opts so;
    bs_sim_opts_default(&so);
    so.profile = A.profile;
    if (bs_sim_check_profile(&c, &so, err, sizeof err)) {
      fprintf(stderr, "burstsim validate: %s\n", err);
      return 2;
    }
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
    struct stat sb;
    if (mkdir(wd, 0755) && errno != EEXIST) {
      fprintf(stderr, "burstsim validate: --workdir %s: %s\n", wd, strerror(errno));
      return 2;
    }
    if (stat(wd, &sb) || !S_ISDIR(sb.st_mode)) {
      fprintf(stderr, "burstsim validate: --workdir %s: exists and is not a directory\n", wd);
      return 2;
    }
    char err[1024];
    if (out_in_workdir(A.out, wd, err, sizeof err)) {
      fprintf(stderr, "burstsim validate: %s\n", err);
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

/* Everything one validation holds: the grids, the rank counts, and per point config, results and profile. */
typedef struct {
  const bs_validate_args *A;
  bs_validate_opts vo;
  char gpaths[MAX_GRIDS][600], gnames[MAX_GRIDS][64];
  bs_scenario scs[MAX_GRIDS];
  int ngrids, total;
  int gs[64], ng; /* rank counts, in order of first appearance */
  bs_config *cfgs;
  bs_result *meas, *pred;
  bs_validate_error *errs;
  char (*profs)[600];
  double *others; /* the share of the CPUs other work took during the point's run (-1 unknown) */
  double *spread; /* |step of two runs| apart over the smaller, %, when the run was repeated; NaN */
  int np;         /* points measured so far */
} vstate;

/* The figures the targets are judged on. */
typedef struct {
  int nok, nbytes_ok, nmem_ok;
  double med, mx; /* step |error| median and maximum, % */
  int exact, met;
  int ndisturbed;   /* points measured while other work took more than BS_LOAD_DISTURBED of the CPUs */
  double med_quiet; /* the median over the others (NaN when none) */
} vsummary;

/* The grids (a plain file is one grid) as scenarios, the output checked against each. Returns 0 or 2. */
static int load_grids(vstate *st, const char *wd) {
  const bs_validate_args *A = st->A;
  char err[1024];
  int ngrids = split_grids(A->scenario, wd, st->gpaths, st->gnames, err, sizeof err);
  if (ngrids < 0) {
    fprintf(stderr, "burstsim validate: %s\n", err);
    return 2;
  }
  if (ngrids == 0) {
    ngrids = 1;
    snprintf(st->gpaths[0], sizeof st->gpaths[0], "%s", A->scenario);
    snprintf(st->gnames[0], sizeof st->gnames[0], "%s", "scenario");
  }
  for (int g = 0; g < ngrids; g++) {
    if (bs_scenario_load(st->gpaths[g], (char **)A->sets, A->nsets, &st->scs[g], err, sizeof err)) {
      if (strcmp(st->gpaths[g], A->scenario)) unmap_path(err, sizeof err, st->gpaths[g], A->scenario, st->gnames[g]);
      fprintf(stderr, "burstsim validate: %s\n", err);
      st->ngrids = g;
      return 2;
    }
    st->ngrids = g + 1;
    st->total += st->scs[g].npoints;
    const bs_path_role outs[] = {{"--out", A->out}};
    if (bs_output_precheck(outs, 1, NULL, &st->scs[g], A->profile, err, sizeof err)) {
      fprintf(stderr, "burstsim validate: %s\n", err);
      return 2;
    }
  }
  return 0;
}

/* The rank counts to validate, in order of first appearance, restricted to --np when given. */
static void rank_counts(vstate *st) {
  for (int g = 0; g < st->ngrids; g++)
    for (int i = 0; i < st->scs[g].npoints; i++) {
      int G = st->scs[g].points[i].par.gpus, seen = 0, wanted = st->A->nnp == 0;
      for (int j = 0; j < st->A->nnp; j++) wanted |= st->A->nps[j] == G;
      for (int j = 0; j < st->ng; j++) seen |= st->gs[j] == G;
      if (wanted && !seen && st->ng < 64) st->gs[st->ng++] = G;
    }
}

/* The profile for rank count G: --profile, or a calibration for its points' storage types, head
 * dimension and largest block. Returns 0, or 1 with a message printed. */
static int profile_for(vstate *st, int G, char *prof, size_t len) {
  if (st->A->profile) {
    snprintf(prof, len, "%s", st->A->profile);
    return 0;
  }
  int f32 = 0, b16 = 0, hd = -1;
  int64_t mb = 0;
  for (int g = 0; g < st->ngrids; g++)
    for (int i = 0; i < st->scs[g].npoints; i++) {
      const bs_config *c = &st->scs[g].points[i];
      if (c->par.gpus != G) continue;
      if (c->model.dtype == BS_FP32) f32 = 1;
      else b16 = 1;
      hd = hd == -1 || hd == c->model.head_dim ? (int)c->model.head_dim : 0;
      /* one rank computes its whole sequence as one block; more split it into G (zigzag: 2G) chunks */
      int64_t blk = G == 1 ? c->work.seq_len : c->work.seq_len / G / (c->par.layout == BS_ZIGZAG ? 2 : 1);
      if (c->par.method == BS_ULYSSES || c->par.method == BS_USP) blk = c->work.seq_len;
      if (blk > mb) mb = blk;
    }
  const char *dt = f32 && b16 ? "both" : b16 ? "bf16" : "fp32";
  snprintf(prof, len, "%s/profile-g%d.json", st->vo.workdir, G);
  char err[1024];
  if (bs_validate_calibrate(&st->vo, G, dt, hd > 0 ? hd : 0, mb, prof, err, sizeof err)) {
    fprintf(stderr, "burstsim validate: %s\n", err);
    return 1;
  }
  return 0;
}

/* Runs grid g's points of rank count G once into results; the share of the CPUs other work took
 * meanwhile (-1 unknown), or -2 with a message printed. */
static double run_measured(vstate *st, int G, int g, const char *results) {
  char err[1024];
  bs_load_mark a, b;
  bs_load_mark_now(&a);
  if (bs_validate_run(&st->vo, G, st->gpaths[g], (char **)st->A->sets, st->A->nsets, results, err, sizeof err)) {
    fprintf(stderr, "burstsim validate: %s\n", err);
    return -2;
  }
  bs_load_mark_now(&b);
  return bs_load_others_share(&a, &b);
}

/* Runs grid g's points of rank count G for real and keeps their results: once, and once more
 * when other work took more than BS_LOAD_DISTURBED of the CPUs meanwhile (the quieter run is
 * kept; the two give the step's spread). Returns 0, or 1 with a message. */
static int run_grid(vstate *st, int G, int g, const char *prof) {
  const bs_scenario *sc = &st->scs[g];
  int any = 0;
  for (int i = 0; i < sc->npoints; i++) any |= sc->points[i].par.gpus == G;
  if (!any) return 0;
  char results[700], again[720], err[1024];
  snprintf(results, sizeof results, "%s/run-g%d-%d.json", st->vo.workdir, G, g + 1);
  snprintf(again, sizeof again, "%s/run-g%d-%d-again.json", st->vo.workdir, G, g + 1);
  double share = run_measured(st, G, g, results);
  if (share < -1.5) return 1;
  bs_result *rr = NULL, *r2 = NULL;
  int nr = 0, n2 = 0;
  double share2 = -1;
  if (share > BS_LOAD_DISTURBED) { /* once more: a quieter run replaces it, and the two give a spread */
    if (st->vo.log)
      fprintf(st->vo.log,
              "validate: other work took %.0f%% of the CPUs while the %d-rank points ran; running them again\n",
              100 * share, G);
    share2 = run_measured(st, G, g, again);
    if (share2 < -1.5) return 1;
  }
  if (bs_validate_read_results(results, &rr, &nr, err, sizeof err) ||
      (share2 > -1 && bs_validate_read_results(again, &r2, &n2, err, sizeof err))) {
    fprintf(stderr, "burstsim validate: %s\n", err);
    for (int k = 0; k < nr; k++) bs_result_free(&rr[k]);
    free(rr);
    return 1;
  }
  if (r2 && n2 == nr && share2 < share) { /* keep the quieter run's figures */
    bs_result *t = rr;
    rr = r2;
    r2 = t;
    double ts = share;
    share = share2;
    share2 = ts;
  }
  int j = 0, bad = 0;
  for (int i = 0; i < sc->npoints && !bad; i++) {
    const bs_config *c = &sc->points[i];
    if (c->par.gpus != G) continue;
    if (j >= nr || !bs_validate_same_point(c, &rr[j])) {
      fprintf(stderr, "burstsim validate: %s: result %d does not match point %d of grid %s (%s, G=%d)\n", results, j, i,
              st->gnames[g], bs_method_name(c->par.method), G);
      bad = 1;
      break;
    }
    int np = st->np;
    st->cfgs[np] = *c;
    st->meas[np] = rr[j];
    st->meas[np].cfg = *c;
    st->meas[np].mode = "run";
    memset(&rr[j], 0, sizeof rr[j]);
    snprintf(st->profs[np], sizeof st->profs[np], "%s", prof);
    st->others[np] = share;
    st->spread[np] = NAN;
    if (r2 && j < n2 && !rr[j].error[0] && !r2[j].error[0]) {
      double a = st->meas[np].time.step, b = r2[j].time.step, lo = a < b ? a : b;
      if (lo > 0) st->spread[np] = 100 * fabs(a - b) / lo;
    }
    j++;
    st->np++;
  }
  for (int k = 0; k < nr; k++) bs_result_free(&rr[k]);
  for (int k = 0; k < n2; k++) bs_result_free(&r2[k]);
  free(rr);
  free(r2);
  return bad;
}

/* Predictions (the simulator forks per point: cheap next to the runs) and their errors. */
static void predict_all(vstate *st) {
  for (int i = 0; i < st->np; i++) {
    bs_result *pred = &st->pred[i];
    if (st->meas[i].error[0]) {
      pred->cfg = st->cfgs[i];
      snprintf(pred->error, sizeof pred->error, "not simulated: the run failed");
      continue;
    }
    char e[512];
    if (bs_validate_predict(&st->cfgs[i], st->profs[i], pred, e, sizeof e)) {
      snprintf(pred->error, sizeof pred->error, "%.250s", e);
      pred->cfg = st->cfgs[i];
    }
    pred->mode = "sim";
    bs_validate_compare(&st->meas[i], pred, &st->errs[i]);
  }
}

/* One line of the table: a point's measured and predicted figures, or its error. */
static void print_point(FILE *f, const vstate *st, int i, vsummary *sm, double *abs_step, int *nstep,
                        double *quiet_step, int *nquiet) {
  const bs_config *c = &st->cfgs[i];
  const bs_result *meas = &st->meas[i], *pred = &st->pred[i];
  char variant[16] = "-", seq[32];
  if (c->par.method == BS_BURST)
    snprintf(variant, sizeof variant, "%s%s", c->par.bwd_opt ? "opt" : "plain", c->par.lao ? "" : "-nolao");
  if (c->work.seq_len % 1024 == 0) snprintf(seq, sizeof seq, "%lldK", (long long)(c->work.seq_len / 1024));
  else snprintf(seq, sizeof seq, "%lld", (long long)c->work.seq_len);
  if (meas->error[0] || pred->error[0]) {
    fprintf(f, "%-6s %-7s %2d %6s %-6s %-4s %-5s  error: %s\n", bs_method_name(c->par.method), variant, c->par.gpus,
            seq, bs_layout_name(c->par.layout), c->work.causal ? "caus" : "full", bs_phase_name(c->work.phase),
            meas->error[0] ? meas->error : pred->error);
    return;
  }
  sm->nok++;
  const bs_validate_error *e = &st->errs[i];
  char es[4][16], ep[16], eb[16];
  fmt_err(es[0], 16, e->step);
  fmt_err(es[1], 16, e->fwd);
  fmt_err(es[2], 16, e->bwd);
  fmt_err(es[3], 16, e->comm_exposed);
  fmt_err(ep, 16, e->peak);
  snprintf(eb, sizeof eb, "%lld", (long long)meas->comm.total);
  char load[16] = "-", spread[16] = "-";
  double other = st->others[i];
  int disturbed = other > BS_LOAD_DISTURBED;
  if (other >= 0) snprintf(load, sizeof load, "%.0f%%%s", 100 * other, disturbed ? "*" : "");
  if (!isnan(st->spread[i])) snprintf(spread, sizeof spread, "%.1f%%", st->spread[i]);
  fprintf(f, "%-6s %-7s %2d %6s %-6s %-4s %-5s %9.4fs %9.4fs %8s %8s %8s %8s %10s %7s %8s %6s %7s\n",
          bs_method_name(c->par.method), variant, c->par.gpus, seq, bs_layout_name(c->par.layout),
          c->work.causal ? "caus" : "full", bs_phase_name(c->work.phase), meas->time.step, pred->time.step, es[0],
          es[1], es[2], es[3], eb, e->bytes_exact ? "yes" : "NO", ep, load, spread);
  if (!isnan(e->step) && *nstep < 1024) abs_step[(*nstep)++] = fabs(e->step);
  if (disturbed) sm->ndisturbed++;
  else if (!isnan(e->step) && *nquiet < 1024) quiet_step[(*nquiet)++] = fabs(e->step);
  sm->nbytes_ok += e->bytes_exact;
  sm->nmem_ok += !isnan(e->peak) && fabs(e->peak) <= 2.0;
}

/* The table of measured against predicted, and the summary line judged against the targets. */
static vsummary print_table(const vstate *st) {
  const char *outs[] = {st->A->out};
  FILE *f = bs_output_table_stream(outs, 1);
  vsummary sm;
  memset(&sm, 0, sizeof sm);
  fprintf(f, "# burstsim validate %s: %d point(s); measured (real run) vs predicted (sim, host topology)\n",
          st->A->scenario, st->np);
  fprintf(f, "%-6s %-7s %2s %6s %-6s %-4s %-5s %10s %10s %8s %8s %8s %8s %10s %7s %8s %6s %7s\n", "method", "variant",
          "G", "N", "layout", "mask", "phase", "step_meas", "step_pred", "step", "fwd", "bwd", "exposed", "bytes",
          "exact", "peak", "load", "spread");
  double abs_step[1024], quiet_step[1024];
  int nstep = 0, nquiet = 0;
  for (int i = 0; i < st->np; i++) print_point(f, st, i, &sm, abs_step, &nstep, quiet_step, &nquiet);
  sm.med_quiet = NAN;
  if (nquiet) {
    qsort(quiet_step, (size_t)nquiet, sizeof quiet_step[0], cmp_double);
    sm.med_quiet = nquiet % 2 ? quiet_step[nquiet / 2] : 0.5 * (quiet_step[nquiet / 2 - 1] + quiet_step[nquiet / 2]);
  }
  if (nstep) {
    qsort(abs_step, (size_t)nstep, sizeof abs_step[0], cmp_double);
    sm.med = nstep % 2 ? abs_step[nstep / 2] : 0.5 * (abs_step[nstep / 2 - 1] + abs_step[nstep / 2]);
    sm.mx = abs_step[nstep - 1];
  }
  /* Every point ran, bytes exact and memory within 2 % everywhere. */
  sm.exact = sm.nok == st->np && sm.nbytes_ok == sm.nok && sm.nmem_ok == sm.nok;
  sm.met = sm.exact && sm.med <= 10.0 && sm.mx <= 25.0;
  fprintf(f,
          "#\n# %d of %d point(s) ran; bytes exact %d/%d; peak memory within 2%% %d/%d; step |error| median %.1f%% "
          "(target 10%%), max %.1f%% (target 25%%): targets %s\n",
          sm.nok, st->np, sm.nbytes_ok, sm.nok, sm.nmem_ok, sm.nok, sm.med, sm.mx, sm.met ? "met" : "NOT met");
  fprintf(f,
          "# load: the share of the CPUs other work took while the point ran (* above %.0f%%: the run was "
          "repeated, the quieter kept); spread: how far the two runs' steps lie apart\n",
          100 * BS_LOAD_DISTURBED);
  if (sm.ndisturbed) {
    char q[64] = "no undisturbed point";
    if (!isnan(sm.med_quiet)) snprintf(q, sizeof q, "%.1f%% over the other %d", sm.med_quiet, nquiet);
    fprintf(f,
            "# %d point(s) were measured while other work took more than %.0f%% of the CPUs: their errors may be the "
            "machine's, not the model's (step |error| median %s)\n",
            sm.ndisturbed, 100 * BS_LOAD_DISTURBED, q);
    fprintf(stderr,
            "burstsim validate: warning: %d point(s) measured on a busy machine (other work above %.0f%% of the "
            "CPUs, marked * in the load column): rerun on a quiet machine before reading their errors as the "
            "model's\n",
            sm.ndisturbed, 100 * BS_LOAD_DISTURBED);
  }
  return sm;
}

/* The exit code --fail-factor and --fail-exact ask for. */
static int judge(const bs_validate_args *A, const vsummary *sm) {
  int rc = 0;
  if (A->fail_factor > 0) {
    int ok = sm->exact && sm->med <= 10.0 * A->fail_factor && sm->mx <= 25.0 * A->fail_factor;
    if (!ok) {
      fprintf(stderr, "burstsim validate: outside %.3gx the targets (or a point failed)\n", A->fail_factor);
      rc = 1;
    }
  }
  if (A->fail_exact && !sm->exact) {
    fprintf(stderr, "burstsim validate: a point failed, or bytes or peak memory do not match\n");
    rc = 1;
  }
  return rc;
}

/* --out: entries {config, measured, predicted, error} and the summary. Returns 0, or 1 with a message. */
static int write_entries(const vstate *st, const vsummary *sm) {
  char err[1024];
  cJSON *mj = result_objects("run", st->meas, st->np, err, sizeof err);
  cJSON *pj = mj ? result_objects("sim", st->pred, st->np, err, sizeof err) : NULL;
  if (!mj || !pj) {
    fprintf(stderr, "burstsim validate: %s\n", err);
    cJSON_Delete(mj);
    return 1;
  }
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "tool", "burstsim");
  cJSON_AddStringToObject(root, "version", BURSTSIM_VERSION);
  cJSON_AddStringToObject(root, "mode", "validate");
  cJSON_AddStringToObject(root, "scenario", st->A->scenario);
  cJSON *entries = cJSON_AddArrayToObject(root, "entries");
  for (int i = 0; i < st->np; i++) {
    cJSON *m = cJSON_DetachItemFromArray(mj, 0), *p = cJSON_DetachItemFromArray(pj, 0);
    cJSON *cfg = cJSON_Duplicate(m, 1);
    static const char *drop[] = {"time_s", "comm_bytes", "memory",     "ranks",           "sim",
                                 "error",  "status",     "throughput", "threads_per_rank"};
    for (size_t k = 0; k < sizeof drop / sizeof drop[0]; k++) cJSON_DeleteItemFromObjectCaseSensitive(cfg, drop[k]);
    cJSON_ReplaceItemInObjectCaseSensitive(cfg, "profile", cJSON_CreateString(st->profs[i]));
    cJSON *e = cJSON_CreateObject();
    cJSON_AddItemToObject(e, "config", cfg);
    cJSON_AddItemToObject(e, "measured", m);
    cJSON_AddItemToObject(e, "predicted", p);
    cJSON_AddItemToObject(e, "error",
                          st->meas[i].error[0] || st->pred[i].error[0] ? cJSON_CreateNull() : error_json(&st->errs[i]));
    if (st->others[i] >= 0) cJSON_AddNumberToObject(e, "others_cpu_pct", 100 * st->others[i]);
    else cJSON_AddNullToObject(e, "others_cpu_pct");
    if (!isnan(st->spread[i])) cJSON_AddNumberToObject(e, "step_spread_pct", st->spread[i]);
    else cJSON_AddNullToObject(e, "step_spread_pct");
    cJSON_AddItemToArray(entries, e);
  }
  cJSON *s = cJSON_AddObjectToObject(root, "summary");
  cJSON_AddNumberToObject(s, "points", st->np);
  cJSON_AddNumberToObject(s, "ran", sm->nok);
  cJSON_AddNumberToObject(s, "bytes_exact", sm->nbytes_ok);
  cJSON_AddNumberToObject(s, "peak_within_2pct", sm->nmem_ok);
  cJSON_AddNumberToObject(s, "step_abs_error_median_pct", sm->med);
  cJSON_AddNumberToObject(s, "step_abs_error_max_pct", sm->mx);
  cJSON_AddBoolToObject(s, "targets_met", sm->met);
  cJSON_AddNumberToObject(s, "disturbed", sm->ndisturbed);
  if (!isnan(sm->med_quiet)) cJSON_AddNumberToObject(s, "step_abs_error_median_undisturbed_pct", sm->med_quiet);
  else cJSON_AddNullToObject(s, "step_abs_error_median_undisturbed_pct");
  cJSON_Delete(mj);
  cJSON_Delete(pj);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text || bs_write_file(st->A->out, text, strlen(text), err, sizeof err)) {
    fprintf(stderr, "burstsim validate: --out %s\n", text ? err : "out of memory");
    free(text);
    return 1;
  }
  free(text);
  return 0;
}

/*
 * Before any job (issue 29 finding 4: --np 32 on the quick start asked this host for about 160 GiB
 * and a rank was OOM-killed a minute in): every rank of `mpirun -np G` runs here, so each point's
 * plan buffers summed over its G ranks must fit the memory available now, and a rank's the
 * process limits (which the jobs inherit). CPU backend only. Returns 0, or 2 with a message.
 */
static int host_check(const vstate *st) {
  char err[768];
  if (bs_host_mpi_limit_ok(err, sizeof err)) {
    fprintf(stderr, "burstsim validate: %s\n", err);
    return 2;
  }
  if (st->A->backend) return 0;
  for (int g = 0; g < st->ngrids; g++)
    for (int i = 0; i < st->scs[g].npoints; i++) {
      const bs_config *c = &st->scs[g].points[i];
      int wanted = 0;
      for (int j = 0; j < st->ng; j++) wanted |= st->gs[j] == c->par.gpus;
      int64_t per, sum;
      /* a plan that cannot be made is the run's error to report, with its key's line */
      if (!wanted || bs_host_plan_bytes(c, c->par.ranks_per_node, c->par.gpus, &per, &sum, err, sizeof err)) continue;
      if (bs_host_fits(sum, per, c->par.gpus, err, sizeof err)) {
        int grid = strcmp(st->gpaths[g], st->A->scenario) != 0;
        fprintf(stderr, "burstsim validate: %s%s%s: point %d (%s, %d ranks): %s; nothing was run\n", st->A->scenario,
                grid ? ": grid " : "", grid ? st->gnames[g] : "", i + 1, bs_method_name(c->par.method), c->par.gpus,
                err);
        return 2;
      }
    }
  return 0;
}

/* Measures every point: per rank count, a profile, then each grid's run. Returns 0, or 1 with a message. */
static int measure_all(vstate *st) {
  for (int gi = 0; gi < st->ng; gi++) {
    int G = st->gs[gi];
    char prof[600];
    if (profile_for(st, G, prof, sizeof prof)) return 1;
    for (int g = 0; g < st->ngrids; g++)
      if (run_grid(st, G, g, prof)) return 1;
  }
  return 0;
}

static void vstate_free(vstate *st) {
  for (int i = 0; st->meas && st->pred && i < st->np; i++) {
    bs_result_free(&st->meas[i]);
    bs_result_free(&st->pred[i]);
  }
  free(st->cfgs);
  free(st->meas);
  free(st->pred);
  free(st->errs);
  free(st->profs);
  free(st->others);
  free(st->spread);
  for (int g = 0; g < st->ngrids; g++) bs_scenario_free(&st->scs[g]);
  free(st);
}

static int validate_in(const bs_validate_args *A, const char *wd) {
  vstate *st = calloc(1, sizeof *st);
  if (!st) {
    fprintf(stderr, "burstsim validate: out of memory\n");
    return 1;
  }
  st->A = A;
  st->vo = (bs_validate_opts){
    NULL, NULL, wd, A->full_calib, A->warmup, stderr, A->backend ? "cuda" : NULL, A->comm ? "nccl" : NULL};
  int rc = load_grids(st, wd);
  if (rc) goto out;
  rank_counts(st);
  int cap = st->total > 0 ? st->total : 1;
  st->cfgs = calloc((size_t)cap, sizeof *st->cfgs);
  st->meas = calloc((size_t)cap, sizeof *st->meas);
  st->pred = calloc((size_t)cap, sizeof *st->pred);
  st->errs = calloc((size_t)cap, sizeof *st->errs);
  st->profs = calloc((size_t)cap, sizeof *st->profs);
  st->others = calloc((size_t)cap, sizeof *st->others);
  st->spread = calloc((size_t)cap, sizeof *st->spread);
  rc = 1;
  if (!st->ng) {
    fprintf(stderr, "burstsim validate: %s: no point with the rank count(s) given by --np\n", A->scenario);
    rc = 2;
    goto out;
  }
  if (!st->cfgs || !st->meas || !st->pred || !st->errs || !st->profs || !st->others || !st->spread) {
    fprintf(stderr, "burstsim validate: out of memory\n");
    goto out;
  }
  if ((rc = host_check(st)) != 0) goto out;
  rc = 1;
  if (measure_all(st)) {
    if (bs_validate_stopped()) rc = 128 + bs_validate_stopped(); /* as the signal itself would have */
    goto out;
  }
  predict_all(st);
  vsummary sm = print_table(st);
  rc = judge(A, &sm);
  if (sm.nok == 0) { /* nothing was compared: no validation happened */
    fprintf(stderr,
            "burstsim validate: none of the %d point(s) could be compared (each failed to run or to be "
            "predicted; see the table)\n",
            st->np);
    rc = 1;
  }
  if (A->out && write_entries(st, &sm)) rc = 1;
out:
  vstate_free(st);
  return rc;
}
