/*
 * point.h — what the files of one point's simulation share and nobody
 * outside sim/ sees: the point's state (sim_ctx), each simulated rank's state
 * (rank_state), the map between real ranks and the actors of a fold, and the
 * functions one part of the point calls in another. Calls go one way only:
 *
 *   run.c      bs_sim_run: the layer shortcut (layers.c) or one point (isolate.c)
 *   isolate.c  the forked child a point runs in, its pipe, signals and failures
 *   check.c    the profile and topology names, checked before any point runs
 *   engine.c   one point: profile, platform, fold, SimGrid, actors, result
 *   estimate.c a point's events before it runs, so that one too large is refused (sim_work)
 *   fold.c     the pre-pass that proves which ranks share a timeline
 *   direct.c   the direct engine's transport: one event loop (direct.h); direct_coll.c runs its
 *              COLLs, direct_net.c its network (CM02, max-min sharing)
 *   actor.c    the SimGrid transport: a rank's time and messages as SimGrid activity
 *   coll.c     the actors that run a lowered COLL, one per thread
 *   coll_lower.c a member's part of a COLL as primitive steps (coll_lower.h), from
 *              coll_setup.c's setup; coll_shape.c the algorithms' shapes and alpha-beta times
 *   walk.c     the search's zero-time transport (walk.h)
 *   rank.c     the rank interpreter the transports run (transport.h): ops, checks, figures
 *   rankops.c  what an op does to its rank's state (a COLL's one post); a deadlock's message
 *   memory.c   the bytes an ALLOC holds (memory.h)
 *   coll_algo.c which algorithm and how many rings a collective gets (coll_algo.h)
 *   result.c   the figures of a finished point
 *   trace.c    the Chrome trace and the per-link statistics
 *   explain.c  where a rank's time goes (explain.h, no SimGrid call); link_class.c the class of a
 *              waited handle's route
 *   ctx.c      the first error, byte counters, the wall clock
 *   route_memo.c SimGrid's route latency and bandwidth between two hosts, asked once per pair
 *
 * Beside them, opts.c holds the options' defaults (and whether the layer
 * shortcut applies) and blas_threads.c the re-execution without an OpenBLAS
 * pool (sim.h).
 */
#ifndef BURSTSIM_SIM_POINT_H
#define BURSTSIM_SIM_POINT_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <simgrid/forward.h>

#include "base/fileio.h"
#include "plans/plan.h"
#include "sim/explain.h"
#include "sim/platform.h"
#include "profile/profile.h"
#include "sim/sim.h"

#define MAX_HANDLES 256
#define MAX_BUFS 2048 /* buffer ids of an op source without a plan (a plan says its own: bs_plan_buf_ids) */
#define MAX_PEERS 64

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

struct sim_ctx;

typedef enum { H_FREE = 0, H_SEND, H_RECV, H_COLL } hkind;

typedef struct {
  hkind kind; /* SimGrid's objects of a handle are actor.c's own (sim_sg_rank) */
  int peer, tag;
  int64_t bytes;
  void *rx; /* RECV: the payload lands here */
  double t_post;
  int64_t op_index;
  int step;       /* the op's ring step / stage (-1: none), for messages */
  double t_match; /* SEND / RECV: when both sides had posted (-1: not yet, or not known) */
  int coll_seq;   /* COLL: the rank's collective number ... */
  bs_group group; /* ... and its group (whose members' arrivals bound the wait for peers) */
  int ckind;      /* COLL: its bs_coll_kind, for the trace */
} handle;

typedef struct {
  int used;
  int64_t bytes;
  bs_mem_class cls;
} membuf;

/* Matching, for time_s.wait_for_peers: messages of a pair match in order, so the k-th post of one
 * side meets the k-th of the other; a side ahead keeps its handles until the other posts. Plain
 * bookkeeping, apart from the mailboxes (it makes no SimGrid call, so it never reorders actors). */
#define PEND_RING 32 /* posts on one side of a pair that wait for the other side, remembered */
typedef struct {
  int peer, dir; /* slot of the peer; dir (0 send, 1 recv) + 1 (0: an empty slot of rank_state.pm, see rankops.c) */
  int64_t posted;
  short pend[PEND_RING];
} pairmatch;

