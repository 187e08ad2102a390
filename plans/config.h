/*
 * config.h — one point of a scenario, as plain structs every floor shares.
 * src/scenario.c fills these from INI files; plans read them; runtime and sim
 * take them as input. No I/O, no allocation: a bs_config is a value.
 */
#ifndef BURSTSIM_CONFIG_H
#define BURSTSIM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef enum { BS_BF16 = 0, BS_FP16 = 1, BS_FP32 = 2 } bs_dtype;
typedef enum { BS_TRAIN = 0, BS_PREFILL = 1, BS_DECODE = 2 } bs_phase;
typedef enum { BS_SCOPE_ATTENTION = 0, BS_SCOPE_LAYER = 1, BS_SCOPE_MODEL = 2 } bs_scope;
typedef enum {
  BS_BURST = 0,
  BS_RING,
  BS_RING_LI2021,
  BS_ULYSSES,
  BS_USP,
  BS_TP,
  BS_TREE,
  BS_ALLGATHER,
  BS_METHOD_COUNT
} bs_method;
/* How the sequence is split over the ranks of a ring. doc-zigzag and greedy are the balance
 * strategies for packed documents (plans/balance.c): each document zigzagged over the ranks
 * (Transformer Engine's THD layout), or equal chunks dealt greedily by attention work. */
typedef enum { BS_CONTIGUOUS = 0, BS_ZIGZAG, BS_STRIPED, BS_DOC_ZIGZAG, BS_GREEDY } bs_layout;
typedef enum { BS_AUTO = -1, BS_OFF = 0, BS_ON = 1 } bs_tristate;
/* usp: where its all-to-all groups sit. head-first: a group is U consecutive ranks (inside a
 * node), the ring joins ranks U apart; ring-first: a ring is G/U consecutive ranks, a group joins
 * ranks G/U apart. */
typedef enum { BS_HEAD_FIRST = 0, BS_RING_FIRST } bs_placement;
/* How the simulator shapes an allreduce (NCCL's algorithms; sim/coll_shape.h). */
typedef enum { BS_COLL_ALGO_RING = 0, BS_COLL_ALGO_TREE, BS_COLL_ALGO_AUTO } bs_coll_algo;
/* Prefill at layer and model scope: whether each layer's K and V stay (the KV
 * cache a generation goes on with) or are freed after its attention (a
 * first-token-latency benchmark). */
typedef enum { BS_KV_KEEP = 0, BS_KV_DROP } bs_kv_cache;

/* Training at model scope (workload.cross_entropy): Megatron-LM's loss. unfused (its default):
 * vocab_parallel_cross_entropy (megatron/core/tensor_parallel/cross_entropy.py) in separate kernels,
 * which casts the 16-bit logits to fp32 and keeps that copy, turned into the softmax in place, for
 * the backward, whose fp32 gradient autograd casts back to the logits' type; fused: the fused loss
 * (--cross-entropy-loss-fusion with --cross-entropy-fusion-impl te: Transformer Engine's
 * parallel_cross_entropy, transformer_engine/pytorch/cross_entropy.py) in fewer kernels, which keeps
 * the 16-bit logits and writes the gradient into them. */
typedef enum { BS_CE_UNFUSED = 0, BS_CE_FUSED } bs_cross_entropy;

/* The caching allocator's fragmentation by default in training (workload.fragmentation = auto): the
 * share of the memory it reserves that no tensor holds, 1 - allocated / reserved. GMLake (Guo et al.,
 * ASPLOS 2024, arXiv 2401.08156, abstract and Sec. 6) removes 15 % of fragmentation on average (up to
 * 33 %) against PyTorch's caching allocator over eight LLM training jobs on A100-80GB, its own being
 * near zero: the share PyTorch's allocator leaves unallocated. Inference has no such published
 * figure (and serving engines preallocate their KV cache): auto is 0 there. */
#define BS_FRAGMENTATION_DEFAULT 0.15
#define BS_FRAGMENTATION_AUTO (-1.0) /* workload.fragmentation = auto: the default above in training, 0 else */

/* What travels a context-parallel ring (Meta's CP inference, arXiv 2411.01783 §3): the K,V shards
 * (pass-KV), or the query shards, whose partial outputs return to their owner by an all-to-all
 * and are merged there (pass-Q). */
