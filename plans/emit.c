/*
 * emit.c — how a generator writes its program: the iterator's small op queue,
 * buffer and handle ids, one emitter per op kind (ALLOC, FREE, SEND, RECV,
 * COLL, WAIT, PHASE, COMPUTE), the emission of one (query shard x key shard)
 * attention as chunk-pair kernels with fully masked pairs skipped and FLOPs
 * counted from the visible pairs, the backward's delta = rowsum(dO * O), and
 * the stop of an iterator with a message.
 * Every method file and the layer and model scope emit through these.
 */
#include <stdarg.h>
#include <stdio.h>
#include "plan_impl.h"

/* ---------- shard blocks ---------- */

/* The position blocks of a shard: one, two chunks for zigzag, a run each for
 * the balance layouts (at most PLAN_MAX_RUNS), and as many again for a K,V
 * shard against a cache (its cache part, then its new part).
 * before: tokens stored ahead of the block in the buffer; idx: the chunk. */
typedef struct {
  int64_t pos0, stride, len;
  int idx;
  int64_t before;
} blk;

#define MAX_BLKS (2 * PLAN_MAX_RUNS)

static int plain_blks(const bs_shard *s, int64_t pos_off, int64_t before, blk *b) {
  int64_t n = bs_shard_tokens(s);
  if (s->parts <= 1) {
    b[0] = (blk){pos_off, 1, n, 0, before};
    return 1;
  }
  if (s->runs) {
    int nb = 0;
    for (int32_t k = s->runs->first[s->part]; k < s->runs->first[s->part + 1]; k++, nb++) {
      b[nb] = (blk){pos_off + s->runs->pos[k], 1, s->runs->len[k], nb, before};
      before += s->runs->len[k];
    }
    return nb;
  }
  if (s->layout == BS_STRIPED) {
    b[0] = (blk){pos_off + s->part, s->parts, n, 0, before};
    return 1;
  }
  if (s->layout == BS_ZIGZAG) {
    int64_t c = n / 2;
    b[0] = (blk){pos_off + (int64_t)s->part * c, 1, c, 0, before};
    b[1] = (blk){pos_off + (2 * (int64_t)s->parts - 1 - s->part) * c, 1, c, 1, before + c};
    return 2;
  }
  b[0] = (blk){pos_off + (int64_t)s->part * n, 1, n, 0, before};
  return 1;
}

static int shard_blks(const bs_shard *s, blk b[MAX_BLKS]) {
  if (s->n_cache <= 0) return plain_blks(s, 0, 0, b);
  bs_shard c = *s, f = *s;
  c.n_cache = f.n_cache = 0;
  c.n_total = s->n_cache;
  f.n_total = s->n_total - s->n_cache;
  int nc = plain_blks(&c, 0, 0, b);
  return nc + plain_blks(&f, s->n_cache, bs_shard_tokens(&c), b + nc);
}

/* ---------- queue, ids ---------- */

bs_op *plan_push(bs_plan_iter *it, bs_op_kind kind) {
  if (it->qn >= QCAP) {
    it->err = 1;
    return &it->sink;
  } /* overflow: op discarded */
  bs_op *op = &it->q[(it->qh + it->qn) % QCAP];
  it->qn++;
  memset(op, 0, bs_op_used_bytes(kind)); /* the rest of the union is never read */
  op->kind = kind;
  op->handle = -1;
  op->step = it->step;
  return op;
}

bs_op *plan_push_copy(bs_plan_iter *it, const bs_op *op) {
  bs_op *q = &it->sink; /* overflow: op discarded */
  if (it->qn >= QCAP) it->err = 1;
  else q = &it->q[(it->qh + it->qn++) % QCAP];
  plan_op_copy(q, op);
  return q;
}

