/*
 * tp.c — Megatron tensor parallelism at attention scope: heads are split
 * across ranks with the whole sequence on every rank. V1 puts an all-reduce
 * of the B x N x H block output after attention in the forward (and one of
 * the input gradient in the backward); V3 (sequence parallel) replaces each
 * all-reduce by an all-gather before and a reduce-scatter after (BurstAttention
 * paper baselines; Megatron-LM, arXiv 1909.08053). The activations those
 * collectives carry are the projections' inputs/outputs that attention scope
 * leaves out, so their buffers carry no checked values.
 *
 * More ranks than KV heads (GQA, g = rep x kv_heads): each KV head is replicated on the rep
 * consecutive ranks whose query heads share it (vLLM's rule), every replica computing the same K, V.
 * In the backward each replica holds the dK, dV of its own query heads only; the head's gradient is
 * their sum (the gradient of a replicated tensor, as Megatron-LM all-reduces the tp-replicated
 * sequence-parallel norm weights' gradients: megatron/core/distributed/finalize_model_grads.py,
 * _allreduce_layernorm_grads). At attention scope dK, dV are the outputs, so the replicas all-reduce
 * them (fp32) over their rep ranks. At layer scope the K, V projection's backward takes the partials:
 * the tp collectives of the input gradient sum them, and the replicated Wk, Wv gradients are
 * all-reduced once a step (workload_zero.c).
 */
#include "plan_impl.h"

static int check_tp(const bs_plan *p, char *err, size_t errlen) {
  if (p->cfg.par.tp_variant != 1 && p->cfg.par.tp_variant != 3) {
    snprintf(err, errlen, "parallel.tp_variant: %d is not v1 or v3", p->cfg.par.tp_variant);
    return -1;
  }
  if (p->cfg.par.layout != BS_CONTIGUOUS) {
    snprintf(err, errlen, "parallel.layout: tp replicates the sequence; %s is not supported",
             bs_layout_name(p->cfg.par.layout));
    return -1;
  }
  if (p->Zq % p->G != 0 || !plan_kv_split_ok(p->Zkv, p->G)) {
    snprintf(err, errlen,
             "parallel.gpus: tp needs gpus (%d) to divide heads %lld and to divide, or be a multiple of, kv_heads %lld",
             p->G, (long long)p->Zq, (long long)p->Zkv);
    return -1;
  }
  if (p->cfg.par.tp_variant == 3 && p->N % p->G != 0) {
    snprintf(err, errlen, "parallel.gpus: %d does not divide seq_len %lld (tp v3 shards the sequence between blocks)",
             p->G, (long long)p->N);
    return -1;
  }
  return 0;
}

static int64_t hidden(const bs_plan *p) { return p->cfg.model.hidden > 0 ? p->cfg.model.hidden : p->Zq * p->d; }

/* The collectives around the block: before = 1 is the input side. */
static void block_comm(bs_plan_iter *it, int before) {
  const bs_plan *p = it->p;
  bs_group all = {0, 1, p->G};
  int64_t full = p->B * p->N * hidden(p) * p->es, part = full / p->G;
  int32_t h[1];
  bs_elem el = p->elem;
  if (p->in_layer) return; /* layer scope: the projections around attention carry them (workload.c) */
  if (p->cfg.par.tp_variant == 1) {
    if (before) return; /* f: identity in the forward, g: identity in the backward */
    int32_t x = plan_alloc(it, full, BS_MEM_ACTIVATIONS, BS_ROLE_TMP, NULL, el);
    h[0] = plan_coll(it, BS_COLL_ALLREDUCE, BS_RED_SUM, el, all, R(x, 0), R(x, 0), full);
    plan_wait(it, h, 1);
    plan_free(it, x);
    return;
  }
  int32_t x = plan_alloc(it, full, BS_MEM_ACTIVATIONS, BS_ROLE_TMP, NULL, el);
  int32_t s = plan_alloc(it, part, BS_MEM_ACTIVATIONS, BS_ROLE_TMP, NULL, el);
  if (before) h[0] = plan_coll(it, BS_COLL_ALLGATHER, BS_RED_SUM, el, all, R(s, 0), R(x, 0), part);
  else h[0] = plan_coll(it, BS_COLL_REDUCE_SCATTER, BS_RED_SUM, el, all, R(x, 0), R(s, 0), full);
  plan_wait(it, h, 1);
  plan_free(it, s);
  plan_free(it, x);
}

/* Role buffers held from the forward into the backward. */
typedef struct {
  int32_t q, k, v, o, lse, dout, dq, dk, dv;
  int seg;
} tp_state;

