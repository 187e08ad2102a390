/*
 * workload_moe.c — the mixture-of-experts block of a layer (model.experts > 0) in place of its
 * dense MLP, with expert parallelism as Megatron-Core lays it out.
 *
 * Block (Megatron-Core's MoELayer with the all-to-all token dispatcher; Mixtral, arXiv 2401.04088,
 * section 2.1): a router GEMM [tokens x hidden] x [hidden x experts] and its softmax and top-k;
 * the routed tokens (top_k copies of each) permuted by expert and sent to the ranks holding their
 * experts by an all-to-all over the expert-parallel group (dispatch); under tp (sequence parallel,
 * expert tensor parallelism = tp) gathered over the tp group; each local expert a SwiGLU FFN of
 * moe_ffn (gate and up, SwiGLU, down: the grouped GEMM, one GEMM per expert at the profile's GEMM
 * rates); reduce-scattered over tp, sent back by a second all-to-all (combine), unpermuted and
 * summed with the router's weights; shared experts (model.shared_experts) a dense SwiGLU FFN of
 * shared_experts x moe_ffn beside them. The backward mirrors it: the combine's gradient goes out
 * by an all-to-all, the experts' backward GEMMs run, the dispatch's gradient comes back by another.
 *
 * Expert parallelism (Megatron-Core's MoE parallel folding, Liu et al. 2025, arXiv 2504.14960):
 * the ep ranks of an expert-parallel group are consecutive ranks of the gradient group dp x cp,
 * each holding experts / ep whole experts; the ranks holding the same experts form the
 * expert-data-parallel group of dp x cp / ep ranks, over which the experts' gradients are
 * reduced (the dense weights' group is dp x cp). So ep must divide dp x cp and the experts.
 *
 * Routing: capacity_factor C drops and pads (Megatron's --moe-expert-capacity-factor with
 * --moe-pad-expert-input-to-capacity): every expert receives ceil(C x tokens x top_k / experts)
 * rows from each rank, the all-to-all's blocks are equal. Dropless (no capacity), each rank sends
 * tokens x top_k rows; the all-to-all is modelled with equal blocks (its mean), while the experts'
 * GEMMs follow the routing: uniform, or routing_skew S, expert 0 taking S of the routed rows and
 * the other experts sharing the rest, so the rank holding expert 0 computes more and the others
 * wait for it at the combine.
 */
#include "workload_impl.h"

#define FAIL(...)                                          \
  do {                                                     \
    if (err && errlen) snprintf(err, errlen, __VA_ARGS__); \
    return -1;                                             \
  } while (0)

