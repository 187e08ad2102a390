/*
 * runtime.c — the real executor of plans (see runtime.h). Each rank walks its
 * op stream, one handler per op kind: ALLOC/FREE through a counting
 * allocator, COMPUTE through the shared executor (compute.h) on the CPU
 * backend with a communicator progress poll between tiles (large Open MPI
 * transfers only move while the library is entered, so this is what makes
 * overlap real), SEND/RECV/COLL posted non-blocking, WAIT with a deadline.
 * Inputs are a pure function of the seed and the global (tensor, batch, head,
 * token, column) index, so every rank count sees the same global tensors and
 * rank 0 can rebuild them for the single-rank reference. At layer and model
 * scope the ops the plan only models (projections, norms, the optimizer step,
 * collectives that name bytes but no buffer) run on per-rank scratch
 * (scratch.h), outside the plan's memory.
 * With a GPU (opts.device, runtime/device.h) the same walk runs each op
 * through devplan.h's stream and event schedule: buffers and scratch in
 * device memory, the kernels of the device's table, times from events on
 * its compute stream, and transfers over NCCL or over MPI through host
 * staging.
 *
 * This file: the entry (bs_runtime_run), one execution of the plan, the clocks
 * and the result gather. Its parts live beside it: runtime_ops.c runs the ops
 * on the host (buffers, kernels, phases), runtime_comm.c posts and joins the
 * transfers, runtime_dev.c runs the ops on a GPU, runtime_verify.c makes the
 * inputs and checks the outputs (runtime_impl.h holds their shared state).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <cblas.h>
#include "runtime_impl.h"
#include "watchdog.h"
#include "hostmem.h"
#include "comm/comm_mpi.h"
#include "base/clock.h"

/* ---------------- the clocks ---------------- */

static void reset_stats(rt *t) {
  t->fwd = t->bwd = t->compute = t->exposed = t->wall = t->setup = 0;
  t->live = t->peak = 0;
  memset(t->live_cls, 0, sizeof t->live_cls);
  memset(t->peak_cls, 0, sizeof t->peak_cls);
  memset(t->sent_to, 0, (size_t)t->G * sizeof *t->sent_to);
  memset(t->recv_from, 0, (size_t)t->G * sizeof *t->recv_from);
  t->coll_sent = t->coll_recv = t->coll_intra = t->coll_inter = 0;
  t->nev = 0;
}

/* Minor page faults of this process so far (all its threads). */
int64_t rt_minor_faults(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) ? 0 : (int64_t)ru.ru_minflt;
}

/* Time zero of a measurement: phases already open restart now; set-up so far is forgotten. */
void rt_restart_clocks(rt *t) {
  t->faults0 = rt_minor_faults();
  t->alloc_faults = 0;
  double now = bs_now_s();
  t->t_start = now;
  t->phase_t0[0] = t->phase_t0[1] = now;
  t->setup = t->phase_setup0[0] = t->phase_setup0[1] = 0;
}

/* The same on a GPU: mark 0, the origin of the event times, also opens both phases. */
static int restart_dev_clocks(rt *t, char *err, size_t errlen) {
  rt_restart_clocks(t);
  t->dev->marks_reset(t->dev->self);
  t->nmarks = 0;
  int rc = rt_dev_mark(t, BS_MARK_PHASE, NULL, err, errlen);
  if (rc == BS_RUN_OK) {
    t->marks[0].begin = 1;
    if (rt_dev_mark(t, BS_MARK_PHASE, NULL, err, errlen)) return BS_RUN_EFATAL;
    t->marks[1].begin = 1;
    t->marks[1].fwd_bwd = 1;
  }
  return rc;
}

/* Test hook: the chosen rank exits or stalls at the chosen step of the measured execution. */
static void maybe_fault(rt *t, const bs_op *op, int measured) {
  if (!measured || t->opts->fault == BS_FAULT_NONE || t->rank != t->opts->fault_rank ||
      op->step != t->opts->fault_step || t->faulted)
    return;
  t->faulted = 1;
  fprintf(stderr, "burstsim run: rank %d: fault injection: %s at step %d\n", t->rank,
          t->opts->fault == BS_FAULT_EXIT ? "exiting" : "stalling", op->step);
  fflush(stderr);
  if (t->opts->fault == BS_FAULT_EXIT) _exit(17);
  for (;;) sleep(1);
}

