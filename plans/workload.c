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
 */
#include <stdlib.h>
#include "plan_impl.h"
#include "workload.h"

/* ---------- parameter counts ---------- */

void bs_param_count_of(const bs_config *c, bs_param_count *pc) { bs_param_count_stage(c, 0, pc); }

void bs_param_count_stage(const bs_config *c, int stage, bs_param_count *pc) {
  memset(pc, 0, sizeof *pc);
  const bs_model *m = &c->model;
  bs_mesh mesh;
  if (bs_mesh_of(c, &mesh, NULL, 0)) return;
  int pp = mesh.size[BS_DIM_PP];
  int64_t L = m->layers / pp; /* the stage's layers (plan creation checks pp divides them) */
  int first = stage == 0, last = stage == pp - 1;
  int64_t g = mesh.size[BS_DIM_TP], H = m->hidden;
  pc->tp = g;
  pc->dp = (int64_t)mesh.size[BS_DIM_CP] * mesh.size[BS_DIM_DP]; /* the ranks holding the same weights */
  pc->qkv = H * (m->heads + 2 * m->kv_heads) * m->head_dim / g;
  pc->o = m->heads * m->head_dim * H / g;
  pc->gate_up = 2 * H * m->ffn / g;
  pc->down = m->ffn * H / g;
  pc->norms = 2 * H;
  pc->layer = pc->qkv + pc->o + pc->gate_up + pc->down + pc->norms;
  if (c->work.scope == BS_SCOPE_MODEL) {
    pc->embed = first ? m->vocab * H / g : 0;
    pc->head = last ? H * m->vocab / g : 0;
    pc->final_norm = last ? H : 0;
    pc->total = L * pc->layer + pc->embed + pc->head + pc->final_norm;
    pc->shard_total = L * bs_zero_shard(pc->layer, pc->dp) + bs_zero_shard(pc->embed, pc->dp) +
                      bs_zero_shard(pc->head + pc->final_norm, pc->dp);
  } else {
    pc->total = pc->layer;
    pc->shard_total = bs_zero_shard(pc->layer, pc->dp);
  }
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
      (p->mesh.micro_batch * (p->N / p->mesh.size[BS_DIM_CP])) % tp != 0) {
    snprintf(err, errlen,
             "parallel.tp: sequence parallelism (tp_variant v3) splits a rank's %lld tokens over tp = %d ranks",
             (long long)(p->mesh.micro_batch * (p->N / p->mesh.size[BS_DIM_CP])), tp);
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
             "2 and 3; Megatron's distributed optimizer is ZeRO-1)",
             c->par.zero);
    return -1;
  }
  /* a stage keeps its layers' activations for every microbatch in flight (1F1B: up to pp) */
  int64_t inflight = c->work.phase == BS_TRAIN ? (p->mesh.microbatches < pp ? p->mesh.microbatches : pp) : 1;
  int64_t per = m->layers / pp; /* layers whose activations one microbatch in flight holds */
  if (c->par.pp_schedule == BS_PP_INTERLEAVED) {
    if (pp_check_interleaved(p, err, errlen)) return -1;
    int64_t v = c->par.pp_chunks, mv = p->mesh.microbatches * v, warm = 2 * (pp - 1) + (v - 1) * pp + 1;
    per = m->layers / (pp * v);
    inflight = c->work.phase == BS_TRAIN ? (mv < warm ? mv : warm) : 1; /* chunk-microbatches held by stage 0 */
  }
  if (per * inflight > (BS_WL_MAX_BUFS - 64) / 12) {
    snprintf(err, errlen,
             "model.layers: %lld layers per stage with %lld microbatches in flight exceed the plan's buffer ids (at "
             "most %d layers x microbatches)",
             (long long)per, (long long)inflight, (BS_WL_MAX_BUFS - 64) / 12);
    return -1;
  }
  return 0;
}

/* ---------- state ---------- */

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
  uint64_t bufs[BS_WL_MAX_BUFS / 64], hnds[BS_WL_MAX_HANDLES / 64];
  int stage, sub, fsub;
  int64_t layer, L;
  int model, train, recompute, zero, v3, tp;
  int drop_kv; /* prefill without a KV cache: each layer's K, V freed after its attention */
  int64_t T, Tn, H, F, V, qkvw, es, g;
  bs_param_count pc;
  bs_group dpg, tpg;
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
  plan_rank_map map;    /* where this rank's attention group sits (compose.c) */
  int64_t mb, nmb;      /* the microbatch being run, microbatches per step */
  int64_t mbs;          /* sequences per microbatch */
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
  attn_stream as;                         /* last: its tables are large, the fields above read at every op */
} bs_wl;

/* Index of the current layer's saved buffers: [chunk][slot][layer], the slot of the microbatch. */
static int64_t slot_layer(const bs_wl *w) {
  return ((int64_t)w->chunk * w->slots + w->mb % w->slots) * w->L + w->layer;
}

/* ---------- ids and ops ---------- */

static int32_t take(uint64_t *bits, int n, bs_plan_iter *it) {
  for (int w = 0; w < n / 64; w++)
    if (~bits[w]) {
      int i = __builtin_ctzll(~bits[w]);
      bits[w] |= (uint64_t)1 << i;
      return w * 64 + i;
    }
  it->err = 1;
  return 0;
}
static void give(uint64_t *bits, int32_t i) { bits[i / 64] &= ~((uint64_t)1 << (i % 64)); }

static int32_t w_alloc(bs_wl *w, int64_t bytes, bs_mem_class cls) {
  int32_t id = take(w->bufs, BS_WL_MAX_BUFS, w->it);
  bs_op *op = plan_push(w->it, BS_OP_ALLOC);
  op->u.alloc.buf = id;
  op->u.alloc.bytes = bytes;
  op->u.alloc.cls = cls;
  op->u.alloc.role = BS_ROLE_TMP;
  op->u.alloc.elem = w->p->elem;
  return id;
}

