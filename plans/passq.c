/*
 * passq.c — pass-Q context parallelism (Meta's CP inference for Llama 3,
 * arXiv 2411.01783 §3.2-3.3): instead of the K,V shards, each rank's query
 * shard travels the ring (double buffered, as K,V do in ring_engine.c). At
 * every step the visiting queries attend to the local K,V with the mask of
 * their true positions, and the partial output with its log-sum-exp is kept,
 * one block per visiting shard. At the end one all-to-all over the ring's
 * ranks returns the partials to the queries' owners, who merge them by their
 * lse (the online-softmax merge, BS_K_ATTN_MERGE). Forward only (prefill and
 * decode). It wins over pass-KV when the queries are fewer than the keys: at
 * decode, and at prefill against a KV cache holding most of the context.
 *
 * The partials are fp32 (the kernels' output type); the K,V a rank holds is
 * its shard of the whole context, cache included (bs_shard.n_cache).
 */
#include "plan_impl.h"

static int md(int x, int m) { return ((x % m) + m) % m; }

/* The query shard of ring position `part`: decode splits the new tokens contiguously, prefill by the layout. */
static bs_shard pq_qshard(const bs_plan *p, int part) {
  if (p->decode) return plan_shard(BS_CONTIGUOUS, part, p->G, p->nq_dec, 0, (int32_t)p->Zq);
  return plan_shard(p->cfg.par.layout, part, p->G, p->N - p->Nc, 0, (int32_t)p->Zq);
}

static bs_shard pq_kshard(const bs_plan *p, int part) {
  bs_shard s = plan_shard(p->cfg.par.layout, part, p->G, p->N, 0, (int32_t)p->Zkv);
  if (p->decode) s.layout = BS_CONTIGUOUS;
  s.n_cache = p->Nc;
  return s;
}

