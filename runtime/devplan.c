/*
 * devplan.c — see devplan.h. Pure host logic over plans: no CUDA, NCCL or
 * MPI call, so every decision is unit-tested without a GPU
 * (tests/runtime/test_devplan.c).
 */
#include "runtime/devplan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plans/workload.h"

const char *bs_backend_kind_name(bs_backend_kind b) { return b == BS_BACKEND_CUDA ? "cuda" : "cpu"; }
const char *bs_xport_kind_name(bs_xport_kind x) { return x == BS_XPORT_NCCL ? "nccl" : "mpi"; }

int bs_dev_check_pair(bs_backend_kind b, bs_xport_kind x, char *err, size_t errlen) {
  if (b == BS_BACKEND_CPU && x == BS_XPORT_NCCL) {
    snprintf(err, errlen,
             "--comm nccl: needs --backend cuda (NCCL moves device memory; the CPU kernels use host memory)");
    return -1;
  }
  return 0;
}

int bs_dev_pick(int local_rank, int ndev, int *device, char *err, size_t errlen) {
  *device = -1;
  if (local_rank < 0) {
    snprintf(err, errlen, "local rank %d is out of range", local_rank);
    return -1;
  }
  if (ndev < 1) {
    snprintf(err, errlen, "no CUDA device");
    return -1;
  }
  *device = local_rank % ndev;
  return 0;
}

int bs_dev_sharing(const char *ids, size_t stride, int n, int me) {
  int k = 0;
  for (int r = 0; r < n; r++) k += strncmp(ids + (size_t)r * stride, ids + (size_t)me * stride, stride) == 0;
  return k;
}

int bs_dev_check_sharing(bs_xport_kind x, int sharing, const char *id, char *err, size_t errlen) {
  if (x != BS_XPORT_NCCL || sharing <= 1) return 0;
  snprintf(err, errlen,
           "--comm nccl: %d ranks of this node on one GPU (%s); NCCL allows one rank of a communicator per GPU "
           "(use --comm mpi to share a GPU, or one rank per visible device)",
           sharing, id);
  return -1;
}

/* ---------------- group communicators ---------------- */

static int group_cmp(const void *a, const void *b) {
  const bs_group *x = &((const bs_dev_group *)a)->g, *y = &((const bs_dev_group *)b)->g;
  if (x->stride != y->stride) return x->stride < y->stride ? -1 : 1;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return x->size < y->size ? -1 : x->size > y->size;
}

static int group_has(bs_group g, int rank) {
  if (rank < g.first || g.stride <= 0) return 0;
  int d = rank - g.first;
  return d % g.stride == 0 && d / g.stride < g.size;
}

static int groups_overlap(bs_group a, bs_group b) {
  for (int i = 0; i < a.size; i++)
    if (group_has(b, a.first + i * a.stride)) return 1;
  return 0;
}

static int add_group(bs_dev_groups *s, int *cap, bs_group g) {
  for (int i = 0; i < s->n; i++)
    if (s->groups[i].g.first == g.first && s->groups[i].g.stride == g.stride && s->groups[i].g.size == g.size) return 0;
  if (s->n == *cap) {
    int nc = *cap ? *cap * 2 : 16;
    bs_dev_group *ng = realloc(s->groups, (size_t)nc * sizeof *ng);
    if (!ng) return -1;
    s->groups = ng;
    *cap = nc;
  }
  s->groups[s->n++] = (bs_dev_group){g, -1};
  return 0;
}