int32_t plan_alloc(bs_plan_iter *it, int64_t bytes, bs_mem_class cls, bs_role role, const bs_shard *shard,
                   bs_elem elem) {
  int32_t id = -1;
  for (int b = 0; b < BS_PLAN_MAX_BUFS; b++)
    if (!(it->bufs_used & ((uint64_t)1 << b))) {
      id = b;
      break;
    }
  if (id < 0) {
    it->err = 1;
    return -1;
  }
  it->bufs_used |= (uint64_t)1 << id;
  bs_op *op = plan_push(it, BS_OP_ALLOC);
  op->u.alloc.buf = id;
  op->u.alloc.bytes = bytes;
  op->u.alloc.cls = cls;
  op->u.alloc.role = role;
  if (shard) op->u.alloc.shard = *shard;
  op->u.alloc.elem = elem;
  return id;
}

void plan_free(bs_plan_iter *it, int32_t buf) {
  if (buf < 0) return;
  it->bufs_used &= ~((uint64_t)1 << buf);
  bs_op *op = plan_push(it, BS_OP_FREE);
  op->u.free.buf = buf;
}

static int32_t new_handle(bs_plan_iter *it) {
  for (int h = 0; h < BS_PLAN_MAX_HANDLES; h++)
    if (!(it->handles_used & ((uint64_t)1 << h))) {
      it->handles_used |= (uint64_t)1 << h;
      return h;
    }
  it->err = 1;
  return 0;
}

static int32_t p2p(bs_plan_iter *it, bs_op_kind kind, int peer, int msg, bs_ref buf, int64_t bytes) {
  bs_op *op = plan_push(it, kind);
  op->handle = new_handle(it);
  op->u.p2p.peer = peer;
  op->u.p2p.tag = plan_tag(msg, it->step);
  op->u.p2p.buf = buf;
  op->u.p2p.bytes = bytes;
  return op->handle;
}
int32_t plan_send(bs_plan_iter *it, int peer, int msg, bs_ref buf, int64_t bytes) {
  return p2p(it, BS_OP_SEND, peer, msg, buf, bytes);
}
int32_t plan_recv(bs_plan_iter *it, int peer, int msg, bs_ref buf, int64_t bytes) {
  return p2p(it, BS_OP_RECV, peer, msg, buf, bytes);
}

int32_t plan_coll(bs_plan_iter *it, bs_coll_kind kind, bs_reduce_op red, bs_elem elem, bs_group g, bs_ref send,
                  bs_ref recv, int64_t bytes) {
  bs_op *op = plan_push(it, BS_OP_COLL);
  op->handle = new_handle(it);
  op->u.coll.kind = kind;
  op->u.coll.red = red;
  op->u.coll.elem = elem;
  op->u.coll.group = g;
  op->u.coll.send = send;
  op->u.coll.recv = recv;
  op->u.coll.bytes = bytes;
  return op->handle;
}

void plan_wait(bs_plan_iter *it, const int32_t *handles, int n) {
  for (int off = 0; off < n; off += BS_MAX_WAIT) {
    int m = n - off < BS_MAX_WAIT ? n - off : BS_MAX_WAIT;
    bs_op *op = plan_push(it, BS_OP_WAIT);
    op->u.wait.n = m;
    for (int j = 0; j < m; j++) {
      op->u.wait.handles[j] = handles[off + j];
      it->handles_used &= ~((uint64_t)1 << handles[off + j]);
    }
  }
}

void plan_phase(bs_plan_iter *it, int bwd, int begin) {
  bs_op *op = plan_push(it, BS_OP_PHASE);
  op->u.phase.fwd_bwd = bwd;
  op->u.phase.begin = begin;
}

bs_compute *plan_compute(bs_plan_iter *it, bs_kernel k) {
  bs_op *op = plan_push(it, BS_OP_COMPUTE);
  bs_compute *c = &op->u.compute;
  c->kernel = k;
  for (int j = 0; j < BS_OP_IN; j++) c->in[j] = BS_NOREF;
  for (int j = 0; j < BS_OP_OUT; j++) c->out[j] = BS_NOREF;
  return c;
}

