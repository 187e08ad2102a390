/*
 * workload.c — layer and model scope: the transformer around a method's
 * attention, as GEMM / ELEMWISE / COLL ops, composed with the method's own
 * attention plan so that the executors run it unchanged.
 *
 * Composition: every layer streams the ops of a fresh iterator of the
 * attention plan (p->attn), mapping its buffer and handle ids into this
 * plan's larger id space and dropping its PHASE marks. Its Q, K, V, O, lse
 * and kept head-sharded copies become the layer's saved activations; its
 * comm buffers and workspaces are freed when the forward ends. The backward
 * of layer l replays a fresh iterator's forward without emitting it (only to
 * learn its ids, mapping the saved buffers back) and streams its backward.
 * With full recompute (workload.recompute = full) the layer's forward is
 * streamed again instead. Selective recompute (Korthikanti et al. 2022,
 * arXiv 2205.05198, section 4.2) recomputes the attention core only: the
 * layer keeps its non-attention activations and the core's inputs and output
 * (Q, K, V, O, which the QKV and output projections need anyway) and drops
 * what the core alone needs (lse, a method's head-sharded copies); the
 * backward streams the attention's forward again, emitted this time, around
 * the kept buffers (no QKV projection), and goes on into its backward. The
 * paper's recomputed part is the 5as/h term of sbh(34 + 5as/h): the score,
 * softmax and dropout tensors, which FlashAttention-style kernels never keep
 * here, so selective saves lse and the copies and costs one attention forward
 * (4bs^2h FLOPs per layer without a causal mask). A forward-only
 * plan keeps every layer's K and V to its end (the KV cache; at prefill
 * workload.kv_cache = drop frees them as soon as the layer's attention is over).
 *
 * Parallelism outside attention: burst, ring, ring-li2021, ulysses, usp hold
 * N/G tokens and the full weights (local GEMMs); tp is Megatron tensor
 * parallelism: column-parallel QKV and gate/up, row-parallel output and down,
 * with an all-reduce after each row-parallel GEMM (v1) or all-gather before /
 * reduce-scatter after with sequence-parallel norms (v3), and the mirror in
 * the backward (Megatron-LM; Korthikanti et al. 2022 re-gather the sharded
 * input for the weight gradient, as done here). Gradients are reduced over
 * the data-parallel group, one set per layer, asynchronously, each waited
 * after the next layer's backward. ZeRO (Rajbhandari et al. 2020): stage 0
 * all-reduces gradients; 1 and 2 reduce-scatter them to the owner of the
 * optimizer shard and all-gather the updated weights after the step (stage 1
 * keeps the full gradient buffer, 2 a bucket per layer); 3 also shards the
 * weights and all-gathers each set before its use in the forward and in the
 * backward, one set ahead.
 *
 * This file: the parameter counts, the checks of a workload plan, the program
 * (embedding, layers, head, optimizer as stages of a state machine, one step
 * of ops at a time) and the scope's iterator. Its parts live beside it:
 * workload_layer.c emits the ops and the pieces of a layer, workload_stream.c
 * streams the attention plan into the layer, workload_zero.c reduces the
 * gradients and gathers ZeRO's weights, workload_pipe.c orders the tasks of
 * the pipeline schedule (workload_impl.h holds their shared state).
 */
#include <stdlib.h>
#include "base/checked.h"
#include "workload_impl.h"

/* ---------- parameter counts ---------- */

void bs_param_count_of(const bs_config *c, bs_param_count *pc) { bs_param_count_stage(c, 0, pc); }

