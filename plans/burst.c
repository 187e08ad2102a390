/*
 * burst.c — BurstAttention (arXiv 2403.09347 v4, Alg. 1-2): a double-buffered
 * K,V ring in the forward; in the backward K, V, dK, dV stay put while a
 * packet of Q, dO, D (= rowsum(dO * O)), lse and dQ travels, dQ returning to
 * its owner at the end. bwd_comm = plain rings O instead of D and computes D
 * on arrival (Burst-Attention code default). lao = off materialises the score
 * block per step (the paper's "w/o LAO"). Also holds the forward set-up that
 * ring (ring.c) shares.
 */
#include "plan_impl.h"

static bs_shard q_shard(const bs_plan *p, int rank) {
  if (p->decode) return plan_shard(BS_CONTIGUOUS, 0, 1, p->nq_dec, 0, (int32_t)p->Zq);
  return plan_shard(p->cfg.par.layout, rank, p->G, p->N, 0, (int32_t)p->Zq);
}

void plan_seq_fwd_begin(bs_plan_iter *it, int unfused) {
  const bs_plan *p = it->p;
  int r = it->rank;
  int64_t n = p->N / p->G;
  bs_shard qs = q_shard(p, r);
  bs_shard ks = plan_shard(p->cfg.par.layout, r, p->G, p->N, 0, (int32_t)p->Zkv);
  int64_t nq = bs_shard_tokens(&qs);
  plan_phase(it, 0, 1);
  it->buf[B_Q] = plan_alloc(it, p->B * p->Zq * nq * p->d * p->es, BS_MEM_INPUT, BS_ROLE_Q, &qs, p->elem);
  it->buf[B_K] = plan_alloc(it, p->B * p->Zkv * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_K, &ks, p->elem);
  it->buf[B_V] = plan_alloc(it, p->B * p->Zkv * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_V, &ks, p->elem);
  it->buf[B_O] = plan_alloc(it, p->B * p->Zq * nq * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_O, &qs, BS_ELEM_F32);
  it->buf[B_LSE] = plan_alloc(it, p->B * p->Zq * nq * 4, BS_MEM_OUTPUT, BS_ROLE_LSE, &qs, BS_ELEM_F32);
  it->buf[B_SCORES] = -1;
  if (unfused) {
    int64_t qlen = qs.layout == BS_ZIGZAG ? nq / 2 : nq, klen = ks.layout == BS_ZIGZAG ? n / 2 : n;
    it->buf[B_SCORES] = plan_alloc(it, p->B * p->Zq * qlen * klen * 4, BS_MEM_SCORES, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  }
  ring_fwd *rf = &it->rf;
  rf->first = 0;
  rf->stride = 1;
  rf->P = p->P;
  rf->M = p->M;
  rf->a = r / p->P;
  rf->i = r % p->P;
  rf->hq = p->Zq;
  rf->hkv = p->Zkv;
  rf->qs = qs;
  rf->qpos_off = p->decode ? p->N : 0;
  rf->ks = plan_shard(p->cfg.par.layout, 0, p->G, p->N, 0, (int32_t)p->Zkv);
  rf->q = it->buf[B_Q];
  rf->o = it->buf[B_O];
  rf->lse = it->buf[B_LSE];
  rf->k0 = it->buf[B_K];
  rf->v0 = it->buf[B_V];
  rf->scores = it->buf[B_SCORES];
  rf->kv_bytes = p->B * p->Zkv * n * p->d * p->es;
  ring_fwd_begin(it);
}

void plan_seq_bwd_roles(bs_plan_iter *it) {
  const bs_plan *p = it->p;
  int64_t n = p->N / p->G;
  bs_shard qs = q_shard(p, it->rank);
  bs_shard ks = plan_shard(p->cfg.par.layout, it->rank, p->G, p->N, 0, (int32_t)p->Zkv);
  it->buf[B_DOUT] = plan_alloc(it, p->B * p->Zq * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_DOUT, &qs, p->elem);
  it->buf[B_DQ] = plan_alloc(it, p->B * p->Zq * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DQ, &qs, BS_ELEM_F32);
  it->buf[B_DK] = plan_alloc(it, p->B * p->Zkv * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DK, &ks, BS_ELEM_F32);
  it->buf[B_DV] = plan_alloc(it, p->B * p->Zkv * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DV, &ks, BS_ELEM_F32);
}

/* delta = rowsum(dO * O) of this rank's queries, into a new WORKSPACE buffer. */
static void local_delta(bs_plan_iter *it) {
  const bs_plan *p = it->p;
  int64_t n = p->N / p->G;
  it->buf[B_DELTA] = plan_alloc(it, p->B * p->Zq * n * 4, BS_MEM_WORKSPACE, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  bs_compute *c = plan_compute(it, BS_K_ATTN_DELTA);
  c->a = plan_attn_params(p, p->Zq, p->Zkv, n, n);
  c->elems = p->B * p->Zq * n * p->d;
  c->flops = 2.0 * (double)c->elems;
  c->in[0] = R(it->buf[B_O], 0);
  c->in[1] = R(it->buf[B_DOUT], 0);
  c->out[0] = R(it->buf[B_DELTA], 0);
}

static void add_part(ring_bwd *rb, int msg, int32_t local, int64_t bytes, int acc, int32_t ret_buf, int ret_msg) {
  pkt_part *pp = &rb->part[rb->nparts++];
  memset(pp, 0, sizeof *pp);
  pp->msg = msg;
  pp->local = local;
  pp->bytes = bytes;
  pp->acc = acc;
  pp->ret_buf = ret_buf;
  pp->ret_msg = ret_msg;
}

/* Shared backward ring set-up; kind 0 = burst (query packet), 1 = ring (key/value packet). */
void plan_seq_bwd_ring(bs_plan_iter *it, int kind, int plain, int unfused) {
  const bs_plan *p = it->p;
  int r = it->rank;
  int64_t n = p->N / p->G;
  ring_bwd *rb = &it->rb;
  memset(rb, 0, sizeof *rb);
  rb->first = 0;
  rb->stride = 1;
  rb->P = p->P;
  rb->M = p->M;
  rb->a = r / p->P;
  rb->i = r % p->P;
  rb->hq = p->Zq;
  rb->hkv = p->Zkv;
  rb->kind = kind;
  rb->plain = plain;
  rb->unfused = unfused;
  bs_shard qs = plan_shard(p->cfg.par.layout, r, p->G, p->N, 0, (int32_t)p->Zq);
  bs_shard ks = plan_shard(p->cfg.par.layout, r, p->G, p->N, 0, (int32_t)p->Zkv);
  rb->q = it->buf[B_Q]; rb->k = it->buf[B_K]; rb->v = it->buf[B_V]; rb->o = it->buf[B_O];
  rb->dout = it->buf[B_DOUT]; rb->lse = it->buf[B_LSE]; rb->delta = it->buf[B_DELTA];
  rb->dq = it->buf[B_DQ]; rb->dk = it->buf[B_DK]; rb->dv = it->buf[B_DV];
  rb->tmp_delta = it->buf[B_TDELTA];
  rb->scores = it->buf[B_SCORES];
  int64_t qb = p->B * p->Zq * n * p->d, kb = p->B * p->Zkv * n * p->d, rows = p->B * p->Zq * n;
  if (kind == 0) {
    rb->my = ks;
    rb->tmpl = qs;
    add_part(rb, MSG_Q, it->buf[B_Q], qb * p->es, 0, -1, 0);
    add_part(rb, MSG_DO, it->buf[B_DOUT], qb * p->es, 0, -1, 0);
    if (plain) add_part(rb, MSG_O, it->buf[B_O], qb * 4, 0, -1, 0);
    else add_part(rb, MSG_D, it->buf[B_DELTA], rows * 4, 0, -1, 0);
    add_part(rb, MSG_LSE, it->buf[B_LSE], rows * 4, 0, -1, 0);
    add_part(rb, MSG_DQ, -1, qb * 4, 1, it->buf[B_DQ], MSG_RET_DQ);
  } else {
    rb->my = qs;
    rb->tmpl = ks;
    add_part(rb, MSG_K, it->buf[B_K], kb * p->es, 0, -1, 0);
    add_part(rb, MSG_V, it->buf[B_V], kb * p->es, 0, -1, 0);
    add_part(rb, MSG_DK, -1, kb * 4, 1, it->buf[B_DK], MSG_RET_DK);
    add_part(rb, MSG_DV, -1, kb * 4, 1, it->buf[B_DV], MSG_RET_DV);
  }
  ring_bwd_begin(it);
}

/* Forward ring steps, then (train) the backward ring; `kind` as above. */
int plan_gen_seq(bs_plan_iter *it, int kind, int plain, int unfused) {
  const bs_plan *p = it->p;
  switch (it->seg) {
  case 0:
    plan_seq_fwd_begin(it, unfused);
    it->seg = 1;
    it->k = 0;
    return 1;
  case 1:
    if (ring_fwd_step(it, it->k)) { it->k++; return 1; }
    ring_fwd_end(it);
    if (!p->bwd) { plan_free(it, it->buf[B_SCORES]); it->buf[B_SCORES] = -1; }
    plan_phase(it, 0, 0);
    it->seg = 2;
    return 1;
  case 2:
    if (!p->bwd) return 0;
    plan_phase(it, 1, 1);
    plan_seq_bwd_roles(it);
    it->buf[B_DELTA] = it->buf[B_TDELTA] = -1;
    if (kind == 1 || !plain) local_delta(it);
    if (kind == 0 && plain) {
      int64_t n = p->N / p->G;
      it->buf[B_TDELTA] = plan_alloc(it, p->B * p->Zq * n * 4, BS_MEM_WORKSPACE, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    }
    plan_seq_bwd_ring(it, kind, plain, unfused);
    it->seg = 3;
    it->k = 0;
    return 1;
  case 3:
    if (ring_bwd_step(it, it->k)) { it->k++; return 1; }
    ring_bwd_end(it);
    plan_free(it, it->buf[B_DELTA]);
    plan_free(it, it->buf[B_TDELTA]);
    plan_free(it, it->buf[B_SCORES]);
    plan_phase(it, 1, 0);
    it->seg = 4;
    return 1;
  default:
    return 0;
  }
}

int plan_gen_burst(bs_plan_iter *it) {
  return plan_gen_seq(it, 0, !it->p->cfg.par.bwd_opt, !it->p->cfg.par.lao);
}
