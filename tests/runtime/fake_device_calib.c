/*
 * fake_device_calib.c — `burstsim calib --backend cuda`'s measuring side
 * (calib/measure_cuda*.c) on the fake device of fake_device.h, under mpirun:
 * the kernel series run through the executor on "device" memory, the links
 * through the device's communicator when every rank has its own device
 * (ordinal = rank) or Open MPI's host benchmarks when they share one, and the
 * CPU calibration's fits and writer must turn the points into a profile that
 * loads back with attention tables, the GEMM and roofline models, and (2
 * ranks) link points of every test. The GEMM model is not required: on a CPU standing in for the
 * device the budget skips the projection shapes its fit needs; the score GEMMs must be there.
 *
 * mpirun -np G fake_device_calib shared|own OUT.json
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "calib/calib.h"
#include "profile/profile.h"
#include "tests/runtime/fake_device.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: fake_device_calib shared|own OUT.json\n");
    MPI_Finalize();
    return 2;
  }
  int own = !strcmp(argv[1], "own");
  fake *f = calloc(1, sizeof *f);
  bs_rt_device d;
  fake_device_init(&d, f, BS_XPORT_MPI, own ? rank : 0);
  bs_calib_opts o;
  bs_calib_opts_default(&o);
  o.quick = 1;
  o.fp32 = 1;
  o.bf16 = 0;
  o.primary_bf16 = 0;
  o.head_dim = 64;
  o.max_block = 512;
  o.device = &d;
  o.log = rank == 0 ? stdout : NULL;
  bs_calib_data data;
  char err[512] = "";
  int fail = 0;
  if (bs_calib_measure(MPI_COMM_WORLD, &o, &data, err, sizeof err)) {
    fprintf(stderr, "fake_device_calib: rank %d: %s\n", rank, err);
    fail = 1;
  }
  if (!fail && f->nlive) {
    fprintf(stderr, "fake_device_calib: rank %d: %d device buffers never freed\n", rank, f->nlive);
    fail = 1;
  }
  if (!fail && f->bad) fail = 1;
  if (!fail && rank == 0) {
    int links[7] = {0};
    const char *tests[7] = {"pingpong", "bidir", "ring", "allreduce", "allgather", "reduce_scatter", "alltoall"};
    for (int i = 0; i < data.nl; i++)
      for (int t = 0; t < 7; t++) links[t] += !strcmp(data.l[i].test, tests[t]);
    for (int t = 0; t < 7 && size > 1; t++)
      if (!links[t]) {
        fprintf(stderr, "fake_device_calib: no %s point\n", tests[t]);
        fail = 1;
      }
    if (strcmp(data.kernel_path, "cuda") || strcmp(data.cpu_model, "fake device")) {
      fprintf(stderr, "fake_device_calib: the profile does not name the device (%s, %s)\n", data.kernel_path,
              data.cpu_model);
      fail = 1;
    }
    if (!fail && bs_calib_write_profile(&data, &o, argv[2], NULL, err, sizeof err)) {
      fprintf(stderr, "fake_device_calib: %s\n", err);
      fail = 1;
    }
    bs_profile p;
    if (!fail && bs_profile_load(argv[2], &p, err, sizeof err)) {
      fprintf(stderr, "fake_device_calib: %s does not load: %s\n", argv[2], err);
      fail = 1;
    }
    const int need[] = {BS_K_ATTN_FWD, BS_K_ATTN_BWD, BS_K_ATTN_DELTA, BS_K_ATTN_MERGE, BS_K_ELEMWISE, BS_K_COPY};
    int gemms = 0;
    for (int i = 0; i < data.nk; i++) gemms += data.k[i].kernel == BS_K_GEMM;
    if (gemms < 2) {
      fprintf(stderr, "fake_device_calib: %d GEMM points\n", gemms);
      fail = 1;
    }
    for (size_t i = 0; !fail && i < sizeof need / sizeof need[0]; i++)
      if (p.kernel[need[i]].kind == BS_KM_NONE) {
        fprintf(stderr, "fake_device_calib: no model for %s\n", bs_kernel_name((bs_kernel)need[i]));
        fail = 1;
      }
    printf("fake_device_calib %s G=%d: %d kernel points, %d link points, %ld uploads, %ld syncs: %s\n", argv[1], size,
           data.nk, data.nl, f->uploads, f->syncs, fail ? "FAIL" : "PASS");
  }
  int any = fail;
  MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  bs_calib_data_free(&data);
  free(f->marks);
  free(f);
  MPI_Finalize();
  return any ? 1 : 0;
}
