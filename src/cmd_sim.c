/*
 * cmd_sim.c — `burstsim sim SCENARIO.ini`: loads the scenario (sweeps and
 * --set overrides), simulates every point with sim/ (each in its own forked
 * SimGrid process), prints the table and writes JSON / CSV / one trace.
 * Under `mpirun -np K` the points are dealt round-robin to the ranks and rank 0
 * gathers the results in order and writes everything.
 */
#include <mpi.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cmd_args.h"
#include "commands.h"
#include "output.h"
#include "result_fields.h"
#include "scenario.h"
#include "warnings.h"
#include "base/clock.h"
#include "runtime/digest.h"
#include "runtime/watchdog.h"
#include "sim/sim.h"

static void sim_usage(FILE *f) {
  fprintf(f,
          "usage: burstsim sim SCENARIO.ini [--set section.key=value]... [--profile P.json]\n"
          "                    [--out F.json] [--csv F.csv] [--trace F.json] [--fold auto|on|off]\n"
          "                    [--layers auto|off] [--micro-batches auto|off] [--explain] [--memory] [--quiet]\n"
          "                    [--coll auto|steps|flow|analytic] [--nodes-per-leaf N] [--oversub X]\n"
          "                    [--engine auto|simgrid|direct] [--max-events N] [--no-cache]\n"
          "\n"
          "Simulates every point of the scenario (lists in keys sweep the cross product)\n"
          "in SimGrid: one actor per GPU runs the method's plan; compute times come from\n"
          "the profile, communications go over the topology's links.\n"
          "\n"
          "  --set k=v          override a scenario key (repeatable), e.g. --set parallel.gpus=64\n"
          "  --profile P        profile name or JSON file (overrides cluster.profile)\n"
          "  --out F.json       the result JSON (\"-\" = stdout)\n"
          "  --csv F.csv        one row per point\n"
          "  --trace F.json     Chrome trace-event timeline of the first point (Perfetto); at\n"
          "                     model scope, of the layers the layer shortcut simulated, labelled\n"
          "                     so (output.trace = on without --trace: SCENARIO.trace.json here)\n"
          "  --fold MODE        symmetric-plan shortcut: auto (when proven exact), on, off\n"
          "  --layers MODE      model scope: auto (simulate 3 and 4 layers, extend to L), off\n"
          "  --micro-batches MODE pipeline steps: auto (simulate two counts of micro-batches\n"
          "                     after the warm-up, extend to the step's), off\n"
          "  --coll MODEL       how collectives (cluster.coll_algo = ring | tree | auto) run:\n"
          "                     steps (a message per step), flow (a ring's volume per hop as\n"
          "                     one message), analytic (alpha-beta, no link sharing), or auto\n"
          "                     (steps inside a node, flow across nodes; the default)\n"
          "  --engine E         who runs the rank programs: simgrid (an actor per GPU), direct\n"
          "                     (one event loop with SimGrid's network model: same results, faster),\n"
          "                     or auto (direct when it models the point, else SimGrid; the default);\n"
          "                     sim.network ends with the engine that ran and, if SimGrid, why\n"
          "  --nodes-per-leaf N dgx topologies: nodes under one leaf switch per rail, 1 .. 2^20 (16)\n"
          "  --oversub X        dgx topologies: leaf oversubscription, 1 .. 10^6 (1)\n"
          "  --max-events N     refuse a point whose ranks' programs hold more than N events\n"
          "                     (COMPUTEs, SENDs, collective steps; estimated from 3 ranks before\n"
          "                     it runs), 0 .. 1e18, 0 = no bound (4e9: about an hour of CPU)\n"
          "  --timeout S        under mpirun -np K: seconds MPI start-up and the result gather may\n"
          "                     block (default 120), and the most rank 0 waits for another rank to\n"
          "                     finish its points (default: no bound, a point may take hours)\n"
          "  --explain          a second table after the results: where each point's step goes,\n"
          "                     for its critical rank (the one that finished last): compute by\n"
          "                     kernel kind, kernel launches, exposed communication by link class\n"
          "                     and waiting for slower peers, in ms and %% of the step (the JSON's\n"
          "                     explain object has them always, with the mean over ranks)\n"
          "  --memory           a table after the results: each point's memory at the peak of its\n"
          "                     fullest rank, term by term (weights, grads, optimizer, activations,\n"
          "                     kv_cache, logits, workspace, ...; memory.breakdown of the JSON), the\n"
          "                     allocator's reserve, peak, reserved and capacity, in GiB per GPU\n"
          "  --quiet            no progress on stderr (errors and warnings still)\n"
          "  --no-cache         every layer regenerates its attention's ops instead of reading the\n"
          "                     plan's record of them (the reference: the same figures, slower)\n"
          "\n"
          "Exit status: 0 every point ran or was refused by its method or platform (the reason is\n"
          "in its row); 1 a point failed (the others are written) or an output could not be\n"
          "written; 2 bad input (flags, scenario, names, output paths) or no point could run.\n"
          "\n"
          "Network model: CM02, no cross traffic, TCP-gamma 0 unless the profile says\n"
          "otherwise; the settings used are in each result (sim.network).\n");
}

