/*
 * ring.c — RingAttention (Liu et al., arXiv 2310.01889) as ring-flash-attention
 * runs it: the forward is the double-buffered K,V ring (as burst); the
 * backward rings K, V again together with dK, dV (fp32), which return to their
 * owner at the end, while Q, dO, lse, D and dQ stay local. In phase decode the
 * query tokens are replicated and the KV shards travel the ring (Tree
 * Attention arXiv 2408.04093 §6.3). Its checks serve burst too.
 */
#include "plan_impl.h"

int plan_check_ring(const bs_plan *p, char *err, size_t errlen) {
  const bs_config *c = &p->cfg;
  if (p->decode && c->par.layout != BS_CONTIGUOUS) {
    snprintf(err, errlen, "parallel.layout: decode shards the KV cache contiguously; %s is not supported",
             bs_layout_name(c->par.layout));
    return -1;
  }
  if (p->decode && c->par.cp_pass == BS_PASS_Q && p->nq_dec % p->G != 0) {
    snprintf(err, errlen, "workload.decode_tokens: pass-Q splits the %lld query tokens over the %d ranks of the ring",
             (long long)p->nq_dec, p->G);
    return -1;
  }
  if (p->Nc > 0) { /* the cache and the new tokens are each split by the layout */
    int64_t parts = c->par.layout == BS_ZIGZAG ? 2 * (int64_t)p->G : p->G;
    if (p->Nc % parts != 0 || (p->N - p->Nc) % parts != 0) {
      snprintf(err, errlen,
               "workload.cached_tokens: %lld cached and %lld new tokens must each divide into %lld parts (%s over %d "
               "ranks)",
               (long long)p->Nc, (long long)(p->N - p->Nc), (long long)parts, bs_layout_name(c->par.layout), p->G);
      return -1;
    }
    return 0;
  }
  if (c->par.layout == BS_ZIGZAG) {
    if (p->N % (2 * (int64_t)p->G) != 0) {
      snprintf(err, errlen, "parallel.gpus: zigzag needs 2 x gpus (%lld) to divide seq_len %lld",
               (long long)(2 * (int64_t)p->G), (long long)p->N);
      return -1;
    }
  } else if (p->N % p->G != 0) {
    snprintf(err, errlen, "parallel.gpus: %d does not divide seq_len %lld", p->G, (long long)p->N);
    return -1;
  }
  return 0;
}

static int gen_ring(bs_plan_iter *it, void *state) { return ring_seq_gen(it, state, 1, 0, 0); }

const plan_method plan_method_ring = {
  .check = plan_check_ring,
  .gen = gen_ring,
  .state_size = sizeof(ring_seq),
  .double_ring = 1,
  .decode = 1,
  .ring = 1,
  .a2a = 0,
};
