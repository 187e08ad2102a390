/*
 * scratch.h — the operands of the ops a layer or model plan only models:
 * projections (GEMM of kind BS_GEMM_GENERIC, m x n x k), norms, activations
 * and the optimizer step (ELEMWISE of kind BS_EW_GENERIC, elems elements), and
 * collectives and transfers whose buffers are BS_NOREF (only their bytes are
 * named). The runtime runs them for real on the buffers here, sized once per
 * rank by a pass over its program before the first execution, so that the
 * kernels and the MPI calls are real without the plan naming data.
 *
 * The scratch is outside the plan's memory model: the plan's ALLOCs are what
 * the run's peak counts (and what the simulator counts); the scratch shows in
 * the process's RSS only. It carries no activation from one op to the
 * next; its send data are fp32 ones, which lets the runtime check that each
 * collective delivered what its group should (bs_scratch_expected).
 */
#ifndef BURSTSIM_RUNTIME_SCRATCH_H
#define BURSTSIM_RUNTIME_SCRATCH_H

#include <stddef.h>
#include <stdint.h>
#include "comm/comm.h"
#include "plans/plan.h"

typedef struct {
  float *a, *b, *c;               /* GEMM: A [m x k], B [k x n], C [m x n], each the largest of the program */
  float *x;                       /* elementwise: a pass over nx elements, in place */
  char *send;                     /* data of every NOREF send (only read, shared by all in flight) */
  char **recv;                    /* one receive slot per NOREF collective or receive in flight at once */
  int nrecv;                      /* slots */
  char *busy;                     /* per slot: held by a handle */
  int *slot_of;                   /* per handle id: its receive slot, -1 = none */
  int nhandles;                   /* handle ids the program uses are below this */
  int64_t na, nb, nc, nx;         /* elements of a, b, c and x */
  int64_t send_bytes, recv_bytes; /* bytes of send and of each receive slot */
} bs_scratch;

/* How the communicator runs a COLL op on scratch: its element type (16-bit reductions run as fp32
 * sums of the same bytes, as MPI has no bf16 type), the bytes it is given (the op's, rounded up to
 * whole fp32 elements or equal blocks where the call needs them) and the bytes it writes. */
typedef struct {
  bs_comm_type type;
  int64_t bytes, recv_bytes;
} bs_scratch_coll;

bs_scratch_coll bs_scratch_coll_shape(const bs_op *op);

/* 1 when the op's buffers are scratch: a GENERIC GEMM or ELEMWISE, a COLL or SEND/RECV with a NOREF buffer. */
int bs_scratch_uses(const bs_op *op);

/*
 * Sizes and allocates the scratch of `rank`'s program in p (a pass over it),
 * filled with small non-zero values; a program that needs none gets none.
 * Returns 0, or -1 with a message naming the rank and the size it could not
 * have.
 */
int bs_scratch_create(bs_scratch *s, const bs_plan *p, int rank, char *err, size_t errlen);
void bs_scratch_free(bs_scratch *s);

/* Bytes held (for the report: RSS includes them, the plan's peak does not). */
int64_t bs_scratch_bytes(const bs_scratch *s);

/* A free receive slot for handle h, or NULL when every slot is in flight (a program the pass did not see). */
char *bs_scratch_take(bs_scratch *s, int h);
/*
 * A check that the transfer really happened over the group the op names: the send data are fp32
 * ones, so the first float a NOREF receive or collective delivers is the group size for a sum, 1
 * otherwise. bs_scratch_expected: that value for op, 0 when the op delivers too few bytes to tell.
 * bs_scratch_slot: handle h's receive slot (NULL: none).
 */
float bs_scratch_expected(const bs_op *op);
char *bs_scratch_slot(const bs_scratch *s, int h);
/* The slot of handle h back, when it has one (at the WAIT that joins it). */
void bs_scratch_give(bs_scratch *s, int h);

#endif
