/*
 * plan_impl.h — what the per-method plan files share and nobody else sees:
 * the plan and iterator structs, the method table's row and the scope row,
 * the small op queue, id allocators and emitters (emit.c), and the ring
 * engines (forward K,V ring, backward packet ring, the sequence-sharded ring
 * methods) that burst, ring, li2021, usp and ring decode are built from. Pure
 * computation, no I/O.
 */
#ifndef BURSTSIM_PLAN_IMPL_H
#define BURSTSIM_PLAN_IMPL_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "plan.h"

/* Message kinds, the high bits of p2p tags. */
enum {
  MSG_K = 1,
  MSG_V,
  MSG_Q,
  MSG_DO,
  MSG_D,
  MSG_LSE,
  MSG_O,
  MSG_DQ,
  MSG_DK,
  MSG_DV,
  MSG_OK,
  MSG_OV,
  MSG_RET_DQ,
  MSG_RET_DK,
  MSG_RET_DV
};
static inline int32_t plan_tag(int kind, int step) { return (int32_t)((kind << 11) | (step & 2047)); }

struct bs_plan {
  bs_config cfg;
  int G;                    /* ranks */
  int P, M;                 /* double ring: inner size P, outer size M (P = G, M = 1 without) */
  int rpn;                  /* ranks per node the plan was made for (<= 0: one node) */
  int64_t B, Zq, Zkv, d, N; /* global shapes */
  int64_t dv;               /* head dimension of v, o, dout (multi-head latent attention: below d) */
  int64_t nq_dec;           /* decode: query tokens */
  int64_t Nc;               /* prefill: tokens of N already in the KV cache (queries are the N - Nc others) */
  int es;                   /* bytes per stored element (q, k, v, dout) */
  bs_elem elem;
  attn_dtype adt;
  int bwd; /* phase train */
  int decode;
  struct bs_plan *attn;           /* layer / model scope: the attention plan every layer runs (workload.c) */
  bs_runs *runs;                  /* layout doc-zigzag or greedy: the runs of each ring position */
  const struct plan_scope *scope; /* layer / model scope: its row, which the iterator runs; NULL otherwise */
  int in_layer;                   /* this attention plan runs inside a layer: tp leaves its block
                                     collectives to the layer's projections */
  bs_mesh mesh;                   /* the rank grid (a plain method: one dimension of G ranks) */
  int composed;                   /* attention runs over a group of the ranks (p->attn), its ops mapped */
  int no_op_cache;                /* layer / model scope: every layer regenerates its attention's ops
                                     (bs_plan_set_op_cache; workload_stream.c) */
  struct plan_op_share *share;    /* layer / model scope: the attention's ops per attention rank,
                                     recorded once for every iterator (op_share.c) */
  int no_op_share;                /* not shared: each iterator records its own (BS_OP_CACHE_OWN), or none */
};

/* The records of the attention plan's ops shared by a layer or model plan's iterators
 * (op_share.c): made for an attention plan of `ranks` ranks (NULL: out of memory, then nothing is
 * shared), freed with the plan. plan_op_share_get: the whole sequence of a fresh iterator of
 * p->attn at attention rank `local` (*n ops), recorded on the first call; NULL when it is not
 * shared (too long, past the plan's budget, being recorded by another thread, an iterator error). */
typedef struct plan_op_share plan_op_share;
plan_op_share *plan_op_share_new(int ranks);
void plan_op_share_free(plan_op_share *s);
const bs_op *plan_op_share_get(const bs_plan *p, int local, int64_t *n);

/*
 * Where a rank's attention group sits (compose.c): the attention plan's rank
 * i is global rank base + stride x i, and its role buffers hold query heads
 * from head_q0, key/value heads from head_kv0 and sequences from b0 of the
 * global tensors.
 */
/* The most runs of tokens a shard of the balance layouts holds (plans/balance.c). */
#define PLAN_MAX_RUNS 64

typedef struct {
  int32_t base, stride;
  int32_t local; /* this rank's index in the attention plan */
  int32_t head_q0, head_kv0;
  int64_t b0;
} plan_rank_map;

/* The map of `rank` in plan p (identity for a plan that is not composed; b0 of the first microbatch). */
void plan_map_of(const bs_plan *p, int rank, plan_rank_map *m);
/* Rewrites an op of the attention plan into the global ranks and tensors. */
void plan_map_op(const plan_rank_map *m, bs_op *op);
/* The group of `rank` along dimension d of p's mesh (tp, cp, dp, pp). */
bs_group plan_mesh_group(const bs_plan *p, int rank, int d);
/* The group that holds the same weights (dp x cp, Megatron's gradient group): 0 and the group, or -1
 * when cp and dp are not neighbours in the order (not a strided group). */
