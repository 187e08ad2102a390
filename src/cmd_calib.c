/*
 * cmd_calib.c — `mpirun -np G burstsim calib`: parses options, runs the
 * microbenchmarks of calib/ on every rank and has rank 0 write the
 * profile (and the plots). Measuring and fitting live in calib/. With
 * --backend cuda every rank opens its GPU first (runtime/runtime_cuda.h)
 * and calib/ measures that device instead of the CPU.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/fileio.h"
#include "calib/blas_core.h"
#include "calib/calib.h"
#include "cmd_args.h"
#include "commands.h"
#include "output.h"
#include "runtime/digest.h"
#include "runtime/watchdog.h"
#include "runtime/hostmem.h"
#include "runtime/devplan.h"
#include "cuda_module.h"

static void calib_usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np G burstsim calib [--backend cpu|cuda] [--quick] [--dtype fp32|bf16|both]\n"
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
          "  --backend B      cpu (default): the CPU kernels and Open MPI; cuda: the CUDA kernels on one\n"
          "                   GPU per rank (ranks share GPUs when there are fewer) through the run's\n"
          "                   executor, and NCCL links when every rank has its own GPU (else Open\n"
          "                   MPI's); exits %d when this build or machine has no CUDA device\n"
          "  --quick          small grid, few repetitions (under a minute)\n"
          "  --dtype T        storage types to time (default both)\n"
          "  --primary T      the type whose tables the simulator reads (default: the only one\n"
          "                   timed, else bf16)\n"
          "  --threads T      kernel threads per rank, 1 .. %d (default: online cores / G)\n"
          "  --head-dim D     only head dimension D, 1 .. 4096 (default 64 and 128)\n"
          "  --max-block N    attention blocks up to the first grid size >= N, 1 .. 2^30\n"
          "  --ranks-per-node P  rank r sits on node r / P (default: ranks with the same host\n"
          "                   name share a node); ping-pong within rank 0's node gives the\n"
          "                   shm link class, to another node the nic class\n"
          "  --plots DIR      gnuplot data, script and PNGs of measured against fitted\n"
          "  --no-links, --no-kernels   skip a part\n"
          "  --timeout S      seconds MPI start-up, the start-up check and each step of a measurement (a\n"
          "                   repetition with its barrier and reduction) may block (default 120)\n"
          "\n"
          "Run it with the same mpirun options as the runs it should predict (as root:\n"
          "--allow-run-as-root; more ranks than cores: --oversubscribe; --bind-to none lets\n"
          "a rank's threads use every core).\n",
          BS_EXIT_NO_DEVICE, BS_ARGS_MAX_THREADS);
}

int cmd_calib(int argc, char **argv) {
  bs_calib_args A;
  char aerr[512];
  if (bs_calib_args_parse(argc, argv, &A, aerr, sizeof aerr)) {
    fprintf(stderr, "burstsim calib: %s\n", aerr);
    calib_usage(stderr);
    return 2;
  }
  if (A.help) {
    calib_usage(stdout);
    return 0;
  }
  if (!A.backend && !A.no_kernels) bs_blas_core_warn("calib");
  bs_calib_opts o;
  bs_calib_opts_default(&o);
  const char *out = A.out, *plots = A.plots;
  o.quick = A.quick;
  o.no_links = A.no_links;
  o.no_kernels = A.no_kernels;
  o.fp32 = A.fp32;
  o.bf16 = A.bf16;
  o.primary_bf16 = A.primary_bf16;
  if (A.head_dim) o.head_dim = A.head_dim;
  if (A.max_block) o.max_block = A.max_block;
  if (A.threads) o.threads = A.threads;
  if (A.ranks_per_node) o.ranks_per_node = A.ranks_per_node;
  /* Fail on an unwritable output before minutes of measuring. */
  int rank = 0;
  char lerr[512];
  if (bs_host_mpi_limit_ok(lerr, sizeof lerr)) { /* before MPI_Init, which would crash on it */
    if (bs_launcher_rank() == 0) fprintf(stderr, "burstsim calib: %s\n", lerr);
    return 2;
  }
  bs_watchdog_arm("burstsim calib", -1, "MPI start-up (MPI_Init)", A.timeout);
  bs_test_stall(bs_launcher_rank(), "init");
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    fprintf(stderr, "burstsim calib: MPI_Init failed\n");
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* Ranks measuring different grids would deadlock in the first collective they do not share. */
  int same[] = {o.quick,          o.threads,        o.fp32,
                o.bf16,           o.primary_bf16,   o.no_kernels,
                o.no_links,       o.head_dim,       (int)(o.max_block >> 32),
                (int)o.max_block, o.ranks_per_node, A.backend};
  char derr[256];
  bs_watchdog_arm("burstsim calib", rank, "start-up (comparing the options of the ranks)", A.timeout);
  if (bs_bytes_same(MPI_COMM_WORLD, same, sizeof same, "set of calib options", derr, sizeof derr)) {
    if (rank == 0) fprintf(stderr, "burstsim calib: %s\n", derr);
    MPI_Finalize();
    return 2;
  }
  bs_watchdog_disarm();
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
  bs_rt_device *dev = NULL;
  bs_cuda_module mod;
  memset(&mod, 0, sizeof mod);
  if (A.backend) { /* every rank opens its GPU; any failure ends all of them with the same status */
    char derr2[512] = "";
    int code = bs_cuda_module_load(&mod, derr2, sizeof derr2) ? BS_EXIT_NO_DEVICE : 0, worst;
    if (!code) {
      MPI_Comm world = MPI_COMM_WORLD;
      int orc = mod.open(&world, BS_XPORT_MPI, &dev, derr2, sizeof derr2);
      code = orc == 0 ? 0 : orc == BS_CUDA_MODULE_NODEV ? BS_EXIT_NO_DEVICE : 2;
    }
    MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (code) fprintf(stderr, "burstsim calib: rank %d: --backend cuda: %s\n", rank, derr2);
    if (worst) {
      if (dev) mod.close(dev);
      MPI_Finalize();
      return worst;
    }
    o.device = dev;
  }
  const char *outs[] = {out};
  FILE *logf = bs_output_table_stream(outs, 1); /* the profile on stdout ("-") stays alone there */
  o.log = rank == 0 ? logf : NULL;
  bs_calib_data d;
  char err[512];
  /* Every measurement's collective steps: a rank that dies or stalls must not hang the others. */
  bs_watchdog_arm("burstsim calib", rank, "a measurement step (repetition, barrier or reduction)", A.timeout);
  int rc = bs_calib_measure(MPI_COMM_WORLD, &o, &d, err, sizeof err);
  bs_watchdog_disarm();
  if (rc) {
    if (rank == 0) fprintf(stderr, "burstsim calib: %s\n", err);
    bs_calib_data_free(&d);
    if (dev) mod.close(dev);
    MPI_Finalize();
    return 1;
  }
  if (rank == 0) {
    rc = bs_calib_write_profile(&d, &o, out, plots, err, sizeof err);
    if (rc) fprintf(stderr, "burstsim calib: %s\n", err);
    else
      fprintf(logf, "#\n# profile written to %s (%d kernel points, %d link points, %.1f s)%s%s\n", out, d.nk, d.nl,
              d.wall_s, plots ? "; plots in " : "", plots ? plots : "");
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  bs_calib_data_free(&d);
  if (dev) mod.close(dev);
  MPI_Finalize();
  return rc ? 1 : 0;
}
