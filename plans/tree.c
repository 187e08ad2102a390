/*
 * tree.c — Tree Attention decoding (arXiv 2408.04093 §5-6, Alg. 3): the query
 * tokens are replicated, the KV cache is sharded; each rank runs flash
 * attention over its shard, then Allreduce(max lse), Allreduce(sum of the
 * rescaled numerators) and Allreduce(sum of the denominators) give every rank
 * the exact output, with volume independent of the sequence length.
 */
#include "plan_impl.h"

static int check_tree(const bs_plan *p, char *err, size_t errlen) {
  if (p->cfg.par.layout != BS_CONTIGUOUS) {
    snprintf(err, errlen, "parallel.layout: tree shards the KV cache contiguously; %s is not supported",
             bs_layout_name(p->cfg.par.layout));
    return -1;
  }
  if (p->N % p->G != 0) {
    snprintf(err, errlen, "parallel.gpus: %d does not divide seq_len %lld", p->G, (long long)p->N);
    return -1;
  }
  return 0;
}

/* The whole decode step is one segment. */
typedef struct {
  int done;
} tree_state;

static int gen_tree(bs_plan_iter *it, void *state) {
  const bs_plan *p = it->p;
  tree_state *s = state;
  if (s->done) return 0;
  s->done = 1;
  int r = it->rank;
  int64_t n = p->N / p->G, t = p->nq_dec, rows = p->B * p->Zq * t;
  bs_shard qs = plan_shard(BS_CONTIGUOUS, 0, 1, t, 0, (int32_t)p->Zq);
  bs_shard ks = plan_shard(BS_CONTIGUOUS, r, p->G, p->N, 0, (int32_t)p->Zkv);
  bs_group all = {0, 1, p->G};
  plan_phase(it, 0, 1);
  int32_t q = plan_alloc(it, rows * p->d * p->es, BS_MEM_INPUT, BS_ROLE_Q, &qs, p->elem);
  int32_t k = plan_alloc(it, p->B * p->Zkv * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_K, &ks, p->elem);
  int32_t v = plan_alloc(it, p->B * p->Zkv * n * p->d * p->es, BS_MEM_INPUT, BS_ROLE_V, &ks, p->elem);
  int32_t o = plan_alloc(it, rows * p->d * 4, BS_MEM_OUTPUT, BS_ROLE_O, &qs, BS_ELEM_F32);
  int32_t lse = plan_alloc(it, rows * 4, BS_MEM_OUTPUT, BS_ROLE_LSE, &qs, BS_ELEM_F32);
  int32_t ol = plan_alloc(it, rows * p->d * 4, BS_MEM_WORKSPACE, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  int32_t ll = plan_alloc(it, rows * 4, BS_MEM_WORKSPACE, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  attn_bufs b = {q, k, v, ol, ll, -1, -1, -1, -1, -1, -1};
  int init[2] = {0, 0};
  it->step = 0;
  plan_emit_attn(it, 0, 0, p->Zq, p->Zkv, &qs, p->N, &ks, &b, init);
  /* m = allreduce(max lse) */
  int32_t m = plan_alloc(it, rows * 4, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  bs_compute *c = plan_compute(it, BS_K_COPY);
  c->elems = rows * 4;
  c->in[0] = R(ll, 0);
  c->out[0] = R(m, 0);
  it->step = 1;
  int32_t h[2];
  h[0] = plan_coll(it, BS_COLL_ALLREDUCE, BS_RED_MAX, BS_ELEM_F32, all, R(m, 0), R(m, 0), rows * 4);
  plan_wait(it, h, 1);
  /* numerators o * exp(lse - m) and denominators exp(lse - m), summed over ranks */
  int32_t num = plan_alloc(it, rows * p->d * 4, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  int32_t den = plan_alloc(it, rows * 4, BS_MEM_COMM, BS_ROLE_TMP, NULL, BS_ELEM_F32);
  c = plan_compute(it, BS_K_ELEMWISE);
  c->ew = BS_EW_TREE_RESCALE;
  c->a = plan_attn_params(p, p->Zq, p->Zkv, t, n);
  c->elems = rows * p->d;
  c->flops = 2.0 * (double)c->elems;
  c->in[0] = R(ol, 0);
  c->in[1] = R(ll, 0);
  c->in[2] = R(m, 0);
  c->out[0] = R(num, 0);
  c->out[1] = R(den, 0);
  it->step = 2;
  h[0] = plan_coll(it, BS_COLL_ALLREDUCE, BS_RED_SUM, BS_ELEM_F32, all, R(num, 0), R(num, 0), rows * p->d * 4);
  h[1] = plan_coll(it, BS_COLL_ALLREDUCE, BS_RED_SUM, BS_ELEM_F32, all, R(den, 0), R(den, 0), rows * 4);
  plan_wait(it, h, 2);
  c = plan_compute(it, BS_K_ELEMWISE);
  c->ew = BS_EW_TREE_FINAL;
  c->a = plan_attn_params(p, p->Zq, p->Zkv, t, n);
  c->elems = rows * p->d;
  c->flops = (double)c->elems;
  c->in[0] = R(num, 0);
  c->in[1] = R(den, 0);
  c->in[2] = R(m, 0);
  c->out[0] = R(o, 0);
  c->out[1] = R(lse, 0);
  it->step = -1;
  plan_free(it, num);
  plan_free(it, den);
  plan_free(it, m);
  plan_free(it, ol);
  plan_free(it, ll);
  plan_phase(it, 0, 0);
  return 1;
}

const plan_method plan_method_tree = {
  .check = check_tree,
  .gen = gen_tree,
  .state_size = sizeof(tree_state),
  .double_ring = 0,
  .decode = 2,
  .ring = 0,
  .a2a = 0,
};
