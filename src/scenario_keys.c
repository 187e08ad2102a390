/*
 * scenario_keys.c — the keys of a scenario file: one setter per key, which
 * parses a value into a bs_config or says why it cannot, and the table of
 * (section, key, setter, help) in application order, with the lookups and
 * the "did you mean" suggestions for a section or key the table lacks.
 */
#include "scenario_impl.h"
#include "topologies/topo.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- setters, one per key ------------------------------------------- */

#define INT_SETTER(fn, field, lo, hi, suffix)                       \
  static int fn(bs_config *c, const char *v, char *why, size_t n) { \
    int64_t x;                                                      \
    if (scn_parse_int64(v, lo, hi, suffix, &x, why, n)) return -1;  \
    c->field = x;                                                   \
    return 0;                                                       \
  }
#define ENUM_SETTER(fn, field, type, ...)                           \
  static int fn(bs_config *c, const char *v, char *why, size_t n) { \
    static const char *const names[] = {__VA_ARGS__, NULL};         \
    int i = scn_parse_enum(v, names, why, n);                       \
    if (i < 0) return -1;                                           \
    c->field = (type)i;                                             \
    return 0;                                                       \
  }
#define BOOL_SETTER(fn, field)                                      \
  static int fn(bs_config *c, const char *v, char *why, size_t n) { \
    int b;                                                          \
    if (scn_parse_bool(v, &b, why, n)) return -1;                   \
    c->field = b;                                                   \
    return 0;                                                       \
  }

static const int64_t BIG = (int64_t)1 << 40; /* 1 Ti tokens: beyond any plan */

static int set_preset(bs_config *c, const char *v, char *why, size_t n) {
  if (bs_model_preset(v, &c->model) == 0) return 0;
  char cb[SHOWN + 4];
  size_t off = (size_t)snprintf(why, n, "unknown preset '%s' (", scn_clip(v, cb));
  nearest nr;
  scn_near_init(&nr, v);
  for (int i = 0; bs_model_preset_name(i); i++) {
    scn_near_offer(&nr, bs_model_preset_name(i));
    if (off < n) off += (size_t)snprintf(why + off, n - off, "%s%s", i ? ", " : "", bs_model_preset_name(i));
  }
  if (off < n) snprintf(why + off, n - off, ")");
  scn_near_append(&nr, why, n);
  return -1;
}
INT_SETTER(set_hidden, model.hidden, 1, 1 << 20, 0)
INT_SETTER(set_heads, model.heads, 1, 1 << 14, 0)
INT_SETTER(set_kv_heads, model.kv_heads, 1, 1 << 14, 0)
INT_SETTER(set_head_dim, model.head_dim, 1, 1024, 0)
INT_SETTER(set_layers, model.layers, 1, 1 << 12, 0)
INT_SETTER(set_ffn, model.ffn, 1, 1 << 22, 0)
INT_SETTER(set_vocab, model.vocab, 1, 1 << 24, 0)
ENUM_SETTER(set_dtype, model.dtype, bs_dtype, "bf16", "fp16", "fp32")
ENUM_SETTER(set_fp8, model.fp8, bs_fp8, "off", "ffn", "all")
ENUM_SETTER(set_attention_kernel, model.attention_kernel, bs_attn_kernel, "default", "fa2", "fa3", "cudnn")
ENUM_SETTER(set_main_grads, model.main_grads, bs_main_grads, "fp32", "bf16")
ENUM_SETTER(set_master_weights, model.master_weights, bs_master_weights, "fp32", "none")
ENUM_SETTER(set_attention, model.attention, bs_attention, "mha", "mla", "mla-latent")
INT_SETTER(set_v_head_dim, model.v_head_dim, 0, 1024, 0)
INT_SETTER(set_kv_lora_rank, model.kv_lora_rank, 1, 1 << 14, 0)
INT_SETTER(set_qk_nope_head_dim, model.qk_nope_head_dim, 0, 1024, 0)
INT_SETTER(set_qk_rope_head_dim, model.qk_rope_head_dim, 0, 1024, 0)
INT_SETTER(set_experts, model.experts, 0, 1 << 16, 0)
INT_SETTER(set_top_k, model.top_k, 1, 1 << 16, 0)
INT_SETTER(set_moe_ffn, model.moe_ffn, 1, 1 << 22, 0)
INT_SETTER(set_shared_experts, model.shared_experts, 0, 1 << 10, 0)
/* A finite real of v in [lo, hi] (the whole text a number): 0 with *out set, or -1 (the caller says why,
 * in the words of its key). */