typedef enum { BS_PASS_KV = 0, BS_PASS_Q } bs_cp_pass;
/* Activation recomputation (Korthikanti et al. 2022): full keeps a layer's input only, selective
 * recomputes the attention core. 1 is full, so the old boolean keeps its meaning. */
typedef enum { BS_RECOMPUTE_OFF = 0, BS_RECOMPUTE_FULL = 1, BS_RECOMPUTE_SELECTIVE = 2 } bs_recompute;
/* Pipeline schedule: 1F1B, or Megatron's interleaved 1F1B over pp_chunks model chunks per rank. */
typedef enum { BS_PP_1F1B = 0, BS_PP_INTERLEAVED } bs_pp_schedule;

/* Which GEMMs run in FP8 (Transformer Engine style: the MLP's, or every projection's; the LM head
 * and attention stay in the storage type). */
typedef enum { BS_FP8_OFF = 0, BS_FP8_FFN, BS_FP8_ALL } bs_fp8;
/* The fused attention kernel the job runs (model.attention_kernel): the profile's default (the rates
 * of its kernels.attn_fwd / attn_bwd), FlashAttention-2, FlashAttention-3 or cuDNN's fused attention
 * (Transformer Engine's default on Hopper). */
typedef enum {
  BS_ATTN_KERNEL_DEFAULT = 0,
  BS_ATTN_KERNEL_FA2,
  BS_ATTN_KERNEL_FA3,
  BS_ATTN_KERNEL_CUDNN,
  BS_ATTN_KERNEL_COUNT
} bs_attn_kernel;

/* Training's main gradients: the buffer the backward accumulates into and the data-parallel
 * reduction runs on (Megatron-LM with bf16: fp32, --accumulate-allreduce-grads-in-fp32 set by
 * default, unless --grad-reduce-in-bf16), or the 2-byte bf16. */
typedef enum { BS_GRADS_FP32 = 0, BS_GRADS_BF16 } bs_main_grads;

/* The optimizer's fp32 master copy of the weights (Megatron's mixed-precision optimizer keeps one
 * beside Adam's two moments), or none (the moments only). */
typedef enum { BS_MASTER_FP32 = 0, BS_MASTER_NONE } bs_master_weights;

/* The attention of a layer (model.attention): multi-head (MHA, GQA, MQA by kv_heads), or multi-head
 * latent attention (DeepSeek-V2, arXiv 2405.04434 §2.1): K and V up-projected per head from a
 * latent of kv_lora_rank per token plus a RoPE key of qk_rope_head_dim shared by the heads, so
 * q, k have qk_nope_head_dim + qk_rope_head_dim columns and v has v_head_dim. mla: the up-projected
 * per-head K, V are what attention reads and a ring passes; mla-latent: the up-projections absorbed
 * into q and the output (the paper's §2.1.2 inference form, FlashMLA's kernel): one K of
 * kv_lora_rank + qk_rope_head_dim shared by every head, V its first kv_lora_rank columns. */
typedef enum { BS_ATTENTION_MHA = 0, BS_ATTENTION_MLA, BS_ATTENTION_MLA_LATENT } bs_attention;

/* The training framework whose documented defaults the job takes (workload.framework;
 * plans/framework.c, docs/frameworks.md): Megatron-LM with Transformer Engine, torchtitan (FSDP2 and
 * PyTorch SDPA), or DeepSpeed. Keys the user gives win over a framework's defaults. */
typedef enum { BS_FW_MEGATRON = 0, BS_FW_TORCHTITAN, BS_FW_DEEPSPEED, BS_FW_COUNT } bs_framework;
/* The keys a framework may set when the user gives none (bs_framework_defaults): given by the user
 * (its argument), or applied by the framework (bs_workload.framework_applied). */
#define BS_FW_KEY_ZERO 1u   /* parallel.zero */
#define BS_FW_KEY_KERNEL 2u /* model.attention_kernel = default, resolved */
#define BS_FW_KEY_METHOD 4u /* parallel.method: torchtitan's all-gather context parallelism */
#define BS_FW_KEY_LAYOUT 8u /* parallel.layout: torch's head-tail load balance (zigzag) */

