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
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include "runtime.h"
#include "runtime/compute.h"
#include "runtime/scratch.h"
#include "runtime/devplan.h"
#include "plans/workload.h"
#include "watchdog.h"
#include "comm/comm_mpi.h"
#include "base/clock.h"
#include "base/fill.h"
#include "base/vec.h"

/* ---------------- inputs ---------------- */

/* Value in [-1, 1) of element idx of input tensor `role`. */
static float input_value(uint64_t seed, int role, uint64_t idx) {
  uint64_t h = bs_mix64(seed ^ bs_mix64((uint64_t)role * 0x1000193ull + 7) ^ bs_mix64(idx));
  return (float)bs_unit_signed(h);
}

typedef struct {
  int64_t B, heads, tokens, width; /* global shape of the tensor of a role */
} gshape;

static gshape role_shape(const bs_plan *p, bs_role role) {
  const bs_config *c = bs_plan_config(p);
  attn_params ref = bs_plan_reference_params(p);
  gshape g = {c->work.batch, c->model.heads, ref.Nq, c->model.head_dim};
  if (role == BS_ROLE_K || role == BS_ROLE_V || role == BS_ROLE_DK || role == BS_ROLE_DV) {
    g.heads = c->model.kv_heads;
    g.tokens = ref.Nk;
  }
  if (role == BS_ROLE_LSE) g.width = 1;
  return g;
}

static int64_t global_index(gshape g, int64_t b, int64_t h, int64_t t, int64_t x) {
  return ((b * g.heads + h) * g.tokens + t) * g.width + x;
}

/* Fills a role buffer (q, k, v, dout) of nb sequences from its shard. */
static void fill_input(const bs_plan *p, uint64_t seed, bs_role role, const bs_shard *s, int64_t nb, void *buf,
                       int bf16) {
  gshape g = role_shape(p, role);
  int64_t n = bs_shard_tokens(s);
  for (int64_t b = 0; b < nb; b++)
    for (int64_t h = 0; h < s->heads; h++)
      for (int64_t i = 0; i < n; i++) {
        int64_t t = bs_shard_token(s, i), at = bs_shard_index(s, nb, b, h, i, g.width);
        for (int64_t x = 0; x < g.width; x++) {
          float v = input_value(seed, role, (uint64_t)global_index(g, s->b0 + b, s->head0 + h, t, x));
          if (bf16) ((uint16_t *)buf)[at + x] = attn_f32_to_bf16(v);
          else ((float *)buf)[at + x] = v;
        }
      }
}

/* ---------------- per-run state ---------------- */

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

static void record(rt *t, const bs_op *op, int detail, int peer, int64_t bytes, double t0, double t1) {
  if (!t->opts->trace) return;
  bs_trace_event *ev = bs_vec_grow(t->ev, sizeof *ev, (size_t)t->nev + 1, &t->cap_ev, 1024);
  if (!ev) return;
  t->ev = ev;
  bs_trace_event *e = &t->ev[t->nev++];
  e->rank = t->rank;
  e->step = op->step;
  e->kind = (int16_t)op->kind;
  e->detail = (int16_t)detail;
  e->peer = peer;
  e->bytes = bytes;
  e->t0 = t0 - t->t_start;
  e->t1 = t1 - t->t_start;
}

static char *at(rt *t, bs_ref r) {
  return r.buf >= 0 && r.buf < RT_MAX_BUFS && t->buf[r.buf].ptr ? (char *)t->buf[r.buf].ptr + r.off : NULL;
}

/* ---------------- kernels ---------------- */

static void progress(void *comm) { bs_comm_progress(comm); }

/* One COMPUTE op through the shared executor (compute.h) on the CPU backend. */
static int run_compute(rt *t, const bs_op *op, char *err, size_t errlen) {
  const bs_compute *c = &op->u.compute;
  bs_compute_bufs b;
  memset(&b, 0, sizeof b);
  for (int i = 0; i < BS_OP_IN; i++) b.in[i] = at(t, c->in[i]);
  for (int i = 0; i < BS_OP_OUT; i++) b.out[i] = at(t, c->out[i]);
  int bwd = c->kernel == BS_K_ATTN_BWD || c->kernel == BS_K_ATTN_BWD_UNFUSED;
  bs_ref w = c->in[bwd ? 7 : 3];
  b.ws_bytes = w.buf >= 0 && w.buf < RT_MAX_BUFS ? t->buf[w.buf].bytes - w.off : 0;
  if (c->kernel == BS_K_GEMM && c->gemm == BS_GEMM_GENERIC) { /* a modelled projection: scratch operands */
    b.in[0] = t->dev ? t->dscr.a : t->scratch.a;
    b.in[1] = t->dev ? t->dscr.b : t->scratch.b;
    b.out[0] = t->dev ? t->dscr.c : t->scratch.c;
  } else if (c->kernel == BS_K_ELEMWISE && c->ew == BS_EW_GENERIC) {
    b.out[0] = t->dev ? t->dscr.x : t->scratch.x;
  }
  const bs_kernel_backend *be = t->dev ? t->dev->be : bs_kernel_backend_cpu();
  bs_compute_ctx x = {be, t->threads, t->tile, t->bf16, op->step, progress, t->comm};
  return bs_compute_run(&x, c, &b, err, errlen) ? BS_RUN_EFATAL : BS_RUN_OK;
}

/* ---------------- one execution of the plan ---------------- */

/* A plan buffer's memory back: host or device. */
static void buf_release(rt *t, void *ptr) {
  if (t->dev) t->dev->free(t->dev->self, ptr);
  else free(ptr);
}

static void free_all(rt *t) {
  for (int b = 0; b < RT_MAX_BUFS; b++) {
    buf_release(t, t->buf[b].ptr);
    t->buf[b].ptr = NULL;
  }
}

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

