/*
 * plan.c — the values every floor reads from a plan, with no op emitted:
 * the names of ops, kernels, collectives and roles, shards and their token
 * positions, the visible (query, key) pairs of two blocks (the geometry is
 * kernels/mask.h), a kernel's attention parameters, the plan's accessors and
 * the bytes a collective sends. It calls nothing else in plans/: the emitters
 * (emit.c), the iterator (iter.c) and creation (create.c) stand on it.
 */
#include <math.h>
#include <stdlib.h>
#include "plan_impl.h"
#include "workload_impl.h"

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

/* The two pieces of a shard against a KV cache: the cache's part, then the new tokens' part. */
static void shard_pieces(const bs_shard *s, bs_shard *cache, bs_shard *fresh) {
  *cache = *fresh = *s;
  cache->n_cache = fresh->n_cache = 0;
  cache->n_total = s->n_cache;
  fresh->n_total = s->n_total - s->n_cache;
}

int64_t bs_shard_tokens(const bs_shard *s) {
  if (s->n_cache > 0) {
    bs_shard c, f;
    shard_pieces(s, &c, &f);
    return bs_shard_tokens(&c) + bs_shard_tokens(&f);
  }
  return s->parts > 0 ? s->n_total / s->parts : 0;
}

/* The run of a runs shard holding local token i, and the tokens stored before it. */
static int32_t run_of(const bs_shard *s, int64_t i, int64_t *before) {
  const bs_runs *u = s->runs;
  int64_t at = 0;
  int32_t k = u->first[s->part];
  while (k + 1 < u->first[s->part + 1] && at + u->len[k] <= i) at += u->len[k++];
  *before = at;
  return k;
}

int64_t bs_shard_token(const bs_shard *s, int64_t i) {
  if (s->runs && s->parts > 1) {
    int64_t before;
    int32_t k = run_of(s, i, &before);
    return s->runs->pos[k] + (i - before);
  }
  if (s->n_cache > 0) {
    bs_shard c, f;
    shard_pieces(s, &c, &f);
    int64_t nc = bs_shard_tokens(&c);
    return i < nc ? bs_shard_token(&c, i) : s->n_cache + bs_shard_token(&f, i - nc);
  }
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
  if (s->runs && s->parts > 1) {
    int64_t before;
    int32_t k = run_of(s, i, &before);
    int64_t len = s->runs->len[k];
    return B * s->heads * before * width + ((b * s->heads + h) * len + (i - before)) * width;
  }
  if (s->n_cache > 0) {
    bs_shard c, f;
    shard_pieces(s, &c, &f);
    int64_t nc = bs_shard_tokens(&c);
    if (i < nc) return bs_shard_index(&c, B, b, h, i, width);
    return B * s->heads * nc * width + bs_shard_index(&f, B, b, h, i - nc, width);
  }
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
  s.b0 = 0;
  s.n_cache = 0;
  s.runs = NULL;
  return s;
}

/* ---------- visible pairs (the geometry is kernels/mask.h) ---------- */

int64_t plan_visible_pairs(const bs_workload *w, int64_t q0, int64_t nq, int64_t k0, int64_t nk, int64_t stride) {
  return bs_workload_pairs(w, q0, nq, k0, nk, stride);
}

int64_t bs_visible_pairs(int64_t q0, int64_t nq, int64_t k0, int64_t nk, int64_t stride, int causal, int64_t window) {
  attn_mask m = {q0, stride, k0, stride, causal, window, 0, NULL};
  return attn_mask_pairs(&m, nq, nk);
}

int64_t bs_workload_pairs(const bs_workload *w, int64_t q0, int64_t nq, int64_t k0, int64_t nk, int64_t stride) {
  attn_mask m = {q0, stride, k0, stride, w->causal, w->window, w->docs, w->doc_end};
  return attn_mask_pairs(&m, nq, nk);
}

