/*
 * config.c — names, defaults and model presets for bs_config: the one table
 * of method names and the one of presets (scenario keys and messages read
 * them from here). Pure data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "result.h"

const char *bs_method_name(bs_method m) {
  static const char *n[] = {"burst", "ring", "ring-li2021", "ulysses", "usp", "tp", "tree", "allgather"};
  return (m >= 0 && m < BS_METHOD_COUNT) ? n[m] : "?";
}
const char *bs_layout_name(bs_layout l) {
  static const char *n[] = {"contiguous", "zigzag", "striped", "doc-zigzag", "greedy"};
  return (l >= 0 && l <= BS_GREEDY) ? n[l] : "?";
}
const char *bs_phase_name(bs_phase p) {
  static const char *n[] = {"train", "prefill", "decode"};
  return (p >= 0 && p <= BS_DECODE) ? n[p] : "?";
}
const char *bs_dtype_name(bs_dtype t) {
  static const char *n[] = {"bf16", "fp16", "fp32"};
  return (t >= 0 && t <= BS_FP32) ? n[t] : "?";
}
const char *bs_scope_name(bs_scope s) {
  static const char *n[] = {"attention", "layer", "model"};
  return (s >= 0 && s <= BS_SCOPE_MODEL) ? n[s] : "?";
}
const char *bs_coll_algo_name(bs_coll_algo a) {
  static const char *n[] = {"ring", "tree", "auto"};
  return (a >= 0 && a <= BS_COLL_ALGO_AUTO) ? n[a] : "?";
}
const char *bs_placement_name(bs_placement p) {
  static const char *n[] = {"head-first", "ring-first"};
  return (p >= 0 && p <= BS_RING_FIRST) ? n[p] : "?";
}
const char *bs_kv_cache_name(bs_kv_cache k) {
  static const char *n[] = {"keep", "drop"};
  return (k >= 0 && k <= BS_KV_DROP) ? n[k] : "?";
}
const char *bs_cross_entropy_name(bs_cross_entropy c) {
  static const char *n[] = {"unfused", "fused"};
  return (c >= 0 && c <= BS_CE_FUSED) ? n[c] : "?";
}
const char *bs_cp_pass_name(bs_cp_pass c) {
  static const char *n[] = {"kv", "q"};
  return (c >= 0 && c <= BS_PASS_Q) ? n[c] : "?";
}
const char *bs_recompute_name(int r) {
  static const char *n[] = {"off", "full", "selective"};
  return (r >= 0 && r <= BS_RECOMPUTE_SELECTIVE) ? n[r] : "?";
}
const char *bs_pp_schedule_name(bs_pp_schedule s) {
  static const char *n[] = {"1f1b", "interleaved"};
  return (s >= 0 && s <= BS_PP_INTERLEAVED) ? n[s] : "?";
}
const char *bs_fp8_name(bs_fp8 f) {
  static const char *n[] = {"off", "ffn", "all"};
  return (f >= 0 && f <= BS_FP8_ALL) ? n[f] : "?";
}
const char *bs_attn_kernel_name(bs_attn_kernel k) {
  static const char *n[] = {"default", "fa2", "fa3", "cudnn"};
  return (k >= 0 && k < BS_ATTN_KERNEL_COUNT) ? n[k] : "?";
}
const char *bs_main_grads_name(bs_main_grads g) {
  static const char *n[] = {"fp32", "bf16"};
  return (g >= 0 && g <= BS_GRADS_BF16) ? n[g] : "?";
}
const char *bs_master_weights_name(bs_master_weights m) {
  static const char *n[] = {"fp32", "none"};
  return (m >= 0 && m <= BS_MASTER_NONE) ? n[m] : "?";
}
int64_t bs_reserve_bytes(const bs_config *c, int64_t peak) {
  double f = c->work.fragmentation >= 0  ? c->work.fragmentation
             : c->work.phase == BS_TRAIN ? BS_FRAGMENTATION_DEFAULT
                                         : 0;
  if (c->work.scope == BS_SCOPE_ATTENTION || peak <= 0 || !(f > 0) || f >= 1) return 0;
  double x = (double)peak * f / (1 - f);
  if (x >= 0x1p62) return (int64_t)1 << 62; /* past any capacity; no overflow when added to a peak */
  int64_t r = (int64_t)x;
  return (double)r < x ? r + 1 : r;
}

int bs_mem_over(const bs_config *c, int64_t peak, int64_t capacity) {
  return peak > capacity - bs_reserve_bytes(c, peak);
}

const char *bs_mem_class_name(bs_mem_class c) {
  static const char *n[] = {"input", "output",    "comm",        "scores", "workspace", "weights",
                            "grads", "optimizer", "activations", "logits", "kv_cache"};
  return (c >= 0 && c < BS_MEM_CLASS_COUNT) ? n[c] : "?";
}

typedef struct {
  const char *name;
  int64_t hidden, heads, kv_heads, head_dim, layers, ffn, vocab;
} preset;