/* bs_param_count_stage with c's rank grid given (a plan's, worked out at its creation). */
static void param_count(const bs_config *c, const bs_mesh *mesh, int stage, bs_param_count *pc) {
  memset(pc, 0, sizeof *pc);
  const bs_model *m = &c->model;
  int pp = mesh->size[BS_DIM_PP];
  int64_t L = m->layers / pp; /* the stage's layers (plan creation checks pp divides them) */
  int first = stage == 0, last = stage == pp - 1;
  int64_t g = mesh->size[BS_DIM_TP], H = m->hidden;
  pc->tp = g;
  pc->dp = (int64_t)mesh->size[BS_DIM_CP] * mesh->size[BS_DIM_DP]; /* the ranks holding the same weights */
  /* the K and V heads of a rank: kv_heads / g, or one replicated head when g > kv_heads */
  pc->qkv = H * (m->heads / g + 2 * plan_kv_heads_per_rank(m->kv_heads, g)) * m->head_dim;
  pc->o = m->heads * (m->v_head_dim > 0 ? m->v_head_dim : m->head_dim) * H / g; /* over v's columns */
  if (m->attention == BS_ATTENTION_MLA) pc->qkv = wl_mla_proj_params(m, g);     /* the latent's projections */
  /* MoE: the dense MLP's place is the shared experts' (0 without), beside the router and the experts */
  int64_t F = m->experts > 0 ? m->shared_experts * m->moe_ffn : m->ffn;
  pc->gate_up = 2 * H * F / g;
  pc->down = F * H / g;
  pc->norms = 2 * H + (m->attention == BS_ATTENTION_MLA ? wl_mla_norm_params(m) : 0);
  pc->edp = pc->dp;
  if (m->experts > 0) {
    int64_t ep = c->par.ep > 0 ? c->par.ep : 1;
    pc->router = H * m->experts;
    pc->experts = m->experts / ep * 3 * H * (m->moe_ffn / g);
    pc->edp = pc->dp / ep;
  }
  pc->layer = pc->qkv + pc->o + pc->gate_up + pc->down + pc->norms + pc->router;
  int64_t lx = pc->layer + pc->experts,
          lx_shard = bs_zero_shard(pc->layer, pc->dp) + bs_zero_shard(pc->experts, pc->edp);
  if (c->work.scope == BS_SCOPE_MODEL) {
    pc->embed = first ? m->vocab * H / g : 0;
    pc->head = last ? H * m->vocab / g : 0;
    pc->final_norm = last ? H : 0;
    pc->total = L * lx + pc->embed + pc->head + pc->final_norm;
    pc->shard_total =
      L * lx_shard + bs_zero_shard(pc->embed, pc->dp) + bs_zero_shard(pc->head + pc->final_norm, pc->dp);
  } else {
    pc->total = lx;
    pc->shard_total = lx_shard;
  }
}

void bs_param_count_stage(const bs_config *c, int stage, bs_param_count *pc) {
  bs_mesh mesh;
  if (bs_mesh_of(c, &mesh, NULL, 0)) memset(pc, 0, sizeof *pc);
  else param_count(c, &mesh, stage, pc);
}

/* Megatron's interleaved schedule (Narayanan et al. 2021, section 2.2.2): pp_chunks model chunks per
 * rank of layers / (pp x chunks) layers each; the microbatches go round the stages in groups of pp. */
static int pp_check_interleaved(const bs_plan *p, char *err, size_t errlen) {
  const bs_config *c = &p->cfg;
  int pp = p->mesh.size[BS_DIM_PP], v = c->par.pp_chunks;
  if (v < 1) {
    snprintf(err, errlen, "parallel.pp_chunks: %d model chunks per rank; at least 1", v);
    return -1;
  }
  if (pp < 2) {
    snprintf(err, errlen, "parallel.pp_schedule: interleaved needs pipeline stages (parallel.pp of 2 or more, not %d)",
             pp);
    return -1;
  }
  if (c->model.layers % ((int64_t)pp * v) != 0) {
    snprintf(err, errlen,
             "parallel.pp_chunks: pp = %d stages x %d chunks do not split model.layers (%lld) evenly (interleaved "
             "schedule)",
             pp, v, (long long)c->model.layers);
    return -1;
  }
  if (c->work.phase != BS_TRAIN) {
    snprintf(err, errlen,
             "parallel.pp_schedule: interleaved is a training schedule (phase %s runs one microbatch through the "
             "stages; use 1f1b)",
             bs_phase_name(c->work.phase));
    return -1;
  }
  if (p->mesh.microbatches % pp != 0) {
    snprintf(err, errlen,
             "parallel.pp_schedule: interleaved needs the microbatches per replica (%lld = batch / (dp x "
             "micro_batch)) to be a multiple of parallel.pp (%d)",
             (long long)p->mesh.microbatches, pp);
    return -1;
  }
  return 0;
}