static const char *peer_what(const hinfo *h, char *tmp, size_t n) {
  if (h->kind == BS_OP_COLL)
    snprintf(tmp, n, "%s (%lld bytes)", bs_coll_name((bs_coll_kind)h->coll), (long long)h->bytes);
  else
    snprintf(tmp, n, "%s rank %d (tag %d, %lld bytes, posted at step %d)",
             h->kind == BS_OP_SEND ? "SEND to" : "RECV from", h->peer, h->tag, (long long)h->bytes, h->step);
  return tmp;
}

/* Minor page faults of this process so far (all its threads). */
static int64_t minor_faults(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) ? 0 : (int64_t)ru.ru_minflt;
}

/* Time zero of a measurement: phases already open restart now; set-up so far is forgotten. */
static void restart_clocks(rt *t) {
  t->faults0 = minor_faults();
  t->alloc_faults = 0;
  double now = bs_now_s();
  t->t_start = now;
  t->phase_t0[0] = t->phase_t0[1] = now;
  t->setup = t->phase_setup0[0] = t->phase_setup0[1] = 0;
}

static int dev_mark(rt *t, int kind, const bs_op *op, char *err, size_t errlen);

/* The same on a GPU: mark 0, the origin of the event times, also opens both phases. */
static int restart_dev_clocks(rt *t, char *err, size_t errlen) {
  restart_clocks(t);
  t->dev->marks_reset(t->dev->self);
  t->nmarks = 0;
  int rc = dev_mark(t, BS_MARK_PHASE, NULL, err, errlen);
  if (rc == BS_RUN_OK) {
    t->marks[0].begin = 1;
    if (dev_mark(t, BS_MARK_PHASE, NULL, err, errlen)) return BS_RUN_EFATAL;
    t->marks[1].begin = 1;
    t->marks[1].fwd_bwd = 1;
  }
  return rc;
}

/*
 * A zeroed host buffer with every page already mapped. calloc hands out fresh
 * pages lazily: each is mapped (and zeroed by the OS) at its first touch, which
 * would then land inside the first kernel that uses the buffer and be timed as
 * compute: the backward adds into dq, dk and dv (a read, mapping the shared
 * zero page, then a write, copying it: two faults a page). Measured on a 2-core
 * virtual machine, 4 heads x 4K tokens x d = 64: 7350 faults at 3-4 us in one
 * step, its backward 22 % slower than the calibration's same calls.
 * Allocation is set-up time (rt.setup): touched here, the pages are mapped
 * before the ops run, as a GPU framework's caching allocator hands out memory.
 */
static void *host_zeroed(size_t bytes) {
  volatile unsigned char *p = calloc(1, bytes > 0 ? bytes : 1);
  long page = sysconf(_SC_PAGESIZE);
  size_t step = page > 0 ? (size_t)page : 4096;
  if (p)
    for (size_t off = 0; off < bytes; off += step) p[off] = 0;
  return (void *)p;
}

static int op_alloc(rt *t, const bs_op *op, double t0, char *err, size_t errlen) {
  rbuf *rb = &t->buf[op->u.alloc.buf];
  int64_t f0 = minor_faults();
  buf_release(t, rb->ptr);
  rb->ptr = t->dev ? t->dev->alloc(t->dev->self, (size_t)op->u.alloc.bytes) : host_zeroed((size_t)op->u.alloc.bytes);
  if (!rb->ptr) {
    snprintf(err, errlen, "step %d: cannot allocate %lld bytes (%s)", op->step, (long long)op->u.alloc.bytes,
             bs_mem_class_name(op->u.alloc.cls));
    return BS_RUN_EFATAL;
  }
  rb->bytes = op->u.alloc.bytes;
  rb->cls = op->u.alloc.cls;
  rb->role = op->u.alloc.role;
  rb->shard = op->u.alloc.shard;
  if (rb->role == BS_ROLE_Q || rb->role == BS_ROLE_K || rb->role == BS_ROLE_V || rb->role == BS_ROLE_DOUT) {
    if (t->dev) { /* filled on the host, then copied up */
      void *h = calloc(1, (size_t)op->u.alloc.bytes);
      int bad = !h;
      if (h) fill_input(t->plan, t->cfg->seed, rb->role, &rb->shard, bs_plan_local_batch(t->plan), h, t->bf16);
      if (h && t->dev->upload(t->dev->self, rb->ptr, h, (size_t)op->u.alloc.bytes)) bad = 1;
      free(h);
      if (bad) {
        snprintf(err, errlen, "step %d: cannot fill the %s input on the device", op->step, bs_role_name(rb->role));
        return BS_RUN_EFATAL;
      }
    } else fill_input(t->plan, t->cfg->seed, rb->role, &rb->shard, bs_plan_local_batch(t->plan), rb->ptr, t->bf16);
  }
  t->alloc_faults += minor_faults() - f0;
  t->setup += bs_now_s() - t0;
  t->live += rb->bytes;
  t->live_cls[rb->cls] += rb->bytes;
  if (t->live > t->peak) {
    t->peak = t->live;
    memcpy(t->peak_cls, t->live_cls, sizeof t->peak_cls);
  }
  return BS_RUN_OK;
}

static void op_free(rt *t, const bs_op *op) {
  rbuf *rb = &t->buf[op->u.free.buf];
  t->live -= rb->bytes;
  t->live_cls[rb->cls] -= rb->bytes;
  buf_release(t, rb->ptr);
  rb->ptr = NULL;
}

static int op_compute(rt *t, const bs_op *op, double t0, char *err, size_t errlen) {
  int rc = run_compute(t, op, err, errlen);
  double t1 = bs_now_s();
  t->compute += t1 - t0;
  record(t, op, op->u.compute.kernel, -1, 0, t0, t1);
  return rc;
}

