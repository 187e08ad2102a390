/*
 * engine.c — bs_sim_run (sim.h): one SimGrid actor per GPU executing its
 * rank's plan; memory counters; message checks; deadlock detection; the
 * symmetric-plan fold; the forked child that keeps SimGrid to one init per
 * process.
 *
 * Fold (the shortcut that makes 1024 GPUs fit in seconds): when every rank's
 * program equals that of the rank F below it with peers shifted by F (checked
 * op by op, with COMPUTE compared by modelled duration) and the generated
 * fabric maps onto itself when shifted by F/ranks_per_node nodes
 * (bs_topo_fold_nodes), the ranks r and r mod F have identical timelines, so
 * only F actors are simulated on an F-rank platform, peers taken modulo F.
 * Ring collectives count by their neighbours on every channel, tree
 * allreduces over every rank (timed as a whole) by their size; a dgx fabric
 * whose uplinks cannot limit a flow folds as a single leaf.
 * tests/sim checks the folded figures against the straightforward run.
 */
#include "sim.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <simgrid/mailbox.h>
#include <simgrid/semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xbt/config.h>
#include <xbt/dynar.h>
#include <xbt/log.h>

#include "base/fileio.h"
#include "plans/plan.h"
#include "sim/coll_shape.h"
#include "sim/load.h"
#include "sim/platform.h"
#include "sim/profile.h"

#define MAX_HANDLES 256
#define MAX_BUFS 1024
#define MAX_PEERS 64
#define BS_MAX_CHANNELS 16

void bs_sim_opts_default(bs_sim_opts *o) {
  memset(o, 0, sizeof *o);
  o->fold = BS_AUTO;
  o->coll_model = BS_COLL_MODEL_AUTO;
  o->layers = BS_AUTO;
  o->crosstraffic = -1;
  o->tcp_gamma = -1;
}

static double now_wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

struct sim_ctx;

typedef enum { H_FREE = 0, H_SEND, H_RECV, H_COLL } hkind;

typedef struct {
  hkind kind;
  sg_comm_t comm;           /* SEND / RECV */
  sg_actor_t coll;          /* COLL helper actor (referenced) */
  int peer, tag;
  int64_t bytes;
  void *rx;                 /* RECV: the payload lands here */
  double t_post;
  int64_t op_index;
  int step;                 /* the op's ring step / stage (-1: none), for messages */
} handle;

typedef struct {
  int used;
  int64_t bytes;
  bs_mem_class cls;
} membuf;

typedef struct {
  int peer;                 /* slot of the peer */
  int dir;                  /* 0 send (me -> peer), 1 recv (peer -> me) */
  sg_mailbox_t mb;
} mbcache;

typedef struct rank_state {
  struct sim_ctx *ctx;
  int slot;                 /* actor index (mailbox names, host gpu<slot>) */
  int rank;                 /* the real rank whose program it executes */
  sg_host_t host;
  int node;
  void *it;
  handle h[MAX_HANDLES];
  membuf buf[MAX_BUFS];
  int64_t mem_cur, mem_peak;
  int64_t cls_cur[BS_MEM_CLASS_COUNT], cls_at_peak[BS_MEM_CLASS_COUNT];
  mbcache mbc[MAX_PEERS];
  int nmbc;
  int coll_seq;
  double fwd_begin, bwd_begin, fwd, bwd, compute, exposed, end;
  int64_t sent, recvd, intra, inter;
  int64_t op_index;
  int finished;
  /* where the rank is blocked (formatted only if it deadlocks) */
  int blk_kind;             /* 0 none, 1 WAIT on p2p, 2 WAIT on a collective */
  int64_t blk_op, blk_post_op;
  int blk_n, blk_send, blk_peer, blk_tag, blk_step;
} rank_state;

typedef struct {
  rank_state *rs;
  bs_coll_kind kind;
  bs_group group;
  int64_t bytes;
  int seq;
} coll_job;

typedef struct sim_ctx {
  const bs_config *cfg;
  const bs_sim_opts *opts;
  const bs_profile *prof;
  const bs_sim_source *src;
  int G;                    /* real ranks */
  int A;                    /* actors (= G, or M * Pf when folded) */
  int rpn;                  /* real ranks per node (P) */
  int M, Pf;                /* folded: nodes and ranks per node simulated */
  int shared_host;
  int rails;                /* a generated dgx fabric: ring collectives run a channel per rail */
  const bs_platform_spec *ps; /* generated dgx platform: its route model (fold pre-pass, auto) */
  double host_speed;
  double exec_bound;        /* shared host: the most flop/s one rank's threads can use */
  rank_state *rs;
  int64_t events;
  int nfinished;
  char error[512];
  bs_outfile *trace_out;    /* --trace: replaces the file only when the point succeeds */
  FILE *trace;
  int trace_first;
  /* per-link statistics */
  bs_link_stat *links;
  int nlinks;
  /* tree allreduces over all ranks timed as alpha-beta: their bytes, per (bytes), counted once */
  struct { int64_t bytes, count; } wtree[16];
  int nwtree;
} sim_ctx;

static void set_error(sim_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(sim_ctx *c, const char *fmt, ...) {
  if (c->error[0]) return; /* the first error is the cause */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof c->error, fmt, ap);
  va_end(ap);
}

/* The actor that executes a real rank's timeline (itself, or its fold image). */
static int slot_of(const sim_ctx *c, int rank) {
  if (c->A == c->G) return rank;
  int node = rank / c->rpn, idx = rank % c->rpn;
  return (node % c->M) * c->Pf + idx % c->Pf;
}
/* The real rank an actor executes. */
static int real_of(const sim_ctx *c, int slot) {
  if (c->A == c->G) return slot;
  return (slot / c->Pf) * c->rpn + slot % c->Pf;
}

/* Node of a real rank (folding preserves node offsets, see bs_topo_fold_nodes). */
static int node_of_rank(const sim_ctx *c, int rank) {
  if (c->A == c->G) return c->rs[rank].node;
  return rank / c->rpn;
}

static sg_mailbox_t mailbox(rank_state *rs, int peer_slot, int dir) {
  for (int i = 0; i < rs->nmbc; i++)
    if (rs->mbc[i].peer == peer_slot && rs->mbc[i].dir == dir) return rs->mbc[i].mb;
  char name[48];
  int src = dir ? peer_slot : rs->slot, dst = dir ? rs->slot : peer_slot;
  snprintf(name, sizeof name, "p%d:%d", src, dst);
  sg_mailbox_t mb = sg_mailbox_by_name(name);
  if (rs->nmbc < MAX_PEERS) rs->mbc[rs->nmbc++] = (mbcache){peer_slot, dir, mb};
  return mb;
}

/* The payload of a message: its tag and size, never NULL. */
static void *encode_msg(int tag, int64_t bytes) {
  uint64_t v = (1ull << 63) | ((uint64_t)(uint32_t)tag << 31) | ((uint64_t)bytes & 0x7fffffffull);
  return (void *)(uintptr_t)v;
}
static void decode_msg(void *p, int *tag, int64_t *bytes_low) {
  uint64_t v = (uint64_t)(uintptr_t)p;
  *tag = (int)(uint32_t)((v >> 31) & 0xffffffffull);
  *bytes_low = (int64_t)(v & 0x7fffffffull);
}

static void trace_event(sim_ctx *c, const char *name, int rank, int node, double t0, double t1,
                        const char *cat) {
  if (!c->trace) return;
  double ts = t0 * 1e6, dur = (t1 - t0) * 1e6;
  if (!isfinite(ts) || !isfinite(dur)) { /* JSON has no inf or nan: the point fails, no file */
    set_error(c, "%s: rank %d's %s at %g s for %g s is not a finite time; no trace written",
              c->opts->trace_path, rank, name, t0, t1 - t0);
    return;
  }
  fprintf(c->trace, "%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
          "\"ts\":%.3f,\"dur\":%.3f}", c->trace_first ? "\n" : ",\n", name, cat, node, rank, ts, dur);
  c->trace_first = 0;
}

/* ------------------------------------------------------------------ */
/* Link statistics (tests, --trace)                                    */
/* ------------------------------------------------------------------ */

static void link_account(sim_ctx *c, sg_host_t src, sg_host_t dst, int64_t bytes, double dur) {
  if (!c->nlinks) return;
  xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
  sg_host_get_route(src, dst, d);
  unsigned i;
  sg_link_t l;
  xbt_dynar_foreach(d, i, l) {
    intptr_t id = (intptr_t)sg_link_get_data(l);
    if (id > 0 && id <= c->nlinks) {
      c->links[id - 1].bytes += (double)bytes;
      c->links[id - 1].busy_s += dur;
    }
  }
  xbt_dynar_free(&d);
}

/* ------------------------------------------------------------------ */
/* Collectives: NCCL's ring and double-binary-tree algorithms as       */
/* point-to-point steps, or their alpha-beta times (sim/coll_shape.h)  */
/* ------------------------------------------------------------------ */

static int member(const bs_group *g, int idx) { return g->first + g->stride * idx; }

/* *acc += b for a byte counter; past int64 it is an error, never a wrapped count. */
static void add_bytes(rank_state *rs, int64_t *acc, int64_t b, const char *what) {
  if (__builtin_add_overflow(*acc, b, acc))
    set_error(rs->ctx, "rank %d op #%lld: %s overflows a 64-bit byte count (the point is too large)",
              rs->rank, (long long)rs->op_index, what);
}

/* Bytes sent to peer_rank: the rank's total and its intra- or inter-node share. */
static void account_sent(rank_state *rs, int peer_rank, int64_t bytes) {
  sim_ctx *c = rs->ctx;
  add_bytes(rs, &rs->sent, bytes, "bytes sent");
  if (node_of_rank(c, peer_rank) == node_of_rank(c, rs->rank)) add_bytes(rs, &rs->intra, bytes, "intra-node bytes");
  else add_bytes(rs, &rs->inter, bytes, "inter-node bytes");
}

static void coll_account(rank_state *rs, int peer_rank, int64_t bytes) { account_sent(rs, peer_rank, bytes); }

static sg_host_t host_of(const sim_ctx *c, int rank) { return c->rs[slot_of(c, rank)].host; }

/* The group's first pair of members inside a node (p[0], p[1]) and across nodes (p[2], p[3]);
 * an absent kind copies the other. Member indices. */
static void group_pairs(const bs_group *g, const int *node, int p[4]) {
  int n = g->size, ia = -1, ib = -1, ea = -1, eb = -1;
  for (int m = 1; m < n && (ia < 0 || ea < 0); m++) {
    if (ia < 0 && node[m] == node[m - 1]) ia = m - 1, ib = m;
    if (ea < 0 && node[m] != node[0]) ea = 0, eb = m;
  }
  if (ia < 0) ia = ea, ib = eb;
  if (ea < 0) ea = ia, eb = ib;
  p[0] = ia, p[1] = ib, p[2] = ea, p[3] = eb;
}

/* Route latency and bandwidth inside a node and between nodes, from the
 * group's first pair of members of each kind. */
static void group_links(const sim_ctx *c, const bs_group *g, const int *node, bs_coll_links *l) {
  int p[4];
  group_pairs(g, node, p);
  int ia = p[0], ib = p[1], ea = p[2], eb = p[3];
  sg_host_t a = host_of(c, member(g, ia)), b = host_of(c, member(g, ib));
  l->lat_intra = sg_host_get_route_latency(a, b);
  l->bw_intra = sg_host_get_route_bandwidth(a, b);
  a = host_of(c, member(g, ea));
  b = host_of(c, member(g, eb));
  l->lat_inter = sg_host_get_route_latency(a, b);
  l->bw_inter = sg_host_get_route_bandwidth(a, b);
}

/* One direction of one tree of a tree allreduce, run by its own actor. */
typedef struct {
  rank_state *rs;
  int seq, tree, up;        /* up: reduce towards the root; else broadcast down */
  int parent;               /* real rank, -1 at the root */
  int nchild, child[BS_TREE_MAX_CHILDREN];
  int64_t half;
  int chunks;
  sg_sem_t root_sem;        /* the root's reduced chunks, up -> down */
} tree_part;