/* The presets with multi-head latent attention: q_lora_rank, kv_lora_rank, qk_nope_head_dim,
 * qk_rope_head_dim, v_head_dim (sources at their rows of presets[]). */
typedef struct {
  const char *name;
  int64_t q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
} mla_preset;

/* Shapes from the models' published configs (Llama 2 paper Table 1 and the
 * released config.json files; Llama 3.1 model card). Each row: hidden, heads,
 * kv_heads, head_dim, layers, ffn, vocab. */
static const preset presets[] = {
  {"llama2-7b", 4096, 32, 32, 128, 32, 11008, 32000},
  {"llama2-13b", 5120, 40, 40, 128, 40, 13824, 32000},
  {"llama2-70b", 8192, 64, 8, 128, 80, 28672, 32000},
  {"llama3.1-8b", 4096, 32, 8, 128, 32, 14336, 128256},
  /* meta-llama/Meta-Llama-3-8B config.json (Llama 3 model card). */
  {"llama3-8b", 4096, 32, 8, 128, 32, 14336, 128256},
  /* meta-llama/Llama-3.1-70B config.json (Llama 3.1 model card). */
  {"llama3.1-70b", 8192, 64, 8, 128, 80, 28672, 128256},
  /* meta-llama/Llama-3.1-405B config.json; "The Llama 3 Herd of Models"
   * (arXiv:2407.21783) Table 3. */
  {"llama3.1-405b", 16384, 128, 8, 128, 126, 53248, 128256},
  /* mistralai/Mistral-7B-v0.1 config.json; "Mistral 7B" (arXiv:2310.06825)
   * Table 1. The sliding window (4096) is not part of the preset. */
  {"mistral-7b", 4096, 32, 8, 128, 32, 14336, 32000},
  /* Qwen/Qwen2.5-72B config.json (Qwen2.5 model card). */
  {"qwen2.5-72b", 8192, 64, 8, 128, 80, 29568, 152064},
  /* deepseek-ai/DeepSeek-V3 config.json; DeepSeek-V3 Technical Report (arXiv 2412.19437) §4.2: MLA
   * with 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, qk_rope 64, v 128 (head_dim is
   * qk_nope + qk_rope = 192). ffn is the dense layers' intermediate_size (the first 3 of 61); the MoE
   * shapes are in moe_presets[], and every layer is modelled as MoE. */
  {"deepseek-v3", 7168, 128, 128, 192, 61, 18432, 129280},
  /* deepseek-ai/DeepSeek-V2-Lite config.json; DeepSeek-V2 (arXiv 2405.04434) Appendix B: 16 heads,
   * no query compression (q_lora_rank null), kv_lora_rank 512, qk_nope 128, qk_rope 64, v 128. */
  {"deepseek-v2-lite", 2048, 16, 16, 192, 27, 10944, 102400},
  /* mistralai/Mixtral-8x7B-v0.1 config.json (hidden_size 4096, num_attention_heads 32,
   * num_key_value_heads 8, num_hidden_layers 32, intermediate_size 14336, vocab_size 32000,
   * num_local_experts 8, num_experts_per_tok 2); "Mixtral of Experts" (arXiv:2401.04088) Table 1.
   * Every layer's MLP is the MoE block; ffn is kept at the expert's width. */
  {"mixtral-8x7b", 4096, 32, 8, 128, 32, 14336, 32000},
};

/* The mixture-of-experts shapes of the presets that have one (the rest are dense): experts,
 * top_k, moe_ffn, shared_experts, from the same configs. */
typedef struct {
  const char *name;
  int64_t experts, top_k, moe_ffn, shared_experts;
} moe_preset;
static const moe_preset moe_presets[] = {
  /* Mixtral-8x7B config.json: num_local_experts 8, num_experts_per_tok 2, intermediate_size 14336. */
  {"mixtral-8x7b", 8, 2, 14336, 0},
  /* deepseek-ai/DeepSeek-V3 config.json: n_routed_experts 256, num_experts_per_tok 8,
   * moe_intermediate_size 2048, n_shared_experts 1. Its first 3 layers (first_k_dense_replace) are
   * dense MLPs of 18432; here every layer is MoE (a stated approximation, docs/models.md). */
  {"deepseek-v3", 256, 8, 2048, 1},
  /* deepseek-ai/DeepSeek-V2-Lite config.json: n_routed_experts 64, num_experts_per_tok 6,
   * moe_intermediate_size 1408, n_shared_experts 2 (first_k_dense_replace 1, modelled as MoE too). */
  {"deepseek-v2-lite", 64, 6, 1408, 2},
};

static void moe_preset_of(const char *name, bs_model *m) {
  for (size_t i = 0; i < sizeof moe_presets / sizeof moe_presets[0]; i++)
    if (!strcmp(moe_presets[i].name, name)) {
      m->experts = moe_presets[i].experts;
      m->top_k = moe_presets[i].top_k;
      m->moe_ffn = moe_presets[i].moe_ffn;
      m->shared_experts = moe_presets[i].shared_experts;
    }
}

