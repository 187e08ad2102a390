/*
 * ring_engine.c — the two rings several methods are made of.
 *
 * Forward K,V ring (burst, ring, usp, ring decode): step s computes on the
 * block held while the next block is already in flight (double buffering).
 * With a double ring (P ranks per node, M nodes) the inner ring runs over the
 * node and an outer ring over nodes carries the next node-block during the
 * whole inner round, so intra- and inter-node links are busy at once
 * (LoongTrain arXiv 2406.18485, double ring).
 *
 * Backward packet ring: a packet (burst: Q, dO, D or O, lse, dQ; ring: K, V,
 * dK, dV) visits every rank. Read-only parts are posted before the step's
 * compute; accumulated parts (dQ, dK, dV) are computed into a fresh partial and
 * summed with the running sum on its way; at the end they return to their owner.
 * With a double ring the backward runs in rounds like the forward: the outer
 * ring brings each round's first packet and carries the node's sums on.
 *
 * Sequence-sharded ring methods (ring_seq): role buffers, both rings over all
 * ranks and the segments around them; burst and ring run them whole, li2021
 * its backward only.
 */
#include "plan_impl.h"

static int md(int x, int m) { return ((x % m) + m) % m; }

int ring_rank(int32_t first, int32_t stride, int P, int M, int a, int i) {
  int pos = md(a, M) * P + md(i, P);
  return first + stride * pos;
}

/* ---------------- forward ---------------- */

void ring_fwd_begin(bs_plan_iter *it, ring_fwd *r) {
  int S = r->P * r->M;
  for (int j = 0; j < 2; j++) {
    r->kb[j] = r->vb[j] = r->okb[j] = r->ovb[j] = -1;
    if (S > 1 && r->P > 1) {
      r->kb[j] = plan_alloc(it, r->kv_bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, it->p->elem);
      r->vb[j] = plan_alloc(it, r->v_bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, it->p->elem);
    }
    if (r->M > 1) {
      r->okb[j] = plan_alloc(it, r->kv_bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, it->p->elem);
      r->ovb[j] = plan_alloc(it, r->v_bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, it->p->elem);
    }
  }
  memset(r->init, 0, sizeof r->init);
  r->n_outer = 0;
  r->active = 1;
}

int ring_fwd_step(bs_plan_iter *it, ring_fwd *r, int s) {
  int S = r->P * r->M;
  if (s >= S) return 0;
  it->step = s;
  int o = s / r->P, t = s % r->P;
  int32_t ck, cv;
  if (t == 0) {
    ck = o == 0 ? r->k0 : r->okb[(o - 1) % 2];
    cv = o == 0 ? r->v0 : r->ovb[(o - 1) % 2];
  } else {
    ck = r->kb[(t - 1) % 2];
    cv = r->vb[(t - 1) % 2];
  }
  if (t == 0 && o < r->M - 1) {
    int prev = ring_rank(r->first, r->stride, r->P, r->M, r->a - 1, r->i);
    int next = ring_rank(r->first, r->stride, r->P, r->M, r->a + 1, r->i);
    r->h_outer[0] = plan_recv(it, prev, MSG_OK, R(r->okb[o % 2], 0), r->kv_bytes);
    r->h_outer[1] = plan_recv(it, prev, MSG_OV, R(r->ovb[o % 2], 0), r->v_bytes);
    r->h_outer[2] = plan_send(it, next, MSG_OK, R(ck, 0), r->kv_bytes);
    r->h_outer[3] = plan_send(it, next, MSG_OV, R(cv, 0), r->v_bytes);
    r->n_outer = 4;
  }
  int32_t hs[4];
  int nh = 0;
  if (t < r->P - 1) {
    int prev = ring_rank(r->first, r->stride, r->P, r->M, r->a, r->i - 1);
    int next = ring_rank(r->first, r->stride, r->P, r->M, r->a, r->i + 1);
    hs[nh++] = plan_recv(it, prev, MSG_K, R(r->kb[t % 2], 0), r->kv_bytes);
    hs[nh++] = plan_recv(it, prev, MSG_V, R(r->vb[t % 2], 0), r->v_bytes);
    hs[nh++] = plan_send(it, next, MSG_K, R(ck, 0), r->kv_bytes);
    hs[nh++] = plan_send(it, next, MSG_V, R(cv, 0), r->v_bytes);
  }
  bs_shard ks = r->ks;
  ks.part = md(r->a - o, r->M) * r->P + md(r->i - t, r->P);
  attn_bufs b = {r->q, ck, cv, r->o, r->lse, -1, -1, -1, -1, -1, r->scores};
  plan_emit_attn(it, 0, r->scores >= 0, r->hq, r->hkv, &r->qs, r->qpos_off, &ks, &b, r->init);
  if (nh) plan_wait(it, hs, nh);
  if (t == r->P - 1 && r->n_outer) {
    plan_wait(it, r->h_outer, r->n_outer);
    r->n_outer = 0;
  }
  return 1;
}

