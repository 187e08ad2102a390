/*
 * workload_impl.h — private to plans/workload*.c: the state of a workload
 * plan's iterator (bs_wl) and the functions its files share. workload.c holds
 * the program; the others are described at their top.
 */
#ifndef BURSTSIM_PLANS_WORKLOAD_IMPL_H
#define BURSTSIM_PLANS_WORKLOAD_IMPL_H

#include "plan_impl.h"
#include "workload.h"

#define SAVE_MAX 10 /* attention buffers one layer keeps from forward to backward */

/* One attention iterator whose ops are streamed into this plan: its scalars first, on the lines
 * every op reads, the id tables after. */
typedef struct {
  bs_plan_iter *in;
  int nalloc;           /* ALLOCs seen so far */
  int replay;           /* forward replayed without emission */
  int rerun;            /* selective: forward emitted again, the saved buffers reused */
  int skip_hook;        /* rerun: the forward's hook (QKV projection) is not run again */
  int after_begin;      /* a PHASE begin seen, its leading ALLOCs not yet over */
  int has_held;         /* held is the next op */
  const int32_t *saved; /* replay: the outer ids kept at forward end */
  const int *saved_seq; /* ... and the allocation numbers they had */
  int nsaved;
  int64_t pos; /* ops of the attention plan taken so far (from the record, then from `in`) */
  int32_t hmap[BS_PLAN_MAX_HANDLES];
  int32_t bmap[BS_PLAN_MAX_BUFS]; /* inner id -> outer id; -1 none; -2 replayed, re-allocated at bwd */
  int seqof[BS_PLAN_MAX_BUFS];    /* allocation number of each live id */
  bs_op held;                     /* the first field stream_start leaves as it is */
  bs_op aop[BS_PLAN_MAX_BUFS];    /* the inner ALLOC of each live id */
} attn_stream;

enum { EV_NONE = 0, EV_HOOK, EV_FWD_END, EV_END };

/* Pipeline sends a rank keeps in flight at most (interleaved; 1F1B keeps 2). */
#define PP_SENDS 32

/* Program stages. */
enum { S_INIT = 0, S_TASK, S_EMBED, S_LFWD, S_HEAD, S_LBWD, S_EMBED_BWD, S_TASK_END, S_OPT, S_FINI, S_DONE };

