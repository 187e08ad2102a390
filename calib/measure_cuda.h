/*
 * measure_cuda.h — the GPU half of `burstsim calib --backend cuda`: the
 * kernel benchmarks on the device of bs_calib_opts.device (measure_cuda.c)
 * and the NCCL link benchmarks (measure_cuda_links.c), into the same
 * bs_calib_data the CPU calibration fills, for the same fits and profile
 * writer. Collective over an MPI communicator, like measure.h.
 */
#ifndef BURSTSIM_CALIB_MEASURE_CUDA_H
#define BURSTSIM_CALIB_MEASURE_CUDA_H

#include <mpi.h>
#include <stddef.h>
#include "calib/measure.h"

/* Kernels on the GPU, then links (NCCL when each rank has its own GPU, else Open MPI's host links).
 * Returns 0, or -1 with a message (same on every rank). */
int bs_calib_measure_device(MPI_Comm comm, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen);

/* Ping-pong and bidirectional (rank 0 and its node's peer), ring step and the four collectives over
 * NCCL on device buffers, nccl-tests columns (size, time, algbw, busbw). */
int bs_calib_measure_links_nccl(MPI_Comm comm, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen);

#endif