int bs_moe_check(const bs_config *c, const bs_mesh *m, char *err, size_t errlen) {
  const bs_model *md = &c->model;
  int ep = c->par.ep > 0 ? c->par.ep : 1, cpdp = m->size[BS_DIM_CP] * m->size[BS_DIM_DP];
  if (c->par.ep < 0) FAIL("parallel.ep: %d must be at least 1", c->par.ep);
  if (md->experts < 0) FAIL("model.experts: %lld must be 0 (dense) or more", (long long)md->experts);
  if (md->experts == 0) {
    if (ep > 1) FAIL("parallel.ep: %d needs model.experts (expert parallelism splits the experts of a MoE model)", ep);
    return 0;
  }
  if (md->top_k < 1 || md->top_k > md->experts)
    FAIL("model.top_k: %lld must be between 1 and model.experts (%lld)", (long long)md->top_k, (long long)md->experts);
  if (md->moe_ffn < 1)
    FAIL("model.moe_ffn: an expert's FFN width must be at least 1 (model.experts = %lld)", (long long)md->experts);
  if (md->shared_experts < 0) FAIL("model.shared_experts: %lld must be 0 or more", (long long)md->shared_experts);
  if (md->capacity_factor < 0) FAIL("model.capacity_factor: %g must be positive (or none)", md->capacity_factor);
  double lo = 1.0 / (double)md->experts, hi = 1.0 / (double)md->top_k;
  if (md->routing_skew != 0 && (md->routing_skew < lo - 1e-12 || md->routing_skew > hi + 1e-12))
    FAIL(
      "model.routing_skew: %g is outside [1/experts, 1/top_k] = [%g, %g] (the most loaded expert's share of the "
      "routed tokens: at least the uniform share, at most every token once)",
      md->routing_skew, lo, hi);
  if (md->experts % ep != 0)
    FAIL(
      "parallel.ep: %d does not divide model.experts (%lld): each expert-parallel rank holds experts / ep whole "
      "experts",
      ep, (long long)md->experts);
  if (cpdp % ep != 0)
    FAIL(
      "parallel.ep: %d does not divide the dp x cp = %d ranks (Megatron lays the expert-parallel group over the "
      "data- and context-parallel ranks, which hold the same dense weights)",
      ep, cpdp);
  int tp = m->size[BS_DIM_TP], cp = m->size[BS_DIM_CP], dp = m->size[BS_DIM_DP];
  if (ep > 1 && cp > 1 && dp > 1) { /* the expert-parallel group is carved from the strided group dp x cp */
    int in = m->stride[BS_DIM_CP] < m->stride[BS_DIM_DP] ? BS_DIM_CP : BS_DIM_DP;
    int out = in == BS_DIM_CP ? BS_DIM_DP : BS_DIM_CP;
    if (m->stride[in] * m->size[in] != m->stride[out])
      FAIL(
        "parallel.order: cp and dp must be neighbours in the order for parallel.ep (its group is carved from the "
        "dp x cp ranks)");
  }
  if (c->work.scope != BS_SCOPE_ATTENTION) {
    if (ep > 1 && c->work.phase == BS_DECODE)
      FAIL(
        "parallel.ep: decode holds the new tokens on every rank of the attention group; expert parallelism over "
        "them is not modelled (use parallel.ep = 1)");
    if (tp > 1 && m->att_dim == BS_DIM_TP)
      FAIL("parallel.method: tp with model.experts is not modelled (set parallel.tp with a context-parallel method)");
    if (tp > 1 && c->par.tp_variant != 3)
      FAIL("parallel.tp_variant: MoE with tensor parallelism needs sequence parallelism (v3), as Megatron requires");
    if (md->moe_ffn % tp != 0 || (md->shared_experts * md->moe_ffn) % tp != 0)
      FAIL("parallel.tp: %d must divide model.moe_ffn (%lld): the experts are tensor-parallel over tp", tp,
           (long long)md->moe_ffn);
    /* a layer step's ops go through the iterator's queue at once: about 7 per local expert (fp8) */
    if (md->experts / ep > BS_MOE_MAX_LOCAL_EXPERTS)
      FAIL(
        "parallel.ep: %d leaves %lld experts on a rank; at most %d a rank are modelled (one layer step emits every "
        "local expert's GEMMs at once): use parallel.ep of at least %lld",
        ep, (long long)(md->experts / ep), BS_MOE_MAX_LOCAL_EXPERTS,
        (long long)((md->experts + BS_MOE_MAX_LOCAL_EXPERTS - 1) / BS_MOE_MAX_LOCAL_EXPERTS));
    if (c->par.zero >= 2)
      FAIL(
        "parallel.zero: stage %d with model.experts is not modelled (Megatron's distributed optimizer, stage 1, "
        "is)",
        c->par.zero);
  }
  return 0;
}

/* Rows each rank sends to one expert with a capacity: ceil(C x tokens x top_k / experts). */
static int64_t capacity_rows(const bs_model *m, int64_t tokens) {
  double x = m->capacity_factor * (double)tokens * (double)m->top_k / (double)m->experts;
  int64_t r = (int64_t)x;
  return (double)r < x ? r + 1 : r;
}

int64_t bs_moe_dispatch_rows(const bs_config *c, int64_t tokens) {
  const bs_model *m = &c->model;
  if (m->capacity_factor > 0) return m->experts * capacity_rows(m, tokens);
  return tokens * m->top_k;
}

int64_t bs_moe_expert_rows(const bs_config *c, int64_t tokens, int64_t e) {
  const bs_model *m = &c->model;
  int64_t ep = c->par.ep > 0 ? c->par.ep : 1, E = m->experts;
  if (m->capacity_factor > 0) return ep * capacity_rows(m, tokens);
  int64_t A = ep * tokens * m->top_k;                             /* the group's routed rows */
  if (m->routing_skew <= 0 || E == 1) return A / E + (e < A % E); /* uniform, the remainder to the first */
  int64_t hot = (int64_t)(m->routing_skew * (double)A + 0.5), rest = A - hot;
  if (e == 0) return hot;
  return rest / (E - 1) + (e - 1 < rest % (E - 1));
}

