/*
 * li2021.c — RingSelfAttention (Li et al. 2021), the BurstAttention paper's
 * "RingAttention" baseline (§4.1, Table 1): a ring of K blocks fills the
 * rank's whole (N/G) x N score matrix (materialised, no flash), a row softmax
 * runs over it, then a ring of V blocks accumulates P V. The backward (which
 * the paper's table leaves out) rings K, V and dK, dV like ring-flash-attention
 * with the per-step score block materialised (unfused kernel).
 */
#include "plan_impl.h"

int plan_check_li2021(const bs_plan *p, char *err, size_t errlen) {
  if (p->cfg.par.layout != BS_CONTIGUOUS) {
    snprintf(err, errlen, "parallel.layout: ring-li2021 uses contiguous shards; %s is not supported", bs_layout_name(p->cfg.par.layout));
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

/* One ring step of the K pass (which = 0) or the V pass (which = 1). */
static void li_step(bs_plan_iter *it, int which, int s) {
  const bs_plan *p = it->p;
  int G = p->G, r = it->rank;
  int64_t n = p->N / G, kvb = p->B * p->Zkv * n * p->d * p->es;
  it->step = which * G + s;
  int32_t cur = s == 0 ? it->buf[which ? B_V : B_K] : it->buf[B_X0 + (s - 1) % 2];
  int32_t hs[2];
  int nh = 0;
  if (s < G - 1) {
    hs[nh++] = plan_recv(it, (r - 1 + G) % G, which ? MSG_V : MSG_K, R(it->buf[B_X0 + s % 2], 0), kvb);
    hs[nh++] = plan_send(it, (r + 1) % G, which ? MSG_V : MSG_K, R(cur, 0), kvb);
  }
  int j = ((r - s) % G + G) % G;
  bs_compute *c = plan_compute(it, BS_K_GEMM);
  c->gemm = which ? BS_GEMM_PV : BS_GEMM_QK;
  c->a = plan_attn_params(p, p->Zq, p->Zkv, n, n);
  c->m = n; c->n = which ? p->d : n; c->k = which ? n : p->d;
  c->ld = p->N;
  c->col0 = (int64_t)j * n;
  c->flops = 2.0 * (double)p->B * (double)p->Zq * (double)n * (double)n * (double)p->d;
  if (!which) {
    c->in[0] = R(it->buf[B_Q], 0);
    c->in[1] = R(cur, 0);
    c->out[0] = R(it->buf[B_SCORES], 0);
  } else {
    c->in[0] = R(it->buf[B_SCORES], 0);
    c->in[1] = R(cur, 0);
    c->out[0] = R(it->buf[B_O], 0);
  }
  if (nh) plan_wait(it, hs, nh);
}

int plan_gen_li2021(bs_plan_iter *it) {
  const bs_plan *p = it->p;
  int G = p->G, r = it->rank;
  int64_t n = p->N / G;
  if (it->x[0]) return plan_gen_seq(it, 1, 0, 1); /* backward: segments 2.. of the ring plan */
  switch (it->seg) {
  case 0: {
    bs_shard qs = plan_shard(BS_CONTIGUOUS, r, G, p->N, 0, (int32_t)p->Zq);
    bs_shard ks = plan_shard(BS_CONTIGUOUS, r, G, p->N, 0, (int32_t)p->Zkv);
    plan_phase(it, 0, 1);
    it->buf[B_Q] = plan_alloc(it, p->B * p->Zq * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_Q, &qs, p->elem);
    it->buf[B_K] = plan_alloc(it, p->B * p->Zkv * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_K, &ks, p->elem);
    it->buf[B_V] = plan_alloc(it, p->B * p->Zkv * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_V, &ks, p->elem);
    it->buf[B_O] = plan_alloc(it, p->B * p->Zq * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_O, &qs, BS_ELEM_F32);
    it->buf[B_LSE] = plan_alloc(it, p->B * p->Zq * n * 4, BS_MEM_OUTPUT, BS_ROLE_LSE, &qs, BS_ELEM_F32);
    it->buf[B_SCORES] = plan_alloc(it, p->B * p->Zq * n * p->N * 4, BS_MEM_SCORES, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    it->buf[B_X0] = it->buf[B_X1] = -1;
    if (G > 1) {
      int64_t kvb = p->B * p->Zkv * n * p->d * p->es;
      it->buf[B_X0] = plan_alloc(it, kvb, BS_MEM_COMM, BS_ROLE_TMP, NULL, p->elem);
      it->buf[B_X1] = plan_alloc(it, kvb, BS_MEM_COMM, BS_ROLE_TMP, NULL, p->elem);
    }
    it->seg = 1;
    it->k = 0;
    return 1;
  }
  case 1:
    if (it->k < G) { li_step(it, 0, it->k++); return 1; }
    {
      it->step = G;
      bs_compute *c = plan_compute(it, BS_K_ELEMWISE);
      c->ew = BS_EW_SOFTMAX;
      c->a = plan_attn_params(p, p->Zq, p->Zkv, n, p->N);
      c->a.mask.q_pos0 = (int64_t)r * n;
      c->ld = p->N;
      c->elems = p->B * p->Zq * n * p->N;
      c->flops = 4.0 * (double)c->elems;
      c->in[0] = R(it->buf[B_SCORES], 0);
      c->out[0] = R(it->buf[B_SCORES], 0);
      c->out[1] = R(it->buf[B_LSE], 0);
    }
    it->seg = 2;
    it->k = 0;
    return 1;
  case 2:
    if (it->k < G) { li_step(it, 1, it->k++); return 1; }
    it->step = -1;
    plan_free(it, it->buf[B_X0]);
    plan_free(it, it->buf[B_X1]);
    plan_free(it, it->buf[B_SCORES]);
    it->buf[B_SCORES] = -1;
    plan_phase(it, 0, 0);
    if (!p->bwd) { it->seg = 9; return 1; }
    /* the backward's per-step score block, then the ring plan's backward segments */
    it->buf[B_SCORES] = plan_alloc(it, p->B * p->Zq * n * n * 4, BS_MEM_SCORES, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    it->x[0] = 1;
    it->seg = 2;
    return 1;
  default:
    return 0;
  }
}