static int plan_check_workload(const bs_plan *p, char *err, size_t errlen) {
  const bs_config *c = &p->cfg;
  const bs_model *m = &c->model;
  if (m->hidden < 1 || m->ffn < 1 || m->layers < 1 || (c->work.scope == BS_SCOPE_MODEL && m->vocab < 1)) {
    snprintf(err, errlen, "workload.scope: %s scope needs model.hidden, ffn, layers and vocab (set model.preset)",
             bs_scope_name(c->work.scope));
    return -1;
  }
  if (c->par.zero < 0 || c->par.zero > 3) {
    snprintf(err, errlen, "parallel.zero: %d is not 0, 1, 2 or 3", c->par.zero);
    return -1;
  }
  if (c->work.recompute < BS_RECOMPUTE_OFF || c->work.recompute > BS_RECOMPUTE_SELECTIVE) {
    snprintf(err, errlen, "workload.recompute: %d is not off (0), full (1) or selective (2)", c->work.recompute);
    return -1;
  }
  if (c->work.recompute && c->work.phase != BS_TRAIN) {
    snprintf(err, errlen, "workload.recompute: recomputation needs phase train, not %s", bs_phase_name(c->work.phase));
    return -1;
  }
  if (c->work.kv_cache == BS_KV_DROP && c->work.phase != BS_PREFILL) {
    snprintf(err, errlen, "workload.kv_cache: drop needs phase prefill, not %s", bs_phase_name(c->work.phase));
    return -1;
  }
  int tp = p->mesh.size[BS_DIM_TP];
  if (m->ffn % tp != 0 || m->hidden % tp != 0 || (c->work.scope == BS_SCOPE_MODEL && m->vocab % tp != 0)) {
    if (!p->composed) snprintf(err, errlen, "parallel.gpus: tp needs gpus (%d) to divide hidden, ffn and vocab", p->G);
    else snprintf(err, errlen, "parallel.tp: %d must divide model.hidden, ffn and vocab", tp);
    return -1;
  }
  if (tp > 1 && c->par.tp_variant == 3 && p->composed && p->mesh.att_dim == BS_DIM_CP &&
      (p->mesh.micro_batch * ((p->N - p->Nc) / p->mesh.size[BS_DIM_CP])) % tp != 0) {
    snprintf(err, errlen,
             "parallel.tp: sequence parallelism (tp_variant v3) splits a rank's %lld tokens over tp = %d ranks",
             (long long)(p->mesh.micro_batch * ((p->N - p->Nc) / p->mesh.size[BS_DIM_CP])), tp);
    return -1;
  }
  bs_group gg;
  if (c->work.phase == BS_TRAIN && plan_grad_group(p, 0, &gg)) {
    char o[32];
    bs_order_string(c->par.order, o, sizeof o);
    snprintf(err, errlen,
             "parallel.order: cp and dp must be neighbours in the order (the ranks holding the same weights, dp x "
             "cp, form one strided group), not in %s",
             o);
    return -1;
  }
  if (m->fp8 < BS_FP8_OFF || m->fp8 > BS_FP8_ALL) {
    snprintf(err, errlen, "model.fp8: unknown value %d", (int)m->fp8);
    return -1;
  }
  if (m->fp8 != BS_FP8_OFF && c->work.phase != BS_TRAIN && c->par.zero >= 3) {
    snprintf(err, errlen, "model.fp8: FP8 weights with ZeRO-3 gathers are not modelled (inference holds them whole)");
    return -1;
  }
  if (p->mesh.microbatches > 1 && c->work.phase != BS_TRAIN) {
    snprintf(err, errlen,
             "parallel.micro_batch: %lld microbatches per replica need phase train (inference runs the replica's "
             "batch at once; leave micro_batch out)",
             (long long)p->mesh.microbatches);
    return -1;
  }
  int pp = p->mesh.size[BS_DIM_PP];
  if (pp > 1 && m->layers % pp != 0) {
    snprintf(err, errlen, "parallel.pp: %d stages do not split model.layers (%lld) evenly", pp, (long long)m->layers);
    return -1;
  }
  if (pp > 1 && c->par.zero >= 2) {
    snprintf(err, errlen,
             "parallel.zero: stage %d with pipeline stages is not modelled (DeepSpeed's pipeline engine refuses ZeRO "
             "2 and 3; Megatron's distributed optimizer is ZeRO-1)%s",
             c->par.zero,
             c->work.framework_applied & BS_FW_KEY_ZERO
               ? "; workload.framework = torchtitan chose it for FSDP2: give parallel.zero (1: sharded optimizer only)"
               : "");
    return -1;
  }
  if (c->par.pp_schedule == BS_PP_INTERLEAVED && pp_check_interleaved(p, err, errlen)) return -1;
  int64_t per, inflight, ids;
  if (wl_buf_ids(p, &per, &inflight, &ids)) {
    snprintf(err, errlen,
             "model.layers: %lld layers per stage with %lld microbatches in flight need more buffer ids than a plan "
             "numbers (%d)",
             (long long)per, (long long)inflight, INT32_MAX);
    return -1;
  }
  return 0;
}