int plan_grad_group(const bs_plan *p, int rank, bs_group *g);

/* Ring-engine state for the forward K,V ring (double ring capable). */
typedef struct {
  int active;
  int32_t first, stride;   /* ring position x is rank first + stride * x */
  int P, M;                /* inner / outer sizes, S = P * M */
  int a, i;                /* my node and my index within it */
  int64_t hq, hkv;         /* heads per rank in the ring */
  bs_shard qs;             /* my query shard (positions) */
  int64_t qpos_off;        /* added to query positions (decode) */
  bs_shard ks;             /* shard template of K blocks: part = origin position */
  int32_t q, o, lse;       /* role buffers */
  int32_t k0, v0;          /* the local K, V (step 0) */
  int32_t kb[2], vb[2];    /* inner receive buffers */
  int32_t okb[2], ovb[2];  /* outer receive buffers */
  int32_t scores;          /* lao off: score workspace, -1 otherwise */
  int64_t kv_bytes;        /* bytes of one K block */
  int64_t v_bytes;         /* bytes of one V block (kv_bytes unless v's head dimension differs) */
  int init[PLAN_MAX_RUNS]; /* query chunk has received its first block */
  int cur_outer;           /* index of the outer buffer holding this outer step's block (-1: local) */
  int h_outer[4], n_outer; /* outstanding outer handles */
} ring_fwd;

/* A part of the travelling backward packet. */
typedef struct {
  int msg;            /* message kind */
  int32_t local;      /* this rank's own buffer (step 0 source) */
  int32_t rb[2];      /* receive buffers (acc parts: the step's partials) */
  int32_t rin;        /* acc parts: the visiting packet's sum so far, received during the compute */
  int32_t orb[2];     /* double ring: read-only parts of the next round's first packet (outer ring) */
  int32_t rout, sout; /* double ring, acc parts: the previous node's sum in, this node's sum out */
  int64_t bytes;
  int acc;         /* 1: accumulated by the step's compute (sent after it) */
  int32_t ret_buf; /* acc parts: where the owner receives the final value */
  int ret_msg;
} pkt_part;

#define PKT_MAX 6
typedef struct {
  int active;
  int32_t first, stride;
  int P, M, a, i;
  int64_t hq, hkv;
  int kind;      /* 0 burst (q-side packet travels), 1 ring (kv-side packet travels) */
  int plain;     /* burst: O travels, delta computed on arrival */
  int unfused;   /* score block materialised */
  bs_shard my;   /* my shard (q side for burst, kv side for ring) */
  bs_shard tmpl; /* shard template of the travelling side */
  /* the stationary side's buffers */
  int32_t q, k, v, o, dout, lse, delta, dq, dk, dv;
  int32_t tmp_delta; /* plain: delta of the visiting packet */
  int32_t scores;
  pkt_part part[PKT_MAX];
  int nparts;
  int h_pre[2 * PKT_MAX], n_pre;
  int h_acc[PKT_MAX], n_acc;           /* sends of the previous step's sums, joined one step later */
  int h_oro[2 * PKT_MAX], n_oro;       /* double ring: outer read-only traffic of this round */
  int h_osum_in[PKT_MAX], n_osum_in;   /* double ring: the previous node's sums, arriving this round */
  int h_osum_out[PKT_MAX], n_osum_out; /* double ring: this node's sums, sent at the last round's end */
} ring_bwd;

/* One sequence<->head all-to-all in flight (ulysses, usp). */
typedef struct {
  int32_t src, pk, rv, dst; /* buffers: source, packed send, receive, final */
  int32_t h;                /* collective handle, -1 = none (group of one) */
  int64_t Z, w, eb;         /* heads in total, row width, bytes per element */
} a2a_xfer;

/*
 * Pass-Q (passq.c): the query shards travel the ring, each rank keeps the
 * partial (O, lse) of every visiting shard against its K,V, and an all-to-all
 * returns them to their owners, who merge them.
 */
