/*
 * burst.c — BurstAttention (arXiv 2403.09347 v4, Alg. 1-2): a double-buffered
 * K,V ring in the forward; in the backward K, V, dK, dV stay put while a
 * packet of Q, dO, D (= rowsum(dO * O)), lse and dQ travels, dQ returning to
 * its owner at the end. bwd_comm = plain rings O instead of D and computes D
 * on arrival (Burst-Attention code default). lao = off materialises the score
 * block per step (the paper's "w/o LAO"). The rings themselves are the ring
 * engine's (ring_engine.c), shared with ring.
 */
#include "plan_impl.h"

static int gen_burst(bs_plan_iter *it, void *state) {
  const bs_parallel *par = &it->p->cfg.par;
  return ring_seq_gen(it, state, 0, !par->bwd_opt, !par->lao);
}

/* Shapes as ring's (plan_check_ring); no decode phase. */
const plan_method plan_method_burst = {
  .check = plan_check_ring,
  .gen = gen_burst,
  .state_size = sizeof(ring_seq),
  .double_ring = 1,
  .decode = 0,
  .ring = 1,
  .a2a = 0,
};