static sg_mailbox_t tree_mailbox(const tree_part *tp, int from_rank, int to_rank) {
  const sim_ctx *c = tp->rs->ctx;
  char nm[64];
  snprintf(nm, sizeof nm, "t%d.%d%c:%d:%d", tp->seq, tp->tree, tp->up ? 'u' : 'd', slot_of(c, from_rank),
           slot_of(c, to_rank));
  return sg_mailbox_by_name(nm);
}

static int tree_dummy_payload; /* SimGrid aborts on NULL payloads */

static void tree_part_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  tree_part *tp = sg_actor_self_get_data();
  rank_state *rs = tp->rs;
  sim_ctx *c = rs->ctx;
  int me = rs->rank;
  sg_mailbox_t from_parent = NULL, to_parent = NULL, from_child[BS_TREE_MAX_CHILDREN],
               to_child[BS_TREE_MAX_CHILDREN];
  if (tp->parent >= 0) {
    from_parent = tree_mailbox(tp, tp->parent, me);
    to_parent = tree_mailbox(tp, me, tp->parent);
  }
  for (int k = 0; k < tp->nchild; k++) {
    from_child[k] = tree_mailbox(tp, tp->child[k], me);
    to_child[k] = tree_mailbox(tp, me, tp->child[k]);
  }
  /* One chunk in flight behind the one being received: the pipeline. */
  sg_comm_t out[BS_TREE_MAX_CHILDREN];
  int nout = 0;
  for (int ch = 0; ch < tp->chunks; ch++) {
    int64_t s = bs_tree_chunk_size(tp->half, tp->chunks, ch);
    if (tp->up) {
      sg_comm_t in[BS_TREE_MAX_CHILDREN];
      void *rx[BS_TREE_MAX_CHILDREN];
      for (int k = 0; k < tp->nchild; k++) in[k] = sg_mailbox_get_async(from_child[k], &rx[k]);
      if (tp->nchild) sg_comm_wait_all(in, (size_t)tp->nchild);
      if (tp->parent < 0) {
        sg_sem_release(tp->root_sem);
        continue;
      }
      if (nout) sg_comm_wait_all(out, (size_t)nout);
      out[0] = sg_mailbox_put_async(to_parent, &tree_dummy_payload, s);
      nout = 1;
      coll_account(rs, tp->parent, s);
      c->events++;
    } else {
      if (tp->parent < 0) sg_sem_acquire(tp->root_sem);
      else {
        void *rx;
        sg_comm_wait(sg_mailbox_get_async(from_parent, &rx));
      }
      if (nout) sg_comm_wait_all(out, (size_t)nout);
      for (int k = 0; k < tp->nchild; k++) {
        out[k] = sg_mailbox_put_async(to_child[k], &tree_dummy_payload, s);
        coll_account(rs, tp->child[k], s);
        c->events++;
      }
      nout = tp->nchild;
    }
  }
  if (nout) sg_comm_wait_all(out, (size_t)nout);
}

/* Tree allreduce as steps: each tree's half reduced up and broadcast down, chunk by chunk. */
static int tree_allreduce(rank_state *rs, const coll_job *job, int me, const int *node) {
  sim_ctx *c = rs->ctx;
  const bs_group *g = &job->group;
  int64_t half[2] = {job->bytes / 2, job->bytes - job->bytes / 2};
  tree_part tp[4];
  sg_actor_t a[4];
  sg_sem_t sem[2] = {sg_sem_init(0), sg_sem_init(0)};
  int na = 0;
  for (int t = 0; t < 2; t++) {
    if (half[t] < 1) continue;
    bs_tree_vertex v;
    if (bs_dtree_vertex(g->size, node, t, me, &v)) {
      set_error(c, "out of memory");
      break;
    }
    for (int up = 1; up >= 0; up--) {
      tree_part *p = &tp[na];
      *p = (tree_part){rs, job->seq, t, up, v.parent >= 0 ? member(g, v.parent) : -1, v.nchild, {0},
                       half[t], bs_tree_chunks(half[t]), sem[t]};
      for (int k = 0; k < v.nchild; k++) p->child[k] = member(g, v.child[k]);
      char name[48];
      snprintf(name, sizeof name, "tree%d.%d.%d%c", rs->slot, job->seq, t, up ? 'u' : 'd');
      a[na] = sg_actor_init(name, rs->host);
      sg_actor_ref(a[na]);
      sg_actor_set_data(a[na], p);
      sg_actor_start_(a[na], tree_part_main, 0, NULL);
      na++;
    }
  }
  for (int i = 0; i < na; i++) {
    sg_actor_join(a[i], -1);
    sg_actor_unref(a[i]);
  }
  sg_sem_destroy(sem[0]);
  sg_sem_destroy(sem[1]);
  return c->error[0] ? -1 : 0;
}

/* Bytes a member sends in a tree allreduce (for the analytic option's accounting). */
static void tree_account(rank_state *rs, const coll_job *job, int me, const int *node) {
  const bs_group *g = &job->group;
  int64_t half[2] = {job->bytes / 2, job->bytes - job->bytes / 2};
  for (int t = 0; t < 2; t++) {
    bs_tree_vertex v;
    if (half[t] < 1 || bs_dtree_vertex(g->size, node, t, me, &v)) continue;
    if (v.parent >= 0) coll_account(rs, member(g, v.parent), half[t]);
    for (int k = 0; k < v.nchild; k++) coll_account(rs, member(g, v.child[k]), half[t]);
  }
}

const char *bs_coll_model_name(bs_coll_model m) {
  switch (m) {
  case BS_COLL_STEPS: return "steps";
  case BS_COLL_FLOW: return "flow";
  case BS_COLL_ANALYTIC: return "analytic";
  default: return "auto";
  }
}

/* Rings per collective: one per rail when the group is whole nodes (at least two) of a
 * rail-optimized fabric (coll_shape.h, bs_ring_channel_peer); else NCCL's single ring. */
static int ring_channels(int rails, int rpn, const bs_group *g) {
  if (!rails || rpn < 2 || g->stride != 1 || g->first % rpn || g->size % rpn || g->size / rpn < 2) return 1;
  return rpn > BS_MAX_CHANNELS ? 1 : rpn;
}

/* Member index of me's ring neighbour on channel ch (dir +1 next, -1 previous). */
static int ring_peer(int C, int rpn, int n, int ch, int me, int dir) {
  if (C == 1) return (me + n + dir) % n;
  return bs_ring_channel_peer(rpn, n / rpn, ch, me, dir);
}

/* A lockstep ring's alpha-beta time: every step as slow as the group's slowest link class
 * (multi: the group spans nodes). */
static double ring_lockstep_time(const bs_coll_links *l, int multi, int steps, int64_t chunk) {
  double lat = multi && l->lat_inter > l->lat_intra ? l->lat_inter : l->lat_intra;
  double bw = multi && l->bw_inter < l->bw_intra ? l->bw_inter : l->bw_intra;
  return bs_ring_time(steps, chunk < 1 ? 1 : chunk, lat, bw);
}

/*
 * cluster.coll_algo = auto for an allreduce: NCCL's rule, the lower modelled
 * time (NCCL src/graph/tuning.cc). Every member decides alike: the ring
 * is timed at its slowest link class, not at a member's own next hop.
 * *t_tree: the tree's modelled time (< 0: out of memory, then the ring).
 */
static bs_coll_algo auto_algo(int n, const int *node, int multi, int64_t bytes, const bs_coll_links *l, int C,
                              double *t_tree) {
  *t_tree = bs_tree_allreduce_time(n, node, bytes, l);
  if (*t_tree < 0) return BS_COLL_ALGO_RING;
  return *t_tree < ring_lockstep_time(l, multi, 2 * (n - 1), bytes / n / C) ? BS_COLL_ALGO_TREE : BS_COLL_ALGO_RING;
}

/* The route figures of a generated dgx platform (sim/platform.h) for a group's first
 * intra-node and inter-node member pairs, as group_links reads them from SimGrid. */
static int group_links_model(const bs_platform_spec *ps, const bs_group *g, const int *node, bs_coll_links *l) {
  int p[4];
  group_pairs(g, node, p);
  return bs_platform_route(ps, member(g, p[0]), member(g, p[1]), &l->lat_intra, &l->bw_intra) ||
         bs_platform_route(ps, member(g, p[2]), member(g, p[3]), &l->lat_inter, &l->bw_inter);
}

/* A group of every rank: its tree allreduce, when not run as steps, is timed as a whole. */
static int whole_tree(int G, const bs_group *g) { return g->first == 0 && g->stride == 1 && g->size == G && G > 1; }

static int wtree_add(sim_ctx *c, int64_t bytes) {
  for (int i = 0; i < c->nwtree; i++)
    if (c->wtree[i].bytes == bytes) {
      c->wtree[i].count++;
      return 0;
    }
  if (c->nwtree == (int)(sizeof c->wtree / sizeof c->wtree[0])) {
    set_error(c, "more than %d sizes of all-rank tree allreduce in one plan", c->nwtree);
    return -1;
  }
  c->wtree[c->nwtree].bytes = bytes;
  c->wtree[c->nwtree++].count = 1;
  return 0;
}