static void w_free(bs_wl *w, int32_t *id) {
  if (*id < 0) return;
  give(w->bufs, *id);
  plan_push(w->it, BS_OP_FREE)->u.free.buf = *id;
  *id = -1;
}

static bs_compute *w_gemm(bs_wl *w, int64_t m, int64_t n, int64_t k) {
  bs_compute *c = plan_compute(w->it, BS_K_GEMM);
  c->m = m;
  c->n = n;
  c->k = k;
  c->flops = 2.0 * (double)m * (double)n * (double)k;
  return c;
}

/* A forward GEMM [m x k] x [k x n], or its backward: dX = dY W^T and dW = X^T dY; fp8: all three
 * with FP8 operands (Transformer Engine runs the forward, data-gradient and weight-gradient GEMMs
 * of an FP8 layer in FP8). */
static void w_linear8(bs_wl *w, int64_t m, int64_t n, int64_t k, int bwd, int fp8, const char *what) {
  bs_compute *c[2] = {NULL, NULL};
  if (!bwd) {
    c[0] = w_gemm(w, m, n, k);
  } else {
    c[0] = w_gemm(w, m, k, n);
    c[1] = w_gemm(w, k, n, m);
  }
  for (int i = 0; i < 2 && c[i]; i++) {
    c[i]->fp8 = fp8;
    c[i]->label = what;
  }
}
static void w_linear(bs_wl *w, int64_t m, int64_t n, int64_t k, int bwd, const char *what) {
  w_linear8(w, m, n, k, bwd, 0, what);
}

/* model.fp8: the attention projections (all) and the MLP's GEMMs (ffn, all) in FP8. */
static int fp8_proj(const bs_wl *w) { return w->p->cfg.model.fp8 == BS_FP8_ALL; }
static int fp8_mlp(const bs_wl *w) { return w->p->cfg.model.fp8 != BS_FP8_OFF; }

static void w_ew(bs_wl *w, int64_t elems, double flops_per_elem, const char *what) {
  bs_compute *c = plan_compute(w->it, BS_K_ELEMWISE);
  c->label = what;
  c->ew = BS_EW_GENERIC;
  c->elems = elems;
  c->flops = flops_per_elem * (double)elems;
}

static int32_t w_coll(bs_wl *w, bs_coll_kind kind, bs_group g, int64_t bytes) {
  bs_op *op = plan_push(w->it, BS_OP_COLL);
  op->handle = take(w->hnds, BS_WL_MAX_HANDLES, w->it);
  op->u.coll.kind = kind;
  op->u.coll.red = BS_RED_SUM;
  op->u.coll.elem = w->p->elem;
  op->u.coll.group = g;
  op->u.coll.send = BS_NOREF;
  op->u.coll.recv = BS_NOREF;
  op->u.coll.bytes = bytes;
  return op->handle;
}

static void w_wait(bs_wl *w, int32_t *h) {
  if (*h < 0) return;
  bs_op *op = plan_push(w->it, BS_OP_WAIT);
  op->u.wait.n = 1;
  op->u.wait.handles[0] = *h;
  give(w->hnds, *h);
  *h = -1;
}

static void w_sync_coll(bs_wl *w, bs_coll_kind kind, bs_group g, int64_t bytes) {
  if (g.size <= 1) return;
  int32_t h = w_coll(w, kind, g, bytes);
  w_wait(w, &h);
}

/* ---------- the attention stream ---------- */

static bs_mem_class layer_class(const bs_op *a) {
  switch (a->u.alloc.role) {
  case BS_ROLE_Q:
  case BS_ROLE_K:
  case BS_ROLE_V:
  case BS_ROLE_O:
  case BS_ROLE_LSE: return BS_MEM_ACTIVATIONS;
  case BS_ROLE_DOUT:
  case BS_ROLE_DQ:
  case BS_ROLE_DK:
  case BS_ROLE_DV: return BS_MEM_WORKSPACE;
  default: return a->u.alloc.cls;
  }
}

/* Kept from forward to backward: the role buffers of the forward and the
 * method's own saved activations (ulysses' head-sharded copies). */
static int kept(const bs_op *a, int selective) {
  int r = (int)a->u.alloc.role;
  if (selective) return r == BS_ROLE_Q || r == BS_ROLE_K || r == BS_ROLE_V || r == BS_ROLE_O;
  return r != BS_ROLE_TMP || a->u.alloc.cls == BS_MEM_ACTIVATIONS;
}

/* replay: 0 streams a forward, 1 replays it silently (ids only), 2 emits it again around the kept buffers. */
static int stream_start(bs_wl *w, int replay, const int32_t *saved, const int *saved_seq, int nsaved) {
  attn_stream *s = &w->as;
  memset(s, 0, offsetof(attn_stream, held)); /* held and aop are written before they are read */
  for (int i = 0; i < BS_PLAN_MAX_BUFS; i++) s->bmap[i] = -1;
  for (int i = 0; i < BS_PLAN_MAX_HANDLES; i++) s->hmap[i] = -1;
  s->in = bs_plan_iter_new(w->p->attn, w->map.local);
  if (!s->in) {
    w->it->err = 1;
    return -1;
  }
  s->replay = replay == 1;
  s->rerun = s->skip_hook = replay == 2;
  s->saved = saved;
  s->saved_seq = saved_seq;
  s->nsaved = nsaved;
  return 0;
}

static void stream_stop(bs_wl *w) {
  if (w->as.in && bs_plan_iter_error(w->as.in)) w->it->err = 1;
  bs_plan_iter_free(w->as.in);
  w->as.in = NULL;
}