typedef struct {
  int32_t q, k, v, o, lse, scores;
  int32_t qb[2];        /* receive buffers of the visiting query shards */
  int32_t po, pl;       /* partials (O fp32, lse) of the visiting shards, block per origin: the all-to-all's send */
  int32_t ro, rl;       /* the all-to-all's receive: block p = my queries against rank p's K,V */
  int64_t q_bytes;      /* one query shard */
  int64_t o_blk, l_blk; /* one block of po, pl */
  bs_shard qs, ks;      /* my query shard, my K,V shard */
  int64_t qpos_off;     /* added to query positions (decode: seq_len; prefill: cached tokens) */
  int seg, at;
} passq;
/* The forward of a pass-Q plan (prefill, decode); 0 when done. */
int passq_gen(bs_plan_iter *it, passq *s, int unfused);

/*
 * The state of the sequence-sharded ring methods (burst, ring, and the
 * backward li2021 borrows): role buffers, the two ring engines, and where the
 * forward and the backward are in their segments. The backward keeps its own
 * position so a method with a forward of its own can run it afterwards.
 */
typedef struct {
  int32_t q, k, v, o, lse, dout, dq, dk, dv;
  int32_t delta;  /* rowsum(dO * O) of this rank's queries (-1: none) */
  int32_t tdelta; /* burst plain: delta of the visiting packet (-1: none) */
  int32_t scores; /* lao off, li2021: score workspace (-1: none) */
  ring_fwd rf;
  ring_bwd rb;
  int seg, at;   /* forward: segment and ring step */
  int bseg, bat; /* backward: segment and ring step */
  passq pq;      /* parallel.cp_pass = q: the pass-Q forward instead */
} ring_seq;

#define QCAP 256
struct bs_plan_iter {
  const bs_plan *p;
  int rank;
  int qh, qn; /* the queue's head and length: on the line bs_plan_next reads first */
  int done;
  /* an internal invariant broke (queue or ids exhausted), or errmsg: read with qn at every op, so on
   * its line, not past the queue (a second cache miss per op of a rank out of the caches) */
  int err;
  bs_op q[QCAP];                    /* not zeroed (bs_plan_iter_new): every slot is written before it is read */
  uint64_t bufs_used, handles_used; /* the first field after the queue */
  int32_t step;                     /* step stamped on emitted ops */
  char errmsg[192];                 /* why the plan cannot go on (a point too large), when set */
  void *state;                      /* the method's generator state (plan_method.state_size bytes, zeroed) */
  bs_op sink;                       /* target of pushes past a full queue (then err is set) */
  void *wl; /* layer / model scope, composed plans: the scope generator's state (plan.scope->open) */
};

/*
 * One row of the method table (methods.c): everything bs_plan_create and
 * bs_plan_next need to know about a method. Each method file defines its row
 * next to its generator; the generator's state type stays private to it.
 */
typedef struct {
  /* Validation against the plan's shapes, before anything is allocated:
   * 0, or -1 with "section.key: what is wrong" in err. */
  int (*check)(const bs_plan *p, char *err, size_t errlen);
  /* Emits the next segment's ops into the queue; returns 0 when done.
   * state: state_size bytes, zeroed when the iterator is made. */
  int (*gen)(bs_plan_iter *it, void *state);
  size_t state_size;
  int double_ring; /* the K,V ring may run as a double ring (inner P x outer M) */
  int ring;        /* its K,V ring: 0 none, 1 over all ranks, 2 across the all-to-all groups */
  int a2a;         /* its all-to-alls: 0 none, 1 over all ranks, 2 in groups of ulysses_degree */
  int decode;      /* phase decode: 0 refused, 1 allowed, 2 the only phase */
} plan_method;

/* The row of method m, or NULL for a value outside bs_method. */
const plan_method *plan_method_of(bs_method m);
/* Shape checks of the sequence-sharded rings, shared by burst's and ring's rows (ring.c). */
int plan_check_ring(const bs_plan *p, char *err, size_t errlen);
extern const plan_method plan_method_burst, plan_method_ring, plan_method_li2021, plan_method_ulysses, plan_method_usp,
  plan_method_tp, plan_method_tree, plan_method_allgather;

/* Copies an op's used bytes (bs_op_used_bytes) with a size known at compile time for each kind,
 * so that the copy is inlined moves, not a library call: the iterators copy every op. */