/* A receive slot of the scratch for handle h (a NOREF receive or collective). */
/* ---------------- host staging (GPU runs over MPI) ---------------- */

/* Bytes a collective writes into recv, for `bytes` per rank (comm.h's convention). */
static int64_t coll_recv_bytes(bs_coll_kind k, int64_t bytes, int size) {
  switch (k) {
  case BS_COLL_ALLGATHER: return bytes * size;
  case BS_COLL_REDUCE_SCATTER: return bytes / (size > 0 ? size : 1);
  default: return bytes;
  }
}

/* Handle h's staging: `off` bytes already downloaded (a send), then `bytes` to receive for dst. */
static int stage_recv(rt *t, int h, char *dst, int64_t bytes, int64_t off, char *err, size_t errlen) {
  void *s = realloc(t->stage[h], (size_t)(off + bytes > 0 ? off + bytes : 1));
  if (!s) {
    snprintf(err, errlen, "rank %d: no host memory to stage %lld bytes", t->rank, (long long)(off + bytes));
    return -1;
  }
  t->stage[h] = s;
  t->stage_dst[h] = dst;
  t->stage_bytes[h] = bytes;
  t->stage_off[h] = off;
  return 0;
}

/* DOWNLOAD: the device data a SEND or a COLL sends, to host staging. */
static int stage_send(rt *t, const bs_op *op, char *err, size_t errlen) {
  int h = op->handle;
  const char *src = op->kind == BS_OP_COLL ? at(t, op->u.coll.send) : at(t, op->u.p2p.buf);
  int64_t bytes = op->kind == BS_OP_COLL ? op->u.coll.bytes : op->u.p2p.bytes;
  if (!src || bs_scratch_uses(op)) return 0; /* scratch transfers stay on the host scratch */
  free(t->stage[h]);
  t->stage_dst[h] = NULL;
  t->stage_off[h] = t->stage_bytes[h] = 0;
  if (!(t->stage[h] = malloc((size_t)(bytes > 0 ? bytes : 1))) ||
      t->dev->download(t->dev->self, t->stage[h], src, (size_t)bytes)) {
    snprintf(err, errlen, "rank %d, step %d: cannot stage %lld bytes from the device", t->rank, op->step,
             (long long)bytes);
    return -1;
  }
  return 0;
}

/* UPLOAD: handle h's received bytes to the device; the staging is released. */
static int stage_upload(rt *t, int h, char *err, size_t errlen) {
  int rc = 0;
  if (t->stage_dst[h] && t->stage_bytes[h] > 0 &&
      t->dev->upload(t->dev->self, t->stage_dst[h], (char *)t->stage[h] + t->stage_off[h], (size_t)t->stage_bytes[h])) {
    snprintf(err, errlen, "rank %d: cannot copy %lld received bytes to the device", t->rank,
             (long long)t->stage_bytes[h]);
    rc = -1;
  }
  free(t->stage[h]);
  t->stage[h] = NULL;
  t->stage_dst[h] = NULL;
  t->stage_bytes[h] = t->stage_off[h] = 0;
  return rc;
}

/* The device copy of a host scratch pointer (a GPU run whose transfers move device memory), else itself. */
static char *scratch_dev(rt *t, char *host) {
  if (!t->dev || t->dev->xport != BS_XPORT_NCCL || !host) return host;
  if (host == t->scratch.send) return t->dscr.send;
  for (int i = 0; i < t->scratch.nrecv; i++)
    if (host == t->scratch.recv[i]) return t->dscr.recv[i];
  return host;
}

static char *scratch_recv(rt *t, const bs_op *op, char *err, size_t errlen) {
  char *r = bs_scratch_take(&t->scratch, op->handle);
  if (r && t->scratch.recv_bytes >= 4) memset(r, 0, 4); /* what the op delivers must overwrite it (op_wait) */
  static const float zero = 0;
  /* on the device too, before the transfer is posted (a copy that returns when done, not a kernel
   * on the compute stream that the comm stream would not wait for) */
  if (r && t->scratch.recv_bytes >= 4 && scratch_dev(t, r) != r &&
      t->dev->upload(t->dev->self, scratch_dev(t, r), &zero, sizeof zero))
    r = NULL;
  if (!r)
    snprintf(err, errlen, "rank %d, step %d: no scratch slot left for handle %d (the sizing pass saw fewer)", t->rank,
             op->step, op->handle);
  return r;
}

static int op_p2p(rt *t, const bs_op *op, double t0, char *err, size_t errlen) {
  int h = op->handle, peer = op->u.p2p.peer;
  char *data = at(t, op->u.p2p.buf);
  if (op->u.p2p.buf.buf < 0) /* bytes without a buffer (a modelled transfer): scratch */
    data = op->kind == BS_OP_SEND ? t->scratch.send : scratch_recv(t, op, err, errlen);
  if (op->u.p2p.buf.buf < 0 && !data && op->u.p2p.bytes > 0) return BS_RUN_EFATAL;
  if (op->u.p2p.buf.buf < 0) data = scratch_dev(t, data);
  else if (t->dev && t->dev->xport == BS_XPORT_MPI) { /* host staging (devplan.h) */
    if (op->kind == BS_OP_RECV && stage_recv(t, h, data, op->u.p2p.bytes, 0, err, errlen)) return BS_RUN_EFATAL;
    data = t->stage[h];
  }
  int crc = op->kind == BS_OP_SEND
              ? bs_comm_isend(t->comm, data, op->u.p2p.bytes, peer, op->u.p2p.tag, &t->req[h], err, errlen)
              : bs_comm_irecv(t->comm, data, op->u.p2p.bytes, peer, op->u.p2p.tag, &t->req[h], err, errlen);
  if (crc) return BS_RUN_EFATAL;
  t->hi[h] = (hinfo){op->kind, peer, op->u.p2p.tag, op->step, op->u.p2p.bytes, 0, 0.0f};
  if (op->kind == BS_OP_RECV && op->u.p2p.buf.buf < 0) t->hi[h].expect = bs_scratch_expected(op);
  if (op->kind == BS_OP_SEND) t->sent_to[peer] += op->u.p2p.bytes;
  else t->recv_from[peer] += op->u.p2p.bytes;
  record(t, op, 0, peer, op->u.p2p.bytes, t0, bs_now_s());
  return BS_RUN_OK;
}