static bs_ref map_ref(const attn_stream *s, bs_ref r) {
  if (r.buf >= 0 && r.buf < BS_PLAN_MAX_BUFS) r.buf = s->bmap[r.buf];
  return r;
}

/* Emits an inner op with the outer plan's ids, straight into the outer queue. */
static void emit_inner(bs_wl *w, const bs_op *src) {
  attn_stream *s = &w->as;
  int32_t buf = -1;
  switch (src->kind) {
  case BS_OP_ALLOC: {
    int b = src->u.alloc.buf;
    if (src != &s->aop[b]) memcpy(&s->aop[b], src, bs_op_used_bytes(BS_OP_ALLOC)); /* replay_end passes it */
    s->seqof[b] = s->nalloc++;
    if (s->rerun)
      for (int j = 0; j < s->nsaved; j++)
        if (s->saved_seq[j] == s->seqof[b]) {
          s->bmap[b] = s->saved[j]; /* kept from the forward: no new allocation */
          return;
        }
    buf = s->bmap[b] = take(w->bufs, BS_WL_MAX_BUFS, w->it);
    break;
  }
  case BS_OP_FREE:
    buf = s->bmap[src->u.free.buf];
    if (buf < 0) return;
    give(w->bufs, buf);
    s->bmap[src->u.free.buf] = -1;
    break;
  case BS_OP_COMPUTE:
  case BS_OP_SEND:
  case BS_OP_RECV:
  case BS_OP_COLL:
  case BS_OP_WAIT: break;
  default: return;
  }
  bs_op *o = plan_push_copy(w->it, src);
  switch (src->kind) {
  case BS_OP_ALLOC:
    o->u.alloc.buf = buf;
    o->u.alloc.cls = layer_class(src);
    break;
  case BS_OP_FREE: o->u.free.buf = buf; break;
  case BS_OP_COMPUTE:
    for (int j = 0; j < BS_OP_IN; j++) o->u.compute.in[j] = map_ref(s, src->u.compute.in[j]);
    for (int j = 0; j < BS_OP_OUT; j++) o->u.compute.out[j] = map_ref(s, src->u.compute.out[j]);
    break;
  case BS_OP_SEND:
  case BS_OP_RECV:
    o->handle = s->hmap[src->handle] = take(w->hnds, BS_WL_MAX_HANDLES, w->it);
    o->u.p2p.buf = map_ref(s, src->u.p2p.buf);
    break;
  case BS_OP_COLL:
    o->handle = s->hmap[src->handle] = take(w->hnds, BS_WL_MAX_HANDLES, w->it);
    o->u.coll.send = map_ref(s, src->u.coll.send);
    o->u.coll.recv = map_ref(s, src->u.coll.recv);
    break;
  case BS_OP_WAIT:
    for (int j = 0; j < src->u.wait.n; j++) {
      o->u.wait.handles[j] = s->hmap[src->u.wait.handles[j]];
      give(w->hnds, o->u.wait.handles[j]);
      s->hmap[src->u.wait.handles[j]] = -1;
    }
    break;
  default: break;
  }
  plan_rank_map m = w->map;
  m.b0 += w->mb * w->mbs; /* this microbatch's sequences */
  plan_map_op(&m, o);
}

/* Replayed forward: learn the ids, emit nothing. */
static void replay_inner(bs_wl *w, const bs_op *src) {
  attn_stream *s = &w->as;
  if (src->kind == BS_OP_ALLOC) {
    int b = src->u.alloc.buf;
    int seq = s->nalloc++;
    memcpy(&s->aop[b], src, bs_op_used_bytes(BS_OP_ALLOC));
    s->bmap[b] = -2;
    for (int j = 0; j < s->nsaved; j++)
      if (s->saved_seq[j] == seq) s->bmap[b] = s->saved[j];
  } else if (src->kind == BS_OP_FREE) {
    s->bmap[src->u.free.buf] = -1;
  }
}

/* The replay reached the backward: re-create the buffers freed at forward end. */
static void replay_end(bs_wl *w) {
  attn_stream *s = &w->as;
  for (int b = 0; b < BS_PLAN_MAX_BUFS; b++)
    if (s->bmap[b] == -2) emit_inner(w, &s->aop[b]);
  s->replay = 0;
}

/* Streams inner ops until one was emitted or an event happened. */
static int stream_pull(bs_wl *w) {
  attn_stream *s = &w->as;
  for (;;) {
    const bs_op *op = &s->held;
    if (s->has_held) s->has_held = 0;
    else if (!(op = plan_next_ref(s->in))) return EV_END;
    if (op->kind == BS_OP_PHASE) {
      if (op->u.phase.begin) {
        if (op->u.phase.fwd_bwd == 1 && s->replay) replay_end(w);
        s->after_begin = 1;
        continue;
      }
      if (op->u.phase.fwd_bwd == 0) return EV_FWD_END;
      continue;
    }
    if (s->after_begin && op->kind != BS_OP_ALLOC) {
      s->after_begin = 0;
      if (s->skip_hook) {
        s->skip_hook = 0;
      } else if (!s->replay) {
        memcpy(&s->held, op, bs_op_used_bytes(op->kind));
        s->has_held = 1;
        return EV_HOOK;
      }
    }
    if (s->replay) {
      replay_inner(w, op);
      continue;
    }
    emit_inner(w, op);
    return EV_NONE;
  }
}

