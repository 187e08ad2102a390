/*
 * runtime_impl.h — private to runtime/runtime*.c: the state of one rank's run
 * (rt) and the functions its files share. runtime.c holds the entry; the
 * others are described at their top.
 */
#ifndef BURSTSIM_RUNTIME_IMPL_H
#define BURSTSIM_RUNTIME_IMPL_H

#include "runtime.h"
#include "runtime/compute.h"
#include "runtime/scratch.h"
#include "runtime/devplan.h"
#include "plans/workload.h"

/* Buffer and handle ids of every scope (layer and model plans use more than one attention call). */
#define RT_MAX_BUFS BS_WL_MAX_BUFS
#define RT_MAX_HANDLES BS_WL_MAX_HANDLES
_Static_assert(RT_MAX_BUFS >= BS_PLAN_MAX_BUFS && RT_MAX_HANDLES >= BS_PLAN_MAX_HANDLES, "id bounds");

typedef struct {
  void *ptr;
  int64_t bytes;
  bs_mem_class cls;
  bs_role role;
  bs_shard shard;
} rbuf;

typedef struct {
  bs_op_kind kind;
  int peer, tag, step;
  int64_t bytes;
  int coll;
  float expect; /* a NOREF receive: the first float it must deliver (0 = no check; scratch.h) */
} hinfo;

typedef struct {
  const bs_plan *plan;
  const bs_config *cfg;
  const bs_runtime_opts *opts;
  bs_comm *comm;
  MPI_Comm world;
  int rank, G, threads, bf16;
  int64_t tile;
  double timeout;
  rbuf buf[RT_MAX_BUFS];
  int req[RT_MAX_HANDLES];
  hinfo hi[RT_MAX_HANDLES];
  bs_scratch scratch; /* operands of the modelled ops (layer and model scope) */
  /* measurements */
  double t_start, fwd, bwd, compute, exposed, phase_t0[2], wall;
  /* Time in ALLOC ops (allocation, zero fill, generating the inputs), left out of
   * the phase times: a GPU framework allocates from a cache and gets its inputs
   * from the previous layer, and the simulator models neither. */
  double setup, phase_setup0[2];
  /* Minor page faults of the measured execution outside ALLOC ops: memory a kernel or a
   * transfer touched for the first time (alloc_faults: those inside ALLOC ops). */
  int64_t faults0, alloc_faults, faults;
  int64_t live, peak, live_cls[BS_MEM_CLASS_COUNT], peak_cls[BS_MEM_CLASS_COUNT];
  int64_t *sent_to, *recv_from, coll_sent, coll_recv;
  int64_t coll_intra, coll_inter; /* coll_sent by where the ring sends it: the next rank of the group */
  int rpn;                        /* ranks per node, for that split */
  bs_trace_event *ev;
  int64_t nev;
  size_t cap_ev;
  int faulted;
  /* GPU runs only (dev != NULL; runtime/device.h) */
  const bs_rt_device *dev;
  bs_dev_sched sched;
  struct {
    float *a, *b, *c, *x;
    char *send, **recv;
  } dscr;                          /* device copies of the scratch (same sizes and contents) */
  void *stage[RT_MAX_HANDLES];     /* MPI on device buffers: host staging of a transfer in flight */
  char *stage_dst[RT_MAX_HANDLES]; /* where its received bytes go on the device (NULL: nowhere) */
  int64_t stage_bytes[RT_MAX_HANDLES], stage_off[RT_MAX_HANDLES];
  struct dmark {
    int ev;
    int kind;           /* bs_dev_mark_kind */
    int fwd_bwd, begin; /* PHASE marks */
    double setup;       /* t->setup when recorded */
  } * marks;
  int nmarks, cap_marks;
} rt;

/* runtime_verify.c */
void rt_fill_input(const bs_plan *p, uint64_t seed, bs_role role, const bs_shard *s, int64_t nb, void *buf, int bf16);
int rt_verify(rt *t, bs_run_report *out, char *err, size_t errlen);

/* runtime_ops.c */
void rt_record(rt *t, const bs_op *op, int detail, int peer, int64_t bytes, double t0, double t1);
char *rt_at(rt *t, bs_ref r);
int rt_run_compute(rt *t, const bs_op *op, char *err, size_t errlen);
void rt_free_all(rt *t);
int rt_op_alloc(rt *t, const bs_op *op, double t0, char *err, size_t errlen);
void rt_op_free(rt *t, const bs_op *op);
int rt_run_op(rt *t, const bs_op *op, char *err, size_t errlen);

/* runtime_comm.c */
int rt_stage_send(rt *t, const bs_op *op, char *err, size_t errlen);
int rt_stage_upload(rt *t, int h, char *err, size_t errlen);
int rt_op_p2p(rt *t, const bs_op *op, double t0, char *err, size_t errlen);
int rt_op_coll(rt *t, const bs_op *op, double t0, char *err, size_t errlen);
int rt_wait_handle(rt *t, const bs_op *op, int h, char *err, size_t errlen);
int rt_op_wait(rt *t, const bs_op *op, double t0, char *err, size_t errlen);

/* runtime_dev.c */
int rt_dev_mark(rt *t, int kind, const bs_op *op, char *err, size_t errlen);
int rt_run_op_dev(rt *t, const bs_op *op, char *err, size_t errlen);
int rt_dev_times(rt *t, char *err, size_t errlen);
int rt_dev_scratch(rt *t, char *err, size_t errlen);
void rt_dev_scratch_free(rt *t);
int rt_dev_fits(rt *t, char *err, size_t errlen);

/* runtime.c: the clocks */
int64_t rt_minor_faults(void);
void rt_restart_clocks(rt *t);

#endif
