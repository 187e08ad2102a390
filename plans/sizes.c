/*
 * sizes.c — a point's largest products of counts, checked before any plan
 * forms them (config.h: bs_config_sizes_check). The plans multiply batch,
 * tokens, heads, head dimension and element bytes in plain int64 (a shard's
 * bytes, a buffer's offset); every such product is at most one of the
 * whole-batch products below times a small factor (K and V packed, fp32
 * accumulators, the gradients), so bounding these by BS_SIZES_LIMIT keeps
 * every product, sum and peak inside int64 instead of wrapping (2^40 tokens x
 * 2^20 sequences made bytes and peak memory exactly 0).
 */
#include <math.h>
#include <stdio.h>
#include "base/checked.h"
#include "config.h"

/* One product to bound: its factors, the keys they come from and what it counts. */
typedef struct {
  int64_t f[6];
  const char *keys[6];
  int n;
  const char *what;
} product;

static int check(const product *p, char *err, size_t errlen) {
  int64_t v;
  if (!bs_mul_checked(p->f, p->n, BS_SIZES_LIMIT, &v)) return 0;
  double x = 1;
  char names[256] = "";
  size_t len = 0;
  for (int i = 0; i < p->n; i++) {
    x *= (double)p->f[i];
    if (!p->keys[i] || len >= sizeof names) continue;
    int w = snprintf(names + len, sizeof names - len, "%s%s (%lld)", len ? " x " : "", p->keys[i], (long long)p->f[i]);
    if (w > 0) len += (size_t)w;
  }
  snprintf(err, errlen,
           "%s: %s = about 2^%.1f bytes, past the 2^%d bytes a plan can count (2^63 - 1 with room for its packed and "
           "fp32 buffers); lower one of them",
           names, p->what, log2(x), BS_SIZES_LIMIT_LOG2);
  return -1;
}

int bs_config_sizes_check(const bs_config *c, char *err, size_t errlen) {
  const bs_model *m = &c->model;
  const bs_workload *w = &c->work;
  int64_t es = bs_dtype_bytes(m->dtype), tokens = w->seq_len; /* decode: the cache grows by decode_tokens */
  if (w->phase == BS_DECODE && __builtin_add_overflow(w->seq_len, w->decode_tokens, &tokens)) tokens = INT64_MAX;
  const char *tok_key = w->phase == BS_DECODE ? "workload.seq_len + decode_tokens" : "workload.seq_len";
  const char *es_key = "bytes of model.dtype";
  product all[3] = {
    {{w->batch, tokens, m->heads, m->head_dim, es},
     {"workload.batch", tok_key, "model.heads", "model.head_dim", es_key},
     5,
     "the queries' bytes"},
    {{w->batch, tokens, m->kv_heads, m->v_head_dim > m->head_dim ? m->v_head_dim : m->head_dim, es, 2},
     {"workload.batch", tok_key, "model.kv_heads", m->v_head_dim > m->head_dim ? "model.v_head_dim" : "model.head_dim",
      es_key, NULL},
     6,
     "the keys' and values' bytes"},
    {{w->batch, tokens, m->hidden > m->ffn ? m->hidden : m->ffn, es},
     {"workload.batch", tok_key, m->hidden > m->ffn ? "model.hidden" : "model.ffn", es_key},
     4,
     "a layer activation's bytes"},
  };
  int n = w->scope == BS_SCOPE_ATTENTION ? 2 : 3;
  for (int i = 0; i < n; i++)
    if (check(&all[i], err, errlen)) return -1;
  if (w->scope == BS_SCOPE_MODEL) {
    product logits = {
      {w->batch, tokens, m->vocab, 4}, {"workload.batch", tok_key, "model.vocab", NULL}, 4, "the logits' fp32 bytes"};
    /* weights, gradients and Adam state: 16 bytes per parameter, at most 8 matrices of hidden x max per layer */
    int64_t wide = m->ffn > m->vocab ? m->ffn : m->vocab;
    wide = wide > m->hidden ? wide : m->hidden;
    product params = {{m->layers, m->hidden, wide, 8, 16},
                      {"model.layers", "model.hidden", m->ffn > m->vocab ? "model.ffn" : "model.vocab", NULL, NULL},
                      5,
                      "the model state's bytes (16 per parameter)"};
    if (check(&logits, err, errlen) || check(&params, err, errlen)) return -1;
    /* the experts' state: 3 matrices of hidden x moe_ffn per expert and layer, 16 bytes per parameter */
    product experts = {{m->layers, m->experts, m->hidden, m->moe_ffn, 3, 16},
                       {"model.layers", "model.experts", "model.hidden", "model.moe_ffn", NULL, NULL},
                       6,
                       "the experts' state's bytes (16 per parameter)"};
    if (m->experts > 0 && check(&experts, err, errlen)) return -1;
  }
  if (w->scope != BS_SCOPE_ATTENTION && m->experts > 0) {
    /* the routed rows a rank's experts hold: at most every token's top_k, times the capacity's padding */
    int64_t wide = m->hidden > m->moe_ffn ? m->hidden : m->moe_ffn, pad = (int64_t)ceil(m->capacity_factor);
    product routed = {{w->batch, tokens, m->top_k, wide, es, 4 * (pad > 1 ? pad : 1)},
                      {"workload.batch", tok_key, "model.top_k",
                       m->hidden > m->moe_ffn ? "model.hidden" : "model.moe_ffn", es_key, NULL},
                      6,
                      "the routed tokens' bytes"};
    if (check(&routed, err, errlen)) return -1;
  }
  return 0;
}