void ring_fwd_end(bs_plan_iter *it, ring_fwd *r) {
  it->step = -1;
  for (int j = 0; j < 2; j++) {
    plan_free(it, r->kb[j]);
    plan_free(it, r->vb[j]);
    plan_free(it, r->okb[j]);
    plan_free(it, r->ovb[j]);
  }
  r->active = 0;
}

/* ---------------- backward ---------------- */

void ring_bwd_begin(bs_plan_iter *it, ring_bwd *r) {
  int S = r->P * r->M;
  for (int j = 0; j < r->nparts; j++) {
    pkt_part *pp = &r->part[j];
    pp->rb[0] = pp->rb[1] = pp->rin = pp->orb[0] = pp->orb[1] = pp->rout = pp->sout = -1;
    if (S > 1) {
      pp->rb[0] = plan_alloc(it, pp->bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
      pp->rb[1] = plan_alloc(it, pp->bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
      if (pp->acc) pp->rin = plan_alloc(it, pp->bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
      if (r->M > 1 && r->P > 1) {
        if (pp->acc) {
          pp->rout = plan_alloc(it, pp->bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
          pp->sout = plan_alloc(it, pp->bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
        } else {
          pp->orb[0] = plan_alloc(it, pp->bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
          pp->orb[1] = plan_alloc(it, pp->bytes, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
        }
      }
    } else if (pp->acc) {
      pp->local = pp->ret_buf; /* no ring: accumulate straight into the result */
    }
  }
  r->n_pre = 0;
  r->n_acc = r->n_oro = r->n_osum_in = r->n_osum_out = 0;
  r->active = 1;
}

/* The buffer holding part pp of the packet computed at step s: read-only parts
 * arrive in the receive buffers, accumulated parts are summed into this step's partial. */
static int dbl(const ring_bwd *r) { return r->M > 1 && r->P > 1; }

static int32_t cur_buf(const ring_bwd *r, const pkt_part *pp, int s) {
  if (pp->acc) return pp->rb[0] < 0 ? pp->local : pp->rb[s % 2];
  if (dbl(r)) { /* a round starts on the packet the outer ring brought; inner steps rotate */
    int o = s / r->P, t = s % r->P;
    if (t == 0) return o == 0 ? pp->local : pp->orb[(o - 1) % 2];
    return pp->rb[(t - 1) % 2];
  }
  return s == 0 ? pp->local : pp->rb[(s - 1) % 2];
}

static int32_t find_part(const ring_bwd *r, int msg, int s) {
  for (int j = 0; j < r->nparts; j++)
    if (r->part[j].msg == msg) return cur_buf(r, &r->part[j], s);
  return -1;
}

/* The step's compute on the packet from ring position `origin`, into this step's partials. */
static void packet_compute(bs_plan_iter *it, ring_bwd *r, int s, int origin) {
  bs_shard ts = r->tmpl;
  ts.part = origin;
  attn_bufs b;
  int init[2] = {1, 1};
  if (r->kind == 0) { /* burst: the query side travels */
    b.q = find_part(r, MSG_Q, s);
    b.dout = find_part(r, MSG_DO, s);
    b.lse = find_part(r, MSG_LSE, s);
    b.dq = find_part(r, MSG_DQ, s);
    b.o = -1;
    if (r->plain) {
      int32_t ob = find_part(r, MSG_O, s);
      plan_emit_delta(it, r->hq, r->hkv, bs_shard_tokens(&ts), ob, b.dout, r->tmp_delta);
      b.delta = r->tmp_delta;
    } else {
      b.delta = find_part(r, MSG_D, s);
    }
    b.k = r->k;
    b.v = r->v;
    b.dk = r->dk;
    b.dv = r->dv;
    b.scores = r->scores;
    plan_emit_attn(it, 1, r->unfused, r->hq, r->hkv, &ts, 0, &r->my, &b, init);
  } else { /* ring: the key/value side travels */
    b.k = find_part(r, MSG_K, s);
    b.v = find_part(r, MSG_V, s);
    b.dk = find_part(r, MSG_DK, s);
    b.dv = find_part(r, MSG_DV, s);
    b.q = r->q;
    b.o = -1;
    b.dout = r->dout;
    b.lse = r->lse;
    b.delta = r->delta;
    b.dq = r->dq;
    b.scores = r->scores;
    plan_emit_attn(it, 1, r->unfused, r->hq, r->hkv, &r->my, 0, &ts, &b, init);
  }
}

/* ELEMWISE ops on fp32 buffers: dst = 0, or dst += src. */
static void ew_zero(bs_plan_iter *it, int32_t dst, int64_t bytes) {
  bs_compute *z = plan_compute(it, BS_K_ELEMWISE);
  z->ew = BS_EW_ZERO;
  z->elems = bytes / 4;
  z->out[0] = R(dst, 0);
}
static void ew_add(bs_plan_iter *it, int32_t dst, int32_t src, int64_t bytes) {
  bs_compute *c = plan_compute(it, BS_K_ELEMWISE);
  c->ew = BS_EW_ADD;
  c->elems = bytes / 4;
  c->in[0] = R(src, 0);
  c->out[0] = R(dst, 0);
}

static int ring_bwd_step_double(bs_plan_iter *it, ring_bwd *r, int s);

/* Step s's traffic on a ring of L ranks where this rank sits at position t, posted into h_pre: the
 * running sums of this packet, sent by the previous rank at the end of its step s - 1 (the tag
 * carries that step), first, as they were sent; then the read-only parts of the next packet received
 * into the free buffer and this packet's forwarded. Partials are reused every other step: the one
 * about to be accumulated into is cleared. */
static void post_ring(bs_plan_iter *it, ring_bwd *r, int s, int t, int L, int prev, int next) {
  if (t > 0) {
    it->step = s - 1;
    for (int j = 0; j < r->nparts; j++)
      if (r->part[j].acc)
        r->h_pre[r->n_pre++] = plan_recv(it, prev, r->part[j].msg, R(r->part[j].rin, 0), r->part[j].bytes);
    it->step = s;
  }
  if (t < L - 1) {
    for (int j = 0; j < r->nparts; j++)
      if (!r->part[j].acc)
        r->h_pre[r->n_pre++] = plan_recv(it, prev, r->part[j].msg, R(r->part[j].rb[t % 2], 0), r->part[j].bytes);
    for (int j = 0; j < r->nparts; j++)
      if (!r->part[j].acc)
        r->h_pre[r->n_pre++] = plan_send(it, next, r->part[j].msg, R(cur_buf(r, &r->part[j], s), 0), r->part[j].bytes);
  }
  if (s >= 2)
    for (int j = 0; j < r->nparts; j++)
      if (r->part[j].acc) ew_zero(it, cur_buf(r, &r->part[j], s), r->part[j].bytes);
}

/* Rank at position x of the backward's flat ring (single ring: M = 1 or P = 1). */
static int flat_rank(const ring_bwd *r, int x) { return r->first + r->stride * md(x, r->P * r->M); }

/*
 * Step s of the backward ring (one ring of S ranks; the double ring is
 * ring_bwd_step_double). Read-only parts of the next packet are received and
 * this packet's forwarded before the compute. Accumulated parts (dQ for burst,
 * dK and dV for ring) are computed into a fresh partial while the sum the
 * previous holder built arrives; then the two are added and the sum goes on, its
 * send joined only at the end of the next step. So no gradient transfer waits on
 * a compute, and none is on the critical path but the last.
 */
int ring_bwd_step(bs_plan_iter *it, ring_bwd *r, int s) {
  int S = r->P * r->M;
  if (s >= S) return 0;
  if (dbl(r)) return ring_bwd_step_double(it, r, s);
  it->step = s;
  const int x = r->a * r->P + r->i, next = flat_rank(r, x + 1), prev = flat_rank(r, x - 1);
  r->n_pre = 0;
  if (S > 1) post_ring(it, r, s, s, S, prev, next);
  packet_compute(it, r, s, md(x - s, S));
  if (S == 1) return 1;
  /* Join the received sums (and the read-only traffic), add them to the partials. */
  plan_wait(it, r->h_pre, r->n_pre);
  r->n_pre = 0;
  if (s > 0)
    for (int j = 0; j < r->nparts; j++)
      if (r->part[j].acc) ew_add(it, cur_buf(r, &r->part[j], s), r->part[j].rin, r->part[j].bytes);
  /* The previous step's sums have left by now or must before their buffer is reused. */
  int32_t h_prev[PKT_MAX];
  int n_prev = r->n_acc;
  memcpy(h_prev, r->h_acc, sizeof h_prev);
  r->n_acc = 0;
  if (s < S - 1) {
    for (int j = 0; j < r->nparts; j++)
      if (r->part[j].acc)
        r->h_acc[r->n_acc++] = plan_send(it, next, r->part[j].msg, R(cur_buf(r, &r->part[j], s), 0), r->part[j].bytes);
    if (n_prev) plan_wait(it, h_prev, n_prev);
  } else {
    /* Last step: the sums are final and belong to the next rank's packet (origin
     * x - (S - 1)); ours was finished by the previous rank. */
    for (int j = 0; j < r->nparts; j++) {
      pkt_part *pp = &r->part[j];
      if (!pp->acc) continue;
      r->h_pre[r->n_pre++] = plan_send(it, next, pp->ret_msg, R(cur_buf(r, pp, s), 0), pp->bytes);
      r->h_pre[r->n_pre++] = plan_recv(it, prev, pp->ret_msg, R(pp->ret_buf, 0), pp->bytes);
    }
    for (int j = 0; j < n_prev; j++) r->h_pre[r->n_pre++] = h_prev[j];
    plan_wait(it, r->h_pre, r->n_pre);
    r->n_pre = 0;
  }
  return 1;
}

/*
 * Step s of the double-ring backward (M nodes of P ranks), laid out like the
 * forward: round o works on the packets of node a - o, each visiting the node's
 * P ranks in inner-ring order while its gradient sum runs along with it. The
 * round's first packet came over the outer ring during the previous round
 * (sent at its step 1), so inner and outer links are busy at once. The previous
 * node's sum for a packet, sent over the outer ring at the end of a round, is
 * added by the rank that holds that packet in the next round (one step before
 * that round's end after round 0, at its end later). Round 0 forwards its step-1
 * packet and later rounds their step-0 packet, which offsets the rotation by
 * f = 1 from round 1 on: after the last round every sum then sits on its owner's
 * rail, one node away, so every message of the backward is rail-aligned.
 */
static int ring_bwd_step_double(bs_plan_iter *it, ring_bwd *r, int s) {
  const int P = r->P, M = r->M, o = s / P, t = s % P;
  const int f = o > 0;                       /* rotation offset of round o */
  const int fwd_at = o == 0 ? 1 : 0;         /* step of round o whose packet goes to the next node */
  const int add_at = o == 1 ? P - 2 : P - 1; /* step of round o that adds the previous node's sum */
  const int in_prev = ring_rank(r->first, r->stride, P, M, r->a, r->i - 1);
  const int in_next = ring_rank(r->first, r->stride, P, M, r->a, r->i + 1);
  const int out_prev = ring_rank(r->first, r->stride, P, M, r->a - 1, r->i);
  const int out_next = ring_rank(r->first, r->stride, P, M, r->a + 1, r->i);
  it->step = s;
  r->n_pre = 0;
  /* Messages between two ranks are matched in the order sent, so receives are
   * posted in that order: the previous node's sums (end of its round), then the
   * next round's first packet. */
  if (t == 0 && o > 0) {
    it->step = s - 1;
    for (int j = 0; j < r->nparts; j++)
      if (r->part[j].acc)
        r->h_osum_in[r->n_osum_in++] = plan_recv(it, out_prev, r->part[j].msg, R(r->part[j].rout, 0), r->part[j].bytes);
    it->step = s;
  }
  if (t == fwd_at && o < M - 1) {
    for (int j = 0; j < r->nparts; j++)
      if (!r->part[j].acc)
        r->h_oro[r->n_oro++] = plan_recv(it, out_prev, r->part[j].msg, R(r->part[j].orb[o % 2], 0), r->part[j].bytes);
    for (int j = 0; j < r->nparts; j++) {
      pkt_part *pp = &r->part[j];
      if (pp->acc) continue;
      int32_t src = cur_buf(r, pp, s);
      if (o == 0) {
        /* Round 0 forwards an inner receive buffer, which the next inner step
         * overwrites: send a copy, from the outer buffer round 1 fills later. */
        bs_compute *c = plan_compute(it, BS_K_COPY);
        c->elems = pp->bytes;
        c->in[0] = R(src, 0);
        c->out[0] = R(pp->orb[1], 0);
        src = pp->orb[1];
      }
      r->h_oro[r->n_oro++] = plan_send(it, out_next, pp->msg, R(src, 0), pp->bytes);
    }
  }
  post_ring(it, r, s, t, P, in_prev, in_next);
  packet_compute(it, r, s, md(r->a - o, M) * P + md(r->i - t - f, P));
  plan_wait(it, r->h_pre, r->n_pre);
  r->n_pre = 0;
  if (t > 0)
    for (int j = 0; j < r->nparts; j++)
      if (r->part[j].acc) ew_add(it, cur_buf(r, &r->part[j], s), r->part[j].rin, r->part[j].bytes);
  if (t == add_at && r->n_osum_in) {
    plan_wait(it, r->h_osum_in, r->n_osum_in);
    r->n_osum_in = 0;
    for (int j = 0; j < r->nparts; j++)
      if (r->part[j].acc) ew_add(it, cur_buf(r, &r->part[j], s), r->part[j].rout, r->part[j].bytes);
  }
  int32_t h_prev[PKT_MAX];
  int n_prev = r->n_acc;
  memcpy(h_prev, r->h_acc, sizeof h_prev);
  r->n_acc = 0;
  if (t < P - 1) {
    for (int j = 0; j < r->nparts; j++)
      if (r->part[j].acc)
        r->h_acc[r->n_acc++] =
          plan_send(it, in_next, r->part[j].msg, R(cur_buf(r, &r->part[j], s), 0), r->part[j].bytes);
    if (n_prev) plan_wait(it, h_prev, n_prev);
    return 1;
  }
  /* Last step of the round: this packet's sum covers every node so far. */
  if (n_prev) plan_wait(it, h_prev, n_prev);
  if (r->n_oro) { /* the next round's first packet */
    plan_wait(it, r->h_oro, r->n_oro);
    r->n_oro = 0;
  }
  if (r->n_osum_out) { /* the out buffer is free again (its send had a whole round) */
    plan_wait(it, r->h_osum_out, r->n_osum_out);
    r->n_osum_out = 0;
  }
  if (o < M - 1) {
    for (int j = 0; j < r->nparts; j++) {
      pkt_part *pp = &r->part[j];
      if (!pp->acc) continue;
      bs_compute *c = plan_compute(it, BS_K_COPY);
      c->elems = pp->bytes;
      c->in[0] = R(cur_buf(r, pp, s), 0);
      c->out[0] = R(pp->sout, 0);
      r->h_osum_out[r->n_osum_out++] = plan_send(it, out_next, pp->msg, R(pp->sout, 0), pp->bytes);
    }
    return 1;
  }
  /* Last round: the sum is final and belongs to the next node on this rail; ours comes from the previous. */
  for (int j = 0; j < r->nparts; j++) {
    pkt_part *pp = &r->part[j];
    if (!pp->acc) continue;
    r->h_pre[r->n_pre++] = plan_send(it, out_next, pp->ret_msg, R(cur_buf(r, pp, s), 0), pp->bytes);
    r->h_pre[r->n_pre++] = plan_recv(it, out_prev, pp->ret_msg, R(pp->ret_buf, 0), pp->bytes);
  }
  plan_wait(it, r->h_pre, r->n_pre);
  r->n_pre = 0;
  return 1;
}

void ring_bwd_end(bs_plan_iter *it, ring_bwd *r) {
  it->step = -1;
  for (int j = 0; j < r->nparts; j++) {
    pkt_part *pp = &r->part[j];
    plan_free(it, pp->rb[0]);
    plan_free(it, pp->rb[1]);
    plan_free(it, pp->rin);
    plan_free(it, pp->orb[0]);
    plan_free(it, pp->orb[1]);
    plan_free(it, pp->rout);
    plan_free(it, pp->sout);
  }
  r->active = 0;
}

/* ---------------- the sequence-sharded ring methods ---------------- */

/* A shard of the sequence split by the plan's layout: the balance layouts' runs attached. */
static bs_shard seq_shard(const bs_plan *p, int part, int64_t n_total, int64_t heads) {
  bs_shard s = plan_shard(p->cfg.par.layout, part, p->G, n_total, 0, (int32_t)heads);
  if (p->runs && s.parts > 1) s.runs = p->runs;
  return s;
}

static bs_shard q_shard(const bs_plan *p, int rank) {
  if (p->decode) return plan_shard(BS_CONTIGUOUS, 0, 1, p->nq_dec, 0, (int32_t)p->Zq);
  return seq_shard(p, rank, p->N - p->Nc, p->Zq);
}

/* The K,V shard of ring position `part`: with a KV cache, its part of the cache and of the new tokens. */
static bs_shard kv_shard(const bs_plan *p, int part) {
  bs_shard s = seq_shard(p, part, p->N, p->Zkv);
  s.n_cache = p->Nc;
  return s;
}

/* The forward ring over all G ranks (a double ring when the plan chose one). */
static void seq_fwd_ring(bs_plan_iter *it, ring_seq *s, const bs_shard *qs) {
  const bs_plan *p = it->p;
  ring_fwd *rf = &s->rf;
  rf->first = 0;
  rf->stride = 1;
  rf->P = p->P;
  rf->M = p->M;
  rf->a = it->rank / p->P;
  rf->i = it->rank % p->P;
  rf->hq = p->Zq;
  rf->hkv = p->Zkv;
  rf->qs = *qs;
  rf->qpos_off = p->decode ? p->N : p->Nc;
  rf->ks = kv_shard(p, 0);
  rf->q = s->q;
  rf->o = s->o;
  rf->lse = s->lse;
  rf->k0 = s->k;
  rf->v0 = s->v;
  rf->scores = s->scores;
  rf->kv_bytes = p->B * p->Zkv * (p->N / p->G) * p->d * p->es;
  rf->v_bytes = p->B * p->Zkv * (p->N / p->G) * p->dv * p->es;
  ring_fwd_begin(it, rf);
}

/* Forward begin: PHASE, the role ALLOCs, the score workspace (unfused), the ring. */
static void seq_fwd_begin(bs_plan_iter *it, ring_seq *s, int unfused) {
  const bs_plan *p = it->p;
  int r = it->rank;
  int64_t n = p->N / p->G;
  bs_shard qs = q_shard(p, r);
  bs_shard ks = kv_shard(p, r);
  int64_t nq = bs_shard_tokens(&qs);
  plan_phase(it, 0, 1);
  s->q = plan_alloc(it, p->B * p->Zq * nq * p->d * p->es, BS_MEM_INPUT, BS_ROLE_Q, &qs, p->elem);
  s->k = plan_alloc(it, p->B * p->Zkv * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_K, &ks, p->elem);
  s->v = plan_alloc(it, p->B * p->Zkv * n * p->dv * p->es, BS_MEM_INPUT, BS_ROLE_V, &ks, p->elem);
  s->o = plan_alloc(it, p->B * p->Zq * nq * p->dv * 4, BS_MEM_OUTPUT, BS_ROLE_O, &qs, BS_ELEM_F32);
  s->lse = plan_alloc(it, p->B * p->Zq * nq * 4, BS_MEM_OUTPUT, BS_ROLE_LSE, &qs, BS_ELEM_F32);
  s->scores = -1;
  if (unfused) {
    int64_t qlen = qs.layout == BS_ZIGZAG ? nq / 2 : nq, klen = ks.layout == BS_ZIGZAG ? n / 2 : n;
    if (qs.runs) qlen = klen = qs.runs->max_len; /* the longest run of the balance layouts */
    s->scores = plan_alloc(it, p->B * p->Zq * qlen * klen * 4, BS_MEM_SCORES, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  }
  seq_fwd_ring(it, s, &qs);
}

/* Backward role buffers: DOUT, DQ, DK, DV. */
static void seq_bwd_roles(bs_plan_iter *it, ring_seq *s) {
  const bs_plan *p = it->p;
  int64_t n = p->N / p->G;
  bs_shard qs = q_shard(p, it->rank);
  bs_shard ks = seq_shard(p, it->rank, p->N, p->Zkv);
  s->dout = plan_alloc(it, p->B * p->Zq * n * p->dv * p->es, BS_MEM_INPUT, BS_ROLE_DOUT, &qs, p->elem);
  s->dq = plan_alloc(it, p->B * p->Zq * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DQ, &qs, BS_ELEM_F32);
  s->dk = plan_alloc(it, p->B * p->Zkv * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DK, &ks, BS_ELEM_F32);
  s->dv = plan_alloc(it, p->B * p->Zkv * n * p->dv * 4, BS_MEM_OUTPUT, BS_ROLE_DV, &ks, BS_ELEM_F32);
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

/* The backward ring over all G ranks: the stationary side's buffers and the travelling packet. */
static void seq_bwd_ring(bs_plan_iter *it, ring_seq *s, int kind, int plain, int unfused) {
  const bs_plan *p = it->p;
  int r = it->rank;
  int64_t n = p->N / p->G;
  ring_bwd *rb = &s->rb;
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
  bs_shard qs = seq_shard(p, r, p->N, p->Zq);
  bs_shard ks = seq_shard(p, r, p->N, p->Zkv);
  rb->q = s->q;
  rb->k = s->k;
  rb->v = s->v;
  rb->o = s->o;
  rb->dout = s->dout;
  rb->lse = s->lse;
  rb->delta = s->delta;
  rb->dq = s->dq;
  rb->dk = s->dk;
  rb->dv = s->dv;
  rb->tmp_delta = s->tdelta;
  rb->scores = s->scores;
  int64_t qb = p->B * p->Zq * n * p->d, kb = p->B * p->Zkv * n * p->d, rows = p->B * p->Zq * n;
  int64_t ob = p->B * p->Zq * n * p->dv, vb = p->B * p->Zkv * n * p->dv; /* o, dout; v, dv */
  if (kind == 0) {
    rb->my = ks;
    rb->tmpl = qs;
    add_part(rb, MSG_Q, s->q, qb * p->es, 0, -1, 0);
    add_part(rb, MSG_DO, s->dout, ob * p->es, 0, -1, 0);
    if (plain) add_part(rb, MSG_O, s->o, ob * 4, 0, -1, 0);
    else add_part(rb, MSG_D, s->delta, rows * 4, 0, -1, 0);
    add_part(rb, MSG_LSE, s->lse, rows * 4, 0, -1, 0);
    add_part(rb, MSG_DQ, -1, qb * 4, 1, s->dq, MSG_RET_DQ);
  } else {
    rb->my = qs;
    rb->tmpl = ks;
    add_part(rb, MSG_K, s->k, kb * p->es, 0, -1, 0);
    add_part(rb, MSG_V, s->v, vb * p->es, 0, -1, 0);
    add_part(rb, MSG_DK, -1, kb * 4, 1, s->dk, MSG_RET_DK);
    add_part(rb, MSG_DV, -1, vb * 4, 1, s->dv, MSG_RET_DV);
  }
  ring_bwd_begin(it, rb);
}

int ring_seq_bwd(bs_plan_iter *it, ring_seq *s, int kind, int plain, int unfused) {
  const bs_plan *p = it->p;
  switch (s->bseg) {
  case 0:
    plan_phase(it, 1, 1);
    seq_bwd_roles(it, s);
    s->delta = s->tdelta = -1;
    if (kind == 1 || !plain) s->delta = plan_emit_local_delta(it, s->o, s->dout);
    if (kind == 0 && plain) {
      int64_t n = p->N / p->G;
      s->tdelta = plan_alloc(it, p->B * p->Zq * n * 4, BS_MEM_WORKSPACE, BS_ROLE_TMP, NULL, BS_ELEM_F32);
    }
    seq_bwd_ring(it, s, kind, plain, unfused);
    s->bseg = 1;
    s->bat = 0;
    return 1;
  case 1:
    if (ring_bwd_step(it, &s->rb, s->bat)) {
      s->bat++;
      return 1;
    }
    ring_bwd_end(it, &s->rb);
    plan_free(it, s->delta);
    plan_free(it, s->tdelta);
    plan_free(it, s->scores);
    plan_phase(it, 1, 0);
    s->bseg = 2;
    return 1;
  default: return 0;
  }
}

int ring_seq_gen(bs_plan_iter *it, ring_seq *s, int kind, int plain, int unfused) {
  const bs_plan *p = it->p;
  if (p->cfg.par.cp_pass == BS_PASS_Q) return passq_gen(it, &s->pq, unfused);
  switch (s->seg) {
  case 0:
    seq_fwd_begin(it, s, unfused);
    s->seg = 1;
    s->at = 0;
    return 1;
  case 1:
    if (ring_fwd_step(it, &s->rf, s->at)) {
      s->at++;
      return 1;
    }
    ring_fwd_end(it, &s->rf);
    if (!p->bwd) {
      plan_free(it, s->scores);
      s->scores = -1;
    }
    plan_phase(it, 0, 0);
    s->seg = 2;
    return 1;
  default: return p->bwd ? ring_seq_bwd(it, s, kind, plain, unfused) : 0;
  }
}
