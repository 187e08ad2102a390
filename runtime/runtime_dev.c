/*
 * runtime_dev.c — a plan's ops on a GPU (opts.device, runtime/device.h): each
 * op through devplan.h's stream and event schedule (host work, kernel
 * launches, event marks, transfers ordered after the compute, staging copies),
 * the times read back from the compute stream's events, and the scratch
 * placed in device memory after checking that every rank's plan fits.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime_impl.h"
#include "base/clock.h"

int rt_dev_mark(rt *t, int kind, const bs_op *op, char *err, size_t errlen) {
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

int rt_run_op_dev(rt *t, const bs_op *op, char *err, size_t errlen) {
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
        rc = rt_op_alloc(t, op, bs_now_s(), err, errlen);
      } else rt_op_free(t, op);
      break;
    case BS_DEV_MARK: rc = rt_dev_mark(t, a->detail, op, err, errlen); break;
    case BS_DEV_LAUNCH:
      rc = rt_run_compute(t, op, err, errlen);
      rt_record(t, op, op->u.compute.kernel, -1, 0, t0, bs_now_s());
      break;
    case BS_DEV_COMM_AFTER:
      if (d->comm_after(d->self, t->comm, err, errlen))
        rc = dev_fail(t, op, "ordering the transfer after the compute", err, errlen);
      break;
    case BS_DEV_SYNC_COMPUTE:
      if (d->sync(d->self)) rc = dev_fail(t, op, "synchronising the compute stream", err, errlen);
      break;
    case BS_DEV_DOWNLOAD: rc = rt_stage_send(t, op, err, errlen) ? BS_RUN_EFATAL : BS_RUN_OK; break;
    case BS_DEV_POST:
      rc = op->kind == BS_OP_COLL ? rt_op_coll(t, op, t0, err, errlen) : rt_op_p2p(t, op, t0, err, errlen);
      break;
    case BS_DEV_STREAM_WAIT:
      if (d->stream_wait(d->self, t->comm, t->req[a->handle], err, errlen))
        rc = dev_fail(t, op, "making the compute stream wait for a transfer", err, errlen);
      else rc = rt_wait_handle(t, op, a->handle, err, errlen); /* releases the request, checks errors in time */
      break;
    case BS_DEV_HOST_WAIT: rc = rt_wait_handle(t, op, a->handle, err, errlen); break;
    case BS_DEV_UPLOAD: rc = rt_stage_upload(t, a->handle, err, errlen) ? BS_RUN_EFATAL : BS_RUN_OK; break;
    }
  }
  if (op->kind == BS_OP_WAIT) rt_record(t, op, 0, -1, 0, bs_now_s(), bs_now_s());
  return rc;
}

/* After an execution on a GPU: the compute stream's marks give compute, exposed, phase and wall times. */
int rt_dev_times(rt *t, char *err, size_t errlen) {
  const bs_rt_device *d = t->dev;
  if (rt_dev_mark(t, BS_MARK_PHASE, NULL, err, errlen) || d->sync(d->self)) {
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

/* ---------------- device memory ---------------- */

/* A GPU run: the scratch copied to the device (same sizes, same contents). */
int rt_dev_scratch(rt *t, char *err, size_t errlen) {
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

void rt_dev_scratch_free(rt *t) {
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
int rt_dev_fits(rt *t, char *err, size_t errlen) {
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