static inline void plan_op_copy(bs_op *dst, const bs_op *src) {
  const size_t head = offsetof(bs_op, u);
  switch (src->kind) {
  case BS_OP_COMPUTE: memcpy(dst, src, head + sizeof src->u.compute); break;
  case BS_OP_SEND:
  case BS_OP_RECV: memcpy(dst, src, head + sizeof src->u.p2p); break;
  case BS_OP_WAIT: memcpy(dst, src, head + sizeof src->u.wait); break;
  case BS_OP_ALLOC: memcpy(dst, src, head + sizeof src->u.alloc); break;
  case BS_OP_FREE: memcpy(dst, src, head + sizeof src->u.free); break;
  case BS_OP_COLL: memcpy(dst, src, head + sizeof src->u.coll); break;
  case BS_OP_PHASE: memcpy(dst, src, head + sizeof src->u.phase); break;
  default: memcpy(dst, src, sizeof *src); break;
  }
}

/* Queue, ids and one emitter per op kind (emit.c). */
bs_op *plan_push(bs_plan_iter *it, bs_op_kind kind);
/* Appends a copy of a whole op (an op taken from another stream); the copy in the queue, for the
 * caller to map in place (a sink past a full queue). */
bs_op *plan_push_copy(bs_plan_iter *it, const bs_op *op);
/* The next op of an iterator read in its queue (iter.c): valid until the iterator's next call;
 * NULL at the end or on an error. */
const bs_op *plan_next_ref(bs_plan_iter *it);
int32_t plan_alloc(bs_plan_iter *it, int64_t bytes, bs_mem_class cls, bs_role role, const bs_shard *shard,
                   bs_elem elem);
void plan_free(bs_plan_iter *it, int32_t buf);
int32_t plan_send(bs_plan_iter *it, int peer, int msg, bs_ref buf, int64_t bytes);
int32_t plan_recv(bs_plan_iter *it, int peer, int msg, bs_ref buf, int64_t bytes);
int32_t plan_coll(bs_plan_iter *it, bs_coll_kind kind, bs_reduce_op red, bs_elem elem, bs_group g, bs_ref send,
                  bs_ref recv, int64_t bytes);
void plan_wait(bs_plan_iter *it, const int32_t *handles, int n);
void plan_phase(bs_plan_iter *it, int bwd, int begin);
bs_compute *plan_compute(bs_plan_iter *it, bs_kernel k);
static inline bs_ref R(int32_t buf, int64_t off) {
  bs_ref r = {buf, off};
  return r;
}

/* Shapes (plan.c). */
bs_shard plan_shard(bs_layout l, int part, int parts, int64_t n_total, int32_t head0, int32_t heads);
attn_params plan_attn_params(const bs_plan *p, int64_t hq, int64_t hkv, int64_t nq, int64_t nk);
/* Visible (query, key) pairs of two blocks of positions with the same stride;
 * -1 when the count passes 2^63 - 1 (blocks of billions of tokens). */
int64_t plan_visible_pairs(const bs_workload *w, int64_t q0, int64_t nq, int64_t k0, int64_t nk, int64_t stride);
/* The balance layouts (balance.c): the runs of each of `parts` parts (0, or -1 with
 * "parallel.layout: ..." in err), their release, and the imbalance of attention work they give. */
int plan_runs_make(const bs_workload *w, bs_layout l, int parts, bs_runs **out, char *err, size_t errlen);
void plan_runs_free(bs_runs *u);
double plan_runs_imbalance(const bs_workload *w, const bs_runs *u);