/* The expert-parallel group of w's rank (consecutive members of its gradient group) and its
 * expert-data-parallel group (the members ep apart). */
void wl_moe_groups(bs_wl *w, int rank) {
  int ep = w->p->cfg.par.ep > 0 ? w->p->cfg.par.ep : 1;
  bs_group g = w->dpg;
  int idx = (rank - g.first) / g.stride;
  w->epg = (bs_group){g.first + (idx / ep) * ep * g.stride, g.stride, ep};
  w->edpg = (bs_group){g.first + (idx % ep) * g.stride, g.stride * ep, g.size / ep};
  w->ep_index = idx % ep;
}

/* Token rows this rank's experts process (gathered over tp): the sum over its local experts. */
static int64_t local_rows(const bs_wl *w, int64_t j) {
  const bs_config *c = &w->p->cfg;
  int64_t le = c->model.experts / w->epg.size;
  return (int64_t)w->g * bs_moe_expert_rows(c, w->Tn, w->ep_index * le + j);
}
static int64_t all_local_rows(const bs_wl *w) {
  int64_t n = 0, le = w->p->cfg.model.experts / w->epg.size;
  for (int64_t j = 0; j < le; j++) n += local_rows(w, j);
  return n;
}

/* Bytes of the MoE block's activations kept for the backward: the router's probabilities, the
 * experts' inputs, gate and up and SwiGLU outputs, and the shared experts' as a dense MLP's (model.fp8:
 * the GEMM inputs as their FP8 casts, wl_gemm_in_bytes). */
int64_t wl_moe_saved_bytes(const bs_wl *w) {
  const bs_model *m = &w->p->cfg.model;
  int64_t fe = m->moe_ffn / w->g, fs = m->shared_experts * m->moe_ffn / w->g, em = wl_gemm_in_bytes(w, wl_fp8_mlp(w));
  return w->Tn * m->experts * w->es + all_local_rows(w) * (w->H * em + fe * (2 * w->es + em)) +
         w->T * fs * (2 * w->es + em);
}

static int64_t dispatch_bytes(const bs_wl *w) { return bs_moe_dispatch_rows(&w->p->cfg, w->Tn) * w->H * w->es; }

/* The all-to-all over the expert-parallel group (dispatch or combine, or their gradients). */
static void moe_alltoall(bs_wl *w) { w_sync_coll(w, BS_COLL_ALLTOALL, w->epg, dispatch_bytes(w)); }

/* Under tp: the received rows gathered over the tp group, or the experts' outputs reduce-scattered. */
static void moe_tp(bs_wl *w, bs_coll_kind kind) {
  if (!w->tp) return;
  int64_t recv = dispatch_bytes(w);
  w_sync_coll(w, kind, w->tpg, kind == BS_COLL_ALLGATHER ? recv : recv * w->g);
}

/* The local experts' GEMMs (forward, or backward when bwd), one grouped GEMM's worth per expert. */
static void moe_experts(bs_wl *w, int bwd) {
  const bs_model *m = &w->p->cfg.model;
  int64_t fe = m->moe_ffn / w->g, le = m->experts / w->epg.size;
  int f8 = wl_fp8_mlp(w);
  for (int64_t j = 0; j < le; j++) {
    int64_t rows = local_rows(w, j);
    if (rows == 0) continue;
    if (!bwd) {
      w_linear8(w, rows, 2 * fe, w->H, 0, f8, "expert gate and up");
      w_ew(w, rows * fe, 5, "expert SwiGLU");
      w_linear8(w, rows, w->H, fe, 0, f8, "expert down");
    } else {
      w_linear8(w, rows, w->H, fe, 1, f8, "expert down backward");
      w_ew(w, rows * fe, 8, "expert SwiGLU backward");
      w_linear8(w, rows, 2 * fe, w->H, 1, f8, "expert gate and up backward");
    }
  }
}

