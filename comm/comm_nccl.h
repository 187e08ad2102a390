/*
 * comm_nccl.h — the GPU communicator: the calls of comm.h with the same
 * signatures and meaning, on DEVICE buffers, under the prefix bs_comm_nccl_
 * (bs_comm_nccl_as_comm makes one a comm.h communicator, whose calls forward
 * to these through the backend table).
 *
 * Two modes:
 *  - NCCL (bs_comm_nccl_create): one rank per process and GPU; the
 *    ncclUniqueId is broadcast over MPI; group communicators are made on first
 *    use, collectively over the group only (MPI_Comm_create_group + a new id).
 *    Point-to-point posts are collected and issued as ONE grouped
 *    ncclSend/ncclRecv batch (ncclGroupStart/End) at the next test, wait,
 *    progress, collective or flush — so a ring step's send and receive never
 *    deadlock. NCCL matches a pair's messages in posting order; tags are not
 *    used for matching (they are in local mode).
 *  - local (bs_comm_nccl_create_local): G virtual ranks in one process on one
 *    GPU (NCCL refuses several ranks per GPU), each with its own stream,
 *    exchanging through device-to-device copies; sends and receives match by
 *    (source, destination, tag) in posting order; collectives run on a shared
 *    stream once every member has posted. Handles may be driven from one
 *    thread or one thread per rank (a mutex guards the shared state).
 *
 * Streams and overlap: every rank has a dedicated communication stream; each
 * request completes on a CUDA event. bs_comm_nccl_after(c, compute) makes the
 * next posted operations wait (on the device) for the work enqueued so far on
 * a compute stream; bs_comm_nccl_stream_wait(c, req, compute) makes a compute
 * stream wait for a request without blocking the host. With two receive
 * buffers a ring step's transfer overlaps the compute of the previous one.
 *
 * Build: without NCCL and MPI (BS_COMM_NCCL_LOCAL_ONLY defined) only the local
 * mode exists and bs_comm_nccl_create reports that.
 */
#ifndef BURSTSIM_COMM_NCCL_H
#define BURSTSIM_COMM_NCCL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>
#include "comm/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bs_comm_nccl bs_comm_nccl;

/* Most virtual ranks of the local mode. */
#define BS_COMM_NCCL_MAX_LOCAL 64

/* One rank per MPI process on GPU `device`. world is an MPI_Comm passed as a
 * pointer (so this header names no MPI type): (void *)&comm. */
int bs_comm_nccl_create(const void *mpi_world, int device, bs_comm_nccl **out, char *err, size_t errlen);
/* G virtual ranks on GPU `device`: out[0..G-1]. Free each with bs_comm_nccl_free. */
int bs_comm_nccl_create_local(int G, int device, bs_comm_nccl **out, char *err, size_t errlen);

int bs_comm_nccl_rank(const bs_comm_nccl *c);
int bs_comm_nccl_size(const bs_comm_nccl *c);
int bs_comm_nccl_is_local(const bs_comm_nccl *c);
cudaStream_t bs_comm_nccl_stream(const bs_comm_nccl *c);

int bs_comm_nccl_isend(bs_comm_nccl *c, const void *buf, int64_t bytes, int peer, int tag, int *req, char *err,
                       size_t errlen);
int bs_comm_nccl_irecv(bs_comm_nccl *c, void *buf, int64_t bytes, int peer, int tag, int *req, char *err,
                       size_t errlen);
/* A ring step: send to `to` and receive from `from` as one grouped operation. */
int bs_comm_nccl_sendrecv(bs_comm_nccl *c, const void *sendbuf, int64_t send_bytes, int to, void *recvbuf,
                          int64_t recv_bytes, int from, int tag, int *req, char *err, size_t errlen);
int bs_comm_nccl_icoll(bs_comm_nccl *c, bs_comm_coll kind, bs_comm_red red, bs_comm_type type, bs_comm_group g,
                       const void *send, void *recv, int64_t bytes, int *req, char *err, size_t errlen);

int bs_comm_nccl_test(bs_comm_nccl *c, int req, int *done);
int bs_comm_nccl_wait(bs_comm_nccl *c, int req, double timeout_s);
void bs_comm_nccl_progress(bs_comm_nccl *c);
int bs_comm_nccl_pending(const bs_comm_nccl *c);
/* Issues the collected point-to-point posts now (NCCL mode; no-op in local mode). */
int bs_comm_nccl_flush(bs_comm_nccl *c, char *err, size_t errlen);

/* NCCL mode: the communicator of group g made now over mpi_comm (an MPI_Comm of exactly g's ranks
 * ordered by position in g, passed by address), instead of at first use; collective over g. The
 * runtime creates every group of a plan this way, in the order of runtime/devplan.h. */
int bs_comm_nccl_adopt_group(bs_comm_nccl *c, bs_comm_group g, const void *mpi_comm, char *err, size_t errlen);

/* Overlap helpers (see above). */
int bs_comm_nccl_after(bs_comm_nccl *c, cudaStream_t compute, char *err, size_t errlen);
int bs_comm_nccl_stream_wait(bs_comm_nccl *c, int req, cudaStream_t compute, char *err, size_t errlen);

void bs_comm_nccl_abort(bs_comm_nccl *c, int code);
void bs_comm_nccl_free(bs_comm_nccl *c);

/* c as a comm.h communicator (device buffers; stream helpers stay on c). bs_comm_free(*out) frees c,
 * and so does a failure here. */
int bs_comm_nccl_as_comm(bs_comm_nccl *c, bs_comm **out, char *err, size_t errlen);

/* fp32 element-wise dst = dst (+ or max) src on a stream (the local mode's
 * reductions; kernels/cuda/comm_cuda_ops.cu). */
int bs_cuda_reduce_f32(float *dst, const float *src, int64_t n, bs_comm_red red, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