static const mla_preset mla_presets[] = {
  {"deepseek-v3", 1536, 512, 128, 64, 128},
  {"deepseek-v2-lite", 0, 512, 128, 64, 128},
};

const char *bs_attention_name(bs_attention a) {
  static const char *n[] = {"mha", "mla", "mla-latent"};
  return (a >= BS_ATTENTION_MHA && a <= BS_ATTENTION_MLA_LATENT) ? n[a] : "?";
}

int bs_model_resolve_attention(bs_model *m, char *err, size_t errlen) {
  if (m->attention == BS_ATTENTION_MHA) return 0;
  if (m->kv_lora_rank < 1 || m->qk_nope_head_dim < 0 || m->qk_rope_head_dim < 0 || m->v_head_dim < 1 ||
      m->qk_nope_head_dim + m->qk_rope_head_dim < 1) {
    snprintf(err, errlen,
             "model.attention: %s needs model.kv_lora_rank, model.v_head_dim and model.qk_nope_head_dim + "
             "qk_rope_head_dim of at least 1 (set them, or model.preset = deepseek-v3)",
             bs_attention_name(m->attention));
    return -1;
  }
  if (m->attention == BS_ATTENTION_MLA) {
    m->kv_heads = m->heads;
    m->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
  } else {
    m->kv_heads = 1;
    m->head_dim = m->kv_lora_rank + m->qk_rope_head_dim;
    m->v_head_dim = m->kv_lora_rank;
  }
  return 0;
}

int bs_model_preset(const char *name, bs_model *m) {
  for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
    const preset *p = &presets[i];
    if (strcmp(p->name, name) != 0) continue;
    bs_dtype dt = m->dtype;
    bs_fp8 f8 = m->fp8;
    bs_attn_kernel ak = m->attention_kernel;
    bs_main_grads mg = m->main_grads;
    bs_master_weights mw = m->master_weights;
    memset(m, 0, sizeof *m);
    strncpy(m->preset, p->name, sizeof m->preset - 1);
    m->hidden = p->hidden;
    m->heads = p->heads;
    m->kv_heads = p->kv_heads;
    m->head_dim = p->head_dim;
    m->layers = p->layers;
    m->ffn = p->ffn;
    m->vocab = p->vocab;
    for (size_t j = 0; j < sizeof mla_presets / sizeof mla_presets[0]; j++) {
      const mla_preset *q = &mla_presets[j];
      if (strcmp(q->name, p->name) != 0) continue;
      m->attention = BS_ATTENTION_MLA;
      m->q_lora_rank = q->q_lora_rank;
      m->kv_lora_rank = q->kv_lora_rank;
      m->qk_nope_head_dim = q->qk_nope_head_dim;
      m->qk_rope_head_dim = q->qk_rope_head_dim;
      m->v_head_dim = q->v_head_dim;
    }
    moe_preset_of(p->name, m);
    m->dtype = dt;
    m->fp8 = f8;
    m->attention_kernel = ak;
    m->main_grads = mg;
    m->master_weights = mw;
    return 0;
  }
  return -1;
}

const char *bs_model_preset_name(int i) {
  return i >= 0 && (size_t)i < sizeof presets / sizeof presets[0] ? presets[i].name : NULL;
}

void bs_config_default(bs_config *c) {
  memset(c, 0, sizeof *c);
  c->model.dtype = BS_BF16;
  bs_model_preset("llama2-7b", &c->model);
  c->work.phase = BS_TRAIN;
  c->work.seq_len = 32768;
  c->work.batch = 1;
  c->work.causal = 0;
  c->work.window = 0;
  c->work.scope = BS_SCOPE_ATTENTION;
  c->work.decode_tokens = 1;
  c->work.fragmentation = BS_FRAGMENTATION_AUTO;
  c->work.kv_cache = BS_KV_KEEP;
  c->work.cross_entropy = BS_CE_UNFUSED;
  c->par.method = BS_BURST;
  c->par.gpus = 8;
  c->par.layout = BS_CONTIGUOUS;
  c->par.double_ring = BS_AUTO;
  c->par.lao = 1;
  c->par.bwd_opt = 1;
  c->par.ulysses_degree = 8;
  c->par.tp_variant = 1;
  c->par.zero = 0;
  c->par.tp = c->par.dp = c->par.pp = 1;
  c->par.ep = 1;
  c->par.pp_schedule = BS_PP_1F1B;
  c->par.pp_chunks = 2;
  c->par.micro_batch = 0;
  for (int d = 0; d < BS_DIM_COUNT; d++) c->par.order[d] = (int8_t)d;
  c->par.ranks_per_node = 8;
  strcpy(c->cluster.topology, "dgx-a100");
  strcpy(c->cluster.profile, "a100-sxm4-80gb");
  c->cluster.coll_algo = BS_COLL_ALGO_AUTO; /* NCCL's behaviour: the faster shape per call */
  c->seed = 1234;
}

void bs_result_free(bs_result *r) {
  free(r->ranks);
  r->ranks = NULL;
  r->nranks = 0;
}