static int real_in(const char *v, double lo, double hi, double *out) {
  char *end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || *end || errno == ERANGE || !isfinite(x) || x < lo || x > hi) return -1;
  *out = x;
  return 0;
}
/* A real in [lo, hi], or `none_word` for 0. */
static int parse_real(const char *v, const char *none_word, double lo, double hi, double *out, char *why, size_t n) {
  char cb[SHOWN + 4];
  if (!strcmp(v, none_word)) return *out = 0, 0;
  if (real_in(v, lo, hi, out)) {
    snprintf(why, n, "'%s' is not %s or a number in [%g, %g]", scn_clip(v, cb), none_word, lo, hi);
    return -1;
  }
  return 0;
}
static int set_capacity_factor(bs_config *c, const char *v, char *why, size_t n) {
  return parse_real(v, "none", 0.01, 1024, &c->model.capacity_factor, why, n);
}
static int set_routing_skew(bs_config *c, const char *v, char *why, size_t n) {
  return parse_real(v, "uniform", 1e-6, 1, &c->model.routing_skew, why, n);
}

ENUM_SETTER(set_phase, work.phase, bs_phase, "train", "prefill", "decode")
INT_SETTER(set_seq_len, work.seq_len, 1, BIG, 1)
INT_SETTER(set_batch, work.batch, 1, 1 << 20, 0)
BOOL_SETTER(set_causal, work.causal)
INT_SETTER(set_window, work.window, 0, BIG, 1)
ENUM_SETTER(set_scope, work.scope, bs_scope, "attention", "layer", "model")
INT_SETTER(set_decode_tokens, work.decode_tokens, 1, 1 << 20, 1)
/* off | selective | full; a boolean keeps its old meaning (true = full). */
static int set_recompute(bs_config *c, const char *v, char *why, size_t n) {
  int b;
  if (!strcmp(v, "selective")) return c->work.recompute = BS_RECOMPUTE_SELECTIVE, 0;
  if (!strcmp(v, "full")) return c->work.recompute = BS_RECOMPUTE_FULL, 0;
  if (!scn_parse_bool(v, &b, why, n)) return c->work.recompute = b ? BS_RECOMPUTE_FULL : BS_RECOMPUTE_OFF, 0;
  char cb[SHOWN + 4];
  snprintf(why, n, "'%s' is not off, selective or full (true/on = full, false = off)", scn_clip(v, cb));
  return -1;
}
ENUM_SETTER(set_kv_cache, work.kv_cache, bs_kv_cache, "keep", "drop")
ENUM_SETTER(set_cross_entropy, work.cross_entropy, bs_cross_entropy, "unfused", "fused")
INT_SETTER(set_cached_tokens, work.cached_tokens, 0, BIG, 1)
INT_SETTER(set_kv_block, work.kv_block, 0, 1 << 20, 0)
INT_SETTER(set_max_seq_len, work.max_seq_len, 0, BIG, 1)
static int set_fragmentation(bs_config *c, const char *v, char *why, size_t n) {
  if (!strcmp(v, "auto")) {
    c->work.fragmentation = BS_FRAGMENTATION_AUTO;
    return 0;
  }
  char cb[SHOWN + 4];
  if (real_in(v, 0, 0.9, &c->work.fragmentation)) {
    snprintf(why, n, "'%s' is not auto or a share of reserved memory in [0, 0.9]", scn_clip(v, cb));
    return -1;
  }
  return 0;
}
ENUM_SETTER(set_cp_pass, par.cp_pass, bs_cp_pass, "kv", "q")
ENUM_SETTER(set_framework, work.framework, bs_framework, "megatron", "torchtitan", "deepspeed")
static int set_documents(bs_config *c, const char *v, char *why, size_t n) {
  if (scn_docs_check(v, why, n)) return -1;
  if (strlen(v) >= sizeof c->work.documents) {
    snprintf(why, n, "longer than %zu characters (a histogram file holds a long mix)", sizeof c->work.documents - 1);
    return -1;
  }
  snprintf(c->work.documents, sizeof c->work.documents, "%s", strcmp(v, "none") ? v : "");
  return 0;
}
static int set_seed(bs_config *c, const char *v, char *why, size_t n) {
  int64_t x;
  if (scn_parse_int64(v, 0, INT64_MAX, 0, &x, why, n)) return -1;
  c->seed = (uint64_t)x;
  return 0;
}

