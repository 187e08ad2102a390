/*
 * warnings.c — the settings of a point that are accepted but change nothing, or look like a
 * slip (warnings.h). Each is a sentence that names its key; a sweep says each distinct one
 * once. The rules follow what the plans do with each key (plans/workload.c: ZeRO shards only
 * the data-parallel group's state, recomputation replays a training layer's forward).
 */
#include "warnings.h"

#include <stdio.h>

static void say_kv_drop(char *t, size_t n, const bs_workload *w, void (*say)(const char *, void *), void *ctx) {
  snprintf(t, n, "workload.kv_cache: drop has no effect outside phase prefill (%s keeps no cache to drop)",
           bs_phase_name(w->phase));
  say(t, ctx);
}

/* Parallel keys that only one method or schedule reads (plans/create.c, plans/tp.c,
 * plans/ulysses.c): a value other than the default that no point of the sweep reads changes
 * nothing (a sweep over methods may set one for the points that read it). */
void bs_sweep_warnings(const bs_config *pts, int n, void (*say)(const char *text, void *ctx), void *ctx) {
  char t[BS_WARNING_LEN];
  int chunks = 0, interleaved = 0, degree = 0, usp = 0, v3 = 0, tp = 0;
  for (int i = 0; i < n; i++) {
    const bs_parallel *p = &pts[i].par;
    if (p->pp_chunks != 2) chunks = p->pp_chunks;
    interleaved |= p->pp_schedule == BS_PP_INTERLEAVED;
    if (p->ulysses_degree != 8) degree = p->ulysses_degree;
    usp |= p->method == BS_USP;
    v3 |= p->tp_variant == 3;
    tp |= p->method == BS_TP || p->tp > 1;
  }
  if (chunks && !interleaved) {
    snprintf(t, sizeof t, "parallel.pp_chunks: %d has no effect without parallel.pp_schedule = interleaved", chunks);
    say(t, ctx);
  }
  if (degree && !usp) {
    snprintf(t, sizeof t, "parallel.ulysses_degree: %d has no effect without method usp (usp alone reads it)", degree);
    say(t, ctx);
  }
  if (v3 && !tp) {
    snprintf(t, sizeof t,
             "parallel.tp_variant: v3 has no effect without tensor parallelism (method tp, or parallel.tp > 1)");
    say(t, ctx);
  }
}