/* Forward end: free what is not kept; record what is (train without full recompute). */
static void stream_fwd_end(bs_wl *w) {
  const int keep = 1;
  attn_stream *s = &w->as;
  int64_t l = slot_layer(w);
  int n = 0;
  /* a replay of the forward recognises them by their allocation number */
  for (int b = 0; b < BS_PLAN_MAX_BUFS; b++) {
    if (s->bmap[b] < 0) continue;
    if (keep && kept(&s->aop[b], w->recompute == BS_RECOMPUTE_SELECTIVE) && n < SAVE_MAX) {
      w->saved_seq[l * SAVE_MAX + n] = s->seqof[b];
      w->saved[l * SAVE_MAX + n++] = s->bmap[b];
      s->bmap[b] = -1; /* the layer owns it now */
      continue;
    }
    int32_t id = s->bmap[b];
    w_free(w, &id);
    s->bmap[b] = -1;
  }
  if (keep) w->nsaved[l] = n;
}

/* Prefill without a KV cache: the layer's K and V go as soon as its attention is over. */
static void stream_drop_kv(bs_wl *w) {
  attn_stream *s = &w->as;
  for (int b = 0; b < BS_PLAN_MAX_BUFS; b++) {
    if (s->bmap[b] < 0) continue;
    int r = (int)s->aop[b].u.alloc.role;
    if (r != BS_ROLE_K && r != BS_ROLE_V) continue;
    int32_t id = s->bmap[b];
    w_free(w, &id);
    s->bmap[b] = -1;
  }
}

/* Frees every inner buffer still live (the role buffers at the end). */
static void stream_free_all(bs_wl *w, int keep_kv) {
  attn_stream *s = &w->as;
  int n = 0;
  for (int b = 0; b < BS_PLAN_MAX_BUFS; b++) {
    if (s->bmap[b] < 0) continue;
    int r = (int)s->aop[b].u.alloc.role;
    if (keep_kv && (r == BS_ROLE_K || r == BS_ROLE_V) && n < SAVE_MAX) {
      w->saved[slot_layer(w) * SAVE_MAX + n++] = s->bmap[b]; /* the KV cache stays */
      continue;
    }
    int32_t id = s->bmap[b];
    w_free(w, &id);
    s->bmap[b] = -1;
  }
  if (keep_kv) w->nsaved[slot_layer(w)] = n;
}

/* ---------- pieces of a layer ---------- */

/* ZeRO-3: weight sets in the order the program uses them, gathered one ahead. */
static int zero3_uses_mb(const bs_wl *w) { return (int)((w->model ? w->L + 2 : w->L) * (w->train ? 2 : 1)); }

static int64_t zero3_set(const bs_wl *w, int u) {
  int64_t L = w->L, n = w->model ? L + 2 : L;
  u %= zero3_uses_mb(w); /* every microbatch uses the sets again */
  int64_t k = u < n ? u : u - n, first = u < n ? w->pc.embed : w->pc.head + w->pc.final_norm;
  int64_t last = u < n ? w->pc.head + w->pc.final_norm : w->pc.embed;
  if (!w->model) return w->pc.layer;
  return k == 0 ? first : k == n - 1 ? last : w->pc.layer;
}
static int zero3_uses(const bs_wl *w) { return zero3_uses_mb(w) * (int)w->nmb; }

static void zero3_issue(bs_wl *w, int u) {
  int slot = u % 2;
  int64_t set = zero3_set(w, u), sh = bs_zero_shard(set, w->pc.dp);
  w->zb[slot] = w_alloc(w, sh * w->pc.dp * w->es, BS_MEM_WEIGHTS);
  w->zh[slot] = w_coll(w, BS_COLL_ALLGATHER, w->dpg, sh * w->es);
}

/* Before a weight set is used: its gather is waited, the next one posted. */
static void zero3_acquire(bs_wl *w) {
  if (w->zero < 3 || w->pc.dp <= 1) return;
  int u = w->zuse;
  if (u == 0) zero3_issue(w, 0);
  w_wait(w, &w->zh[u % 2]);
  if (u + 1 < zero3_uses(w)) zero3_issue(w, u + 1);
}

static void zero3_release(bs_wl *w) {
  if (w->zero < 3 || w->pc.dp <= 1) return;
  w_free(w, &w->zb[w->zuse % 2]);
  w->zuse++;
}

/* Tensor-parallel collectives: v1 after a row-parallel GEMM (all-reduce), v3
 * all-gather into the GEMM domain / reduce-scatter out of it. */
static void tp_reduce(bs_wl *w) {
  if (!w->tp) return;
  int64_t full = w->T * w->H * w->es;
  w_sync_coll(w, w->v3 ? BS_COLL_REDUCE_SCATTER : BS_COLL_ALLREDUCE, w->tpg, full);
}
static int32_t tp_gather(bs_wl *w) {
  if (!w->tp || !w->v3) return -1;
  int32_t b = w_alloc(w, w->T * w->H * w->es, BS_MEM_COMM);
  w_sync_coll(w, BS_COLL_ALLGATHER, w->tpg, w->Tn * w->H * w->es);
  return b;
}

/* Bytes of one layer's non-attention activations kept for the backward. */
static int64_t saved_bytes(const bs_wl *w) {
  int64_t Tg = w->v3 ? w->Tn : w->T; /* v3 keeps the sharded norm outputs and gathers again */
  /* layer input, norm1 output, residual after attention, norm2 output, gate and up, SwiGLU output */
  return (2 * w->Tn * w->H + 2 * Tg * w->H + w->T * 3 * (w->F / w->g)) * w->es;
}

/* Forward of the layer up to attention: norm, (gather), QKV projection comes at the hook. */
static void layer_pre(bs_wl *w) { w_ew(w, w->Tn * w->H, 4, "RMSNorm"); /* square, sum, scale, weight */ }

static void layer_qkv(bs_wl *w) {
  int32_t gb = tp_gather(w);
  w_linear8(w, w->T, w->qkvw / w->g, w->H, 0, fp8_proj(w), "QKV projection");
  w_free(w, &gb);
}

