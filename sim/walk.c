/*
 * walk.c — a point's memory peak and busiest-rank compute read off its plan
 * without SimGrid (walk.h), for `burstsim search`'s pruning. A rank's memory
 * depends only on the order of its own ALLOC and FREE ops, never on timing,
 * so walking the ops in order gives the simulator's peak exactly, provided the
 * bytes an ALLOC holds are counted as the actor counts them
 * (bs_sim_alloc_held, which actor.c calls).
 */
#include "sim/walk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sim/platform.h"

int64_t bs_sim_alloc_held(const bs_profile *prof, const bs_op *op) {
  bs_mem_class cls = op->u.alloc.cls;
  if (cls == BS_MEM_WEIGHTS || cls == BS_MEM_GRADS || cls == BS_MEM_OPTIMIZER) return op->u.alloc.bytes;
  return bs_profile_alloc_bytes(prof, op->u.alloc.bytes);
}

#define WALK_MAX_BUFS 2048 /* as the actor's buffer table (point.h MAX_BUFS) */

typedef struct {
  int64_t bytes[WALK_MAX_BUFS];
  int8_t cls[WALK_MAX_BUFS];
  uint8_t used[WALK_MAX_BUFS];
} rank_mem;

/* One rank's program: its peak, its classes at the peak, its compute time. 0 or -1. */
static int walk_rank(const bs_plan *plan, int rank, const bs_config *cfg, const bs_profile *prof, rank_mem *m,
                     int64_t *peak, int64_t cls_at_peak[BS_MEM_CLASS_COUNT], double *compute, char *err,
                     size_t errlen) {
  memset(m->used, 0, sizeof m->used);
  int64_t cur = 0, cls_cur[BS_MEM_CLASS_COUNT] = {0};
  *peak = 0;
  memset(cls_at_peak, 0, sizeof(int64_t) * BS_MEM_CLASS_COUNT);
  *compute = 0;
  bs_plan_iter *it = bs_plan_iter_new(plan, rank);
  if (!it) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  bs_op op;
  int rc = 0;
  while (!rc && bs_plan_next(it, &op)) {
    if (op.kind == BS_OP_ALLOC) {
      int b = op.u.alloc.buf;
      if (b < 0 || b >= WALK_MAX_BUFS || m->used[b] || op.u.alloc.bytes < 0 || op.u.alloc.cls < 0 ||
          op.u.alloc.cls >= BS_MEM_CLASS_COUNT) {
        snprintf(err, errlen, "rank %d: ALLOC of buffer %d is invalid or the buffer is already allocated", rank, b);
        rc = -1;
        break;
      }
      int64_t held = bs_sim_alloc_held(prof, &op);
      m->used[b] = 1;
      m->bytes[b] = held;
      m->cls[b] = (int8_t)op.u.alloc.cls;
      cur += held;
      cls_cur[op.u.alloc.cls] += held;
      if (cur > *peak) {
        *peak = cur;
        memcpy(cls_at_peak, cls_cur, sizeof cls_cur);
      }
    } else if (op.kind == BS_OP_FREE) {
      int b = op.u.free.buf;
      if (b < 0 || b >= WALK_MAX_BUFS || !m->used[b]) {
        snprintf(err, errlen, "rank %d: FREE of buffer %d that is not allocated", rank, b);
        rc = -1;
        break;
      }
      cur -= m->bytes[b];
      cls_cur[m->cls[b]] -= m->bytes[b];
      m->used[b] = 0;
    } else if (op.kind == BS_OP_COMPUTE) {
      double d = bs_profile_kernel_time(prof, &op.u.compute, cfg->model.dtype, err, errlen);
      if (d < 0) {
        rc = -1;
        break;
      }
      *compute += d;
    }
  }
  if (!rc && bs_plan_iter_errmsg(it)) {
    snprintf(err, errlen, "rank %d: %s", rank, bs_plan_iter_errmsg(it));
    rc = -1;
  }
  bs_plan_iter_free(it);
  return rc;
}

/*
 * The corner ranks of cfg's grid: every combination of the first and the last coordinate of
 * tp, cp, dp and pp (at most 16 ranks), in rank order. *n of them; 0, or -1 (not a grid).
 */
