/*
 * workload_stream.c — the attention plan streamed into a workload plan.
 *
 * Every layer streams the ops of a fresh iterator of the attention plan
 * (p->attn), mapping its buffer and handle ids into the workload plan's larger
 * id space and dropping its PHASE marks; the op that follows the forward's or
 * the backward's leading ALLOCs is held back as a hook, where the layer emits
 * its QKV projection or its output projection's backward. At forward end the
 * attention's Q, K, V, O, lse and kept head-sharded copies become the layer's
 * saved activations (selective recompute: Q, K, V, O only) and the rest is
 * freed. The backward replays a fresh iterator's forward without emitting it
 * (only to learn its ids, mapping the saved buffers back, re-creating the
 * freed ones at the backward's start), or with selective recompute emits it
 * again around the kept buffers, and streams its backward. The attention plan's
 * ops are recorded once per attention rank for every iterator of the plan
 * (op_share.c), or where that record is not kept each rank records them as they
 * are first generated; later layers and microbatches stream from the record
 * (stream_next; bs_plan_set_op_cache).
 */
#include <stdlib.h>
#include <string.h>
#include "workload_impl.h"

/* ---------- the attention stream ---------- */

static bs_mem_class layer_class(const bs_wl *w, const bs_op *a) {
  switch (a->u.alloc.role) {
  case BS_ROLE_K:
  case BS_ROLE_V: return w->train || w->drop_kv ? BS_MEM_ACTIVATIONS : BS_MEM_KV_CACHE; /* inference keeps them */
  case BS_ROLE_Q:
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
int wl_stream_start(bs_wl *w, int replay, const int32_t *saved, const int *saved_seq, int nsaved) {
  attn_stream *s = &w->as;
  memset(s, 0, offsetof(attn_stream, held)); /* held and aop are written before they are read */
  for (int i = 0; i < BS_PLAN_MAX_BUFS; i++) s->bmap[i] = -1;
  for (int i = 0; i < BS_PLAN_MAX_HANDLES; i++) s->hmap[i] = -1;
  s->in = NULL; /* made when the stream passes the record (stream_next) */
  s->replay = replay == 1;
  s->rerun = s->skip_hook = replay == 2;
  s->saved = saved;
  s->saved_seq = saved_seq;
  s->nsaved = nsaved;
  return 0;
}

void wl_stream_stop(bs_wl *w) {
  attn_stream *s = &w->as;
  if (s->in && bs_plan_iter_error(s->in)) w->it->err = 1;
  else if (s->in && !w->rec.in && !w->rec.off && s->pos == w->rec.n) { /* the recorder, kept where it stands */
    w->rec.in = s->in;
    s->in = NULL;
    return;
  }
  bs_plan_iter_free(s->in);
  s->in = NULL;
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
    buf = s->bmap[b] = wl_take(w->bufs, w->nbufs, w->it);
    break;
  }
  case BS_OP_FREE:
    buf = s->bmap[src->u.free.buf];
    if (buf < 0) return;
    wl_give(w->bufs, buf);
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
    o->u.alloc.cls = layer_class(w, src);
    break;
  case BS_OP_FREE: o->u.free.buf = buf; break;
  case BS_OP_COMPUTE:
    for (int j = 0; j < BS_OP_IN; j++) o->u.compute.in[j] = map_ref(s, src->u.compute.in[j]);
    for (int j = 0; j < BS_OP_OUT; j++) o->u.compute.out[j] = map_ref(s, src->u.compute.out[j]);
    break;
  case BS_OP_SEND:
  case BS_OP_RECV:
    o->handle = s->hmap[src->handle] = wl_take(w->hnds, BS_WL_MAX_HANDLES, w->it);
    o->u.p2p.buf = map_ref(s, src->u.p2p.buf);
    break;
  case BS_OP_COLL:
    o->handle = s->hmap[src->handle] = wl_take(w->hnds, BS_WL_MAX_HANDLES, w->it);
    o->u.coll.send = map_ref(s, src->u.coll.send);
    o->u.coll.recv = map_ref(s, src->u.coll.recv);
    break;
  case BS_OP_WAIT:
    for (int j = 0; j < src->u.wait.n; j++) {
      o->u.wait.handles[j] = s->hmap[src->u.wait.handles[j]];
      wl_give(w->hnds, o->u.wait.handles[j]);
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

/*
 * The attention plan's next op for this stream. A plan iterator's ops are a function of its plan
 * and rank alone (no global state, no clock), so every stream of p->attn at map.local yields the
 * same sequence: the first op[0 .. n) of it are read from the record; past them the iterator that
 * recorded them goes on (a stream stopped at the record's end leaves it there, wl_stream_stop), or
 * a fresh one is made and brought to position n (its first n ops are the record's), and what it
 * yields is appended, until it ends (the record is then the whole sequence and no iterator is made
 * again).
 * NULL at the end of the sequence or when an iterator fails (the plan's error set).
 */
#define WL_OP_CACHE_MAX 2048 /* ops recorded at most per rank (456 bytes each: below 1 MB a rank) */
static const bs_op *stream_next(bs_wl *w) {
  attn_stream *s = &w->as;
  if (w->shop) return s->pos < w->shn ? &w->shop[s->pos++] : NULL; /* the plan's record (op_share.c) */
  if (s->pos < w->rec.n) return &w->rec.op[s->pos++];
  if (w->rec.done) return NULL;
  if (!s->in && w->rec.in && !w->rec.off && s->pos == w->rec.n) { /* the recorder goes on from the record's end */
    s->in = w->rec.in;
    w->rec.in = NULL;
  }
  if (!s->in) {
    if (!(s->in = bs_plan_iter_new(w->p->attn, w->map.local))) {
      w->it->err = 1;
      return NULL;
    }
    for (int64_t i = 0; i < s->pos; i++)
      if (!plan_next_ref(s->in)) {
        w->it->err = 1;
        return NULL;
      }
  }
  const bs_op *op = plan_next_ref(s->in);
  if (!op) {
    w->rec.done = !w->rec.off && !bs_plan_iter_error(s->in);
    return NULL;
  }
  if (!w->rec.off && s->pos == w->rec.n) {
    if (w->rec.n == w->rec.cap) {
      int64_t cap = w->rec.cap ? 2 * w->rec.cap : 256;
      bs_op *grown = cap <= WL_OP_CACHE_MAX ? realloc(w->rec.op, sizeof *grown * (size_t)cap) : NULL;
      if (grown) {
        w->rec.op = grown;
        w->rec.cap = cap;
      } else w->rec.off = 1; /* too long (or no memory): this rank regenerates past the record */
    }
    if (!w->rec.off) memcpy(&w->rec.op[w->rec.n++], op, bs_op_used_bytes(op->kind));
  }
  s->pos++;
  return op;
}

/* Streams inner ops until one was emitted or an event happened. */
int wl_stream_pull(bs_wl *w) {
  attn_stream *s = &w->as;
  for (;;) {
    const bs_op *op = &s->held;
    if (s->has_held) s->has_held = 0;
    else if (!(op = stream_next(w))) return EV_END;
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
void wl_stream_fwd_end(bs_wl *w) {
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
void wl_stream_drop_kv(bs_wl *w) {
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

/*
 * What the KV cache's allocator holds beyond a kept K or V buffer's tokens (workload.kv_block,
 * workload.max_seq_len; Kwon et al., SOSP 2023, arXiv 2309.06180). Paged (vLLM): every sequence
 * holds ceil(n / block) blocks of `block` tokens, filled left to right, so the waste is its last
 * block's unused slots, under one block per sequence (the paper's section 4). Contiguous with a
 * maximum length (FasterTransformer, Orca: section 3.1; Fig. 2 measures 20.4 to 38.2 % of such a
 * cache holding tokens): every sequence reserves max_seq_len tokens, this rank its share of them
 * (its n of the n_total tokens times max_seq_len / n_total, rounded up). The buffer's bytes per
 * token cover its batch of sequences, each holding the same n tokens.
 */
static int64_t kv_slack(const bs_wl *w, const bs_op *a) {
  const bs_workload *wk = &w->p->cfg.work;
  int64_t n = bs_shard_tokens(&a->u.alloc.shard), total = a->u.alloc.shard.n_total, held;
  if (n <= 0 || total <= 0 || a->u.alloc.bytes % n != 0) return 0;
  if (wk->kv_block > 0) held = (n + wk->kv_block - 1) / wk->kv_block * wk->kv_block;
  else if (wk->max_seq_len > total) held = (int64_t)(((__int128)wk->max_seq_len * n + total - 1) / total);
  else return 0;
  return (held - n) * (a->u.alloc.bytes / n);
}

/* Frees every inner buffer still live (the role buffers at the end); keep_kv: K and V stay as the
 * layer's KV cache, with what its allocator holds beyond their tokens (kv_slack) in act[layer]. */
void wl_stream_free_all(bs_wl *w, int keep_kv) {
  attn_stream *s = &w->as;
  int n = 0;
  int64_t slack = 0;
  for (int b = 0; b < BS_PLAN_MAX_BUFS; b++) {
    if (s->bmap[b] < 0) continue;
    int r = (int)s->aop[b].u.alloc.role;
    if (keep_kv && (r == BS_ROLE_K || r == BS_ROLE_V) && n < SAVE_MAX) {
      w->saved[slot_layer(w) * SAVE_MAX + n++] = s->bmap[b]; /* the KV cache stays */
      slack += kv_slack(w, &s->aop[b]);
      continue;
    }
    int32_t id = s->bmap[b];
    w_free(w, &id);
    s->bmap[b] = -1;
  }
  if (keep_kv) w->nsaved[slot_layer(w)] = n;
  if (slack > 0) w->act[slot_layer(w)] = w_alloc(w, slack, BS_MEM_KV_CACHE);
}
