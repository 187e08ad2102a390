/*
 * allgather.c — context parallelism by all-gathering K and V (Llama 3, Dubey et al., arXiv 2407.21783
 * §3.3.2 "all-gather based context parallelism"; Megatron-Core / Transformer Engine's
 * cp_comm_type = "all_gather", AttnFuncWithCPAndKVAllGather in
 * transformer_engine/pytorch/attention.py; PyTorch's context_parallel with
 * _RotateMethod.ALL_GATHER, torch/distributed/tensor/experimental/_attention.py).
 *
 * Every rank holds its query and key/value shard (zigzag: the head-tail pair of chunks that
 * balances causal work, Llama 3's "2 x CP chunks"). The forward all-gathers K and V of the whole
 * sequence over the group once, then attends its local queries to every rank's K,V block in the
 * gathered buffer with the same tiled kernels as the rings (fully masked blocks skipped). The
 * all-gather is exposed: the references issue it before the attention, with nothing to overlap.
 * The backward all-gathers K and V again (Transformer Engine keeps only the local shards between
 * the passes, to save memory), accumulates dQ locally and the dK, dV partials of the whole
 * sequence in fp32, and reduce-scatters those to their owners (fp32 like ring's travelling dK,
 * dV). What travels per rank: forward (G - 1)/G of the sequence's K,V; backward that again plus
 * (G - 1)/G of the sequence's dK,dV in fp32. The gathered K,V (and in the backward the dK,dV
 * partials) of the whole sequence are held while attention runs: the method's memory cost.
 */
#include "plan_impl.h"

typedef struct {
  int32_t q, k, v, o, lse, dout, dq, dk, dv, delta;
  int32_t kg, vg;   /* K, V of the whole sequence, rank-major (block j = rank j's shard) */
  int32_t dkg, dvg; /* dK, dV partials of the whole sequence (fp32), rank-major */
  int init[2];      /* forward: query chunk has received its first block */
  int seg, at;
} ag_state;

static int check_allgather(const bs_plan *p, char *err, size_t errlen) {
  bs_layout l = p->cfg.par.layout;
  if (l != BS_CONTIGUOUS && l != BS_ZIGZAG && l != BS_STRIPED) {
    snprintf(err, errlen, "parallel.layout: allgather takes contiguous, zigzag or striped shards, not %s",
             bs_layout_name(l));
    return -1;
  }
  return plan_check_ring(p, err, errlen); /* the sequence divides into the layout's parts */
}

static bs_shard ag_shard(const bs_plan *p, int part, int64_t heads) {
  return plan_shard(p->cfg.par.layout, part, p->G, p->N, 0, (int32_t)heads);
}

/* One all-gather of this rank's block `local` (bytes) into `all` over the group. */
static int32_t gather(bs_plan_iter *it, int32_t local, int32_t all, int64_t bytes) {
  bs_group g = {0, 1, it->p->G};
  return plan_coll(it, BS_COLL_ALLGATHER, BS_RED_SUM, it->p->elem, g, R(local, 0), R(all, 0), bytes);
}

/* The gathered K, V: allocated, filled by two all-gathers, joined. */
static void gather_kv(bs_plan_iter *it, ag_state *s) {
  const bs_plan *p = it->p;
  int64_t n = p->N / p->G, kb = p->B * p->Zkv * n * p->d * p->es, vb = p->B * p->Zkv * n * p->dv * p->es;
  s->kg = plan_alloc(it, kb * p->G, BS_MEM_COMM, BS_ROLE_TMP, NULL, p->elem);
  s->vg = plan_alloc(it, vb * p->G, BS_MEM_COMM, BS_ROLE_TMP, NULL, p->elem);
  int32_t h[2];
  it->step = 0;
  h[0] = gather(it, s->k, s->kg, kb);
  h[1] = gather(it, s->v, s->vg, vb);
  plan_wait(it, h, 2);
}

static void ag_fwd_begin(bs_plan_iter *it, ag_state *s) {
  const bs_plan *p = it->p;
  int64_t n = p->N / p->G;
  bs_shard qs = ag_shard(p, it->rank, p->Zq), ks = ag_shard(p, it->rank, p->Zkv);
  plan_phase(it, 0, 1);
  s->q = plan_alloc(it, p->B * p->Zq * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_Q, &qs, p->elem);
  s->k = plan_alloc(it, p->B * p->Zkv * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_K, &ks, p->elem);
  s->v = plan_alloc(it, p->B * p->Zkv * n * p->dv * p->es, BS_MEM_INPUT, BS_ROLE_V, &ks, p->elem);
  s->o = plan_alloc(it, p->B * p->Zq * n * p->dv * 4, BS_MEM_OUTPUT, BS_ROLE_O, &qs, BS_ELEM_F32);
  s->lse = plan_alloc(it, p->B * p->Zq * n * 4, BS_MEM_OUTPUT, BS_ROLE_LSE, &qs, BS_ELEM_F32);
  gather_kv(it, s);
  s->init[0] = s->init[1] = 0;
}