typedef struct sim_sg_rank sim_sg_rank;

typedef struct rank_state {
  /* scalars first, touched at every op; the large per-handle, per-peer and per-buffer tables last */
  struct sim_ctx *ctx;
  int slot; /* actor index (mailbox names, host gpu<slot>) */
  int rank; /* the real rank whose program it executes */
  int node;
  void *it;
  int64_t op_index;
  int finished;
  int npm, coll_seq;
  double fwd_begin, bwd_begin, fwd, bwd, compute, exposed, end;
  double peer_wait; /* the part of `exposed` spent before the last peer had posted (time_s.wait_for_peers) */
  int64_t sent, recvd, intra, inter;
  int64_t mem_cur, mem_peak;
  /* where the rank is blocked (formatted only if it deadlocks) */
  int blk_kind; /* 0 none, 1 WAIT on p2p, 2 WAIT on a collective */
  int64_t blk_op, blk_post_op;
  int blk_n, blk_send, blk_peer, blk_tag, blk_step;
  /* the interpreter's place in a COMPUTE or WAIT (rank.c): resumed by the transport that suspended it */
  int run;                   /* rank.c's: running, or suspended in a COMPUTE or a WAIT */
  double t0;                 /* when the COMPUTE or WAIT began */
  bs_kernel kernel;          /* the COMPUTE's, for explain */
  int nwait;                 /* the WAIT's handles */
  int32_t wait[BS_MAX_WAIT]; /* ... */
  double *coll_arr;          /* when this rank posted its k-th COLL (k = coll_seq), for its peers' waits */
  int coll_arr_cap;
  int64_t cls_cur[BS_MEM_CLASS_COUNT], cls_at_peak[BS_MEM_CLASS_COUNT];
  int64_t by_group[BS_DIM_COUNT]; /* the plan's volume of its sends by group kind (bs_bytes.by_group) */
  bs_explain_parts explain;       /* where the rank's time goes (explain.h) */
  int nxroute, xnode;             /* xroute's entries; the class inside the node plus one (0: not yet) */
  int nwtree;                     /* wtree's entries */
  pairmatch pm[MAX_PEERS];
  handle h[MAX_HANDLES];
  /* for explain (link_class.c): the link class (bs_explain_link) of the route to a peer's actor */
  struct {
    int peer, link;
  } xroute[MAX_PEERS];
  /* tree allreduces over all ranks (or all of one residue: a strided group, sim_whole_tree) whose
   * first member this rank is, timed as alpha-beta: their bytes per (bytes, stride), counted once */
  struct {
    int64_t bytes, count;
    int stride;
  } wtree[64];
  membuf *buf; /* by buffer id: nbuf entries, grown as ALLOCs reach higher ids, up to c->buf_ids (rankops.c) */
  int32_t nbuf;
} rank_state;

typedef struct sim_ctx {
  const bs_config *cfg;
  bs_mesh mesh; /* the rank grid, to class traffic by group */
  const bs_sim_opts *opts;
  const bs_profile *prof;
  const bs_sim_source *src;
  int G;     /* real ranks */
  int A;     /* actors (= G, or M * Pf when folded) */
  int rpn;   /* real ranks per node (P) */
  int M, Pf; /* folded: nodes (of every block of Ki) and ranks per node simulated */
  int Ki;    /* folded: real nodes per block (K, or a pipeline stage's nodes: the stage fold) */
  int shared_host;
  int rails;                  /* a generated dgx fabric: ring collectives run a channel per rail */
  const bs_platform_spec *ps; /* generated dgx platform: its route model (fold pre-pass, auto) */
  double host_speed;
  double exec_bound; /* shared host: the most flop/s one rank's threads can use */
  rank_state *rs;
  int32_t buf_ids; /* the buffer ids of the op source: bs_plan_buf_ids, or MAX_BUFS without a plan */
  /* each actor's SimGrid host (engine.c places them): the SimGrid transport and the direct engine's
   * routes resolve an actor (slot) through it, so that rank_state holds no SimGrid object */
  sg_host_t *hosts;
  struct sim_sg_rank *sg; /* the SimGrid transport's own state per rank (actor.c) */
  int64_t events;
  int nfinished;
  char error[512];
  char cause[256];       /* a COMPUTE's error without the rank and op that met it (the walk reports it so) */
  bs_outfile *trace_out; /* --trace: replaces the file only when the point succeeds */
  FILE *trace;
  int trace_first;
  /* per-link statistics */
  bs_link_stat *links;
  int nlinks;
  struct sim_route_memo *route_memo; /* route_memo.c: SimGrid's route figures per pair of hosts */
} sim_ctx;