static void coll_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  coll_job *job = sg_actor_self_get_data();
  rank_state *rs = job->rs;
  sim_ctx *c = rs->ctx;
  const bs_group *g = &job->group;
  int n = g->size, me = -1;
  for (int i = 0; i < n; i++)
    if (member(g, i) == rs->rank) me = i;
  if (me < 0 || n < 1) {
    set_error(c, "rank %d: COLL %s over group {first %d, stride %d, size %d} that does not hold it",
              rs->rank, bs_coll_name(job->kind), g->first, g->stride, g->size);
    free(job);
    return;
  }
  if (n == 1) {
    free(job);
    return;
  }
  int64_t chunk = job->bytes / n;
  int steps = 0;
  switch (job->kind) {
  case BS_COLL_ALLREDUCE: steps = 2 * (n - 1); break;
  case BS_COLL_ALLGATHER: steps = n - 1; chunk = job->bytes; break;
  case BS_COLL_REDUCE_SCATTER: steps = n - 1; break;
  case BS_COLL_ALLTOALL: steps = -1; break;
  default:
    set_error(c, "rank %d: unknown collective %d", rs->rank, (int)job->kind);
    free(job);
    return;
  }
  if (chunk < 1) chunk = 1;
  int *node = malloc(sizeof *node * (size_t)n);
  if (!node) {
    set_error(c, "out of memory");
    free(job);
    return;
  }
  int multi = 0;
  for (int i = 0; i < n; i++) {
    node[i] = node_of_rank(c, member(g, i));
    multi |= node[i] != node[0];
  }
  bs_coll_links l;
  group_links(c, g, node, &l);
  int C = steps < 0 ? 1 : ring_channels(c->rails, c->rpn, g);
  /* Only allreduce has a tree in NCCL; allgather and reduce-scatter are rings. */
  bs_coll_algo algo = job->kind == BS_COLL_ALLREDUCE ? c->cfg->cluster.coll_algo : BS_COLL_ALGO_RING;
  double t_tree = -1;
  if (algo == BS_COLL_ALGO_AUTO) {
    /* On a generated dgx platform the fold pre-pass decides from the same route model
     * (rank_signature), so the routes SimGrid gives must be the modelled ones. */
    bs_coll_links lm;
    if (c->ps && !group_links_model(c->ps, g, node, &lm) &&
        (fabs(lm.lat_intra - l.lat_intra) > 1e-12 * (1 + l.lat_intra) ||
         fabs(lm.lat_inter - l.lat_inter) > 1e-12 * (1 + l.lat_inter) ||
         fabs(lm.bw_intra - l.bw_intra) > 1e-9 * l.bw_intra || fabs(lm.bw_inter - l.bw_inter) > 1e-9 * l.bw_inter)) {
      set_error(c, "internal: the route model of %s differs from SimGrid's routes (intra %g s %g B/s vs %g s "
                "%g B/s, inter %g s %g B/s vs %g s %g B/s)", c->ps->tp.name, lm.lat_intra, lm.bw_intra,
                l.lat_intra, l.bw_intra, lm.lat_inter, lm.bw_inter, l.lat_inter, l.bw_inter);
      free(node);
      free(job);
      return;
    }
    algo = auto_algo(n, node, multi, job->bytes, &l, C, &t_tree);
  }
  bs_coll_model model = c->opts->coll_model;
  if (model == BS_COLL_MODEL_AUTO) model = multi ? BS_COLL_FLOW : BS_COLL_STEPS;
  char name[64];
  if (algo == BS_COLL_ALGO_TREE) {
    /* Timed as a whole: analytic, or (flow) over every rank, the same on every member so that
     * it folds; the bytes of an all-rank tree are added once, by rank 0, when the result is
     * filled. Otherwise the tree's steps. */
    int whole = model != BS_COLL_STEPS && whole_tree(c->G, g);
    if (whole || model == BS_COLL_ANALYTIC) {
      if (!whole) {
        tree_account(rs, job, me, node);
      } else if (rs->rank == 0 && wtree_add(c, job->bytes)) {
        free(node);
        free(job);
        return;
      }
      if (t_tree < 0) t_tree = bs_tree_allreduce_time(n, node, job->bytes, &l);
      c->events++;
      sg_actor_sleep_for(t_tree > 0 ? t_tree : 0);
    } else {
      tree_allreduce(rs, job, me, node);
    }
    free(node);
    free(job);
    return;
  }
  free(node);
  static int dummy_payload; /* SimGrid aborts on NULL payloads */
  if (steps < 0) {
    sg_host_t hb = host_of(c, member(g, (me + 1) % n));
    double lat = sg_host_get_route_latency(rs->host, hb), bw = sg_host_get_route_bandwidth(rs->host, hb);
    if (model == BS_COLL_ANALYTIC) {
      /* n-1 chunks leave through the same route class. */
      for (int s = 1; s < n; s++) coll_account(rs, member(g, (me + s) % n), chunk);
      c->events++;
      sg_actor_sleep_for(lat + (double)chunk * (n - 1) / bw);
      free(job);
      return;
    }
    /* All-to-all: every pair at once, as NCCL's grouped send/recv does. */
    sg_comm_t *cm = malloc(sizeof *cm * 2 * (size_t)n);
    void **rx = malloc(sizeof *rx * (size_t)n);
    if (!cm || !rx) {
      set_error(c, "out of memory");
      free(cm);
      free(rx);
      free(job);
      return;
    }
    int k = 0;
    for (int s = 1; s < n; s++) {
      int to = member(g, (me + s) % n), from = member(g, (me + n - s) % n);
      snprintf(name, sizeof name, "c%d:%d:%d", job->seq, slot_of(c, from), rs->slot);
      cm[k++] = sg_mailbox_get_async(sg_mailbox_by_name(name), &rx[s]);
      snprintf(name, sizeof name, "c%d:%d:%d", job->seq, rs->slot, slot_of(c, to));
      cm[k++] = sg_mailbox_put_async(sg_mailbox_by_name(name), &dummy_payload, chunk);
      coll_account(rs, to, chunk);
      c->events++;
    }
    sg_comm_wait_all(cm, (size_t)k);
    free(cm);
    free(rx);
    free(job);
    return;
  }
  /* Rings: C channels, each carrying its share of every step's chunk. */
  int next[BS_MAX_CHANNELS], prev[BS_MAX_CHANNELS];
  int64_t part[BS_MAX_CHANNELS];
  sg_mailbox_t in[BS_MAX_CHANNELS], out[BS_MAX_CHANNELS];
  int nch = 0;
  for (int ch = 0; ch < C; ch++) {
    int64_t p = chunk / C + (ch < chunk % C);
    if (p < 1) continue;
    part[nch] = p;
    next[nch] = member(g, ring_peer(C, c->rpn, n, ch, me, +1));
    prev[nch] = member(g, ring_peer(C, c->rpn, n, ch, me, -1));
    snprintf(name, sizeof name, "c%d.%d:%d:%d", job->seq, ch, slot_of(c, prev[nch]), rs->slot);
    in[nch] = sg_mailbox_by_name(name);
    snprintf(name, sizeof name, "c%d.%d:%d:%d", job->seq, ch, rs->slot, slot_of(c, next[nch]));
    out[nch] = sg_mailbox_by_name(name);
    nch++;
  }
  double t_ring = ring_lockstep_time(&l, multi, steps, part[0]);
  if (model == BS_COLL_ANALYTIC) {
    for (int k = 0; k < nch; k++) coll_account(rs, next[k], part[k] * steps);
    c->events++;
    sg_actor_sleep_for(t_ring);
    free(job);
    return;
  }
  sg_comm_t cm[2 * BS_MAX_CHANNELS];
  void *rx[BS_MAX_CHANNELS];
  if (model == BS_COLL_FLOW) {
    double t0 = simgrid_get_clock();
    for (int k = 0; k < nch; k++) {
      cm[2 * k] = sg_mailbox_get_async(in[k], &rx[k]);
      cm[2 * k + 1] = sg_mailbox_put_async(out[k], &dummy_payload, part[k] * steps);
      coll_account(rs, next[k], part[k] * steps);
      c->events++;
    }
    sg_comm_wait_all(cm, 2 * (size_t)nch);
    double left = t0 + t_ring - simgrid_get_clock();
    if (left > 0) sg_actor_sleep_for(left);
    free(job);
    return;
  }
  for (int s = 0; s < steps; s++) {
    for (int k = 0; k < nch; k++) {
      cm[2 * k] = sg_mailbox_get_async(in[k], &rx[k]);
      cm[2 * k + 1] = sg_mailbox_put_async(out[k], &dummy_payload, part[k]);
      coll_account(rs, next[k], part[k]);
      c->events++;
    }
    sg_comm_wait_all(cm, 2 * (size_t)nch);
  }
  free(job);
}

/* ------------------------------------------------------------------ */
/* The rank actor                                                      */
/* ------------------------------------------------------------------ */

static int do_alloc(rank_state *rs, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  int b = op->u.alloc.buf;
  if (b < 0 || b >= MAX_BUFS || rs->buf[b].used || op->u.alloc.bytes < 0 ||
      op->u.alloc.cls < 0 || op->u.alloc.cls >= BS_MEM_CLASS_COUNT) {
    set_error(c, "rank %d op #%lld: ALLOC of buffer %d (%lld bytes, class %d) is invalid or the "
              "buffer is already allocated", rs->rank, (long long)rs->op_index, b,
              (long long)op->u.alloc.bytes, (int)op->u.alloc.cls);
    return -1;
  }
  rs->buf[b] = (membuf){1, op->u.alloc.bytes, op->u.alloc.cls};
  add_bytes(rs, &rs->mem_cur, op->u.alloc.bytes, "memory in use");
  add_bytes(rs, &rs->cls_cur[op->u.alloc.cls], op->u.alloc.bytes, "memory in use");
  if (rs->mem_cur > rs->mem_peak) {
    rs->mem_peak = rs->mem_cur;
    memcpy(rs->cls_at_peak, rs->cls_cur, sizeof rs->cls_cur);
  }
  return 0;
}

static int do_free(rank_state *rs, const bs_op *op) {
  int b = op->u.free.buf;
  if (b < 0 || b >= MAX_BUFS || !rs->buf[b].used) {
    set_error(rs->ctx, "rank %d op #%lld: FREE of buffer %d that is not allocated", rs->rank,
              (long long)rs->op_index, b);
    return -1;
  }
  rs->mem_cur -= rs->buf[b].bytes;
  rs->cls_cur[rs->buf[b].cls] -= rs->buf[b].bytes;
  rs->buf[b].used = 0;
  return 0;
}

static int do_p2p(rank_state *rs, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  int hd = op->handle, peer = op->u.p2p.peer;
  if (hd < 0 || hd >= MAX_HANDLES || rs->h[hd].kind != H_FREE) {
    set_error(c, "rank %d op #%lld: %s uses handle %d that is invalid or still in use", rs->rank,
              (long long)rs->op_index, bs_op_kind_name(op->kind), hd);
    return -1;
  }
  if (peer < 0 || peer >= c->G || peer == rs->rank || op->u.p2p.bytes < 0) {
    set_error(c, "rank %d op #%lld: %s with peer %d (of %d ranks) and %lld bytes", rs->rank,
              (long long)rs->op_index, bs_op_kind_name(op->kind), peer, c->G,
              (long long)op->u.p2p.bytes);
    return -1;
  }
  handle *h = &rs->h[hd];
  h->peer = peer;
  h->tag = op->u.p2p.tag;
  h->bytes = op->u.p2p.bytes;
  h->t_post = simgrid_get_clock();
  h->op_index = rs->op_index;
  h->step = op->step;
  int ps = slot_of(c, peer);
  if (op->kind == BS_OP_SEND) {
    h->kind = H_SEND;
    h->comm = sg_mailbox_put_async(mailbox(rs, ps, 0), encode_msg(h->tag, h->bytes), h->bytes);
    account_sent(rs, peer, h->bytes);
    c->events++;
  } else {
    h->kind = H_RECV;
    h->rx = NULL;
    h->comm = sg_mailbox_get_async(mailbox(rs, ps, 1), &h->rx);
    add_bytes(rs, &rs->recvd, h->bytes, "bytes received");
  }
  return 0;
}

static int do_coll(rank_state *rs, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  int hd = op->handle;
  const bs_group *g = &op->u.coll.group;
  if (hd < 0 || hd >= MAX_HANDLES || rs->h[hd].kind != H_FREE) {
    set_error(c, "rank %d op #%lld: COLL uses handle %d that is invalid or still in use", rs->rank,
              (long long)rs->op_index, hd);
    return -1;
  }
  if (g->size < 1 || g->first < 0 || g->first + (int64_t)g->stride * (g->size - 1) >= c->G ||
      (g->size > 1 && g->stride < 1) || op->u.coll.bytes < 0) {
    set_error(c, "rank %d op #%lld: COLL group {first %d, stride %d, size %d} or %lld bytes out of "
              "range for %d ranks", rs->rank, (long long)rs->op_index, g->first, g->stride,
              g->size, (long long)op->u.coll.bytes, c->G);
    return -1;
  }
  coll_job *job = malloc(sizeof *job);
  if (!job) {
    set_error(c, "out of memory");
    return -1;
  }
  *job = (coll_job){rs, op->u.coll.kind, *g, op->u.coll.bytes, rs->coll_seq++};
  /* Groups are written in real ranks; a folded run folds them. */
  char name[32];
  snprintf(name, sizeof name, "coll%d.%d", rs->slot, job->seq);
  sg_actor_t a = sg_actor_init(name, rs->host);
  sg_actor_ref(a);
  sg_actor_set_data(a, job);
  sg_actor_start_(a, coll_main, 0, NULL);
  handle *h = &rs->h[hd];
  h->kind = H_COLL;
  h->coll = a;
  h->t_post = simgrid_get_clock();
  h->op_index = rs->op_index;
  return 0;
}

static int check_recv(rank_state *rs, const handle *h) {
  int tag;
  int64_t low;
  decode_msg(h->rx, &tag, &low);
  if (tag != h->tag || low != (h->bytes & 0x7fffffff)) {
    /* the payload carries the size's low 31 bits: exact for every message below 2 GiB */
    char got[64];
    if (h->bytes < 0x80000000ll) snprintf(got, sizeof got, "%lld bytes", (long long)low);
    else snprintf(got, sizeof got, "a size of %lld mod 2^31 bytes", (long long)low);
    set_error(rs->ctx, "rank %d op #%lld (step %d): RECV from rank %d expected tag %d (step %d) and "
              "%lld bytes, but the next message from rank %d has tag %d (step %d) and %s: sends and "
              "receives between two ranks must match in order, tag and size", rs->rank,
              (long long)h->op_index, h->step, h->peer, h->tag, h->tag & 2047, (long long)h->bytes,
              h->peer, tag, tag & 2047, got);
    return -1;
  }
  return 0;
}