static int op_coll(rt *t, const bs_op *op, double t0, char *err, size_t errlen) {
  int h = op->handle;
  bs_comm_group g = {op->u.coll.group.first, op->u.coll.group.stride, op->u.coll.group.size};
  bs_comm_type ty = op->u.coll.elem == BS_ELEM_F32 ? BS_COMM_F32 : BS_COMM_BYTES;
  const char *send = at(t, op->u.coll.send);
  char *recv = at(t, op->u.coll.recv);
  int64_t bytes = op->u.coll.bytes;
  int on_scratch = bs_scratch_uses(op);
  if (on_scratch) {
    /* bytes without buffers (a layer's tensor-, data-parallel or ZeRO collective): the real
     * collective on scratch, both sides (the bytes may be rounded up, past a plan buffer's end);
     * a 16-bit reduction runs as an fp32 sum of the same bytes */
    bs_scratch_coll cs = bs_scratch_coll_shape(op);
    ty = cs.type;
    bytes = cs.bytes;
    send = scratch_dev(t, t->scratch.send);
    if (!(recv = scratch_recv(t, op, err, errlen))) return BS_RUN_EFATAL;
    recv = scratch_dev(t, recv);
  } else if (t->dev && t->dev->xport == BS_XPORT_MPI) { /* host staging: send data downloaded before */
    int64_t rb = coll_recv_bytes(op->u.coll.kind, bytes, g.size);
    if (stage_recv(t, h, recv, rb, bytes, err, errlen)) return BS_RUN_EFATAL;
    send = t->stage[h];
    recv = (char *)t->stage[h] + bytes;
  }
  if ((op->u.coll.kind == BS_COLL_ALLREDUCE || op->u.coll.kind == BS_COLL_REDUCE_SCATTER) && ty != BS_COMM_F32) {
    snprintf(err, errlen, "step %d: %s of 16-bit data is not supported by the MPI backend", op->step,
             bs_coll_name(op->u.coll.kind));
    return BS_RUN_EFATAL;
  }
  int crc = bs_comm_icoll(t->comm, (bs_comm_coll)op->u.coll.kind, (bs_comm_red)op->u.coll.red, ty, g, send, recv, bytes,
                          &t->req[h], err, errlen);
  if (crc) return BS_RUN_EFATAL;
  t->hi[h] = (hinfo){BS_OP_COLL, -1, 0, op->step, op->u.coll.bytes, op->u.coll.kind, 0.0f};
  if (on_scratch) t->hi[h].expect = bs_scratch_expected(op);
  int64_t s = bs_coll_bytes_sent(op->u.coll.kind, op->u.coll.bytes, g.size);
  t->coll_sent += s;
  t->coll_recv += s;
  /* the ring convention of the counters: a rank sends all of it to the next rank of its group */
  int next = g.first + (((t->rank - g.first) / g.stride + 1) % g.size) * g.stride;
  if (next / t->rpn == t->rank / t->rpn) t->coll_intra += s;
  else t->coll_inter += s;
  record(t, op, op->u.coll.kind, -1, op->u.coll.bytes, t0, bs_now_s());
  return BS_RUN_OK;
}

/* Joins handle h: waits with the deadline, checks what a scratch transfer delivered. */
static int wait_handle(rt *t, const bs_op *op, int h, char *err, size_t errlen) {
  int rc = BS_RUN_OK;
  {
    int w = bs_comm_wait(t->comm, t->req[h], t->timeout);
    char *slot = bs_scratch_slot(&t->scratch, h);
    float got = 0;
    if (w == BS_COMM_OK && slot && t->hi[h].expect != 0) {
      if (scratch_dev(t, slot) != slot) {
        if (t->dev->download(t->dev->self, &got, scratch_dev(t, slot), sizeof got)) w = BS_COMM_ERR;
      } else memcpy(&got, slot, sizeof got);
    }
    bs_scratch_give(&t->scratch, h);
    if (w == BS_COMM_TIMEOUT) {
      char tmp[160];
      snprintf(err, errlen, "rank %d, step %d: no answer within %.1f s waiting for %s; a peer died or stalled", t->rank,
               op->step, t->timeout, peer_what(&t->hi[h], tmp, sizeof tmp));
      rc = BS_RUN_EFATAL;
    } else if (w != BS_COMM_OK) {
      snprintf(err, errlen, "rank %d, step %d: MPI wait failed", t->rank, op->step);
      rc = BS_RUN_EFATAL;
    } else if (got != t->hi[h].expect) {
      char tmp[160];
      snprintf(err, errlen, "rank %d, step %d: %s delivered %g where its group gives %g", t->rank, op->step,
               peer_what(&t->hi[h], tmp, sizeof tmp), (double)got, (double)t->hi[h].expect);
      rc = BS_RUN_EFATAL;
    }
  }
  return rc;
}

static int op_wait(rt *t, const bs_op *op, double t0, char *err, size_t errlen) {
  int rc = BS_RUN_OK;
  for (int j = 0; j < op->u.wait.n && rc == BS_RUN_OK; j++) rc = wait_handle(t, op, op->u.wait.handles[j], err, errlen);
  double t1 = bs_now_s();
  t->exposed += t1 - t0;
  record(t, op, 0, -1, 0, t0, t1);
  return rc;
}