static void ag_bwd_begin(bs_plan_iter *it, ag_state *s) {
  const bs_plan *p = it->p;
  int64_t n = p->N / p->G;
  bs_shard qs = ag_shard(p, it->rank, p->Zq), ks = ag_shard(p, it->rank, p->Zkv);
  plan_phase(it, 1, 1);
  s->dout = plan_alloc(it, p->B * p->Zq * n * p->dv * p->es, BS_MEM_INPUT, BS_ROLE_DOUT, &qs, p->elem);
  s->dq = plan_alloc(it, p->B * p->Zq * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DQ, &qs, BS_ELEM_F32);
  s->dk = plan_alloc(it, p->B * p->Zkv * n * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_DK, &ks, BS_ELEM_F32);
  s->dv = plan_alloc(it, p->B * p->Zkv * n * p->dv * 4, BS_MEM_OUTPUT, BS_ROLE_DV, &ks, BS_ELEM_F32);
  s->delta = plan_emit_local_delta(it, s->o, s->dout);
  gather_kv(it, s);
  s->dkg = plan_alloc(it, p->B * p->Zkv * p->N * p->d * 4, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  s->dvg = plan_alloc(it, p->B * p->Zkv * p->N * p->dv * 4, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
}

/* Step `at`: the local queries against the block of rank (rank - at) mod G (own block first). */
static void ag_step(bs_plan_iter *it, ag_state *s, int bwd) {
  const bs_plan *p = it->p;
  int j = (it->rank - s->at + p->G) % p->G;
  bs_shard qs = ag_shard(p, it->rank, p->Zq), ks = ag_shard(p, j, p->Zkv);
  it->step = s->at;
  if (!bwd) {
    attn_bufs b = {s->q, s->kg, s->vg, s->o, s->lse, -1, -1, -1, -1, -1, -1};
    plan_emit_attn_kv_at(it, 0, p->Zq, p->Zkv, &qs, &ks, &b, s->init, (int64_t)j * (p->N / p->G));
  } else {
    int init[2] = {1, 1};
    attn_bufs b = {s->q, s->kg, s->vg, -1, s->lse, s->dout, s->delta, s->dq, s->dkg, s->dvg, -1};
    plan_emit_attn_kv_at(it, 1, p->Zq, p->Zkv, &qs, &ks, &b, init, (int64_t)j * (p->N / p->G));
  }
  it->step = -1;
}

/* The end of the backward: the dK, dV partials reduce-scattered to their owners, the buffers freed. */
static void ag_bwd_end(bs_plan_iter *it, ag_state *s) {
  const bs_plan *p = it->p;
  bs_group g = {0, 1, p->G};
  int32_t h[2];
  it->step = p->G;
  h[0] = plan_coll(it, BS_COLL_REDUCE_SCATTER, BS_RED_SUM, BS_ELEM_F32, g, R(s->dkg, 0), R(s->dk, 0),
                   p->B * p->Zkv * p->N * p->d * 4);
  h[1] = plan_coll(it, BS_COLL_REDUCE_SCATTER, BS_RED_SUM, BS_ELEM_F32, g, R(s->dvg, 0), R(s->dv, 0),
                   p->B * p->Zkv * p->N * p->dv * 4);
  plan_wait(it, h, 2);
  it->step = -1;
  plan_free(it, s->dkg);
  plan_free(it, s->dvg);
  plan_free(it, s->kg);
  plan_free(it, s->vg);
  plan_free(it, s->delta);
  plan_phase(it, 1, 0);
}

static int gen_allgather(bs_plan_iter *it, void *state) {
  const bs_plan *p = it->p;
  ag_state *s = state;
  switch (s->seg) {
  case 0:
    ag_fwd_begin(it, s);
    s->seg = 1;
    s->at = 0;
    return 1;
  case 1:
    if (s->at < p->G) {
      ag_step(it, s, 0);
      s->at++;
      return 1;
    }
    plan_free(it, s->kg);
    plan_free(it, s->vg);
    plan_phase(it, 0, 0);
    s->seg = 2;
    return 1;
  case 2:
    if (!p->bwd) return 0;
    ag_bwd_begin(it, s);
    s->seg = 3;
    s->at = 0;
    return 1;
  case 3:
    if (s->at < p->G) {
      ag_step(it, s, 1);
      s->at++;
      return 1;
    }
    ag_bwd_end(it, s);
    s->seg = 4;
    return 1;
  default: return 0;
  }
}

const plan_method plan_method_allgather = {
  .check = check_allgather,
  .gen = gen_allgather,
  .state_size = sizeof(ag_state),
  .double_ring = 0,
  .decode = 0,
  .ring = 0,
  .a2a = 0,
};
