/*
 * comm_mpi.h — creating the Open MPI backend of comm.h from a communicator.
 * Kept apart so that comm.h itself names no MPI type.
 */
#ifndef BURSTSIM_COMM_MPI_H
#define BURSTSIM_COMM_MPI_H

#include <mpi.h>
#include "comm/comm.h"

/* Wraps `world` (duplicated, so plan traffic never meets the caller's). */
int bs_comm_mpi_create(MPI_Comm world, bs_comm **out, char *err, size_t errlen);

#endif