typedef struct {
  char preset[32]; /* "" when given explicitly */
  int64_t hidden, heads, kv_heads, head_dim, layers, ffn, vocab;
  bs_dtype dtype;
  bs_fp8 fp8;
  bs_attn_kernel attention_kernel;
  bs_main_grads main_grads;         /* training: fp32 (Megatron's default) or bf16 */
  bs_master_weights master_weights; /* training: fp32 master weights in the optimizer, or none */
  bs_attention attention;           /* mha, mla or mla-latent */
  int64_t v_head_dim;               /* columns of v, o and dout; 0 = head_dim */
  /* MLA's shapes (DeepSeek's config.json names); bs_model_resolve_attention makes heads, kv_heads,
   * head_dim and v_head_dim from them. q_lora_rank sizes the query's down-projection, which the
   * attention scope does not run (0: none, as DeepSeek-V2-Lite). */
  int64_t q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim;
  /* Mixture-of-experts (layer and model scope; plans/workload_moe.c): experts routed FFNs of
   * hidden moe_ffn per layer in place of the dense MLP, top_k of them per token, shared_experts
   * dense FFNs of moe_ffn beside them; capacity_factor: each expert takes at most (and is padded
   * to) capacity_factor x its uniform share of the routed tokens (0 = dropless); routing_skew:
   * the most loaded expert's share of the routed tokens (0 = uniform, 1/experts). 0 experts: dense. */
  int64_t experts, top_k, moe_ffn, shared_experts;
  double capacity_factor, routing_skew;
} bs_model;

#define BS_MAX_DOCS 512 /* packed documents per sequence */

typedef struct {
  bs_phase phase;
  int64_t seq_len; /* tokens, whole sequence */
  int64_t batch;
  int causal;
  int64_t window; /* 0 = none */
  bs_scope scope;
  int64_t decode_tokens;          /* decode: query tokens per step */
  int recompute;                  /* model scope: activation recomputation (bs_recompute) */
  bs_kv_cache kv_cache;           /* prefill, layer and model scope */
  int64_t cached_tokens;          /* prefill: tokens of seq_len already in the KV cache (0 = none) */
  bs_cross_entropy cross_entropy; /* model scope, training: Megatron's loss: unfused (fp32 logits) or fused */
  double fragmentation;           /* layer and model scope: the allocator's share reserved unallocated (< 0: auto) */
  /* The KV cache's allocation (layer and model scope, prefill and decode): kv_block > 0 pages it in
   * blocks of kv_block tokens per sequence (vLLM's PagedAttention); 0 allocates it contiguously,
   * max_seq_len tokens per sequence when max_seq_len > 0 (the reservation of the systems before
   * vLLM), else exactly the tokens it holds. */
  int64_t kv_block, max_seq_len;
  bs_framework framework;     /* whose defaults apply (bs_framework_defaults) */
  unsigned framework_applied; /* BS_FW_KEY_* the framework set (none the user gave) */
  /* Packed documents (workload.documents): every sequence holds `docs` documents back to back,
   * document i ending (exclusive) at doc_end[i], the last at seq_len; attention stays inside a
   * document (the per-document mask of kernels/mask.h). 0: one document, no document mask.
   * documents: the key's value as given ("" = none); src/ resolves it into docs, doc_end. */
  char documents[128];
  int32_t docs;
  int64_t doc_end[BS_MAX_DOCS];
} bs_workload;

/* The dimensions of composed parallelism (Megatron's names): tensor, context, data, pipeline. */
typedef enum { BS_DIM_TP = 0, BS_DIM_CP, BS_DIM_DP, BS_DIM_PP, BS_DIM_COUNT } bs_dim;

typedef struct {
  bs_method method;
  int gpus;
  /* Composed parallelism: tp x cp x dp x pp = gpus, cp derived (method tp: tp = gpus / (dp pp), cp = 1). */
  int tp, dp, pp;
  bs_pp_schedule pp_schedule; /* 1f1b or interleaved */
  int pp_chunks;              /* interleaved: model chunks (virtual stages) per rank */
  int micro_batch;            /* sequences per microbatch; 0 = batch / dp (one microbatch per replica) */
  int8_t order[BS_DIM_COUNT]; /* bs_dim, the one varying fastest over the ranks first (tp-cp-dp-pp) */
  bs_layout layout;
  bs_tristate double_ring;
  int lao;                        /* burst: 1 = tiled local attention, 0 = score block materialised */
  int bwd_opt;                    /* burst: 1 = ring D ("optimized"), 0 = ring O ("plain") */
  int ulysses_degree;             /* usp */
  bs_placement ulysses_placement; /* usp */
  int tp_variant;                 /* 1 or 3 */
  int zero;                       /* 0..3 */
  int ranks_per_node;             /* real runs: ranks grouped into a "node"; sim: from topology */
  bs_cp_pass cp_pass;             /* burst, ring: what travels the ring */
  int ep;                         /* expert parallelism over the cp x dp ranks (0 or 1: none) */
} bs_parallel;

