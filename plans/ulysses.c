/*
 * ulysses.c — DeepSpeed-Ulysses: an all-to-all turns sequence-sharded Q, K, V
 * (all heads, N/G tokens) into head-sharded ones (heads/G, all tokens), local
 * attention runs, and an all-to-all of O turns it back; the backward mirrors
 * it (dO in; dQ, dK, dV out). With method usp the all-to-alls run inside
 * groups of ulysses_degree ranks and a K,V ring (ring-flash-attention style
 * backward) runs across the groups (feifeibear/long-context-attention).
 *
 * usp placement (parallel.ulysses_placement): a rank's group gi and index ui in
 * it say which tokens it holds (piece ui of group gi's shard) either way; the
 * placement says which rank that is. head-first (rank gi * U +
 * ui) keeps a group on consecutive ranks, inside a node, and the ring joins
 * ranks U apart; ring-first (rank ui * R + gi, R groups) keeps a ring on
 * consecutive ranks and a group joins ranks R apart, across nodes.
 *
 * usp layouts (parallel.layout): the ring runs over the R group shards of that
 * layout (ring-flash-attention's zigzag and stripe rings); piece ui of its
 * group's shard is rank ui's sequence shard, and the all-to-all copies put the
 * pieces back in the shard's token order (token_order).
 *
 * KV-head replication (GQA with more ranks per group than KV heads, U = rep x kv_heads): the query
 * heads of group rank ui, [ui hq, (ui + 1) hq), all read KV head ui / rep, so K and V are repeated
 * rep times along the head axis before the sequence-to-head all-to-all (head h becomes heads
 * h rep .. h rep + rep - 1) and rank ui receives its one KV head for the group's tokens: the
 * all-to-all of K and of V carries U heads instead of kv_heads. That is verl's Ulysses
 * (verl/models/transformers/monkey_patch.py, _ulysses_flash_attention_forward: repeat_kv by
 * max(ulysses_sp_size // kv_heads, 1) before gather_seq_scatter_heads). Its backward is autograd's:
 * the head-to-sequence all-to-all of dK, dV carries the U replicas back to the tokens' owner, which
 * sums the rep replicas of each KV head (the gradient of the repeat): U fp32 adds of B x n x d
 * elements on each of dK and dV (replicate, sum_replicas). usp's ring passes the one head between.
 */
#include "plan_impl.h"

static int deg(const bs_plan *p) { return p->cfg.par.method == BS_USP ? p->cfg.par.ulysses_degree : p->G; }

/* Replicas of each of a tensor's Z heads in the all-to-all (U / Z when a group has more ranks than
 * K,V heads, else 1), and the heads it then carries. Query-side tensors always have Z >= U. */
static int64_t reps(const bs_plan *p, int64_t Z) { return Z < deg(p) ? deg(p) / Z : 1; }
static int64_t sent_heads(const bs_plan *p, int64_t Z) { return Z * reps(p, Z); }

