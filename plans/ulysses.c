/*
 * ulysses.c — DeepSpeed-Ulysses: an all-to-all turns sequence-sharded Q, K, V
 * (all heads, N/G tokens) into head-sharded ones (heads/G, all tokens), local
 * attention runs, and an all-to-all of O turns it back; the backward mirrors
 * it (dO in; dQ, dK, dV out). With method usp the all-to-alls run inside
 * groups of ulysses_degree ranks and a K,V ring (ring-flash-attention style
 * backward) runs across the groups (feifeibear/long-context-attention).
 */
#include "plan_impl.h"

static int deg(const bs_plan *p) { return p->cfg.par.method == BS_USP ? p->cfg.par.ulysses_degree : p->G; }

int plan_check_ulysses(const bs_plan *p, char *err, size_t errlen) {
  const char *m = bs_method_name(p->cfg.par.method);
  int U = deg(p);
  if (p->cfg.par.layout != BS_CONTIGUOUS) {
    snprintf(err, errlen, "parallel.layout: %s gathers contiguous shards; %s is not supported", m, bs_layout_name(p->cfg.par.layout));
    return -1;
  }
  if (p->cfg.par.method == BS_USP && (U < 1 || p->G % U != 0)) {
    snprintf(err, errlen, "parallel.ulysses_degree: %d does not divide gpus %d", U, p->G);
    return -1;
  }
  const char *key = p->cfg.par.method == BS_USP ? "parallel.ulysses_degree" : "parallel.gpus";
  if (U > p->Zkv) {
    snprintf(err, errlen, "%s: %s needs %d <= kv_heads (%lld)", key, m, U, (long long)p->Zkv);
    return -1;
  }
  if (p->Zkv % U != 0 || p->Zq % U != 0) {
    snprintf(err, errlen, "%s: %d does not divide heads %lld and kv_heads %lld", key, U, (long long)p->Zq, (long long)p->Zkv);
    return -1;
  }
  if (p->N % p->G != 0) {
    snprintf(err, errlen, "parallel.gpus: %d does not divide seq_len %lld", p->G, (long long)p->N);
    return -1;
  }
  return 0;
}

static bs_group ugroup(const bs_plan_iter *it) {
  int U = deg(it->p);
  bs_group g = {(it->rank / U) * U, 1, U};
  return g;
}

static bs_compute *copy_op(bs_plan_iter *it, int32_t src, int32_t dst, int64_t bytes, int64_t ta, int64_t tb, int64_t chunk) {
  bs_compute *c = plan_compute(it, BS_K_COPY);
  c->elems = bytes;
  c->t_a = ta;
  c->t_b = tb;
  c->t_chunk = chunk;
  c->in[0] = R(src, 0);
  c->out[0] = R(dst, 0);
  return c;
}

