/*
 * plan.c — the machinery every plan shares: the common checks, the decision
 * (double ring, ring sizes, all-to-all groups) and creation through the
 * method table, the per-rank iterator with its small op queue, buffer and
 * handle ids, shards, and the emission of one (query shard x key shard)
 * attention as chunk-pair kernels, fully masked pairs skipped and FLOPs counted
 * from the visible pairs of kernels/mask.h.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "plan_impl.h"

/* ---------- names ---------- */

const char *bs_op_kind_name(bs_op_kind k) {
  static const char *n[] = {"ALLOC", "FREE", "COMPUTE", "SEND", "RECV", "COLL", "WAIT", "PHASE"};
  return (k >= 0 && k <= BS_OP_PHASE) ? n[k] : "?";
}
const char *bs_kernel_name(bs_kernel k) {
  static const char *n[] = {"attn_fwd", "attn_fwd_unfused", "attn_bwd", "attn_bwd_unfused", "attn_delta", "attn_merge",
                            "gemm",     "elemwise",         "copy"};
  return (k >= 0 && k < BS_K_COUNT) ? n[k] : "?";
}
const char *bs_coll_name(bs_coll_kind k) {
  static const char *n[] = {"allreduce", "allgather", "reduce_scatter", "alltoall"};
  return (k >= 0 && k < BS_COLL_COUNT) ? n[k] : "?";
}
const char *bs_role_name(bs_role r) {
  static const char *n[] = {"tmp", "q", "k", "v", "dout", "o", "lse", "dq", "dk", "dv"};
  return (r >= 0 && r <= BS_ROLE_DV) ? n[r] : "?";
}

/* ---------- shards ---------- */

int64_t bs_shard_tokens(const bs_shard *s) { return s->parts > 0 ? s->n_total / s->parts : 0; }

int64_t bs_shard_token(const bs_shard *s, int64_t i) {
  int64_t n = bs_shard_tokens(s);
  if (s->parts <= 1) return i;
  switch (s->layout) {
  case BS_STRIPED: return s->part + i * s->parts;
  case BS_ZIGZAG: {
    int64_t c = n / 2;
    return i < c ? s->part * c + i : (2 * (int64_t)s->parts - 1 - s->part) * c + (i - c);
  }
  default: return (int64_t)s->part * n + i;
  }
}

int64_t bs_shard_index(const bs_shard *s, int64_t B, int64_t b, int64_t h, int64_t i, int64_t width) {
  int64_t n = bs_shard_tokens(s);
  if (s->layout == BS_ZIGZAG && s->parts > 1) {
    int64_t c = n / 2, chunk = i / c, r = i % c;
    return chunk * (B * s->heads * c * width) + ((b * s->heads + h) * c + r) * width;
  }
  return ((b * s->heads + h) * n + i) * width;
}

bs_shard plan_shard(bs_layout l, int part, int parts, int64_t n_total, int32_t head0, int32_t heads) {
  bs_shard s;
  s.layout = parts > 1 ? l : BS_CONTIGUOUS;
  s.part = part;
  s.parts = parts;
  s.n_total = n_total;
  s.head0 = head0;
  s.heads = heads;
  return s;
}

/* The position blocks of a shard: one, or two chunks for zigzag. */
typedef struct {
  int64_t pos0, stride, len;
  int idx;
} blk;

static int shard_blks(const bs_shard *s, blk b[2]) {
  int64_t n = bs_shard_tokens(s);
  if (s->parts <= 1) {
    b[0] = (blk){0, 1, n, 0};
    return 1;
  }
  if (s->layout == BS_STRIPED) {
    b[0] = (blk){s->part, s->parts, n, 0};
    return 1;
  }
  if (s->layout == BS_ZIGZAG) {
    int64_t c = n / 2;
    b[0] = (blk){(int64_t)s->part * c, 1, c, 0};
    b[1] = (blk){(2 * (int64_t)s->parts - 1 - s->part) * c, 1, c, 1};
    return 2;
  }
  b[0] = (blk){(int64_t)s->part * n, 1, n, 0};
  return 1;
}

/* ---------- visible pairs (the geometry is kernels/mask.h) ---------- */

int64_t plan_visible_pairs(int64_t q0, int64_t nq, int64_t k0, int64_t nk, int64_t stride, int causal, int64_t window) {
  attn_mask m = {q0, stride, k0, stride, causal, window};
  return attn_mask_pairs(&m, nq, nk);
}

int64_t bs_visible_pairs(int64_t q0, int64_t nq, int64_t k0, int64_t nk, int64_t stride, int causal, int64_t window) {
  return plan_visible_pairs(q0, nq, k0, nk, stride, causal, window);
}