static int set_method(bs_config *c, const char *v, char *why, size_t n) {
  const char *names[BS_METHOD_COUNT + 1];
  for (int m = 0; m < BS_METHOD_COUNT; m++) names[m] = bs_method_name((bs_method)m);
  names[BS_METHOD_COUNT] = NULL;
  int i = scn_parse_enum(v, names, why, n);
  if (i < 0) return -1;
  c->par.method = (bs_method)i;
  return 0;
}
INT_SETTER(set_gpus, par.gpus, 1, 1 << 20, 0)
ENUM_SETTER(set_layout, par.layout, bs_layout, "contiguous", "zigzag", "striped", "doc-zigzag", "greedy")
static int set_double_ring(bs_config *c, const char *v, char *why, size_t n) {
  static const char *const names[] = {"auto", "off", "on", NULL};
  int i = scn_parse_enum(v, names, why, n);
  if (i < 0) return -1;
  c->par.double_ring = i == 0 ? BS_AUTO : i == 1 ? BS_OFF : BS_ON;
  return 0;
}
BOOL_SETTER(set_lao, par.lao)
static int set_bwd_comm(bs_config *c, const char *v, char *why, size_t n) {
  static const char *const names[] = {"plain", "optimized", NULL};
  int i = scn_parse_enum(v, names, why, n);
  if (i < 0) return -1;
  c->par.bwd_opt = i;
  return 0;
}
INT_SETTER(set_ulysses_degree, par.ulysses_degree, 1, 1 << 20, 0)
static int set_tp_variant(bs_config *c, const char *v, char *why, size_t n) {
  static const char *const names[] = {"v1", "v3", NULL};
  int i = scn_parse_enum(v, names, why, n);
  if (i < 0) return -1;
  c->par.tp_variant = i == 0 ? 1 : 3;
  return 0;
}
ENUM_SETTER(set_ulysses_placement, par.ulysses_placement, bs_placement, "head-first", "ring-first")
INT_SETTER(set_zero, par.zero, 0, 3, 0)
INT_SETTER(set_ranks_per_node, par.ranks_per_node, 1, 1 << 16, 0)
INT_SETTER(set_tp, par.tp, 1, 1 << 20, 0)
INT_SETTER(set_dp, par.dp, 1, 1 << 20, 0)
INT_SETTER(set_pp, par.pp, 1, 1 << 12, 0)
INT_SETTER(set_ep, par.ep, 1, 1 << 20, 0)
ENUM_SETTER(set_pp_schedule, par.pp_schedule, bs_pp_schedule, "1f1b", "interleaved")
INT_SETTER(set_pp_chunks, par.pp_chunks, 1, 1 << 12, 0)
static int set_micro_batch(bs_config *c, const char *v, char *why, size_t n) {
  int64_t x;
  if (!strcmp(v, "auto")) return c->par.micro_batch = 0, 0;
  if (scn_parse_int64(v, 1, 1 << 20, 0, &x, why, n)) return -1;
  c->par.micro_batch = (int)x;
  return 0;
}
static int set_order(bs_config *c, const char *v, char *why, size_t n) {
  if (!bs_order_parse(v, c->par.order)) return 0;
  char cb[SHOWN + 4];
  snprintf(why, n, "'%s' is not an order of tp, cp, dp and pp, each once, fastest first (e.g. tp-cp-dp-pp)",
           scn_clip(v, cb));
  return -1;
}