/* After attention: output projection, residual, norm, MLP, residual. */
static void layer_post(bs_wl *w) {
  int32_t t = w_alloc(w, w->T * w->H * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, w->H, w->p->Zq * w->p->d / w->g, 0, fp8_proj(w), "output projection");
  tp_reduce(w);
  w_ew(w, w->Tn * w->H, 1, "residual add");
  w_free(w, &t);
  w_ew(w, w->Tn * w->H, 4, "RMSNorm");
  int32_t gb = tp_gather(w);
  int32_t gu = w_alloc(w, w->T * 3 * w->F / w->g * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, 2 * w->F / w->g, w->H, 0, fp8_mlp(w), "MLP gate and up");
  w_free(w, &gb);
  w_ew(w, w->T * w->F / w->g, 5, "SwiGLU"); /* silu(gate) * up */
  t = w_alloc(w, w->T * w->H * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, w->H, w->F / w->g, 0, fp8_mlp(w), "MLP down");
  w_free(w, &gu);
  tp_reduce(w);
  w_ew(w, w->Tn * w->H, 1, "residual add");
  w_free(w, &t);
}

/* Backward of the MLP half and the second norm. */
static void layer_mlp_bwd(bs_wl *w) {
  int64_t f = w->F / w->g;
  int32_t gy = tp_gather(w); /* v3: grad of the reduce-scatter */
  int32_t gx = tp_gather(w); /* v3: norm2 output gathered again for dW */
  int32_t da = w_alloc(w, w->T * f * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, w->H, f, 1, fp8_mlp(w), "MLP down backward");
  w_free(w, &gy);
  int32_t dgu = w_alloc(w, w->T * 2 * f * w->es, BS_MEM_WORKSPACE);
  w_ew(w, w->T * f, 8, "SwiGLU backward");
  w_free(w, &da);
  int32_t dn = w_alloc(w, w->T * w->H * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, 2 * f, w->H, 1, fp8_mlp(w), "MLP gate and up backward");
  w_free(w, &gx);
  w_free(w, &dgu);
  tp_reduce(w);
  w_ew(w, w->Tn * w->H, 6, "RMSNorm backward");
  w_ew(w, w->Tn * w->H, 1, "residual gradient add");
  w_free(w, &dn);
}

/* Backward of the output projection (at the attention backward's hook: dO). */
static void layer_o_bwd(bs_wl *w) {
  int32_t gy = tp_gather(w);
  w_linear8(w, w->T, w->H, w->p->Zq * w->p->d / w->g, 1, fp8_proj(w), "output projection backward");
  w_free(w, &gy);
}

/* Backward of the QKV projection and the first norm. */
static void layer_qkv_bwd(bs_wl *w) {
  int32_t gx = tp_gather(w); /* v3: norm1 output gathered again for dW */
  int32_t dn = w_alloc(w, w->T * w->H * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, w->qkvw / w->g, w->H, 1, fp8_proj(w), "QKV projection backward");
  w_free(w, &gx);
  tp_reduce(w);
  w_ew(w, w->Tn * w->H, 6, "RMSNorm backward");
  w_ew(w, w->Tn * w->H, 1, "residual gradient add");
  w_free(w, &dn);
}

/* Gradient reduction of one parameter set over the data-parallel group:
 * posted now, waited after the next set's backward. */
static void grad_reduce(bs_wl *w, int64_t set, int32_t *bucket) {
  w_wait(w, &w->gh);
  w_free(w, &w->gbuck);
  w->gbuck = *bucket;
  *bucket = -1;
  /* gradients accumulate over the microbatches and are reduced in the last one's backward; stages 2
   * and 3 keep no full gradient, so they reduce every microbatch's */
  if (w->pc.dp <= 1 || (w->zero < 2 && w->mb + 1 < w->nmb)) return;
  int64_t sh = bs_zero_shard(set, w->pc.dp);
  if (w->zero == 0) w->gh = w_coll(w, BS_COLL_ALLREDUCE, w->dpg, sh * w->pc.dp * w->es);
  else w->gh = w_coll(w, BS_COLL_REDUCE_SCATTER, w->dpg, sh * w->pc.dp * w->es);
}

/* Stage 2 and 3 keep only the shard: each set's gradients live in a bucket until reduced. */
static void grad_bucket(bs_wl *w, int64_t set, int32_t *bucket) {
  if (w->zero >= 2 && w->pc.dp > 1) *bucket = w_alloc(w, bs_zero_shard(set, w->pc.dp) * w->pc.dp * w->es, BS_MEM_GRADS);
}

/* ---------- the program ---------- */

/* Parameter sets besides the layers: the embedding, and the final norm with the LM head. */
static int64_t head_set(const bs_wl *w) { return w->pc.head + w->pc.final_norm; }

/* Inference with FP8 GEMMs holds their weights in FP8 (one byte; Meta serves Llama 3 405B so):
 * the bytes of this rank's weights. Training keeps them in the storage type (master weights and
 * optimizer as without FP8; the FP8 copies are transient). */
static int64_t weight_bytes(const bs_wl *w, int64_t params) {
  if (w->train) return params * w->es;
  int64_t f8 = w->L * ((fp8_proj(w) ? w->pc.qkv + w->pc.o : 0) + (fp8_mlp(w) ? w->pc.gate_up + w->pc.down : 0));
  return (params - f8) * w->es + f8;
}

static void stage_init(bs_wl *w) {
  int64_t psi = w->pc.total, sh = w->pc.shard_total, dp = w->pc.dp;
  int z = w->zero;
  w->w_all = w_alloc(w, z >= 3 && dp > 1 ? sh * w->es : weight_bytes(w, psi), BS_MEM_WEIGHTS);
  if (w->train) {
    w->g_all = w_alloc(w, (z >= 2 && dp > 1 ? sh : psi) * w->es, BS_MEM_GRADS);
    for (int j = 0; j < 3; j++) w->opt[j] = w_alloc(w, (z >= 1 && dp > 1 ? sh : psi) * 4, BS_MEM_OPTIMIZER);
  }
}

