/*
 * flops.c — model FLOPs per step, Megatron-LM's convention (Narayanan et al. 2021,
 * "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
 * appendix: 72 B s l h^2 (1 + s/6h + V/12lh) without recomputation), written for the
 * shapes burstsim simulates (grouped-query attention, SwiGLU MLP, causal masks):
 *
 *   forward FLOPs of one token in one layer
 *     = 2 h (Zq + 2 Zkv) d        QKV projection (GQA: Zkv key and value heads)
 *     + 4 Zq d P / T              scores Q K^T and the weighted sum with V, over the
 *                                 visible query-key pairs P of the T tokens
 *     + 2 Zq d h                  output projection
 *     + 6 h F                     SwiGLU MLP: gate, up and down (3 matrices of h x F);
 *                                 MoE: 6 h (top_k + shared_experts) moe_ffn + 2 h experts,
 *                                 the active experts and the router (capacity padding and
 *                                 dropped tokens are not model FLOPs)
 *   forward FLOPs of the model = T (L x layer + 2 h V)   (+ the LM head; the embedding
 *                                                          is a lookup)
 *   a step = forward (prefill, decode) or 3 x forward (train: the backward is twice the
 *   forward); recomputation is not counted (model FLOPs, not hardware FLOPs).
 *
 * P counts the pairs the mask leaves visible: N^2 without a mask, N (N + 1) / 2 causal
 * (about half: causal attention counted as the model sees it), fewer with a window;
 * decode: decode_tokens queries after seq_len cached keys; prefill with cached_tokens: the
 * seq_len - cached_tokens new tokens (T above) after the cache. With Zkv = Zq, F = 4h (two
 * matrices, 16 h^2 instead of 24 h^2 for SwiGLU's three of 8h/3) and no mask this is
 * Megatron's 24 h^2 + 4 s h per token and layer.
 *
 * Scopes: attention counts the attention core alone (the 4 Zq d P term of one layer: what
 * the kernels compute), layer one layer (no LM head), model all L layers and the LM head.
 * Everything is over all GPUs and the whole batch.
 */
#include "flops.h"

#include <math.h>
#include "plans/plan.h"

double bs_step_tokens(const bs_config *c) {
  double per_seq = c->work.phase == BS_DECODE ? (double)c->work.decode_tokens : (double)c->work.seq_len;
  if (c->work.phase == BS_PREFILL) per_seq -= (double)c->work.cached_tokens; /* the cached ones are not processed */
  return (double)c->work.batch * per_seq;
}

/* Visible query-key pairs of one sequence and one head. */
static double visible_pairs(const bs_config *c) {
  int64_t N = c->work.seq_len, p;
  if (c->work.phase == BS_DECODE)
    p = bs_visible_pairs(N, c->work.decode_tokens, 0, N, 1, c->work.causal, c->work.window);
  else if (c->work.phase == BS_PREFILL && c->work.cached_tokens > 0) /* new tokens after the cache */
    p = bs_visible_pairs(c->work.cached_tokens, N - c->work.cached_tokens, 0, N, 1, c->work.causal, c->work.window);
  else p = bs_workload_pairs(&c->work, 0, N, 0, N, 1); /* packed documents: pairs inside one */
  return p < 0 ? NAN : (double)p;
}

double bs_step_model_flops(const bs_config *c) {
  const bs_model *m = &c->model;
  double B = (double)c->work.batch, T = bs_step_tokens(c);
  double h = (double)m->hidden, zq = (double)m->heads, zkv = (double)m->kv_heads, d = (double)m->head_dim;
  double dv = m->v_head_dim > 0 ? (double)m->v_head_dim : d; /* MLA: PV over v_head_dim */
  double attn = 2.0 * zq * (d + dv) * visible_pairs(c) * B;  /* QK^T and PV, the whole batch */
  double fwd;
  if (c->work.scope == BS_SCOPE_ATTENTION) fwd = attn;
  else {
    if (m->hidden < 1 || m->ffn < 1) return NAN;
    /* MoE: the active experts' MLPs (top_k routed and the shared ones, of moe_ffn) and the router */
    double mlp = m->experts > 0 ? 6.0 * h * (double)(m->top_k + m->shared_experts) * (double)m->moe_ffn +
                                    2.0 * h * (double)m->experts
                                : 6.0 * h * (double)m->ffn;
    /* MLA (DeepSeek-V2 §2.1): the query's and the K,V latent's down- and up-projections */
    double qkv = 2.0 * h * (zq + 2.0 * zkv) * d;
    if (m->attention == BS_ATTENTION_MLA) {
      double qr = (double)m->q_lora_rank, kvr = (double)m->kv_lora_rank, dn = (double)m->qk_nope_head_dim,
             dr = (double)m->qk_rope_head_dim;
      qkv = 2.0 * (m->q_lora_rank > 0 ? h * qr + qr * zq * (dn + dr) : h * zq * (dn + dr)) + 2.0 * h * (kvr + dr) +
            2.0 * kvr * zq * (dn + dv);
    }
    double dense = qkv + 2.0 * zq * dv * h + mlp;
    double layer = T * dense + attn;
    if (c->work.scope == BS_SCOPE_LAYER) fwd = layer;
    else {
      if (m->vocab < 1 || m->layers < 1) return NAN;
      fwd = (double)m->layers * layer + T * 2.0 * h * (double)m->vocab;
    }
  }
  return c->work.phase == BS_TRAIN ? 3.0 * fwd : fwd;
}
