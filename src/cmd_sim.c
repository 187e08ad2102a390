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

#include "commands.h"
#include "output.h"
#include "scenario.h"
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
          "  --nodes-per-leaf N dgx topologies: nodes under one leaf switch per rail (16)\n"
          "  --oversub X        dgx topologies: leaf oversubscription (1)\n"
          "\n"
          "Network model: CM02, no cross traffic, TCP-gamma 0 unless the profile says\n"
          "otherwise; the settings used are in each result (sim.network).\n");
}

static int need_arg(int i, int argc, const char *opt) {
  if (i + 1 >= argc) {
    fprintf(stderr, "burstsim sim: %s needs a value\n", opt);
    return -1;
  }
  return 0;
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

int cmd_sim(int argc, char **argv) {
  const char *scenario = NULL, *out_json = NULL, *out_csv = NULL, *trace = NULL, *profile = NULL;
  char **sets = calloc((size_t)argc + 1, sizeof *sets);
  int nsets = 0;
  bs_sim_opts opts;
  bs_sim_opts_default(&opts);
  if (!sets) {
    fprintf(stderr, "burstsim sim: out of memory\n");
    return 1;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      sim_usage(stdout);
      free(sets);
      return 0;
    } else if (!strcmp(a, "--set")) {
      if (need_arg(i, argc, a)) goto usage;
      sets[nsets++] = argv[++i];
    } else if (!strncmp(a, "--set=", 6)) {
      sets[nsets++] = argv[i] + 6;
    } else if (!strcmp(a, "--profile")) {
      if (need_arg(i, argc, a)) goto usage;
      profile = argv[++i];
    } else if (!strcmp(a, "--out")) {
      if (need_arg(i, argc, a)) goto usage;
      out_json = argv[++i];
    } else if (!strcmp(a, "--csv")) {
      if (need_arg(i, argc, a)) goto usage;
      out_csv = argv[++i];
    } else if (!strcmp(a, "--trace")) {
      if (need_arg(i, argc, a)) goto usage;
      trace = argv[++i];
    } else if (!strcmp(a, "--fold")) {
      if (need_arg(i, argc, a)) goto usage;
      const char *v = argv[++i];
      if (!strcmp(v, "auto")) opts.fold = BS_AUTO;
      else if (!strcmp(v, "on")) opts.fold = BS_ON;
      else if (!strcmp(v, "off")) opts.fold = BS_OFF;
      else {
        fprintf(stderr, "burstsim sim: --fold: '%s' is not auto, on or off\n", v);
        goto usage;
      }
    } else if (!strcmp(a, "--layers")) {
      if (need_arg(i, argc, a)) goto usage;
      const char *v = argv[++i];
      if (!strcmp(v, "auto")) opts.layers = BS_AUTO;
      else if (!strcmp(v, "off")) opts.layers = BS_OFF;
      else {
        fprintf(stderr, "burstsim sim: --layers: '%s' is not auto or off\n", v);
        goto usage;
      }
    } else if (!strcmp(a, "--coll")) {
      if (need_arg(i, argc, a)) goto usage;
      const char *v = argv[++i];
      if (!strcmp(v, "steps")) opts.coll_model = BS_COLL_STEPS;
      else if (!strcmp(v, "flow")) opts.coll_model = BS_COLL_FLOW;
      else if (!strcmp(v, "analytic")) opts.coll_model = BS_COLL_ANALYTIC;
      else if (!strcmp(v, "auto")) opts.coll_model = BS_COLL_MODEL_AUTO;
      else {
        fprintf(stderr, "burstsim sim: --coll: '%s' is not auto, steps, flow or analytic (the "
                "algorithm is cluster.coll_algo)\n", v);
        goto usage;
      }
    } else if (!strcmp(a, "--nodes-per-leaf")) {
      if (need_arg(i, argc, a)) goto usage;
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end || v < 1 || v > 1 << 20) {
        fprintf(stderr, "burstsim sim: --nodes-per-leaf: '%s' is not a positive integer\n", argv[i]);
        goto usage;
      }
      opts.nodes_per_leaf = (int)v;
    } else if (!strcmp(a, "--oversub")) {
      if (need_arg(i, argc, a)) goto usage;
      char *end;
      double v = strtod(argv[++i], &end);
      if (*end || !(v >= 1) || !isfinite(v)) {
        fprintf(stderr, "burstsim sim: --oversub: '%s' must be a number >= 1\n", argv[i]);
        goto usage;
      }
      opts.oversub = v;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "burstsim sim: unknown option '%s'\n", a);
      goto usage;
    } else if (!scenario) {
      scenario = a;
    } else {
      fprintf(stderr, "burstsim sim: one scenario file only ('%s' and '%s')\n", scenario, a);
      goto usage;
    }
  }
  if (!scenario) {
    fprintf(stderr, "burstsim sim: no scenario file\n");
    goto usage;
  }
  opts.profile = profile;

  bs_scenario sc;
  char err[1024];
  if (bs_scenario_load(scenario, sets, nsets, &sc, err, sizeof err)) {
    fprintf(stderr, "burstsim sim: %s\n", err);
    free(sets);
    return 2;
  }
  free(sets);
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
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
      fprintf(stderr, "burstsim sim: MPI_Init failed\n");
      free(res);
      bs_scenario_free(&sc);
      return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  }
  /* Outputs are checked before the first point, so a bad path costs nothing. */
  int out_ok = 1;
  if (mpi_rank == 0) {
    const bs_path_role outs[] = {{"--out", out_json}, {"--csv", out_csv}, {"--trace", trace}};
    if (bs_output_precheck(outs, 3, scenario, &sc, profile, err, sizeof err)) {
      fprintf(stderr, "burstsim sim: %s\n", err);
      out_ok = 0;
    }
  }
  if (mpi_size > 1) MPI_Bcast(&out_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!out_ok) {
    free(res);
    bs_scenario_free(&sc);
    if (mpi_size > 1) MPI_Finalize();
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
    int bad = gather_results(res, sc.npoints, mpi_rank, mpi_size) != 0;
    MPI_Allreduce(mine, total, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    failed = total[0] + bad;
    invalid = total[1];
    if (bad) fprintf(stderr, "burstsim sim: rank %d: gathering the results failed\n", mpi_rank);
    if (mpi_rank != 0) {
      int n = sc.npoints;
      for (int i = 0; i < n; i++) bs_result_free(&res[i]);
      free(res);
      bs_scenario_free(&sc);
      MPI_Finalize();
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
  if (mpi_size > 1) MPI_Finalize();
  return rc;

usage:
  free(sets);
  sim_usage(stderr);
  return 2;
}