static void stage_embed(bs_wl *w) {
  zero3_acquire(w);
  w_ew(w, w->T * w->H, 0, "embedding lookup"); /* vocab-parallel under tp, then reduced */
  tp_reduce(w);
  zero3_release(w);
}

static void stage_head(bs_wl *w) {
  zero3_acquire(w);
  int64_t v = w->V / w->g;
  w_ew(w, w->Tn * w->H, 4, "final RMSNorm");
  int32_t gb = tp_gather(w);
  w->logits[w->mb % w->slots] = w_alloc(w, w->T * v * 4, w->train ? BS_MEM_ACTIVATIONS : BS_MEM_WORKSPACE);
  w_linear(w, w->T, v, w->H, 0, "LM head");
  w_free(w, &gb);
  w_ew(w, w->T * v, 5, "cross-entropy"); /* softmax cross-entropy (or sampling) */
  if (!w->train) w_free(w, &w->logits[w->mb % w->slots]);
  zero3_release(w);
}

static void stage_head_bwd(bs_wl *w) {
  zero3_acquire(w);
  grad_bucket(w, head_set(w), &w->ehb);
  int64_t v = w->V / w->g;
  w_ew(w, w->T * v, 3, "cross-entropy backward");
  int32_t gx = tp_gather(w);
  w_linear(w, w->T, v, w->H, 1, "LM head backward");
  w_free(w, &gx);
  w_free(w, &w->logits[w->mb % w->slots]);
  tp_reduce(w);
  w_ew(w, w->Tn * w->H, 6, "final RMSNorm backward");
  zero3_release(w);
  grad_reduce(w, head_set(w), &w->ehb);
}

static void stage_embed_bwd(bs_wl *w) {
  zero3_acquire(w);
  grad_bucket(w, w->pc.embed, &w->ehb);
  w_ew(w, w->T * w->H, 1, "embedding gradient"); /* scatter-add */
  zero3_release(w);
  grad_reduce(w, w->pc.embed, &w->ehb);
  w_wait(w, &w->gh);
  w_free(w, &w->gbuck);
}

static void stage_opt(bs_wl *w) {
  w_wait(w, &w->gh);
  w_free(w, &w->gbuck);
  int64_t n = w->zero >= 1 && w->pc.dp > 1 ? w->pc.shard_total : w->pc.total;
  bs_compute *c = plan_compute(w->it, BS_K_ELEMWISE);
  c->label = "Adam step";
  c->ew = BS_EW_GENERIC;
  c->elems = n * BS_ADAM_BYTES_PER_PARAM / (2 * w->es); /* the roofline reads + writes 2 x elems x es */
  c->flops = 12.0 * (double)n;
  if ((w->zero == 1 || w->zero == 2) && w->pc.dp > 1) {
    if (w->model) {
      for (int64_t l = 0; l < w->L * w->v; l++)
        w_sync_coll(w, BS_COLL_ALLGATHER, w->dpg, bs_zero_shard(w->pc.layer, w->pc.dp) * w->es);
      if (w->has_embed) w_sync_coll(w, BS_COLL_ALLGATHER, w->dpg, bs_zero_shard(w->pc.embed, w->pc.dp) * w->es);
      if (w->has_head) w_sync_coll(w, BS_COLL_ALLGATHER, w->dpg, bs_zero_shard(head_set(w), w->pc.dp) * w->es);
    } else {
      w_sync_coll(w, BS_COLL_ALLGATHER, w->dpg, bs_zero_shard(w->pc.layer, w->pc.dp) * w->es);
    }
  }
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
    if (!again) zero3_acquire(w);
    if (w->train) /* recompute keeps the layer input only */
      w->act[l] = w_alloc(w, keep || again ? saved_bytes(w) : w->Tn * w->H * w->es, BS_MEM_ACTIVATIONS);
    if (!keep && !again) w->tmp = w_alloc(w, saved_bytes(w), BS_MEM_WORKSPACE);
    layer_pre(w);
    if (stream_start(w, 0, NULL, NULL, 0)) return 1;
    w->fsub = 1;
    return 0;
  }
  int ev = stream_pull(w);
  if (ev == EV_HOOK) layer_qkv(w);
  if (ev != EV_FWD_END && ev != EV_END) return 0;
  if (again) { /* the attention iterator goes on into its backward */
    layer_post(w);
    return 1;
  }
  if (keep) {
    stream_fwd_end(w);
  } else if (!w->train) {
    while (stream_pull(w) != EV_END) {
    } /* a forward-only plan's last FREEs */
  }
  int cache = !w->train && !w->drop_kv;
  if (w->drop_kv) stream_drop_kv(w);
  layer_post(w);
  stream_free_all(w, cache); /* train: what is left is not kept; inference: the KV cache stays unless dropped */
  stream_stop(w);
  w_free(w, &w->tmp);
  zero3_release(w);
  return 1;
}