void bs_config_warnings(const bs_config *c, void (*say)(const char *text, void *ctx), void *ctx) {
  char t[BS_WARNING_LEN];
  const bs_workload *w = &c->work;
  const bs_model *m = &c->model;
  int attn = w->scope == BS_SCOPE_ATTENTION, train = w->phase == BS_TRAIN;
  if (m->fp8 != BS_FP8_OFF && attn) {
    snprintf(t, sizeof t, "model.fp8: %s has no effect at attention scope (FP8 applies to the projections and MLP)",
             bs_fp8_name(m->fp8));
    say(t, ctx);
  }
  if ((m->main_grads != BS_GRADS_FP32 || m->master_weights != BS_MASTER_FP32) && (attn || !train)) {
    snprintf(
      t, sizeof t, "model.%s: %s has no effect %s (no gradients or optimizer state)",
      m->main_grads != BS_GRADS_FP32 ? "main_grads" : "master_weights",
      m->main_grads != BS_GRADS_FP32 ? bs_main_grads_name(m->main_grads) : bs_master_weights_name(m->master_weights),
      attn ? "at attention scope" : "outside training");
    say(t, ctx);
  }
  if (w->cross_entropy != BS_CE_UNFUSED && (w->scope != BS_SCOPE_MODEL || !train)) {
    snprintf(t, sizeof t, "workload.cross_entropy: %s has no effect %s (the loss holds the LM head's logits)",
             bs_cross_entropy_name(w->cross_entropy),
             w->scope != BS_SCOPE_MODEL ? "below model scope" : "outside training");
    say(t, ctx);
  }
  if (w->fragmentation >= 0 && attn) {
    snprintf(t, sizeof t,
             "workload.fragmentation: %g has no effect at attention scope (no framework's caching allocator; use "
             "workload.scope = layer or model)",
             w->fragmentation);
    say(t, ctx);
  }
  if ((w->kv_block > 0 || w->max_seq_len > 0) && (attn || train || w->kv_cache == BS_KV_DROP)) {
    snprintf(t, sizeof t, "workload.%s: %lld has no effect %s (no KV cache is kept)",
             w->kv_block > 0 ? "kv_block" : "max_seq_len", (long long)(w->kv_block > 0 ? w->kv_block : w->max_seq_len),
             attn    ? "at attention scope"
             : train ? "in training"
                     : "with workload.kv_cache = drop");
    say(t, ctx);
  } else if (w->kv_block > 0 && w->max_seq_len > 0) {
    snprintf(t, sizeof t,
             "workload.max_seq_len: %lld has no effect with workload.kv_block = %lld (paged blocks hold the tokens, "
             "no reservation)",
             (long long)w->max_seq_len, (long long)w->kv_block);
    say(t, ctx);
  }
  if (c->par.zero > 0) {
    if (attn) {
      snprintf(t, sizeof t,
               "parallel.zero: stage %d has no effect at attention scope (no weights, gradients or "
               "optimizer state; use workload.scope = layer or model)",
               c->par.zero);
      say(t, ctx);
    } else if (c->par.method == BS_TP || c->par.gpus < 2) {
      snprintf(t, sizeof t,
               "parallel.zero: stage %d has no effect with %s on %d GPUs (no data-parallel group "
               "to shard over)",
               c->par.zero, bs_method_name(c->par.method), c->par.gpus);
      say(t, ctx);
    } else if (!train && c->par.zero < 3) {
      snprintf(t, sizeof t,
               "parallel.zero: stage %d shards gradients and optimizer state, which %s does not "
               "have: no effect",
               c->par.zero, bs_phase_name(w->phase));
      say(t, ctx);
    }
  }
  if (w->recompute && attn) { /* outside train, layer and model scope refuse it (plans/workload.c) */
    snprintf(t, sizeof t,
             "workload.recompute: no effect at attention scope (it replays a training layer's "
             "forward; use workload.scope = layer or model)");
    say(t, ctx);
  }
  int64_t keys = w->seq_len + (w->phase == BS_DECODE ? w->decode_tokens : 0);
  if (w->window > 0 && w->window >= keys) {
    snprintf(t, sizeof t, "workload.window: %lld holds the whole sequence (%lld tokens): no effect",
             (long long)w->window, (long long)keys);
    say(t, ctx);
  }
  if (w->phase == BS_DECODE && w->decode_tokens > w->seq_len) { /* a slip: more new tokens than cached ones */
    snprintf(t, sizeof t,
             "workload.decode_tokens: %lld query tokens per step against a cache of %lld (workload.seq_len): more "
             "new tokens than cached ones is a prefill (phase = prefill with workload.cached_tokens), not a decode "
             "step",
             (long long)w->decode_tokens, (long long)w->seq_len);
    say(t, ctx);
  }
  if (w->decode_tokens != 1 && w->phase != BS_DECODE) {
    snprintf(t, sizeof t, "workload.decode_tokens: %lld has no effect outside phase decode",
             (long long)w->decode_tokens);
    say(t, ctx);
  }
  if (c->par.cp_pass == BS_PASS_Q && c->par.double_ring == BS_ON &&
      (c->par.method == BS_BURST || c->par.method == BS_RING)) {
    snprintf(t, sizeof t,
             "parallel.double_ring: on has no effect with parallel.cp_pass = q (pass-Q runs one ring; its "
             "all-to-all crosses the nodes)");
    say(t, ctx);
  }
  if (w->kv_cache == BS_KV_DROP && w->phase != BS_PREFILL) /* layer and model scope refuse it */
    say_kv_drop(t, sizeof t, w, say, ctx);
  /* MLA's heads are wider than hidden by design (DeepSeek-V3: 128 x 192 over 7168) */
  if (!attn && m->attention == BS_ATTENTION_MHA && m->hidden > 0 && m->heads * m->head_dim != m->hidden) {
    snprintf(t, sizeof t,
             "model.heads * model.head_dim = %lld * %lld = %lld, not model.hidden = %lld: accepted "
             "(the projections map hidden to heads * head_dim), but check the shape",
             (long long)m->heads, (long long)m->head_dim, (long long)(m->heads * m->head_dim), (long long)m->hidden);
    say(t, ctx);
  }
}