int bs_dev_groups_collect(const bs_plan *p, bs_dev_groups *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  int G = bs_plan_ranks(p), cap = 0;
  for (int r = 0; r < G; r++) {
    bs_plan_iter *it = bs_plan_iter_new(p, r);
    if (!it) {
      snprintf(err, errlen, "out of memory");
      bs_dev_groups_free(out);
      return -1;
    }
    bs_op op;
    int rc = 0;
    while (!rc && bs_plan_next(it, &op)) {
      if (op.kind != BS_OP_COLL) continue;
      bs_group g = op.u.coll.group;
      if (g.first == 0 && g.stride == 1 && g.size == G) continue; /* the world communicator */
      if (add_group(out, &cap, g)) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
      }
    }
    if (!rc && bs_plan_iter_error(it)) {
      snprintf(err, errlen, "%s", bs_plan_iter_errmsg(it));
      rc = -1;
    }
    bs_plan_iter_free(it);
    if (rc) {
      bs_dev_groups_free(out);
      return -1;
    }
  }
  if (out->n > 1) qsort(out->groups, (size_t)out->n, sizeof *out->groups, group_cmp);
  for (int i = 0; i < out->n; i++) {
    int layer = 0;
    for (;; layer++) {
      int clash = 0;
      for (int j = 0; j < i && !clash; j++)
        clash = out->groups[j].layer == layer && groups_overlap(out->groups[i].g, out->groups[j].g);
      if (!clash) break;
    }
    out->groups[i].layer = layer;
    if (layer + 1 > out->nlayers) out->nlayers = layer + 1;
  }
  return 0;
}

void bs_dev_groups_free(bs_dev_groups *s) {
  free(s->groups);
  memset(s, 0, sizeof *s);
}

int bs_dev_group_colour(const bs_dev_groups *s, int layer, int rank, int *key) {
  int colour = 0;
  *key = 0;
  for (int i = 0; i < s->n; i++) {
    if (s->groups[i].layer != layer) continue;
    if (group_has(s->groups[i].g, rank)) {
      *key = (rank - s->groups[i].g.first) / s->groups[i].g.stride;
      return colour;
    }
    colour++;
  }
  return -1;
}

/* ---------------- stream and event schedule ---------------- */

void bs_dev_sched_init(bs_dev_sched *s, bs_xport_kind x) {
  s->x = x;
  s->dirty = 0;
}

static int act(bs_dev_action *a, int n, bs_dev_act_kind k, int detail, int handle) {
  a[n] = (bs_dev_action){k, detail, handle};
  return n + 1;
}

int bs_dev_schedule(bs_dev_sched *s, const bs_op *op, bs_dev_action *a) {
  int n = 0, nccl = s->x == BS_XPORT_NCCL;
  switch (op->kind) {
  case BS_OP_ALLOC:
  case BS_OP_FREE: return act(a, n, BS_DEV_HOST, 0, -1);
  case BS_OP_COMPUTE:
    n = act(a, n, BS_DEV_MARK, BS_MARK_COMPUTE_BEGIN, -1);
    n = act(a, n, BS_DEV_LAUNCH, 0, -1);
    s->dirty = 1;
    return act(a, n, BS_DEV_MARK, BS_MARK_COMPUTE_END, -1);
  case BS_OP_SEND:
  case BS_OP_RECV:
  case BS_OP_COLL:
    if (nccl) {
      if (s->dirty) n = act(a, n, BS_DEV_COMM_AFTER, 0, -1);
    } else if (op->kind != BS_OP_RECV) {
      /* MPI reads the send data from host staging: the kernels that write it must be done */
      if (s->dirty) n = act(a, n, BS_DEV_SYNC_COMPUTE, 0, -1);
      n = act(a, n, BS_DEV_DOWNLOAD, 0, op->handle);
    } else if (s->dirty) {
      /* a receive may land in a buffer that enqueued kernels still read */
      n = act(a, n, BS_DEV_SYNC_COMPUTE, 0, -1);
    }
    s->dirty = 0;
    return act(a, n, BS_DEV_POST, 0, op->handle);
  case BS_OP_WAIT:
    n = act(a, n, BS_DEV_MARK, BS_MARK_WAIT_BEGIN, -1);
    for (int j = 0; j < op->u.wait.n && j < BS_MAX_WAIT; j++) {
      int h = op->u.wait.handles[j];
      if (nccl) n = act(a, n, BS_DEV_STREAM_WAIT, 0, h);
      else {
        n = act(a, n, BS_DEV_HOST_WAIT, 0, h);
        n = act(a, n, BS_DEV_UPLOAD, 0, h);
      }
    }
    return act(a, n, BS_DEV_MARK, BS_MARK_WAIT_END, -1);
  case BS_OP_PHASE: return act(a, n, BS_DEV_MARK, BS_MARK_PHASE, -1);
  default: return 0;
  }
}