/* A barrier under the watchdog, so that a rank that never arrives ends the job with a message. */
static void guarded_barrier(rt *t, const char *what) {
  bs_watchdog_arm("burstsim run", t->rank, what, t->timeout);
  MPI_Barrier(t->world);
  bs_watchdog_disarm();
}

static int execute(rt *t, int measured, char *err, size_t errlen) {
  bs_plan_iter *it = bs_plan_iter_new(t->plan, t->rank);
  if (!it) {
    snprintf(err, errlen, "out of memory");
    return BS_RUN_EFATAL;
  }
  reset_stats(t);
  bs_test_stall(t->rank, "start");
  guarded_barrier(t, "the start of an execution (barrier)");
  t->t_start = bs_now_s();
  bs_op op;
  int rc = BS_RUN_OK, started = 0;
  if (t->dev) {
    bs_dev_sched_init(&t->sched, t->dev->xport);
    t->nmarks = 0;
  }
  while (rc == BS_RUN_OK && bs_plan_next(it, &op)) {
    if (!started && op.kind != BS_OP_ALLOC && op.kind != BS_OP_FREE && op.kind != BS_OP_PHASE) {
      /* The inputs exist on every rank: start the clocks together (each rank
       * passes here exactly once, below if its program has no such op). */
      started = 1;
      if (t->dev && t->dev->sync(t->dev->self)) {
        snprintf(err, errlen, "rank %d: the compute stream failed before the start", t->rank);
        rc = BS_RUN_EFATAL;
        break;
      }
      guarded_barrier(t, "the start of the clocks (barrier)");
      if (t->dev) {
        if ((rc = restart_dev_clocks(t, err, errlen)) != BS_RUN_OK) break;
      } else rt_restart_clocks(t);
    }
    maybe_fault(t, &op, measured);
    rc = t->dev ? rt_run_op_dev(t, &op, err, errlen) : rt_run_op(t, &op, err, errlen);
  }
  if (rc == BS_RUN_OK && bs_plan_iter_error(it)) {
    snprintf(err, errlen, "%s", bs_plan_iter_errmsg(it));
    rc = BS_RUN_EFATAL;
  }
  if (!started && rc == BS_RUN_OK) MPI_Barrier(t->world);
  t->wall = bs_now_s() - t->t_start;
  t->faults = started ? rt_minor_faults() - t->faults0 - t->alloc_faults : 0;
  if (t->dev && started && rc == BS_RUN_OK) rc = rt_dev_times(t, err, errlen);
  bs_plan_iter_free(it);
  return rc;
}

/* ---------------- results ---------------- */

typedef struct {
  double step, fwd, bwd, compute, exposed;
  int64_t sent, recv, peak, rss, coll_sent, coll_intra, coll_inter;
  int64_t peak_cls[BS_MEM_CLASS_COUNT];
  int64_t scratch, faults;
} rank_stats;

static int collect_all(rt *t, bs_run_report *out);

/* The result gather, bounded: rank 0 names a rank that never reaches it, the others time out on rank 0. */
static int collect(rt *t, bs_run_report *out, char *err, size_t errlen) {
  bs_test_stall(t->rank, "gather");
  if (bs_arrive(t->world, "the result gather", t->timeout, 0, err, errlen)) return BS_RUN_EFATAL;
  bs_test_stall(t->rank, "gathering");
  bs_watchdog_arm("burstsim run", t->rank, "the result gather", t->timeout);
  if (t->rank != 0) bs_watchdog_waiting("rank 0");
  int rc = collect_all(t, out);
  bs_watchdog_disarm();
  return rc;
}