/* ---------- queue, ids ---------- */

bs_op *plan_push(bs_plan_iter *it, bs_op_kind kind) {
  if (it->qn >= QCAP) {
    it->err = 1;
    return &it->sink;
  } /* overflow: op discarded */
  bs_op *op = &it->q[(it->qh + it->qn) % QCAP];
  it->qn++;
  memset(op, 0, sizeof *op);
  op->kind = kind;
  op->handle = -1;
  op->step = it->step;
  return op;
}

void plan_push_copy(bs_plan_iter *it, const bs_op *op) {
  if (it->qn >= QCAP) {
    it->err = 1;
    return;
  } /* overflow: op discarded */
  it->q[(it->qh + it->qn) % QCAP] = *op;
  it->qn++;
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

attn_params plan_attn_params(const bs_plan *p, int64_t hq, int64_t hkv, int64_t nq, int64_t nk) {
  attn_params a;
  memset(&a, 0, sizeof a);
  a.B = (int)p->B;
  a.Zq = (int)hq;
  a.Zkv = (int)hkv;
  a.Nq = nq;
  a.Nk = nk;
  a.d = (int)p->d;
  a.scale = (float)(1.0 / sqrt((double)p->d));
  a.mask.q_stride = 1;
  a.mask.k_stride = 1;
  a.mask.causal = p->cfg.work.causal;
  a.mask.window = p->cfg.work.window;
  a.dtype = p->adt;
  return a;
}

/* ---------- attention of two shards ---------- */

int plan_emit_attn(bs_plan_iter *it, int bwd, int unfused, int64_t hq, int64_t hkv, const bs_shard *qs,
                   int64_t qpos_off, const bs_shard *ks, const attn_bufs *b, int init[2]) {
  const bs_plan *p = it->p;
  blk qb[2], kb[2];
  int nqb = shard_blks(qs, qb), nkb = shard_blks(ks, kb), emitted = 0;
  int causal = p->cfg.work.causal;
  int64_t window = p->cfg.work.window;
  for (int x = 0; x < nqb; x++)
    for (int y = 0; y < nkb; y++) {
      int64_t q0 = qb[x].pos0 + qpos_off, pairs;
      if (qb[x].stride == kb[y].stride)
        pairs = plan_visible_pairs(q0, qb[x].len, kb[y].pos0, kb[y].len, qb[x].stride, causal, window);
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
      int64_t qoff = qb[x].idx * p->B * hq * qb[x].len * p->d; /* elements */
      int64_t koff = kb[y].idx * p->B * hkv * kb[y].len * p->d;
      int64_t loff = qb[x].idx * p->B * hq * qb[x].len;
      bs_compute *c;
      if (!bwd) {
        c = plan_compute(it, unfused ? BS_K_ATTN_FWD_UNFUSED : BS_K_ATTN_FWD);
        c->a = a;
        c->accumulate = init[qb[x].idx] ? 1 : 0;
        init[qb[x].idx] = 1;
        c->flops = 4.0 * (double)p->B * (double)hq * (double)p->d * (double)pairs;
        c->in[0] = R(b->q, qoff * p->es);
        c->in[1] = R(b->k, koff * p->es);
        c->in[2] = R(b->v, koff * p->es);
        if (unfused) c->in[3] = R(b->scores, 0);
        c->out[0] = R(b->o, qoff * 4);
        c->out[1] = R(b->lse, loff * 4);
      } else {
        c = plan_compute(it, unfused ? BS_K_ATTN_BWD_UNFUSED : BS_K_ATTN_BWD);
        c->a = a;
        c->flops = 10.0 * (double)p->B * (double)hq * (double)p->d * (double)pairs;
        c->in[0] = R(b->q, qoff * p->es);
        c->in[1] = R(b->k, koff * p->es);
        c->in[2] = R(b->v, koff * p->es);
        c->in[3] = b->o >= 0 ? R(b->o, qoff * 4) : BS_NOREF;
        c->in[4] = R(b->dout, qoff * p->es);
        c->in[5] = R(b->lse, loff * 4);
        c->in[6] = b->delta >= 0 ? R(b->delta, loff * 4) : BS_NOREF;
        if (unfused) c->in[7] = R(b->scores, 0);
        c->out[0] = R(b->dq, qoff * 4);
        c->out[1] = R(b->dk, koff * 4);
        c->out[2] = R(b->dv, koff * 4);
      }
      emitted++;
    }
  return emitted;
}

/* ---------- creation ---------- */

static int fail(char *err, size_t errlen, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return -1;
}

static int check_common(const bs_config *c, char *err, size_t errlen) {
  char m[256];
  if (c->par.method < 0 || c->par.method >= BS_METHOD_COUNT)
    return fail(err, errlen, "parallel.method: unknown method");
  if (c->par.layout < BS_CONTIGUOUS || c->par.layout > BS_STRIPED)
    return fail(err, errlen, "parallel.layout: unknown layout");
  if (c->par.gpus < 1) {
    snprintf(m, sizeof m, "parallel.gpus: %d must be at least 1", c->par.gpus);
    return fail(err, errlen, m);
  }
  if (c->work.seq_len < 1) return fail(err, errlen, "workload.seq_len: must be at least 1");
  if (c->work.batch < 1) return fail(err, errlen, "workload.batch: must be at least 1");
  if (c->work.window < 0) return fail(err, errlen, "workload.window: must not be negative");
  if (c->model.heads < 1) return fail(err, errlen, "model.heads: must be at least 1");
  if (c->model.head_dim < 1) return fail(err, errlen, "model.head_dim: must be at least 1");
  if (c->model.kv_heads < 1 || c->model.heads % c->model.kv_heads != 0) {
    snprintf(m, sizeof m, "model.kv_heads: %lld must be at least 1 and divide heads %lld", (long long)c->model.kv_heads,
             (long long)c->model.heads);
    return fail(err, errlen, m);
  }
  if (c->work.phase < BS_TRAIN || c->work.phase > BS_DECODE) return fail(err, errlen, "workload.phase: unknown phase");
  const plan_method *pm = plan_method_of(c->par.method);
  if (!pm) return fail(err, errlen, "parallel.method: unknown method");
  if (c->work.phase == BS_DECODE) {
    if (!pm->decode) {
      snprintf(m, sizeof m, "workload.phase: decode needs method tree or ring, not %s", bs_method_name(c->par.method));
      return fail(err, errlen, m);
    }
    if (c->work.decode_tokens < 1) return fail(err, errlen, "workload.decode_tokens: must be at least 1");
  } else if (pm->decode == 2) {
    return fail(err, errlen, "parallel.method: tree is a decode method (set workload.phase = decode)");
  }
  return 0;
}

/*
 * The decisions a plan takes from the request: a double ring (inner rings of
 * the ranks of a node, an outer ring over nodes) when asked, or on auto when
 * the ranks span whole nodes; the ring sizes; the all-to-all groups.
 */
static int decide(const bs_config *cfg, int ranks_per_node, bs_decision *d, char *err, size_t errlen) {
  const plan_method *pm = plan_method_of(cfg->par.method);
  int G = cfg->par.gpus, rpn = ranks_per_node > 0 ? ranks_per_node : G;
  int U = pm && pm->a2a == 2 ? cfg->par.ulysses_degree : G;
  memset(d, 0, sizeof *d);
  if (!pm || G < 1) return fail(err, errlen, "parallel.method: unknown method");
  d->ring_inner = d->ring_outer = d->ulysses_degree = 1;
  if (pm->a2a) d->ulysses_degree = U;
  if (pm->ring == 1) d->ring_inner = G;
  if (pm->ring == 2 && U >= 1 && G % U == 0) d->ring_inner = G / U;
  int want = cfg->par.double_ring == BS_ON || (cfg->par.double_ring == BS_AUTO && rpn > 1 && rpn < G && G % rpn == 0);
  if (want && pm->double_ring && cfg->work.phase != BS_DECODE) {
    if (G % rpn != 0) {
      char m[256];
      snprintf(m, sizeof m, "parallel.double_ring: ranks_per_node %d does not divide gpus %d", rpn, G);
      return fail(err, errlen, m);
    }
    d->ring_inner = rpn < G ? rpn : G;
    d->ring_outer = G / d->ring_inner;
    d->double_ring = d->ring_outer > 1;
  }
  d->valid = 1;
  return 0;
}

int bs_plan_decide(const bs_config *cfg, int ranks_per_node, bs_decision *d) {
  return decide(cfg, ranks_per_node, d, NULL, 0);
}

void bs_plan_decision(const bs_plan *p, bs_decision *d) { decide(&p->cfg, p->rpn, d, NULL, 0); }

int bs_plan_create(const bs_config *cfg, int ranks_per_node, bs_plan **out, char *err, size_t errlen) {
  *out = NULL;
  if (check_common(cfg, err, errlen)) return -1;
  bs_plan *p = calloc(1, sizeof *p);
  if (!p) return fail(err, errlen, "out of memory");
  p->cfg = *cfg;
  p->G = cfg->par.gpus;
  p->B = cfg->work.batch;
  p->Zq = cfg->model.heads;
  p->Zkv = cfg->model.kv_heads;
  p->d = cfg->model.head_dim;
  p->N = cfg->work.seq_len;
  p->decode = cfg->work.phase == BS_DECODE;
  p->bwd = cfg->work.phase == BS_TRAIN;
  p->nq_dec = cfg->work.decode_tokens;
  p->es = bs_dtype_bytes(cfg->model.dtype);
  p->elem = cfg->model.dtype == BS_FP32 ? BS_ELEM_F32 : (cfg->model.dtype == BS_FP16 ? BS_ELEM_F16 : BS_ELEM_BF16);
  p->adt = cfg->model.dtype == BS_FP32 ? ATTN_FP32 : ATTN_BF16;
  bs_decision d;
  if (decide(cfg, ranks_per_node, &d, err, errlen)) {
    free(p);
    return -1;
  }
  p->rpn = ranks_per_node;
  p->P = d.ring_outer > 1 ? d.ring_inner : p->G;
  p->M = d.ring_outer;
  const plan_method *pm = plan_method_of(cfg->par.method);
  if (pm->check(p, err, errlen)) {
    free(p);
    return -1;
  }
  if (cfg->work.scope != BS_SCOPE_ATTENTION) {
    bs_config ac = *cfg;
    ac.work.scope = BS_SCOPE_ATTENTION;
    if (plan_check_workload(p, err, errlen) || bs_plan_create(&ac, ranks_per_node, &p->attn, err, errlen)) {
      free(p);
      return -1;
    }
    p->attn->in_layer = 1;
  }
  *out = p;
  return 0;
}

void bs_plan_free(bs_plan *p) {
  if (p) bs_plan_free(p->attn);
  free(p);
}
int bs_plan_ranks(const bs_plan *p) { return p->G; }
const bs_config *bs_plan_config(const bs_plan *p) { return &p->cfg; }
int bs_plan_inner_ranks(const bs_plan *p) { return p->M > 1 ? p->P : 1; }
int bs_plan_has_bwd(const bs_plan *p) { return p->bwd; }

attn_params bs_plan_reference_params(const bs_plan *p) {
  attn_params a = plan_attn_params(p, p->Zq, p->Zkv, p->decode ? p->nq_dec : p->N, p->N);
  if (p->decode) a.mask.q_pos0 = p->N;
  return a;
}

int64_t bs_coll_bytes_sent(bs_coll_kind kind, int64_t bytes, int size) {
  if (size <= 1) return 0;
  switch (kind) {
  case BS_COLL_ALLREDUCE: return 2 * (size - 1) * (bytes / size);
  case BS_COLL_ALLGATHER: return (int64_t)(size - 1) * bytes;
  case BS_COLL_REDUCE_SCATTER:
  case BS_COLL_ALLTOALL: return (int64_t)(size - 1) * (bytes / size);
  default: return 0;
  }
}

/* ---------- iterator ---------- */

bs_plan_iter *bs_plan_iter_new(const bs_plan *p, int rank) {
  if (!p || rank < 0 || rank >= p->G) return NULL;
  bs_plan_iter *it = calloc(1, sizeof *it);
  if (!it) return NULL;
  it->p = p;
  it->rank = rank;
  it->step = -1;
  it->state = calloc(1, plan_method_of(p->cfg.par.method)->state_size);
  if (!it->state || (p->attn && !(it->wl = plan_wl_new(it)))) {
    free(it->state);
    free(it);
    return NULL;
  }
  return it;
}

void bs_plan_iter_free(bs_plan_iter *it) {
  if (it) {
    plan_wl_free(it->wl);
    free(it->state);
  }
  free(it);
}
int bs_plan_iter_error(const bs_plan_iter *it) { return it->err; }

const char *bs_plan_iter_errmsg(const bs_plan_iter *it) {
  if (!it->err) return NULL;
  return it->errmsg[0] ? it->errmsg : "the plan iterator failed (internal error: op queue or ids exhausted)";
}

void plan_iter_fail(bs_plan_iter *it, const char *fmt, ...) {
  if (!it->err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->errmsg, sizeof it->errmsg, fmt, ap);
    va_end(ap);
  }
  it->err = 1;
}

int bs_plan_next(bs_plan_iter *it, bs_op *op) {
  while (it->qn == 0) {
    if (it->done || it->err) return 0;
    int more = it->wl ? plan_gen_workload(it) : plan_method_of(it->p->cfg.par.method)->gen(it, it->state);
    if (!more) it->done = 1;
  }
  if (it->err) return 0;
  *op = it->q[it->qh];
  it->qh = (it->qh + 1) % QCAP;
  it->qn--;
  return 1;
}
