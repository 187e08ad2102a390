/*
 * plan.h — a distributed attention method written once, as a program per rank.
 *
 * A plan is a lazily generated sequence of operations for each rank:
 *   ALLOC / FREE   every buffer the method holds (memory is part of the plan)
 *   COMPUTE        a kernel on buffers, with its shape (attention fwd/bwd, merge, ...)
 *   SEND / RECV    asynchronous point-to-point, creating a handle
 *   COLL           a collective over a group of ranks, asynchronous, creating a handle
 *   WAIT           join handles: where overlap is decided
 *   PHASE          marks the start/end of fwd and bwd for timing
 * runtime/ executes the ops for real, sim/ in SimGrid. Both only read ops.
 * Generation is lazy (a few ops per ring step are produced at a time), so a
 * 1024-rank x 1024-step plan never exists in memory at once.
 */
#ifndef BURSTSIM_PLAN_H
#define BURSTSIM_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "result.h"
#include "../kernels/attn.h"

typedef enum {
  BS_OP_ALLOC = 0,
  BS_OP_FREE,
  BS_OP_COMPUTE,
  BS_OP_SEND,
  BS_OP_RECV,
  BS_OP_COLL,
  BS_OP_WAIT,
  BS_OP_PHASE
} bs_op_kind;

typedef enum {
  BS_K_ATTN_FWD = 0,     /* in: q k v; out: o lse (accumulate flag) */
  BS_K_ATTN_FWD_UNFUSED, /* same, score block materialised in a SCORES buffer (in[3]) */
  BS_K_ATTN_BWD,         /* in: q k v o dout lse delta; out: dq dk dv (added into) */
  BS_K_ATTN_BWD_UNFUSED, /* same, workspace in in[7] */
  BS_K_ATTN_DELTA,       /* in: o dout; out: delta */
  BS_K_ATTN_MERGE,       /* in: o2 lse2; out: o lse (merged into) */
  BS_K_GEMM,             /* m x n x k; in: a b; out: c */
  BS_K_ELEMWISE,         /* elems elements read+written (norms, activations, adds) */
  BS_K_COPY,             /* elems bytes copied in[0] -> out[0] (packing, casts) */
  BS_K_COUNT
} bs_kernel;

typedef enum {
  BS_COLL_ALLREDUCE = 0,
  BS_COLL_ALLGATHER,
  BS_COLL_REDUCE_SCATTER,
  BS_COLL_ALLTOALL,
  BS_COLL_COUNT
} bs_coll_kind;

typedef enum { BS_RED_SUM = 0, BS_RED_MAX } bs_reduce_op;
typedef enum { BS_ELEM_F32 = 0, BS_ELEM_BF16, BS_ELEM_F16 } bs_elem;

/* A place in a buffer: buffer id (per rank, -1 = none) and byte offset. */
typedef struct {
  int32_t buf;
  int64_t off;
} bs_ref;
#define BS_NOREF ((bs_ref){-1, 0})

/* Ranks first, first + stride, ..., size of them; the caller's index is its position. */
typedef struct {
  int32_t first, stride, size;
} bs_group;

/* Which tensor a buffer holds, so the runtime can fill inputs and gather outputs. */
typedef enum {
  BS_ROLE_TMP = 0,
  BS_ROLE_Q,
  BS_ROLE_K,
  BS_ROLE_V,
  BS_ROLE_DOUT,
  BS_ROLE_O,
  BS_ROLE_LSE,
  BS_ROLE_DQ,
  BS_ROLE_DK,
  BS_ROLE_DV
} bs_role;

/* The runs of the balance layouts (doc-zigzag, greedy; plans/balance.c): part p holds runs
 * first[p] .. first[p + 1] - 1, each `len` tokens from position `pos`, in increasing position,
 * stored one after another as zigzag's two chunks are. Owned by the plan. */
typedef struct {
  int32_t parts;
  int32_t *first; /* parts + 1 entries */
  int64_t *pos, *len;
  int64_t max_len; /* the longest run */
} bs_runs;

/*
 * What part of a global tensor [B, heads, N, d] a role buffer holds: tokens
 * (token i of the shard is global token bs_shard_token(s, i)) and heads.
 */