static int collect_all(rt *t, bs_run_report *out) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  rank_stats s;
  memset(&s, 0, sizeof s);
  s.step = t->wall - t->setup;
  s.fwd = t->fwd;
  s.bwd = t->bwd;
  s.compute = t->compute;
  s.exposed = t->exposed;
  s.peak = t->peak;
  s.rss = (int64_t)ru.ru_maxrss * 1024;
  s.coll_sent = t->coll_sent;
  s.coll_intra = t->coll_intra;
  s.coll_inter = t->coll_inter;
  memcpy(s.peak_cls, t->peak_cls, sizeof s.peak_cls);
  s.scratch = bs_scratch_bytes(&t->scratch);
  s.faults = t->faults;
  for (int q = 0; q < t->G; q++) {
    s.sent += t->sent_to[q];
    s.recv += t->recv_from[q];
  }
  s.sent += t->coll_sent;
  s.recv += t->coll_recv;
  int G = t->G, root = t->rank == 0;
  rank_stats *all = root ? calloc((size_t)G, sizeof *all) : NULL;
  int64_t *peers = root ? calloc((size_t)G * G, sizeof *peers) : NULL;
  MPI_Gather(&s, (int)sizeof s, MPI_BYTE, all, (int)sizeof s, MPI_BYTE, 0, t->world);
  MPI_Gather(t->sent_to, G, MPI_INT64_T, peers, G, MPI_INT64_T, 0, t->world);
  /* trace events */
  if (t->opts->trace) {
    int64_t nb = t->nev * (int64_t)sizeof(bs_trace_event);
    int cnt = (int)nb, *cnts = root ? calloc((size_t)G, sizeof(int)) : NULL,
        *displ = root ? calloc((size_t)G, sizeof(int)) : NULL;
    MPI_Gather(&cnt, 1, MPI_INT, cnts, 1, MPI_INT, 0, t->world);
    int64_t total = 0;
    if (root)
      for (int r = 0; r < G; r++) {
        displ[r] = (int)total;
        total += cnts[r];
      }
    char *evs = root ? malloc((size_t)total + 1) : NULL;
    MPI_Gatherv(t->ev, cnt, MPI_BYTE, evs, cnts, displ, MPI_BYTE, 0, t->world);
    if (root) {
      out->events = (bs_trace_event *)evs;
      out->nevents = total / (int64_t)sizeof(bs_trace_event);
    }
    free(cnts);
    free(displ);
  }
  bs_result *r = &out->res;
  r->cfg = *t->cfg;
  bs_plan_decision(t->plan, &r->decision);
  r->mode = "run";
  if (!root) {
    r->nranks = 1;
    r->ranks = calloc(1, sizeof *r->ranks);
    r->ranks[0] = (bs_rank_result){t->rank, s.step, s.fwd, s.bwd, s.compute, s.exposed, s.sent, s.recv, s.peak, 0, {0}};
    return 0;
  }
  r->nranks = G;
  r->ranks = calloc((size_t)G, sizeof *r->ranks);
  out->peer_sent = peers;
  out->coll_sent = calloc((size_t)G, sizeof(int64_t));
  out->peak_cls = calloc((size_t)G, sizeof *out->peak_cls);
  int rpn = t->rpn, maxpeak = 0;
  for (int q = 0; q < G; q++) {
    rank_stats *a = &all[q];
    r->ranks[q] =
      (bs_rank_result){q, a->step, a->fwd, a->bwd, a->compute, a->exposed, a->sent, a->recv, a->peak, 0, {0}};
    out->coll_sent[q] = a->coll_sent;
    memcpy(out->peak_cls[q], a->peak_cls, sizeof a->peak_cls);
    if (a->step > r->time.step) r->time.step = a->step;
    if (a->fwd > r->time.fwd) r->time.fwd = a->fwd;
    if (a->bwd > r->time.bwd) r->time.bwd = a->bwd;
    if (a->compute > r->time.compute) r->time.compute = a->compute;
    if (a->exposed > r->time.comm_exposed) r->time.comm_exposed = a->exposed;
    if (a->sent > r->comm.per_rank_max_sent) r->comm.per_rank_max_sent = a->sent;
    r->comm.total += a->sent;
    for (int d = 0; d < G; d++) {
      if (d / rpn == q / rpn) r->comm.intra_node += peers[q * G + d];
      else r->comm.inter_node += peers[q * G + d];
    }
    r->comm.intra_node += a->coll_intra;
    r->comm.inter_node += a->coll_inter;
    if (a->peak > all[maxpeak].peak) maxpeak = q;
    if (a->rss > r->mem.rss_bytes) r->mem.rss_bytes = a->rss;
    if (a->scratch > out->scratch_bytes) out->scratch_bytes = a->scratch;
    if (a->faults > out->step_faults) out->step_faults = a->faults;
  }
  r->mem.peak_bytes_max = all[maxpeak].peak;
  memcpy(r->mem.breakdown, all[maxpeak].peak_cls, sizeof r->mem.breakdown);
  free(all);
  return 0;
}

