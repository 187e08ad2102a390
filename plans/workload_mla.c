/*
 * workload_mla.c — multi-head latent attention's projections at layer and model scope, in place of
 * the one QKV projection of a multi-head layer (workload_layer.c calls these when model.attention
 * = mla). The training form of DeepSeek-V2 (arXiv 2405.04434 §2.1, eq. 9-19; DeepSeek-V3, arXiv
 * 2412.19437 §2.1.1): the query's down-projection hidden -> q_lora_rank, its RMSNorm and its
 * up-projection q_lora_rank -> heads x (qk_nope + qk_rope) (q_lora_rank 0, as DeepSeek-V2-Lite: one
 * projection hidden -> heads x (qk_nope + qk_rope)); the K,V down-projection hidden -> kv_lora_rank
 * + qk_rope (the latent and the RoPE key shared by the heads), the latent's RMSNorm and its
 * up-projection kv_lora_rank -> heads x (qk_nope + v_head_dim). The output projection, heads x
 * v_head_dim -> hidden, stays workload_layer.c's (over v's columns).
 *
 * Under tensor parallelism the up-projections split by heads and the down-projections are
 * replicated on every tp rank, as Megatron-LM's MLA lays them out (megatron/core/transformer/
 * multi_latent_attention.py: linear_q_down_proj and linear_kv_down_proj duplicated, linear_q_up_proj
 * and linear_kv_up_proj column-parallel). The tp collective after the backward is the one of the
 * multi-head layer (the input's gradient, T x hidden): an approximation, Megatron reduces the
 * latent's gradient where the down-projections are duplicated.
 */
#include "workload_impl.h"

/* The query's width per head (nope and rope parts) and the K,V up-projection's (k nope and v). */
static int64_t q_head(const bs_model *m) { return m->qk_nope_head_dim + m->qk_rope_head_dim; }
static int64_t kv_head(const bs_model *m) { return m->qk_nope_head_dim + m->v_head_dim; }

int64_t wl_mla_proj_params(const bs_model *m, int64_t g) {
  int64_t H = m->hidden, hq = m->heads / g, qr = m->q_lora_rank, kvr = m->kv_lora_rank;
  int64_t q = qr > 0 ? H * qr + qr * hq * q_head(m) : H * hq * q_head(m);
  return q + H * (kvr + m->qk_rope_head_dim) + kvr * hq * kv_head(m);
}

int64_t wl_mla_norm_params(const bs_model *m) { return m->q_lora_rank + m->kv_lora_rank; }

int64_t wl_mla_saved_bytes(const bs_wl *w) {
  const bs_model *m = &w->p->cfg.model;
  return 2 * w->T * (m->q_lora_rank + m->kv_lora_rank) * w->es; /* each latent before and after its norm */
}

/* The RMSNorm of a latent of `width` columns over the T tokens (TE's rmsnorm, as wk_rmsnorm). */
static void latent_norm(bs_wl *w, int64_t width, int bwd, const char *what) {
  int64_t n = w->T * width;
  if (!bwd) wk_pass(w, 2 * n * w->es + 4 * w->T, 4.0 * (double)n, what);
  else wk_pass(w, 3 * n * w->es + 4 * w->T, 6.0 * (double)n, what);
}

/* RoPE on the decoupled parts only: the rank's query heads' qk_rope columns and the one shared key. */
static void mla_rope(bs_wl *w, int bwd) {
  const bs_model *m = &w->p->cfg.model;
  int64_t dr = m->qk_rope_head_dim, hq = m->heads / w->g, tab = w->T * dr * 4;
  wk_pass(w, 2 * w->T * hq * dr * w->es + tab, 3.0 * (double)(w->T * hq * dr), bwd ? "RoPE q backward" : "RoPE q");
  wk_pass(w, 2 * w->T * dr * w->es + tab, 3.0 * (double)(w->T * dr), bwd ? "RoPE k backward" : "RoPE k");
}

void wl_mla_qkv(bs_wl *w) {
  const bs_model *m = &w->p->cfg.model;
  int64_t H = w->H, hq = m->heads / w->g, qr = m->q_lora_rank, kvr = m->kv_lora_rank;
  int f8 = wl_fp8_proj(w);
  int32_t gb = wl_tp_gather(w);
  if (qr > 0) {
    w_linear8(w, w->T, qr, H, 0, f8, "MLA query down-projection");
    latent_norm(w, qr, 0, "MLA query latent RMSNorm");
    w_linear8(w, w->T, hq * q_head(m), qr, 0, f8, "MLA query up-projection");
  } else {
    w_linear8(w, w->T, hq * q_head(m), H, 0, f8, "MLA query projection");
  }
  w_linear8(w, w->T, kvr + m->qk_rope_head_dim, H, 0, f8, "MLA KV down-projection");
  w_free(w, &gb);
  latent_norm(w, kvr, 0, "MLA KV latent RMSNorm");
  w_linear8(w, w->T, hq * kv_head(m), kvr, 0, f8, "MLA KV up-projection");
  mla_rope(w, 0);
}

void wl_mla_qkv_bwd(bs_wl *w) {
  const bs_model *m = &w->p->cfg.model;
  int64_t H = w->H, hq = m->heads / w->g, qr = m->q_lora_rank, kvr = m->kv_lora_rank;
  int f8 = wl_fp8_proj(w);
  mla_rope(w, 1);
  w_linear8(w, w->T, hq * kv_head(m), kvr, 1, f8, "MLA KV up-projection backward");
  latent_norm(w, kvr, 1, "MLA KV latent RMSNorm backward");
  int32_t gx = wl_tp_gather(w); /* v3: norm1 output gathered again for dW */
  int32_t dn = w_alloc(w, w->T * H * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, kvr + m->qk_rope_head_dim, H, 1, f8, "MLA KV down-projection backward");
  if (qr > 0) {
    w_linear8(w, w->T, hq * q_head(m), qr, 1, f8, "MLA query up-projection backward");
    latent_norm(w, qr, 1, "MLA query latent RMSNorm backward");
    w_linear8(w, w->T, qr, H, 1, f8, "MLA query down-projection backward");
  } else {
    w_linear8(w, w->T, hq * q_head(m), H, 1, f8, "MLA query projection backward");
  }
  w_free(w, &gx);
  wl_tp_reduce(w);
  wk_rmsnorm_bwd(w, "RMSNorm backward");
  wk_residual(w, "residual gradient add");
  w_free(w, &dn);
}