static void op_phase(rt *t, const bs_op *op, double t0) {
  int ph = op->u.phase.fwd_bwd ? 1 : 0;
  if (op->u.phase.begin) {
    t->phase_t0[ph] = t0;
    t->phase_setup0[ph] = t->setup;
  } else {
    double dt = t0 - t->phase_t0[ph] - (t->setup - t->phase_setup0[ph]);
    if (ph) t->bwd += dt;
    else t->fwd += dt;
  }
}

static int run_op(rt *t, const bs_op *op, char *err, size_t errlen) {
  double t0 = bs_now_s();
  switch (op->kind) {
  case BS_OP_ALLOC: return op_alloc(t, op, t0, err, errlen);
  case BS_OP_FREE: op_free(t, op); return BS_RUN_OK;
  case BS_OP_COMPUTE: return op_compute(t, op, t0, err, errlen);
  case BS_OP_SEND:
  case BS_OP_RECV: return op_p2p(t, op, t0, err, errlen);
  case BS_OP_COLL: return op_coll(t, op, t0, err, errlen);
  case BS_OP_WAIT: return op_wait(t, op, t0, err, errlen);
  case BS_OP_PHASE: op_phase(t, op, t0); return BS_RUN_OK;
  default: snprintf(err, errlen, "step %d: unknown op kind %d", op->step, (int)op->kind); return BS_RUN_EFATAL;
  }
}

/* ---------------- one op on a GPU (devplan.h's schedule) ---------------- */

static int dev_mark(rt *t, int kind, const bs_op *op, char *err, size_t errlen) {
  if (t->nmarks == t->cap_marks) {
    int nc = t->cap_marks ? 2 * t->cap_marks : 256;
    struct dmark *m = realloc(t->marks, (size_t)nc * sizeof *m);
    if (!m) {
      snprintf(err, errlen, "out of memory");
      return BS_RUN_EFATAL;
    }
    t->marks = m;
    t->cap_marks = nc;
  }
  int ev = t->dev->mark(t->dev->self);
  if (ev < 0) {
    snprintf(err, errlen, "rank %d, step %d: cannot record an event on the compute stream", t->rank,
             op ? op->step : -1);
    return BS_RUN_EFATAL;
  }
  int fb = op && op->kind == BS_OP_PHASE ? op->u.phase.fwd_bwd : 0,
      begin = op && op->kind == BS_OP_PHASE ? op->u.phase.begin : 0;
  t->marks[t->nmarks++] = (struct dmark){ev, kind, fb, begin, t->setup};
  return BS_RUN_OK;
}

static int dev_fail(rt *t, const bs_op *op, const char *what, char *err, size_t errlen) {
  if (!err[0]) snprintf(err, errlen, "rank %d, step %d: %s failed", t->rank, op->step, what);
  return BS_RUN_EFATAL;
}

static int run_op_dev(rt *t, const bs_op *op, char *err, size_t errlen) {
  bs_dev_action acts[BS_DEV_MAX_ACTIONS];
  int n = bs_dev_schedule(&t->sched, op, acts), rc = BS_RUN_OK;
  const bs_rt_device *d = t->dev;
  err[0] = 0;
  for (int i = 0; i < n && rc == BS_RUN_OK; i++) {
    const bs_dev_action *a = &acts[i];
    double t0 = bs_now_s();
    switch (a->kind) {
    case BS_DEV_HOST:
      if (op->kind == BS_OP_ALLOC) {
        /* the device idles while the host allocates and fills: that time is set-up (op_alloc) */
        if (d->sync(d->self)) return dev_fail(t, op, "synchronising the compute stream", err, errlen);
        rc = op_alloc(t, op, bs_now_s(), err, errlen);
      } else op_free(t, op);
      break;
    case BS_DEV_MARK: rc = dev_mark(t, a->detail, op, err, errlen); break;
    case BS_DEV_LAUNCH:
      rc = run_compute(t, op, err, errlen);
      record(t, op, op->u.compute.kernel, -1, 0, t0, bs_now_s());
      break;
    case BS_DEV_COMM_AFTER:
      if (d->comm_after(d->self, t->comm, err, errlen))
        rc = dev_fail(t, op, "ordering the transfer after the compute", err, errlen);
      break;
    case BS_DEV_SYNC_COMPUTE:
      if (d->sync(d->self)) rc = dev_fail(t, op, "synchronising the compute stream", err, errlen);
      break;
    case BS_DEV_DOWNLOAD: rc = stage_send(t, op, err, errlen) ? BS_RUN_EFATAL : BS_RUN_OK; break;
    case BS_DEV_POST:
      rc = op->kind == BS_OP_COLL ? op_coll(t, op, t0, err, errlen) : op_p2p(t, op, t0, err, errlen);
      break;
    case BS_DEV_STREAM_WAIT:
      if (d->stream_wait(d->self, t->comm, t->req[a->handle], err, errlen))
        rc = dev_fail(t, op, "making the compute stream wait for a transfer", err, errlen);
      else rc = wait_handle(t, op, a->handle, err, errlen); /* releases the request, checks errors in time */
      break;
    case BS_DEV_HOST_WAIT: rc = wait_handle(t, op, a->handle, err, errlen); break;
    case BS_DEV_UPLOAD: rc = stage_upload(t, a->handle, err, errlen) ? BS_RUN_EFATAL : BS_RUN_OK; break;
    }
  }
  if (op->kind == BS_OP_WAIT) record(t, op, 0, -1, 0, bs_now_s(), bs_now_s());
  return rc;
}