typedef struct bs_wl {
  bs_plan_iter *it; /* the outer iterator (its queue receives the ops) */
  const bs_plan *p;
  uint64_t *bufs; /* the buffer ids in use: a bit each, nbufs of them (wl_buf_ids) */
  int32_t nbufs;
  uint64_t hnds[BS_WL_MAX_HANDLES / 64];
  int stage, sub, fsub;
  int64_t layer, L;
  int model, train, recompute, zero, v3, tp;
  int drop_kv; /* prefill without a KV cache: each layer's K, V freed after its attention */
  int64_t T, Tn, H, F, V, qkvw, es, g;
  int64_t gb;            /* bytes of a main gradient: 4 (model.main_grads = fp32) or 2 */
  bs_cross_entropy xent; /* workload.cross_entropy: the loss keeps fp32 logits or fused 16-bit ones */
  int nopt;              /* fp32 optimizer states per parameter: master weights, Adam's m and v (3), or m, v (2) */
  bs_param_count pc;
  bs_group dpg, tpg;
  int mla;                      /* model.attention = mla: the latent projections (workload_mla.c) */
  int moe;                      /* model.experts > 0: the MoE block in place of the MLP (workload_moe.c) */
  bs_group epg, edpg;           /* MoE: the expert-parallel and expert-data-parallel groups */
  int ep_index;                 /* MoE: this rank's place in epg (it holds experts ep_index x experts / ep ...) */
  int32_t geh;                  /* MoE: the outstanding expert-gradient collective */
  int32_t w_all, g_all, opt[3]; /* persistent weights, gradients, Adam states */
  int32_t *saved;               /* [L][SAVE_MAX]: attention buffers kept per layer */
  int *saved_seq;               /* [L][SAVE_MAX]: their allocation numbers in the forward */
  int *nsaved;
  int32_t *act; /* [L]: the layer's other saved activations (or checkpoint) */
  int32_t tmp, dx;
  int32_t *logits;      /* [slot]: the head's logits of a microbatch (interleaved: several in flight) */
  int32_t gh, gbuck;    /* outstanding gradient collective and its bucket */
  int32_t gnew, ehb;    /* buckets being filled: this layer's, embedding + head's */
  int32_t zb[2], zh[2]; /* ZeRO-3: gathered weight sets, current and prefetched */
  int zuse;             /* ZeRO-3: index of the next weight use */
  int grad_sync;        /* the framework waits each gradient reduction at once (bs_framework_grad_overlap) */
  int amax;             /* FP8 amaxes all-reduced (workload_amax.c) over amaxg */
  bs_group amaxg;
  int64_t n8, n8_fwd; /* FP8 GEMMs of the forward being run, and of the last forward */
  plan_rank_map map;  /* where this rank's attention group sits (compose.c) */
  int64_t mb, nmb;    /* the microbatch being run, microbatches per step */
  int64_t mbs;        /* sequences per microbatch */
  /* pipeline parallelism: this rank's stage of pp, its neighbours, the 1F1B schedule's position */
  int pp, pstage, has_embed, has_head;
  int v, chunk;                           /* model chunks on this rank (interleaved; 1 for 1F1B), the task's chunk */
  int t_embed, t_head;                    /* the task's chunk holds the embedding / the head */
  int32_t prev, next;                     /* ranks of the previous and the next stage */
  int32_t first, last;                    /* ranks of stage 0 and stage pp - 1 (interleaved: chunk c to c + 1) */
  int64_t task, ntasks;                   /* the schedule's task being run (a microbatch's forward or backward) */
  int task_bwd;                           /* the task is a backward */
  int64_t slots;                          /* microbatches whose activations a stage holds at once */
  int32_t pp_in;                          /* the activation received from the previous stage (a forward) */
  int32_t ps_h[PP_SENDS], ps_b[PP_SENDS]; /* sends to a neighbour stage in flight and their buffers */
  int nps;                                /* of which in use: 2 (1F1B), or a ring of more (interleaved) */
  int64_t nsent;                          /* sends posted (interleaved: the ring's position) */
  /* The attention plan's ops for this rank, recorded as the first streams take them (a prefix of
   * the one sequence every fresh iterator of p->attn at map.local yields): later layers and
   * microbatches read them here instead of regenerating them (workload_stream.c). */
  struct {
    bs_op *op;
    int64_t n, cap;
    int done;         /* op[0 .. n) is the whole sequence */
    int off;          /* not recording (bs_plan_set_op_cache off, or past WL_OP_CACHE_MAX ops) */
    bs_plan_iter *in; /* the iterator that recorded op[0 .. n), standing at n (or NULL) */
  } rec;
  /* The same sequence whole, recorded once for every iterator of the plan (op_share.c; NULL: not
   * shared, rec above instead): shn ops. */
  const bs_op *shop;
  int64_t shn;
  attn_stream as; /* last: its tables are large, the fields above read at every op */
} bs_wl;
/* Index of the current layer's saved buffers: [chunk][slot][layer], the slot of the microbatch. */
static inline int64_t slot_layer(const bs_wl *w) {
  return ((int64_t)w->chunk * w->slots + w->mb % w->slots) * w->L + w->layer;
}

/* Parameter sets besides the layers: the embedding, and the final norm with the LM head. */
static inline int64_t head_set(const bs_wl *w) { return w->pc.head + w->pc.final_norm; }

/* The buffer ids a layer or model plan p needs (workload.c): layers per chunk, chunk-microbatches
 * a stage holds at once, ids. 0, or -1 when they pass INT32_MAX. */
int wl_buf_ids(const bs_plan *p, int64_t *per, int64_t *inflight, int64_t *ids);

/* workload_layer.c: ids and ops */
int32_t wl_take(uint64_t *bits, int n, bs_plan_iter *it);
void wl_give(uint64_t *bits, int32_t i);
int32_t w_alloc(bs_wl *w, int64_t bytes, bs_mem_class cls);
void w_free(bs_wl *w, int32_t *id);
void w_linear8(bs_wl *w, int64_t m, int64_t n, int64_t k, int bwd, int fp8, const char *what);
void w_linear(bs_wl *w, int64_t m, int64_t n, int64_t k, int bwd, const char *what);
int wl_fp8_proj(const bs_wl *w);
int wl_fp8_mlp(const bs_wl *w);
void w_ew(bs_wl *w, int64_t elems, double flops_per_elem, const char *what);
int32_t w_coll(bs_wl *w, bs_coll_kind kind, bs_group g, int64_t bytes);
void w_wait(bs_wl *w, int32_t *h);
void w_sync_coll(bs_wl *w, bs_coll_kind kind, bs_group g, int64_t bytes);