/* ---------------- entry ---------------- */
/* The communicator: Open MPI on host memory, NCCL (the plan's groups made up front), or Open MPI
 * through host staging on a GPU. */
static int make_comm(rt *t, char *err, size_t errlen) {
  if (!t->dev || t->dev->xport == BS_XPORT_MPI) return bs_comm_mpi_create(t->world, &t->comm, err, errlen);
  bs_dev_groups g;
  if (bs_dev_groups_collect(t->plan, &g, err, errlen)) return -1;
  int rc = t->dev->comm_create(t->dev->self, &t->world, &g, &t->comm, err, errlen);
  bs_dev_groups_free(&g);
  return rc;
}

/*
 * Before any plan buffer is allocated (collective over world): the ranks sharing each host sum their
 * plan peaks against that host's available memory, and each rank's peak meets its address-space
 * limit (hostmem.h). 0 when every host fits; else -1 on every rank with the first failing rank's
 * message in err (an OOM kill a minute in, before this check, told the user nothing).
 */
static int host_fits(const bs_plan *plan, MPI_Comm world, int rank, char *err, size_t errlen) {
  bs_dev_bytes b;
  char msg[512] = "";
  int bad = bs_dev_bytes_of(plan, rank, &b, msg, sizeof msg) != 0;
  MPI_Comm local;
  int64_t sum = b.peak;
  int nlocal = 1;
  if (MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
    int64_t mine = bad ? 0 : b.peak;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT64_T, MPI_SUM, local); /* wraps only past 8 EiB: refused below */
    MPI_Comm_size(local, &nlocal);
    MPI_Comm_free(&local);
  }
  if (!bad && bs_host_fits(sum < 0 ? INT64_MAX : sum, b.peak, nlocal, msg, sizeof msg)) bad = 1;
  int first = bad ? rank : INT32_MAX, G;
  MPI_Comm_size(world, &G);
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, world);
  if (first == INT32_MAX) return 0;
  MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, world);
  msg[sizeof msg - 1] = '\0';
  if (G > 1) snprintf(err, errlen, "rank %d: %s", first, msg);
  else snprintf(err, errlen, "%s", msg);
  return -1;
}

