/*
 * compose.c — a method over a group of the ranks. In composed parallelism
 * (tp x cp x dp x pp) one attention runs over a context-parallel group (over
 * a tensor-parallel group for method tp), each rank holding its tensor-
 * parallel share of the heads and its replica's share of the batch. The
 * attention plan is made for the group alone (ranks 0 .. A-1, the heads and
 * sequences of one group); this file maps its ops into the global ranks and
 * tensors, for the attention scope's row here and for the layer and model
 * scope (workload.c). It also names the groups of the mesh the layers use.
 */
#include <stdlib.h>
#include "plan_impl.h"

void plan_map_of(const bs_plan *p, int rank, plan_rank_map *m) {
  const bs_mesh *g = &p->mesh;
  memset(m, 0, sizeof *m);
  m->stride = 1;
  m->local = rank;
  if (!p->composed) return;
  int a = g->att_dim;
  m->local = bs_mesh_coord(g, rank, a);
  m->stride = g->stride[a];
  m->base = rank - m->local * m->stride;
  if (a == BS_DIM_CP) { /* method tp splits the heads itself */
    int tp = g->size[BS_DIM_TP], t = bs_mesh_coord(g, rank, BS_DIM_TP);
    m->head_q0 = (int32_t)(t * (p->Zq / tp));
    /* more tp ranks than KV heads: rank t holds the one its query heads share, replicated */
    m->head_kv0 = (int32_t)(p->Zkv >= tp ? t * (p->Zkv / tp) : t / (tp / p->Zkv));
  }
  m->b0 = bs_mesh_coord(g, rank, BS_DIM_DP) * (p->B / g->size[BS_DIM_DP]);
}

static int kv_role(bs_role r) { return r == BS_ROLE_K || r == BS_ROLE_V || r == BS_ROLE_DK || r == BS_ROLE_DV; }

void plan_map_op(const plan_rank_map *m, bs_op *op) {
  switch (op->kind) {
  case BS_OP_SEND:
  case BS_OP_RECV: op->u.p2p.peer = m->base + m->stride * op->u.p2p.peer; break;
  case BS_OP_COLL:
    op->u.coll.group.first = m->base + m->stride * op->u.coll.group.first;
    op->u.coll.group.stride *= m->stride;
    break;
  case BS_OP_ALLOC:
    if (op->u.alloc.role == BS_ROLE_TMP) break;
    op->u.alloc.shard.head0 += kv_role(op->u.alloc.role) ? m->head_kv0 : m->head_q0;
    op->u.alloc.shard.b0 += m->b0;
    break;
  default: break;
  }
}

bs_group plan_mesh_group(const bs_plan *p, int rank, int d) {
  const bs_mesh *g = &p->mesh;
  bs_group r = {(int32_t)(rank - bs_mesh_coord(g, rank, d) * g->stride[d]), (int32_t)g->stride[d], (int32_t)g->size[d]};
  return r;
}

int plan_grad_group(const bs_plan *p, int rank, bs_group *out) {
  const bs_mesh *g = &p->mesh;
  int cp = g->size[BS_DIM_CP], dp = g->size[BS_DIM_DP];
  if (cp == 1 || dp == 1) {
    *out = plan_mesh_group(p, rank, cp == 1 ? BS_DIM_DP : BS_DIM_CP);
    return 0;
  }
  int lo = g->stride[BS_DIM_CP] < g->stride[BS_DIM_DP] ? BS_DIM_CP : BS_DIM_DP,
      hi = lo == BS_DIM_CP ? BS_DIM_DP : BS_DIM_CP;
  if (g->stride[lo] * g->size[lo] != g->stride[hi]) return -1;
  out->first = (int32_t)(rank - bs_mesh_coord(g, rank, BS_DIM_CP) * g->stride[BS_DIM_CP] -
                         bs_mesh_coord(g, rank, BS_DIM_DP) * g->stride[BS_DIM_DP]);
  out->stride = (int32_t)g->stride[lo];
  out->size = (int32_t)(cp * dp);
  return 0;
}