static int check_ulysses(const bs_plan *p, char *err, size_t errlen) {
  const char *m = bs_method_name(p->cfg.par.method);
  int U = deg(p);
  if (p->cfg.par.layout != BS_CONTIGUOUS && p->cfg.par.method != BS_USP) {
    snprintf(err, errlen, "parallel.layout: %s gathers contiguous shards; %s is not supported", m,
             bs_layout_name(p->cfg.par.layout));
    return -1;
  }
  if (p->cfg.par.method == BS_USP && (U < 1 || p->G % U != 0)) {
    snprintf(err, errlen, "parallel.ulysses_degree: %d does not divide gpus %d", U, p->G);
    return -1;
  }
  if (p->cfg.par.layout == BS_ZIGZAG && U > 1 && U % 2) {
    snprintf(err, errlen,
             "parallel.ulysses_degree: usp's zigzag ring splits each group's two chunks in halves; %d is odd", U);
    return -1;
  }
  if (p->cfg.par.layout == BS_ZIGZAG && p->N % (2 * (int64_t)p->G) != 0) {
    snprintf(err, errlen, "parallel.gpus: zigzag needs 2 x gpus (%lld) to divide seq_len %lld",
             (long long)(2 * (int64_t)p->G), (long long)p->N);
    return -1;
  }
  const char *name = p->cfg.par.method == BS_USP ? "ulysses_degree" : "gpus";
  const char *key = p->cfg.par.method == BS_USP ? "parallel.ulysses_degree" : "parallel.gpus";
  if (U > p->Zq) { /* every rank of a group takes at least one query head */
    snprintf(err, errlen, "%s: %s needs %s <= heads: %d > %lld", key, m, name, U, (long long)p->Zq);
    return -1;
  }
  if (p->Zq % U != 0) {
    snprintf(err, errlen, "%s: %d does not divide heads %lld (%s scatters whole query heads)", key, U, (long long)p->Zq,
             m);
    return -1;
  }
  if (!plan_kv_split_ok(p->Zkv, U)) {
    snprintf(err, errlen,
             "%s: %d must divide kv_heads %lld, or be a multiple of it (then each KV head is replicated on %s / "
             "kv_heads ranks)",
             key, U, (long long)p->Zkv, name);
    return -1;
  }
  if (p->N % p->G != 0) {
    snprintf(err, errlen, "parallel.gpus: %d does not divide seq_len %lld", p->G, (long long)p->N);
    return -1;
  }
  return 0;
}

/* usp: the layout of the ring across groups (parallel.layout); ulysses: one group, contiguous. */
static bs_layout ring_layout(const bs_plan *p) {
  return p->cfg.par.method == BS_USP ? p->cfg.par.layout : BS_CONTIGUOUS;
}

static int ring_first(const bs_plan *p) {
  return p->cfg.par.method == BS_USP && p->cfg.par.ulysses_placement == BS_RING_FIRST;
}

/* A rank's group (of R = G / U) and its index in it. */
static void group_of(const bs_plan *p, int rank, int *gi, int *ui) {
  int U = deg(p), R = p->G / U;
  *gi = ring_first(p) ? rank % R : rank / U;
  *ui = ring_first(p) ? rank / R : rank % U;
}

static bs_group ugroup(const bs_plan_iter *it) {
  const bs_plan *p = it->p;
  int U = deg(p), gi, ui;
  group_of(p, it->rank, &gi, &ui);
  bs_group g = {gi * U, 1, U};
  if (ring_first(p)) g.first = gi, g.stride = p->G / U;
  return g;
}

static bs_compute *copy_at(bs_plan_iter *it, bs_ref src, bs_ref dst, int64_t bytes, int64_t ta, int64_t tb,
                           int64_t chunk) {
  bs_compute *c = plan_compute(it, BS_K_COPY);
  c->elems = bytes;
  c->t_a = ta;
  c->t_b = tb;
  c->t_chunk = chunk;
  c->in[0] = src;
  c->out[0] = dst;
  return c;
}

static bs_compute *copy_op(bs_plan_iter *it, int32_t src, int32_t dst, int64_t bytes, int64_t ta, int64_t tb,
                           int64_t chunk) {
  return copy_at(it, R(src, 0), R(dst, 0), bytes, ta, tb, chunk);
}

/*
 * How a group's head-sharded tokens [B][h][U n][w] come from its U ranks' pieces [U][B][h][n][w]
 * (usp layouts, U > 1). Contiguous: piece after piece. Striped: rank ui of the group holds the
 * group's tokens ui, ui + U, ...: pieces interleave token by token. Zigzag: the group's two chunks
 * are stored one after the other ([2][B][h][U/2 n][w], bs_shard_index), the first U/2 ranks
 * holding the first: piece after piece within each half.
 */
typedef enum { TOK_PIECES = 0, TOK_INTERLEAVED, TOK_HALVES } tok_order;

static tok_order token_order(const bs_plan *p) {
  if (p->cfg.par.method != BS_USP) return TOK_PIECES;
  if (p->cfg.par.layout == BS_STRIPED) return TOK_INTERLEAVED;
  if (p->cfg.par.layout == BS_ZIGZAG && p->G / deg(p) > 1) return TOK_HALVES;
  return TOK_PIECES;
}

