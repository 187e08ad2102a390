/*
 * li2021.c — RingSelfAttention (Li et al. 2021), the BurstAttention paper's
 * "RingAttention" baseline (§4.1, Table 1): a ring of K blocks fills the
 * rank's whole (N/G) x N score matrix (materialised, no flash), a row softmax
 * runs over it, then a ring of V blocks accumulates P V. The backward (which
 * the paper's table leaves out) rings K, V and dK, dV like ring-flash-attention
 * with the per-step score block materialised (unfused kernel).
 */
#include "plan_impl.h"

static int check_li2021(const bs_plan *p, char *err, size_t errlen) {
  if (p->cfg.par.layout != BS_CONTIGUOUS) {
    snprintf(err, errlen, "parallel.layout: ring-li2021 uses contiguous shards; %s is not supported",
             bs_layout_name(p->cfg.par.layout));
    return -1;
  }
  if (p->N % p->G != 0) {
    snprintf(err, errlen, "parallel.gpus: %d does not divide seq_len %lld", p->G, (long long)p->N);
    return -1;
  }
  if (p->cfg.model.dtype != BS_FP32) {
    /* the explicit-score GEMMs are fp32 (OpenBLAS sgemm); plans still serve the simulator */
  }
  return 0;
}

/* The forward's own buffers beside the ring state its backward borrows. */
typedef struct {
  ring_seq seq;  /* role buffers (q, k, v, o, lse, scores) and the backward */
  int32_t kv[2]; /* the K (then V) blocks received, double-buffered */
  int seg, k;    /* forward: segment (3 = backward) and ring step */
} li_state;

/* One ring step of the K pass (which = 0) or the V pass (which = 1). */
static void li_step(bs_plan_iter *it, li_state *st, int which, int s) {
  const bs_plan *p = it->p;
  int G = p->G, r = it->rank;
  int64_t n = p->N / G, kvb = p->B * p->Zkv * n * p->d * p->es;
  it->step = which * G + s;
  int32_t cur = s == 0 ? (which ? st->seq.v : st->seq.k) : st->kv[(s - 1) % 2];
  int32_t hs[2];
  int nh = 0;
  if (s < G - 1) {
    hs[nh++] = plan_recv(it, (r - 1 + G) % G, which ? MSG_V : MSG_K, R(st->kv[s % 2], 0), kvb);
    hs[nh++] = plan_send(it, (r + 1) % G, which ? MSG_V : MSG_K, R(cur, 0), kvb);
  }
  int j = ((r - s) % G + G) % G;
  bs_compute *c = plan_compute(it, BS_K_GEMM);
  c->gemm = which ? BS_GEMM_PV : BS_GEMM_QK;
  c->a = plan_attn_params(p, p->Zq, p->Zkv, n, n);
  c->m = n;
  c->n = which ? p->d : n;
  c->k = which ? n : p->d;
  c->ld = p->N;
  c->col0 = (int64_t)j * n;
  c->flops = 2.0 * (double)p->B * (double)p->Zq * (double)n * (double)n * (double)p->d;
  if (!which) {
    c->in[0] = R(st->seq.q, 0);
    c->in[1] = R(cur, 0);
    c->out[0] = R(st->seq.scores, 0);
  } else {
    c->in[0] = R(st->seq.scores, 0);
    c->in[1] = R(cur, 0);
    c->out[0] = R(st->seq.o, 0);
  }
  if (nh) plan_wait(it, hs, nh);
}

