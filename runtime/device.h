/*
 * device.h — what the plan executor (runtime.c) needs from a GPU to run a
 * plan there: the kernel table on device memory, memory moves between host
 * and device, events on the compute stream for timing, and the communicator
 * set-up and stream hooks. The runtime names no CUDA type: a GPU build fills
 * this table (runtime/runtime_cuda.h) and hands it over in
 * bs_runtime_opts.device; NULL runs the CPU kernels on host memory. The
 * order of the calls for each op is devplan.h's schedule.
 */
#ifndef BURSTSIM_RUNTIME_DEVICE_H
#define BURSTSIM_RUNTIME_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/backend.h"
#include "comm/comm.h"
#include "runtime/devplan.h"

typedef struct {
  const bs_kernel_backend *be; /* kernels enqueued on the compute stream, on device memory */
  bs_xport_kind xport;         /* how ranks exchange data */
  int device, shared;          /* the device ordinal; 1 when other ranks of the node share it */
  char name[128];              /* the device's name, for reports */
  char where[192];             /* host name and PCI bus id: the same string on every rank holding this device */
  void *self;
  /* Zero-filled device memory (NULL: out of memory), and its release. */
  void *(*alloc)(void *self, size_t bytes);
  void (*free)(void *self, void *ptr);
  /* Host <-> device copies, complete when they return; ordered after the compute stream's work. */
  int (*upload)(void *self, void *dst, const void *src, size_t bytes);
  int (*download)(void *self, void *dst, const void *src, size_t bytes);
  /* The host waits for the compute stream. */
  int (*sync)(void *self);
  /* Marks: an event recorded on the compute stream, returning its index (-1: failed); after
   * sync, mark_ms gives its time in ms after mark 0; marks_reset forgets them all. */
  int (*mark)(void *self);
  int (*mark_ms)(void *self, int i, double *ms);
  void (*marks_reset)(void *self);
  /* NCCL: the communicator over MPI world (an MPI_Comm passed by address) with the plan's group
   * communicators created in devplan.h's order; the comm stream waits for the compute stream;
   * the compute stream waits for request req. */
  int (*comm_create)(void *self, const void *mpi_world, const bs_dev_groups *groups, bs_comm **out, char *err,
                     size_t errlen);
  int (*comm_after)(void *self, bs_comm *c, char *err, size_t errlen);
  int (*stream_wait)(void *self, bs_comm *c, int req, char *err, size_t errlen);
  /* Device memory in use now (all processes) and in all, as the device reports them; -1 unknown. */
  int64_t (*mem_used)(void *self);
  int64_t (*mem_total)(void *self);
} bs_rt_device;

#endif