/* [U][B h][n w] pieces -> the group's order (to_group), or back. */
static void regroup(bs_plan_iter *it, int32_t src, int32_t dst, int64_t bytes, int64_t Bh, int64_t n, int64_t w_eb,
                    int to_group) {
  int U = deg(it->p);
  switch (token_order(it->p)) {
  case TOK_INTERLEAVED:
    if (to_group) copy_op(it, src, dst, bytes, U, Bh * n, w_eb);
    else copy_op(it, src, dst, bytes, Bh * n, U, w_eb);
    return;
  case TOK_HALVES:
    for (int64_t z = 0, half = bytes / 2; z < 2; z++) {
      if (to_group) copy_at(it, R(src, z * half), R(dst, z * half), half, U / 2, Bh, n * w_eb);
      else copy_at(it, R(src, z * half), R(dst, z * half), half, Bh, U / 2, n * w_eb);
    }
    return;
  default:
    if (to_group) copy_op(it, src, dst, bytes, U, Bh, n * w_eb);
    else copy_op(it, src, dst, bytes, Bh, U, n * w_eb);
  }
}

/*
 * The all-to-all's send buffer [U][B][n][w] of a tensor with fewer heads Z than the U ranks: block
 * ui is head ui / rep of src [B][Z][n][w] (repeat_kv, then the blocks of one head each). With more
 * than one sequence the heads are first brought in front ([Z][B][n][w]), then copied whole.
 */