/* After an execution on a GPU: the compute stream's marks give compute, exposed, phase and wall times. */
static int dev_times(rt *t, char *err, size_t errlen) {
  const bs_rt_device *d = t->dev;
  if (dev_mark(t, BS_MARK_PHASE, NULL, err, errlen) || d->sync(d->self)) {
    if (!err[0]) snprintf(err, errlen, "rank %d: the compute stream failed", t->rank);
    return BS_RUN_EFATAL;
  }
  bs_dev_times tm;
  bs_dev_times_init(&tm);
  double begin[2] = {0, 0}, setup0[2] = {0, 0}, ms = 0;
  t->fwd = t->bwd = t->compute = t->exposed = 0;
  for (int i = 0; i < t->nmarks; i++) {
    const struct dmark *m = &t->marks[i];
    if (d->mark_ms(d->self, m->ev, &ms) || bs_dev_times_add(&tm, (bs_dev_mark_kind)m->kind, ms)) {
      snprintf(err, errlen, "rank %d: the compute stream's events do not pair (mark %d)", t->rank, i);
      return BS_RUN_EFATAL;
    }
    if (m->kind != BS_MARK_PHASE || i == t->nmarks - 1) continue;
    if (m->begin) {
      begin[m->fwd_bwd] = ms;
      setup0[m->fwd_bwd] = m->setup;
    } else {
      double dt = (ms - begin[m->fwd_bwd]) / 1e3 - (m->setup - setup0[m->fwd_bwd]);
      if (m->fwd_bwd) t->bwd += dt;
      else t->fwd += dt;
    }
  }
  t->compute = tm.compute_s;
  t->exposed = tm.exposed_s;
  t->wall = ms / 1e3; /* the last mark, after the program; mark 0 is the start of the clocks */
  return BS_RUN_OK;
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
      } else restart_clocks(t);
    }
    maybe_fault(t, &op, measured);
    rc = t->dev ? run_op_dev(t, &op, err, errlen) : run_op(t, &op, err, errlen);
  }
  if (rc == BS_RUN_OK && bs_plan_iter_error(it)) {
    snprintf(err, errlen, "%s", bs_plan_iter_errmsg(it));
    rc = BS_RUN_EFATAL;
  }
  if (!started && rc == BS_RUN_OK) MPI_Barrier(t->world);
  t->wall = bs_now_s() - t->t_start;
  t->faults = started ? minor_faults() - t->faults0 - t->alloc_faults : 0;
  if (t->dev && started && rc == BS_RUN_OK) rc = dev_times(t, err, errlen);
  bs_plan_iter_free(it);
  return rc;
}

/* ---------------- verification ---------------- */

typedef struct {
  int32_t role;
  bs_shard shard;
  int64_t bytes;
} out_meta;

static int is_output(bs_role r) {
  return r == BS_ROLE_O || r == BS_ROLE_LSE || r == BS_ROLE_DQ || r == BS_ROLE_DK || r == BS_ROLE_DV;
}

/* Rank 0: the single-rank reference on whole tensors. refs[role] in fp32. */
static int reference(const bs_plan *p, uint64_t seed, int bf16, int threads, float *refs[BS_ROLE_DV + 1], char *err,
                     size_t errlen) {
  attn_params a = bs_plan_reference_params(p);
  a.threads = threads;
  int train = bs_plan_has_bwd(p);
  void *in[BS_ROLE_DV + 1] = {0};
  const bs_role inputs[] = {BS_ROLE_Q, BS_ROLE_K, BS_ROLE_V, BS_ROLE_DOUT};
  for (int j = 0; j < 4; j++) {
    gshape g = role_shape(p, inputs[j]);
    bs_shard s = {BS_CONTIGUOUS, 0, 1, g.tokens, 0, (int32_t)g.heads, 0, 0};
    in[inputs[j]] = malloc((size_t)(g.B * g.heads * g.tokens * g.width) * (bf16 ? 2 : 4));
    if (!in[inputs[j]]) {
      snprintf(err, errlen, "reference: out of memory");
      return -1;
    }
    fill_input(p, seed, inputs[j], &s, g.B, in[inputs[j]], bf16);
  }
  const bs_role outs[] = {BS_ROLE_O, BS_ROLE_LSE, BS_ROLE_DQ, BS_ROLE_DK, BS_ROLE_DV};
  for (int j = 0; j < 5; j++) {
    gshape g = role_shape(p, outs[j]);
    refs[outs[j]] = calloc((size_t)(g.B * g.heads * g.tokens * g.width), sizeof(float));
  }
  int rc = attn_fwd(&a, in[BS_ROLE_Q], in[BS_ROLE_K], in[BS_ROLE_V], refs[BS_ROLE_O], refs[BS_ROLE_LSE], 0);
  if (!rc && train) {
    gshape g = role_shape(p, BS_ROLE_LSE);
    float *delta = malloc((size_t)(g.B * g.heads * g.tokens) * sizeof(float));
    rc = attn_delta(&a, refs[BS_ROLE_O], in[BS_ROLE_DOUT], delta);
    if (!rc)
      rc = attn_bwd(&a, in[BS_ROLE_Q], in[BS_ROLE_K], in[BS_ROLE_V], NULL, in[BS_ROLE_DOUT], refs[BS_ROLE_LSE], delta,
                    refs[BS_ROLE_DQ], refs[BS_ROLE_DK], refs[BS_ROLE_DV]);
    free(delta);
  }
  for (int j = 0; j < 4; j++) free(in[inputs[j]]);
  if (rc) {
    snprintf(err, errlen, "reference: %s", attn_strerror(rc));
    return -1;
  }
  return 0;
}

