/*
 * devplan.h — the host-side decisions of a run on a GPU, kept apart from
 * every CUDA and NCCL call so that they are tested on a machine without a
 * GPU: which backend and communicator pair is allowed, which device a rank
 * takes, which group communicators the plan needs and in which order every
 * rank creates them (the split colours), the stream and event schedule of
 * each op, the time accounting from the compute stream's events, and the
 * bytes a rank needs on the device and in host staging.
 *
 * The GPU executor (runtime.c with the hooks of runtime/device.h, filled by
 * runtime/runtime_cuda.c) follows exactly these decisions.
 */
#ifndef BURSTSIM_RUNTIME_DEVPLAN_H
#define BURSTSIM_RUNTIME_DEVPLAN_H

#include <stddef.h>
#include <stdint.h>
#include "plans/plan.h"

/* Which kernels run and which library moves the data. */
typedef enum { BS_BACKEND_CPU = 0, BS_BACKEND_CUDA } bs_backend_kind;
typedef enum { BS_XPORT_MPI = 0, BS_XPORT_NCCL } bs_xport_kind;

/* Exit status of run, calib and validate asked for --backend cuda where the build has no CUDA or
 * the machine has no usable CUDA device (0 ok, 1 failed, 2 bad input, 3 watchdog, as elsewhere). */
#define BS_EXIT_NO_DEVICE 4

const char *bs_backend_kind_name(bs_backend_kind b);
const char *bs_xport_kind_name(bs_xport_kind x);

/* 0 when the pair can run; -1 with the reason (NCCL moves device memory only: --comm nccl needs
 * --backend cuda). */
int bs_dev_check_pair(bs_backend_kind b, bs_xport_kind x, char *err, size_t errlen);

/*
 * The device of a rank: of the ndev devices the CUDA runtime shows it (CUDA_VISIBLE_DEVICES
 * applied), the local_rank-th, round robin when there are fewer (ranks given one device each by
 * CUDA_VISIBLE_DEVICES all take their device 0). ndev = 0 is an error (no device).
 */
int bs_dev_pick(int local_rank, int ndev, int *device, char *err, size_t errlen);

/* How many of the n ranks of a node hold the same device as rank me: ids are the devices'
 * identities (PCI bus ids), one string of `stride` bytes per rank. */
int bs_dev_sharing(const char *ids, size_t stride, int n, int me);

/* 0 when the transport allows `sharing` ranks on one device; NCCL allows one rank of a communicator
 * per GPU: -1 naming the count and the remedy. */
int bs_dev_check_sharing(bs_xport_kind x, int sharing, const char *id, char *err, size_t errlen);

/*
 * The group communicators a plan's collectives use, other than the whole world, in the order every
 * rank creates them. Groups are sorted by (stride, first, size) and dealt into layers of disjoint
 * groups (each group goes to the first layer it does not overlap); layer by layer, every rank of
 * the world calls one MPI_Comm_split with its colour (the index of its group in that layer, or
 * none) and its key (its position in the group), then the members set up the group's NCCL
 * communicator. A rank thus joins at most one group per layer, and every rank walks the layers in
 * the same order, so no creation waits on one that a member reaches later.
 */
typedef struct {
  bs_group g;
  int layer;
} bs_dev_group;

typedef struct {
  bs_dev_group *groups; /* sorted; groups[i].layer ascending within equal layers by position */
  int n, nlayers;
} bs_dev_groups;

/* A pass over every rank's program of p. Returns 0, or -1 with a message. */
int bs_dev_groups_collect(const bs_plan *p, bs_dev_groups *out, char *err, size_t errlen);
void bs_dev_groups_free(bs_dev_groups *s);
/* Rank's colour in layer (-1: in no group of the layer) and its key (position in the group). */
int bs_dev_group_colour(const bs_dev_groups *s, int layer, int rank, int *key);