/* The forward: block collectives around local attention over this rank's heads. */
static void tp_fwd(bs_plan_iter *it, tp_state *s, int64_t hq, int64_t hkv, const bs_shard *qs, const bs_shard *ks) {
  const bs_plan *p = it->p;
  int64_t N = p->N;
  int init[2] = {0, 0};
  plan_phase(it, 0, 1);
  it->step = 0;
  block_comm(it, 1);
  s->q = plan_alloc(it, p->B * hq * N * p->d * p->es, BS_MEM_INPUT, BS_ROLE_Q, qs, p->elem);
  s->k = plan_alloc(it, p->B * hkv * N * p->d * p->es, BS_MEM_INPUT, BS_ROLE_K, ks, p->elem);
  s->v = plan_alloc(it, p->B * hkv * N * p->d * p->es, BS_MEM_INPUT, BS_ROLE_V, ks, p->elem);
  s->o = plan_alloc(it, p->B * hq * N * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_O, qs, BS_ELEM_F32);
  s->lse = plan_alloc(it, p->B * hq * N * 4, BS_MEM_OUTPUT, BS_ROLE_LSE, qs, BS_ELEM_F32);
  attn_bufs b = {s->q, s->k, s->v, s->o, s->lse, -1, -1, -1, -1, -1, -1};
  plan_emit_attn(it, 0, 0, hq, hkv, qs, 0, ks, &b, init);
  it->step = 1;
  block_comm(it, 0);
  it->step = -1;
  plan_phase(it, 0, 0);
}

/* Attention scope, more ranks than KV heads: the rep replicas of the rank's KV head sum their
 * partial dK, dV (an fp32 all-reduce of each over the rep consecutive ranks holding the head). */
static void kv_replicas_sum(bs_plan_iter *it, const tp_state *s, int64_t hkv) {
  const bs_plan *p = it->p;
  if (p->in_layer || p->Zkv >= p->G) return;
  int32_t rep = (int32_t)(p->G / p->Zkv), h[2];
  bs_group g = {it->rank / rep * rep, 1, rep};
  int64_t bytes = p->B * hkv * p->N * p->d * 4; /* dK and dV each (as allocated below) */
  h[0] = plan_coll(it, BS_COLL_ALLREDUCE, BS_RED_SUM, BS_ELEM_F32, g, R(s->dk, 0), R(s->dk, 0), bytes);
  h[1] = plan_coll(it, BS_COLL_ALLREDUCE, BS_RED_SUM, BS_ELEM_F32, g, R(s->dv, 0), R(s->dv, 0), bytes);
  plan_wait(it, h, 2);
}

/* The backward: the same collectives, delta, local attention backward. */
static void tp_bwd(bs_plan_iter *it, tp_state *s, int64_t hq, int64_t hkv, const bs_shard *qs, const bs_shard *ks) {
  const bs_plan *p = it->p;
  int64_t N = p->N;
  int init[2] = {0, 0};
  plan_phase(it, 1, 1);
  it->step = 0;
  block_comm(it, 1);
  s->dout = plan_alloc(it, p->B * hq * N * p->d * p->es, BS_MEM_INPUT, BS_ROLE_DOUT, qs, p->elem);
  s->dq = plan_alloc(it, p->B * hq * N * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DQ, qs, BS_ELEM_F32);
  s->dk = plan_alloc(it, p->B * hkv * N * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DK, ks, BS_ELEM_F32);
  s->dv = plan_alloc(it, p->B * hkv * N * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DV, ks, BS_ELEM_F32);
  int32_t delta = plan_alloc(it, p->B * hq * N * 4, BS_MEM_WORKSPACE, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  plan_emit_delta(it, hq, hkv, N, s->o, s->dout, delta); /* d = dv: create.c refuses tp otherwise */
  attn_bufs b = {s->q, s->k, s->v, -1, s->lse, s->dout, delta, s->dq, s->dk, s->dv, -1};
  plan_emit_attn(it, 1, 0, hq, hkv, qs, 0, ks, &b, init);
  plan_free(it, delta);
  kv_replicas_sum(it, s, hkv);
  it->step = 1;
  block_comm(it, 0);
  it->step = -1;
  plan_phase(it, 1, 0);
}

static int gen_tp(bs_plan_iter *it, void *state) {
  const bs_plan *p = it->p;
  tp_state *s = state;
  /* more ranks than KV heads: each rank holds one KV head, the one its query heads share */
  int64_t hq = p->Zq / p->G, hkv = plan_kv_heads_per_rank(p->Zkv, p->G);
  int64_t kv0 = p->Zkv >= p->G ? it->rank * hkv : it->rank / (p->G / p->Zkv);
  bs_shard qs = plan_shard(BS_CONTIGUOUS, 0, 1, p->N, (int32_t)(it->rank * hq), (int32_t)hq);
  bs_shard ks = plan_shard(BS_CONTIGUOUS, 0, 1, p->N, (int32_t)kv0, (int32_t)hkv);
  switch (s->seg) {
  case 0:
    tp_fwd(it, s, hq, hkv, &qs, &ks);
    s->seg = 1;
    return 1;
  case 1:
    if (!p->bwd) return 0;
    tp_bwd(it, s, hq, hkv, &qs, &ks);
    s->seg = 2;
    return 1;
  default: return 0;
  }
}

const plan_method plan_method_tp = {
  .check = check_tp,
  .gen = gen_tp,
  .state_size = sizeof(tp_state),
  .double_ring = 0,
  .decode = 0,
  .ring = 0,
  .a2a = 0,
};