static int corner_ranks(const bs_config *cfg, int *ranks, int *n) {
  bs_mesh m;
  if (bs_mesh_of(cfg, &m, NULL, 0)) return -1;
  *n = 0;
  for (int mask = 0; mask < 1 << BS_DIM_COUNT; mask++) {
    int r = 0, dup = 0;
    for (int d = 0; d < BS_DIM_COUNT; d++) {
      int last = mask >> d & 1;
      if (last && m.size[d] == 1) dup = 1; /* the same rank as with the first coordinate */
      r += (last ? m.size[d] - 1 : 0) * m.stride[d];
    }
    if (!dup) ranks[(*n)++] = r;
  }
  for (int i = 1; i < *n; i++) /* rank order, as the simulator scans its ranks */
    for (int j = i; j > 0 && ranks[j - 1] > ranks[j]; j--) {
      int t = ranks[j];
      ranks[j] = ranks[j - 1];
      ranks[j - 1] = t;
    }
  return 0;
}

/* Every rank (or the corners) of one depth: the highest peak (first such rank's classes) and the
 * busiest rank's compute. */
static int walk_plan(const bs_config *cfg, int rpn, const bs_profile *prof, int corners, bs_walk *out, char *err,
                     size_t errlen) {
  bs_plan *plan = NULL;
  if (bs_plan_create(cfg, rpn, &plan, err, errlen)) return -2;
  rank_mem *m = malloc(sizeof *m);
  if (!m) {
    bs_plan_free(plan);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int rc = 0, G = bs_plan_ranks(plan), list[1 << BS_DIM_COUNT], nlist = 0;
  if (corners && corner_ranks(cfg, list, &nlist)) corners = 0;
  out->peak_bytes = 0;
  out->compute_s = 0;
  memset(out->breakdown, 0, sizeof out->breakdown);
  for (int i = 0; i < (corners ? nlist : G) && !rc; i++) {
    int r = corners ? list[i] : i;
    int64_t peak, cls[BS_MEM_CLASS_COUNT];
    double comp;
    rc = walk_rank(plan, r, cfg, prof, m, &peak, cls, &comp, err, errlen);
    if (rc) break;
    if (peak > out->peak_bytes || i == 0) {
      out->peak_bytes = peak;
      memcpy(out->breakdown, cls, sizeof cls);
    }
    if (comp > out->compute_s) out->compute_s = comp;
  }
  free(m);
  bs_plan_free(plan);
  return rc;
}

/* a + k (b - a), as layers.c extends a byte count; -1 past int64. */
static int exti(int64_t a, int64_t b, int64_t k, int64_t *x) {
  int64_t d, kd;
  return __builtin_sub_overflow(b, a, &d) || __builtin_mul_overflow(k, d, &kd) || __builtin_add_overflow(a, kd, x) ? -1
                                                                                                                   : 0;
}

int bs_sim_walk(const bs_config *cfg, const bs_sim_opts *opts_in, const bs_profile *prof, int corners, bs_walk *out,
                char *err, size_t errlen) {
  bs_sim_opts opts;
  if (opts_in) opts = *opts_in;
  else bs_sim_opts_default(&opts);
  memset(out, 0, sizeof *out);
  bs_platform_spec ps;
  if (bs_platform_resolve(cfg, &opts, prof, &ps, err, errlen)) return -2;
  out->ranks_per_node = ps.ranks_per_node;
  out->capacity_bytes = bs_profile_capacity_bytes(prof);
  int rc;
  if (!bs_sim_layers_apply(cfg, &opts)) {
    rc = walk_plan(cfg, ps.ranks_per_node, prof, corners, out, err, errlen);
    out->oom = out->peak_bytes > out->capacity_bytes;
    return rc;
  }
  /* The layer shortcut: 3 and 4 layers, extended to L as layers.c extends the simulated figures. */
  bs_config ca = *cfg, cb = *cfg;
  ca.model.layers = 3;
  cb.model.layers = 4;
  bs_walk a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  if ((rc = walk_plan(&ca, ps.ranks_per_node, prof, corners, &a, err, errlen)) ||
      (rc = walk_plan(&cb, ps.ranks_per_node, prof, corners, &b, err, errlen)))
    return rc;
  int64_t k = cfg->model.layers - 3;
  if (exti(a.peak_bytes, b.peak_bytes, k, &out->peak_bytes)) {
    snprintf(err, errlen, "memory.peak_bytes: the bytes of %lld layers pass 2^63 - 1", (long long)cfg->model.layers);
    return -1;
  }
  for (int c = 0; c < BS_MEM_CLASS_COUNT; c++)
    if (exti(a.breakdown[c], b.breakdown[c], k, &out->breakdown[c])) {
      snprintf(err, errlen, "memory.breakdown: the bytes of %lld layers pass 2^63 - 1", (long long)cfg->model.layers);
      return -1;
    }
  out->compute_s = a.compute_s + (double)k * (b.compute_s - a.compute_s);
  out->oom = out->capacity_bytes > 0 && out->peak_bytes > out->capacity_bytes;
  return 0;
}
