/*
 * comm.h — the communicator the runtime drives: non-blocking point-to-point
 * and collectives over groups of ranks, with test / wait-with-deadline.
 * Requests are small integer slots owned by the communicator. A backend is a
 * table of these calls on its own state (bs_comm_ops): Open MPI fills one
 * (comm_mpi.h, host buffers), NCCL another (comm_nccl.h, device buffers);
 * the calls below forward to the table of the communicator they are given.
 */
#ifndef BURSTSIM_COMM_H
#define BURSTSIM_COMM_H

#include <stddef.h>
#include <stdint.h>

typedef struct bs_comm bs_comm;

/* Ranks first, first + stride, ..., `size` of them (same shape as plan.h's bs_group). */
typedef struct {
  int32_t first, stride, size;
} bs_comm_group;

typedef enum { BS_COMM_ALLREDUCE = 0, BS_COMM_ALLGATHER, BS_COMM_REDUCE_SCATTER, BS_COMM_ALLTOALL } bs_comm_coll;
typedef enum { BS_COMM_SUM = 0, BS_COMM_MAX } bs_comm_red;
typedef enum { BS_COMM_F32 = 0, BS_COMM_BYTES } bs_comm_type;

enum { BS_COMM_OK = 0, BS_COMM_ERR = -1, BS_COMM_TIMEOUT = -2 };

/* A backend: the calls below on its state `self`, with the same contracts. */
typedef struct {
  const char *name; /* "mpi", "nccl" */
  int (*rank)(const void *self);
  int (*size)(const void *self);
  int (*isend)(void *self, const void *buf, int64_t bytes, int peer, int tag, int *req, char *err, size_t errlen);
  int (*irecv)(void *self, void *buf, int64_t bytes, int peer, int tag, int *req, char *err, size_t errlen);
  int (*icoll)(void *self, bs_comm_coll kind, bs_comm_red red, bs_comm_type type, bs_comm_group g, const void *send,
               void *recv, int64_t bytes, int *req, char *err, size_t errlen);
  int (*test)(void *self, int req, int *done);
  int (*wait)(void *self, int req, double timeout_s);
  void (*progress)(void *self);
  int (*pending)(const void *self);
  void (*abort)(void *self, int code);
  void (*free)(void *self);
} bs_comm_ops;

/* A communicator over a backend's state; bs_comm_free then frees self through ops->free. */
int bs_comm_wrap(const bs_comm_ops *ops, void *self, bs_comm **out, char *err, size_t errlen);
/* The backend's name and state (e.g. for backend-specific calls such as comm_nccl.h's stream helpers). */
const char *bs_comm_backend(const bs_comm *c);
void *bs_comm_self(bs_comm *c);

int bs_comm_rank(const bs_comm *c);
int bs_comm_size(const bs_comm *c);

/* Post a transfer; *req receives a request slot. Returns BS_COMM_OK or BS_COMM_ERR (err filled). */
int bs_comm_isend(bs_comm *c, const void *buf, int64_t bytes, int peer, int tag, int *req, char *err, size_t errlen);
int bs_comm_irecv(bs_comm *c, void *buf, int64_t bytes, int peer, int tag, int *req, char *err, size_t errlen);
/*
 * Collective over group g (the caller must belong to it). bytes: allreduce —
 * the buffer; allgather — each rank's part (recv holds size parts);
 * reduce-scatter — the full send buffer (recv holds bytes / size); all-to-all —
 * the send buffer (size equal blocks). Reductions need type F32.
 */
int bs_comm_icoll(bs_comm *c, bs_comm_coll kind, bs_comm_red red, bs_comm_type type, bs_comm_group g, const void *send,
                  void *recv, int64_t bytes, int *req, char *err, size_t errlen);

/* Non-blocking check: *done = 1 when complete (the slot is then released). */
int bs_comm_test(bs_comm *c, int req, int *done);
/* Blocks until complete or timeout_s passes (BS_COMM_TIMEOUT). */
int bs_comm_wait(bs_comm *c, int req, double timeout_s);
/* Lets every outstanding request progress (call it between compute tiles). */
void bs_comm_progress(bs_comm *c);
/* Requests in flight. */
int bs_comm_pending(const bs_comm *c);

/* Ends the whole job (all ranks) with exit code `code` (c must not be NULL). */
void bs_comm_abort(bs_comm *c, int code);
void bs_comm_free(bs_comm *c);

#endif
