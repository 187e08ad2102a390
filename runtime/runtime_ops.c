/*
 * runtime_ops.c — a plan's ops run on the host: ALLOC and FREE through a
 * counting allocator (live and peak bytes per memory class; a buffer's pages
 * mapped at allocation, set-up time outside the phases; the q, k, v, dout
 * inputs filled), COMPUTE through the shared executor (compute.h) on the
 * kernels' backend with a communicator progress poll between tiles, PHASE
 * marks into the phase times, and the trace's event per op. The transfers
 * are runtime_comm.c's, a GPU's schedule runtime_dev.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "runtime_impl.h"
#include "base/clock.h"
#include "base/vec.h"

void rt_record(rt *t, const bs_op *op, int detail, int peer, int64_t bytes, double t0, double t1) {
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

char *rt_at(rt *t, bs_ref r) {
  return r.buf >= 0 && r.buf < RT_MAX_BUFS && t->buf[r.buf].ptr ? (char *)t->buf[r.buf].ptr + r.off : NULL;
}

/* ---------------- kernels ---------------- */

static void progress(void *comm) { bs_comm_progress(comm); }

/* One COMPUTE op through the shared executor (compute.h) on the CPU backend. */
int rt_run_compute(rt *t, const bs_op *op, char *err, size_t errlen) {
  const bs_compute *c = &op->u.compute;
  bs_compute_bufs b;
  memset(&b, 0, sizeof b);
  for (int i = 0; i < BS_OP_IN; i++) b.in[i] = rt_at(t, c->in[i]);
  for (int i = 0; i < BS_OP_OUT; i++) b.out[i] = rt_at(t, c->out[i]);
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

/* ---------------- buffers ---------------- */

/* A plan buffer's memory back: host or device. */
static void buf_release(rt *t, void *ptr) {
  if (t->dev) t->dev->free(t->dev->self, ptr);
  else free(ptr);
}

void rt_free_all(rt *t) {
  for (int b = 0; b < RT_MAX_BUFS; b++) {
    buf_release(t, t->buf[b].ptr);
    t->buf[b].ptr = NULL;
  }
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

int rt_op_alloc(rt *t, const bs_op *op, double t0, char *err, size_t errlen) {
  rbuf *rb = &t->buf[op->u.alloc.buf];
  int64_t f0 = rt_minor_faults();
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
      if (h) rt_fill_input(t->plan, t->cfg->seed, rb->role, &rb->shard, bs_plan_local_batch(t->plan), h, t->bf16);
      if (h && t->dev->upload(t->dev->self, rb->ptr, h, (size_t)op->u.alloc.bytes)) bad = 1;
      free(h);
      if (bad) {
        snprintf(err, errlen, "step %d: cannot fill the %s input on the device", op->step, bs_role_name(rb->role));
        return BS_RUN_EFATAL;
      }
    } else rt_fill_input(t->plan, t->cfg->seed, rb->role, &rb->shard, bs_plan_local_batch(t->plan), rb->ptr, t->bf16);
  }
  t->alloc_faults += rt_minor_faults() - f0;
  t->setup += bs_now_s() - t0;
  t->live += rb->bytes;
  t->live_cls[rb->cls] += rb->bytes;
  if (t->live > t->peak) {
    t->peak = t->live;
    memcpy(t->peak_cls, t->live_cls, sizeof t->peak_cls);
  }
  return BS_RUN_OK;
}

void rt_op_free(rt *t, const bs_op *op) {
  rbuf *rb = &t->buf[op->u.free.buf];
  t->live -= rb->bytes;
  t->live_cls[rb->cls] -= rb->bytes;
  buf_release(t, rb->ptr);
  rb->ptr = NULL;
}

static int op_compute(rt *t, const bs_op *op, double t0, char *err, size_t errlen) {
  int rc = rt_run_compute(t, op, err, errlen);
  double t1 = bs_now_s();
  t->compute += t1 - t0;
  rt_record(t, op, op->u.compute.kernel, -1, 0, t0, t1);
  return rc;
}

/* ---------------- one op ---------------- */

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

int rt_run_op(rt *t, const bs_op *op, char *err, size_t errlen) {
  double t0 = bs_now_s();
  switch (op->kind) {
  case BS_OP_ALLOC: return rt_op_alloc(t, op, t0, err, errlen);
  case BS_OP_FREE: rt_op_free(t, op); return BS_RUN_OK;
  case BS_OP_COMPUTE: return op_compute(t, op, t0, err, errlen);
  case BS_OP_SEND:
  case BS_OP_RECV: return rt_op_p2p(t, op, t0, err, errlen);
  case BS_OP_COLL: return rt_op_coll(t, op, t0, err, errlen);
  case BS_OP_WAIT: return rt_op_wait(t, op, t0, err, errlen);
  case BS_OP_PHASE: op_phase(t, op, t0); return BS_RUN_OK;
  default: snprintf(err, errlen, "step %d: unknown op kind %d", op->step, (int)op->kind); return BS_RUN_EFATAL;
  }
}