/* One step of layer l's backward. Returns 1 when done. */
static int layer_bwd_step(bs_wl *w) {
  int64_t l = slot_layer(w);
  switch (w->sub) {
  case 0:
    zero3_acquire(w);
    grad_bucket(w, w->pc.layer, &w->gnew);
    if (w->recompute == BS_RECOMPUTE_FULL) {
      w_free(w, &w->act[l]); /* the checkpoint gives way to the full set */
      w->fsub = 0;
      w->sub = 2;
      return 0;
    }
    layer_mlp_bwd(w);
    /* selective: the attention core's forward runs again from the kept Q, K, V (and O) */
    if (stream_start(w, w->recompute == BS_RECOMPUTE_SELECTIVE ? 2 : 1, &w->saved[l * SAVE_MAX],
                     &w->saved_seq[l * SAVE_MAX], w->nsaved[l]))
      return 1;
    w->sub = 1;
    return 0;
  case 1: {
    int ev = stream_pull(w);
    if (ev == EV_HOOK) layer_o_bwd(w);
    if (ev != EV_END) return 0;
    layer_qkv_bwd(w);
    stream_free_all(w, 0); /* the kept buffers included: they are the stream's again */
    stream_stop(w);
    w->nsaved[l] = 0;
    w_free(w, &w->act[l]);
    zero3_release(w);
    grad_reduce(w, w->pc.layer, &w->gnew);
    return 1;
  }
  default: /* recompute: stream the forward again, then on into the backward */
    if (layer_fwd_step(w, 1)) {
      layer_mlp_bwd(w);
      w->sub = 1;
    }
    return 0;
  }
}

/*
 * The schedule: task t of this stage is a microbatch's forward or backward.
 * One stage (no pipeline) runs each microbatch's forward then its backward.
 * Pipeline stages run 1F1B (PipeDream-Flush, Narayanan et al. 2021, as
 * Megatron-LM schedules it): stage s of p runs min(p - s - 1, m) forwards,
 * then alternates one forward and one backward, then the backwards left.
 * Inference runs the forwards only.
 */
static void pp_task_1f1b(const bs_wl *w, int64_t t, int *bwd, int64_t *mb) {
  int64_t m = w->nmb, warm = w->pp - w->pstage - 1;
  if (warm > m) warm = m;
  if (!w->train || t < warm) {
    *bwd = 0;
    *mb = t;
  } else if (t < warm + 2 * (m - warm)) {
    int64_t k = t - warm;
    *bwd = (int)(k % 2);
    *mb = k % 2 ? k / 2 : warm + k / 2;
  } else {
    *bwd = 1;
    *mb = t - warm - (m - warm);
  }
}

/*
 * Interleaved 1F1B (Narayanan et al. 2021, section 2.2.2, as Megatron-LM's
 * forward_backward_pipelining_with_interleaving orders it): rank s holds v
 * chunks, chunk c being stage c x p + s of p x v. The k-th of the m x v
 * chunk-microbatches is microbatch (k / (p v)) p + k % p of chunk (k / p) % v
 * for a forward and of chunk v - 1 - (k / p) % v for a backward: p
 * microbatches through one chunk, then the same p through the next. Rank s
 * runs (p - s - 1) x 2 + (v - 1) x p forwards (all of them when m = p), then
 * alternates one forward and one backward, then the backwards left.
 */
static void pp_task_interleaved(const bs_wl *w, int64_t t, int *bwd, int64_t *mb, int *chunk) {
  int64_t p = w->pp, v = w->v, total = w->nmb * v;
  int64_t warm = (p - w->pstage - 1) * 2 + (v - 1) * p;
  if (warm > total || w->nmb == p) warm = total;
  int64_t k;
  if (!w->train || t < warm) {
    *bwd = 0;
    k = t;
  } else if (t < warm + 2 * (total - warm)) {
    int64_t j = t - warm;
    *bwd = (int)(j % 2);
    k = j % 2 ? j / 2 : warm + j / 2;
  } else {
    *bwd = 1;
    k = t - warm - (total - warm);
  }
  *mb = k / (p * v) * p + k % p;
  int64_t c = k / p % v;
  *chunk = (int)(*bwd ? v - 1 - c : c);
}

static void pp_task(const bs_wl *w, int64_t t, int *bwd, int64_t *mb, int *chunk) {
  *chunk = 0;
  if (w->v > 1) pp_task_interleaved(w, t, bwd, mb, chunk);
  else pp_task_1f1b(w, t, bwd, mb);
}

/* Point-to-point with a neighbour stage (tags of kind 0: microbatch in the step bits; interleaved:
 * a backward's bit 1024 as well, since one pair of ranks then carries both directions' messages). */
static int32_t w_p2p(bs_wl *w, bs_op_kind kind, int32_t peer, int32_t buf, int64_t bytes) {
  bs_op *op = plan_push(w->it, kind);
  op->handle = take(w->hnds, BS_WL_MAX_HANDLES, w->it);
  op->u.p2p.peer = peer;
  op->u.p2p.tag = w->v > 1 ? (int32_t)((w->task_bwd ? 1024 : 0) | (w->mb & 1023)) : (int32_t)(w->mb & 2047);
  op->u.p2p.buf = R(buf, 0);
  op->u.p2p.bytes = bytes;
  op->step = (int32_t)w->mb;
  return op->handle;
}

/* The sends to neighbour stages still in flight: joined before the next task's own messages. */
static void pp_join_sends(bs_wl *w) {
  for (int i = 0; i < w->nps; i++) {
    w_wait(w, &w->ps_h[i]);
    w_free(w, &w->ps_b[i]);
  }
}

/* A stage's output (forward: activations, backward: their gradient) to a neighbour stage. */
static void pp_send(bs_wl *w, int32_t peer) {
  /* interleaved: the oldest is joined when the ring is full (a rank's chunks send to two peers, and
   * a blocking join of a newer send could wait on a peer that is itself waiting on this rank) */
  int i = w->nps > 2 ? (int)(w->nsent++ % w->nps) : w->ps_h[0] < 0 ? 0 : 1;
  w_wait(w, &w->ps_h[i]);
  w_free(w, &w->ps_b[i]);
  w->ps_b[i] = w_alloc(w, w->Tn * w->H * w->es, BS_MEM_COMM);
  w->ps_h[i] = w_p2p(w, BS_OP_SEND, peer, w->ps_b[i], w->Tn * w->H * w->es);
}