typedef struct {
  bs_layout layout;     /* how tokens were split */
  int32_t part, parts;  /* this shard is part `part` of `parts` (1 = all tokens) */
  int64_t n_total;      /* tokens in the whole sequence */
  int32_t head0, heads; /* heads held: [head0, head0 + heads) */
  int64_t b0;           /* first sequence held: batch index b of the buffer is sequence b0 + b */
  /* Prefill against a KV cache (K, V shards only): the first n_cache tokens of the sequence are
   * the cache, split by `layout` over `parts` as if alone, and the buffer holds this part of the
   * cache, then this part of the n_total - n_cache new tokens (positions n_cache..), each stored
   * as a shard of its own. 0: no cache. */
  int64_t n_cache;
  const bs_runs *runs; /* doc-zigzag, greedy: the plan's runs (layout says which); NULL otherwise */
} bs_shard;

int64_t bs_shard_tokens(const bs_shard *s);           /* tokens held */
int64_t bs_shard_token(const bs_shard *s, int64_t i); /* global index of local token i */

#define BS_MAX_WAIT 8
#define BS_OP_IN 8
#define BS_OP_OUT 4

typedef struct {
  bs_kernel kernel;
  attn_params a;   /* attention kernels: shape, mask, scale */
  int accumulate;  /* ATTN_FWD: merge into the running (o, lse) */
  int64_t m, n, k; /* GEMM */
  int64_t elems;   /* ELEMWISE, COPY */
  double flops;    /* useful FLOPs (unmasked), for the profile and reports */
  bs_ref in[BS_OP_IN];
  bs_ref out[BS_OP_OUT];
  /* what the runtime computes and how (see the block at the end of this file) */
  int ew;                    /* ELEMWISE: a bs_elemwise saying what the runtime computes */
  int gemm;                  /* GEMM: a bs_gemm_kind */
  int fp8;                   /* GEMM: operands in FP8 at the device's FP8 rate (model.fp8) */
  const char *label;         /* what the op is, for traces ("QKV projection"; a string literal); NULL: its kernel */
  int64_t ld;                /* GEMM / SOFTMAX: leading dimension (columns) of the score matrix */
  int64_t col0;              /* GEMM: first column of the score block this op touches */
  int64_t t_a, t_b, t_chunk; /* COPY: in viewed as [t_a][t_b][t_chunk bytes] -> out [t_b][t_a][t_chunk]; 0 = plain */
} bs_compute;

/* The fields every op has come first and the kind's own fields last, so that an op is handed
 * on by copying only its used prefix (bs_op_used_bytes): the bytes of the union past its kind's
 * member are undefined in an op taken from an iterator. */
typedef struct {
  bs_op_kind kind;
  int32_t handle; /* SEND / RECV / COLL: the handle this op creates */
  int32_t step;   /* ring step / stage the op belongs to (-1 = none), for messages */
  union {
    struct {
      int32_t buf;
      int64_t bytes;
      bs_mem_class cls;
      bs_role role;
      bs_shard shard;
      bs_elem elem;
    } alloc;
    struct {
      int32_t buf;
    } free;
    bs_compute compute;
    struct {
      int32_t peer;
      int32_t tag;
      bs_ref buf;
      int64_t bytes;
    } p2p;
    struct {
      bs_coll_kind kind;
      bs_reduce_op red;
      bs_elem elem;
      bs_group group;
      bs_ref send, recv;
      int64_t bytes; /* per rank contribution */
    } coll;
    struct {
      int32_t n;
      int32_t handles[BS_MAX_WAIT];
    } wait;
    struct {
      int fwd_bwd; /* 0 fwd, 1 bwd */
      int begin;   /* 1 begin, 0 end */
    } phase;
  } u;
} bs_op;

/* The bytes of an op of this kind that hold its fields: its head and its kind's union member. */
size_t bs_op_used_bytes(bs_op_kind kind);

typedef struct bs_plan bs_plan;
typedef struct bs_plan_iter bs_plan_iter;

/*
 * Builds a plan for cfg with `ranks_per_node` ranks per node (inner ring of
 * the double ring; from the topology in sim, cfg.par.ranks_per_node in runs).
 * Returns 0, or -1 with a message in err naming the offending key (e.g.
 * "parallel.gpus: 3 does not divide seq_len 1000").
 */
int bs_plan_create(const bs_config *cfg, int ranks_per_node, bs_plan **out, char *err, size_t errlen);
void bs_plan_free(bs_plan *p);
int bs_plan_ranks(const bs_plan *p);
const bs_config *bs_plan_config(const bs_plan *p);
/* The plan's rank grid (bs_mesh_of of its config, worked out once at its creation). */
const bs_mesh *bs_plan_mesh(const bs_plan *p);
/* The bound on p's buffer ids: every ALLOC's id is below it, so an executor keeps a table of this
 * many entries. Attention scope: BS_PLAN_MAX_BUFS; layer and model scope: sized from the schedule
 * (the layers and microbatches a pipeline stage holds at once), never below BS_WL_MAX_BUFS. */