static int32_t replicate(bs_plan_iter *it, int32_t src, int64_t Z, int64_t w, int64_t eb) {
  const bs_plan *p = it->p;
  int U = deg(p);
  int64_t n = p->N / p->G, X = p->B * n * w * eb, rep = reps(p, Z);
  int32_t base = src, t = -1;
  if (p->B > 1) {
    t = plan_alloc(it, Z * X, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    copy_op(it, src, t, Z * X, p->B, Z, n * w * eb);
    base = t;
  }
  int32_t send = plan_alloc(it, U * X, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  for (int ui = 0; ui < U; ui++) copy_at(it, R(base, (ui / rep) * X), R(send, ui * X), X, 0, 0, 0);
  if (t >= 0) plan_free(it, t);
  return send;
}

/* Sequence-sharded src [B][Z][n][w] -> head-sharded [B][Z/U][U*n][w] (one replicated head when
 * Z < U): post. */
static void s2h_post(bs_plan_iter *it, a2a_xfer *x, int32_t src, int64_t Z, int64_t w, int64_t eb) {
  const bs_plan *p = it->p;
  int U = deg(p);
  int64_t Zs = sent_heads(p, Z), n = p->N / p->G, h = Zs / U, bytes = p->B * Zs * n * w * eb;
  memset(x, 0, sizeof *x);
  x->src = src;
  x->Z = Z;
  x->w = w;
  x->eb = eb;
  x->pk = -1;
  x->rv = -1;
  x->h = -1;
  x->dst = src;
  if (U == 1) return;
  int32_t send = src;
  if (Zs > Z) {
    x->pk = send = replicate(it, src, Z, w, eb);
  } else if (p->B > 1) {
    x->pk = plan_alloc(it, bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    copy_op(it, src, x->pk, bytes, p->B, U, h * n * w * eb);
    send = x->pk;
  }
  x->rv = plan_alloc(it, bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  x->h = plan_coll(it, BS_COLL_ALLTOALL, BS_RED_SUM, eb == 4 ? BS_ELEM_F32 : p->elem, ugroup(it), R(send, 0),
                   R(x->rv, 0), bytes);
}

static void s2h_finish(bs_plan_iter *it, a2a_xfer *x, bs_mem_class cls) {
  const bs_plan *p = it->p;
  int U = deg(p);
  if (U == 1) return;
  int64_t Zs = sent_heads(p, x->Z), n = p->N / p->G, h = Zs / U, bytes = p->B * Zs * n * x->w * x->eb;
  plan_free(it, x->pk);
  x->dst = plan_alloc(it, bytes, cls, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  regroup(it, x->rv, x->dst, bytes, p->B * h, n, x->w * x->eb, 1);
  plan_free(it, x->rv);
}

/* Head-sharded src -> sequence-sharded role buffer dst (U > 1 only; the replicas of a KV head, when
 * Z < U, come back to be summed in h2s_finish): post. */
static void h2s_post(bs_plan_iter *it, a2a_xfer *x, int32_t src, int32_t dst, int64_t Z, int64_t w, int64_t eb) {
  const bs_plan *p = it->p;
  int U = deg(p);
  int64_t Zs = sent_heads(p, Z), n = p->N / p->G, h = Zs / U, bytes = p->B * Zs * n * w * eb;
  memset(x, 0, sizeof *x);
  x->src = src;
  x->dst = dst;
  x->Z = Z;
  x->w = w;
  x->eb = eb;
  x->pk = plan_alloc(it, bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  regroup(it, src, x->pk, bytes, p->B * h, n, w * eb, 0);
  x->rv = p->B > 1 || Zs > Z ? plan_alloc(it, bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32) : dst;
  x->h = plan_coll(it, BS_COLL_ALLTOALL, BS_RED_SUM, eb == 4 ? BS_ELEM_F32 : p->elem, ugroup(it), R(x->pk, 0),
                   R(x->rv, 0), bytes);
}

/*
 * The received replicas rv [U][B][n][w] (block ui: the gradient of replica ui % rep of head ui / rep)
 * summed into dst [B][Z][n][w]: rep fp32 adds per head into [Z][B][n][w], which is dst itself for
 * one sequence (a role buffer, zero-filled) and otherwise a buffer brought back to [B][Z] order.
 */
static void sum_replicas(bs_plan_iter *it, const a2a_xfer *x) {
  const bs_plan *p = it->p;
  int U = deg(p);
  int64_t n = p->N / p->G, X = p->B * n * x->w * x->eb, rep = reps(p, x->Z);
  int32_t acc = p->B > 1 ? plan_alloc(it, x->Z * X, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32) : x->dst;
  for (int ui = 0; ui < U; ui++) {
    bs_compute *c = plan_compute(it, BS_K_ELEMWISE);
    c->ew = BS_EW_ADD;
    c->elems = X / 4;
    c->in[0] = R(x->rv, ui * X);
    c->out[0] = R(acc, (ui / rep) * X);
  }
  if (p->B > 1) {
    copy_op(it, acc, x->dst, x->Z * X, x->Z, p->B, n * x->w * x->eb);
    plan_free(it, acc);
  }
}

static void h2s_finish(bs_plan_iter *it, a2a_xfer *x) {
  const bs_plan *p = it->p;
  int U = deg(p);
  int64_t n = p->N / p->G, h = x->Z / U, bytes = p->B * x->Z * n * x->w * x->eb;
  plan_free(it, x->pk);
  if (reps(p, x->Z) > 1) {
    sum_replicas(it, x);
    plan_free(it, x->rv);
  } else if (p->B > 1) {
    copy_op(it, x->rv, x->dst, bytes, U, p->B, h * n * x->w * x->eb);
    plan_free(it, x->rv);
  }
}

static void wait_xfers(bs_plan_iter *it, const a2a_xfer *xf, int n) {
  int32_t hs[4];
  int nh = 0;
  for (int j = 0; j < n; j++)
    if (xf[j].h >= 0) hs[nh++] = xf[j].h;
  if (nh) plan_wait(it, hs, nh);
}

/* What a rank holds from the forward into the backward. */
typedef struct {
  int32_t qkv[3];            /* sequence-sharded q, k, v (role buffers) */
  int32_t qkvh[3];           /* head-sharded q, k, v (the role buffers themselves when U = 1) */
  int32_t o, lse, oh;        /* o (role), lse (head-sharded role), head-sharded o */
  int32_t dout, doh, delh;   /* dO (role), head-sharded dO, head-sharded delta */
  int32_t dqkv[3], dqkvh[3]; /* dq, dk, dv: role buffers, head-sharded */
  a2a_xfer xf[3];
  ring_fwd rf; /* usp: the K,V ring across groups */
  ring_bwd rb;
  int seg, k; /* segment and ring step */
} uly_state;

/* The shapes of a rank: U ranks per all-to-all group, R_ groups (usp ring). */
typedef struct {
  int U, R_, gi, ui, ring;         /* ring: usp with more than one group */
  int32_t ring_first, ring_stride; /* usp: the rank of ring position x is ring_first + ring_stride * x */
  int64_t n, hq, hkv, Ng;          /* tokens per rank, heads per rank after the all-to-all, tokens of a group */
  int32_t kv0;                     /* the first K,V head of a rank after the all-to-all (replicated: ui / rep) */
  bs_shard qseq, kseq;             /* sequence-sharded role shards */
  bs_shard qh, kh;                 /* head-sharded shards */
} uly_geo;

static uly_geo geometry(const bs_plan_iter *it) {
  const bs_plan *p = it->p;
  uly_geo g;
  int r = it->rank;
  g.U = deg(p);
  g.R_ = p->G / g.U;
  group_of(p, r, &g.gi, &g.ui);
  g.ring = p->cfg.par.method == BS_USP && g.R_ > 1;
  g.ring_first = ring_first(p) ? g.ui * g.R_ : g.ui;
  g.ring_stride = ring_first(p) ? 1 : g.U;
  g.n = p->N / p->G;
  g.hq = p->Zq / g.U;
  g.hkv = plan_kv_heads_per_rank(p->Zkv, g.U);
  g.kv0 = (int32_t)(g.ui * g.hkv / reps(p, p->Zkv));
  g.Ng = g.n * g.U;
  bs_layout l = ring_layout(p);
  bs_layout seq_l = l;
  int part = g.gi * g.U + g.ui; /* contiguous: the group's chunk, piece ui */
  if (l == BS_STRIPED) part = g.gi + g.R_ * g.ui;
  else if (l == BS_ZIGZAG && g.U == 1) part = g.gi;
  else if (l == BS_ZIGZAG) { /* half of the pieces in each of the group's two chunks, each contiguous */
    int half = g.U / 2;
    seq_l = BS_CONTIGUOUS;
    part = g.ui < half ? g.gi * half + g.ui : (2 * g.R_ - 1 - g.gi) * half + (g.ui - half);
  }
  g.qseq = plan_shard(seq_l, part, p->G, p->N, 0, (int32_t)p->Zq);
  g.kseq = plan_shard(seq_l, part, p->G, p->N, 0, (int32_t)p->Zkv);
  g.qh = plan_shard(l, g.gi, g.R_, p->N, (int32_t)(g.ui * g.hq), (int32_t)g.hq);
  g.kh = plan_shard(l, g.gi, g.R_, p->N, g.kv0, (int32_t)g.hkv);
  return g;
}

/* usp: the forward K,V ring over the R_ groups (rank ui of every group). */
static void fwd_ring_begin(bs_plan_iter *it, uly_state *s, const uly_geo *g) {
  const bs_plan *p = it->p;
  ring_fwd *rf = &s->rf;
  rf->first = g->ring_first;
  rf->stride = g->ring_stride;
  rf->P = g->R_;
  rf->M = 1;
  rf->a = 0;
  rf->i = g->gi;
  rf->hq = g->hq;
  rf->hkv = g->hkv;
  rf->qs = g->qh;
  rf->qpos_off = 0;
  rf->ks = plan_shard(ring_layout(p), 0, g->R_, p->N, g->kv0, (int32_t)g->hkv);
  rf->q = s->qkvh[0];
  rf->o = s->oh;
  rf->lse = s->lse;
  rf->k0 = s->qkvh[1];
  rf->v0 = s->qkvh[2];
  rf->scores = -1;
  rf->kv_bytes = p->B * g->hkv * g->Ng * p->d * p->es;
  rf->v_bytes = rf->kv_bytes; /* usp runs with v's head dimension equal to d (create.c) */
  ring_fwd_begin(it, rf);
}

/* Forward begin: q, k, v to head-sharded, then local attention (returns 0) or
 * the usp ring's set-up (returns 1: ring steps follow). */
static int fwd_begin(bs_plan_iter *it, uly_state *s, const uly_geo *g) {
  const bs_plan *p = it->p;
  int init[2] = {0, 0};
  plan_phase(it, 0, 1);
  it->step = 0;
  s->qkv[0] = plan_alloc(it, p->B * p->Zq * g->n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_Q, &g->qseq, p->elem);
  s->qkv[1] = plan_alloc(it, p->B * p->Zkv * g->n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_K, &g->kseq, p->elem);
  s->qkv[2] = plan_alloc(it, p->B * p->Zkv * g->n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_V, &g->kseq, p->elem);
  s2h_post(it, &s->xf[0], s->qkv[0], p->Zq, p->d, p->es);
  s2h_post(it, &s->xf[1], s->qkv[1], p->Zkv, p->d, p->es);
  s2h_post(it, &s->xf[2], s->qkv[2], p->Zkv, p->d, p->es);
  wait_xfers(it, s->xf, 3);
  for (int j = 0; j < 3; j++) {
    s2h_finish(it, &s->xf[j], BS_MEM_ACTIVATIONS);
    s->qkvh[j] = s->xf[j].dst;
  }
  s->lse = plan_alloc(it, p->B * g->hq * g->Ng * 4, BS_MEM_OUTPUT, BS_ROLE_LSE, &g->qh, BS_ELEM_F32);
  if (g->U == 1)
    s->oh = s->o = plan_alloc(it, p->B * g->hq * g->Ng * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_O, &g->qseq, BS_ELEM_F32);
  else s->oh = plan_alloc(it, p->B * g->hq * g->Ng * p->d * 4, BS_MEM_ACTIVATIONS, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  if (!g->ring) {
    it->step = 1;
    attn_bufs b = {s->qkvh[0], s->qkvh[1], s->qkvh[2], s->oh, s->lse, -1, -1, -1, -1, -1, -1};
    plan_emit_attn(it, 0, 0, g->hq, g->hkv, &g->qh, 0, &g->kh, &b, init);
    return 0;
  }
  fwd_ring_begin(it, s, g);
  return 1;
}

/* Forward end: o back to sequence-sharded; in prefill the head-sharded copies go. */
static void fwd_end(bs_plan_iter *it, uly_state *s, const uly_geo *g) {
  const bs_plan *p = it->p;
  it->step = 1000;
  if (g->U > 1) {
    s->o = plan_alloc(it, p->B * p->Zq * g->n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_O, &g->qseq, BS_ELEM_F32);
    h2s_post(it, &s->xf[0], s->oh, s->o, p->Zq, p->d, 4);
    wait_xfers(it, s->xf, 1);
    h2s_finish(it, &s->xf[0]);
  }
  if (!p->bwd) {
    for (int j = 0; j < 3; j++)
      if (s->qkvh[j] != s->qkv[j]) plan_free(it, s->qkvh[j]);
    if (g->U > 1) plan_free(it, s->oh);
  }
  it->step = -1;
  plan_phase(it, 0, 0);
}

/* A packet part of the usp backward ring (read-only K, V or accumulated dK, dV). */
static pkt_part ring_part(int msg, int32_t local, int64_t bytes, int acc, int32_t ret_buf, int ret_msg) {
  pkt_part pp = {.msg = msg,
                 .local = local,
                 .rb = {-1, -1},
                 .rin = -1,
                 .orb = {-1, -1},
                 .rout = -1,
                 .sout = -1,
                 .bytes = bytes,
                 .acc = acc,
                 .ret_buf = ret_buf,
                 .ret_msg = ret_msg};
  return pp;
}

/* usp: the backward K,V ring over the groups (ring-flash-attention style). */
static void bwd_ring_begin(bs_plan_iter *it, uly_state *s, const uly_geo *g) {
  const bs_plan *p = it->p;
  ring_bwd *rb = &s->rb;
  memset(rb, 0, sizeof *rb);
  rb->first = g->ring_first;
  rb->stride = g->ring_stride;
  rb->P = g->R_;
  rb->M = 1;
  rb->a = 0;
  rb->i = g->gi;
  rb->hq = g->hq;
  rb->hkv = g->hkv;
  rb->kind = 1;
  rb->my = g->qh;
  rb->tmpl = plan_shard(ring_layout(p), 0, g->R_, p->N, g->kv0, (int32_t)g->hkv);
  rb->q = s->qkvh[0];
  rb->dout = s->doh;
  rb->lse = s->lse;
  rb->delta = s->delh;
  rb->dq = s->dqkvh[0];
  rb->o = -1;
  rb->scores = -1;
  rb->tmp_delta = -1;
  int64_t kvb = p->B * g->hkv * g->Ng * p->d;
  rb->part[0] = ring_part(MSG_K, s->qkvh[1], kvb * p->es, 0, -1, 0);
  rb->part[1] = ring_part(MSG_V, s->qkvh[2], kvb * p->es, 0, -1, 0);
  rb->part[2] = ring_part(MSG_DK, -1, kvb * 4, 1, s->dqkvh[1], MSG_RET_DK);
  rb->part[3] = ring_part(MSG_DV, -1, kvb * 4, 1, s->dqkvh[2], MSG_RET_DV);
  rb->nparts = 4;
  ring_bwd_begin(it, rb);
}

/* The head-sharded dQ, dK, dV (the role buffers themselves when U = 1). */
static void bwd_grads(bs_plan_iter *it, uly_state *s, const uly_geo *g) {
  const bs_plan *p = it->p;
  if (g->U == 1) {
    s->dqkvh[0] = s->dqkv[0] =
      plan_alloc(it, p->B * p->Zq * g->n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DQ, &g->qseq, BS_ELEM_F32);
    s->dqkvh[1] = s->dqkv[1] =
      plan_alloc(it, p->B * p->Zkv * g->n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DK, &g->kseq, BS_ELEM_F32);
    s->dqkvh[2] = s->dqkv[2] =
      plan_alloc(it, p->B * p->Zkv * g->n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DV, &g->kseq, BS_ELEM_F32);
  } else {
    s->dqkvh[0] = plan_alloc(it, p->B * g->hq * g->Ng * p->d * 4, BS_MEM_ACTIVATIONS, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    s->dqkvh[1] = plan_alloc(it, p->B * g->hkv * g->Ng * p->d * 4, BS_MEM_ACTIVATIONS, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    s->dqkvh[2] = plan_alloc(it, p->B * g->hkv * g->Ng * p->d * 4, BS_MEM_ACTIVATIONS, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  }
}

/* Backward begin: dO to head-sharded, delta, the gradients, then local
 * attention backward (returns 0) or the usp ring's set-up (returns 1). */
static int bwd_begin(bs_plan_iter *it, uly_state *s, const uly_geo *g) {
  const bs_plan *p = it->p;
  int init[2] = {0, 0};
  plan_phase(it, 1, 1);
  it->step = 0;
  s->dout = plan_alloc(it, p->B * p->Zq * g->n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_DOUT, &g->qseq, p->elem);
  s2h_post(it, &s->xf[0], s->dout, p->Zq, p->d, p->es);
  wait_xfers(it, s->xf, 1);
  s2h_finish(it, &s->xf[0], BS_MEM_ACTIVATIONS);
  s->doh = s->xf[0].dst;
  s->delh = plan_alloc(it, p->B * g->hq * g->Ng * 4, BS_MEM_WORKSPACE, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  plan_emit_delta(it, g->hq, g->hkv, g->Ng, s->oh, s->doh, s->delh); /* d = dv: create.c refuses ulysses otherwise */
  bwd_grads(it, s, g);
  if (!g->ring) {
    it->step = 1;
    attn_bufs b = {s->qkvh[0], s->qkvh[1],  s->qkvh[2],  -1,          s->lse, s->doh,
                   s->delh,    s->dqkvh[0], s->dqkvh[1], s->dqkvh[2], -1};
    plan_emit_attn(it, 1, 0, g->hq, g->hkv, &g->qh, 0, &g->kh, &b, init);
    return 0;
  }
  bwd_ring_begin(it, s, g);
  return 1;
}

/* Backward end: dQ, dK, dV back to sequence-sharded; the head-sharded copies go. */
static void bwd_end(bs_plan_iter *it, uly_state *s, const uly_geo *g) {
  const bs_plan *p = it->p;
  it->step = 1000;
  if (g->U > 1) {
    s->dqkv[0] = plan_alloc(it, p->B * p->Zq * g->n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DQ, &g->qseq, BS_ELEM_F32);
    s->dqkv[1] = plan_alloc(it, p->B * p->Zkv * g->n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DK, &g->kseq, BS_ELEM_F32);
    s->dqkv[2] = plan_alloc(it, p->B * p->Zkv * g->n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DV, &g->kseq, BS_ELEM_F32);
    h2s_post(it, &s->xf[0], s->dqkvh[0], s->dqkv[0], p->Zq, p->d, 4);
    h2s_post(it, &s->xf[1], s->dqkvh[1], s->dqkv[1], p->Zkv, p->d, 4);
    h2s_post(it, &s->xf[2], s->dqkvh[2], s->dqkv[2], p->Zkv, p->d, 4);
    wait_xfers(it, s->xf, 3);
    for (int j = 0; j < 3; j++) h2s_finish(it, &s->xf[j]);
    for (int j = 0; j < 3; j++) plan_free(it, s->dqkvh[j]);
    for (int j = 0; j < 3; j++) plan_free(it, s->qkvh[j]);
    plan_free(it, s->oh);
    plan_free(it, s->doh);
  }
  plan_free(it, s->delh);
  it->step = -1;
  plan_phase(it, 1, 0);
}

/* Segments: 0 forward begin, 1 usp forward ring, 2 forward end, 3 backward
 * begin, 4 usp backward ring, 5 backward end. */
static int gen_ulysses(bs_plan_iter *it, void *state) {
  uly_state *s = state;
  uly_geo g = geometry(it);
  switch (s->seg) {
  case 0:
    s->seg = fwd_begin(it, s, &g) ? 1 : 2;
    s->k = 0;
    return 1;
  case 1:
    if (ring_fwd_step(it, &s->rf, s->k)) {
      s->k++;
      return 1;
    }
    ring_fwd_end(it, &s->rf);
    s->seg = 2;
    return 1;
  case 2:
    fwd_end(it, s, &g);
    s->seg = it->p->bwd ? 3 : 6;
    return 1;
  case 3:
    s->seg = bwd_begin(it, s, &g) ? 4 : 5;
    s->k = 0;
    return 1;
  case 4:
    if (ring_bwd_step(it, &s->rb, s->k)) {
      s->k++;
      return 1;
    }
    ring_bwd_end(it, &s->rb);
    s->seg = 5;
    return 1;
  case 5:
    bwd_end(it, s, &g);
    s->seg = 6;
    return 1;
  default: return 0;
  }
}

const plan_method plan_method_ulysses = {
  .check = check_ulysses,
  .gen = gen_ulysses,
  .state_size = sizeof(uly_state),
  .double_ring = 0,
  .decode = 0,
  .ring = 0,
  .a2a = 1,
};

/* usp runs ulysses' generator: its groups and ring follow parallel.ulysses_degree. */
const plan_method plan_method_usp = {
  .check = check_ulysses,
  .gen = gen_ulysses,
  .state_size = sizeof(uly_state),
  .double_ring = 0,
  .decode = 0,
  .ring = 2,
  .a2a = 2,
};