/* A neighbour stage's output into a new buffer, waited (the task cannot start without it). */
static int32_t pp_recv(bs_wl *w, int32_t peer, bs_mem_class cls) {
  int32_t b = w_alloc(w, w->Tn * w->H * w->es, cls);
  int32_t h = w_p2p(w, BS_OP_RECV, peer, b, w->Tn * w->H * w->es);
  w_wait(w, &h);
  return b;
}

/* The start of task t: phase marks, the microbatch, the input from the neighbour stage. */
static void task_start(bs_wl *w) {
  int bwd, chunk;
  int64_t mb;
  pp_task(w, w->task, &bwd, &mb, &chunk);
  if (w->task > 0 && bwd != w->task_bwd) {
    plan_phase(w->it, w->task_bwd, 0);
    plan_phase(w->it, bwd, 1);
  }
  w->task_bwd = bwd;
  w->mb = mb;
  w->chunk = chunk;
  w->t_embed = w->has_embed && chunk == 0;
  w->t_head = w->has_head && chunk == w->v - 1;
  w->fsub = 0;
  w->sub = 0;
  if (!bwd) {
    if (w->pstage > 0) w->pp_in = pp_recv(w, w->prev, BS_MEM_COMM);
    else if (chunk > 0) w->pp_in = pp_recv(w, w->last, BS_MEM_COMM); /* chunk - 1 of the last stage */
    w->layer = 0;
    w->stage = w->t_embed ? S_EMBED : S_LFWD;
    return;
  }
  if (w->t_head) {
    w->dx = w_alloc(w, w->Tn * w->H * w->es, BS_MEM_WORKSPACE); /* gradient of the residual stream */
    stage_head_bwd(w);
  } else if (w->pstage < w->pp - 1) {
    w->dx = pp_recv(w, w->next, BS_MEM_WORKSPACE);
  } else if (chunk < w->v - 1) {
    w->dx = pp_recv(w, w->first, BS_MEM_WORKSPACE); /* from chunk + 1 of the first stage */
  }
  w->layer = w->L - 1;
  w->stage = S_LBWD;
}

/* The end of a task: the output to the neighbour stage; the next task, or the step's end. */
static void task_end(bs_wl *w) {
  if (!w->task_bwd) {
    w_free(w, &w->pp_in);
    if (w->pstage < w->pp - 1) pp_send(w, w->next);
    else if (w->chunk < w->v - 1) pp_send(w, w->first); /* on to chunk + 1 of the first stage */
  } else {
    w_free(w, &w->dx);
    if (w->pstage > 0) pp_send(w, w->prev);
    else if (w->chunk > 0) pp_send(w, w->last); /* back to chunk - 1 of the last stage */
  }
  if (++w->task < w->ntasks) {
    w->stage = S_TASK;
    return;
  }
  pp_join_sends(w);
  w->stage = w->train ? S_OPT : S_FINI;
}

static void gen_step(bs_wl *w) {
  switch (w->stage) {
  case S_INIT:
    plan_phase(w->it, 0, 1);
    stage_init(w);
    w->task = 0;
    w->stage = S_TASK;
    return;
  case S_TASK: task_start(w); return;
  case S_EMBED:
    stage_embed(w);
    w->stage = S_LFWD;
    return;
  case S_LFWD:
    if (layer_fwd_step(w, 0)) {
      w->fsub = 0;
      if (++w->layer == w->L) w->stage = w->t_head ? S_HEAD : S_TASK_END;
    }
    return;
  case S_HEAD:
    stage_head(w);
    w->stage = S_TASK_END;
    return;
  case S_LBWD:
    if (layer_bwd_step(w)) {
      w->sub = 0;
      if (w->layer-- == 0) w->stage = w->t_embed ? S_EMBED_BWD : S_TASK_END;
    }
    return;
  case S_EMBED_BWD:
    stage_embed_bwd(w);
    w->stage = S_TASK_END;
    return;
  case S_TASK_END: task_end(w); return;
  case S_OPT:
    w_wait(w, &w->gh);
    w_free(w, &w->gbuck);
    plan_phase(w->it, 1, 0);
    stage_opt(w); /* layer scope: the step of that layer's parameters */
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
  if (!w->saved || !w->saved_seq || !w->nsaved || !w->act || !w->logits) {
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
  bs_param_count_stage(c, w->pstage, &w->pc);
  w->g = w->pc.tp;
  plan_map_of(p, it->rank, &w->map);
  w->mbs = p->mesh.micro_batch;
  w->es = p->es;
  w->H = c->model.hidden;
  w->F = c->model.ffn;
  w->V = c->model.vocab;
  w->qkvw = (p->Zq + 2 * p->Zkv) * p->d;
  int A = p->mesh.size[p->mesh.att_dim];    /* the attention group's ranks */
  if (p->decode) w->T = w->mbs * p->nq_dec; /* the new tokens, on every rank */
  else if (p->mesh.att_dim == BS_DIM_TP) w->T = w->mbs * p->N;
  else w->T = w->mbs * (p->N / A);
  w->Tn = w->v3 ? w->T / w->g : w->T;
  w->tpg = plan_mesh_group(p, it->rank, BS_DIM_TP);
  if (plan_grad_group(p, it->rank, &w->dpg)) w->dpg = (bs_group){it->rank, 1, 1}; /* refused at creation (train) */
  w->w_all = w->g_all = w->opt[0] = w->opt[1] = w->opt[2] = -1;
  for (int64_t i = 0; i < w->slots; i++) w->logits[i] = -1;
  w->tmp = w->dx = w->gh = w->gbuck = w->gnew = w->ehb = -1;
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
  free(w);
}

const plan_scope plan_scope_workload = {plan_check_workload, plan_wl_new, plan_wl_free, plan_gen_workload};