static int set_topology(bs_config *c, const char *v, char *why, size_t n) {
  return scn_parse_name(v, c->cluster.topology, sizeof c->cluster.topology, why, n);
}
static int set_profile(bs_config *c, const char *v, char *why, size_t n) {
  return scn_parse_name(v, c->cluster.profile, sizeof c->cluster.profile, why, n);
}
INT_SETTER(set_nodes, cluster.nodes, 0, 1 << 16, 0)
INT_SETTER(set_nics_per_node, cluster.nics_per_node, 1, 1 << 16, 0)
ENUM_SETTER(set_coll_algo, cluster.coll_algo, bs_coll_algo, "ring", "tree", "auto")
BOOL_SETTER(set_trace, trace)

/* ---- what-ifs (sim): values "none" or A:F ------------------------------ */

/* A factor: a finite real in (0, hi]. */
static int parse_factor(const char *v, double hi, double *out, char *why, size_t n) {
  char cb[SHOWN + 4], *end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || *end || errno == ERANGE || !isfinite(x)) {
    snprintf(why, n, "factor '%s' is not a number", scn_clip(v, cb));
    return -1;
  }
  if (!(x > 0) || x > hi) {
    snprintf(why, n, "factor %g must be > 0%s", x, hi < 1e300 ? " and <= 1" : "");
    return -1;
  }
  *out = x;
  return 0;
}

/* "A:F" into its two halves (A copied into a, at most cap - 1 characters); -1 when there is no ':'. */
static int split_colon(const char *v, char *a, size_t cap, const char **f, const char *form, char *why, size_t n) {
  char cb[SHOWN + 4];
  const char *colon = strchr(v, ':');
  if (!colon || (size_t)(colon - v) >= cap || colon == v || !colon[1]) {
    snprintf(why, n, "'%s' is not %s or none", scn_clip(v, cb), form);
    return -1;
  }
  memcpy(a, v, (size_t)(colon - v));
  a[colon - v] = '\0';
  *f = colon + 1;
  return 0;
}

static int set_straggler(bs_config *c, const char *v, char *why, size_t n) {
  if (!strcmp(v, "none")) {
    c->cluster.straggler_rank = 0;
    c->cluster.straggler_factor = 0;
    return 0;
  }
  char a[32];
  const char *f;
  int64_t r;
  double x;
  if (split_colon(v, a, sizeof a, &f, "RANK:FACTOR (17:1.5)", why, n) ||
      scn_parse_int64(a, 0, 1 << 20, 0, &r, why, n) || parse_factor(f, 1e300, &x, why, n))
    return -1;
  if (x < 1e-3 || x > 1e3) { /* a rank 1000 times slower, or faster, is no straggler but a slip */
    snprintf(why, n, "factor %g is outside [0.001, 1000] (the straggler's compute time multiplier)", x);
    return -1;
  }
  c->cluster.straggler_rank = (int)r;
  c->cluster.straggler_factor = x;
  return 0;
}

static int set_degrade(bs_config *c, const char *v, char *why, size_t n) {
  bs_cluster *k = &c->cluster;
  if (!strcmp(v, "none")) {
    k->degrade_factor = 0;
    k->degrade_one_node = 0;
    k->degrade_one_nic = 0;
    return 0;
  }
  char a[48];
  const char *f;
  double x;
  if (split_colon(v, a, sizeof a, &f,
                  "CLASS:FACTOR, CLASS@NODE:FACTOR or nic@NODE/NIC:FACTOR (nic:0.5, nvlink@3:0.5, nic@3/1:0.5)", why,
                  n))
    return -1;
  char *at = strchr(a, '@'), *slash = at ? strchr(at, '/') : NULL;
  int64_t node = 0, nic = 0;
  if (slash) {
    *slash = '\0';
    if (scn_parse_int64(slash + 1, 0, 1 << 16, 0, &nic, why, n)) return -1;
  }
  if (at) {
    *at = '\0';
    if (scn_parse_int64(at + 1, 0, 1 << 16, 0, &node, why, n)) return -1;
  }
  const char *classes[BS_LINK_CLASS_COUNT + 1];
  for (int i = 0; i < BS_LINK_CLASS_COUNT; i++) classes[i] = bs_link_class_name((bs_link_class)i);
  classes[BS_LINK_CLASS_COUNT] = NULL;
  int cls = scn_parse_enum(a, classes, why, n);
  if (cls < 0) return -1;
  if (slash && cls != BS_LINK_NIC) {
    snprintf(why, n, "%s@NODE/%lld: only class nic names one of a node's links (nic@NODE/NIC)", classes[cls],
             (long long)nic);
    return -1;
  }
  if (parse_factor(f, 1, &x, why, n)) return -1;
  k->degrade_class = cls;
  k->degrade_one_node = at != NULL;
  k->degrade_node = (int)node;
  k->degrade_one_nic = slash != NULL;
  k->degrade_nic = (int)nic;
  k->degrade_factor = x;
  return 0;
}

