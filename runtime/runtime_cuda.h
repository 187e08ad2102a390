/*
 * runtime_cuda.h — opens this rank's GPU for a real run: the device table of
 * runtime/device.h, filled with CUDA and NCCL calls. Built only with a CUDA
 * toolkit and NCCL, as the module burstsim_cuda.so that the commands load for
 * --backend cuda (src/cuda_module.h looks these entry points up by name).
 */
#ifndef BURSTSIM_RUNTIME_CUDA_H
#define BURSTSIM_RUNTIME_CUDA_H

#include <stddef.h>
#include "runtime/device.h"

/* Return codes of bs_cuda_rt_open besides 0. */
#define BS_CUDA_RT_NODEV (-2)  /* no usable CUDA device: the command exits BS_EXIT_NO_DEVICE */
#define BS_CUDA_RT_EINPUT (-1) /* the ranks do not fit the devices (NCCL with shared GPUs), out of memory */

/*
 * Collective over mpi_world (an MPI_Comm passed by address): each rank takes the device of its rank
 * on the node (bs_dev_pick), makes its context current and gets the table in *out. Returns 0,
 * BS_CUDA_RT_NODEV or BS_CUDA_RT_EINPUT with a message.
 */
int bs_cuda_rt_open(const void *mpi_world, bs_xport_kind x, bs_rt_device **out, char *err, size_t errlen);
void bs_cuda_rt_close(bs_rt_device *d);
/* CUDA devices visible (0 and the reason in msg when none). */
int bs_cuda_rt_device_count(int *n, char *msg, size_t len);

#endif