/* The actor that executes a real rank's timeline (itself, or its fold image). */
static inline int slot_of(const sim_ctx *c, int rank) {
  if (c->A == c->G) return rank;
  int node = rank / c->rpn, idx = rank % c->rpn;
  return ((node / c->Ki) * c->M + (node % c->Ki) % c->M) * c->Pf + idx % c->Pf;
}
/* The real rank an actor executes. */
static inline int real_of(const sim_ctx *c, int slot) {
  if (c->A == c->G) return slot;
  int snode = slot / c->Pf;
  return ((snode / c->M) * c->Ki + snode % c->M) * c->rpn + slot % c->Pf;
}
/* Node of a real rank (folding preserves node offsets, see bs_topo_fold_nodes). */
static inline int node_of_rank(const sim_ctx *c, int rank) {
  if (c->A == c->G) return c->rs[rank].node;
  return rank / c->rpn;
}
/* The SimGrid host of a real rank's actor. */
static inline sg_host_t host_of(const sim_ctx *c, int rank) { return c->hosts[slot_of(c, rank)]; }
/* cluster.straggler: how many times longer real rank `rank`'s COMPUTE ops take (1: not the straggler). */
static inline double sim_compute_factor(const bs_config *cfg, int rank) {
  const bs_cluster *k = &cfg->cluster;
  return k->straggler_factor > 0 && rank == k->straggler_rank ? k->straggler_factor : 1.0;
}

/* ------------------------------------------------------------------ */
/* ctx.c                                                               */
/* ------------------------------------------------------------------ */

