/*
 * runtime.h — executes a plan for real: every rank runs its op stream with
 * the CPU kernels (COMPUTE ops through runtime/compute.h, the executor the
 * calibration times too) and the communicator (comm/comm.h, Open
 * MPI), measuring time per phase, time blocked on
 * communication, bytes per peer and the plan allocator's peak. A
 * verification mode gathers the outputs to rank 0 and compares them with a
 * single-rank reference computed by the same kernels on the whole sequence
 * (attention scope only). At layer and model scope the ops the plan only
 * models run for real on scratch operands (runtime/scratch.h): projections as
 * fp32 GEMMs, norms and activations as elementwise passes, collectives that
 * name only bytes as the real MPI collective.
 * No file I/O here: the trace comes back as events for src/ to write.
 */
#ifndef BURSTSIM_RUNTIME_H
#define BURSTSIM_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>
#include "plans/plan.h"
#include "runtime/device.h"

typedef enum { BS_FAULT_NONE = 0, BS_FAULT_EXIT, BS_FAULT_STALL } bs_fault_kind;

typedef struct {
  int verify;          /* gather outputs to rank 0 and compare with the reference */
  int threads;         /* kernel threads per rank; 0 = online cores / ranks (at least 1) */
  double timeout_s;    /* deadline of every wait; 0 = 120 s */
  int trace;           /* record one event per op */
  int64_t tile_rows;   /* query rows per kernel call between progress polls; 0 = BS_COMPUTE_TILE_ROWS (256) */
  int ranks_per_node;  /* 0 = cfg.par.ranks_per_node */
  bs_fault_kind fault; /* test hook: rank fault_rank exits / stalls at fault_step */
  int fault_rank, fault_step;
  int warmup; /* extra untimed executions of the plan before the measured one */
  /* The GPU to run on (runtime/device.h; NULL: the CPU kernels on host memory and Open MPI). With a
   * device, buffers and scratch live in device memory, times come from events on its compute
   * stream, and ranks exchange data over NCCL or over MPI through host staging (device->xport). */
  const bs_rt_device *device;
} bs_runtime_opts;

typedef struct {
  int32_t rank, step;
  int16_t kind;   /* bs_op_kind */
  int16_t detail; /* kernel (COMPUTE), coll kind (COLL) */
  int32_t peer;   /* SEND/RECV peer, -1 otherwise */
  int64_t bytes;
  double t0, t1; /* seconds since the common start */
} bs_trace_event;

typedef struct {
  bs_result res;                           /* rank 0: the whole run; other ranks: their own entry only */
  int64_t *peer_sent;                      /* rank 0: nranks x nranks, [from * nranks + to], p2p bytes */
  int64_t *coll_sent;                      /* rank 0: per rank, collective bytes (ring-algorithm count) */
  int64_t (*peak_cls)[BS_MEM_CLASS_COUNT]; /* rank 0: per rank, breakdown at its peak */
  double verify_err[BS_ROLE_DV + 1];       /* rank 0: max |got-ref| / max|ref| per output role, -1 = absent */
  double verify_tol;
  int verified;           /* 1 when verify ran and every output passed */
  bs_trace_event *events; /* rank 0 with opts.trace: all ranks' events */
  int64_t nevents;
  int threads;           /* threads per rank used */
  int64_t scratch_bytes; /* rank 0: the largest scratch of the modelled ops (layer, model scope) of a rank:
                            in its RSS, not in the plan's peak */
  int64_t step_faults;   /* rank 0: the most minor page faults a rank took in the measured execution outside
                            its ALLOC ops (memory first touched by a kernel or a transfer, timed with it) */
} bs_run_report;

enum { BS_RUN_OK = 0, BS_RUN_EINPUT = -1, BS_RUN_EFATAL = -2, BS_RUN_EVERIFY = 1 };

/*
 * Runs cfg on the ranks of `world` (cfg.par.gpus must equal its size).
 * Collective. Returns BS_RUN_OK; BS_RUN_EINPUT (same message on every rank,
 * nothing allocated); BS_RUN_EVERIFY (rank 0: outputs differ from the
 * reference); or BS_RUN_EFATAL (a peer did not answer in time or MPI failed:
 * the caller must abort the job, e.g. with MPI_Abort, as other ranks may hang).
 */
int bs_runtime_run(const bs_config *cfg, MPI_Comm world, const bs_runtime_opts *opts, bs_run_report *out, char *err,
                   size_t errlen);
void bs_run_report_free(bs_run_report *r);

/*
 * Overlap benchmark: one steady-state ring step of
 * burst's forward on every rank — the K,V block exchange with the ring
 * neighbours and the attention of the local queries against a full block —
 * timed three ways in the same run: compute alone, communication alone, and
 * both overlapped the way the runtime executes them (transfers posted first,
 * progress polled between kernel tiles). Medians over `reps` (0 = auto),
 * maximum over ranks; valid on rank 0.
 */
typedef struct {
  int64_t block_tokens;   /* N / G */
  int64_t bytes_per_step; /* K + V sent per rank per step */
  int reps, threads;
  double compute_s, comm_s, overlap_s;
  double ratio; /* overlap / max(compute, comm) */
} bs_overlap_result;

int bs_runtime_overlap_bench(const bs_config *cfg, MPI_Comm world, const bs_runtime_opts *opts, int reps,
                             bs_overlap_result *out, char *err, size_t errlen);

#endif