/* Launched by mpirun with more than one rank? (Open MPI's environment, or PMI's.) */
static int launched_by_mpirun(void) {
  const char *n = getenv("OMPI_COMM_WORLD_SIZE");
  if (!n) n = getenv("PMI_SIZE");
  return n && atoi(n) > 1;
}

/* Rank 0 collects the points other ranks simulated (point i belongs to rank i % size). */
static int gather_results(bs_result *res, int n, int rank, int size) {
  for (int i = 0; i < n; i++) {
    int owner = i % size;
    if (owner == 0) continue;
    if (rank == owner) {
      int nr = res[i].ranks ? res[i].nranks : 0;
      if (MPI_Send(&res[i], (int)sizeof res[i], MPI_BYTE, 0, 2 * i, MPI_COMM_WORLD) != MPI_SUCCESS ||
          MPI_Send(&nr, 1, MPI_INT, 0, 2 * i + 1, MPI_COMM_WORLD) != MPI_SUCCESS ||
          (nr && MPI_Send(res[i].ranks, (int)(sizeof *res[i].ranks * (size_t)nr), MPI_BYTE, 0, 2 * i + 1,
                          MPI_COMM_WORLD) != MPI_SUCCESS))
        return -1;
    } else if (rank == 0) {
      int nr = 0;
      bs_watchdog_waiting("rank %d's result of point %d", owner, i + 1);
      if (MPI_Recv(&res[i], (int)sizeof res[i], MPI_BYTE, owner, 2 * i, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS ||
          MPI_Recv(&nr, 1, MPI_INT, owner, 2 * i + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return -1;
      res[i].mode = "sim";
      res[i].ranks = NULL;
      res[i].nranks = 0;
      if (nr > 0) {
        res[i].ranks = malloc(sizeof *res[i].ranks * (size_t)nr);
        if (!res[i].ranks) return -1;
        if (MPI_Recv(res[i].ranks, (int)(sizeof *res[i].ranks * (size_t)nr), MPI_BYTE, owner, 2 * i + 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
          return -1;
        res[i].nranks = nr;
      }
    }
  }
  return 0;
}

/* MPI_Finalize, bounded like the other waits between ranks. */
static void sim_finalize(int rank, double timeout) {
  bs_test_stall(rank, "finalize");
  bs_watchdog_arm("burstsim sim", rank, "MPI shutdown (MPI_Finalize)", timeout);
  MPI_Finalize();
  bs_watchdog_disarm();
}

/* Where the key an error starts with ("cluster.topology: ...") was given, or "". */
static const char *key_where(const bs_scenario *sc, const char *err) {
  char key[64];
  size_t n = strcspn(err, ": ");
  if (n == 0 || n >= sizeof key || err[n] != ':') return "";
  memcpy(key, err, n);
  key[n] = '\0';
  const char *w = bs_scenario_where(sc, key);
  return w ? w : "";
}

/*
 * Before the first point: every distinct profile and topology the points name
 * loads (platform files in a forked SimGrid), so that a typo in a list or a bad
 * --profile is one error, not a row among results or the same error per point.
 */
static int check_names(const bs_scenario *sc, const bs_sim_opts *opts) {
  const char *r = getenv("OMPI_COMM_WORLD_RANK");
  if (!r) r = getenv("PMI_RANK");
  int quiet = r && atoi(r) != 0; /* under mpirun every rank checks; rank 0 says it */
  char err[1024];
  for (int i = 0; i < sc->npoints; i++) {
    const bs_config *c = &sc->points[i];
    int new_profile = 1, new_topo = 1;
    for (int j = 0; j < i && (new_profile || new_topo); j++) {
      if ((opts->profile || !strcmp(sc->points[j].cluster.profile, c->cluster.profile)) &&
          sc->points[j].model.attention_kernel == c->model.attention_kernel)
        new_profile = 0;
      if (!strcmp(sc->points[j].cluster.topology, c->cluster.topology)) new_topo = 0;
    }
    if ((new_profile && bs_sim_check_profile(c, opts, err, sizeof err)) ||
        (new_topo && bs_sim_check_topology(c, err, sizeof err))) {
      const char *w = key_where(sc, err);
      if (!quiet) fprintf(stderr, "burstsim sim: %s%s%s\n", w, w[0] ? ": " : "", err);
      return -1;
    }
  }
  return 0;
}

/* Refusals said once per reason: the reason with its numbers written N, the first point given it, and
 * how many more were given it (said at the end of the sweep, as one line). */
#define MAX_REFUSALS 64
typedef struct {
  char cls[160];
  int first, more;
} refusal;

/* One `burstsim sim` invocation across its steps. */
typedef struct {
  bs_sim_args A;
  bs_sim_opts opts;
  bs_scenario sc;
  bs_result *res; /* one per point */
  int mpi_rank, mpi_size;
  int failed, invalid;          /* points whose simulation failed / that are not valid */
  char (*warn)[BS_WARNING_LEN]; /* the distinct warnings of the points, said once */
  char trace_path[1024];        /* output.trace = on without --trace: SCENARIO.trace.json here */
  int nwarn;
  refusal refusals[MAX_REFUSALS];
  int nrefusals;
} sweep;

/* Point i was refused for `why`: 1 when an earlier point was refused for the same reason (numbers
 * aside, those that are not part of a name; then counted, not said again), 0 when it is the first
 * (remembered while there is room). */
static int refusal_seen(sweep *w, int i, const char *why) {
  char cls[160];
  size_t k = 0;
  for (const char *p = why; *p && k + 2 < sizeof cls; p++) {
    int in_word = p > why && (isalnum((unsigned char)p[-1]) || p[-1] == '_'); /* ring-li2021, v3: a name */
    if (*p >= '0' && *p <= '9' && !in_word) {
      while (p[1] >= '0' && p[1] <= '9') p++;
      cls[k++] = 'N';
    } else cls[k++] = *p;
  }
  cls[k] = '\0';
  for (int j = 0; j < w->nrefusals; j++)
    if (!strcmp(w->refusals[j].cls, cls)) {
      w->refusals[j].more++;
      return 1;
    }
  if (w->nrefusals < MAX_REFUSALS) {
    refusal *r = &w->refusals[w->nrefusals++];
    snprintf(r->cls, sizeof r->cls, "%s", cls);
    r->first = i;
    r->more = 0;
  }
  return 0;
}

/* After the points: one line per reason that refused more than one point. */
static void refusals_said(const sweep *w) {
  for (int j = 0; j < w->nrefusals; j++)
    if (w->refusals[j].more)
      fprintf(stderr, "burstsim sim: %d more point(s) refused as point %d was (%s)\n", w->refusals[j].more,
              w->refusals[j].first + 1, w->refusals[j].cls);
}

#define MAX_WARNINGS 64

/* One warning of a point: kept and said on stderr the first time it is seen. */
static void add_warning(const char *text, void *ctx) {
  sweep *w = ctx;
  for (int i = 0; i < w->nwarn; i++)
    if (!strcmp(w->warn[i], text)) return;
  if (w->nwarn == MAX_WARNINGS) return;
  snprintf(w->warn[w->nwarn++], BS_WARNING_LEN, "%s", text);
  if (w->mpi_rank == 0) fprintf(stderr, "burstsim sim: warning: %s\n", text);
}

/* Figures no device can give, said as warnings naming the point and the figure: a step, compute or
 * exposed communication time that is not positive (a step) or negative, a model FLOP rate above the
 * profile's dense peak (MFU above 100 %: kernel rates above the device's peak in the profile). */
static void result_sanity(sweep *w) {
  char t[BS_WARNING_LEN];
  for (int i = 0; i < w->sc.npoints; i++) {
    const bs_result *r = &w->res[i];
    if (!bs_result_has_figures(r)) continue;
    char who[96];
    snprintf(who, sizeof who, "point %d (%s, %d GPUs, %lld tokens)", i + 1, bs_method_name(r->cfg.par.method),
             r->cfg.par.gpus, (long long)r->cfg.work.seq_len);
    const struct {
      const char *name;
      double v;
      int zero_ok;
    } times[] = {{"time_s.step", r->time.step, 0},
                 {"time_s.compute", r->time.compute, 1},
                 {"time_s.comm_exposed", r->time.comm_exposed, 1}};
    for (size_t k = 0; k < sizeof times / sizeof times[0]; k++)
      if (!isfinite(times[k].v) || times[k].v < 0 || (!times[k].zero_ok && times[k].v == 0)) {
        snprintf(t, sizeof t, "%s: %s = %g s is %s: not a time a step can take", who, times[k].name, times[k].v,
                 times[k].zero_ok ? "negative" : "not positive");
        add_warning(t, w);
      }
    double mfu = bs_result_mfu(r);
    if (isfinite(mfu) && mfu > 1.0) {
      snprintf(t, sizeof t,
               "%s: MFU %.1f %% is above 100 %% of the profile's device.peak_flops: check its kernel rates", who,
               100 * mfu);
      add_warning(t, w);
    }
  }
}

/* "1.2 s", "3 min 4 s", "2 h 5 min" for a progress line. */
static void human_span(char *dst, size_t n, double s) {
  if (s < 10) snprintf(dst, n, "%.2f s", s);
  else if (s < 60) snprintf(dst, n, "%.1f s", s);
  else if (s < 3600) snprintf(dst, n, "%d min %d s", (int)(s / 60), (int)s % 60);
  else snprintf(dst, n, "%d h %d min", (int)(s / 3600), (int)s / 60 % 60);
}

/* After a point: on a terminal one line rewritten in place (points done / total, elapsed, an
 * estimate of what is left from the mean so far); elsewhere a line per finished point. */
static void progress(const sweep *w, int i, int done, int mine, double t0, double tp) {
  const bs_config *c = &w->sc.points[i];
  double now = bs_now_s(), el = now - t0, left = done < mine ? el / done * (mine - done) : 0;
  char e[32], l[32], p[32];
  human_span(e, sizeof e, el);
  human_span(l, sizeof l, left);
  human_span(p, sizeof p, now - tp);
  const char *st = bs_result_status(&w->res[i]);
  if (isatty(2)) fprintf(stderr, "\r\033[K[%d/%d] %s elapsed, about %s left", done, mine, e, l);
  else
    fprintf(stderr,
            "burstsim sim: point %d/%d %s (%s, %d GPUs, %lld tokens) in %s; %d of %d done, %s elapsed, about %s left\n",
            i + 1, w->sc.npoints, st, bs_method_name(c->par.method), c->par.gpus, (long long)c->work.seq_len, p, done,
            mine, e, l);
  fflush(stderr);
}

static void opts_from_args(const bs_sim_args *A, bs_sim_opts *opts) {
  static const bs_tristate folds[] = {BS_AUTO, BS_ON, BS_OFF};
  static const bs_coll_model colls[] = {BS_COLL_MODEL_AUTO, BS_COLL_STEPS, BS_COLL_FLOW, BS_COLL_ANALYTIC};
  bs_sim_opts_default(opts);
  opts->fold = folds[A->fold];
  opts->layers = A->layers ? BS_OFF : BS_AUTO;
  opts->micro_batches = A->micro_batches ? BS_OFF : BS_AUTO;
  opts->coll_model = colls[A->coll];
  opts->engine = (bs_engine)A->engine;
  opts->no_op_cache = A->no_cache;
  if (A->nodes_per_leaf) opts->nodes_per_leaf = A->nodes_per_leaf;
  if (A->oversub) opts->oversub = A->oversub;
  opts->profile = A->profile;
  opts->max_events = A->max_events < 0 ? BS_SIM_MAX_EVENTS : A->max_events;
}

/* output.trace = on in the scenario and no --trace: the first point's trace goes to the scenario's
 * name with .trace.json, in the current directory. */
static void trace_from_scenario(sweep *w) {
  if (w->A.trace || w->sc.npoints < 1 || !w->sc.points[0].trace) return;
  const char *base = strrchr(w->A.scenario, '/');
  base = base ? base + 1 : w->A.scenario;
  size_t n = strlen(base);
  if (n > 4 && !strcmp(base + n - 4, ".ini")) n -= 4;
  snprintf(w->trace_path, sizeof w->trace_path, "%.*s.trace.json", (int)n, base);
  w->A.trace = w->trace_path;
}

/* A trace of an earlier run must not pass for this run's: the regular file under the name (through a
 * link, the file it names) is removed. 1 when one was. */
static int remove_stale_trace(const char *path) {
  char real[PATH_MAX];
  struct stat st;
  const char *p = realpath(path, real) ? real : path;
  if (stat(p, &st) || !S_ISREG(st.st_mode)) return 0;
  return unlink(p) == 0;
}

/* What became of the trace: written (and of what), or why not. Never silence. 1 when the point was
 * simulated but its trace could not be written (a full disk): the command then exits 1. */
static int trace_said(const sweep *w) {
  if (!w->A.trace || w->mpi_rank != 0 || w->sc.npoints < 1) return 0;
  const bs_result *r = &w->res[0];
  if (!bs_result_has_figures(r))
    fprintf(stderr, "burstsim sim: --trace %s: not written: point 1 %s%s\n", w->A.trace, bs_result_status(r),
            remove_stale_trace(w->A.trace) ? " (the earlier file of that name was removed)" : "");
  else if (r->trace_error[0]) {
    fprintf(stderr, "burstsim sim: --trace: not written (point 1 was simulated, its figures stand): %s\n",
            r->trace_error);
    return 1;
  } else if (!w->A.quiet)
    fprintf(stderr, "burstsim sim: trace of point 1 written to %s%s\n", w->A.trace,
            bs_sim_layers_apply(&w->sc.points[0], &w->opts) ? " (the layer shortcut's simulated layers, labelled so)"
            : bs_sim_micro_apply(&w->sc.points[0], &w->opts)
              ? " (the micro-batch shortcut's simulated micro-batches, labelled so)"
              : "");
  return 0;
}

/* Under mpirun: MPI started and every rank holding the same points. 0, or the exit code. */
static int mpi_start(sweep *w) {
  char err[1024];
  /* The forked SimGrid children never touch MPI. */
  setenv("OMPI_MCA_mpi_warn_on_fork", "0", 0);
  bs_watchdog_arm("burstsim sim", -1, "MPI start-up (MPI_Init)", w->A.timeout);
  bs_test_stall(bs_launcher_rank(), "init");
  if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
    fprintf(stderr, "burstsim sim: MPI_Init failed\n");
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &w->mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w->mpi_size);
  bs_watchdog_arm("burstsim sim", w->mpi_rank, "start-up (comparing the scenarios of the ranks)", w->A.timeout);
  /* the options that change a point's figures: ranks given different ones would mix results */
  struct {
    char profile[512];
    int fold, layers, micro_batches, coll, nodes_per_leaf, engine;
    double oversub, max_events;
  } same;
  memset(&same, 0, sizeof same);
  snprintf(same.profile, sizeof same.profile, "%s", w->A.profile ? w->A.profile : "");
  same.fold = w->A.fold, same.layers = w->A.layers, same.coll = w->A.coll;
  same.micro_batches = w->A.micro_batches;
  same.nodes_per_leaf = w->A.nodes_per_leaf, same.engine = w->A.engine, same.oversub = w->A.oversub;
  same.max_events = w->A.max_events;
  if (bs_points_same(MPI_COMM_WORLD, w->sc.points, w->sc.npoints, err, sizeof err) ||
      bs_bytes_same(MPI_COMM_WORLD, &same, sizeof same,
                    "set of sim options (--profile, --fold, --layers, --micro-batches, --coll, --nodes-per-leaf, "
                    "--oversub, --engine, "
                    "--max-events)",
                    err, sizeof err)) {
    if (w->mpi_rank == 0) fprintf(stderr, "burstsim sim: %s: %s\n", w->A.scenario, err);
    sim_finalize(w->mpi_rank, w->A.timeout);
    return 2;
  }
  bs_watchdog_disarm();
  return 0;
}

/* Outputs are checked before the first point (by rank 0, for all), so a bad path costs nothing. 0 or -1. */
static int check_outputs(const sweep *w) {
  char err[1024];
  int out_ok = 1;
  if (w->mpi_rank == 0) {
    const bs_path_role outs[] = {{"--out", w->A.out}, {"--csv", w->A.csv}, {"--trace", w->A.trace}};
    if (bs_output_precheck(outs, 3, w->A.scenario, &w->sc, w->A.profile, err, sizeof err)) {
      fprintf(stderr, "burstsim sim: %s\n", err);
      out_ok = 0;
    }
  }
  if (w->mpi_size > 1) MPI_Bcast(&out_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return out_ok ? 0 : -1;
}

/* Simulates this rank's points (point i belongs to rank i % size); a failed or invalid point is
 * reported and counted, not fatal. */
static void run_points(sweep *w) {
  const bs_scenario *sc = &w->sc;
  int tty = isatty(2) && !w->A.quiet;
  int mine = 0, done = 0;
  for (int i = 0; i < sc->npoints; i++) mine += i % w->mpi_size == w->mpi_rank;
  double t0 = bs_now_s();
  if (tty) fprintf(stderr, "[0/%d] starting", mine);
  for (int i = 0; i < sc->npoints; i++) {
    const bs_config *c = &sc->points[i];
    if (i % w->mpi_size != w->mpi_rank) continue;
    bs_sim_opts o = w->opts;
    o.trace_path = i == 0 ? w->A.trace : NULL;
    char label[64];
    snprintf(label, sizeof label, "point %d/%d", i + 1, sc->npoints);
    o.label = w->A.quiet ? NULL : label; /* no "still running" lines either */
    char perr[512] = "";
    double tp = bs_now_s();
    if (tty) { /* what runs now, after the last line's counts */
      fprintf(stderr, "; point %d: %s, %d GPUs, %lld tokens ...", i + 1, bs_method_name(c->par.method), c->par.gpus,
              (long long)c->work.seq_len);
      fflush(stderr);
    }
    int prc = bs_sim_run(c, &o, &w->res[i], perr, sizeof perr);
    w->res[i].refused = prc == -2;
    if (prc) { /* the row names the point and says failed, whatever step failed (a pipe, a fork) */
      if (!w->res[i].mode) {
        w->res[i].cfg = *c;
        w->res[i].mode = "sim";
      }
      if (!w->res[i].error[0]) snprintf(w->res[i].error, sizeof w->res[i].error, "%.255s", perr);
    }
    done++;
    /* a refusal for a reason already said is counted, not said again (the table has its row) */
    if (prc == -2 && refusal_seen(w, i, perr)) {
      if (tty) progress(w, i, done, mine, t0, tp);
      w->invalid++;
      continue;
    }
    if (!w->A.quiet) progress(w, i, done, mine, t0, tp);
    if (prc) {
      if (prc == -2) w->invalid++; /* a point the method or platform cannot run: reported, not fatal */
      else w->failed++;
      if (tty) fprintf(stderr, "\r\033[K");
      fprintf(stderr, "burstsim sim: point %d (%s, %d GPUs, %lld tokens): %s%s%s\n", i + 1,
              bs_method_name(c->par.method), c->par.gpus, (long long)c->work.seq_len, key_where(sc, perr),
              key_where(sc, perr)[0] ? ": " : "", perr);
    }
  }
  if (tty) fprintf(stderr, "\r\033[K");
  refusals_said(w);
}

/* The result JSON, with the sweep's warnings. */
static int write_json(const sweep *w, char *err, size_t errlen) {
  cJSON *root = bs_output_json_tree("sim", w->res, w->sc.npoints);
  cJSON *arr = root ? cJSON_AddArrayToObject(root, "warnings") : NULL;
  for (int i = 0; arr && i < w->nwarn; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(w->warn[i]));
  int rc = bs_output_json_write(w->A.out, root, err, errlen);
  cJSON_Delete(root);
  return rc;
}

/* Under mpirun: rank 0 gathers every point's result and the counts of all ranks. */
static void gather_points(sweep *w) {
  char err[1024];
  int mine[2] = {w->failed, w->invalid}, total[2] = {0, 0};
  /* Another rank may still be simulating: that wait is bounded only by --timeout; the gather itself always. */
  bs_test_stall(w->mpi_rank, "gather");
  if (bs_arrive(MPI_COMM_WORLD, "the result gather", w->A.timeout, w->A.timeout <= 0, err, sizeof err)) {
    fprintf(stderr, "burstsim sim: rank %d: %s\n", w->mpi_rank, err);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  bs_test_stall(w->mpi_rank, "gathering");
  bs_watchdog_arm("burstsim sim", w->mpi_rank, "the result gather", w->A.timeout);
  if (w->mpi_rank != 0) bs_watchdog_waiting("rank 0");
  int bad = gather_results(w->res, w->sc.npoints, w->mpi_rank, w->mpi_size) != 0;
  MPI_Allreduce(mine, total, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  bs_watchdog_disarm();
  w->failed = total[0] + bad;
  w->invalid = total[1];
  if (bad) fprintf(stderr, "burstsim sim: rank %d: gathering the results failed\n", w->mpi_rank);
}

/* The table, the JSON and the CSV of every point; the exit code: 1 when a simulation failed or an
 * output could not be written, 2 when no point was valid, 0 otherwise: a point its method or
 * platform refuses is an answer (its row says why), not a failure (docs/results.md, "Exit status"). */
static int write_outputs(const sweep *w) {
  char err[1024];
  int n = w->sc.npoints;
  const char *outs[] = {w->A.out, w->A.csv};
  FILE *tf = bs_output_table_stream(outs, 2);
  bs_output_table(tf, w->res, n);
  if (w->A.explain) bs_output_explain_table(tf, w->res, n);
  if (w->A.memory) bs_output_memory_table(tf, w->res, n);
  int rc = w->failed ? 1 : w->invalid == n ? 2 : 0;
  fflush(tf); /* the whole table before the line below, on one terminal or in one pipe */
  if (w->invalid && !w->failed)
    fprintf(stderr, "burstsim sim: %d of %d points refused by their method or platform (see the table)\n", w->invalid,
            n);
  if (w->A.out && write_json(w, err, sizeof err)) {
    fprintf(stderr, "burstsim sim: --out %s\n", err);
    rc = 1;
  }
  if (w->A.csv && bs_output_csv(w->A.csv, w->res, n, err, sizeof err)) {
    fprintf(stderr, "burstsim sim: --csv %s\n", err);
    rc = 1;
  }
  return rc;
}

/* Frees the results and the scenario; under mpirun, MPI ends here. */
static void sweep_end(sweep *w) {
  for (int i = 0; i < w->sc.npoints; i++) bs_result_free(&w->res[i]);
  free(w->res);
  free(w->warn);
  bs_scenario_free(&w->sc);
  if (w->mpi_size > 1) sim_finalize(w->mpi_rank, w->A.timeout);
}

int cmd_sim(int argc, char **argv) {
  sweep w;
  memset(&w, 0, sizeof w);
  w.mpi_size = 1;
  char aerr[512], err[1024];
  if (bs_sim_args_parse(argc, argv, &w.A, aerr, sizeof aerr)) {
    fprintf(stderr, "burstsim sim: %s\n", aerr);
    sim_usage(stderr);
    return 2;
  }
  if (w.A.help) {
    sim_usage(stdout);
    return 0;
  }
  opts_from_args(&w.A, &w.opts);
  bs_sim_single_blas_thread(); /* before MPI or anything else starts a thread (sim.h) */
  if (bs_scenario_load(w.A.scenario, w.A.sets, w.A.nsets, &w.sc, err, sizeof err)) {
    fprintf(stderr, "burstsim sim: %s\n", err);
    return 2;
  }
  if (check_names(&w.sc, &w.opts)) {
    bs_scenario_free(&w.sc);
    return 2;
  }
  w.warn = calloc(MAX_WARNINGS, sizeof *w.warn);
  if (w.warn && launched_by_mpirun()) { /* rank 0 says them (MPI is not up yet) */
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    w.mpi_rank = r ? atoi(r) : 0;
  }
  for (int i = 0; w.warn && i < w.sc.npoints; i++) bs_config_warnings(&w.sc.points[i], add_warning, &w);
  if (w.warn) bs_sweep_warnings(w.sc.points, w.sc.npoints, add_warning, &w);
  char key[128];
  for (int k = 0; w.warn && bs_scenario_key(k, key, sizeof key); k++)
    if (bs_scenario_repeated(&w.sc, key)) {
      char t[BS_WARNING_LEN];
      snprintf(t, sizeof t, "%.64s: a value listed twice (at %.120s): its points are simulated twice", key,
               bs_scenario_where(&w.sc, key));
      add_warning(t, &w);
    }
  if (w.warn && bs_scenario_given(&w.sc, "parallel.ranks_per_node")) /* the platform places the ranks */
    add_warning(
      "parallel.ranks_per_node: no effect in sim (the topology puts the ranks on nodes; it groups the "
      "ranks of burstsim run)",
      &w);
  w.mpi_rank = 0;
  trace_from_scenario(&w);
  if (w.A.trace && w.sc.npoints > 1)
    fprintf(stderr, "burstsim sim: --trace: %d points; tracing the first only\n", w.sc.npoints);
  w.res = calloc((size_t)w.sc.npoints, sizeof *w.res);
  if (!w.res) {
    fprintf(stderr, "burstsim sim: out of memory\n");
    free(w.warn);
    bs_scenario_free(&w.sc);
    return 1;
  }
  int rc = launched_by_mpirun() ? mpi_start(&w) : 0;
  if (!rc && check_outputs(&w)) {
    if (w.mpi_size > 1) sim_finalize(w.mpi_rank, w.A.timeout);
    rc = 2;
  }
  if (rc) {
    free(w.res);
    free(w.warn);
    bs_scenario_free(&w.sc);
    return rc;
  }
  run_points(&w);
  if (w.mpi_size > 1) gather_points(&w);
  if (w.mpi_rank != 0) {
    int n = w.sc.npoints;
    rc = w.failed ? 1 : w.invalid == n ? 2 : 0;
  } else {
    if (w.warn) result_sanity(&w);
    rc = write_outputs(&w);
    if (trace_said(&w) && rc == 0) rc = 1;
  }
  sweep_end(&w);
  return rc;
}