static int do_wait(rank_state *rs, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  int n = op->u.wait.n;
  if (n < 0 || n > BS_MAX_WAIT) {
    set_error(c, "rank %d op #%lld: WAIT on %d handles", rs->rank, (long long)rs->op_index, n);
    return -1;
  }
  sg_comm_t comms[BS_MAX_WAIT];
  int which[BS_MAX_WAIT], nc = 0;
  double t0 = simgrid_get_clock();
  for (int i = 0; i < n; i++) {
    int hd = op->u.wait.handles[i];
    if (hd < 0 || hd >= MAX_HANDLES || rs->h[hd].kind == H_FREE) {
      set_error(c, "rank %d op #%lld: WAIT on handle %d that no pending operation created",
                rs->rank, (long long)rs->op_index, hd);
      return -1;
    }
    if (rs->h[hd].kind == H_COLL) continue;
    which[nc] = hd;
    comms[nc++] = rs->h[hd].comm;
  }
  rs->blk_kind = 1;
  rs->blk_op = rs->op_index;
  rs->blk_n = n;
  rs->blk_peer = -1;
  if (nc) {
    const handle *h0 = &rs->h[which[0]];
    rs->blk_send = h0->kind == H_SEND;
    rs->blk_peer = h0->peer;
    rs->blk_tag = h0->tag;
    rs->blk_step = h0->step;
    rs->blk_post_op = h0->op_index;
  }
  if (c->nlinks || c->trace) {
    /* One at a time, to know when each finished. */
    int left = nc;
    while (left > 0) {
      ssize_t k = sg_comm_wait_any(comms, (size_t)left);
      if (k < 0) break;
      handle *h = &rs->h[which[k]];
      double t = simgrid_get_clock();
      if (h->kind == H_SEND) {
        sg_host_t dst = c->rs[slot_of(c, h->peer)].host;
        link_account(c, rs->host, dst, h->bytes, t - h->t_post);
        char nm[48];
        snprintf(nm, sizeof nm, "send to %d", h->peer);
        trace_event(c, nm, rs->rank, rs->node, h->t_post, t, "comm");
      }
      comms[k] = comms[left - 1];
      which[k] = which[left - 1];
      which[left - 1] = (int)(h - rs->h);
      left--;
    }
  } else if (nc) {
    sg_comm_wait_all(comms, (size_t)nc);
  }
  for (int i = 0; i < n; i++) {
    int hd = op->u.wait.handles[i];
    handle *h = &rs->h[hd];
    if (h->kind == H_COLL) {
      rs->blk_kind = 2;
      rs->blk_post_op = h->op_index;
      sg_actor_join(h->coll, -1);
      sg_actor_unref(h->coll);
    } else if (h->kind == H_RECV && check_recv(rs, h)) {
      h->kind = H_FREE;
      return -1;
    }
    h->kind = H_FREE;
  }
  rs->blk_kind = 0;
  double t1 = simgrid_get_clock();
  rs->exposed += t1 - t0;
  if (t1 > t0) trace_event(c, "wait", rs->rank, rs->node, t0, t1, "wait");
  return 0;
}

static int do_compute(rank_state *rs, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  char err[256];
  double d = bs_profile_kernel_time(c->prof, &op->u.compute, c->cfg->model.dtype, err, sizeof err);
  if (d < 0) {
    set_error(c, "rank %d op #%lld: %s", rs->rank, (long long)rs->op_index, err);
    return -1;
  }
  double t0 = simgrid_get_clock();
  c->events++;
  if (c->shared_host) {
    /* Profile times are per rank with every rank busy, scaled to the whole CPU
     * (calib: t_eff = t / ranks), so d x host_speed is the work. A rank with T
     * threads never runs on more than T of the C cores, even when the others
     * wait: its execution is bounded at T / C of the host. */
    sg_exec_t e = sg_actor_exec_init(d * c->host_speed);
    sg_exec_set_bound(e, c->exec_bound);
    sg_exec_start(e);
    sg_exec_wait(e);
  } else {
    sg_actor_sleep_for(d);
  }
  double t1 = simgrid_get_clock();
  rs->compute += t1 - t0;
  trace_event(c, bs_kernel_name(op->u.compute.kernel), rs->rank, rs->node, t0, t1, "compute");
  return 0;
}

static void rank_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  rank_state *rs = sg_actor_self_get_data();
  sim_ctx *c = rs->ctx;
  bs_op op;
  int rc = 0;
  while (!rc && !c->error[0] && c->src->next(rs->it, &op)) {
    switch (op.kind) {
    case BS_OP_ALLOC: rc = do_alloc(rs, &op); break;
    case BS_OP_FREE: rc = do_free(rs, &op); break;
    case BS_OP_COMPUTE: rc = do_compute(rs, &op); break;
    case BS_OP_SEND:
    case BS_OP_RECV: rc = do_p2p(rs, &op); break;
    case BS_OP_COLL: rc = do_coll(rs, &op); break;
    case BS_OP_WAIT: rc = do_wait(rs, &op); break;
    case BS_OP_PHASE: {
      double t = simgrid_get_clock();
      if (op.u.phase.fwd_bwd == 0) {
        if (op.u.phase.begin) rs->fwd_begin = t;
        else rs->fwd += t - rs->fwd_begin;
      } else {
        if (op.u.phase.begin) rs->bwd_begin = t;
        else rs->bwd += t - rs->bwd_begin;
      }
      break;
    }
    default:
      set_error(c, "rank %d op #%lld: unknown op kind %d", rs->rank, (long long)rs->op_index,
                (int)op.kind);
      rc = -1;
    }
    rs->op_index++;
  }
  if (rc || c->error[0]) return;
  const char *why = c->src->iter_error ? c->src->iter_error(rs->it) : NULL;
  if (why) {
    set_error(c, "rank %d: %s", rs->rank, why);
    return;
  }
  for (int hd = 0; hd < MAX_HANDLES; hd++)
    if (rs->h[hd].kind != H_FREE) {
      const handle *h = &rs->h[hd];
      set_error(c, "rank %d: the plan ended with handle %d (op #%lld, %s rank %d tag %d) never "
                "waited", rs->rank, hd, (long long)h->op_index,
                h->kind == H_SEND ? "SEND to" : h->kind == H_RECV ? "RECV from" : "COLL with",
                h->peer, h->tag);
      return;
    }
  rs->end = simgrid_get_clock();
  rs->finished = 1;
  c->nfinished++;
}

/* ------------------------------------------------------------------ */
/* The fold pre-pass                                                   */
/* ------------------------------------------------------------------ */

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0x100000001b3ull;
}

static uint64_t dbits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* What the pre-pass learns about one rank's program. */
typedef struct {
  uint64_t sig;             /* the op stream, peers relative (node offset, index offset) */
  int max_node_off;         /* largest node offset talked over (shortest way round) */
  int max_idx_off;          /* largest index offset within a node (circular) */
  int cross_rail;           /* an inter-node message between different local indices */
  int has_coll;
  int coll_general;         /* a collective that talks beyond its ring neighbours */
} rank_info;

static int circ(int d, int n) {
  d = ((d % n) + n) % n;
  return d > n - d ? n - d : d;
}

/*
 * What the pre-pass knows of the platform: whether ring collectives run a
 * channel per rail, and (generated dgx) the route model that decides auto
 * allreduces as coll_main does, remembered per (group, bytes).
 */
typedef struct {
  bs_group g;
  int64_t bytes;
  bs_coll_algo algo;
} algo_memo;
typedef struct {
  int rails;
  const bs_platform_spec *ps;
  bs_coll_model model;
  int n;
  algo_memo memo[64];
} fold_env;

/* The algorithm coll_main will run an allreduce with, or -1 when only SimGrid's routes can say. */
static int prepass_algo(fold_env *env, bs_coll_algo algo, const bs_group *g, int64_t bytes, int rpn) {
  if (algo != BS_COLL_ALGO_AUTO) return (int)algo;
  if (!env->ps) return -1;
  for (int i = 0; i < env->n; i++)
    if (env->memo[i].bytes == bytes && env->memo[i].g.first == g->first && env->memo[i].g.stride == g->stride &&
        env->memo[i].g.size == g->size)
      return (int)env->memo[i].algo;
  int *node = malloc(sizeof *node * (size_t)g->size);
  if (!node) return -1;
  int multi = 0;
  for (int i = 0; i < g->size; i++) {
    node[i] = member(g, i) / rpn;
    multi |= node[i] != node[0];
  }
  bs_coll_links l;
  double t_tree;
  int r = -1;
  if (!group_links_model(env->ps, g, node, &l))
    r = (int)auto_algo(g->size, node, multi, bytes, &l, ring_channels(env->rails, rpn, g), &t_tree);
  free(node);
  if (r >= 0 && env->n < 64) env->memo[env->n++] = (algo_memo){*g, bytes, (bs_coll_algo)r};
  return r;
}

/*
 * A ring collective over a group of consecutive ranks (stride 1) talks only
 * to its ring neighbours (on every channel), so what a rank's timeline
 * depends on is where they are relative to it, not where the group starts:
 * hash their offsets (node, index in node) and count only them as node
 * offsets. This lets model-scope plans, whose gradient collectives span every
 * rank, fold like their rings (peers taken modulo the fold, as for
 * point-to-point). All-to-alls, trees and strided groups keep the whole-group
 * rule. Returns 1 when it applied.
 */
static int coll_ring_only(fold_env *env, bs_coll_kind kind, bs_coll_algo algo, const bs_group *g, int64_t bytes,
                          int rank, int rpn, int G, uint64_t *h, rank_info *ri) {
  if (kind == BS_COLL_ALLTOALL || g->stride != 1 || g->size < 2) return 0;
  int me = rank - g->first, K = G / rpn, mynode = rank / rpn, myidx = rank % rpn;
  if (kind == BS_COLL_ALLREDUCE) {
    int a = prepass_algo(env, algo, g, bytes, rpn);
    /* A tree over every rank timed as a whole (coll_main) is the same on every member. */
    if (a == BS_COLL_ALGO_TREE && whole_tree(G, g) && env->model != BS_COLL_STEPS &&
        (env->model != BS_COLL_MODEL_AUTO || K >= 2))
      return 1;
    /* Any other tree talks to tree neighbours, not ring ones. */
    if (a != BS_COLL_ALGO_RING) return 0;
  }
  if (me < 0 || me >= g->size) return 0;
  int C = ring_channels(env->rails, rpn, g);
  for (int ch = 0; ch < C; ch++) {
    int nb[2] = {g->first + ring_peer(C, rpn, g->size, ch, me, +1), g->first + ring_peer(C, rpn, g->size, ch, me, -1)};
    for (int j = 0; j < 2; j++) {
      int dn = (((nb[j] / rpn) - mynode) % K + K) % K, di = (((nb[j] % rpn) - myidx) % rpn + rpn) % rpn;
      *h = mix(*h, (uint64_t)dn);
      *h = mix(*h, (uint64_t)di);
      if (circ(dn, K) > ri->max_node_off) ri->max_node_off = circ(dn, K);
      if (dn && di) ri->cross_rail = 1;
      if (!dn && circ(di, rpn) > ri->max_idx_off) ri->max_idx_off = circ(di, rpn);
    }
  }
  return 1;
}

/*
 * The op stream of `rank` with peers written relative to it and COMPUTE by its
 * modelled duration, hashed; and the offsets it talks over.
 */
