/*
 * result.h — what an executor (runtime or sim) reports for one config. The
 * field names mirror the result JSON of docs/design.md; src/result_fields.c
 * describes each for the JSON, CSV and table that src/output.c writes, so a new
 * member that belongs in the outputs is one row there.
 */
#ifndef BURSTSIM_RESULT_H
#define BURSTSIM_RESULT_H

#include <stdint.h>
#include "config.h"

/* Memory classes for the per-device breakdown (ALLOC ops name one). */
typedef enum {
  BS_MEM_INPUT = 0, /* q, k, v, dout shards the method starts with */
  BS_MEM_OUTPUT,    /* o, lse, dq, dk, dv the method returns */
  BS_MEM_COMM,      /* ring / collective buffers in flight */
  BS_MEM_SCORES,    /* materialised score blocks (no LAO, li2021) */
  BS_MEM_WORKSPACE, /* kernel workspaces, temporaries */
  BS_MEM_WEIGHTS,   /* model scope */
  BS_MEM_GRADS,
  BS_MEM_OPTIMIZER,
  BS_MEM_ACTIVATIONS,
  BS_MEM_LOGITS,   /* model scope: the LM head's logits and the cross-entropy's copies (workload.cross_entropy) */
  BS_MEM_KV_CACHE, /* layer and model scope, inference: the kept K, V and what the allocator reserves beside them */
  BS_MEM_CLASS_COUNT
} bs_mem_class;

const char *bs_mem_class_name(bs_mem_class c);

typedef struct {
  double step, fwd, bwd; /* seconds */
  double compute;        /* time in COMPUTE ops */
  double comm_exposed;   /* time blocked in WAIT / collectives */
  double wait_for_peers; /* sim: the part of comm_exposed before the last peer had posted (docs/design.md) */
} bs_times;

typedef struct {
  int64_t per_rank_max_sent;
  int64_t total; /* sum over ranks of bytes sent */
  int64_t intra_node, inter_node;
  /* per rank (max over ranks) by the group the traffic belongs to (bs_dim: tp, cp, dp x cp
   * gradients, pp), each op counted at its plan volume (collectives as rings) */
  int64_t by_group[BS_DIM_COUNT];
} bs_bytes;

typedef struct {
  int64_t peak_bytes_max; /* max over ranks of the plan allocator's peak */
  int64_t capacity_bytes; /* 0 = unknown */
  int oom;
  int64_t breakdown[BS_MEM_CLASS_COUNT]; /* at the peak of the rank with the max peak */
  int64_t rss_bytes;                     /* real runs: process peak RSS (max over ranks) */
} bs_memory;

typedef struct {
  int rank;
  double step, fwd, bwd, compute, comm_exposed;
  int64_t bytes_sent, bytes_recv;
  int64_t peak_bytes;
  double wait_for_peers;          /* sim: see bs_times (0 in real runs) */
  int64_t by_group[BS_DIM_COUNT]; /* sim: bytes sent by group kind (bs_bytes.by_group) */
} bs_rank_result;

/* Where a rank's step goes (the simulator fills it: sim/explain.h). The parts are disjoint and add
 * up to the rank's step: compute by kernel kind less the kernels' launch cost, the launch cost of
 * every kernel (the profile's launch_s each), exposed communication after the last peer had posted,
 * by the link class of what the rank waited for, and waiting for a slower peer (wait_for_peers). */
typedef enum {
  BS_XK_ATTN_FWD = 0, /* attention forward, fused or materialised */
  BS_XK_ATTN_BWD,     /* attention backward and its D = rowsum(dO o O) pre-pass */
  BS_XK_MERGE,        /* merging partial (o, lse) results: the online-softmax rescale */
  BS_XK_GEMM,         /* projections, MLP, LM head */
  BS_XK_ELEMWISE,     /* norms, activations, adds, optimizer steps */
  BS_XK_OTHER,        /* copies: packing, casts */
  BS_XK_COUNT
} bs_explain_kind;

typedef enum {
  BS_XL_NVLINK = 0, /* inside a node over NVLink / NVSwitch */
  BS_XL_PCIE,       /* inside a node over PCIe (and the CPU root complex between sockets) */
  BS_XL_SHM,        /* between ranks of one host through its memory (the host topology) */
  BS_XL_NETWORK,    /* across nodes: NICs and the fabric */
  BS_XL_OTHER,      /* links of no known class (a user platform's unnamed links) */
  BS_XL_COUNT
} bs_explain_link;

typedef struct {
  double compute[BS_XK_COUNT]; /* s: kernel time by kind, less the launch cost */
  double launch;               /* s: the launch cost of every kernel */
  double exposed[BS_XL_COUNT]; /* s: blocked on transfers after the last peer had posted, by link class */
  double wait_for_peers;       /* s: blocked before the last peer had posted */
} bs_explain_parts;

typedef struct {
  int critical_rank;         /* the rank that finished last (the lowest of a tie); -1: none */
  int ranks;                 /* the ranks the mean is over */
  double step;               /* s: when the critical rank ended, the sum of its parts */
  bs_explain_parts critical; /* that rank's parts: they add up to the step */
  bs_explain_parts mean;     /* the mean over the ranks */
} bs_explain;

/* What the plan decided from the request (the result JSON's "plan" object). */
typedef struct {
  int valid;                  /* 0: not recorded (the point failed before a plan was made) */
  int double_ring;            /* the K,V ring runs as a double ring (ring_outer > 1) */
  int ring_inner, ring_outer; /* ring sizes P x M: ranks per inner ring, inner rings; 1 x 1: no ring */
  int ulysses_degree;         /* ranks per all-to-all group (ulysses: all, usp: the degree); 1: none */
  int tp, cp, dp, pp;         /* the rank grid (plans/mesh.c); cp: the attention group's ranks */
  int pp_chunks;              /* model chunks per rank: 1 (1f1b), or parallel.pp_chunks (interleaved) */
  int64_t micro_batch;        /* sequences per microbatch */
  int64_t microbatches;       /* microbatches per step and replica */
  char order[16];             /* the dimensions fastest first over the ranks ("tp-cp-dp-pp") */
  double attn_imbalance;      /* max / mean attention work (visible pairs) over the ranks splitting the sequence */
} bs_decision;

typedef struct {
  bs_config cfg;
  const char *mode; /* "sim" or "run" */
  bs_times time;
  bs_bytes comm;
  bs_memory mem;
  double sim_wall_s; /* sim only */
  int64_t sim_events;
  int nranks;
  bs_rank_result *ranks; /* nranks entries, owned by the result (may be NULL) */
  char error[256];       /* "" on success */
  char sim_network[320]; /* sim: network model settings used, link classes, fold decision */
  int sim_actors;        /* sim: ranks simulated as SimGrid actors (< nranks when folded) */
  int64_t sim_rss_bytes; /* sim: peak RSS of the simulating process */
  bs_decision decision;  /* what the plan decided (double ring, ring sizes, all-to-all groups) */
  int refused;           /* with error: the method or platform cannot run the point (not a failure) */
  bs_explain explain;    /* sim: where the step goes */
  char trace_error[256]; /* sim --trace: why the simulated point's trace was not written ("" = written or
                            not asked); its figures stand, the command exits 1 */
} bs_result;

void bs_result_free(bs_result *r);

#endif