/* Forward begin: PHASE, role buffers, the whole (N/G) x N score matrix, the K,V receive buffers. */
static void li_begin(bs_plan_iter *it, li_state *st) {
  const bs_plan *p = it->p;
  int G = p->G, r = it->rank;
  int64_t n = p->N / G;
  ring_seq *s = &st->seq;
  bs_shard qs = plan_shard(BS_CONTIGUOUS, r, G, p->N, 0, (int32_t)p->Zq);
  bs_shard ks = plan_shard(BS_CONTIGUOUS, r, G, p->N, 0, (int32_t)p->Zkv);
  plan_phase(it, 0, 1);
  s->q = plan_alloc(it, p->B * p->Zq * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_Q, &qs, p->elem);
  s->k = plan_alloc(it, p->B * p->Zkv * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_K, &ks, p->elem);
  s->v = plan_alloc(it, p->B * p->Zkv * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_V, &ks, p->elem);
  s->o = plan_alloc(it, p->B * p->Zq * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_O, &qs, BS_ELEM_F32);
  s->lse = plan_alloc(it, p->B * p->Zq * n * 4, BS_MEM_OUTPUT, BS_ROLE_LSE, &qs, BS_ELEM_F32);
  s->scores = plan_alloc(it, p->B * p->Zq * n * p->N * 4, BS_MEM_SCORES, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  st->kv[0] = st->kv[1] = -1;
  if (G > 1) {
    int64_t kvb = p->B * p->Zkv * n * p->d * p->es;
    st->kv[0] = plan_alloc(it, kvb, BS_MEM_COMM, BS_ROLE_TMP, NULL, p->elem);
    st->kv[1] = plan_alloc(it, kvb, BS_MEM_COMM, BS_ROLE_TMP, NULL, p->elem);
  }
}

/* The row softmax over the whole score matrix, with lse. */
static void li_softmax(bs_plan_iter *it, li_state *st) {
  const bs_plan *p = it->p;
  int64_t n = p->N / p->G;
  it->step = p->G;
  bs_compute *c = plan_compute(it, BS_K_ELEMWISE);
  c->ew = BS_EW_SOFTMAX;
  c->a = plan_attn_params(p, p->Zq, p->Zkv, n, p->N);
  c->a.mask.q_pos0 = (int64_t)it->rank * n;
  c->ld = p->N;
  c->elems = p->B * p->Zq * n * p->N;
  c->flops = 4.0 * (double)c->elems;
  c->in[0] = R(st->seq.scores, 0);
  c->out[0] = R(st->seq.scores, 0);
  c->out[1] = R(st->seq.lse, 0);
}

/* Forward end: FREEs; in phase train, the backward's per-step score block. */
static void li_end(bs_plan_iter *it, li_state *st) {
  const bs_plan *p = it->p;
  int64_t n = p->N / p->G;
  it->step = -1;
  plan_free(it, st->kv[0]);
  plan_free(it, st->kv[1]);
  plan_free(it, st->seq.scores);
  st->seq.scores = -1;
  plan_phase(it, 0, 0);
  if (p->bwd) st->seq.scores = plan_alloc(it, p->B * p->Zq * n * n * 4, BS_MEM_SCORES, BS_ROLE_TMP, NULL, BS_ELEM_F32);
}

static int gen_li2021(bs_plan_iter *it, void *state) {
  li_state *st = state;
  int G = it->p->G;
  switch (st->seg) {
  case 0:
    li_begin(it, st);
    st->seg = 1;
    st->k = 0;
    return 1;
  case 1:
    if (st->k < G) {
      li_step(it, st, 0, st->k++);
      return 1;
    }
    li_softmax(it, st);
    st->seg = 2;
    st->k = 0;
    return 1;
  case 2:
    if (st->k < G) {
      li_step(it, st, 1, st->k++);
      return 1;
    }
    li_end(it, st);
    st->seg = 3;
    return 1;
  default: /* the backward: ring's, with the score block materialised */
    return it->p->bwd ? ring_seq_bwd(it, &st->seq, 1, 0, 1) : 0;
  }
}

const plan_method plan_method_li2021 = {
  .check = check_li2021,
  .gen = gen_li2021,
  .state_size = sizeof(li_state),
  .double_ring = 0,
  .decode = 0,
  .ring = 1,
  .a2a = 0,
};