/* ---------------- time accounting ---------------- */

void bs_dev_times_init(bs_dev_times *t) {
  memset(t, 0, sizeof *t);
  t->open_compute = t->open_wait = -1;
}

int bs_dev_times_add(bs_dev_times *t, bs_dev_mark_kind k, double ms) {
  switch (k) {
  case BS_MARK_COMPUTE_BEGIN: t->open_compute = ms; return 0;
  case BS_MARK_WAIT_BEGIN: t->open_wait = ms; return 0;
  case BS_MARK_COMPUTE_END:
    if (t->open_compute < 0 || ms < t->open_compute) return -1;
    t->compute_s += (ms - t->open_compute) / 1e3;
    t->open_compute = -1;
    return 0;
  case BS_MARK_WAIT_END:
    if (t->open_wait < 0 || ms < t->open_wait) return -1;
    t->exposed_s += (ms - t->open_wait) / 1e3;
    t->open_wait = -1;
    return 0;
  default: return 0;
  }
}

/* ---------------- bytes ---------------- */

/* Bytes a transfer stages on the host: what it sends plus what it receives. */
static int64_t staged_bytes(const bs_op *op) {
  if (op->kind != BS_OP_COLL) return op->u.p2p.bytes;
  int64_t b = op->u.coll.bytes, size = op->u.coll.group.size > 0 ? op->u.coll.group.size : 1;
  switch (op->u.coll.kind) {
  case BS_COLL_ALLGATHER: return b + b * size;
  case BS_COLL_REDUCE_SCATTER: return b + b / size;
  default: return 2 * b;
  }
}

int bs_dev_bytes_of(const bs_plan *p, int rank, bs_dev_bytes *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  bs_plan_iter *it = bs_plan_iter_new(p, rank);
  int32_t nb = bs_plan_buf_ids(p);
  int64_t *size = calloc((size_t)nb, sizeof *size), *held = calloc(BS_WL_MAX_HANDLES, sizeof *held);
  if (!it || !size || !held) {
    bs_plan_iter_free(it);
    free(size);
    free(held);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int64_t live = 0, flight = 0;
  int rc = 0;
  bs_op op;
  while (!rc && bs_plan_next(it, &op)) {
    switch (op.kind) {
    case BS_OP_ALLOC: {
      int b = op.u.alloc.buf;
      if (b < 0 || b >= nb) break;
      live += op.u.alloc.bytes; /* as the runtime counts: an id is FREEd before it is allocated again */
      size[b] = op.u.alloc.bytes;
      if (live > out->peak) out->peak = live;
      if (op.u.alloc.bytes > out->largest) out->largest = op.u.alloc.bytes;
      break;
    }
    case BS_OP_FREE:
      if (op.u.free.buf >= 0 && op.u.free.buf < nb) {
        live -= size[op.u.free.buf];
        size[op.u.free.buf] = 0;
      }
      break;
    case BS_OP_SEND:
    case BS_OP_RECV:
    case BS_OP_COLL:
      if (op.handle >= 0 && op.handle < BS_WL_MAX_HANDLES) {
        held[op.handle] = staged_bytes(&op);
        flight += held[op.handle];
        if (flight > out->staging) out->staging = flight;
      }
      break;
    case BS_OP_WAIT:
      for (int j = 0; j < op.u.wait.n && j < BS_MAX_WAIT; j++) {
        int h = op.u.wait.handles[j];
        if (h < 0 || h >= BS_WL_MAX_HANDLES) continue;
        flight -= held[h];
        held[h] = 0;
      }
      break;
    default: break;
    }
  }
  if (bs_plan_iter_error(it)) {
    snprintf(err, errlen, "%s", bs_plan_iter_errmsg(it));
    rc = -1;
  }
  bs_plan_iter_free(it);
  free(size);
  free(held);
  return rc;
}