/* Compares one received output buffer; updates the max error and the coverage map. */
static void compare(const bs_plan *p, const out_meta *m, const float *got, const float *ref, unsigned char *cover,
                    double *maxerr) {
  gshape g = role_shape(p, (bs_role)m->role);
  int64_t n = bs_shard_tokens(&m->shard), nb = bs_plan_local_batch(p);
  for (int64_t b = 0; b < nb; b++)
    for (int64_t h = 0; h < m->shard.heads; h++)
      for (int64_t i = 0; i < n; i++) {
        int64_t t = bs_shard_token(&m->shard, i), li = bs_shard_index(&m->shard, nb, b, h, i, g.width);
        for (int64_t x = 0; x < g.width; x++) {
          int64_t gi = global_index(g, m->shard.b0 + b, m->shard.head0 + h, t, x);
          double e;
          if (isinf(ref[gi]) || isinf(got[li + x])) e = (ref[gi] == got[li + x]) ? 0 : INFINITY;
          else e = fabs((double)got[li + x] - (double)ref[gi]);
          if (!(e <= *maxerr)) *maxerr = isnan(e) ? INFINITY : e;
          cover[gi] = 1;
        }
      }
}

static int verify_gather(rt *t, bs_run_report *out, char *err, size_t errlen);

/* Buffer b readable on the host: itself, or on a GPU a copy (give it back with host_done). */
static void *host_view(rt *t, int b) {
  if (!t->dev) return t->buf[b].ptr;
  void *h = malloc((size_t)(t->buf[b].bytes > 0 ? t->buf[b].bytes : 1));
  if (h && t->dev->download(t->dev->self, h, t->buf[b].ptr, (size_t)t->buf[b].bytes)) {
    free(h);
    h = NULL;
  }
  if (!h) fprintf(stderr, "burstsim run: rank %d: cannot copy an output to the host for --verify\n", t->rank);
  return h;
}

static void host_done(rt *t, void *h) {
  if (t->dev) free(h);
}

static int verify(rt *t, bs_run_report *out, char *err, size_t errlen) {
  bs_test_stall(t->rank, "verify");
  if (bs_arrive(t->world, "the verify gather", t->timeout, 0, err, errlen)) return BS_RUN_EFATAL;
  /* Other ranks wait here while rank 0 computes the single-rank reference: --timeout covers it too. */
  bs_watchdog_arm("burstsim run", t->rank, "the verify gather", t->timeout);
  if (t->rank != 0) bs_watchdog_waiting("rank 0 to take the outputs");
  int rc = verify_gather(t, out, err, errlen);
  bs_watchdog_disarm();
  return rc;
}