/* ---------- attention of two shards ---------- */

static int emit_attn(bs_plan_iter *it, int bwd, int unfused, int64_t hq, int64_t hkv, const bs_shard *qs,
                     int64_t qpos_off, const bs_shard *ks, const attn_bufs *b, int init[2], int64_t o_at,
                     int64_t lse_at, int64_t kv_before) {
  const bs_plan *p = it->p;
  blk qb[MAX_BLKS], kb[MAX_BLKS];
  int nqb = shard_blks(qs, qb), nkb = shard_blks(ks, kb), emitted = 0;
  for (int y = 0; y < nkb; y++) kb[y].before += kv_before;
  for (int x = 0; x < nqb; x++)
    for (int y = 0; y < nkb; y++) {
      int64_t q0 = qb[x].pos0 + qpos_off, pairs;
      if (qb[x].stride == kb[y].stride)
        pairs = plan_visible_pairs(&p->cfg.work, q0, qb[x].len, kb[y].pos0, kb[y].len, qb[x].stride);
      else pairs = qb[x].len * kb[y].len; /* not produced by any plan; never skipped */
      if (pairs < 0) {
        plan_iter_fail(it,
                       "workload.seq_len: a block of %lld x %lld tokens has more than 2^63 - 1 visible "
                       "query-key pairs (the point is too large)",
                       (long long)qb[x].len, (long long)kb[y].len);
        return emitted;
      }
      if (pairs == 0) continue;
      attn_params a = plan_attn_params(p, hq, hkv, qb[x].len, kb[y].len);
      a.mask.q_pos0 = q0;
      a.mask.q_stride = qb[x].stride;
      a.mask.k_pos0 = kb[y].pos0;
      a.mask.k_stride = kb[y].stride;
      int64_t qoff = qb[x].before * p->B * hq * p->d; /* elements */
      int64_t koff = kb[y].before * p->B * hkv * p->d;
      int64_t ooff = qb[x].before * p->B * hq * p->dv; /* o, dout: v's head dimension */
      int64_t voff = kb[y].before * p->B * hkv * p->dv;
      int64_t loff = qb[x].before * p->B * hq;
      bs_compute *c;
      if (!bwd) {
        c = plan_compute(it, unfused ? BS_K_ATTN_FWD_UNFUSED : BS_K_ATTN_FWD);
        c->a = a;
        c->accumulate = init[qb[x].idx] ? 1 : 0;
        init[qb[x].idx] = 1;
        /* S = Q K^T over d and O = P V over dv: 2 FLOPs per multiply-add */
        c->flops = 2.0 * (double)p->B * (double)hq * (double)(p->d + p->dv) * (double)pairs;
        c->in[0] = R(b->q, qoff * p->es);
        c->in[1] = R(b->k, koff * p->es);
        c->in[2] = R(b->v, voff * p->es);
        if (unfused) c->in[3] = R(b->scores, 0);
        c->out[0] = R(b->o, o_at + ooff * 4);
        c->out[1] = R(b->lse, lse_at + loff * 4);
      } else {
        c = plan_compute(it, unfused ? BS_K_ATTN_BWD_UNFUSED : BS_K_ATTN_BWD);
        c->a = a;
        /* S = Q K^T, dQ = dS K and dK = dS^T Q over d; dP = dO V^T and dV = P^T dO over dv */
        c->flops = 2.0 * (double)p->B * (double)hq * (double)(3 * p->d + 2 * p->dv) * (double)pairs;
        c->in[0] = R(b->q, qoff * p->es);
        c->in[1] = R(b->k, koff * p->es);
        c->in[2] = R(b->v, voff * p->es);
        c->in[3] = b->o >= 0 ? R(b->o, ooff * 4) : BS_NOREF;
        c->in[4] = R(b->dout, ooff * p->es);
        c->in[5] = R(b->lse, loff * 4);
        c->in[6] = b->delta >= 0 ? R(b->delta, loff * 4) : BS_NOREF;
        if (unfused) c->in[7] = R(b->scores, 0);
        c->out[0] = R(b->dq, qoff * 4);
        c->out[1] = R(b->dk, koff * 4);
        c->out[2] = R(b->dv, voff * 4);
      }
      emitted++;
    }
  return emitted;
}