/*
 * The buffer ids a layer or model plan needs at once, from its schedule. A stage keeps, for every
 * layer of a chunk and every chunk-microbatch in flight (1F1B: up to pp microbatches; interleaved:
 * the warm-up of stage 0, 2 (pp - 1) + (v - 1) pp + 1, as Narayanan et al. 2021 schedule it), the
 * attention's saved buffers (SAVE_MAX) and the layer's other activations (one), and per
 * microbatch in flight at most one head's logits: (SAVE_MAX + 2) ids a layer-microbatch, with
 * room to spare. Besides: the ids live inside one attention call (BS_PLAN_MAX_BUFS), the
 * pipeline sends in flight (PP_SENDS) and WL_FIXED_IDS for the persistent and per-step buffers
 * (weights, gradients, Adam states, gradient buckets, ZeRO-3 sets, temporaries, the expert
 * buffers of a MoE block). Never fewer than BS_WL_MAX_BUFS (the bound every layer and model plan
 * had before it was sized; executors' tables for those plans keep it). 0, or -1 when the count
 * passes INT32_MAX (ids are int32_t).
 */
#define WL_FIXED_IDS 64
int wl_buf_ids(const bs_plan *p, int64_t *per, int64_t *inflight, int64_t *ids) {
  const bs_config *c = &p->cfg;
  int64_t pp = p->mesh.size[BS_DIM_PP], mb = p->mesh.microbatches, train = c->work.phase == BS_TRAIN;
  *inflight = train ? (mb < pp ? mb : pp) : 1;
  *per = c->model.layers / pp; /* layers whose activations one microbatch in flight holds */
  if (c->par.pp_schedule == BS_PP_INTERLEAVED && c->par.pp_chunks > 0) {
    int64_t v = c->par.pp_chunks, mv, warm, f[2] = {mb, v};
    if (bs_mul_checked(f, 2, INT32_MAX, &mv)) mv = INT32_MAX;
    warm = 2 * (pp - 1) + (v - 1) * pp + 1;
    *per = c->model.layers / (pp * v);
    *inflight = train ? (mv < warm ? mv : warm) : 1; /* chunk-microbatches held by stage 0 */
  }
  int64_t f[3] = {SAVE_MAX + 2, *per, *inflight}, held;
  if (bs_mul_checked(f, 3, INT32_MAX, &held) || held > INT32_MAX - 64 - BS_PLAN_MAX_BUFS - PP_SENDS - WL_FIXED_IDS) {
    *ids = INT32_MAX;
    return -1;
  }
  int64_t n = BS_PLAN_MAX_BUFS + PP_SENDS + WL_FIXED_IDS + held;
  n = (n + 63) / 64 * 64; /* whole words of the id bit set */
  *ids = n > BS_WL_MAX_BUFS ? n : BS_WL_MAX_BUFS;
  return 0;
}

/* ---------- the program ---------- */

/* Inference with FP8 GEMMs holds their weights in FP8 (one byte; Meta serves Llama 3 405B so):
 * the bytes of this rank's weights. Training keeps them in the storage type (master weights and
 * optimizer as without FP8; the FP8 copies are transient). */