/*
 * The rank grid a config resolves to: each dimension's size and stride over
 * the ranks (rank = sum of coordinate x stride), the attention group's
 * dimension (cp, or tp for method tp) and the microbatches. plans/mesh.c.
 */
typedef struct {
  int size[BS_DIM_COUNT];
  int stride[BS_DIM_COUNT];
  int att_dim;          /* the dimension one attention runs over: BS_DIM_CP, or BS_DIM_TP for method tp */
  int64_t micro_batch;  /* sequences per microbatch */
  int64_t microbatches; /* per step and replica: batch / (dp x micro_batch) */
} bs_mesh;

typedef struct {
  char topology[256];     /* preset name or XML path */
  char profile[256];      /* preset name or JSON path */
  int nodes;              /* 0 = derived from gpus / gpus-per-node */
  int nics_per_node;      /* 0 = the topology's own (dgx: one per GPU) */
  bs_coll_algo coll_algo; /* sim: allreduce as NCCL ring, double binary tree, or the faster modelled */
  /* sim what-ifs; all zero = none (the uniform cluster) */
  int nodes_per_leaf;      /* dgx: nodes under one leaf switch, 0 = the generator's (16) */
  double oversub;          /* dgx: leaf downlink / uplink ratio, 0 = the generator's (1) */
  int straggler_rank;      /* with straggler_factor > 0: this rank's COMPUTE ops ... */
  double straggler_factor; /* ... take this many times longer (0 = no straggler) */
  int degrade_class;       /* with degrade_factor > 0: links of this class (topologies/topo.h) ... */
  int degrade_one_node;    /* ... of node degrade_node only (0: of every node) ... */
  int degrade_node;
  int degrade_one_nic; /* ... and, class nic, its NIC degrade_nic only (a rail; 0: every NIC of it) ... */
  int degrade_nic;
  double degrade_factor; /* ... at this share of their bandwidth, in (0, 1] (0 = none) */
  int failed_node;       /* with failed_nics > 0: on this node (-1: on every node) ... */
  int failed_nics;       /* ... this many NICs (the last, by rail) are down (0 = none) */
  double nic_gbps;       /* line rate of every NIC in Gb/s (0 = the profile's NIC bandwidth) */
} bs_cluster;

typedef struct {
  bs_model model;
  bs_workload work;
  bs_parallel par;
  bs_cluster cluster;
  int trace;
  uint64_t seed; /* inputs of real runs */
} bs_config;

/* Bytes per element of a storage type. */
static inline int bs_dtype_bytes(bs_dtype t) { return t == BS_FP32 ? 4 : 2; }

/* The names, one table each (config.c): the scenario keys parse them, messages list them. */
const char *bs_method_name(bs_method m);
const char *bs_layout_name(bs_layout l);
const char *bs_phase_name(bs_phase p);
const char *bs_dtype_name(bs_dtype t);
const char *bs_scope_name(bs_scope s);
const char *bs_coll_algo_name(bs_coll_algo a);
const char *bs_placement_name(bs_placement p);
const char *bs_kv_cache_name(bs_kv_cache k);
const char *bs_cross_entropy_name(bs_cross_entropy x);

/* What the caching allocator reserves beyond a rank's peak of allocated bytes at layer and model
 * scope (a framework's job; attention scope: 0): peak x f / (1 - f), rounded up, so that the peak is
 * 1 - f of the reserved memory (f = workload.fragmentation; auto: BS_FRAGMENTATION_DEFAULT in
 * training, 0 in prefill and decode). */
int64_t bs_reserve_bytes(const bs_config *c, int64_t peak);
/* Out of memory: the peak and its reserve past the capacity. */
int bs_mem_over(const bs_config *c, int64_t peak, int64_t capacity);

/* Padding (plans/pad.c): the multiple of tokens a sequence must be to split evenly over the ranks
 * that share it (1: any), and the tokens a framework appends to workload.seq_len to reach it (0:
 * none; never in decode, with a cached prefix or packed documents). Plans are made for
 * seq_len + pad; the result's seq_len and its model FLOPs stay the user's tokens. */
