/*
 * workload.h — what layer and model scope add around a method's attention:
 * the parameter counts every memory and ZeRO term is built from, and the id
 * ranges of their plans. The generator itself is plans/workload.c; tests and
 * reports use these counts to check the plan against hand formulas.
 *
 * Layer scope: one transformer layer (RMSNorm, QKV projection, the method's
 * attention, output projection, residual add, RMSNorm, SwiGLU MLP, residual
 * add), its weights, gradients and optimizer states. Model scope: embedding,
 * L layers, final norm, LM head, loss and (train) the Adam step.
 */
#ifndef BURSTSIM_WORKLOAD_H
#define BURSTSIM_WORKLOAD_H

#include <stdint.h>
#include "config.h"

/* Layer and model plans hold more buffers and handles than one attention
 * call (attention scope keeps BS_PLAN_MAX_BUFS / BS_PLAN_MAX_HANDLES): their
 * handle ids are below BS_WL_MAX_HANDLES, their buffer ids below
 * bs_plan_buf_ids (plan.h), at least BS_WL_MAX_BUFS, more where a pipeline
 * stage holds more layers x microbatches at once. */
#define BS_WL_MAX_BUFS 2048
#define BS_WL_MAX_HANDLES 256

typedef struct {
  int64_t tp;                           /* tensor-parallel degree: gpus for method tp, else 1 */
  int64_t dp;                           /* data-parallel group: ranks holding the same weights (ZeRO shards over it) */
  int64_t qkv, o, gate_up, down, norms; /* one layer's parameters held by a rank (tp-sharded; MoE: gate_up
                                           and down are the shared experts'; MLA: qkv is the latent's down-
                                           and up-projections, norms add the latents' norms) */
  int64_t router;                       /* MoE: the router's hidden x experts (replicated over tp) */
  int64_t layer;                        /* their sum: the dense set, reduced over dp */
  int64_t experts;                      /* MoE: one layer's local experts (experts / ep of them, tp-sharded) */
  int64_t edp;                          /* MoE: the expert-data-parallel group, dp / ep (experts' ZeRO shards) */
  int64_t embed, head, final_norm;      /* model scope (vocab-parallel under tp) */
  int64_t total;                        /* parameters a rank holds without ZeRO (layer scope: one layer) */
  int64_t shard_total;                  /* with ZeRO: sum over parameter sets (each layer, the embedding, the
                              final norm with the head) of ceil(set / dp), and each layer's experts over edp */
} bs_param_count;

/* Parameter counts of cfg's workload for one rank (of the first pipeline stage). */
void bs_param_count_of(const bs_config *cfg, bs_param_count *pc);
/* The same for a rank of pipeline stage `stage`: its layers (layers / pp), the embedding on the
 * first stage, the final norm and the LM head on the last. */
void bs_param_count_stage(const bs_config *cfg, int stage, bs_param_count *pc);

/*
 * Mixture-of-experts (plans/workload_moe.c). A rank's dispatcher routes `tokens` tokens (its
 * sequence-parallel shard under tp v3) to top_k experts each; the expert-parallel group of ep
 * ranks exchanges them by an all-to-all (dispatch) and back (combine).
 */
/* The most experts one rank holds at layer and model scope (experts / ep). */
#define BS_MOE_MAX_LOCAL_EXPERTS 16
/* The checks of the MoE keys and of parallel.ep against the rank grid m: 0, or -1 with the key in err. */
int bs_moe_check(const bs_config *c, const bs_mesh *m, char *err, size_t errlen);
/* Token rows one rank's dispatch all-to-all sends: tokens x top_k (dropless), or experts x
 * ceil(capacity_factor x tokens x top_k / experts) (capacity: dropped and padded). */
int64_t bs_moe_dispatch_rows(const bs_config *c, int64_t tokens);
/* Token rows expert e processes, summed over the ep ranks that each dispatch `tokens` tokens
 * (routing_skew: expert 0 takes its share, the rest split what is left). */
int64_t bs_moe_expert_rows(const bs_config *c, int64_t tokens, int64_t e);

/* ceil(n / dp): the ZeRO shard of a parameter set of n. */
static inline int64_t bs_zero_shard(int64_t n, int64_t dp) { return dp > 1 ? (n + dp - 1) / dp : n; }

#endif
