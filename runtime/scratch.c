/*
 * scratch.c — see scratch.h. The pass walks the rank's program once, as the
 * executor will, keeping the largest GEMM operands, elementwise pass and
 * transfer, and how many NOREF receives are in flight at once (a slot each,
 * taken at the post, given back at the WAIT that joins it).
 */
#include "runtime/scratch.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t round_up(int64_t n, int64_t m) { return m > 1 ? (n + m - 1) / m * m : n; }

bs_scratch_coll bs_scratch_coll_shape(const bs_op *op) {
  bs_scratch_coll s;
  int size = op->u.coll.group.size > 0 ? op->u.coll.group.size : 1;
  bs_coll_kind k = op->u.coll.kind;
  int reduce = k == BS_COLL_ALLREDUCE || k == BS_COLL_REDUCE_SCATTER;
  s.type = reduce || op->u.coll.elem == BS_ELEM_F32 ? BS_COMM_F32 : BS_COMM_BYTES;
  int64_t unit = s.type == BS_COMM_F32 ? 4 : 1;
  /* what comm.h needs: whole elements; reduce-scatter and all-to-all equal blocks per rank */
  s.bytes = round_up(op->u.coll.bytes, k == BS_COLL_REDUCE_SCATTER || k == BS_COLL_ALLTOALL ? unit * size : unit);
  switch (k) {
  case BS_COLL_ALLGATHER: s.recv_bytes = s.bytes * size; break;
  case BS_COLL_REDUCE_SCATTER: s.recv_bytes = s.bytes / size; break;
  default: s.recv_bytes = s.bytes; break;
  }
  return s;
}