static void pq_begin(bs_plan_iter *it, passq *s, int unfused) {
  const bs_plan *p = it->p;
  const int G = p->G, r = it->rank;
  s->qs = pq_qshard(p, r);
  s->ks = pq_kshard(p, r);
  s->qpos_off = p->decode ? p->N : p->Nc;
  const int64_t nq = bs_shard_tokens(&s->qs), nk = bs_shard_tokens(&s->ks);
  s->q_bytes = p->B * p->Zq * nq * p->d * p->es;
  s->o_blk = p->B * p->Zq * nq * p->dv * 4;
  s->l_blk = p->B * p->Zq * nq * 4;
  plan_phase(it, 0, 1);
  s->q = plan_alloc(it, s->q_bytes, BS_MEM_INPUT, BS_ROLE_Q, &s->qs, p->elem);
  s->k = plan_alloc(it, p->B * p->Zkv * nk * p->d * p->es, BS_MEM_INPUT, BS_ROLE_K, &s->ks, p->elem);
  s->v = plan_alloc(it, p->B * p->Zkv * nk * p->dv * p->es, BS_MEM_INPUT, BS_ROLE_V, &s->ks, p->elem);
  s->o = plan_alloc(it, s->o_blk, BS_MEM_OUTPUT, BS_ROLE_O, &s->qs, BS_ELEM_F32);
  s->lse = plan_alloc(it, s->l_blk, BS_MEM_OUTPUT, BS_ROLE_LSE, &s->qs, BS_ELEM_F32);
  s->scores = -1;
  if (unfused) { /* the largest (query block x key block) score tile */
    int64_t qlen = s->qs.layout == BS_ZIGZAG ? nq / 2 : nq, klen = s->ks.layout == BS_ZIGZAG ? nk / 2 : nk;
    s->scores = plan_alloc(it, p->B * p->Zq * qlen * klen * 4, BS_MEM_SCORES, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  }
  s->qb[0] = s->qb[1] = s->po = s->pl = s->ro = s->rl = -1;
  if (G > 1) {
    s->qb[0] = plan_alloc(it, s->q_bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, p->elem);
    if (G > 2) s->qb[1] = plan_alloc(it, s->q_bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, p->elem);
    s->po = plan_alloc(it, G * s->o_blk, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    s->pl = plan_alloc(it, G * s->l_blk, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  }
}

/* Step t: the query shard of ring position x - t attends to my K,V while the next one arrives. */
static void pq_step(bs_plan_iter *it, passq *s, int unfused, int t) {
  const bs_plan *p = it->p;
  const int G = p->G, x = it->rank, origin = md(x - t, G);
  it->step = t;
  int32_t cur = t == 0 ? s->q : s->qb[(t - 1) % 2], hs[2];
  int nh = 0;
  if (t < G - 1) {
    hs[nh++] = plan_recv(it, md(x - 1, G), MSG_Q, R(s->qb[t % 2], 0), s->q_bytes);
    hs[nh++] = plan_send(it, md(x + 1, G), MSG_Q, R(cur, 0), s->q_bytes);
  }
  bs_shard vq = pq_qshard(p, origin);
  int init[2] = {0, 0};
  if (t == 0) { /* my own queries: straight into the output */
    attn_bufs b = {cur, s->k, s->v, s->o, s->lse, -1, -1, -1, -1, -1, s->scores};
    plan_emit_attn(it, 0, unfused, p->Zq, p->Zkv, &vq, s->qpos_off, &s->ks, &b, init);
  } else if (plan_shard_pairs(p, &vq, s->qpos_off, &s->ks, -1) > 0) {
    attn_bufs b = {cur, s->k, s->v, s->po, s->pl, -1, -1, -1, -1, -1, s->scores};
    plan_emit_attn_at(it, unfused, p->Zq, p->Zkv, &vq, s->qpos_off, &s->ks, &b, init, origin * s->o_blk,
                      origin * s->l_blk);
  }
  if (nh) plan_wait(it, hs, nh);
}

/* The all-to-all of the partials and the merge of mine; then the FREEs. */
static void pq_end(bs_plan_iter *it, passq *s) {
  const bs_plan *p = it->p;
  const int G = p->G, x = it->rank;
  it->step = -1;
  if (G > 1) {
    bs_group g = {0, 1, G};
    s->ro = plan_alloc(it, G * s->o_blk, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    s->rl = plan_alloc(it, G * s->l_blk, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    int32_t h[2];
    h[0] = plan_coll(it, BS_COLL_ALLTOALL, BS_RED_SUM, BS_ELEM_F32, g, R(s->po, 0), R(s->ro, 0), G * s->o_blk);
    h[1] = plan_coll(it, BS_COLL_ALLTOALL, BS_RED_SUM, BS_ELEM_F32, g, R(s->pl, 0), R(s->rl, 0), G * s->l_blk);
    plan_wait(it, h, 2);
    plan_free(it, s->po);
    plan_free(it, s->pl);
    /* Merge, chunk by chunk (zigzag has two), the partials of every rank that saw the chunk: a
     * chunk no key of rank src sees was never written there. */
    const int64_t nq = bs_shard_tokens(&s->qs);
    const int chunks = s->qs.layout == BS_ZIGZAG && s->qs.parts > 1 ? 2 : 1;
    const int64_t len = nq / chunks;
    for (int src = 0; src < G; src++) {
      if (src == x) continue;
      bs_shard ks = pq_kshard(p, src);
      for (int ch = 0; ch < chunks; ch++) {
        if (plan_shard_pairs(p, &s->qs, s->qpos_off, &ks, ch) <= 0) continue;
        int64_t rows = p->B * p->Zq * len, row0 = ch * rows;
        bs_compute *c = plan_compute(it, BS_K_ATTN_MERGE);
        c->a = plan_attn_params(p, p->Zq, p->Zkv, len, len);
        c->elems = rows * p->dv;
        c->in[0] = R(s->ro, src * s->o_blk + row0 * p->dv * 4);
        c->in[1] = R(s->rl, src * s->l_blk + row0 * 4);
        c->out[0] = R(s->o, row0 * p->dv * 4);
        c->out[1] = R(s->lse, row0 * 4);
      }
    }
    plan_free(it, s->ro);
    plan_free(it, s->rl);
  }
  plan_free(it, s->qb[0]);
  plan_free(it, s->qb[1]);
  plan_free(it, s->scores);
  plan_phase(it, 0, 0);
}

int passq_gen(bs_plan_iter *it, passq *s, int unfused) {
  switch (s->seg) {
  case 0:
    pq_begin(it, s, unfused);
    s->seg = 1;
    s->at = 0;
    return 1;
  case 1:
    if (s->at < it->p->G) {
      pq_step(it, s, unfused, s->at++);
      return 1;
    }
    pq_end(it, s);
    s->seg = 2;
    return 1;
  default: return 0;
  }
}