static int rank_signature(const bs_sim_source *src, const bs_profile *prof, bs_dtype dt, bs_coll_algo algo,
                          fold_env *env, int rank, int G, int rpn, rank_info *ri, char *err, size_t errlen) {
  void *it = src->iter_new(src->ctx, rank);
  if (!it) {
    snprintf(err, errlen, "out of memory (plan iterator)");
    return -1;
  }
  memset(ri, 0, sizeof *ri);
  int K = G / rpn, mynode = rank / rpn, myidx = rank % rpn;
  uint64_t h = 0xcbf29ce484222325ull;
  bs_op op;
  while (src->next(it, &op)) {
    h = mix(h, (uint64_t)op.kind);
    h = mix(h, (uint64_t)(uint32_t)op.handle);
    switch (op.kind) {
    case BS_OP_ALLOC:
      h = mix(h, (uint64_t)op.u.alloc.buf);
      h = mix(h, (uint64_t)op.u.alloc.bytes);
      h = mix(h, (uint64_t)op.u.alloc.cls);
      break;
    case BS_OP_FREE: h = mix(h, (uint64_t)op.u.free.buf); break;
    case BS_OP_COMPUTE: {
      double d = bs_profile_kernel_time(prof, &op.u.compute, dt, err, errlen);
      if (d < 0) {
        src->iter_free(it);
        return -1;
      }
      h = mix(h, (uint64_t)op.u.compute.kernel);
      h = mix(h, dbits(d));
      break;
    }
    case BS_OP_SEND:
    case BS_OP_RECV: {
      int p = op.u.p2p.peer;
      if (p < 0 || p >= G) { /* the simulation proper reports it */
        h = mix(h, (uint64_t)(uint32_t)p);
        break;
      }
      int dn = (((p / rpn) - mynode) % K + K) % K, di = (((p % rpn) - myidx) % rpn + rpn) % rpn;
      h = mix(h, (uint64_t)dn);
      h = mix(h, (uint64_t)di);
      h = mix(h, (uint64_t)(uint32_t)op.u.p2p.tag);
      h = mix(h, (uint64_t)op.u.p2p.bytes);
      if (circ(dn, K) > ri->max_node_off) ri->max_node_off = circ(dn, K);
      if (dn && di) ri->cross_rail = 1;
      if (!dn && circ(di, rpn) > ri->max_idx_off) ri->max_idx_off = circ(di, rpn);
      break;
    }
    case BS_OP_COLL: {
      const bs_group *g = &op.u.coll.group;
      ri->has_coll = 1;
      h = mix(h, (uint64_t)g->stride);
      h = mix(h, (uint64_t)g->size);
      h = mix(h, (uint64_t)op.u.coll.kind);
      h = mix(h, (uint64_t)op.u.coll.bytes);
      if (coll_ring_only(env, op.u.coll.kind, algo, g, op.u.coll.bytes, rank, rpn, G, &h, ri)) break;
      ri->coll_general = 1;
      h = mix(h, (uint64_t)(uint32_t)(g->first - rank));
      for (int i = 0; i < g->size; i++) {
        int m = g->first + g->stride * i;
        int dn = circ(m / rpn - mynode, K);
        if (dn > ri->max_node_off) ri->max_node_off = dn;
      }
      break;
    }
    case BS_OP_WAIT:
      h = mix(h, (uint64_t)op.u.wait.n);
      for (int i = 0; i < op.u.wait.n && i < BS_MAX_WAIT; i++)
        h = mix(h, (uint64_t)(uint32_t)op.u.wait.handles[i]);
      break;
    case BS_OP_PHASE:
      h = mix(h, (uint64_t)op.u.phase.fwd_bwd * 2 + (uint64_t)op.u.phase.begin);
      break;
    }
  }
  const char *why = src->iter_error ? src->iter_error(it) : NULL;
  if (why) {
    snprintf(err, errlen, "rank %d: %s", rank, why);
    src->iter_free(it);
    return -1;
  }
  src->iter_free(it);
  ri->sig = h;
  return 0;
}

/* Signatures of ranks t, t + nt, t + 2 nt, ... (one pre-pass thread). */
typedef struct {
  const bs_config *cfg;
  const bs_profile *prof;
  const bs_sim_source *src;
  fold_env env;             /* each thread its own memo */
  int G, P, t, nt, rc;
  rank_info *ri;
  char err[400];
} sig_job;

static void *sig_worker(void *arg) {
  sig_job *j = arg;
  for (int r = j->t; r < j->G && !j->rc; r += j->nt)
    j->rc = rank_signature(j->src, j->prof, j->cfg->model.dtype, j->cfg->cluster.coll_algo, &j->env, r, j->G, j->P,
                           &j->ri[r], j->err, sizeof j->err);
  return NULL;
}

/*
 * Every rank's signature. Generating G programs is most of a large fold's
 * cost, and each is independent of the others (plans and profiles are read
 * only), so the ranks are shared among the host's cores.
 */
static int signatures(const bs_config *cfg, const bs_profile *prof, const bs_sim_source *src, const fold_env *env,
                      int G, int P, rank_info *ri, char *err, size_t errlen) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = G >= 256 && cores > 1 ? (int)(cores < 8 ? cores : 8) : 1;
  sig_job job[8];
  pthread_t th[8];
  int started = 0;
  for (int t = 0; t < nt; t++) job[t] = (sig_job){cfg, prof, src, *env, G, P, t, nt, 0, ri, ""};
  for (int t = 1; t < nt; t++) {
    if (pthread_create(&th[t], NULL, sig_worker, &job[t])) break;
    started = t + 1;
  }
  if (!started) started = 1;
  /* Here: thread 0's ranks, and those of threads that did not start. */
  sig_worker(&job[0]);
  for (int t = started; t < nt; t++) sig_worker(&job[t]);
  for (int t = 1; t < started; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < nt; t++)
    if (job[t].rc) {
      snprintf(err, errlen, "%s", job[t].err);
      return -1;
    }
  return 0;
}

/*
 * The fold: M of K nodes and Pf of P ranks per node, such that every rank's
 * program equals that of its image ((node mod M), (index mod Pf)) with peers
 * relative, and the generated platform folds the same way: node shifts by
 * bs_topo_fold_nodes, index shifts on dgx nodes (every GPU its own NVSwitch
 * port and its own NIC rail) when all inter-node messages stay on their rail
 * and there are no collectives. Returns 0 (maybe M = K and Pf = P: no fold)
 * or -1 on error. why: a sentence for the result.
 */
static int choose_fold(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof,
                       const bs_platform_spec *ps, const bs_sim_source *src, int *M_out, int *Pf_out,
                       int *wrap_out, char *why, size_t whylen, char *err, size_t errlen) {
  int G = cfg->par.gpus, P = ps->ranks_per_node, K = G / P;
  *M_out = K;
  *Pf_out = P;
  *wrap_out = 0;
  snprintf(why, whylen, "off");
  if (opts->fold == BS_OFF) return 0;
  if (!ps->generated || ps->shared_host) {
    snprintf(why, whylen, "not applicable (%s)", !ps->generated ? "user platform file" : "one shared host");
    return 0;
  }
  rank_info *ri = malloc(sizeof *ri * (size_t)G);
  if (!ri) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  fold_env env;
  memset(&env, 0, sizeof env);
  env.rails = !strncmp(ps->tp.name, "dgx-", 4);
  env.ps = env.rails ? ps : NULL;
  env.model = opts->coll_model;
  if (signatures(cfg, prof, src, &env, G, P, ri, err, errlen)) {
    free(ri);
    return -1;
  }
  int D = 0, Din = 0, cross = 0, coll = 0, coll_general = 0;
  for (int r = 0; r < G; r++) {
    if (ri[r].max_node_off > D) D = ri[r].max_node_off;
    if (ri[r].max_idx_off > Din) Din = ri[r].max_idx_off;
    cross |= ri[r].cross_rail;
    coll |= ri[r].has_coll;
    coll_general |= ri[r].coll_general;
  }
  int M = K >= 2 ? bs_topo_fold_nodes(&ps->tp, D) : 0;
  if (!M) M = K;
  int Pf = P;
  if (!strncmp(ps->tp.name, "dgx-", 4) && !cross && !coll)
    for (int p = 2; p < P; p++)
      if (P % p == 0 && p > 2 * Din) {
        Pf = p;
        break;
      }
  /* The quotient reproduces same-rail routes only; ring collectives whose hops all stay
   * on their rail (coll_ring_only) fold like point-to-point. */
  int Mq = !cross && !coll_general ? bs_topo_fold_quotient(&ps->tp, D) : 0;
  /*
   * Leaves merged: on a dgx fabric whose leaf uplinks carry the full bandwidth of their
   * leaf's NICs (oversubscription 1) and add no latency, an uplink can never be what limits
   * a flow (everything it carries came through one of those NICs), so a route across leaves
   * times as one inside a leaf and the fabric folds as a single leaf would. Same-rail
   * messages only (routes across rails are not compared).
   */
  int Ml = 0;
  if (!strncmp(ps->tp.name, "dgx-", 4) && ps->tp.nodes_per_leaf < K && ps->tp.oversub <= 1 &&
      ps->tp.link[BS_LINK_FABRIC].lat_s == 0 && !cross && !coll_general) {
    bs_topo_params one = ps->tp;
    one.nodes_per_leaf = K;
    Ml = bs_topo_fold_nodes(&one, D);
  }
  /* Largest reduction first, then less. */
  int cand[7][3] = {{Ml, Pf, 0}, {Ml, P, 0}, {Mq, Pf, D}, {Mq, P, D}, {M, Pf, 0}, {M, P, 0}, {K, Pf, 0}};
  for (int c = 0; c < 7; c++) {
    int m = cand[c][0], pf = cand[c][1];
    if (!m || (m == K && pf == P)) continue;
    int ok = 1, bad = -1;
    for (int r = 0; r < G && ok; r++) {
      int img = ((r / P) % m) * P + (r % P) % pf;
      if (ri[r].sig != ri[img].sig) {
        ok = 0;
        bad = r;
      }
    }
    if (ok) {
      *M_out = m;
      *Pf_out = pf;
      *wrap_out = cand[c][2];
      snprintf(why, whylen, "%d of %d ranks simulated (%d of %d nodes%s, %d of %d per node; offsets %d node(s), %d in node)",
               m * pf, G, m, K, cand[c][2] ? " with leaf wrap" : c < 2 ? ", leaves merged" : "", pf, P, D, Din);
      free(ri);
      return 0;
    }
    if (why[0] == 'o') snprintf(why, whylen, "no: rank %d's program differs from its image's", bad);
  }
  if (M == K && Pf == P)
    snprintf(why, whylen, "no: the platform has no fold for node offsets up to %d", D);
  free(ri);
  return 0;
}

/* ------------------------------------------------------------------ */
/* The simulation (in the child, or in process)                        */
/* ------------------------------------------------------------------ */

static int write_temp(const char *text, char *path, size_t pathlen, char *err, size_t errlen) {
  const char *dir = getenv("TMPDIR");
  snprintf(path, pathlen, "%s/burstsim-platform-XXXXXX.xml", dir && *dir ? dir : "/tmp");
  int fd = mkstemps(path, 4);
  if (fd < 0) {
    snprintf(err, errlen, "cannot create a temporary platform file in %s: %s",
             dir && *dir ? dir : "/tmp", strerror(errno));
    return -1;
  }
  size_t n = strlen(text), off = 0;
  while (off < n) {
    ssize_t w = write(fd, text + off, n - off);
    if (w <= 0) {
      close(fd);
      unlink(path);
      snprintf(err, errlen, "cannot write the temporary platform file: %s", strerror(errno));
      return -1;
    }
    off += (size_t)w;
  }
  close(fd);
  return 0;
}