static int64_t weight_bytes(const bs_wl *w, int64_t params) {
  if (w->train) return params * w->es;
  int64_t f8 = w->L * ((wl_fp8_proj(w) ? w->pc.qkv + w->pc.o : 0) +
                       (wl_fp8_mlp(w) ? w->pc.gate_up + w->pc.down + w->pc.experts : 0));
  return (params - f8) * w->es + f8;
}

static void stage_init(bs_wl *w) {
  int64_t psi = w->pc.total, sh = w->pc.shard_total, dp = w->pc.dp;
  int z = w->zero;
  w->w_all = w_alloc(w, z >= 3 && dp > 1 ? sh * w->es : weight_bytes(w, psi), BS_MEM_WEIGHTS);
  if (w->train) {
    w->g_all = w_alloc(w, (z >= 2 && dp > 1 ? sh : psi) * w->gb, BS_MEM_GRADS);
    for (int j = 0; j < w->nopt; j++) w->opt[j] = w_alloc(w, (z >= 1 && dp > 1 ? sh : psi) * 4, BS_MEM_OPTIMIZER);
  }
}

static void stage_embed(bs_wl *w) {
  wl_zero3_acquire(w);
  w_ew(w, w->T * w->H, 0, "embedding lookup"); /* vocab-parallel under tp, then reduced */
  wl_tp_reduce(w);
  wl_zero3_release(w);
}

/* The LM head and the loss (workload.cross_entropy, config.h). Training keeps, from the loss to the
 * head's backward, the fp32 softmax (fp32: the 16-bit logits live until the cast is done) or the
 * 16-bit logits themselves (fused, or logits already in fp32: .float() returns them unchanged).
 * Inference holds the logits as fp32 scores for the sampling, freed at once. */
static int xent_copy(const bs_wl *w) { return w->train && w->xent == BS_CE_UNFUSED && w->es != 4; }

static void stage_head(bs_wl *w) {
  wl_zero3_acquire(w);
  int64_t v = w->V / w->g;
  wk_rmsnorm(w, "final RMSNorm");
  int32_t gb = wl_tp_gather(w);
  int32_t *lg = &w->logits[w->mb % w->slots];
  *lg = w_alloc(w, w->T * v * (w->train ? w->es : 4), BS_MEM_LOGITS);
  w_linear(w, w->T, v, w->H, 0, "LM head");
  w_free(w, &gb);
  if (xent_copy(w)) { /* vocab_parallel_cross_entropy's .float(): the copy it keeps */
    int32_t l16 = *lg;
    *lg = w_alloc(w, w->T * v * 4, BS_MEM_LOGITS);
    wk_cross_entropy(w);
    w_free(w, &l16);
  } else if (w->train) {
    wk_cross_entropy(w);
  } else {
    w_ew(w, w->T * v, 5, "sampling"); /* the next token from the logits */
  }
  if (!w->train) w_free(w, lg);
  wl_zero3_release(w);
}

void wl_stage_head_bwd(bs_wl *w) {
  wl_zero3_acquire(w);
  wl_grad_bucket(w, head_set(w), &w->ehb);
  int64_t v = w->V / w->g;
  int32_t *lg = &w->logits[w->mb % w->slots];
  wk_cross_entropy_bwd(w); /* in place in the kept buffer */
  if (xent_copy(w)) {      /* autograd casts the fp32 gradient to the logits' 16-bit type */
    int32_t g16 = w_alloc(w, w->T * v * w->es, BS_MEM_LOGITS);
    w_free(w, lg);
    *lg = g16;
  }
  int32_t gx = wl_tp_gather(w);
  w_linear(w, w->T, v, w->H, 1, "LM head backward");
  w_free(w, &gx);
  w_free(w, lg);
  wl_tp_reduce(w);
  wk_rmsnorm_bwd(w, "final RMSNorm backward");
  wl_zero3_release(w);
  wl_grad_reduce(w, head_set(w), &w->ehb);
}

static void stage_embed_bwd(bs_wl *w) {
  wl_zero3_acquire(w);
  wl_grad_bucket(w, w->pc.embed, &w->ehb);
  wk_embedding_bwd(w);
  wl_zero3_release(w);
  wl_grad_reduce(w, w->pc.embed, &w->ehb);
  w_wait(w, &w->gh);
  w_wait(w, &w->geh);
  w_free(w, &w->gbuck);
}