int32_t bs_plan_buf_ids(const bs_plan *p);
/* Layer and model scope: each rank's iterator records its attention plan's ops the first time it
 * streams them and reads every later layer's and microbatch's from that record (the ops of one
 * plan and rank are always the same; workload_stream.c), unless turned off here (on: 1, the
 * default). With on = 1 the iterators whose ranks sit at the same place in their attention groups
 * share one record of the plan (op_share.c; within a budget, past which each keeps its own);
 * BS_OP_CACHE_OWN: each iterator its own record only (the path before the shared records, for
 * tests). The ops an iterator yields are the same every way. */
#define BS_OP_CACHE_OWN 2
void bs_plan_set_op_cache(bs_plan *p, int on);
/* Bytes the plan's shared records of attention ops hold (0: none recorded). */
int64_t bs_plan_op_share_bytes(const bs_plan *p);

bs_plan_iter *bs_plan_iter_new(const bs_plan *p, int rank);
/* Writes the next op of this rank's program; returns 1, or 0 at the end. */
int bs_plan_next(bs_plan_iter *it, bs_op *op);
/* The same op read in place, not copied: valid until the iterator's next call; NULL at the end.
 * Only its kind's used bytes are defined (bs_op_used_bytes), as in an op bs_plan_next writes. */
const bs_op *bs_plan_next_ref(bs_plan_iter *it);
void bs_plan_iter_free(bs_plan_iter *it);

const char *bs_op_kind_name(bs_op_kind k);
const char *bs_kernel_name(bs_kernel k);
const char *bs_coll_name(bs_coll_kind k);

/* ------------------------------------------------------------------------
 * Additions by the plans engineer (nothing above was renamed or removed).
 *
 * Ids: buffer ids are in [0, BS_PLAN_MAX_BUFS) and a FREEd id may be handed
 * out again by a later ALLOC; handle ids are in [0, BS_PLAN_MAX_HANDLES) and
 * may be reused after the WAIT that joined them. Executors can therefore keep
 * plain arrays indexed by id.
 *
 * Buffers: ALLOC means zero-filled memory (accumulating kernels add into it),
 * except role Q/K/V/DOUT buffers, which the executor fills with the inputs.
 * Role buffers other than TMP are never FREEd by the plan: they hold the
 * method's inputs and outputs when the program ends. Every TMP buffer is
 * FREEd before the end.
 *
 * Role buffer layout: [B][heads][tokens][width] row-major (width = d, or 1
 * for lse), except the zigzag layout, whose two chunks are stored one after
 * the other: [chunk 0: B][heads][c][width] then [chunk 1: ...]. Use
 * bs_shard_index() rather than computing offsets by hand.
 *
 * P2P: a SEND to peer p with tag t matches the RECV on p from this rank with
 * tag t, in order. Tags are (message kind << 11) | (step & 2047), below 32768.
 *
 * COLL bytes: ALLREDUCE: bytes of the buffer (send and recv the same size);
 * ALLGATHER: bytes sent by each rank (recv holds size x bytes, rank-major);
 * REDUCE_SCATTER: bytes of the full send buffer (recv holds bytes / size);
 * ALLTOALL: bytes of the send buffer, size equal blocks, block p to rank p.
 * ------------------------------------------------------------------------ */
#define BS_PLAN_MAX_BUFS 64
#define BS_PLAN_MAX_HANDLES 64

/* What an ELEMWISE op computes (the simulator only needs `elems`). */
typedef enum {
  BS_EW_GENERIC = 0,  /* modelled work only (layer scope) */
  BS_EW_TREE_RESCALE, /* in: o lse m(max lse); out: num = o*exp(lse-m), den = exp(lse-m) */
  BS_EW_TREE_FINAL,   /* in: num den m; out: o = num/den, lse = m + log(den) */
  BS_EW_SOFTMAX,      /* in/out[0]: score rows (B*Zq*Nq x ld), masked by a.mask; out[1]: lse */
  BS_EW_ZERO,         /* out[0][0 .. elems) = 0 (fp32) */
  BS_EW_ADD,          /* out[0][0 .. elems) += in[0][0 .. elems) (fp32) */
  BS_EW_COUNT
} bs_elemwise;