/* The visible pairs of part `part` of `parts` of the sequence (split by layout) against every key. */
static double part_pairs(const bs_workload *w, bs_layout l, int part, int parts) {
  bs_shard s = plan_shard(l, part, parts, w->seq_len, 0, 1);
  int64_t n = bs_shard_tokens(&s), N = w->seq_len;
  if (parts <= 1) return (double)bs_workload_pairs(w, 0, N, 0, N, 1);
  if (s.layout == BS_STRIPED) { /* rows part + i x parts against keys at stride parts, offset by each key residue */
    double sum = 0;
    for (int64_t k = 0; k < parts; k++) sum += (double)bs_workload_pairs(w, part, n, k, N / parts, parts);
    return sum;
  }
  if (s.layout == BS_ZIGZAG)
    return (double)bs_workload_pairs(w, bs_shard_token(&s, 0), n / 2, 0, N, 1) +
           (double)bs_workload_pairs(w, bs_shard_token(&s, n / 2), n / 2, 0, N, 1);
  return (double)bs_workload_pairs(w, bs_shard_token(&s, 0), n, 0, N, 1);
}

double bs_attn_imbalance(const bs_workload *w, bs_layout l, int parts) {
  if (parts > 1 && (l == BS_DOC_ZIGZAG || l == BS_GREEDY)) {
    bs_runs *u;
    char err[256];
    if (plan_runs_make(w, l, parts, &u, err, sizeof err)) return 0; /* the plan refuses the layout */
    double x = plan_runs_imbalance(w, u);
    plan_runs_free(u);
    return x;
  }
  if (parts <= 1 || w->seq_len % parts != 0 || (l == BS_ZIGZAG && w->seq_len % (2 * (int64_t)parts) != 0)) return 1.0;
  double max = 0, sum = 0;
  for (int r = 0; r < parts; r++) {
    double x = part_pairs(w, l, r, parts);
    sum += x;
    if (x > max) max = x;
  }
  return sum > 0 ? max * parts / sum : 1.0;
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
  a.dv = (int)p->dv;
  a.scale = (float)(1.0 / sqrt((double)p->d));
  a.mask.q_stride = 1;
  a.mask.k_stride = 1;
  a.mask.causal = p->cfg.work.causal;
  a.mask.window = p->cfg.work.window;
  a.mask.docs = p->cfg.work.docs;
  a.mask.doc_end = p->cfg.work.docs > 0 ? p->cfg.work.doc_end : NULL;
  a.dtype = p->adt;
  return a;
}

int bs_plan_ranks(const bs_plan *p) { return p->G; }
const bs_config *bs_plan_config(const bs_plan *p) { return &p->cfg; }
const bs_mesh *bs_plan_mesh(const bs_plan *p) { return &p->mesh; }

void bs_plan_set_op_cache(bs_plan *p, int on) {
  p->no_op_cache = !on;
  p->no_op_share = on != 1;
}

/* Attention scope (composed or not) numbers the attention plan's ids; a workload whose count passes
 * INT32_MAX is refused at creation (plan_check_workload). */
int32_t bs_plan_buf_ids(const bs_plan *p) {
  int64_t per, inflight, ids;
  if (p->scope != &plan_scope_workload) return BS_PLAN_MAX_BUFS;
  return wl_buf_ids(p, &per, &inflight, &ids) ? BS_WL_MAX_BUFS : (int32_t)ids;
}

int bs_plan_inner_ranks(const bs_plan *p) {
  if (p->composed) return bs_plan_inner_ranks(p->attn);
  return p->M > 1 ? p->P : 1;
}
int bs_plan_has_bwd(const bs_plan *p) { return p->bwd; }
const bs_runs *bs_plan_runs(const bs_plan *p) { return p->attn && !p->runs ? bs_plan_runs(p->attn) : p->runs; }
int64_t bs_plan_local_batch(const bs_plan *p) { return p->mesh.micro_batch; }

attn_params bs_plan_reference_params(const bs_plan *p) {
  attn_params a = plan_attn_params(p, p->Zq, p->Zkv, p->decode ? p->nq_dec : p->N - p->Nc, p->N);
  if (p->decode) a.mask.q_pos0 = p->N;
  else a.mask.q_pos0 = p->Nc; /* prefill against a cache: the new tokens come after it */
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