/* Fills out from the ranks' states; -1 with a message when a total passes int64. */
static int fill_result(sim_ctx *c, bs_result *out, char *err, size_t errlen) {
  int G = c->G, A = c->A;
  out->nranks = G;
  out->ranks = calloc((size_t)G, sizeof *out->ranks);
  double step = 0, fwd = 0, bwd = 0, comp = 0, expo = 0;
  int64_t maxsent = 0, total = 0, intra = 0, inter = 0, peak = 0;
  int peak_slot = 0;
  for (int s = 0; s < A; s++) {
    const rank_state *rs = &c->rs[s];
    if (rs->end > step) step = rs->end;
    if (rs->fwd > fwd) fwd = rs->fwd;
    if (rs->bwd > bwd) bwd = rs->bwd;
    if (rs->compute > comp) comp = rs->compute;
    if (rs->exposed > expo) expo = rs->exposed;
    if (rs->sent > maxsent) maxsent = rs->sent;
    if (__builtin_add_overflow(total, rs->sent, &total) || __builtin_add_overflow(intra, rs->intra, &intra) ||
        __builtin_add_overflow(inter, rs->inter, &inter)) {
      snprintf(err, errlen, "comm_bytes.total: the bytes of all ranks pass 2^63 - 1 (the point is too large)");
      return -1;
    }
    if (rs->mem_peak > peak) {
      peak = rs->mem_peak;
      peak_slot = s;
    }
  }
  int64_t scale = G / A; /* folded: every simulated rank stands for G/A ranks */
  if (__builtin_mul_overflow(total, scale, &total) || __builtin_mul_overflow(intra, scale, &intra) ||
      __builtin_mul_overflow(inter, scale, &inter)) {
    snprintf(err, errlen, "comm_bytes.total: the bytes of all ranks pass 2^63 - 1 (the point is too large)");
    return -1;
  }
  /* All-rank tree allreduces timed as a whole: every real rank's bytes by its tree role. */
  int64_t *tsent = NULL;
  if (c->nwtree) {
    int *node = malloc(sizeof *node * (size_t)G);
    int64_t *s1 = malloc(sizeof *s1 * 2 * (size_t)G), *i1 = s1 ? s1 + G : NULL;
    tsent = calloc((size_t)G, sizeof *tsent);
    if (!node || !s1 || !tsent) {
      free(node);
      free(s1);
      free(tsent);
      snprintf(err, errlen, "out of memory");
      return -1;
    }
    for (int r = 0; r < G; r++) node[r] = node_of_rank(c, r);
    int bad = 0;
    for (int w = 0; w < c->nwtree && !bad; w++) {
      if (bs_tree_member_bytes(G, node, c->wtree[w].bytes, s1, i1)) {
        bad = 1;
        break;
      }
      for (int r = 0; r < G && !bad; r++) {
        int64_t a, b;
        bad = __builtin_mul_overflow(s1[r], c->wtree[w].count, &a) || __builtin_mul_overflow(i1[r], c->wtree[w].count, &b) ||
              __builtin_add_overflow(tsent[r], a, &tsent[r]) || __builtin_add_overflow(total, a, &total) ||
              __builtin_add_overflow(inter, b, &inter) || __builtin_add_overflow(intra, a - b, &intra);
      }
    }
    free(node);
    free(s1);
    if (bad) {
      free(tsent);
      snprintf(err, errlen, "comm_bytes.total: the bytes of all ranks pass 2^63 - 1 (the point is too large)");
      return -1;
    }
    for (int r = 0; r < G && !bad; r++) {
      int64_t sent, recvd;
      const rank_state *rs = &c->rs[slot_of(c, r)];
      bad = __builtin_add_overflow(rs->sent, tsent[r], &sent) || __builtin_add_overflow(rs->recvd, tsent[r], &recvd);
      if (sent > maxsent) maxsent = sent;
    }
    if (bad) {
      free(tsent);
      snprintf(err, errlen, "comm_bytes.per_rank: a rank's bytes pass 2^63 - 1 (the point is too large)");
      return -1;
    }
  }
  out->time.step = step;
  out->time.fwd = fwd;
  out->time.bwd = bwd;
  out->time.compute = comp;
  out->time.comm_exposed = expo;
  out->comm.per_rank_max_sent = maxsent;
  out->comm.total = total;
  out->comm.intra_node = intra;
  out->comm.inter_node = inter;
  out->mem.peak_bytes_max = peak;
  out->mem.capacity_bytes = (int64_t)c->prof->memory_bytes;
  out->mem.oom = peak > out->mem.capacity_bytes;
  memcpy(out->mem.breakdown, c->rs[peak_slot].cls_at_peak, sizeof out->mem.breakdown);
  if (out->ranks)
    for (int r = 0; r < G; r++) {
      const rank_state *rs = &c->rs[slot_of(c, r)];
      int64_t t = tsent ? tsent[r] : 0; /* a tree member receives what it sends */
      out->ranks[r] = (bs_rank_result){r, rs->end, rs->fwd, rs->bwd, rs->compute, rs->exposed,
                                       rs->sent + t, rs->recvd + t, rs->mem_peak};
    }
  free(tsent);
  out->sim_events = c->events;
  return 0;
}

/*
 * The simulated times before they are reported: finite, >= 0 and at most
 * BS_SIM_TIME_MAX (beyond it SimGrid's double clock no longer resolves a
 * microsecond, and such a figure comes from a rate or bandwidth near zero).
 */
#define BS_SIM_TIME_MAX 1e18