static int set_failed_nics(bs_config *c, const char *v, char *why, size_t n) {
  if (!strcmp(v, "none")) {
    c->cluster.failed_node = 0;
    c->cluster.failed_nics = 0;
    return 0;
  }
  char a[32];
  const char *f;
  int64_t node = -1, k;
  if (split_colon(v, a, sizeof a, &f, "NODE:NICS or all:NICS (3:1)", why, n) ||
      (strcmp(a, "all") && scn_parse_int64(a, 0, 1 << 16, 0, &node, why, n)) ||
      scn_parse_int64(f, 1, 1 << 16, 0, &k, why, n))
    return -1;
  c->cluster.failed_node = (int)node;
  c->cluster.failed_nics = (int)k;
  return 0;
}
INT_SETTER(set_nodes_per_leaf, cluster.nodes_per_leaf, 1, 1 << 20, 0)
static int set_oversub(bs_config *c, const char *v, char *why, size_t n) {
  char cb[SHOWN + 4];
  if (real_in(v, 1, 1e6, &c->cluster.oversub)) {
    snprintf(why, n, "'%s' is not a ratio in [1, 1e6]", scn_clip(v, cb));
    return -1;
  }
  return 0;
}

static int set_nic_gbps(bs_config *c, const char *v, char *why, size_t n) {
  char cb[SHOWN + 4];
  if (real_in(v, 1, 1e5, &c->cluster.nic_gbps)) {
    snprintf(why, n, "'%s' is not a line rate in Gb/s in [1, 1e5]", scn_clip(v, cb));
    return -1;
  }
  return 0;
}