static int verify_gather(rt *t, bs_run_report *out, char *err, size_t errlen) {
  const bs_plan *p = t->plan;
  int n_local = 0;
  for (int b = 0; b < RT_MAX_BUFS; b++)
    if (t->buf[b].ptr && is_output(t->buf[b].role)) n_local++;
  int *counts = t->rank == 0 ? calloc((size_t)t->G, sizeof(int)) : NULL;
  MPI_Gather(&n_local, 1, MPI_INT, counts, 1, MPI_INT, 0, t->world);
  if (t->rank != 0) {
    for (int b = 0; b < RT_MAX_BUFS; b++)
      if (t->buf[b].ptr && is_output(t->buf[b].role)) {
        out_meta m = {t->buf[b].role, t->buf[b].shard, t->buf[b].bytes};
        void *h = host_view(t, b);
        if (!h) m.role = -1; /* rank 0 skips it; its elements then count as produced by no rank */
        MPI_Send(&m, (int)sizeof m, MPI_BYTE, 0, 900, t->world);
        MPI_Send(h ? h : t->buf[b].ptr, h ? (int)m.bytes : 0, MPI_BYTE, 0, 901, t->world);
        host_done(t, h);
      }
    return BS_RUN_OK;
  }
  float *refs[BS_ROLE_DV + 1] = {0};
  unsigned char *cover[BS_ROLE_DV + 1] = {0};
  int rc = reference(p, t->cfg->seed, t->bf16, t->threads, refs, err, errlen);
  double maxerr[BS_ROLE_DV + 1] = {0};
  for (int r = 0; r <= BS_ROLE_DV; r++) {
    out->verify_err[r] = -1;
    if (is_output((bs_role)r) && refs[r]) {
      gshape g = role_shape(p, (bs_role)r);
      cover[r] = calloc((size_t)(g.B * g.heads * g.tokens * g.width), 1);
    }
  }
  for (int src = 0; src < t->G; src++)
    for (int j = 0; j < counts[src]; j++) {
      out_meta m;
      float *data;
      if (src == 0) {
        int seen = -1, b;
        for (b = 0; b < RT_MAX_BUFS; b++)
          if (t->buf[b].ptr && is_output(t->buf[b].role) && ++seen == j) break;
        m = (out_meta){t->buf[b].role, t->buf[b].shard, t->buf[b].bytes};
        data = host_view(t, b);
        if (!data) m.role = -1;
      } else {
        bs_watchdog_waiting("rank %d's outputs", src);
        MPI_Recv(&m, (int)sizeof m, MPI_BYTE, src, 900, t->world, MPI_STATUS_IGNORE);
        data = malloc((size_t)m.bytes);
        MPI_Recv(data, m.role < 0 ? 0 : (int)m.bytes, MPI_BYTE, src, 901, t->world, MPI_STATUS_IGNORE);
      }
      if (rc == 0 && m.role >= 0 && m.role <= BS_ROLE_DV && refs[m.role])
        compare(p, &m, data, refs[m.role], cover[m.role], &maxerr[m.role]);
      if (src != 0) free(data);
      else host_done(t, data);
    }
  if (rc == 0) {
    out->verified = 1;
    out->verify_tol = t->bf16 ? 1e-2 : 1e-5;
    int train = bs_plan_has_bwd(p);
    for (int r = BS_ROLE_O; r <= BS_ROLE_DV; r++) {
      if (!train && r >= BS_ROLE_DQ) continue;
      gshape g = role_shape(p, (bs_role)r);
      int64_t total = g.B * g.heads * g.tokens * g.width, missing = 0;
      double scale = 0;
      for (int64_t i = 0; i < total; i++) {
        missing += !cover[r][i];
        if (isfinite(refs[r][i]) && fabs(refs[r][i]) > scale) scale = fabs(refs[r][i]);
      }
      out->verify_err[r] = scale > 0 ? maxerr[r] / scale : maxerr[r];
      if (missing) {
        snprintf(err, errlen, "verify: %lld elements of %s were produced by no rank", (long long)missing,
                 bs_role_name((bs_role)r));
        out->verified = 0;
        out->verify_err[r] = INFINITY;
      } else if (!(out->verify_err[r] < out->verify_tol)) {
        if (out->verified)
          snprintf(err, errlen,
                   "verify: %s differs from the single-rank reference: max error %.3g of max|ref| (bound %.0e)",
                   bs_role_name((bs_role)r), out->verify_err[r], out->verify_tol);
        out->verified = 0;
      }
    }
    if (!out->verified) rc = BS_RUN_EVERIFY;
  }
  for (int r = 0; r <= BS_ROLE_DV; r++) {
    free(refs[r]);
    free(cover[r]);
  }
  free(counts);
  return rc < 0 ? BS_RUN_EFATAL : rc;
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

/* A GPU run: the scratch copied to the device (same sizes, same contents). */
static int dev_scratch(rt *t, char *err, size_t errlen) {
  const bs_rt_device *d = t->dev;
  bs_scratch *s = &t->scratch;
  struct {
    void **dst;
    const void *src;
    int64_t bytes;
  } parts[] = {{(void **)&t->dscr.a, s->a, s->na * 4},
               {(void **)&t->dscr.b, s->b, s->nb * 4},
               {(void **)&t->dscr.c, s->c, s->nc * 4},
               {(void **)&t->dscr.x, s->x, s->nx * 4},
               {(void **)&t->dscr.send, s->send, s->send_bytes}};
  if (s->nrecv > 0 && !(t->dscr.recv = calloc((size_t)s->nrecv, sizeof *t->dscr.recv))) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (int i = 0; i < 5; i++) {
    if (!parts[i].src || parts[i].bytes <= 0) continue;
    if (!(*parts[i].dst = d->alloc(d->self, (size_t)parts[i].bytes)) ||
        d->upload(d->self, *parts[i].dst, parts[i].src, (size_t)parts[i].bytes)) {
      snprintf(err, errlen, "rank %d: cannot place %lld bytes of scratch on the device", t->rank,
               (long long)parts[i].bytes);
      return -1;
    }
  }
  for (int i = 0; i < s->nrecv; i++)
    if (s->recv_bytes > 0 && !(t->dscr.recv[i] = d->alloc(d->self, (size_t)s->recv_bytes))) {
      snprintf(err, errlen, "rank %d: cannot place a %lld-byte scratch receive slot on the device", t->rank,
               (long long)s->recv_bytes);
      return -1;
    }
  return 0;
}

static void dev_scratch_free(rt *t) {
  if (!t->dev) return;
  void *p[] = {t->dscr.a, t->dscr.b, t->dscr.c, t->dscr.x, t->dscr.send};
  for (int i = 0; i < 5; i++) t->dev->free(t->dev->self, p[i]);
  for (int i = 0; t->dscr.recv && i < t->scratch.nrecv; i++) t->dev->free(t->dev->self, t->dscr.recv[i]);
  free(t->dscr.recv);
  memset(&t->dscr, 0, sizeof t->dscr);
}

/*
 * A GPU run: does every rank's plan peak plus its scratch fit in the memory its device has free?
 * Collective; BS_RUN_EINPUT with the same message on every rank when one does not (nothing run).
 */
static int dev_fits(rt *t, char *err, size_t errlen) {
  const bs_rt_device *d = t->dev;
  int64_t total = d->mem_total ? d->mem_total(d->self) : -1, used = d->mem_used ? d->mem_used(d->self) : -1;
  bs_dev_bytes b;
  char e[256];
  int64_t over = INT64_MIN, worst;
  if (total > 0 && used >= 0 && bs_dev_bytes_of(t->plan, t->rank, &b, e, sizeof e) == 0)
    over = b.peak + bs_scratch_bytes(&t->scratch) - (total - used);
  MPI_Allreduce(&over, &worst, 1, MPI_INT64_T, MPI_MAX, t->world);
  if (worst <= 0) return BS_RUN_OK;
  snprintf(err, errlen,
           "device memory: a rank's plan peak and scratch need %lld bytes more than its GPU has free (fewer "
           "tokens or more ranks)",
           (long long)worst);
  return BS_RUN_EINPUT;
}

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
  int rpn = opts->ranks_per_node > 0 ? opts->ranks_per_node : cfg->par.ranks_per_node;
  bs_plan *plan = NULL;
  if (bs_plan_create(cfg, rpn, &plan, err, errlen)) return BS_RUN_EINPUT;
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
  if (rc == BS_RUN_OK && t->dev) rc = dev_fits(t, err, errlen);
  if (rc == BS_RUN_OK && t->dev) rc = dev_scratch(t, err, errlen) ? BS_RUN_EFATAL : BS_RUN_OK;
  if (rc == BS_RUN_OK) rc = make_comm(t, err, errlen) ? BS_RUN_EFATAL : BS_RUN_OK;
  for (int w = 0; rc == BS_RUN_OK && w <= opts->warmup; w++) {
    rc = execute(t, w == opts->warmup, err, errlen);
    if (rc == BS_RUN_OK && w < opts->warmup) free_all(t);
  }
  if (rc == BS_RUN_OK) rc = collect(t, out, err, errlen);
  if (rc == BS_RUN_OK && opts->verify) rc = verify(t, out, err, errlen);
  free_all(t);
  dev_scratch_free(t);
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