int bs_scratch_uses(const bs_op *op) {
  switch (op->kind) {
  case BS_OP_COMPUTE:
    return (op->u.compute.kernel == BS_K_GEMM && op->u.compute.gemm == BS_GEMM_GENERIC) ||
           (op->u.compute.kernel == BS_K_ELEMWISE && op->u.compute.ew == BS_EW_GENERIC);
  case BS_OP_COLL: return op->u.coll.send.buf < 0 || op->u.coll.recv.buf < 0;
  case BS_OP_SEND:
  case BS_OP_RECV: return op->u.p2p.buf.buf < 0;
  default: return 0;
  }
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The sizes of the scratch of one program; -1 with a message on an op the scratch cannot hold. */
static int size_pass(bs_scratch *s, const bs_plan *p, int rank, char *err, size_t errlen) {
  bs_plan_iter *it = bs_plan_iter_new(p, rank);
  if (!it) {
    snprintf(err, errlen, "rank %d: out of memory", rank);
    return -1;
  }
  int cap = 0, inflight = 0, rc = 0;
  char *held = NULL; /* per handle: a NOREF receive in flight */
  bs_op op;
  while (rc == 0 && bs_plan_next(it, &op)) {
    int h = op.handle;
    if ((op.kind == BS_OP_COLL || op.kind == BS_OP_SEND || op.kind == BS_OP_RECV) && h >= s->nhandles)
      s->nhandles = h + 1;
    if (!bs_scratch_uses(&op)) {
      if (op.kind == BS_OP_WAIT)
        for (int j = 0; j < op.u.wait.n; j++) {
          int w = op.u.wait.handles[j];
          if (w >= 0 && w < cap && held[w]) {
            held[w] = 0;
            inflight--;
          }
        }
      continue;
    }
    int64_t recv = 0;
    if (op.kind == BS_OP_COMPUTE && op.u.compute.kernel == BS_K_GEMM) {
      const bs_compute *c = &op.u.compute;
      if (c->m < 0 || c->n < 0 || c->k < 0 || c->m > INT_MAX || c->n > INT_MAX || c->k > INT_MAX) {
        snprintf(err, errlen, "step %d: GEMM %lld x %lld x %lld exceeds one BLAS call", op.step, (long long)c->m,
                 (long long)c->n, (long long)c->k);
        rc = -1;
      }
      s->na = max64(s->na, c->m * c->k);
      s->nb = max64(s->nb, c->k * c->n);
      s->nc = max64(s->nc, c->m * c->n);
    } else if (op.kind == BS_OP_COMPUTE) {
      s->nx = max64(s->nx, op.u.compute.elems);
    } else if (op.kind == BS_OP_COLL) {
      bs_scratch_coll cs = bs_scratch_coll_shape(&op);
      s->send_bytes = max64(s->send_bytes, cs.bytes);
      recv = max64(cs.recv_bytes, 1);
    } else if (op.kind == BS_OP_SEND) {
      s->send_bytes = max64(s->send_bytes, op.u.p2p.bytes);
    } else {
      recv = max64(op.u.p2p.bytes, 1);
    }
    if (recv > 0) {
      s->recv_bytes = max64(s->recv_bytes, recv);
      if (h >= cap) {
        int ncap = h + 64;
        char *nh = realloc(held, (size_t)ncap);
        if (!nh) {
          snprintf(err, errlen, "rank %d: out of memory", rank);
          rc = -1;
          break;
        }
        memset(nh + cap, 0, (size_t)(ncap - cap));
        held = nh;
        cap = ncap;
      }
      if (h >= 0 && !held[h]) {
        held[h] = 1;
        if (++inflight > s->nrecv) s->nrecv = inflight;
      }
    }
  }
  if (rc == 0 && bs_plan_iter_error(it)) {
    snprintf(err, errlen, "%s", bs_plan_iter_errmsg(it));
    rc = -1;
  }
  free(held);
  bs_plan_iter_free(it);
  return rc;
}

/* n floats, filled with small values (the BLAS and the loops see ordinary numbers, not zeros). */
static float *floats(int64_t n) {
  if (n <= 0) return NULL;
  float *f = malloc((size_t)n * sizeof *f);
  if (f)
    for (int64_t i = 0; i < n; i++) f[i] = (float)((i % 13) - 6) * (1.0f / 64.0f);
  return f;
}

static char *bytes_of(int64_t n) { return n > 0 ? calloc(1, (size_t)n) : NULL; }

/* The send data: fp32 ones (a sum over a group of g ranks then reads g), zero in a trailing partial float. */
static char *ones(int64_t n) {
  char *b = bytes_of(n);
  const float one = 1.0f;
  for (int64_t i = 0; b && i + 4 <= n; i += 4) memcpy(b + i, &one, 4);
  return b;
}

int bs_scratch_create(bs_scratch *s, const bs_plan *p, int rank, char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  if (size_pass(s, p, rank, err, errlen)) return -1;
  s->a = floats(s->na);
  s->b = floats(s->nb);
  s->c = floats(s->nc);
  s->x = floats(s->nx);
  s->send = ones(s->send_bytes);
  s->recv = s->nrecv > 0 ? calloc((size_t)s->nrecv, sizeof *s->recv) : NULL;
  s->busy = s->nrecv > 0 ? calloc((size_t)s->nrecv, 1) : NULL;
  s->slot_of = s->nhandles > 0 ? malloc((size_t)s->nhandles * sizeof *s->slot_of) : NULL;
  int ok = (!s->na || s->a) && (!s->nb || s->b) && (!s->nc || s->c) && (!s->nx || s->x) &&
           (!s->send_bytes || s->send) && (!s->nrecv || (s->recv && s->busy)) && (!s->nhandles || s->slot_of);
  for (int i = 0; ok && i < s->nrecv; i++) ok = (s->recv[i] = bytes_of(s->recv_bytes)) != NULL;
  for (int h = 0; ok && h < s->nhandles; h++) s->slot_of[h] = -1;
  if (!ok) {
    snprintf(err, errlen, "rank %d: cannot allocate the scratch of the modelled ops (%.1f MiB)", rank,
             (double)bs_scratch_bytes(s) / 1048576.0);
    bs_scratch_free(s);
    return -1;
  }
  return 0;
}

int64_t bs_scratch_bytes(const bs_scratch *s) {
  return (s->na + s->nb + s->nc + s->nx) * (int64_t)sizeof(float) + s->send_bytes + (int64_t)s->nrecv * s->recv_bytes;
}

void bs_scratch_free(bs_scratch *s) {
  free(s->a);
  free(s->b);
  free(s->c);
  free(s->x);
  free(s->send);
  for (int i = 0; s->recv && i < s->nrecv; i++) free(s->recv[i]);
  free(s->recv);
  free(s->busy);
  free(s->slot_of);
  memset(s, 0, sizeof *s);
}

char *bs_scratch_take(bs_scratch *s, int h) {
  if (h < 0 || h >= s->nhandles) return NULL;
  for (int i = 0; i < s->nrecv; i++)
    if (!s->busy[i]) {
      s->busy[i] = 1;
      s->slot_of[h] = i;
      return s->recv[i];
    }
  return NULL;
}

char *bs_scratch_slot(const bs_scratch *s, int h) {
  return h >= 0 && h < s->nhandles && s->slot_of[h] >= 0 ? s->recv[s->slot_of[h]] : NULL;
}

float bs_scratch_expected(const bs_op *op) {
  if (op->kind == BS_OP_RECV) return op->u.p2p.bytes >= 4 ? 1.0f : 0.0f;
  if (op->kind != BS_OP_COLL) return 0.0f;
  bs_scratch_coll cs = bs_scratch_coll_shape(op);
  int reduce = op->u.coll.kind == BS_COLL_ALLREDUCE || op->u.coll.kind == BS_COLL_REDUCE_SCATTER;
  int size = op->u.coll.group.size > 0 ? op->u.coll.group.size : 1;
  if (cs.recv_bytes < 4 || (!reduce && cs.bytes < 4)) return 0.0f;
  /* all-to-all: the first block comes from another rank's block at its offset, aligned only in whole floats */
  if (op->u.coll.kind == BS_COLL_ALLTOALL && (cs.bytes / size) % 4 != 0) return 0.0f;
  return reduce && op->u.coll.red == BS_RED_SUM ? (float)op->u.coll.group.size : 1.0f;
}

void bs_scratch_give(bs_scratch *s, int h) {
  if (h < 0 || h >= s->nhandles || s->slot_of[h] < 0) return;
  s->busy[s->slot_of[h]] = 0;
  s->slot_of[h] = -1;
}