int64_t bs_seq_divisor(const bs_config *c);
int64_t bs_seq_pad(const bs_config *c);
const char *bs_cp_pass_name(bs_cp_pass c);
const char *bs_recompute_name(int r);
const char *bs_pp_schedule_name(bs_pp_schedule s);
const char *bs_dim_name(bs_dim d);
const char *bs_fp8_name(bs_fp8 f);
const char *bs_attn_kernel_name(bs_attn_kernel k);
const char *bs_main_grads_name(bs_main_grads g);
const char *bs_master_weights_name(bs_master_weights m);
const char *bs_framework_name(bs_framework f);

/* workload.framework's defaults on c (plans/framework.c): for each BS_FW_KEY_* not in `given` (the
 * keys the user set), the framework's documented choice; the keys it set go to
 * c->work.framework_applied. megatron sets none. */
void bs_framework_defaults(bs_config *c, unsigned given);
/* The attention kernel model.attention_kernel = default means under framework f (DEFAULT: the
 * profile's default, which megatron keeps). */
bs_attn_kernel bs_framework_attn_kernel(bs_framework f);
/* Whether f's FP8 recipe all-reduces the amaxes (Transformer Engine's delayed scaling, reduce_amax). */
int bs_framework_amax_reduce(bs_framework f);
/* Whether f overlaps the data-parallel gradient reduction with the backward at ZeRO stage `zero`. */
int bs_framework_grad_overlap(bs_framework f, int zero);

/* The rank grid of c (plans/mesh.c): 0, or -1 with "section.key: what is wrong" in err. */
int bs_mesh_of(const bs_config *c, bs_mesh *m, char *err, size_t errlen);
/* The sizes of tp, cp, dp and pp that p's keys give its gpus, the rule bs_mesh_of applies (a size
 * left out is 1; method tp spans gpus / (dp x pp) with cp = 1, the other methods take
 * cp = gpus / (tp x dp x pp)), without its checks: a quotient that does not divide is rounded down. */
void bs_mesh_sizes(const bs_parallel *p, int size[BS_DIM_COUNT]);
/* This rank's coordinate along dimension d. */
int bs_mesh_coord(const bs_mesh *m, int rank, int d);
/* The group kind traffic between these ranks belongs to (results' bytes by group): the one
 * dimension whose coordinate differs, BS_DIM_DP when dp or cp and dp differ (the gradient group
 * dp x cp), the outermost otherwise; -1 for equal ranks. A collective is classed by its first
 * member against its second and its last (bs_mesh_group_kind). */
int bs_mesh_pair_kind(const bs_mesh *m, int a, int b);
int bs_mesh_group_kind(const bs_mesh *m, int first, int stride, int size);
/* The order written as the scenario key takes it ("tp-cp-dp-pp"). */
void bs_order_string(const int8_t order[BS_DIM_COUNT], char *buf, size_t n);
/* Parses an order ("tp-cp-dp-pp": each dimension once); 0, or -1. */
int bs_order_parse(const char *s, int8_t order[BS_DIM_COUNT]);

/*
 * The point's largest products of counts (sizes.c): batch x tokens x heads x head_dim x bytes for
 * the queries, keys and values, and at layer and model scope the activations, logits and model
 * state, each at most 2^BS_SIZES_LIMIT_LOG2 bytes so that no plan's product, sum or peak wraps.
 * 0, or -1 with the keys, their values and the product's size in err.
 */
#define BS_SIZES_LIMIT_LOG2 59
#define BS_SIZES_LIMIT ((int64_t)1 << BS_SIZES_LIMIT_LOG2)
int bs_config_sizes_check(const bs_config *c, char *err, size_t errlen);

/* A default config: llama2-7b shapes, train, 32K, burst on 8 GPUs. */
void bs_config_default(bs_config *c);

/* MLA: sets kv_heads, head_dim and v_head_dim from the latent shapes (mla: kv_heads = heads,
 * head_dim = qk_nope_head_dim + qk_rope_head_dim; mla-latent: kv_heads = 1, head_dim = kv_lora_rank
 * + qk_rope_head_dim, v_head_dim = kv_lora_rank); MHA: nothing. 0, or -1 with the key in err. */
int bs_model_resolve_attention(bs_model *m, char *err, size_t errlen);
const char *bs_attention_name(bs_attention a);

/* Model presets; returns 0 on success, -1 for an unknown name. */
int bs_model_preset(const char *name, bs_model *m);
/* The i-th model preset's name (i from 0), or NULL past the last: for messages. */
const char *bs_model_preset_name(int i);

#endif