/* Table order is application order: model.preset must come before the model keys. */
const key_def scn_keys[] = {
  {"model", "preset", set_preset, "a name of bs_model_preset_name"},
  {"model", "hidden", set_hidden, "model width"},
  {"model", "heads", set_heads, "query heads"},
  {"model", "kv_heads", set_kv_heads, "key/value heads (GQA)"},
  {"model", "head_dim", set_head_dim, "head dimension"},
  {"model", "layers", set_layers, "transformer layers"},
  {"model", "ffn", set_ffn, "MLP inner width"},
  {"model", "vocab", set_vocab, "vocabulary size"},
  {"model", "dtype", set_dtype, "bf16 | fp16 | fp32"},
  {"model", "fp8", set_fp8, "off | ffn | all (layer and model scope: which GEMMs run in FP8)"},
  {"model", "attention_kernel", set_attention_kernel,
   "default | fa2 | fa3 | cudnn (the fused attention kernel's rates)"},
  {"model", "main_grads", set_main_grads, "fp32 | bf16 (training: gradient buffer and its reduction)"},
  {"model", "master_weights", set_master_weights, "fp32 | none (training: the optimizer's master copy)"},
  {"model", "attention", set_attention, "mha | mla | mla-latent (multi-head latent attention, DeepSeek-V2/V3)"},
  {"model", "v_head_dim", set_v_head_dim, "columns of v, o, dout; 0 = head_dim (MLA: 128)"},
  {"model", "kv_lora_rank", set_kv_lora_rank, "MLA: the K,V latent's width per token"},
  {"model", "qk_nope_head_dim", set_qk_nope_head_dim, "MLA: q, k columns without RoPE"},
  {"model", "qk_rope_head_dim", set_qk_rope_head_dim, "MLA: q, k columns with RoPE (the key's shared by the heads)"},
  {"model", "experts", set_experts, "routed experts per layer, 0 = dense MLP (mixture-of-experts)"},
  {"model", "top_k", set_top_k, "experts each token is routed to"},
  {"model", "moe_ffn", set_moe_ffn, "an expert's FFN inner width"},
  {"model", "shared_experts", set_shared_experts, "experts every token passes (dense FFNs of moe_ffn)"},
  {"model", "capacity_factor", set_capacity_factor,
   "none | C: an expert takes at most, padded to, C x its uniform share of routed tokens"},
  {"model", "routing_skew", set_routing_skew, "uniform | S: the most loaded expert's share of the routed tokens"},
  {"workload", "phase", set_phase, "train | prefill | decode"},
  {"workload", "seq_len", set_seq_len, "tokens (K, M suffixes)"},
  {"workload", "batch", set_batch, "sequences"},
  {"workload", "causal", set_causal, "true | false"},
  {"workload", "window", set_window, "sliding window, 0 = none"},
  {"workload", "scope", set_scope, "attention | layer | model"},
  {"workload", "decode_tokens", set_decode_tokens, "query tokens per decode step"},
  {"workload", "recompute", set_recompute, "off | selective | full (true = full)"},
  {"workload", "kv_cache", set_kv_cache, "keep | drop (prefill: each layer's K, V stay or go after attention)"},
  {"workload", "cross_entropy", set_cross_entropy,
   "unfused | fused (model scope, train: Megatron's loss kernels and the logits they keep)"},
  {"workload", "cached_tokens", set_cached_tokens,
   "prefill: tokens of seq_len already in the KV cache, 0 = none (K, M suffixes)"},
  {"workload", "documents", set_documents,
   "packed documents: none | fixed:L1/L2/... | uniform:MIN/MAX | hist:FILE (seeded by workload.seed)"},
  {"workload", "seed", set_seed, "seed of the inputs of real runs"},
  {"workload", "fragmentation", set_fragmentation,
   "auto | 0 .. 0.9: layer / model scope, the allocator's reserve as a share of reserved memory (auto: 0.15 in "
   "training, 0 else)"},
  {"workload", "kv_block", set_kv_block,
   "0 | tokens per block: layer / model scope, prefill and decode, the KV cache paged in blocks (vLLM: 16), 0 = "
   "contiguous"},
  {"workload", "max_seq_len", set_max_seq_len,
   "0 | tokens: the contiguous KV cache's reservation per sequence (0 = the tokens it holds; K, M suffixes)"},
  {"workload", "framework", set_framework,
   "megatron | torchtitan | deepspeed: whose documented defaults apply to the keys not given (docs/frameworks.md)"},
  {"parallel", "method", set_method, "a name of bs_method_name"},
  {"parallel", "gpus", set_gpus, "devices"},
  {"parallel", "layout", set_layout, "contiguous | zigzag | striped | doc-zigzag | greedy"},
  {"parallel", "double_ring", set_double_ring, "auto | on | off"},
  {"parallel", "lao", set_lao, "on | off"},
  {"parallel", "bwd_comm", set_bwd_comm, "optimized | plain"},
  {"parallel", "ulysses_degree", set_ulysses_degree, "ranks per all-to-all group (usp)"},
  {"parallel", "ulysses_placement", set_ulysses_placement,
   "head-first | ring-first (usp: all-to-all or ring inside a node)"},
  {"parallel", "tp_variant", set_tp_variant, "v1 | v3"},
  {"parallel", "zero", set_zero, "0 | 1 | 2 | 3"},
  {"parallel", "ranks_per_node", set_ranks_per_node, "ranks per node in real runs"},
  {"parallel", "tp", set_tp, "tensor-parallel degree (Megatron, sequence parallel with tp_variant v3)"},
  {"parallel", "dp", set_dp, "data-parallel replicas"},
  {"parallel", "pp", set_pp, "pipeline stages (model scope)"},
  {"parallel", "pp_schedule", set_pp_schedule, "1f1b | interleaved"},
  {"parallel", "pp_chunks", set_pp_chunks, "interleaved: model chunks per rank (default 2)"},
  {"parallel", "micro_batch", set_micro_batch, "sequences per microbatch | auto (batch / dp)"},
  {"parallel", "cp_pass", set_cp_pass, "kv | q (burst, ring: K,V or the queries travel the ring)"},
  {"parallel", "order", set_order, "dimensions fastest first over the ranks (tp-cp-dp-pp)"},
  {"parallel", "ep", set_ep, "expert-parallel degree, over the cp x dp ranks (model.experts)"},
  {"cluster", "topology", set_topology, "a generator of bs_topo_generator_names | FILE.xml"},
  {"cluster", "profile", set_profile, "a profile of calib/profiles | FILE.json (default: the topology's)"},
  {"cluster", "nodes", set_nodes, "nodes, 0 = from gpus"},
  {"cluster", "nics_per_node", set_nics_per_node,
   "NICs per node, dividing its GPUs (dgx, nvl72; default: one per GPU)"},
  {"cluster", "coll_algo", set_coll_algo, "ring | tree | auto (sim: how an allreduce is shaped)"},
  {"cluster", "nodes_per_leaf", set_nodes_per_leaf,
   "dgx, nvl72: nodes under one leaf switch (default 16, nvl72 8; --nodes-per-leaf wins)"},
  {"cluster", "nic_gbps", set_nic_gbps, "line rate of every NIC in Gb/s (sim: 0.96 of it carried, as NCCL measures)"},
  {"cluster", "oversub", set_oversub, "dgx, nvl72: leaf oversubscription, 1 .. 1e6 (default 1; --oversub wins)"},
  {"cluster", "straggler", set_straggler,
   "none | RANK:F, F in [0.001, 1000] (sim: that rank's COMPUTE takes F times longer)"},
  {"cluster", "degrade", set_degrade,
   "none | CLASS:F | CLASS@NODE:F | nic@NODE/NIC:F (sim: links of a class, or one NIC, at F of their bandwidth)"},
  {"cluster", "failed_nics", set_failed_nics, "none | NODE:K | all:K (sim: K NICs of a node, or of every node, down)"},
  {"output", "trace", set_trace, "on | off"},
};
_Static_assert(sizeof scn_keys / sizeof scn_keys[0] == SCN_NKEYS, "SCN_NKEYS (scenario_impl.h): the keys of the table");

