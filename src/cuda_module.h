/*
 * cuda_module.h — the commands' way to the GPU: `--backend cuda` loads the
 * module burstsim_cuda.so (runtime/runtime_cuda.h) from beside the
 * executable, so that a run, sweep or simulation on the CPU never maps the
 * CUDA, cuBLAS and NCCL libraries (hundreds of MB of address space).
 */
#ifndef BURSTSIM_CUDA_MODULE_H
#define BURSTSIM_CUDA_MODULE_H

#include <stddef.h>
#include "runtime/device.h"

typedef struct {
  int (*open)(const void *mpi_world, bs_xport_kind x, bs_rt_device **out, char *err, size_t errlen);
  void (*close)(bs_rt_device *d);
  int (*device_count)(int *n, char *msg, size_t len);
} bs_cuda_module;

/* Return codes of module->open besides 0 (the values of runtime/runtime_cuda.h). */
#define BS_CUDA_MODULE_NODEV (-2)
#define BS_CUDA_MODULE_EINPUT (-1)

/* 0 with m filled, or -1 with "this build has no CUDA (...)" in err (no module built, or it does
 * not load: the reason follows). The module stays loaded for the process. */
int bs_cuda_module_load(bs_cuda_module *m, char *err, size_t errlen);

#endif
