/*
 * cmd_calib.c — `mpirun -np G burstsim calib`: parses options, runs the
 * microbenchmarks of calib/calib.c on every rank and has rank 0 write the
 * profile (and the plots). Measuring and fitting live in calib/.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/fileio.h"
#include "calib/calib.h"
#include "commands.h"

static void calib_usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np G burstsim calib [--backend cpu] [--quick] [--dtype fp32|bf16|both]\n"
          "                                   [--primary fp32|bf16] [--threads T] [--no-links] [--no-kernels]\n"
          "                                   [--head-dim D] [--max-block N] [--ranks-per-node P]\n"
          "                                   [--plots DIR] --out PROFILE.json\n"
          "\n"
          "Times every kernel the plans use (attention forward and backward, fused and\n"
          "unfused, decode, delta, merge, elementwise, copy, GEMM) on all G ranks at once,\n"
          "and the links between ranks (ping-pong and bidirectional 8 B .. 256 MiB, a ring\n"
          "step over G ranks, allreduce / allgather / reduce-scatter / all-to-all), prints\n"
          "nccl-tests-style tables, fits the models with GSL and writes a profile for the\n"
          "host topology (use it with cluster.profile = PROFILE.json or --profile).\n"
          "\n"
          "  --backend cpu    the CPU kernels and Open MPI (the only backend of this build)\n"
          "  --quick          small grid, few repetitions (under a minute)\n"
          "  --dtype T        storage types to time (default both)\n"
          "  --primary T      the type whose tables the simulator reads (default: the only one\n"
          "                   timed, else bf16)\n"
          "  --threads T      kernel threads per rank (default: online cores / G)\n"
          "  --head-dim D     only head dimension D (default 64 and 128)\n"
          "  --max-block N    attention blocks up to the first grid size >= N\n"
          "  --ranks-per-node P  rank r sits on node r / P (default: ranks with the same host\n"
          "                   name share a node); ping-pong within rank 0's node gives the\n"
          "                   shm link class, to another node the nic class\n"
          "  --plots DIR      gnuplot data, script and PNGs of measured against fitted\n"
          "  --no-links, --no-kernels   skip a part\n"
          "\n"
          "Run it with the same mpirun options as the runs it should predict (as root:\n"
          "--allow-run-as-root; more ranks than cores: --oversubscribe; --bind-to none lets\n"
          "a rank's threads use every core).\n");
}

static int type_arg(const char *v, int *fp32, int *bf16) {
  *fp32 = *bf16 = 0;
  if (!strcmp(v, "fp32")) *fp32 = 1;
  else if (!strcmp(v, "bf16")) *bf16 = 1;
  else if (!strcmp(v, "both")) *fp32 = *bf16 = 1;
  else return -1;
  return 0;
}

int cmd_calib(int argc, char **argv) {
  bs_calib_opts o;
  bs_calib_opts_default(&o);
  const char *out = NULL, *plots = NULL;
  int primary = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      calib_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--quick")) o.quick = 1;
    else if (!strcmp(a, "--no-links")) o.no_links = 1;
    else if (!strcmp(a, "--no-kernels")) o.no_kernels = 1;
    else if (!strcmp(a, "--out") && has) out = argv[++i];
    else if (!strcmp(a, "--plots") && has) plots = argv[++i];
    else if (!strcmp(a, "--backend") && has) {
      const char *b = argv[++i];
      if (strcmp(b, "cpu")) {
        fprintf(stderr, "burstsim calib: --backend %s: only 'cpu' is available in this build\n", b);
        return 2;
      }
    } else if (!strcmp(a, "--dtype") && has) {
      if (type_arg(argv[++i], &o.fp32, &o.bf16)) {
        fprintf(stderr, "burstsim calib: --dtype %s: fp32, bf16 or both\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--primary") && has) {
      const char *v = argv[++i];
      if (strcmp(v, "fp32") && strcmp(v, "bf16")) {
        fprintf(stderr, "burstsim calib: --primary %s: fp32 or bf16\n", v);
        return 2;
      }
      primary = !strcmp(v, "bf16");
    } else if ((!strcmp(a, "--head-dim") || !strcmp(a, "--max-block")) && has) {
      char *end;
      long long v = strtoll(argv[++i], &end, 10);
      if (*end || v < 1 || v > (1LL << 30)) {
        fprintf(stderr, "burstsim calib: %s %s: a positive integer\n", a, argv[i]);
        return 2;
      }
      if (!strcmp(a, "--head-dim")) o.head_dim = (int)v;
      else o.max_block = v;
    } else if ((!strcmp(a, "--threads") || !strcmp(a, "--ranks-per-node")) && has) {
      char *end;
      long t = strtol(argv[++i], &end, 10);
      if (*end || t < 1 || t > 4096) {
        fprintf(stderr, "burstsim calib: %s %s: a positive integer\n", a, argv[i]);
        return 2;
      }
      if (!strcmp(a, "--threads")) o.threads = (int)t;
      else o.ranks_per_node = (int)t;
    } else {
      fprintf(stderr, "burstsim calib: unknown or incomplete option '%s'\n", a);
      calib_usage(stderr);
      return 2;
    }
  }
  if (!out) {
    fprintf(stderr, "burstsim calib: --out PROFILE.json is required\n");
    calib_usage(stderr);
    return 2;
  }
  if (o.no_kernels && o.no_links) {
    fprintf(stderr, "burstsim calib: --no-kernels and --no-links leave nothing to measure\n");
    return 2;
  }
  if (primary < 0) primary = (o.bf16 && !o.fp32) || (!o.fp32 && !o.bf16) ? 1 : 0;
  if (primary && o.fp32 && !o.bf16) {
    fprintf(stderr, "burstsim calib: --primary bf16 needs bf16 among --dtype\n");
    return 2;
  }
  if (!primary && o.bf16 && !o.fp32) {
    fprintf(stderr, "burstsim calib: --primary fp32 needs fp32 among --dtype\n");
    return 2;
  }
  o.primary_bf16 = primary;
  /* Fail on an unwritable output before minutes of measuring. */
  int rank = 0;
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    fprintf(stderr, "burstsim calib: MPI_Init failed\n");
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int ok = 1;
  if (rank == 0) { /* checked, not created: an interrupted calib leaves no file */
    const bs_path_role outs[] = {{"--out", out}};
    char cerr[1024];
    if (bs_out_check_all(outs, 1, NULL, 0, cerr, sizeof cerr)) {
      fprintf(stderr, "burstsim calib: %s\n", cerr);
      ok = 0;
    } else if (plots && bs_out_check_dir(plots, cerr, sizeof cerr)) {
      fprintf(stderr, "burstsim calib: --plots %s\n", cerr);
      ok = 0;
    }
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) {
    MPI_Finalize();
    return 2; /* a bad --out or --plots: bad input, as for the other commands */
  }
  o.log = rank == 0 ? stdout : NULL;
  bs_calib_data d;
  char err[512];
  int rc = bs_calib_measure(MPI_COMM_WORLD, &o, &d, err, sizeof err);
  if (rc) {
    if (rank == 0) fprintf(stderr, "burstsim calib: %s\n", err);
    bs_calib_data_free(&d);
    MPI_Finalize();
    return 1;
  }
  if (rank == 0) {
    rc = bs_calib_write_profile(&d, &o, out, plots, err, sizeof err);
    if (rc) fprintf(stderr, "burstsim calib: %s\n", err);
    else
      printf("#\n# profile written to %s (%d kernel points, %d link points, %.1f s)%s%s\n", out, d.nk, d.nl, d.wall_s,
             plots ? "; plots in " : "", plots ? plots : "");
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  bs_calib_data_free(&d);
  MPI_Finalize();
  return rc ? 1 : 0;
}