/* What a GEMM op computes (li2021's explicit score matrix). */
typedef enum {
  BS_GEMM_GENERIC = 0, /* modelled work only */
  BS_GEMM_QK,          /* out[0][:, col0:col0+Nk] = scale * q k^T per head (a gives the shape) */
  BS_GEMM_PV,          /* out[0] (o, fp32) += P[:, col0:col0+Nk] v per head; in[0] = P, in[1] = v */
  BS_GEMM_COUNT
} bs_gemm_kind;

/* Element index of (batch b, local head h, local token i, column x) in a role
 * buffer of shard s with B batches and `width` columns. */
int64_t bs_shard_index(const bs_shard *s, int64_t B, int64_t b, int64_t h, int64_t i, int64_t width);

/* 1 when every rank's program is rank 0's with its peers shifted on the ring's torus of positions
 * (rank = a x *P + i, 0 <= a < *M, 0 <= i < *P) and its COMPUTEs equal but for mask positions,
 * buffer offsets and accumulate (plans/uniform.c says where and why); 0 when not proven. */
int bs_plan_ring_uniform(const bs_plan *p, int *P, int *M);
/* 1 when every rank's program is that of the rank with the same mesh coordinates but dp 0 with
 * every peer's dp coordinate, and every collective group's members', shifted by the rank's (mod
 * *size; a group written with its lowest member first, its stride and size kept) and every
 * other field equal (plans/uniform.c says where and why); *stride, *size: the dp dimension's
 * stride and size. 0 when not proven. */
int bs_plan_replicas_uniform(const bs_plan *p, int *stride, int *size);
/* Ranks of the double ring's inner group (1 = no double ring), for reports. */
int bs_plan_inner_ranks(const bs_plan *p);
/* What a plan for cfg on nodes of ranks_per_node ranks (<= 0: one node)
 * decides: double ring, ring sizes, all-to-all groups. 0, or -1 (invalid
 * values in cfg: d->valid = 0). Executors record it in their result. */
int bs_plan_decide(const bs_config *cfg, int ranks_per_node, bs_decision *d);
/* The decision a plan took. */
void bs_plan_decision(const bs_plan *p, bs_decision *d);

/* The single-rank computation the plan distributes: global shapes and mask
 * (decode: Nq = decode_tokens at positions seq_len..). For references. */
attn_params bs_plan_reference_params(const bs_plan *p);
/* Sequences a rank's role buffers hold (one microbatch of its replica). */
int64_t bs_plan_local_batch(const bs_plan *p);
/* usp: ranks in the ring across ulysses groups (1 for other methods). */
int bs_plan_usp_ring_size(const bs_plan *p);
/* The runs of a balance layout's shards (doc-zigzag, greedy): the attention plan's; NULL for
 * other layouts. A shard sent to another process points at the sender's: repoint it here. */
const bs_runs *bs_plan_runs(const bs_plan *p);
/* 1 when the plan has a backward pass (phase train). */
int bs_plan_has_bwd(const bs_plan *p);

/* Bytes one rank sends in a collective of `size` ranks under the ring
 * algorithms (allreduce 2(size-1)/size, allgather (size-1)x, reduce-scatter
 * and all-to-all (size-1)/size), for byte accounting in executors. */
int64_t bs_coll_bytes_sent(bs_coll_kind kind, int64_t bytes, int size);

const char *bs_role_name(bs_role r);

/* Visible (query, key) pairs between query positions q0 + a*stride (a < nq)
 * and key positions k0 + b*stride (b < nk) under causal / window masking:
 * the count behind FLOPs and fully-masked-block skipping; -1 past 2^63 - 1. */
int64_t bs_visible_pairs(int64_t q0, int64_t nq, int64_t k0, int64_t nk, int64_t stride, int causal, int64_t window);
/* The same under a workload's whole mask: causal, window and its packed documents. */
int64_t bs_workload_pairs(const bs_workload *w, int64_t q0, int64_t nq, int64_t k0, int64_t nk, int64_t stride);
/* Attention work's imbalance over `parts` ranks that split the sequence by layout l: the largest
 * rank's visible (query, key) pairs (its queries against every key) over the mean; 1: balanced
 * (also when the parts do not divide the sequence); 0 when a balance layout cannot split it. */
double bs_attn_imbalance(const bs_workload *w, bs_layout l, int parts);

/* Non-zero when the iterator stopped on a broken internal invariant (a plan
 * bug: op queue or id space exhausted) rather than at the program's end. */
int bs_plan_iter_error(const bs_plan_iter *it);
/* Why it stopped (a point too large, or the internal error above); NULL when it did not. */
const char *bs_plan_iter_errmsg(const bs_plan_iter *it);

#endif