int plan_emit_attn(bs_plan_iter *it, int bwd, int unfused, int64_t hq, int64_t hkv, const bs_shard *qs,
                   int64_t qpos_off, const bs_shard *ks, const attn_bufs *b, int init[2]) {
  return emit_attn(it, bwd, unfused, hq, hkv, qs, qpos_off, ks, b, init, 0, 0, 0);
}

int plan_emit_attn_kv_at(bs_plan_iter *it, int bwd, int64_t hq, int64_t hkv, const bs_shard *qs, const bs_shard *ks,
                         const attn_bufs *b, int init[2], int64_t kv_before) {
  return emit_attn(it, bwd, 0, hq, hkv, qs, 0, ks, b, init, 0, 0, kv_before);
}

int plan_emit_attn_at(bs_plan_iter *it, int unfused, int64_t hq, int64_t hkv, const bs_shard *qs, int64_t qpos_off,
                      const bs_shard *ks, const attn_bufs *b, int init[2], int64_t o_at, int64_t lse_at) {
  return emit_attn(it, 0, unfused, hq, hkv, qs, qpos_off, ks, b, init, o_at, lse_at, 0);
}

/* ---------- the backward's delta ---------- */

void plan_emit_delta(bs_plan_iter *it, int64_t hq, int64_t hkv, int64_t n, int32_t o, int32_t dout, int32_t delta) {
  const bs_plan *p = it->p;
  bs_compute *c = plan_compute(it, BS_K_ATTN_DELTA);
  c->a = plan_attn_params(p, hq, hkv, n, n);
  c->elems = p->B * hq * n * p->dv;
  c->flops = 2.0 * (double)c->elems;
  c->in[0] = R(o, 0);
  c->in[1] = R(dout, 0);
  c->out[0] = R(delta, 0);
}

int32_t plan_emit_local_delta(bs_plan_iter *it, int32_t o, int32_t dout) {
  const bs_plan *p = it->p;
  int64_t n = p->N / p->G;
  int32_t delta = plan_alloc(it, p->B * p->Zq * n * 4, BS_MEM_WORKSPACE, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  plan_emit_delta(it, p->Zq, p->Zkv, n, o, dout, delta);
  return delta;
}

int64_t plan_shard_pairs(const bs_plan *p, const bs_shard *qs, int64_t qpos_off, const bs_shard *ks, int chunk) {
  blk qb[MAX_BLKS], kb[MAX_BLKS];
  int nqb = shard_blks(qs, qb), nkb = shard_blks(ks, kb);
  int64_t sum = 0;
  for (int x = 0; x < nqb; x++)
    for (int y = 0; y < nkb; y++) {
      if (chunk >= 0 && qb[x].idx != chunk) continue;
      int64_t pairs = qb[x].stride == kb[y].stride ? plan_visible_pairs(&p->cfg.work, qb[x].pos0 + qpos_off, qb[x].len,
                                                                        kb[y].pos0, kb[y].len, qb[x].stride)
                                                   : qb[x].len * kb[y].len;
      if (pairs < 0 || sum > INT64_MAX - pairs) return -1;
      sum += pairs;
    }
  return sum;
}

/* ---------- stopping ---------- */

void plan_iter_fail(bs_plan_iter *it, const char *fmt, ...) {
  if (!it->err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->errmsg, sizeof it->errmsg, fmt, ap);
    va_end(ap);
  }
  it->err = 1;
}
