/*
 * cmd_sim.c — `burstsim sim SCENARIO.ini`: loads the scenario (sweeps and
 * --set overrides), simulates every point with sim/ (each in its own forked
 * SimGrid process), prints the table and writes JSON / CSV / one trace.
 * Under `mpirun -np K` the points are dealt round-robin to the ranks and rank 0
 * gathers the results in order and writes everything.
 */
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_args.h"
#include "commands.h"
#include "output.h"
#include "scenario.h"
#include "runtime/digest.h"
#include "runtime/watchdog.h"
#include "sim/sim.h"

static void sim_usage(FILE *f) {
  fprintf(f,
          "usage: burstsim sim SCENARIO.ini [--set section.key=value]... [--profile P.json]\n"
          "                    [--out F.json] [--csv F.csv] [--trace F.json] [--fold auto|on|off]\n"
          "                    [--layers auto|off]\n"
          "                    [--coll auto|steps|flow|analytic] [--nodes-per-leaf N] [--oversub X]\n"
          "\n"
          "Simulates every point of the scenario (lists in keys sweep the cross product)\n"
          "in SimGrid: one actor per GPU runs the method's plan; compute times come from\n"
          "the profile, communications go over the topology's links.\n"
          "\n"
          "  --set k=v          override a scenario key (repeatable), e.g. --set parallel.gpus=64\n"
          "  --profile P        profile name or JSON file (overrides cluster.profile)\n"
          "  --out F.json       the result JSON (\"-\" = stdout)\n"
          "  --csv F.csv        one row per point\n"
          "  --trace F.json     Chrome trace-event timeline of the first point (Perfetto)\n"
          "  --fold MODE        symmetric-plan shortcut: auto (when proven exact), on, off\n"
          "  --layers MODE      model scope: auto (simulate 3 and 4 layers, extend to L), off\n"
          "  --coll MODEL       how collectives (cluster.coll_algo = ring | tree | auto) run:\n"
          "                     steps (a message per step), flow (a ring's volume per hop as\n"
          "                     one message), analytic (alpha-beta, no link sharing), or auto\n"
          "                     (steps inside a node, flow across nodes; the default)\n"
          "  --nodes-per-leaf N dgx topologies: nodes under one leaf switch per rail, 1 .. 2^20 (16)\n"
          "  --oversub X        dgx topologies: leaf oversubscription, 1 .. 10^6 (1)\n"
          "  --timeout S        under mpirun -np K: seconds MPI start-up and the result gather may\n"
          "                     block (default 120), and the most rank 0 waits for another rank to\n"
          "                     finish its points (default: no bound, a point may take hours)\n"
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
      if (MPI_Recv(&res[i], (int)sizeof res[i], MPI_BYTE, owner, 2 * i, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
          MPI_Recv(&nr, 1, MPI_INT, owner, 2 * i + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return -1;
      res[i].mode = "sim";
      res[i].ranks = NULL;
      res[i].nranks = 0;
      if (nr > 0) {
        res[i].ranks = malloc(sizeof *res[i].ranks * (size_t)nr);
        if (!res[i].ranks) return -1;
        if (MPI_Recv(res[i].ranks, (int)(sizeof *res[i].ranks * (size_t)nr), MPI_BYTE, owner, 2 * i + 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS)
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
    int new_profile = !opts->profile || i == 0, new_topo = 1;
    for (int j = 0; j < i && (new_profile || new_topo); j++) {
      if (!opts->profile && !strcmp(sc->points[j].cluster.profile, c->cluster.profile)) new_profile = 0;
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

int cmd_sim(int argc, char **argv) {
  bs_sim_args A;
  char aerr[512];
  if (bs_sim_args_parse(argc, argv, &A, aerr, sizeof aerr)) {
    fprintf(stderr, "burstsim sim: %s\n", aerr);
    sim_usage(stderr);
    return 2;
  }
  if (A.help) {
    sim_usage(stdout);
    return 0;
  }
  const char *scenario = A.scenario, *out_json = A.out, *out_csv = A.csv, *trace = A.trace;
  char **sets = A.sets;
  int nsets = A.nsets;
  bs_sim_opts opts;
  bs_sim_opts_default(&opts);
  static const bs_tristate folds[] = {BS_AUTO, BS_ON, BS_OFF};
  static const bs_coll_model colls[] = {BS_COLL_MODEL_AUTO, BS_COLL_STEPS, BS_COLL_FLOW, BS_COLL_ANALYTIC};
  opts.fold = folds[A.fold];
  opts.layers = A.layers ? BS_OFF : BS_AUTO;
  opts.coll_model = colls[A.coll];
  if (A.nodes_per_leaf) opts.nodes_per_leaf = A.nodes_per_leaf;
  if (A.oversub) opts.oversub = A.oversub;
  opts.profile = A.profile;
  bs_sim_single_blas_thread(); /* before MPI or anything else starts a thread (sim.h) */

  bs_scenario sc;
  char err[1024];
  if (bs_scenario_load(scenario, sets, nsets, &sc, err, sizeof err)) {
    fprintf(stderr, "burstsim sim: %s\n", err);
    return 2;
  }
  if (check_names(&sc, &opts)) {
    bs_scenario_free(&sc);
    return 2;
  }
  if (trace && sc.npoints > 1)
    fprintf(stderr, "burstsim sim: --trace: %d points; tracing the first only\n", sc.npoints);
  bs_result *res = calloc((size_t)sc.npoints, sizeof *res);
  if (!res) {
    fprintf(stderr, "burstsim sim: out of memory\n");
    bs_scenario_free(&sc);
    return 1;
  }
  int mpi_rank = 0, mpi_size = 1;
  if (launched_by_mpirun()) {
    /* The forked SimGrid children never touch MPI. */
    setenv("OMPI_MCA_mpi_warn_on_fork", "0", 0);
    bs_watchdog_arm("burstsim sim", -1, "MPI start-up (MPI_Init)", A.timeout);
    bs_test_stall(bs_launcher_rank(), "init");
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
      fprintf(stderr, "burstsim sim: MPI_Init failed\n");
      free(res);
      bs_scenario_free(&sc);
      return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    bs_watchdog_arm("burstsim sim", mpi_rank, "start-up (comparing the scenarios of the ranks)", A.timeout);
    if (bs_points_same(MPI_COMM_WORLD, sc.points, sc.npoints, err, sizeof err)) {
      if (mpi_rank == 0) fprintf(stderr, "burstsim sim: %s: %s\n", scenario, err);
      free(res);
      bs_scenario_free(&sc);
      sim_finalize(mpi_rank, A.timeout);
      return 2;
    }
    bs_watchdog_disarm();
  }
  /* Outputs are checked before the first point, so a bad path costs nothing. */
  int out_ok = 1;
  if (mpi_rank == 0) {
    const bs_path_role outs[] = {{"--out", out_json}, {"--csv", out_csv}, {"--trace", trace}};
    if (bs_output_precheck(outs, 3, scenario, &sc, A.profile, err, sizeof err)) {
      fprintf(stderr, "burstsim sim: %s\n", err);
      out_ok = 0;
    }
  }
  if (mpi_size > 1) MPI_Bcast(&out_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!out_ok) {
    free(res);
    bs_scenario_free(&sc);
    if (mpi_size > 1) sim_finalize(mpi_rank, A.timeout);
    return 2;
  }
  int tty = isatty(2) && mpi_rank == 0, failed = 0, invalid = 0;
  for (int i = 0; i < sc.npoints; i++) {
    const bs_config *c = &sc.points[i];
    if (i % mpi_size != mpi_rank) continue;
    if (tty) {
      fprintf(stderr, "\r[%3d/%d] %s %d GPUs %lld tokens ...", i + 1, sc.npoints,
              bs_method_name(c->par.method), c->par.gpus, (long long)c->work.seq_len);
      fflush(stderr);
    }
    bs_sim_opts o = opts;
    o.trace_path = i == 0 ? trace : NULL;
    char label[64];
    snprintf(label, sizeof label, "point %d/%d", i + 1, sc.npoints);
    o.label = label;
    char perr[512] = "";
    int prc = bs_sim_run(c, &o, &res[i], perr, sizeof perr);
    if (prc) {
      if (prc == -2) invalid++; /* a point the method or platform cannot run: reported, not fatal */
      else failed++;
      if (!res[i].error[0]) snprintf(res[i].error, sizeof res[i].error, "%.255s", perr);
      if (tty) fprintf(stderr, "\n");
      fprintf(stderr, "burstsim sim: point %d (%s, %d GPUs, %lld tokens): %s%s%s\n", i + 1,
              bs_method_name(c->par.method), c->par.gpus, (long long)c->work.seq_len,
              key_where(&sc, perr), key_where(&sc, perr)[0] ? ": " : "", perr);
    }
  }
  if (tty) fprintf(stderr, "\r%60s\r", "");
  if (mpi_size > 1) {
    int mine[2] = {failed, invalid}, total[2] = {0, 0};
    /* Another rank may still be simulating: that wait is bounded only by --timeout; the gather itself always. */
    bs_test_stall(mpi_rank, "gather");
    if (bs_arrive(MPI_COMM_WORLD, "the result gather", A.timeout, A.timeout <= 0, err, sizeof err)) {
      fprintf(stderr, "burstsim sim: rank %d: %s\n", mpi_rank, err);
      fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    bs_test_stall(mpi_rank, "gathering");
    bs_watchdog_arm("burstsim sim", mpi_rank, "the result gather", A.timeout);
    if (mpi_rank != 0) bs_watchdog_waiting("rank 0");
    int bad = gather_results(res, sc.npoints, mpi_rank, mpi_size) != 0;
    MPI_Allreduce(mine, total, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    bs_watchdog_disarm();
    failed = total[0] + bad;
    invalid = total[1];
    if (bad) fprintf(stderr, "burstsim sim: rank %d: gathering the results failed\n", mpi_rank);
    if (mpi_rank != 0) {
      int n = sc.npoints;
      for (int i = 0; i < n; i++) bs_result_free(&res[i]);
      free(res);
      bs_scenario_free(&sc);
      sim_finalize(mpi_rank, A.timeout);
      return failed ? 1 : invalid == n ? 2 : 0;
    }
  }
  bs_output_table(stdout, res, sc.npoints);
  /* 1: a simulation failed; 2: no point was valid; 0 otherwise (invalid points are in the table). */
  int rc = failed ? 1 : invalid == sc.npoints ? 2 : 0;
  if (invalid && !failed)
    fprintf(stderr, "burstsim sim: %d of %d points are not valid for their method or platform (see the table)\n",
            invalid, sc.npoints);
  if (out_json && bs_output_json(out_json, "sim", res, sc.npoints, err, sizeof err)) {
    fprintf(stderr, "burstsim sim: --out %s\n", err);
    rc = 1;
  }
  if (out_csv && bs_output_csv(out_csv, res, sc.npoints, err, sizeof err)) {
    fprintf(stderr, "burstsim sim: --csv %s\n", err);
    rc = 1;
  }
  for (int i = 0; i < sc.npoints; i++) bs_result_free(&res[i]);
  free(res);
  bs_scenario_free(&sc);
  if (mpi_size > 1) sim_finalize(mpi_rank, A.timeout);
  return rc;
}