/* Records the point's error; the first one is the cause and is kept. */
void sim_error(sim_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* *acc += b for a byte counter; past int64 it is an error, never a wrapped count. */
void sim_add_bytes(rank_state *rs, int64_t *acc, int64_t b, const char *what);
/* Bytes sent to peer_rank: the rank's total and its intra- or inter-node share. */
void sim_account_sent(rank_state *rs, int peer_rank, int64_t bytes);
/* Seconds on a monotonic clock (wall time of a point, liveness lines). */
double sim_wall_now(void);

/* ------------------------------------------------------------------ */
/* route_memo.c                                                        */
/* ------------------------------------------------------------------ */

/* The latency and bandwidth of the route from host a to host b, as sg_host_get_route_latency and
 * sg_host_get_route_bandwidth give them, asked once per pair (remembered in c). */
void sim_route_figures(sim_ctx *c, sg_host_t a, sg_host_t b, double *lat, double *bw);
/* What sim_route_figures remembered, released. */
void sim_route_memo_free(sim_ctx *c);

/* ------------------------------------------------------------------ */
/* trace.c                                                             */
/* ------------------------------------------------------------------ */

/* Opens the --trace output and writes its head; 0, or -1 with "cannot write the trace: ..." in err. */
int sim_trace_open(sim_ctx *c, const char *path, char *err, size_t errlen);
/* One complete event [t0, t1] of a rank (nothing without a trace). */
void sim_trace_event(sim_ctx *c, const char *name, int rank, int node, double t0, double t1, const char *cat);
/* Ends the trace and lets it replace its file (a valid point only); 0 or -1 with a message. */
int sim_trace_commit(sim_ctx *c, char *err, size_t errlen);
/* Gives the trace up: its file stays as it was. */
void sim_trace_abort(sim_ctx *c);
/* Numbers every loaded link for the per-link statistics (c->links, c->nlinks). */
void sim_links_attach(sim_ctx *c);
/* A finished message's bytes and duration on every link of its route. */
void sim_link_account(sim_ctx *c, sg_host_t src, sg_host_t dst, int64_t bytes, double dur);

/* ------------------------------------------------------------------ */
/* actor.c, coll.c                                                     */
/* ------------------------------------------------------------------ */

/* Starts one actor per simulated rank (c->rs filled, SimGrid loaded). */
void sim_start_ranks(sim_ctx *c);
/* Starts the actor that runs rank rs's part of its collective number seq (joined by its WAIT);
 * NULL (with the error recorded) when out of memory. */
sg_actor_t sim_coll_start(rank_state *rs, bs_coll_kind kind, const bs_group *g, int64_t bytes, int seq);
/* An all-rank tree timed as a whole: its bytes, per size and group, counted once by the group's first
 * member rs (result.c adds them at fill); 0 or -1 with the error recorded. Both engines call it. */
int sim_wtree_add(rank_state *rs, int64_t bytes, const bs_group *g);

/* ------------------------------------------------------------------ */
/* link_class.c                                                        */
/* ------------------------------------------------------------------ */

/* The link class a wait on handle h counts its transfer time to: a message's route, a collective's
 * group span (the network across nodes, the node's route class inside one). */
bs_explain_link sim_handle_link(rank_state *rs, const handle *h);

/* ------------------------------------------------------------------ */
/* rankops.c: an op's effect on its rank, shared by both engines       */
/* ------------------------------------------------------------------ */

/* ALLOC / FREE on the rank's memory counter; 0 or -1 with the error recorded. */
int sim_op_alloc(rank_state *rs, const bs_op *op);
int sim_op_free(rank_state *rs, const bs_op *op);
/* A PHASE boundary at simulated time now. */
void sim_op_phase(rank_state *rs, const bs_op *op, double now);
/* A SEND (dir 0) or RECV (dir 1) with handle hd just posted to peer_slot at h->t_post: its match time. */
void sim_note_match(rank_state *rs, int peer_slot, int dir, int hd);
/* A message's payload: its tag and size (never NULL), which the RECV checks. */
void *sim_msg_encode(int tag, int64_t bytes);
/* A finished RECV's payload against what it expected; 0 or -1 with the error recorded. */
int sim_check_recv(rank_state *rs, const handle *h);
/* The size a p2p message of `bytes` moves on route w (0 intra-, 1 inter-node): bytes / p2p efficiency. */
uint64_t sim_p2p_wire_bytes(const bs_profile *prof, int w, int64_t bytes);
/* At the plan's end: the source ended it without an error and every handle was waited; 0 or -1. */
int sim_check_end(rank_state *rs);
/* A SEND or RECV posted at `now`: its handle and peer checked, then the handle's peer, tag, bytes,
 * post time, op and step set (the caller sets its kind and its engine's fields); 0 or -1 with the
 * error recorded. */
int sim_op_post_p2p(rank_state *rs, const bs_op *op, double now);
/* A COLL posted at now (the interpreter's, before the transport's coll): its handle and group
 * checked, its arrival noted for its peers' waits, its bytes counted by the mesh's group kind, its
 * handle set (group, kind, peer -1, post) as the rank's next collective number, which h->coll_seq
 * holds and rs->coll_seq passes; 0 or -1 with the error recorded. */
int sim_op_post_coll(rank_state *rs, const bs_op *op, double now);
/* After a run (either engine) with ranks unfinished: the error that names who is stuck and where. */
void sim_deadlock_error(sim_ctx *c);

/* ------------------------------------------------------------------ */
/* fold.c                                                              */
/* ------------------------------------------------------------------ */

/* A fold: of every block of Ki real nodes (Ki = K but for the stage fold, where a block is a
 * pipeline stage's nodes), its first M nodes, and of every node its first Pf ranks, are simulated
 * (wrap > 0: the leaf-wrapped quotient); (K / Ki) x M nodes in all. */
typedef struct {
  int M, Pf, wrap, Ki;
} sim_fold;

/*
 * The fold whose actors stand for all ranks (plan: the plan behind src, NULL for another source;
 * it may prove the ranks alike, bs_plan_ring_uniform, or its replicas, bs_plan_replicas_uniform). Returns 0 (maybe M = Ki = K and Pf = P: no fold)
 * or -1 on error. why: a sentence for the result.
 */
int sim_choose_fold(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof, const bs_platform_spec *ps,
                    const bs_sim_source *src, const bs_plan *plan, sim_fold *f, char *why, size_t whylen, char *err,
                    size_t errlen);

/* ------------------------------------------------------------------ */
/* estimate.c                                                          */
/* ------------------------------------------------------------------ */

/* A point's work before it is simulated: the events of every rank's program, from a few ranks read. */
typedef struct {
  double events;      /* every rank's: per_rank x ranks */
  double per_rank;    /* the mean of the ranks read */
  int sampled;        /* ranks read (the first, the middle, the last) */
  int at_least;       /* reading stopped past the bound: events is a lower bound */
  double state_bytes; /* the simulator's per-rank state for every rank, unfolded (address space) */
} sim_work;

/* The estimate for nsim ranks (the mean of the sampled ranks times nsim); reading stops somewhat past max_events (> 0; 0: reads the sampled ranks whole). 0, or
 * -1 when an iterator cannot be made (out of memory). */
int sim_work_estimate(const bs_sim_source *src, int nsim, double max_events, sim_work *w);
/* 0 when the events of nsim ranks (all of src's, or those a fold simulates) stay within
 * max_events (or max_events <= 0); else -1 with a message naming parallel.gpus, the estimate, its
 * CPU time at BS_SIM_EVENTS_PER_S and --max-events. */
int sim_work_check(const bs_sim_source *src, int nsim, double max_events, char *err, size_t errlen);

/* ------------------------------------------------------------------ */
/* result.c                                                            */
/* ------------------------------------------------------------------ */

/* Fills out from the ranks' states; -1 with a message when a total passes int64. */
int sim_fill_result(sim_ctx *c, bs_result *out, char *err, size_t errlen);
/* The times of a result are ones the simulator can report; 0, or -1 with a message. */
int sim_check_times(const bs_result *out, char *err, size_t errlen);
/* The result names the profile the point ran with: --profile (as given) over the scenario's;
 * and the leaves: --nodes-per-leaf and --oversub over cluster.nodes_per_leaf and cluster.oversub. */
void sim_record_profile(bs_result *out, const bs_sim_opts *opts);

/* ------------------------------------------------------------------ */
/* engine.c                                                            */
/* ------------------------------------------------------------------ */

/* Simulates one point in this process (SimGrid starts once per process): the
 * return values of bs_sim_run; out->error holds the message of a failure. */
int sim_point(const bs_config *cfg, const bs_sim_opts *opts, const bs_sim_source *given, bs_result *out,
              bs_link_stat **links_out, int *nlinks_out, char *err, size_t errlen);

/* ------------------------------------------------------------------ */
/* isolate.c                                                           */
/* ------------------------------------------------------------------ */

/* Exit codes of a child that are not a result. */
#define CHILD_OUT_OF_MEMORY 4
#define CHILD_ORPHANED 5

/* A forked child that dies with this process, and the pipe it writes its answer to. */
typedef struct {
  pid_t pid;      /* in the parent: the child */
  int fd;         /* in the parent: the read end; in the child: the write end */
  int fork_errno; /* a failed fork's errno (0: the pipe failed) */
} sim_child;

/* Starts the child: 1 in the child, 0 in the parent, -1 with "pipe: ..." or "fork: ..." in err. */
int sim_child_start(sim_child *ch, char *err, size_t errlen);
/* Reaps the child; its wait status. */
int sim_child_reap(pid_t pid);
/* Whole writes and reads on a pipe (EINTR retried); 0 or -1. */
int sim_write_all(int fd, const void *p, size_t n);
int sim_read_all(int fd, void *p, size_t n);

#endif