/* ---------- attention scope: the group's plan, mapped ---------- */

typedef struct {
  bs_plan_iter *in;
  plan_rank_map map;
  int32_t dk, dv; /* the rank's dK, dV output buffers while allocated, else -1 */
  int64_t dk_bytes, dv_bytes;
} compose_state;

/* More tp ranks than KV heads in training: the rank's KV head is replicated on rep = tp / kv_heads
 * consecutive tp ranks (same cp rank), each holding after the method's backward the partial dK, dV
 * of its own query heads over its tokens; the head's gradient is their sum, all-reduced (fp32) over
 * the rep ranks before the backward ends (tp.c does the same for method tp). */
static void kv_replicas_sum(bs_plan_iter *it, const compose_state *s) {
  const bs_plan *p = it->p;
  int tp = p->mesh.size[BS_DIM_TP];
  if (!p->bwd || p->mesh.att_dim != BS_DIM_CP || tp <= p->Zkv || s->dk < 0 || s->dv < 0) return;
  bs_group g = plan_mesh_group(p, it->rank, BS_DIM_TP);
  int32_t rep = (int32_t)(tp / p->Zkv), t = bs_mesh_coord(&p->mesh, it->rank, BS_DIM_TP), h[2];
  g.first += t / rep * rep * g.stride;
  g.size = rep;
  h[0] = plan_coll(it, BS_COLL_ALLREDUCE, BS_RED_SUM, BS_ELEM_F32, g, R(s->dk, 0), R(s->dk, 0), s->dk_bytes);
  h[1] = plan_coll(it, BS_COLL_ALLREDUCE, BS_RED_SUM, BS_ELEM_F32, g, R(s->dv, 0), R(s->dv, 0), s->dv_bytes);
  plan_wait(it, h, 2);
}

/* Tracks the dK, dV output buffers of the group's plan (op as mapped). */
static void track_dkv(compose_state *s, const bs_op *op) {
  if (op->kind == BS_OP_ALLOC && op->u.alloc.role == BS_ROLE_DK) {
    s->dk = op->u.alloc.buf;
    s->dk_bytes = op->u.alloc.bytes;
  } else if (op->kind == BS_OP_ALLOC && op->u.alloc.role == BS_ROLE_DV) {
    s->dv = op->u.alloc.buf;
    s->dv_bytes = op->u.alloc.bytes;
  } else if (op->kind == BS_OP_FREE) {
    if (op->u.free.buf == s->dk) s->dk = -1;
    if (op->u.free.buf == s->dv) s->dv = -1;
  }
}

static void compose_close(void *v) {
  compose_state *s = v;
  if (s) bs_plan_iter_free(s->in);
  free(s);
}

static void *compose_open(bs_plan_iter *it) {
  compose_state *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  plan_map_of(it->p, it->rank, &s->map);
  s->dk = s->dv = -1;
  s->in = bs_plan_iter_new(it->p->attn, s->map.local);
  if (!s->in) {
    free(s);
    return NULL;
  }
  return s;
}

static int compose_gen(bs_plan_iter *it) {
  compose_state *s = it->wl;
  for (int n = 0; n < QCAP / 2; n++) {
    const bs_op *op = plan_next_ref(s->in);
    if (!op) {
      const char *why = bs_plan_iter_errmsg(s->in);
      if (why) {
        it->err = 1;
        snprintf(it->errmsg, sizeof it->errmsg, "%s", why);
      }
      return n > 0;
    }
    if (op->kind == BS_OP_PHASE && op->u.phase.fwd_bwd == 1 && !op->u.phase.begin) kv_replicas_sum(it, s);
    bs_op *c = plan_push_copy(it, op);
    plan_map_op(&s->map, c);
    track_dkv(s, c);
  }
  return 1;
}

static int compose_check(const bs_plan *p, char *err, size_t errlen) {
  (void)p;
  (void)err;
  (void)errlen;
  return 0;
}

const plan_scope plan_scope_compose = {compose_check, compose_open, compose_close, compose_gen};