/* Sequence-sharded src [B][Z][n][w] -> head-sharded [B][Z/U][U*n][w]: post. */
static void s2h_post(bs_plan_iter *it, a2a_xfer *x, int32_t src, int64_t Z, int64_t w, int64_t eb) {
  const bs_plan *p = it->p;
  int U = deg(p);
  int64_t n = p->N / p->G, h = Z / U, bytes = p->B * Z * n * w * eb;
  memset(x, 0, sizeof *x);
  x->src = src; x->Z = Z; x->w = w; x->eb = eb; x->pk = -1; x->rv = -1; x->h = -1; x->dst = src;
  if (U == 1) return;
  int32_t send = src;
  if (p->B > 1) {
    x->pk = plan_alloc(it, bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    copy_op(it, src, x->pk, bytes, p->B, U, h * n * w * eb);
    send = x->pk;
  }
  x->rv = plan_alloc(it, bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  x->h = plan_coll(it, BS_COLL_ALLTOALL, BS_RED_SUM, eb == 4 ? BS_ELEM_F32 : p->elem, ugroup(it), R(send, 0), R(x->rv, 0), bytes);
}

static void s2h_finish(bs_plan_iter *it, a2a_xfer *x, bs_mem_class cls) {
  const bs_plan *p = it->p;
  int U = deg(p);
  if (U == 1) return;
  int64_t n = p->N / p->G, h = x->Z / U, bytes = p->B * x->Z * n * x->w * x->eb;
  plan_free(it, x->pk);
  x->dst = plan_alloc(it, bytes, cls, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  copy_op(it, x->rv, x->dst, bytes, U, p->B * h, n * x->w * x->eb);
  plan_free(it, x->rv);
}

/* Head-sharded src -> sequence-sharded role buffer dst (U > 1 only): post. */
static void h2s_post(bs_plan_iter *it, a2a_xfer *x, int32_t src, int32_t dst, int64_t Z, int64_t w, int64_t eb) {
  const bs_plan *p = it->p;
  int U = deg(p);
  int64_t n = p->N / p->G, h = Z / U, bytes = p->B * Z * n * w * eb;
  memset(x, 0, sizeof *x);
  x->src = src; x->dst = dst; x->Z = Z; x->w = w; x->eb = eb;
  x->pk = plan_alloc(it, bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  copy_op(it, src, x->pk, bytes, p->B * h, U, n * w * eb);
  x->rv = p->B > 1 ? plan_alloc(it, bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32) : dst;
  x->h = plan_coll(it, BS_COLL_ALLTOALL, BS_RED_SUM, eb == 4 ? BS_ELEM_F32 : p->elem, ugroup(it), R(x->pk, 0), R(x->rv, 0), bytes);
}

static void h2s_finish(bs_plan_iter *it, a2a_xfer *x) {
  const bs_plan *p = it->p;
  int U = deg(p);
  int64_t n = p->N / p->G, h = x->Z / U, bytes = p->B * x->Z * n * x->w * x->eb;
  plan_free(it, x->pk);
  if (p->B > 1) {
    copy_op(it, x->rv, x->dst, bytes, U, p->B, h * n * x->w * x->eb);
    plan_free(it, x->rv);
  }
}

static void wait_xfers(bs_plan_iter *it, int n) {
  int32_t hs[4];
  int nh = 0;
  for (int j = 0; j < n; j++)
    if (it->xf[j].h >= 0) hs[nh++] = it->xf[j].h;
  if (nh) plan_wait(it, hs, nh);
}

/* Buffers: B_X0 qh, B_X1 kh, B_X2 vh, B_X3 oh, B_X4 doh, B_X5 dqh, B_X6 dkh, B_X7 dvh, B_X8 delta_h. */
enum { QH = B_X0, KH, VH, OH, DOH, DQH, DKH, DVH, DELH };

static int is_tmp(const bs_plan_iter *it, int idx, int role_idx) { return it->buf[idx] != it->buf[role_idx]; }

int plan_gen_ulysses(bs_plan_iter *it) {
  const bs_plan *p = it->p;
  int U = deg(p), R_ = p->G / U, r = it->rank, gi = r / U, ui = r % U, usp = p->cfg.par.method == BS_USP;
  int64_t n = p->N / p->G, hq = p->Zq / U, hkv = p->Zkv / U, Ng = n * U;
  bs_shard qseq = plan_shard(BS_CONTIGUOUS, r, p->G, p->N, 0, (int32_t)p->Zq);
  bs_shard kseq = plan_shard(BS_CONTIGUOUS, r, p->G, p->N, 0, (int32_t)p->Zkv);
  bs_shard qh = plan_shard(BS_CONTIGUOUS, gi, R_, p->N, (int32_t)(ui * hq), (int32_t)hq);
  bs_shard kh = plan_shard(BS_CONTIGUOUS, gi, R_, p->N, (int32_t)(ui * hkv), (int32_t)hkv);
  int init[2] = {0, 0};
  switch (it->seg) {
  case 0: {
    plan_phase(it, 0, 1);
    it->step = 0;
    it->buf[B_Q] = plan_alloc(it, p->B * p->Zq * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_Q, &qseq, p->elem);
    it->buf[B_K] = plan_alloc(it, p->B * p->Zkv * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_K, &kseq, p->elem);
    it->buf[B_V] = plan_alloc(it, p->B * p->Zkv * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_V, &kseq, p->elem);
    s2h_post(it, &it->xf[0], it->buf[B_Q], p->Zq, p->d, p->es);
    s2h_post(it, &it->xf[1], it->buf[B_K], p->Zkv, p->d, p->es);
    s2h_post(it, &it->xf[2], it->buf[B_V], p->Zkv, p->d, p->es);
    wait_xfers(it, 3);
    for (int j = 0; j < 3; j++) {
      s2h_finish(it, &it->xf[j], BS_MEM_ACTIVATIONS);
      it->buf[QH + j] = it->xf[j].dst;
    }
    it->buf[B_LSE] = plan_alloc(it, p->B * hq * Ng * 4, BS_MEM_OUTPUT, BS_ROLE_LSE, &qh, BS_ELEM_F32);
    if (U == 1) it->buf[OH] = it->buf[B_O] = plan_alloc(it, p->B * hq * Ng * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_O, &qseq, BS_ELEM_F32);
    else it->buf[OH] = plan_alloc(it, p->B * hq * Ng * p->d * 4, BS_MEM_ACTIVATIONS, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    if (!usp || R_ == 1) {
      it->step = 1;
      attn_bufs b = {it->buf[QH], it->buf[KH], it->buf[VH], it->buf[OH], it->buf[B_LSE], -1, -1, -1, -1, -1, -1};
      plan_emit_attn(it, 0, 0, hq, hkv, &qh, 0, &kh, &b, init);
      it->seg = 2;
      return 1;
    }
    ring_fwd *rf = &it->rf;
    rf->first = ui; rf->stride = U; rf->P = R_; rf->M = 1; rf->a = 0; rf->i = gi;
    rf->hq = hq; rf->hkv = hkv; rf->qs = qh; rf->qpos_off = 0;
    rf->ks = plan_shard(BS_CONTIGUOUS, 0, R_, p->N, (int32_t)(ui * hkv), (int32_t)hkv);
    rf->q = it->buf[QH]; rf->o = it->buf[OH]; rf->lse = it->buf[B_LSE];
    rf->k0 = it->buf[KH]; rf->v0 = it->buf[VH]; rf->scores = -1;
    rf->kv_bytes = p->B * hkv * Ng * p->d * p->es;
    ring_fwd_begin(it);
    it->seg = 1;
    it->k = 0;
    return 1;
  }
  case 1:
    if (ring_fwd_step(it, it->k)) { it->k++; return 1; }
    ring_fwd_end(it);
    it->seg = 2;
    return 1;
  case 2:
    it->step = 1000;
    if (U > 1) {
      it->buf[B_O] = plan_alloc(it, p->B * p->Zq * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_O, &qseq, BS_ELEM_F32);
      h2s_post(it, &it->xf[0], it->buf[OH], it->buf[B_O], p->Zq, p->d, 4);
      wait_xfers(it, 1);
      h2s_finish(it, &it->xf[0]);
    }
    if (!p->bwd) {
      for (int j = QH; j <= VH; j++)
        if (is_tmp(it, j, B_Q + (j - QH))) plan_free(it, it->buf[j]);
      if (U > 1) plan_free(it, it->buf[OH]);
    }
    it->step = -1;
    plan_phase(it, 0, 0);
    it->seg = p->bwd ? 3 : 9;
    return 1;
  case 3: {
    plan_phase(it, 1, 1);
    it->step = 0;
    it->buf[B_DOUT] = plan_alloc(it, p->B * p->Zq * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_DOUT, &qseq, p->elem);
    s2h_post(it, &it->xf[0], it->buf[B_DOUT], p->Zq, p->d, p->es);
    wait_xfers(it, 1);
    s2h_finish(it, &it->xf[0], BS_MEM_ACTIVATIONS);
    it->buf[DOH] = it->xf[0].dst;
    it->buf[DELH] = plan_alloc(it, p->B * hq * Ng * 4, BS_MEM_WORKSPACE, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    bs_compute *c = plan_compute(it, BS_K_ATTN_DELTA);
    c->a = plan_attn_params(p, hq, hkv, Ng, Ng);
    c->elems = p->B * hq * Ng * p->d;
    c->flops = 2.0 * (double)c->elems;
    c->in[0] = R(it->buf[OH], 0);
    c->in[1] = R(it->buf[DOH], 0);
    c->out[0] = R(it->buf[DELH], 0);
    if (U == 1) {
      it->buf[DQH] = it->buf[B_DQ] = plan_alloc(it, p->B * p->Zq * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DQ, &qseq, BS_ELEM_F32);
      it->buf[DKH] = it->buf[B_DK] = plan_alloc(it, p->B * p->Zkv * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DK, &kseq, BS_ELEM_F32);
      it->buf[DVH] = it->buf[B_DV] = plan_alloc(it, p->B * p->Zkv * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DV, &kseq, BS_ELEM_F32);
    } else {
      it->buf[DQH] = plan_alloc(it, p->B * hq * Ng * p->d * 4, BS_MEM_ACTIVATIONS, BS_ROLE_TMP, NULL, BS_ELEM_F32);
      it->buf[DKH] = plan_alloc(it, p->B * hkv * Ng * p->d * 4, BS_MEM_ACTIVATIONS, BS_ROLE_TMP, NULL, BS_ELEM_F32);
      it->buf[DVH] = plan_alloc(it, p->B * hkv * Ng * p->d * 4, BS_MEM_ACTIVATIONS, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    }
    if (!usp || R_ == 1) {
      it->step = 1;
      attn_bufs b = {it->buf[QH], it->buf[KH], it->buf[VH], -1, it->buf[B_LSE], it->buf[DOH], it->buf[DELH],
                     it->buf[DQH], it->buf[DKH], it->buf[DVH], -1};
      plan_emit_attn(it, 1, 0, hq, hkv, &qh, 0, &kh, &b, init);
      it->seg = 5;
      return 1;
    }
    ring_bwd *rb = &it->rb;
    memset(rb, 0, sizeof *rb);
    rb->first = ui; rb->stride = U; rb->P = R_; rb->M = 1; rb->a = 0; rb->i = gi;
    rb->hq = hq; rb->hkv = hkv; rb->kind = 1;
    rb->my = qh;
    rb->tmpl = plan_shard(BS_CONTIGUOUS, 0, R_, p->N, (int32_t)(ui * hkv), (int32_t)hkv);
    rb->q = it->buf[QH]; rb->dout = it->buf[DOH]; rb->lse = it->buf[B_LSE]; rb->delta = it->buf[DELH];
    rb->dq = it->buf[DQH]; rb->o = -1; rb->scores = -1; rb->tmp_delta = -1;
    int64_t kvb = p->B * hkv * Ng * p->d;
    pkt_part parts[4] = {
        {.msg = MSG_K, .local = it->buf[KH], .rb = {-1, -1}, .rin = -1, .orb = {-1, -1}, .rout = -1, .sout = -1, .bytes = kvb * p->es, .acc = 0, .ret_buf = -1},
        {.msg = MSG_V, .local = it->buf[VH], .rb = {-1, -1}, .rin = -1, .orb = {-1, -1}, .rout = -1, .sout = -1, .bytes = kvb * p->es, .acc = 0, .ret_buf = -1},
        {.msg = MSG_DK, .local = -1, .rb = {-1, -1}, .rin = -1, .orb = {-1, -1}, .rout = -1, .sout = -1, .bytes = kvb * 4, .acc = 1, .ret_buf = it->buf[DKH],
         .ret_msg = MSG_RET_DK},
        {.msg = MSG_DV, .local = -1, .rb = {-1, -1}, .rin = -1, .orb = {-1, -1}, .rout = -1, .sout = -1, .bytes = kvb * 4, .acc = 1, .ret_buf = it->buf[DVH],
         .ret_msg = MSG_RET_DV}};
    memcpy(rb->part, parts, sizeof parts);
    rb->nparts = 4;
    ring_bwd_begin(it);
    it->seg = 4;
    it->k = 0;
    return 1;
  }
  case 4:
    if (ring_bwd_step(it, it->k)) { it->k++; return 1; }
    ring_bwd_end(it);
    it->seg = 5;
    return 1;
  case 5:
    it->step = 1000;
    if (U > 1) {
      it->buf[B_DQ] = plan_alloc(it, p->B * p->Zq * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DQ, &qseq, BS_ELEM_F32);
      it->buf[B_DK] = plan_alloc(it, p->B * p->Zkv * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DK, &kseq, BS_ELEM_F32);
      it->buf[B_DV] = plan_alloc(it, p->B * p->Zkv * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DV, &kseq, BS_ELEM_F32);
      h2s_post(it, &it->xf[0], it->buf[DQH], it->buf[B_DQ], p->Zq, p->d, 4);
      h2s_post(it, &it->xf[1], it->buf[DKH], it->buf[B_DK], p->Zkv, p->d, 4);
      h2s_post(it, &it->xf[2], it->buf[DVH], it->buf[B_DV], p->Zkv, p->d, 4);
      wait_xfers(it, 3);
      for (int j = 0; j < 3; j++) h2s_finish(it, &it->xf[j]);
      for (int j = DQH; j <= DVH; j++) plan_free(it, it->buf[j]);
      for (int j = QH; j <= VH; j++) plan_free(it, it->buf[j]);
      plan_free(it, it->buf[OH]);
      plan_free(it, it->buf[DOH]);
    }
    plan_free(it, it->buf[DELH]);
    it->step = -1;
    plan_phase(it, 1, 0);
    it->seg = 9;
    return 1;
  default:
    return 0;
  }
}