/* workload_layer.c: pieces of a layer */
void wl_tp_reduce(bs_wl *w);
int32_t wl_tp_gather(bs_wl *w);
int64_t wl_saved_bytes(const bs_wl *w);
int64_t wl_gemm_in_bytes(const bs_wl *w, int fp8);
void wl_layer_pre(bs_wl *w);
void wl_layer_qkv(bs_wl *w);
void wl_layer_post(bs_wl *w);
int32_t wl_mlp_fwd(bs_wl *w, int64_t F);
int32_t wl_mlp_bwd(bs_wl *w, int64_t F);
void wl_layer_mlp_bwd(bs_wl *w);
void wl_layer_o_bwd(bs_wl *w);
void wl_layer_qkv_bwd(bs_wl *w);

/* workload_moe.c: the mixture-of-experts block */
void wl_moe_groups(bs_wl *w, int rank);
int64_t wl_moe_saved_bytes(const bs_wl *w);
void wl_moe_fwd(bs_wl *w);
void wl_moe_bwd(bs_wl *w);
void wl_moe_grad_reduce(bs_wl *w);
void wl_moe_opt_gather(bs_wl *w, int64_t layers);

/* workload_mla.c: multi-head latent attention's down- and up-projections (model.attention = mla) */
int64_t wl_mla_proj_params(const bs_model *m, int64_t g);
int64_t wl_mla_norm_params(const bs_model *m);
int64_t wl_mla_saved_bytes(const bs_wl *w);
void wl_mla_qkv(bs_wl *w);
void wl_mla_qkv_bwd(bs_wl *w);

/* workload_kernels.c: the memory-bound kernels, one op per launch */
void wk_pass(bs_wl *w, int64_t bytes, double flops, const char *what);
void wk_rmsnorm(bs_wl *w, const char *what);
void wk_rmsnorm_bwd(bs_wl *w, const char *what);
void wk_residual(bs_wl *w, const char *what);
void wk_rope(bs_wl *w, int bwd);
void wk_swiglu(bs_wl *w, int64_t F, int bwd);
void wk_cross_entropy(bs_wl *w);
void wk_cross_entropy_bwd(bs_wl *w);
void wk_embedding_bwd(bs_wl *w);
void wk_optimizer(bs_wl *w, int64_t n, int64_t gbuf);
void wk_fp8_casts(bs_wl *w, int64_t m, int64_t n, int64_t k, int bwd);
/* workload_stream.c: the attention stream */
int wl_stream_start(bs_wl *w, int replay, const int32_t *saved, const int *saved_seq, int nsaved);
void wl_stream_stop(bs_wl *w);
int wl_stream_pull(bs_wl *w);
void wl_stream_fwd_end(bs_wl *w);
void wl_stream_drop_kv(bs_wl *w);
void wl_stream_free_all(bs_wl *w, int keep_kv);

/* workload_zero.c: ZeRO, gradients, the optimizer step */
void wl_zero3_acquire(bs_wl *w);
void wl_zero3_release(bs_wl *w);
void wl_grad_reduce(bs_wl *w, int64_t set, int32_t *bucket);
void wl_grad_bucket(bs_wl *w, int64_t set, int32_t *bucket);
void wl_stage_opt(bs_wl *w);
void wl_kv_replica_reduce(bs_wl *w);

/* workload_amax.c: Transformer Engine's FP8 amax reduction */
void wl_amax_init(bs_wl *w, int rank);
void wl_amax_gemm(bs_wl *w);
void wl_amax_reduce(bs_wl *w, int bwd);

/* workload.c: the head's backward (a pipeline task may start with it) */
void wl_stage_head_bwd(bs_wl *w);

/* workload_pipe.c: the schedule's tasks */
void wl_task_start(bs_wl *w);
void wl_task_end(bs_wl *w);

#endif