static void stage_fini(bs_wl *w) {
  for (int64_t l = 0; l < w->v * w->slots * w->L; l++) {
    for (int j = 0; j < w->nsaved[l]; j++) w_free(w, &w->saved[l * SAVE_MAX + j]);
    w->nsaved[l] = 0;
    w_free(w, &w->act[l]);
  }
  w_free(w, &w->dx);
  for (int j = 0; j < 3; j++) w_free(w, &w->opt[j]);
  w_free(w, &w->g_all);
  w_free(w, &w->w_all);
}

/* One step of a layer's forward (the forward pass, or its recomputation in the
 * backward when `again`). Returns 1 when the forward is over. */
static int layer_fwd_step(bs_wl *w, int again) {
  int keep = w->train && w->recompute != BS_RECOMPUTE_FULL;
  int64_t l = slot_layer(w);
  if (w->fsub == 0) {
    if (!again) wl_zero3_acquire(w);
    if (w->train) /* recompute keeps the layer input only */
      w->act[l] = w_alloc(w, keep || again ? wl_saved_bytes(w) : w->Tn * w->H * w->es, BS_MEM_ACTIVATIONS);
    if (!keep && !again) w->tmp = w_alloc(w, wl_saved_bytes(w), BS_MEM_WORKSPACE);
    wl_layer_pre(w);
    if (wl_stream_start(w, 0, NULL, NULL, 0)) return 1;
    w->fsub = 1;
    return 0;
  }
  int ev = wl_stream_pull(w);
  if (ev == EV_HOOK) wl_layer_qkv(w);
  if (ev != EV_FWD_END && ev != EV_END) return 0;
  if (again) { /* the attention iterator goes on into its backward */
    wl_layer_post(w);
    return 1;
  }
  if (keep) {
    wl_stream_fwd_end(w);
  } else if (!w->train) {
    while (wl_stream_pull(w) != EV_END) {
    } /* a forward-only plan's last FREEs */
  }
  int cache = !w->train && !w->drop_kv;
  if (w->drop_kv) wl_stream_drop_kv(w);
  wl_layer_post(w);
  wl_stream_free_all(w, cache); /* train: what is left is not kept; inference: the KV cache stays unless dropped */
  wl_stream_stop(w);
  w_free(w, &w->tmp);
  wl_zero3_release(w);
  return 1;
}

/* One step of layer l's backward. Returns 1 when done. */
static int layer_bwd_step(bs_wl *w) {
  int64_t l = slot_layer(w);
  switch (w->sub) {
  case 0:
    wl_zero3_acquire(w);
    wl_grad_bucket(w, w->pc.layer, &w->gnew);
    if (w->recompute == BS_RECOMPUTE_FULL) {
      w_free(w, &w->act[l]); /* the checkpoint gives way to the full set */
      w->fsub = 0;
      w->sub = 2;
      return 0;
    }
    wl_layer_mlp_bwd(w);
    /* selective: the attention core's forward runs again from the kept Q, K, V (and O) */
    if (wl_stream_start(w, w->recompute == BS_RECOMPUTE_SELECTIVE ? 2 : 1, &w->saved[l * SAVE_MAX],
                        &w->saved_seq[l * SAVE_MAX], w->nsaved[l]))
      return 1;
    w->sub = 1;
    return 0;
  case 1: {
    int ev = wl_stream_pull(w);
    if (ev == EV_HOOK) wl_layer_o_bwd(w);
    if (ev != EV_END) return 0;
    wl_layer_qkv_bwd(w);
    wl_stream_free_all(w, 0); /* the kept buffers included: they are the stream's again */
    wl_stream_stop(w);
    w->nsaved[l] = 0;
    w_free(w, &w->act[l]);
    wl_zero3_release(w);
    wl_grad_reduce(w, w->pc.layer, &w->gnew);
    wl_moe_grad_reduce(w);
    return 1;
  }
  default: /* recompute: stream the forward again, then on into the backward */
    if (layer_fwd_step(w, 1)) {
      wl_layer_mlp_bwd(w);
      w->sub = 1;
    }
    return 0;
  }
}