static int check_times(bs_result *out, char *err, size_t errlen) {
  const struct {
    const char *key;
    double v;
  } t[] = {{"time.step", out->time.step}, {"time.fwd", out->time.fwd}, {"time.bwd", out->time.bwd},
           {"time.compute", out->time.compute}, {"time.comm_exposed", out->time.comm_exposed}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (!(t[i].v >= 0 && t[i].v <= BS_SIM_TIME_MAX)) {
      snprintf(err, errlen, "%s: the simulated %g s is not a time the simulator can report (finite, at most %g s; "
               "a rate or bandwidth near zero?)", t[i].key, t[i].v, BS_SIM_TIME_MAX);
      return -1;
    }
  return 0;
}

/* The real op source: a plan from plans/. */
static void *plan_iter_new_cb(void *ctx, int rank) { return bs_plan_iter_new(ctx, rank); }
static int plan_next_cb(void *it, bs_op *op) { return bs_plan_next(it, op); }
static void plan_iter_free_cb(void *it) { bs_plan_iter_free(it); }
static const char *plan_iter_error_cb(void *it) { return bs_plan_iter_errmsg(it); }

static void plan_source(bs_plan *plan, bs_sim_source *src) {
  src->ctx = plan;
  src->ranks = bs_plan_ranks(plan);
  src->iter_new = plan_iter_new_cb;
  src->next = plan_next_cb;
  src->iter_free = plan_iter_free_cb;
  src->iter_error = plan_iter_error_cb;
}

static int simulate(const bs_config *cfg, const bs_sim_opts *opts, const bs_sim_source *given,
                    bs_result *out,
                    bs_link_stat **links_out, int *nlinks_out, char *err, size_t errlen) {
  double w0 = now_wall();
  memset(out, 0, sizeof *out);
  out->cfg = *cfg;
  out->mode = "sim";
  bs_profile *prof = calloc(1, sizeof *prof);
  if (!prof) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  const char *pname = opts->profile ? opts->profile : cfg->cluster.profile;
  int rc = -2; /* until SimGrid starts: the point itself is not valid */
  bs_plan *plan = NULL;
  sim_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  char xml_path[600] = "";
  char *xml = NULL;
  if (bs_profile_load(pname, prof, err, errlen)) {
    char why[512];
    snprintf(why, sizeof why, "%s", err);
    snprintf(err, errlen, "%s: %s", opts->profile ? "--profile" : "cluster.profile", why);
    goto done;
  }
  bs_platform_spec ps;
  if (bs_platform_resolve(cfg, opts, prof, &ps, err, errlen)) goto done;
  bs_sim_source src;
  if (given) {
    src = *given;
  } else {
    if (bs_plan_create(cfg, ps.ranks_per_node, &plan, err, errlen)) goto done;
    plan_source(plan, &src);
  }
  int G = src.ranks;
  if (G != cfg->par.gpus) {
    snprintf(err, errlen, "internal: the plan has %d ranks for parallel.gpus = %d", G, cfg->par.gpus);
    goto done;
  }
  char why[160];
  int Mf = 0, Pf = 0, wrap = 0;
  if (choose_fold(cfg, opts, prof, &ps, &src, &Mf, &Pf, &wrap, why, sizeof why, err, errlen)) goto done;
  int A = ps.shared_host || !ps.generated ? G : Mf * Pf;
  if (opts->fold == BS_ON && A == G) {
    snprintf(err, errlen, "fold requested but not possible: %s", why);
    goto done;
  }
  if (ps.generated) {
    xml = bs_platform_xml(&ps, ps.shared_host ? 1 : Mf, ps.shared_host ? G : Pf, wrap, err, errlen);
    if (!xml || write_temp(xml, xml_path, sizeof xml_path, err, errlen)) goto done;
  }

  /* SimGrid: settings chosen on purpose (SimGrid 3.32 configuration docs) and recorded. */
  const char *model = opts->net_model ? opts->net_model : prof->net_model;
  int cross = opts->crosstraffic >= 0 ? opts->crosstraffic : prof->crosstraffic;
  double gamma = opts->tcp_gamma >= 0 ? opts->tcp_gamma : prof->tcp_gamma;
  int sargc = 1;
  char arg0[] = "burstsim-sim";
  char *sargv[] = {arg0, NULL};
  rc = -1; /* from here on a failure is the simulation's */
  simgrid_init(&sargc, sargv);
  xbt_log_control_set("root.thresh:critical");
  sg_cfg_set_string("network/model", model);
  sg_cfg_set_boolean("network/crosstraffic", cross ? "yes" : "no");
  sg_cfg_set_double("network/TCP-gamma", gamma);
#if defined(__SANITIZE_ADDRESS__)
  sg_cfg_set_int("contexts/stack-size", 1024);
#else
  sg_cfg_set_int("contexts/stack-size", 128);
#endif
  char lerr[400];
  int loaded = bs_sim_load_platform(ps.generated ? xml_path : ps.file, lerr, sizeof lerr);
  if (xml_path[0]) unlink(xml_path);
  if (loaded) {
    if (ps.generated) snprintf(err, errlen, "internal: the generated platform does not load: %s", lerr);
    else snprintf(err, errlen, "cluster.topology: %s", lerr);
    goto done;
  }
  int nset = bs_platform_apply_profile(prof, ps.generated);
  if (nset == -1) {
    snprintf(err, errlen, "SimGrid refused the profile's message-size factors");
    goto done;
  }
  snprintf(out->sim_network, sizeof out->sim_network,
           "model=%.24s crosstraffic=%d TCP-gamma=%g; %d links from profile %.32s%s; coll: %s %s; "
           "fold: %.90s", model, cross, gamma, nset < 0 ? -nset : nset, prof->name,
           nset < 0 ? " with size factors" : "", bs_coll_algo_name(cfg->cluster.coll_algo),
           bs_coll_model_name(opts->coll_model), why);

  ctx.cfg = cfg;
  ctx.opts = opts;
  ctx.prof = prof;
  ctx.src = &src;
  ctx.G = G;
  ctx.A = A;
  ctx.rpn = ps.ranks_per_node;
  ctx.M = Mf;
  ctx.Pf = Pf;
  ctx.shared_host = ps.shared_host;
  ctx.rails = ps.generated && !ps.shared_host && !strncmp(ps.tp.name, "dgx-", 4);
  ctx.ps = ctx.rails ? &ps : NULL;
  ctx.host_speed = ps.tp.host_speed > 0 ? ps.tp.host_speed : 1e9;
  ctx.trace_first = 1;
  ctx.rs = calloc((size_t)A, sizeof *ctx.rs);
  void **hosts = calloc((size_t)A, sizeof *hosts);
  int *node = calloc((size_t)A, sizeof *node);
  if (!ctx.rs || !hosts || !node) {
    free(hosts);
    free(node);
    snprintf(err, errlen, "out of memory for %d ranks", A);
    goto done;
  }
  if (bs_platform_hosts(A, ps.ranks_per_node, hosts, node, err, errlen)) {
    free(hosts);
    free(node);
    goto done;
  }
  if (!ps.generated) {
    /* A user file: ranks per node from its node properties; rebuild the plan if it differs. */
    int rpn = 0;
    for (int i = 0; i < A; i++)
      if (node[i] == node[0]) rpn++;
    if (rpn != ps.ranks_per_node && plan) {
      bs_plan_free(plan);
      plan = NULL;
      ctx.rpn = ps.ranks_per_node = rpn;
      if (bs_plan_create(cfg, rpn, &plan, err, errlen)) {
        free(hosts);
        free(node);
        goto done;
      }
      plan_source(plan, &src);
    }
    if (sg_host_count() == 1) ctx.shared_host = 1;
    if (bs_platform_check_loaded(ps.file, hosts, A, err, errlen)) {
      free(hosts);
      free(node);
      goto done;
    }
  }
  if (ctx.shared_host) {
    sg_host_t h0 = hosts[0];
    ctx.host_speed = sg_host_get_speed(h0);
    /* Threads per rank are cores / ranks (at least 1), as burstsim run and calib use them. */
    int cores = prof->host_cores > 0 ? prof->host_cores : sg_host_core_count(h0);
    int share = G < cores ? G : cores;
    ctx.exec_bound = ctx.host_speed / (share > 0 ? share : 1);
  }
  if (links_out) {
    size_t nl = sg_link_count();
    sg_link_t *ll = sg_link_list();
    ctx.links = calloc(nl * 2 + 1, sizeof *ctx.links);
    for (size_t i = 0; ctx.links && i < nl; i++) {
      snprintf(ctx.links[i].name, sizeof ctx.links[i].name, "%s", sg_link_get_name(ll[i]));
      sg_link_set_data(ll[i], (void *)(intptr_t)(i + 1));
    }
    ctx.nlinks = ctx.links ? (int)nl : 0;
    free(ll);
  }
  if (opts->trace_path) {
    char oerr[512];
    ctx.trace_out = bs_out_open(opts->trace_path, oerr, sizeof oerr);
    if (!ctx.trace_out) {
      free(hosts);
      free(node);
      snprintf(err, errlen, "cannot write the trace: %s", oerr);
      goto done;
    }
    ctx.trace = bs_out_stream(ctx.trace_out);
    fprintf(ctx.trace, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
  }
  for (int s = 0; s < A; s++) {
    rank_state *rs = &ctx.rs[s];
    rs->ctx = &ctx;
    rs->slot = s;
    rs->rank = real_of(&ctx, s);
    rs->host = hosts[s];
    rs->node = node[s];
    rs->it = src.iter_new(src.ctx, rs->rank);
    if (!rs->it) {
      free(hosts);
      free(node);
      snprintf(err, errlen, "out of memory (plan iterator of rank %d)", s);
      goto done;
    }
  }
  free(hosts);
  free(node);
  for (int s = 0; s < A; s++) {
    char name[24];
    snprintf(name, sizeof name, "rank%d", s);
    sg_actor_t a = sg_actor_init(name, ctx.rs[s].host);
    sg_actor_set_data(a, &ctx.rs[s]);
    sg_actor_start_(a, rank_main, 0, NULL);
  }
  simgrid_run();

  if (!ctx.error[0] && ctx.nfinished < A) {
    /* SimGrid returns normally after "Deadlock detected": say who is stuck. */
    char list[360] = "";
    int shown = 0;
    size_t len = 0;
    for (int s = 0; s < A && shown < 3 && len < sizeof list; s++)
      if (!ctx.rs[s].finished) {
        const rank_state *rs = &ctx.rs[s];
        char at[224];
        if (rs->blk_kind == 1 && rs->blk_peer >= 0)
          snprintf(at, sizeof at, "op #%lld WAIT on %d handle(s), first %s rank %d tag %d posted at op #%lld "
                   "(step %d)", (long long)rs->blk_op, rs->blk_n, rs->blk_send ? "SEND to" : "RECV from",
                   rs->blk_peer, rs->blk_tag, (long long)rs->blk_post_op, rs->blk_step);
        else if (rs->blk_kind)
          snprintf(at, sizeof at, "op #%lld WAIT on a collective posted at op #%lld",
                   (long long)rs->blk_op, (long long)rs->blk_post_op);
        else
          snprintf(at, sizeof at, "op #%lld", (long long)rs->op_index);
        len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0, "%srank %d at %s",
                                shown ? "; " : "", rs->rank, at);
        shown++;
      }
    set_error(&ctx, "deadlock: %d of %d simulated ranks never finished (%s)", A - ctx.nfinished, A,
              list);
  }
  if (ctx.error[0]) {
    snprintf(err, errlen, "%s", ctx.error);
    goto done;
  }
  if (fill_result(&ctx, out, err, errlen) || check_times(out, err, errlen)) goto done;
  if (ctx.trace_out) { /* complete and the point valid: only now does the trace replace the file */
    fprintf(ctx.trace, "\n]}\n");
    ctx.trace = NULL;
    char oerr[512];
    int wrc = bs_out_commit(ctx.trace_out, oerr, sizeof oerr);
    ctx.trace_out = NULL;
    if (wrc) {
      snprintf(err, errlen, "cannot write the trace: %s", oerr);
      goto done;
    }
  }
  if (!out->ranks) {
    snprintf(err, errlen, "out of memory for the per-rank results");
    goto done;
  }
  out->sim_actors = A;
  if (ctx.links) {
    *links_out = ctx.links;
    *nlinks_out = ctx.nlinks;
    ctx.links = NULL;
  }
  rc = 0;
done:
  if (ctx.rpn > 0) bs_plan_decide(cfg, ctx.rpn, &out->decision);
  bs_out_abort(ctx.trace_out);
  if (ctx.rs)
    for (int s = 0; s < ctx.A; s++)
      if (ctx.rs[s].it) ctx.src->iter_free(ctx.rs[s].it);
  free(ctx.rs);
  free(ctx.links);
  free(xml);
  if (plan) bs_plan_free(plan);
  free(prof);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  out->sim_rss_bytes = (int64_t)ru.ru_maxrss * 1024;
  out->sim_wall_s = now_wall() - w0;
  if (rc) snprintf(out->error, sizeof out->error, "%s", err);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The forked child and its pipe                                       */
/* ------------------------------------------------------------------ */

static int write_all(int fd, const void *p, size_t n) {
  const char *s = p;
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, void *p, size_t n) {
  char *s = p;
  while (n) {
    ssize_t r = read(fd, s, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    s += r;
    n -= (size_t)r;
  }
  return 0;
}

/* Exit codes of the child that are not a result. */
#define CHILD_OUT_OF_MEMORY 4
#define CHILD_ORPHANED 5

/* In the child: an allocation SimGrid (C++) could not make ends the child with CHILD_OUT_OF_MEMORY. */
static void child_out_of_memory(void) { _exit(CHILD_OUT_OF_MEMORY); }

/*
 * The child's stderr goes to a temporary file: when SimGrid aborts (xbt_die: a
 * platform it cannot route, a stack it cannot allocate) its CRITICAL line
 * becomes the point's error instead of a backtrace; anything else the child
 * wrote is copied to stderr as it was.
 */
static int child_said(FILE *cap, char *said, size_t saidlen) {
  char line[512];
  if (!cap || fseek(cap, 0, SEEK_SET)) return 0;
  while (fgets(line, sizeof line, cap)) {
    const char *c = strstr(line, "/CRITICAL] ");
    if (!c) continue;
    c += strlen("/CRITICAL] ");
    size_t n = strcspn(c, "\n");
    snprintf(said, saidlen, "%.*s", (int)n, c);
    return 1;
  }
  return 0;
}

static void child_replay(FILE *cap) {
  char buf[4096];
  size_t n;
  if (!cap || fseek(cap, 0, SEEK_SET)) return;
  while ((n = fread(buf, 1, sizeof buf, cap)) > 0) fwrite(buf, 1, n, stderr);
  fflush(stderr);
}

/* "; the address-space limit (ulimit -v) is N MiB" when one is set, else "". */
static const char *as_limit_note(void) {
  static char note[96];
  struct rlimit rl;
  note[0] = '\0';
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    snprintf(note, sizeof note, " (the address-space limit, ulimit -v, is %llu MiB)",
             (unsigned long long)(rl.rlim_cur >> 20));
  return note;
}

/*
 * The parent while its child simulates: SIGINT, SIGTERM and SIGHUP (unless
 * ignored) are held, so that the parent first kills and reaps the child, then
 * ends by the signal as it would have; when stderr is not a terminal, a line
 * every BURSTSIM_LIVENESS_S seconds (10 by default; tests set it lower) says
 * the point is still running.
 */
static volatile sig_atomic_t watch_signal;
static void watch_on_signal(int sig) { watch_signal = sig; }

static const int watch_sigs[3] = {SIGINT, SIGTERM, SIGHUP};

typedef struct {
  pid_t child;
  struct sigaction old[3];
  int installed[3];
  sigset_t oldmask;
} child_watch;

static void watch_begin(child_watch *w, pid_t child) {
  memset(w, 0, sizeof *w);
  w->child = child;
  watch_signal = 0;
  sigset_t block;
  sigemptyset(&block);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = watch_on_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; i++) {
    if (sigaction(watch_sigs[i], NULL, &w->old[i]) || w->old[i].sa_handler == SIG_IGN) continue;
    if (sigaction(watch_sigs[i], &sa, NULL) == 0) {
      w->installed[i] = 1;
      sigaddset(&block, watch_sigs[i]);
    }
  }
  sigprocmask(SIG_BLOCK, &block, &w->oldmask);
}

/* Waits until fd has data or the child ended; returns 0, or the signal that asked this process to stop. */
static int watch_until_readable(child_watch *w, int fd, const char *label) {
  const char *iv = getenv("BURSTSIM_LIVENESS_S");
  long every = iv && *iv ? strtol(iv, NULL, 10) : 10;
  if (every < 1 || every > 86400) every = 10;
  int live = label && !isatty(2);
  double t0 = now_wall(), next = t0 + (double)every;
  for (;;) {
    if (watch_signal) return watch_signal;
    struct pollfd p = {fd, POLLIN, 0};
    double left = next - now_wall();
    struct timespec ts = {0, 0};
    if (left > 0) {
      ts.tv_sec = (time_t)left;
      ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
    }
    int n = ppoll(&p, 1, live ? &ts : NULL, &w->oldmask);
    if (n > 0) return 0;
    if (n < 0 && errno != EINTR) return 0; /* the reads that follow report it */
    if (n == 0 && live) {
      fprintf(stderr, "burstsim sim: %s still running (%.0f s)\n", label, now_wall() - t0);
      fflush(stderr);
      next += (double)every;
    }
  }
}

/* Puts the signal dispositions and mask back; a signal held meanwhile is delivered now. */
static void watch_end(child_watch *w) {
  for (int i = 0; i < 3; i++)
    if (w->installed[i]) sigaction(watch_sigs[i], &w->old[i], NULL);
  int sig = watch_signal;
  sigprocmask(SIG_SETMASK, &w->oldmask, NULL);
  if (sig) raise(sig);
}

int bs_sim_check_profile(const bs_config *cfg, const bs_sim_opts *opts, char *err, size_t errlen) {
  bs_profile *prof = calloc(1, sizeof *prof);
  if (!prof) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  const char *name = opts && opts->profile ? opts->profile : cfg->cluster.profile;
  char why[512];
  int rc = bs_profile_load(name, prof, why, sizeof why);
  if (rc) snprintf(err, errlen, "%s: %s", opts && opts->profile ? "--profile" : "cluster.profile", why);
  free(prof);
  return rc;
}

/* In a forked child (SimGrid starts once per process): loads file and checks its links and gpu<i> routes. */
static void check_platform_child(const char *file, int fd) {
  char e[512] = "", lerr[400];
  int sargc = 1;
  char arg0[] = "burstsim-check";
  char *sargv[] = {arg0, NULL};
  simgrid_init(&sargc, sargv);
  xbt_log_control_set("root.thresh:critical");
  if (bs_sim_load_platform(file, lerr, sizeof lerr)) {
    snprintf(e, sizeof e, "cluster.topology: %s", lerr);
  } else {
    size_t nh = sg_host_count();
    void **hosts = calloc(nh + 1, sizeof *hosts);
    int n = 0;
    char name[32];
    for (size_t i = 0; hosts && i < nh; i++) {
      snprintf(name, sizeof name, "gpu%zu", i);
      if (!(hosts[n] = sg_host_by_name(name))) break;
      n++;
    }
    int *node = calloc(nh + 1, sizeof *node);
    char herr[400];
    if (!hosts || !node) snprintf(e, sizeof e, "out of memory");
    else if (n > 0 && bs_platform_hosts(n, 1, hosts, node, herr, sizeof herr))
      snprintf(e, sizeof e, "cluster.topology: %.200s: %.280s", file, herr);
    else bs_platform_check_loaded(file, hosts, n, e, sizeof e);
    free(hosts);
    free(node);
  }
  _exit(write_all(fd, e, sizeof e) ? 3 : 0);
}

int bs_sim_check_topology(const bs_config *cfg, char *err, size_t errlen) {
  const char *topo = cfg->cluster.topology;
  if (bs_platform_check_name(topo, err, errlen)) return -1;
  if (bs_topo_is_generator(topo)) return 0;
  int fds[2];
  if (pipe(fds)) {
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) _exit(CHILD_ORPHANED);
    close(fds[0]);
    check_platform_child(topo, fds[1]);
  }
  close(fds[1]);
  char e[512];
  int ok = read_all(fds[0], e, sizeof e) == 0;
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!ok) {
    snprintf(err, errlen, "cluster.topology: %s: SimGrid could not load it (%s %d)", topo,
             WIFSIGNALED(status) ? "signal" : "status", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return -1;
  }
  e[sizeof e - 1] = '\0';
  if (e[0]) {
    snprintf(err, errlen, "%s", e);
    return -1;
  }
  return 0;
}

/* OPENBLAS_NUM_THREADS as the user set it ("" = unset), kept across the re-execution. */
#define BLAS_GIVEN "BURSTSIM_OPENBLAS_NUM_THREADS_GIVEN"

/* The arguments this process was started with (/proc/self/cmdline), NULL-terminated; NULL on failure. */
static char **own_arguments(char **text) {
  FILE *f = fopen("/proc/self/cmdline", "rb");
  if (!f) return NULL;
  size_t n = 0, cap = 4096;
  char *t = malloc(cap + 1);
  size_t got;
  while (t && (got = fread(t + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *nt = realloc(t, (cap *= 2) + 1);
      if (!nt) free(t);
      t = nt;
    }
  }
  fclose(f);
  if (!t || n == 0) {
    free(t);
    return NULL;
  }
  t[n] = '\0';
  size_t argc = 0;
  for (size_t i = 0; i < n; i++) argc += t[i] == '\0';
  char **argv = calloc(argc + 2, sizeof *argv);
  if (!argv) {
    free(t);
    return NULL;
  }
  size_t k = 0;
  for (size_t i = 0; i < n && k <= argc; i += strlen(t + i) + 1) argv[k++] = t + i;
  *text = t;
  return argv;
}

void bs_sim_single_blas_thread(void) {
  const char *v = getenv("OPENBLAS_NUM_THREADS");
  if (v && !strcmp(v, "1")) return;
  char *text = NULL;
  char **argv = own_arguments(&text);
  if (!argv) return;
  /* What the user gave, for the programs this one starts (bs_sim_blas_threads_restore). */
  if (setenv(BLAS_GIVEN, v ? v : "", 1) == 0 && setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0) {
    fflush(stdout);
    fflush(stderr);
    execv("/proc/self/exe", argv);
  }
  /* Not possible: go on with the pool as it is (it only matters under a low ulimit -v). */
  if (v) setenv("OPENBLAS_NUM_THREADS", v, 1);
  else unsetenv("OPENBLAS_NUM_THREADS");
  unsetenv(BLAS_GIVEN);
  free(argv);
  free(text);
}

void bs_sim_blas_threads_restore(void) {
  const char *g = getenv(BLAS_GIVEN);
  if (!g) return;
  if (*g) setenv("OPENBLAS_NUM_THREADS", g, 1);
  else unsetenv("OPENBLAS_NUM_THREADS");
  unsetenv(BLAS_GIVEN);
}

/* The result names the profile the point ran with: --profile (as given) over the scenario's. */
static void record_profile(bs_result *out, const bs_sim_opts *opts) {
  if (opts && opts->profile)
    snprintf(out->cfg.cluster.profile, sizeof out->cfg.cluster.profile, "%s", opts->profile);
}

int bs_sim_run(const bs_config *cfg, const bs_sim_opts *opts, bs_result *out, char *err,
               size_t errlen) {
  bs_sim_opts d;
  if (!opts) { bs_sim_opts_default(&d); opts = &d; }
  if (bs_sim_layers_apply(cfg, opts)) {
    int rc = bs_sim_run_layers(cfg, opts, out, err, errlen);
    if (rc == 0 && check_times(out, err, errlen)) {
      bs_result_free(out);
      snprintf(out->error, sizeof out->error, "%s", err);
      rc = -1;
    }
    record_profile(out, opts);
    return rc;
  }
  return bs_sim_run_source(cfg, opts, NULL, out, NULL, NULL, err, errlen);
}

int bs_sim_run_source(const bs_config *cfg, const bs_sim_opts *opts_in, const bs_sim_source *source,
                      bs_result *out, bs_link_stat **links_out, int *nlinks_out, char *err,
                      size_t errlen) {
  bs_sim_opts opts;
  if (opts_in) opts = *opts_in;
  else bs_sim_opts_default(&opts);
  bs_link_stat *links = NULL;
  int nlinks = 0;
  if (links_out) *links_out = NULL;
  if (nlinks_out) *nlinks_out = 0;
  if (opts.in_process) {
    int rc = simulate(cfg, &opts, source, out, links_out ? &links : NULL, &nlinks, err, errlen);
    record_profile(out, &opts);
    if (links_out) {
      *links_out = links;
      *nlinks_out = nlinks;
    }
    return rc;
  }
  int fds[2];
  if (pipe(fds)) {
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  FILE *cap = tmpfile(); /* the child's stderr (NULL: not captured) */
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(fds[0]);
    close(fds[1]);
    if (cap) fclose(cap);
    if (e == ENOMEM || e == EAGAIN) snprintf(err, errlen, "out of memory: cannot fork the simulation process: %s%s", strerror(e), as_limit_note());
    else snprintf(err, errlen, "fork: %s", strerror(e));
    return -1;
  }
  if (pid == 0) {
    /* Dies with the parent, however it ends; the check closes the race with a parent gone before prctl. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) _exit(CHILD_ORPHANED);
    close(fds[0]);
    if (cap) dup2(fileno(cap), 2);
    bs_sim_on_out_of_memory(child_out_of_memory);
    bs_result r;
    char e[512] = "";
    int rc = simulate(cfg, &opts, source, &r, links_out ? &links : NULL, &nlinks, e, sizeof e);
    int ok = write_all(fds[1], &rc, sizeof rc) == 0 && write_all(fds[1], e, sizeof e) == 0 &&
             write_all(fds[1], &r, sizeof r) == 0;
    int nr = rc == 0 ? r.nranks : 0;
    ok = ok && write_all(fds[1], &nr, sizeof nr) == 0 &&
         (!nr || write_all(fds[1], r.ranks, sizeof *r.ranks * (size_t)nr) == 0) &&
         write_all(fds[1], &nlinks, sizeof nlinks) == 0 &&
         (!nlinks || write_all(fds[1], links, sizeof *links * (size_t)nlinks) == 0);
    close(fds[1]);
    _exit(ok ? 0 : 3); /* no atexit: SimGrid's teardown is not needed */
  }
  close(fds[1]);
  child_watch w;
  watch_begin(&w, pid);
  int sig = watch_until_readable(&w, fds[0], opts.label);
  int rc = -1, nr = 0;
  char e[512];
  bs_result r;
  bs_rank_result *ranks = NULL;
  int ok = !sig && read_all(fds[0], &rc, sizeof rc) == 0 && read_all(fds[0], e, sizeof e) == 0 &&
           read_all(fds[0], &r, sizeof r) == 0 && read_all(fds[0], &nr, sizeof nr) == 0;
  if (ok && nr > 0) {
    ranks = malloc(sizeof *ranks * (size_t)nr);
    ok = ranks && read_all(fds[0], ranks, sizeof *ranks * (size_t)nr) == 0;
  }
  if (ok) ok = read_all(fds[0], &nlinks, sizeof nlinks) == 0;
  if (ok && nlinks > 0) {
    links = malloc(sizeof *links * (size_t)nlinks);
    ok = links && read_all(fds[0], links, sizeof *links * (size_t)nlinks) == 0;
  }
  close(fds[0]);
  if (sig) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  watch_end(&w); /* a signal that came meanwhile now ends this process as it would have */
  if (!ok) {
    free(ranks);
    free(links);
    memset(out, 0, sizeof *out);
    out->cfg = *cfg;
    out->mode = "sim";
    char said[256];
    int has_said = child_said(cap, said, sizeof said);
    int oom = (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_OUT_OF_MEMORY) ||
              (has_said && (strstr(said, "alloc") || strstr(said, "Memory") || strstr(said, "memory")));
    if (!has_said) child_replay(cap); /* its own words, whatever they were */
    if (sig)
      snprintf(err, errlen, "stopped by signal %d before the simulation ended", sig);
    else if (oom)
      snprintf(err, errlen, "out of memory: the simulation process could not allocate%s%s%s", has_said ? " (SimGrid: " : "",
               has_said ? said : "", has_said ? ")" : "");
    else if (has_said)
      snprintf(err, errlen, "SimGrid stopped the simulation: %s", said);
    else if (WIFSIGNALED(status) && as_limit_note()[0])
      snprintf(err, errlen, "the simulation process died of signal %d, most likely out of memory", WTERMSIG(status));
    else if (WIFSIGNALED(status))
      snprintf(err, errlen, "the simulation process died of signal %d (SimGrid aborted; see its "
               "message above)", WTERMSIG(status));
    else
      snprintf(err, errlen, "the simulation process ended (status %d) without a result",
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    if (oom || (WIFSIGNALED(status) && as_limit_note()[0])) {
      size_t n = strlen(err);
      snprintf(err + n, errlen > n ? errlen - n : 0, "%s", as_limit_note());
    }
    if (cap) fclose(cap);
    snprintf(out->error, sizeof out->error, "%s", err);
    record_profile(out, &opts);
    return -1;
  }
  if (cap) {
    child_replay(cap);
    fclose(cap);
  }
  *out = r;
  record_profile(out, &opts);
  out->mode = "sim";
  out->ranks = ranks;
  out->nranks = ranks ? nr : 0;
  if (rc) snprintf(err, errlen, "%s", e);
  if (links_out) {
    *links_out = links;
    *nlinks_out = nlinks;
  } else {
    free(links);
  }
  return rc;
}

char *bs_sim_platform_xml(const bs_config *cfg, const bs_sim_opts *opts_in, char *err, size_t errlen) {
  bs_sim_opts opts;
  if (opts_in) opts = *opts_in;
  else bs_sim_opts_default(&opts);
  bs_profile *prof = calloc(1, sizeof *prof);
  if (!prof) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  char *xml = NULL;
  bs_platform_spec ps;
  if (!bs_profile_load(opts.profile ? opts.profile : cfg->cluster.profile, prof, err, errlen) &&
      !bs_platform_resolve(cfg, &opts, prof, &ps, err, errlen)) {
    if (ps.generated) xml = bs_platform_xml(&ps, ps.tp.nodes, ps.tp.gpus_per_node, 0, err, errlen);
    else snprintf(err, errlen, "%s is a user platform file, not a generator", ps.file);
  }
  free(prof);
  return xml;
}