/*
 * The stream and event schedule of one op. Compute runs on the rank's compute stream; with NCCL
 * the transfers run on the communicator's stream, after the compute enqueued before them (one
 * event, only when compute was enqueued since the last one), and a WAIT makes the compute stream
 * wait for the transfers' events without blocking the host. With MPI on device buffers, a send or
 * collective first waits (host) for the compute stream and copies its data to host staging, and a
 * WAIT blocks the host in MPI, then copies the received data up on the compute stream. Time marks
 * are events on the compute stream.
 */
typedef enum {
  BS_DEV_HOST = 0,     /* allocation, fill, free: host calls, outside the timed phases */
  BS_DEV_MARK,         /* record an event on the compute stream (detail: bs_dev_mark_kind) */
  BS_DEV_LAUNCH,       /* the COMPUTE op's kernels on the compute stream */
  BS_DEV_COMM_AFTER,   /* NCCL: the comm stream waits for an event of the compute stream */
  BS_DEV_POST,         /* post the SEND / RECV / COLL (NCCL: on the comm stream) */
  BS_DEV_STREAM_WAIT,  /* NCCL: the compute stream waits for handle `handle`'s events */
  BS_DEV_SYNC_COMPUTE, /* MPI: the host waits for the compute stream */
  BS_DEV_DOWNLOAD,     /* MPI: device data of the op to host staging */
  BS_DEV_HOST_WAIT,    /* MPI: the host waits for handle `handle` */
  BS_DEV_UPLOAD        /* MPI: handle `handle`'s received staging to the device (compute stream) */
} bs_dev_act_kind;

typedef enum {
  BS_MARK_COMPUTE_BEGIN = 0,
  BS_MARK_COMPUTE_END,
  BS_MARK_WAIT_BEGIN,
  BS_MARK_WAIT_END,
  BS_MARK_PHASE
} bs_dev_mark_kind;

typedef struct {
  bs_dev_act_kind kind;
  int detail; /* MARK: a bs_dev_mark_kind */
  int handle; /* STREAM_WAIT, HOST_WAIT, UPLOAD: the handle; -1 otherwise */
} bs_dev_action;

#define BS_DEV_MAX_ACTIONS (2 + 3 * BS_MAX_WAIT)

typedef struct {
  bs_xport_kind x;
  int dirty; /* compute enqueued since the comm stream last waited for the compute stream */
} bs_dev_sched;

void bs_dev_sched_init(bs_dev_sched *s, bs_xport_kind x);
/* The actions of op, in order, into acts (BS_DEV_MAX_ACTIONS); returns their count. */
int bs_dev_schedule(bs_dev_sched *s, const bs_op *op, bs_dev_action *acts);

/*
 * Time accounting from the compute stream's marks, in the order they were recorded, each with its
 * time (ms from any origin, as cudaEventElapsedTime gives them). compute: sum of COMPUTE_BEGIN to
 * COMPUTE_END; exposed: sum of WAIT_BEGIN to WAIT_END (the compute stream stalled on a transfer).
 */
typedef struct {
  double compute_s, exposed_s;
  double open_compute, open_wait; /* ms of an open interval, < 0 when none */
} bs_dev_times;

void bs_dev_times_init(bs_dev_times *t);
/* Returns 0, or -1 when marks do not pair (an END without its BEGIN). */
int bs_dev_times_add(bs_dev_times *t, bs_dev_mark_kind k, double ms);

/* What a rank holds on the device and in host staging over its program. */
typedef struct {
  int64_t peak;    /* plan buffers: the largest sum of live ALLOCs (what the CPU run reports as peak) */
  int64_t staging; /* MPI on device buffers: largest sum of bytes of transfers in flight at once */
  int64_t largest; /* largest single ALLOC */
} bs_dev_bytes;

int bs_dev_bytes_of(const bs_plan *p, int rank, bs_dev_bytes *out, char *err, size_t errlen);

#endif