static void gen_step(bs_wl *w) {
  switch (w->stage) {
  case S_INIT:
    plan_phase(w->it, 0, 1);
    stage_init(w);
    w->task = 0;
    w->stage = S_TASK;
    return;
  case S_TASK: wl_task_start(w); return;
  case S_EMBED:
    stage_embed(w);
    w->stage = S_LFWD;
    return;
  case S_LFWD:
    if (layer_fwd_step(w, 0)) {
      w->fsub = 0;
      if (++w->layer == w->L) {
        wl_amax_reduce(w, 0);
        w->stage = w->t_head ? S_HEAD : S_TASK_END;
      }
    }
    return;
  case S_HEAD:
    stage_head(w);
    w->stage = S_TASK_END;
    return;
  case S_LBWD:
    if (layer_bwd_step(w)) {
      w->sub = 0;
      if (w->layer-- == 0) {
        wl_amax_reduce(w, 1);
        w->stage = w->t_embed ? S_EMBED_BWD : S_TASK_END;
      }
    }
    return;
  case S_EMBED_BWD:
    stage_embed_bwd(w);
    w->stage = S_TASK_END;
    return;
  case S_TASK_END: wl_task_end(w); return;
  case S_OPT:
    w_wait(w, &w->gh);
    w_wait(w, &w->geh);
    w_free(w, &w->gbuck);
    wl_kv_replica_reduce(w); /* more tp ranks than KV heads: the replicated Wk, Wv gradients */
    plan_phase(w->it, 1, 0);
    wl_stage_opt(w); /* layer scope: the step of that layer's parameters */
    w->stage = S_FINI;
    return;
  case S_FINI:
    if (!w->train) plan_phase(w->it, 0, 0);
    stage_fini(w);
    w->stage = S_DONE;
    return;
  default: return;
  }
}

static int plan_gen_workload(bs_plan_iter *it) {
  bs_wl *w = it->wl;
  while (w->stage != S_DONE && !it->err) {
    int before = it->qn;
    gen_step(w);
    if (it->qn > before) return 1;
  }
  return 0;
}

static void plan_wl_free(void *v);