/* Stops the iterator with a message (printf-style) that bs_plan_iter_errmsg returns. */
void plan_iter_fail(bs_plan_iter *it, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Attention of a query shard against a key shard, split into chunk pairs with
 * fully masked pairs skipped. kind: 0 fwd, 1 bwd. init: per query chunk flag
 * (fwd: first block overwrites). Buffers are role-style [chunk][B][h][len][w]. */
typedef struct {
  int32_t q, k, v, o, lse, dout, delta, dq, dk, dv, scores;
} attn_bufs;
int plan_emit_attn(bs_plan_iter *it, int bwd, int unfused, int64_t hq, int64_t hkv, const bs_shard *qs,
                   int64_t qpos_off, const bs_shard *ks, const attn_bufs *b, int init[2]);

/* The forward of plan_emit_attn with its outputs at byte offsets o_at, lse_at of b->o, b->lse (a
 * block of a buffer of partials: pass-Q). */
int plan_emit_attn_at(bs_plan_iter *it, int unfused, int64_t hq, int64_t hkv, const bs_shard *qs, int64_t qpos_off,
                      const bs_shard *ks, const attn_bufs *b, int init[2], int64_t o_at, int64_t lse_at);
/* plan_emit_attn (fused) with the key shard's tokens stored kv_before tokens into b->k, b->v (and
 * b->dk, b->dv): one shard of a buffer that holds every rank's shard one after another (allgather). */
int plan_emit_attn_kv_at(bs_plan_iter *it, int bwd, int64_t hq, int64_t hkv, const bs_shard *qs, const bs_shard *ks,
                         const attn_bufs *b, int init[2], int64_t kv_before);
/* The backward's delta = rowsum(dO * O) (the ATTN_DELTA kernel) of hq query heads (hkv K,V heads) of n
 * queries, from the fp32 output o and dout into delta. */
void plan_emit_delta(bs_plan_iter *it, int64_t hq, int64_t hkv, int64_t n, int32_t o, int32_t dout, int32_t delta);
/* plan_emit_delta of this rank's N / G queries, every query head, into a new fp32 WORKSPACE buffer (returned). */
int32_t plan_emit_local_delta(bs_plan_iter *it, int32_t o, int32_t dout);
/* Visible (query, key) pairs of a query shard (its zigzag chunk `chunk`, or all of it for -1)
 * against a key shard (-1 past 2^63 - 1). */
int64_t plan_shard_pairs(const bs_plan *p, const bs_shard *qs, int64_t qpos_off, const bs_shard *ks, int chunk);

/* Forward ring engine. Set the fields of r, call ring_fwd_begin (ALLOCs the
 * comm buffers), then ring_fwd_step for s = 0 .. S-1 (returns 0 past the end),
 * then ring_fwd_end (FREEs). */
void ring_fwd_begin(bs_plan_iter *it, ring_fwd *r);
int ring_fwd_step(bs_plan_iter *it, ring_fwd *r, int s);
void ring_fwd_end(bs_plan_iter *it, ring_fwd *r);
int ring_rank(int32_t first, int32_t stride, int P, int M, int a, int i);

/* Backward packet ring (burst: q-side packet; ring: kv-side packet), used the same way. */
void ring_bwd_begin(bs_plan_iter *it, ring_bwd *r);
int ring_bwd_step(bs_plan_iter *it, ring_bwd *r, int s);
void ring_bwd_end(bs_plan_iter *it, ring_bwd *r);

/* Sequence-sharded ring methods (ring_engine.c). kind 0: burst (the query
 * packet travels in the backward), 1: ring (the key/value packet travels).
 * plain: burst rings O and computes D on arrival. unfused: the score block is
 * materialised. ring_seq_gen runs the forward ring then, in phase train, the
 * backward; ring_seq_bwd runs only the backward (li2021, after its own forward). */
int ring_seq_gen(bs_plan_iter *it, ring_seq *s, int kind, int plain, int unfused);
int ring_seq_bwd(bs_plan_iter *it, ring_seq *s, int kind, int plain, int unfused);

/*
 * The row of a scope above attention (layer, model): what creation checks and
 * how the iterator runs the program around the attention plan. Creation sets
 * the plan's row; the iterator calls through it, so the scope's generator can
 * itself iterate the attention plan without a circle between the two.
 */
typedef struct plan_scope {
  /* Validation of the scope's own settings: 0, or -1 with "section.key: what is wrong" in err. */
  int (*check)(const bs_plan *p, char *err, size_t errlen);
  /* The per-iterator state (NULL: out of memory), and its release. */
  void *(*open)(bs_plan_iter *it);
  void (*close)(void *w);
  /* Emits the next segment's ops into the iterator's queue; returns 0 when done. */
  int (*gen)(bs_plan_iter *it);
} plan_scope;

/* The row of scope s (methods.c): NULL for attention scope, workload.c's row for any other. */
const plan_scope *plan_scope_of(bs_scope s);
extern const plan_scope plan_scope_workload;
/* The attention-scope row of a composed plan: the attention plan, mapped (compose.c). */
extern const plan_scope plan_scope_compose;

/* Key/value heads a rank holds when g ranks share a layer's heads (tensor parallelism): kv_heads / g,
 * or 1 when g is a multiple of kv_heads: each KV head is then replicated g / kv_heads times (vLLM's
 * rule for tensor parallelism above the KV-head count; create.c allows it for inference only). */
static inline int64_t plan_kv_heads_per_rank(int64_t kv_heads, int64_t g) { return kv_heads >= g ? kv_heads / g : 1; }
/* Whether g ranks can share kv_heads key/value heads: g divides them, or (replication) they divide g. */
static inline int plan_kv_split_ok(int64_t kv_heads, int64_t g) {
  return kv_heads >= g ? kv_heads % g == 0 : g % kv_heads == 0;
}

#endif