/* Forward of the MoE block, from the second norm's output to the residual add (excluded). */
void wl_moe_fwd(bs_wl *w) {
  const bs_model *m = &w->p->cfg.model;
  int64_t rows = bs_moe_dispatch_rows(&w->p->cfg, w->Tn), M = all_local_rows(w), fe = m->moe_ffn / w->g;
  w_linear(w, w->Tn, m->experts, w->H, 0, "MoE router");
  w_ew(w, w->Tn * m->experts, 5, "router softmax and top-k");
  int32_t send = w_alloc(w, rows * w->H * w->es, BS_MEM_WORKSPACE);
  w_ew(w, rows * w->H, 1, "token permutation");
  int32_t in = w_alloc(w, M * w->H * w->es, BS_MEM_WORKSPACE);
  moe_alltoall(w); /* dispatch */
  moe_tp(w, BS_COLL_ALLGATHER);
  int32_t gu = w_alloc(w, M * 3 * fe * w->es, BS_MEM_WORKSPACE);
  moe_experts(w, 0);
  moe_tp(w, BS_COLL_REDUCE_SCATTER);
  w_free(w, &gu);
  w_free(w, &in);
  moe_alltoall(w); /* combine */
  w_ew(w, rows * w->H, 2, "token unpermutation and weighted sum");
  w_free(w, &send);
  if (m->shared_experts > 0) {
    int32_t ts = wl_mlp_fwd(w, m->shared_experts * m->moe_ffn);
    w_free(w, &ts);
  }
}

/* Backward of the MoE block (the mirror of wl_moe_fwd), down to the second norm's output gradient. */
void wl_moe_bwd(bs_wl *w) {
  const bs_model *m = &w->p->cfg.model;
  int64_t rows = bs_moe_dispatch_rows(&w->p->cfg, w->Tn), M = all_local_rows(w), fe = m->moe_ffn / w->g;
  if (m->shared_experts > 0) {
    int32_t ds = wl_mlp_bwd(w, m->shared_experts * m->moe_ffn);
    w_free(w, &ds);
  }
  int32_t dsend = w_alloc(w, rows * w->H * w->es, BS_MEM_WORKSPACE);
  w_ew(w, rows * w->H, 2, "token unpermutation backward");
  int32_t din = w_alloc(w, M * w->H * w->es, BS_MEM_WORKSPACE);
  moe_alltoall(w); /* the combine's gradient to the experts */
  moe_tp(w, BS_COLL_ALLGATHER);
  int32_t dgu = w_alloc(w, M * 3 * fe * w->es, BS_MEM_WORKSPACE);
  moe_experts(w, 1);
  moe_tp(w, BS_COLL_REDUCE_SCATTER);
  w_free(w, &dgu);
  w_free(w, &din);
  moe_alltoall(w); /* the dispatch's gradient back to the tokens */
  w_ew(w, rows * w->H, 1, "token permutation backward");
  w_free(w, &dsend);
  w_ew(w, w->Tn * m->experts, 5, "router backward");
  w_linear(w, w->Tn, m->experts, w->H, 1, "MoE router backward");
}

/* The experts' gradients of one layer over the expert-data-parallel group (ZeRO 0: all-reduce,
 * 1: reduce-scatter to the optimizer shard's owner), posted now, waited before the next. */
void wl_moe_grad_reduce(bs_wl *w) {
  w_wait(w, &w->geh);
  if (w->pc.experts == 0 || w->edpg.size <= 1 || w->mb + 1 < w->nmb) return;
  int64_t sh = bs_zero_shard(w->pc.experts, w->edpg.size);
  w->geh = w_coll(w, w->zero == 0 ? BS_COLL_ALLREDUCE : BS_COLL_REDUCE_SCATTER, w->edpg, sh * w->edpg.size * w->gb);
}

/* ZeRO-1 after the step: each layer's updated experts all-gathered over the expert-data-parallel group. */
void wl_moe_opt_gather(bs_wl *w, int64_t layers) {
  if (w->pc.experts == 0 || w->zero != 1 || w->edpg.size <= 1) return;
  for (int64_t l = 0; l < layers; l++)
    w_sync_coll(w, BS_COLL_ALLGATHER, w->edpg, bs_zero_shard(w->pc.experts, w->edpg.size) * w->es);
}