static void *plan_wl_new(bs_plan_iter *it) {
  const bs_plan *p = it->p;
  const bs_config *c = &p->cfg;
  bs_wl *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->it = it;
  w->p = p;
  w->model = c->work.scope == BS_SCOPE_MODEL;
  w->pp = p->mesh.size[BS_DIM_PP];
  w->pstage = bs_mesh_coord(&p->mesh, it->rank, BS_DIM_PP);
  w->prev = it->rank - p->mesh.stride[BS_DIM_PP];
  w->next = it->rank + p->mesh.stride[BS_DIM_PP];
  w->first = it->rank - w->pstage * p->mesh.stride[BS_DIM_PP];
  w->last = w->first + (w->pp - 1) * p->mesh.stride[BS_DIM_PP];
  w->has_embed = w->model && w->pstage == 0;
  w->has_head = w->model && w->pstage == w->pp - 1;
  w->v = w->model && c->par.pp_schedule == BS_PP_INTERLEAVED ? c->par.pp_chunks : 1;
  w->L = w->model ? c->model.layers / (w->pp * w->v) : 1; /* layers of one chunk */
  w->nmb = p->mesh.microbatches;
  w->train = c->work.phase == BS_TRAIN;
  w->ntasks = (w->train ? 2 * w->nmb : w->nmb) * w->v;
  /* microbatches a chunk holds at once: 1F1B up to pp; interleaved, every one (indexed by microbatch) */
  w->slots = w->train ? (w->v > 1 ? w->nmb : w->nmb < w->pp ? w->nmb : w->pp) : 1;
  int64_t nl = w->v * w->slots * w->L;
  w->saved = malloc(sizeof *w->saved * (size_t)(nl * SAVE_MAX));
  w->saved_seq = malloc(sizeof *w->saved_seq * (size_t)(nl * SAVE_MAX));
  w->nsaved = calloc((size_t)nl, sizeof *w->nsaved);
  w->act = malloc(sizeof *w->act * (size_t)nl);
  w->logits = malloc(sizeof *w->logits * (size_t)w->slots);
  int64_t per, inflight, ids;
  w->nbufs = wl_buf_ids(p, &per, &inflight, &ids) ? 0 : (int32_t)ids; /* refused at creation otherwise */
  w->bufs = calloc((size_t)w->nbufs / 64 + 1, sizeof *w->bufs);
  w->rec.off = p->no_op_cache;
  if (!w->saved || !w->saved_seq || !w->nsaved || !w->act || !w->logits || !w->bufs) {
    plan_wl_free(w);
    return NULL;
  }
  for (int64_t i = 0; i < nl * SAVE_MAX; i++) w->saved[i] = -1;
  for (int64_t i = 0; i < nl; i++) w->act[i] = -1;
  w->recompute = w->train ? c->work.recompute : BS_RECOMPUTE_OFF;
  w->drop_kv = c->work.phase == BS_PREFILL && c->work.kv_cache == BS_KV_DROP;
  w->zero = c->par.zero;
  w->tp = p->mesh.size[BS_DIM_TP] > 1;
  w->v3 = w->tp && c->par.tp_variant == 3;
  param_count(c, &p->mesh, w->pstage, &w->pc);
  w->g = w->pc.tp;
  plan_map_of(p, it->rank, &w->map);
  if (!p->no_op_share) w->shop = plan_op_share_get(p, w->map.local, &w->shn);
  w->mbs = p->mesh.micro_batch;
  w->es = p->es;
  w->gb = c->model.main_grads == BS_GRADS_FP32 ? 4 : 2;
  w->nopt = c->model.master_weights == BS_MASTER_FP32 ? 3 : 2;
  w->xent = c->work.cross_entropy;
  w->H = c->model.hidden;
  w->F = c->model.ffn;
  w->V = c->model.vocab;
  /* the QKV projection's width over the tp group: g x a rank's (a replicated KV head counted per rank) */
  w->qkvw = (p->Zq + 2 * plan_kv_heads_per_rank(p->Zkv, w->g) * w->g) * p->d;
  int A = p->mesh.size[p->mesh.att_dim];    /* the attention group's ranks */
  if (p->decode) w->T = w->mbs * p->nq_dec; /* the new tokens, on every rank */
  else if (p->mesh.att_dim == BS_DIM_TP) w->T = w->mbs * p->N;
  else w->T = w->mbs * ((p->N - p->Nc) / A); /* a cached prefix (prefill): its K, V only, in the attention's */
  w->Tn = w->v3 ? w->T / w->g : w->T;
  w->tpg = plan_mesh_group(p, it->rank, BS_DIM_TP);
  if (plan_grad_group(p, it->rank, &w->dpg)) w->dpg = (bs_group){it->rank, 1, 1}; /* refused at creation (train) */
  w->moe = c->model.experts > 0;
  w->mla = c->model.attention == BS_ATTENTION_MLA;
  if (w->moe) wl_moe_groups(w, it->rank);
  wl_amax_init(w, it->rank);
  w->grad_sync = !bs_framework_grad_overlap(c->work.framework, w->zero);
  w->w_all = w->g_all = w->opt[0] = w->opt[1] = w->opt[2] = -1;
  for (int64_t i = 0; i < w->slots; i++) w->logits[i] = -1;
  w->tmp = w->dx = w->gh = w->gbuck = w->gnew = w->ehb = w->geh = -1;
  w->zb[0] = w->zb[1] = w->zh[0] = w->zh[1] = -1;
  w->pp_in = -1;
  for (int i = 0; i < PP_SENDS; i++) w->ps_h[i] = w->ps_b[i] = -1;
  w->nps = w->v > 1 ? PP_SENDS : 2;
  return w;
}

static void plan_wl_free(void *v) {
  bs_wl *w = v;
  if (!w) return;
  bs_plan_iter_free(w->as.in);
  free(w->saved);
  free(w->saved_seq);
  free(w->nsaved);
  free(w->act);
  free(w->logits);
  free(w->bufs);
  free(w->rec.op);
  bs_plan_iter_free(w->rec.in);
  free(w);
}

const plan_scope plan_scope_workload = {plan_check_workload, plan_wl_new, plan_wl_free, plan_gen_workload};
