/*
 * runtime_comm.c — a plan's transfers: SEND, RECV and COLL posted non-blocking
 * on the communicator (on the plan's buffers, on scratch for the transfers a
 * plan only models, through host staging for a GPU run over MPI), bytes
 * counted per peer and per collective, and WAIT joined with a deadline: a
 * transfer that does not complete in time, or a scratch transfer that does not
 * deliver what its group gives, ends the run with a message naming the rank,
 * the step and the transfer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime_impl.h"
#include "base/clock.h"

static const char *peer_what(const hinfo *h, char *tmp, size_t n) {
  if (h->kind == BS_OP_COLL)
    snprintf(tmp, n, "%s (%lld bytes)", bs_coll_name((bs_coll_kind)h->coll), (long long)h->bytes);
  else
    snprintf(tmp, n, "%s rank %d (tag %d, %lld bytes, posted at step %d)",
             h->kind == BS_OP_SEND ? "SEND to" : "RECV from", h->peer, h->tag, (long long)h->bytes, h->step);
  return tmp;
}

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
int rt_stage_send(rt *t, const bs_op *op, char *err, size_t errlen) {
  int h = op->handle;
  const char *src = op->kind == BS_OP_COLL ? rt_at(t, op->u.coll.send) : rt_at(t, op->u.p2p.buf);
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
int rt_stage_upload(rt *t, int h, char *err, size_t errlen) {
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

/* A receive slot of the scratch for handle h (a NOREF receive or collective). */
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

int rt_op_p2p(rt *t, const bs_op *op, double t0, char *err, size_t errlen) {
  int h = op->handle, peer = op->u.p2p.peer;
  char *data = rt_at(t, op->u.p2p.buf);
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
  rt_record(t, op, 0, peer, op->u.p2p.bytes, t0, bs_now_s());
  return BS_RUN_OK;
}

int rt_op_coll(rt *t, const bs_op *op, double t0, char *err, size_t errlen) {
  int h = op->handle;
  bs_comm_group g = {op->u.coll.group.first, op->u.coll.group.stride, op->u.coll.group.size};
  bs_comm_type ty = op->u.coll.elem == BS_ELEM_F32 ? BS_COMM_F32 : BS_COMM_BYTES;
  const char *send = rt_at(t, op->u.coll.send);
  char *recv = rt_at(t, op->u.coll.recv);
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
  rt_record(t, op, op->u.coll.kind, -1, op->u.coll.bytes, t0, bs_now_s());
  return BS_RUN_OK;
}

/* Joins handle h: waits with the deadline, checks what a scratch transfer delivered. */
int rt_wait_handle(rt *t, const bs_op *op, int h, char *err, size_t errlen) {
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

int rt_op_wait(rt *t, const bs_op *op, double t0, char *err, size_t errlen) {
  int rc = BS_RUN_OK;
  for (int j = 0; j < op->u.wait.n && rc == BS_RUN_OK; j++)
    rc = rt_wait_handle(t, op, op->u.wait.handles[j], err, errlen);
  double t1 = bs_now_s();
  t->exposed += t1 - t0;
  rt_record(t, op, 0, -1, 0, t0, t1);
  return rc;
}