int bs_runtime_run(const bs_config *cfg, MPI_Comm world, const bs_runtime_opts *opts, bs_run_report *out, char *err,
                   size_t errlen) {
  memset(out, 0, sizeof *out);
  for (int r = 0; r <= BS_ROLE_DV; r++) out->verify_err[r] = -1;
  int G, rank;
  MPI_Comm_size(world, &G);
  MPI_Comm_rank(world, &rank);
  if (cfg->par.gpus != G) {
    snprintf(err, errlen, "parallel.gpus: %d, but the run has %d MPI ranks (mpirun -np %d)", cfg->par.gpus, G,
             cfg->par.gpus);
    return BS_RUN_EINPUT;
  }
  if (cfg->model.dtype != BS_FP32 && cfg->model.dtype != BS_BF16) {
    snprintf(err, errlen, "model.dtype: %s is not supported by the %s runtime (use fp32 or bf16)",
             bs_dtype_name(cfg->model.dtype), opts->device ? "CUDA" : "CPU");
    return BS_RUN_EINPUT;
  }
  if (cfg->work.scope != BS_SCOPE_ATTENTION && opts->verify) {
    snprintf(err, errlen,
             "--verify: checks attention scope only, not workload.scope = %s (a layer or model plan frees its "
             "attention's outputs before its end, and its projections run on scratch); verify this point's "
             "attention with workload.scope = attention",
             bs_scope_name(cfg->work.scope));
    return BS_RUN_EINPUT;
  }
  if (bs_seq_pad(cfg) > 0) { /* the simulator pads (plans/pad.c); a real run has no pad tokens to mask */
    snprintf(err, errlen,
             "workload.seq_len: %lld tokens do not split evenly over the ranks (a multiple of %lld); real runs take "
             "a seq_len that does (the simulator pads it with %lld tokens)",
             (long long)cfg->work.seq_len, (long long)bs_seq_divisor(cfg), (long long)bs_seq_pad(cfg));
    return BS_RUN_EINPUT;
  }
  int rpn = opts->ranks_per_node > 0 ? opts->ranks_per_node : cfg->par.ranks_per_node;
  bs_plan *plan = NULL;
  if (bs_plan_create(cfg, rpn, &plan, err, errlen)) return BS_RUN_EINPUT;
  if (bs_plan_buf_ids(plan) > RT_MAX_BUFS) { /* a stage holding more layers x microbatches than a real run's table */
    snprintf(err, errlen,
             "model.layers: the plan numbers %d buffer ids at once (its pipeline stages hold that many layers x "
             "microbatches); burstsim run keeps %d (burstsim sim takes the plan)",
             (int)bs_plan_buf_ids(plan), RT_MAX_BUFS);
    bs_plan_free(plan);
    return BS_RUN_EINPUT;
  }
  if (!opts->device && host_fits(plan, world, rank, err, errlen)) {
    bs_plan_free(plan);
    return BS_RUN_EINPUT;
  }
  rt *t = calloc(1, sizeof *t);
  if (!t) {
    bs_plan_free(plan);
    snprintf(err, errlen, "out of memory");
    return BS_RUN_EFATAL;
  }
  t->plan = plan;
  t->cfg = bs_plan_config(plan);
  t->opts = opts;
  t->world = world;
  t->rank = rank;
  t->G = G;
  t->bf16 = cfg->model.dtype == BS_BF16;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  t->threads = opts->threads > 0 ? opts->threads : (int)(cores / G > 0 ? cores / G : 1);
  out->threads = t->threads;
  t->dev = opts->device;
  /* a GPU takes a whole (batch, head) per call unless told otherwise: its progress needs no polls */
  t->tile = opts->tile_rows > 0 ? opts->tile_rows : t->dev ? (int64_t)1 << 40 : BS_COMPUTE_TILE_ROWS;
  t->timeout = opts->timeout_s > 0 ? opts->timeout_s : 120.0;
  t->rpn =
    opts->ranks_per_node > 0 ? opts->ranks_per_node : (cfg->par.ranks_per_node > 0 ? cfg->par.ranks_per_node : G);
  t->sent_to = calloc((size_t)G, sizeof(int64_t));
  t->recv_from = calloc((size_t)G, sizeof(int64_t));
  /* OpenBLAS (the projections at layer scope) runs as many threads as the kernels, not one per core */
  openblas_set_num_threads(t->threads);
  int rc = bs_scratch_create(&t->scratch, plan, rank, err, errlen) ? BS_RUN_EFATAL : BS_RUN_OK;
  if (rc == BS_RUN_OK && t->dev) rc = rt_dev_fits(t, err, errlen);
  if (rc == BS_RUN_OK && t->dev) rc = rt_dev_scratch(t, err, errlen) ? BS_RUN_EFATAL : BS_RUN_OK;
  if (rc == BS_RUN_OK) rc = make_comm(t, err, errlen) ? BS_RUN_EFATAL : BS_RUN_OK;
  for (int w = 0; rc == BS_RUN_OK && w <= opts->warmup; w++) {
    rc = execute(t, w == opts->warmup, err, errlen);
    if (rc == BS_RUN_OK && w < opts->warmup) rt_free_all(t);
  }
  if (rc == BS_RUN_OK) rc = collect(t, out, err, errlen);
  if (rc == BS_RUN_OK && opts->verify) rc = rt_verify(t, out, err, errlen);
  rt_free_all(t);
  rt_dev_scratch_free(t);
  bs_scratch_free(&t->scratch);
  if (rc != BS_RUN_EFATAL) bs_comm_free(t->comm);
  for (int h = 0; h < RT_MAX_HANDLES; h++) free(t->stage[h]);
  free(t->marks);
  free(t->sent_to);
  free(t->recv_from);
  free(t->ev);
  free(t);
  bs_plan_free(plan);
  return rc;
}

void bs_run_report_free(bs_run_report *r) {
  bs_result_free(&r->res);
  free(r->peer_sent);
  free(r->coll_sent);
  free(r->peak_cls);
  free(r->events);
  memset(r, 0, sizeof *r);
}