int scn_find_key(const char *section, const char *key) {
  for (int i = 0; i < SCN_NKEYS; i++)
    if (!strcmp(scn_keys[i].section, section) && !strcmp(scn_keys[i].key, key)) return i;
  return -1;
}
int scn_known_section(const char *s) {
  for (int i = 0; i < SCN_NKEYS; i++)
    if (!strcmp(scn_keys[i].section, s)) return 1;
  return 0;
}

/* Appends "(did you mean SECTION.KEY?)" to msg for the known key closest to section.key. */
void scn_suggest_key(const char *section, const char *key, char *msg, size_t n) {
  char typed[2 * NEAR_MAX], known[SCN_NKEYS][48];
  snprintf(typed, sizeof typed, "%s.%s", section, key);
  nearest nr;
  scn_near_init(&nr, typed);
  for (int i = 0; i < SCN_NKEYS; i++) {
    snprintf(known[i], sizeof known[i], "%s.%s", scn_keys[i].section, scn_keys[i].key);
    scn_near_offer(&nr, known[i]);
  }
  scn_near_append(&nr, msg, n);
}

/* Appends "(did you mean SECTION?)" to msg for the known section closest to s. */
void scn_suggest_section(const char *s, char *msg, size_t n) {
  nearest nr;
  scn_near_init(&nr, s);
  for (int i = 0; i < SCN_NKEYS; i++) scn_near_offer(&nr, scn_keys[i].section);
  scn_near_append(&nr, msg, n);
}
