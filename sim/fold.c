/*
 * fold.c — the pre-pass that makes 1024 GPUs fit in seconds. When every
 * rank's program equals that of the rank F below it with peers shifted by F
 * (checked op by op, with COMPUTE compared by modelled duration) and the
 * generated fabric maps onto itself when shifted by F/ranks_per_node nodes
 * (bs_topo_fold_nodes), the ranks r and r mod F have identical timelines, so
 * only F actors are simulated on an F-rank platform, peers taken modulo F.
 * Ring collectives count by their neighbours on every channel, tree
 * allreduces over every rank (timed as a whole) by their size; a dgx fabric
 * whose uplinks cannot limit a flow folds as a single leaf.
 * tests/sim checks the folded figures against the straightforward run.
 * Where the plan proves ranks alike (a ring's torus, bs_plan_ring_uniform; data-parallel replicas,
 * bs_plan_replicas_uniform) the pre-pass reads one program per class and derives the others'
 * signatures (uniform_signatures, replica_class), reading a few more as a check.
 */
#include "sim/point.h"
#include "sim/coll_algo.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
  uint64_t sig;     /* the op stream, peers relative (node offset, index offset) */
  int max_node_off; /* largest node offset talked over (shortest way round) */
  int max_idx_off;  /* largest index offset within a node (circular) */
  int cross_rail;   /* an inter-node message between different local indices */
  int has_coll;
  int coll_general; /* a collective that talks beyond its ring neighbours */
  /* The stage fold (see stage_fold): the same stream with node offsets written (stage offset,
   * node offset within the stage's block of Ki nodes, circular), and the largest of the latter. */
  uint64_t sig2;
  int max_in_off;
} rank_info;

/*
 * A signature being hashed, as three streams: h, the ops but for their peers; hp, what each op
 * naming peers (a SEND or RECV's peer, a collective's group) adds as written from the rank (a
 * peer as (node offset mod K, index offset)); hq, the same with peers as (stage offset, node
 * offset in the stage's block mod Ki, index offset) for the stage fold. sig = (h, hp) and sig2 =
 * (h, hq) hashed: equal streams read the same as equal op streams with their peers in place, at
 * one mix per field.
 */
typedef struct {
  uint64_t h, hp, hq;
} sig_acc;

#define SEED_H 0xcbf29ce484222325ull
#define SEED_P 0x84222325cbf29ce4ull

/* Where a rank sits: what its peers are written relative to. */
typedef struct {
  int rank, G, K, rpn, Ki, mynode, myidx;
} sig_frame;

static sig_frame frame_of(int rank, int G, int rpn, int Ki) {
  return (sig_frame){rank, G, G / rpn, rpn, Ki, rank / rpn, rank % rpn};
}

/*
 * What one op naming peers adds to a rank's signature, written from the rank: a value for each
 * peer stream and the offsets it talks over. A function of the rank and of the op's peer fields
 * alone (the peer; the collective's kind, group and bytes), so that a rank whose program is
 * another's with its peers renamed (bs_plan_replicas_uniform) has the other's op stream with
 * these parts in place of its parts (replica_signatures).
 */
typedef struct {
  uint64_t vp, vq;
  int node_off, idx_off, in_off, cross, general;
} peer_part;

static inline void put(sig_acc *s, uint64_t v) { s->h = mix(s->h, v); }

/* d mod n for d in (-n, 2n), the common case, without a division. */
static inline int wrap(int d, int n) {
  if (d < 0) d += n;
  if (d >= n) d -= n;
  return d;
}

/* The shortest way round to offset d in [0, n). */
static inline int circ0(int d, int n) { return d > n - d ? n - d : d; }

static int circ(int d, int n) { return circ0(((d % n) + n) % n, n); }

/* A peer (a rank of the plan, 0 <= peer < G) as f writes it in each peer stream (*cp, *cq), and
 * the largest offsets seen, into pp. */
static inline void peer_code(const sig_frame *f, int peer, peer_part *pp, uint64_t *cp, uint64_t *cq) {
  int K = f->K, rpn = f->rpn, pn = peer / rpn;
  int dn = wrap(pn - f->mynode, K), di = wrap(peer - pn * rpn - f->myidx, rpn);
  *cp = (uint64_t)dn * (uint64_t)rpn + (uint64_t)di;
  *cq = 0;
  int cn = circ0(dn, K);
  if (cn > pp->node_off) pp->node_off = cn;
  if (dn && di) pp->cross = 1;
  if (!dn && circ0(di, rpn) > pp->idx_off) pp->idx_off = circ0(di, rpn);
  if (f->Ki) {
    int Ki = f->Ki, Ko = K / Ki, po = pn / Ki, mo = f->mynode / Ki;
    int dout = wrap(po - mo, Ko), din = wrap((pn - po * Ki) - (f->mynode - mo * Ki), Ki);
    *cq = ((uint64_t)dout * (uint64_t)Ki + (uint64_t)din) * (uint64_t)rpn + (uint64_t)di;
    if (circ0(din, Ki) > pp->in_off) pp->in_off = circ0(din, Ki);
  }
}

/* A SEND or RECV's peer (0 <= peer < G): its codes are its part. */
static inline void p2p_part(const sig_frame *f, int peer, peer_part *pp) {
  memset(pp, 0, sizeof *pp);
  peer_code(f, peer, pp, &pp->vp, &pp->vq);
}

/* A part into the peer streams, its offsets into ri. */
static inline void add_part(sig_acc *s, rank_info *ri, const peer_part *pp) {
  s->hp = mix(s->hp, pp->vp);
  s->hq = mix(s->hq, pp->vq);
  if (pp->node_off > ri->max_node_off) ri->max_node_off = pp->node_off;
  if (pp->idx_off > ri->max_idx_off) ri->max_idx_off = pp->idx_off;
  if (pp->in_off > ri->max_in_off) ri->max_in_off = pp->in_off;
  ri->cross_rail |= pp->cross;
  ri->coll_general |= pp->general;
}

/*
 * What the pre-pass knows of the platform: whether ring collectives run a
 * channel per rail, and (generated dgx) the route model that decides auto
 * allreduces as coll.c does, remembered per (group, bytes).
 */
typedef struct {
  bs_group g;
  int64_t bytes;
  bs_coll_algo algo;
} algo_memo;
/* A COMPUTE's modelled duration by the fields bs_profile_kernel_time reads (profile/profile.c:
 * the kernel, FP8, the attention shape B, Zq, Nq, Nk, d, the GEMM's m, n, k, elems and flops;
 * the dtype is the point's): a pure function of them, so a hit is the same double. */
typedef struct {
  int64_t f[11];
  double flops;
  double d;
} kt_memo;
#define KT_SLOTS 256

typedef struct {
  int rails;
  const bs_platform_spec *ps;
  bs_coll_model model;
  int n;
  algo_memo memo[64];
  kt_memo kt[KT_SLOTS];
} fold_env;

/* The modelled duration of c (bs_profile_kernel_time), remembered per thread; < 0 on error. */
static double kernel_time(fold_env *env, const bs_profile *prof, const bs_compute *c, bs_dtype dt, char *err,
                          size_t errlen) {
  const attn_params *a = &c->a;
  kt_memo k = {{c->kernel, c->fp8, a->B, a->Zq, a->Nq, a->Nk, a->d, c->m, c->n, c->k, c->elems}, c->flops, 0};
  /* the slot from the fields that vary most (a miss costs one model evaluation, never a wrong d) */
  uint64_t h = (dbits(k.flops) ^ (uint64_t)a->Nk * 0x9e3779b97f4a7c15ull ^ (uint64_t)c->m ^ (uint64_t)c->kernel << 7) *
               0x100000001b3ull;
  kt_memo *slot = &env->kt[(h >> 24) % KT_SLOTS];
  if (slot->d > 0 && !memcmp(slot->f, k.f, sizeof k.f) && dbits(slot->flops) == dbits(k.flops)) return slot->d;
  k.d = bs_profile_kernel_time(prof, c, dt, err, errlen);
  if (k.d > 0) *slot = k;
  return k.d;
}

/* The algorithm coll.c will run an allreduce with, or -1 when only SimGrid's routes can say. */
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
    node[i] = sim_member(g, i) / rpn;
    multi |= node[i] != node[0];
  }
  bs_coll_links l;
  double t_tree;
  int r = -1;
  if (!sim_group_links_model(env->ps, g, node, &l))
    r = (int)sim_auto_algo(g->size, node, multi, bytes, &l, sim_ring_channels(env->rails, rpn, g), &t_tree);
  free(node);
  if (r >= 0 && env->n < 64) env->memo[env->n++] = (algo_memo){*g, bytes, (bs_coll_algo)r};
  return r;
}

/*
 * A ring collective talks only to its ring neighbours (on every channel), so
 * what a rank's timeline depends on is where they are relative to it, not
 * where the group starts: hash their offsets (node, index in node) and count
 * only them as node offsets. This lets model-scope plans, whose gradient
 * collectives span every rank (or, composed, every rank of a tensor-parallel
 * index: a strided group), fold like their rings (peers taken modulo the
 * fold, as for point-to-point). All-to-alls and trees keep the whole-group
 * rule. Returns 1 when it applied (the part in *pp).
 */
static int coll_ring_only(fold_env *env, bs_coll_kind kind, bs_coll_algo algo, const bs_group *g, int64_t bytes,
                          const sig_frame *f, peer_part *pp) {
  int rank = f->rank, rpn = f->rpn, G = f->G;
  if (kind == BS_COLL_ALLTOALL || g->stride < 1 || g->size < 2 || (rank - g->first) % g->stride != 0) return 0;
  int me = (rank - g->first) / g->stride, K = G / rpn;
  if (kind == BS_COLL_ALLREDUCE) {
    int a = prepass_algo(env, algo, g, bytes, rpn);
    /* A tree over every rank (of one residue, its first member on node 0, which a fold keeps)
     * timed as a whole (coll.c) is the same on every member. */
    if (a == BS_COLL_ALGO_TREE && sim_whole_tree(G, g) && g->stride <= rpn && env->model != BS_COLL_STEPS &&
        (env->model != BS_COLL_MODEL_AUTO || K >= 2)) {
      pp->vp = pp->vq = mix(SEED_P, 2);
      return 1;
    }
    /* Any other tree talks to tree neighbours, not ring ones. */
    if (a != BS_COLL_ALGO_RING) return 0;
  }
  if (me < 0 || me >= g->size) return 0;
  int C = sim_ring_channels(env->rails, rpn, g);
  pp->vp = pp->vq = mix(mix(SEED_P, 1), (uint64_t)C); /* 2 C peers follow */
  for (int ch = 0; ch < C; ch++) {
    int nb[2] = {sim_member(g, sim_ring_peer(C, rpn, g->size, ch, me, +1)),
                 sim_member(g, sim_ring_peer(C, rpn, g->size, ch, me, -1))};
    for (int j = 0; j < 2; j++) {
      uint64_t cp, cq;
      if (nb[j] >= 0 && nb[j] < G) peer_code(f, nb[j], pp, &cp, &cq);
      else cp = cq = (uint64_t)(uint32_t)nb[j] | (uint64_t)1 << 40; /* the simulation proper reports it */
      pp->vp = mix(pp->vp, cp);
      pp->vq = mix(pp->vq, cq);
    }
  }
  return 1;
}

/* A collective's part: its ring neighbours', or the whole group's (where it starts from the rank,
 * and every member's node offset counted). */
static void coll_part(fold_env *env, bs_coll_kind kind, bs_coll_algo algo, const bs_group *g, int64_t bytes,
                      const sig_frame *f, peer_part *pp) {
  memset(pp, 0, sizeof *pp);
  if (coll_ring_only(env, kind, algo, g, bytes, f, pp)) return;
  pp->general = 1;
  pp->vp = pp->vq = mix(mix(SEED_P, 3), (uint64_t)(uint32_t)(g->first - f->rank));
  for (int i = 0; i < g->size; i++) {
    int m = g->first + g->stride * i;
    int dn = circ(m / f->rpn - f->mynode, f->K);
    if (dn > pp->node_off) pp->node_off = dn;
  }
}

/*
 * The ops naming peers of one program, as replica_signatures reads them: the distinct ones
 * (items: a SEND or RECV's peer, a collective's kind, group and bytes) and the order they come
 * in (seq), with the rest of the stream's hash (h). bad: a peer outside the plan (the
 * simulation reports it), or more distinct ones than a record holds.
 */
#define REC_ITEMS 1024
#define REC_SLOTS 4096
typedef struct {
  int kind; /* 0: a peer, 1: a collective */
  int peer;
  bs_coll_kind ck;
  bs_group g;
  int64_t bytes;
} sig_item;

typedef struct {
  sig_item item[REC_ITEMS];
  int nitem;
  int16_t slot[REC_SLOTS]; /* item + 1, 0: empty */
  uint16_t *seq;
  size_t nseq, cap;
  uint64_t h;
  int has_coll, bad;
} sig_rec;

static void rec_reset(sig_rec *r) {
  r->nitem = 0;
  memset(r->slot, 0, sizeof r->slot);
  r->nseq = 0;
  r->h = 0;
  r->has_coll = r->bad = 0;
}

static int same_item(const sig_item *a, const sig_item *b) {
  return a->kind == b->kind && (a->kind == 0 ? a->peer == b->peer
                                             : a->ck == b->ck && a->bytes == b->bytes && a->g.first == b->g.first &&
                                                 a->g.stride == b->g.stride && a->g.size == b->g.size);
}

static void rec_add(sig_rec *r, const sig_item *it) {
  if (r->bad) return;
  uint64_t k = it->kind ? mix(mix(mix(mix((uint64_t)it->ck, (uint64_t)it->bytes), (uint64_t)(uint32_t)it->g.first),
                                  (uint64_t)(uint32_t)it->g.stride),
                              (uint64_t)(uint32_t)it->g.size)
                        : mix(7, (uint64_t)(uint32_t)it->peer);
  unsigned h = (unsigned)(k >> 20) % REC_SLOTS;
  while (r->slot[h] && !same_item(&r->item[r->slot[h] - 1], it)) h = (h + 1) % REC_SLOTS;
  if (!r->slot[h]) {
    if (r->nitem == REC_ITEMS) {
      r->bad = 1;
      return;
    }
    r->item[r->nitem++] = *it;
    r->slot[h] = (int16_t)r->nitem;
  }
  if (r->nseq == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 4096;
    uint16_t *q = realloc(r->seq, cap * sizeof *q);
    if (!q) {
      r->bad = 1;
      return;
    }
    r->seq = q;
    r->cap = cap;
  }
  r->seq[r->nseq++] = (uint16_t)(r->slot[h] - 1);
}

/*
 * The op stream of `rank` with peers written relative to it and COMPUTE by its
 * modelled duration, hashed; and the offsets it talks over. rec (not NULL):
 * the ops naming peers recorded as well, for replica_signatures.
 */
static int rank_signature(const bs_config *cfg, const bs_sim_source *src, const bs_profile *prof, bs_coll_algo algo,
                          fold_env *env, int rank, int G, int rpn, int Ki, rank_info *ri, sig_rec *rec, char *err,
                          size_t errlen) {
  bs_dtype dt = cfg->model.dtype;
  double slow = sim_compute_factor(cfg, rank); /* a straggler's program differs from its image's */
  void *it = src->iter_new(src->ctx, rank);
  if (!it) {
    snprintf(err, errlen, "out of memory (plan iterator)");
    return -1;
  }
  memset(ri, 0, sizeof *ri);
  sig_frame f = frame_of(rank, G, rpn, Ki);
  sig_acc s = {SEED_H, SEED_P, SEED_P};
  peer_part pp;
  bs_op buf;
  const bs_op *op = &buf; /* in place when the source offers it (bs_sim_source.next_ref), else copied */
  while (src->next_ref ? (op = src->next_ref(it)) != NULL : src->next(it, &buf)) {
    put(&s, (uint64_t)op->kind);
    put(&s, (uint64_t)(uint32_t)op->handle);
    switch (op->kind) {
    case BS_OP_ALLOC:
      put(&s, (uint64_t)op->u.alloc.buf);
      put(&s, (uint64_t)op->u.alloc.bytes);
      put(&s, (uint64_t)op->u.alloc.cls);
      break;
    case BS_OP_FREE: put(&s, (uint64_t)op->u.free.buf); break;
    case BS_OP_COMPUTE: {
      double d = kernel_time(env, prof, &op->u.compute, dt, err, errlen);
      if (d < 0) {
        src->iter_free(it);
        return -1;
      }
      put(&s, (uint64_t)op->u.compute.kernel);
      put(&s, dbits(d * slow));
      break;
    }
    case BS_OP_SEND:
    case BS_OP_RECV: {
      int p = op->u.p2p.peer;
      if (p < 0 || p >= G) { /* the simulation proper reports it */
        put(&s, (uint64_t)(uint32_t)p | (uint64_t)1 << 40);
        if (rec) rec->bad = 1;
        break;
      }
      p2p_part(&f, p, &pp);
      add_part(&s, ri, &pp);
      if (rec) rec_add(rec, &(sig_item){0, p, 0, {0, 0, 0}, 0});
      put(&s, (uint64_t)(uint32_t)op->u.p2p.tag);
      put(&s, (uint64_t)op->u.p2p.bytes);
      break;
    }
    case BS_OP_COLL: {
      const bs_group *g = &op->u.coll.group;
      ri->has_coll = 1;
      put(&s, (uint64_t)g->stride);
      put(&s, (uint64_t)g->size);
      put(&s, (uint64_t)op->u.coll.kind);
      put(&s, (uint64_t)op->u.coll.bytes);
      coll_part(env, op->u.coll.kind, algo, g, op->u.coll.bytes, &f, &pp);
      add_part(&s, ri, &pp);
      if (rec) rec_add(rec, &(sig_item){1, 0, op->u.coll.kind, *g, op->u.coll.bytes});
      break;
    }
    case BS_OP_WAIT:
      put(&s, (uint64_t)op->u.wait.n);
      for (int i = 0; i < op->u.wait.n && i < BS_MAX_WAIT; i++) put(&s, (uint64_t)(uint32_t)op->u.wait.handles[i]);
      break;
    case BS_OP_PHASE: put(&s, (uint64_t)op->u.phase.fwd_bwd * 2 + (uint64_t)op->u.phase.begin); break;
    }
  }
  const char *why = src->iter_error ? src->iter_error(it) : NULL;
  if (why) {
    snprintf(err, errlen, "rank %d: %s", rank, why);
    src->iter_free(it);
    return -1;
  }
  src->iter_free(it);
  ri->sig = mix(s.h, s.hp);
  ri->sig2 = mix(s.h, s.hq);
  if (rec) {
    rec->h = s.h;
    rec->has_coll = ri->has_coll;
  }
  return 0;
}

/* A degrade of a network class (NIC or fabric) on every node, or NICs of another line rate: the
 * leaves-merged fold assumes uplinks that carry their leaf's NICs in full, which a degraded fabric
 * (or, by the same rule, a changed NIC class) no longer proves; the other folds compare routes and
 * keep it. */
static int whatif_network(const bs_config *cfg) {
  const bs_cluster *k = &cfg->cluster;
  return k->nic_gbps > 0 ||
         (k->degrade_factor > 0 && (k->degrade_class == BS_LINK_FABRIC || k->degrade_class == BS_LINK_NIC));
}

/* Signatures of ranks lo + t, lo + t + nt, ... below hi (one pre-pass thread). */
typedef struct {
  const bs_config *cfg;
  const bs_profile *prof;
  const bs_sim_source *src;
  fold_env env; /* each thread its own memo */
  int G, P, Ki, t, nt, lo, hi, rc;
  rank_info *ri;
  char err[400];
} sig_job;

static void *sig_worker(void *arg) {
  sig_job *j = arg;
  for (int r = j->lo + j->t; r < j->hi && !j->rc; r += j->nt)
    j->rc = rank_signature(j->cfg, j->src, j->prof, j->cfg->cluster.coll_algo, &j->env, r, j->G, j->P, j->Ki, &j->ri[r],
                           NULL, j->err, sizeof j->err);
  return NULL;
}

/*
 * The signatures of ranks [lo, hi). Generating G programs is most of a large
 * fold's cost, and each is independent of the others (plans and profiles are
 * read only), so the ranks are shared among the host's cores.
 */
static int signatures(sig_job *job, int nt, int lo, int hi, char *err, size_t errlen) {
  pthread_t th[8];
  int started = 0;
  for (int t = 0; t < nt; t++) {
    job[t].lo = lo;
    job[t].hi = hi;
  }
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

/* What the signatures of the ranks seen so far say about the offsets a fold must keep. Each
 * field only grows as more ranks are seen, and each growth only removes fold candidates. */
typedef struct {
  int D, Din, cross, coll, coll_general;
  int Dst; /* the stage fold's: largest node offset within a stage's block */
} fold_need;

static void need_add(fold_need *n, const rank_info *ri, int lo, int hi) {
  for (int r = lo; r < hi; r++) {
    if (ri[r].max_node_off > n->D) n->D = ri[r].max_node_off;
    if (ri[r].max_idx_off > n->Din) n->Din = ri[r].max_idx_off;
    n->cross |= ri[r].cross_rail;
    n->coll |= ri[r].has_coll;
    n->coll_general |= ri[r].coll_general;
    if (ri[r].max_in_off > n->Dst) n->Dst = ri[r].max_in_off;
  }
}

/*
 * The stage fold. A pipeline's stages (parallel.pp, outermost in parallel.order) lie whole
 * blocks of Ki nodes apart, so the node fold (a shift of the nodes, which must keep the stage
 * offset) finds nothing; but inside a block, data-parallel replicas run the same programs,
 * peers relative. Written as (stage offset, node offset in the block mod Ki, index offset),
 * when every rank's stream equals that of its image (stage, node in the block mod m, index)
 * with m > twice the largest offset in the block (+d and -d stay distinct peers), m of every
 * Ki nodes stand for all. The fabric must look the same from the images: one leaf or leaves
 * merged (uplinks that cannot limit a flow: see fold_candidates; same-rail messages only), or
 * m and Ki whole leaves, as the node fold shifts them. Ring collectives only. stage_block: Ki,
 * the stage's nodes when the mesh allows it (else 0); stage_fold: the smallest m, 0 for none,
 * monotone in *n as fold_candidates' rules are.
 */
static int stage_block(const bs_config *cfg, const bs_platform_spec *ps) {
  bs_mesh mesh;
  int P = ps->ranks_per_node, G = cfg->par.gpus;
  if (bs_mesh_of(cfg, &mesh, NULL, 0)) return 0;
  int64_t st = mesh.stride[BS_DIM_PP], pp = mesh.size[BS_DIM_PP];
  if (pp < 2 || st * pp != G || st % P || st / P < 3) return 0;
  return (int)(st / P);
}

static int stage_fold(const bs_config *cfg, const bs_platform_spec *ps, const fold_need *n, int Ki) {
  int K = cfg->par.gpus / ps->ranks_per_node;
  const bs_topo_params *t = &ps->topo;
  if (!Ki || n->coll_general || !bs_topo_has_rails(t->name)) return 0;
  int leafy = t->nodes_per_leaf < K, L = t->nodes_per_leaf;
  /* one leaf, or leaves merged: any block size (same-rail messages only, as fold_candidates) */
  int any = !n->cross && !whatif_network(cfg) && (!leafy || (t->oversub <= 1 && t->link[BS_LINK_FABRIC].lat_s == 0));
  for (int m = 2; m < Ki; m++) {
    if (Ki % m || m <= 2 * n->Dst) continue;
    /* else whole leaves, as bs_topo_fold_nodes shifts them: a flow crosses at most Dst/L+1 */
    if (any || (leafy && Ki % L == 0 && m % L == 0 && m / L >= n->Dst / L + 2)) return m;
  }
  return 0;
}

/*
 * The folds worth trying, largest reduction first, as (nodes, ranks per node, wrap): node
 * shifts by bs_topo_fold_nodes, index shifts on dgx nodes (every GPU its own NVSwitch port and
 * its own NIC rail) when all inter-node messages stay on their rail and there are no
 * collectives. Every rule is monotone in `n`: a larger offset or a flag set only removes
 * candidates, which is what lets the pre-pass stop once none is left (sim_choose_fold).
 * Returns their count; *M_out: the plain node fold (K: none), *Ml_out: leaves merged (0: none).
 */
static int fold_candidates(const bs_config *cfg, const bs_platform_spec *ps, const fold_need *n, int cand[64][3],
                           int *M_out, int *Ml_out) {
  int P = ps->ranks_per_node, K = cfg->par.gpus / P, D = n->D;
  int M = K >= 2 ? bs_topo_fold_nodes(&ps->topo, D) : 0;
  if (!M) M = K;
  int Pf = P;
  if (bs_topo_has_rails(ps->topo.name) && !n->cross && !n->coll)
    for (int p = 2; p < P; p++)
      if (P % p == 0 && p > 2 * n->Din && p % (P / bs_topo_nics(&ps->topo)) == 0) { /* whole NICs */
        Pf = p;
        break;
      }
  /* The quotient reproduces same-rail routes only; ring collectives whose hops all stay
   * on their rail (coll_ring_only) fold like point-to-point. */
  int Mq = !n->cross && !n->coll_general ? bs_topo_fold_quotient(&ps->topo, D) : 0;
  /*
   * Leaves merged: on a dgx fabric whose leaf uplinks carry the full bandwidth of their
   * leaf's NICs (oversubscription 1) and add no latency, an uplink can never be what limits
   * a flow (everything it carries came through one of those NICs), so a route across leaves
   * times as one inside a leaf and the fabric folds as a single leaf would. Same-rail
   * messages only (routes across rails are not compared).
   */
  int Ml = 0;
  if (bs_topo_has_rails(ps->topo.name) && ps->topo.nodes_per_leaf < K && ps->topo.oversub <= 1 &&
      ps->topo.link[BS_LINK_FABRIC].lat_s == 0 && !n->cross && !n->coll_general && !whatif_network(cfg)) {
    bs_topo_params one = ps->topo;
    one.nodes_per_leaf = K;
    Ml = bs_topo_fold_nodes(&one, D);
  }
  /* Largest reduction first, then less; then larger node counts, for plans whose programs repeat
   * only every few nodes (composed parallelism: a context-parallel ring per replica). */
  int first[7][3] = {{Ml, Pf, 0}, {Ml, P, 0}, {Mq, Pf, D}, {Mq, P, D}, {M, Pf, 0}, {M, P, 0}, {K, Pf, 0}};
  memcpy(cand, first, sizeof first);
  int nc = 7;
  if (M < K) {
    int leaves_merged = Ml > 0;
    bs_topo_params one = ps->topo;
    if (leaves_merged) one.nodes_per_leaf = K;
    for (int m = bs_topo_fold_nodes_from(leaves_merged ? &one : &ps->topo, D, (leaves_merged ? Ml : M) + 1);
         m > 0 && m < K && nc < 64; m = bs_topo_fold_nodes_from(leaves_merged ? &one : &ps->topo, D, m + 1)) {
      cand[nc][0] = m;
      cand[nc][1] = P;
      cand[nc++][2] = 0;
    }
  }
  *M_out = M;
  *Ml_out = Ml;
  return nc;
}

/* Whether a candidate list holds a fold at all (one that simulates fewer ranks). */
static int any_fold(int cand[64][3], int nc, int K, int P) {
  for (int c = 0; c < nc; c++)
    if (cand[c][0] && !(cand[c][0] == K && cand[c][1] == P)) return 1;
  return 0;
}

/* Whether every rank's stream (sig2) equals that of its image under the stage fold. */
static int stage_images(const rank_info *ri, int G, int P, int Ki, int m) {
  for (int r = 0; r < G; r++) {
    int node = r / P, img = ((node / Ki) * Ki + (node % Ki) % m) * P + r % P;
    if (ri[r].sig2 != ri[img].sig2) return 0;
  }
  return 1;
}

/*
 * The pre-pass's shortcut for rings whose ranks all run one program shifted on a torus of ring
 * positions (bs_plan_ring_uniform, plans/uniform.c): a 16,384-GPU layer is 16,384 programs of
 * 16,384 steps, and reading them all was the whole cost of the point. Such a rank's signature
 * depends on it only through what peer_code makes of its peers (their node and index offsets from
 * it, in both streams) and its compute factor (a straggler): rank 0's program names its peers as
 * torus offsets (da, di), which every rank shifts to its own position. Ranks with the same offsets
 * written the same way and the same factor form a class and share one signature, read from the
 * program of the class's first rank; the middle and last ranks' programs are read too, and any
 * difference (a plan the rule was wrong about) falls back to reading every program. Returns 1
 * when ri holds every rank's signature, 0 when the shortcut does not apply, -1 on error.
 */
#define UNI_DELTAS 16
#define UNI_CLASSES 64
#define UNI_KEY (4 * UNI_DELTAS + 1)

static int uniform_peers(const bs_sim_source *src, int G, int *peers) {
  void *it = src->iter_new(src->ctx, 0);
  if (!it) return -1;
  int n = 0, ok = 1;
  bs_op op;
  while (ok && src->next(it, &op)) {
    if (op.kind == BS_OP_COLL) ok = 0;
    if (op.kind != BS_OP_SEND && op.kind != BS_OP_RECV) continue;
    int p = op.u.p2p.peer, j = 0;
    if (p < 0 || p >= G) ok = 0;
    while (j < n && peers[j] != p) j++;
    if (j == n && ok) {
      if (n == UNI_DELTAS) ok = 0;
      else peers[n++] = p;
    }
  }
  if (src->iter_error && src->iter_error(it)) ok = 0; /* the full pass reports it */
  src->iter_free(it);
  return ok ? n : -1;
}

static int same_info(const rank_info *a, const rank_info *b) {
  return a->sig == b->sig && a->sig2 == b->sig2 && a->max_node_off == b->max_node_off &&
         a->max_idx_off == b->max_idx_off && a->cross_rail == b->cross_rail && a->has_coll == b->has_coll &&
         a->coll_general == b->coll_general && a->max_in_off == b->max_in_off;
}

static int uniform_signatures(const bs_plan *plan, sig_job *job, int Ki, rank_info *ri, char *err, size_t errlen) {
  int TP, TM, peers[UNI_DELTAS], G = job->G, rpn = job->P, K = G / rpn;
  if (!plan || !bs_plan_ring_uniform(plan, &TP, &TM) || (int64_t)TP * TM != G) return 0;
  int np = uniform_peers(job->src, G, peers);
  if (np < 0) return 0;
  int64_t(*key)[UNI_KEY] = malloc(sizeof *key * UNI_CLASSES);
  int *cls = malloc(sizeof *cls * (size_t)G);
  int first[UNI_CLASSES], last[UNI_CLASSES], count[UNI_CLASSES], nc = 0, ok = key && cls;
  for (int r = 0; r < G && ok; r++) {
    int64_t k[UNI_KEY] = {0};
    int a = r / TP, i = r % TP, mynode = r / rpn, myidx = r % rpn;
    for (int j = 0; j < np; j++) { /* rank 0 sits at (0, 0): its peer's position is the offset */
      int q = ((a + peers[j] / TP) % TM) * TP + (i + peers[j] % TP) % TP, pn = q / rpn;
      k[4 * j] = wrap(pn - mynode, K);
      k[4 * j + 1] = wrap(q - pn * rpn - myidx, rpn);
      if (Ki) {
        int mo = mynode / Ki, po = pn / Ki;
        k[4 * j + 2] = wrap(po - mo, K / Ki);
        k[4 * j + 3] = wrap((pn - po * Ki) - (mynode - mo * Ki), Ki);
      }
    }
    k[UNI_KEY - 1] = (int64_t)dbits(sim_compute_factor(job->cfg, r));
    int c = 0;
    while (c < nc && memcmp(key[c], k, sizeof k)) c++;
    if (c == nc) {
      if (nc == UNI_CLASSES) {
        ok = 0;
        break;
      }
      memcpy(key[nc], k, sizeof k);
      first[nc] = r;
      count[nc++] = 0;
    }
    cls[r] = c;
    last[c] = r;
    count[c]++;
  }
  free(key);
  int rc = ok ? 1 : 0;
  for (int c = 0; c < nc && rc == 1; c++) {
    int f = first[c], mid = -1;
    if (rank_signature(job->cfg, job->src, job->prof, job->cfg->cluster.coll_algo, &job->env, f, G, rpn, Ki, &ri[f],
                       NULL, err, errlen))
      rc = -1;
    for (int r = f, seen = 0; r < G && rc == 1 && mid < 0; r++)
      if (cls[r] == c && seen++ == count[c] / 2) mid = r;
    int check[2] = {mid, last[c]};
    for (int j = 0; j < 2 && rc == 1; j++) {
      rank_info x;
      if (check[j] == f) continue;
      if (rank_signature(job->cfg, job->src, job->prof, job->cfg->cluster.coll_algo, &job->env, check[j], G, rpn, Ki,
                         &x, NULL, err, errlen))
        rc = -1;
      else if (!same_info(&x, &ri[f])) rc = 0; /* not what the rule says: read every program */
    }
  }
  if (rc == 1)
    for (int r = 0; r < G; r++) ri[r] = ri[first[cls[r]]];
  free(cls);
  return rc;
}

/*
 * The pre-pass's shortcut for composed plans whose data-parallel replicas run alike
 * (bs_plan_replicas_uniform, plans/uniform.c): a rank with dp coordinate d runs the program of
 * its image with dp 0 (its representative) with every peer's dp coordinate, and every
 * collective group's members', shifted by d. A whole-model step on 2,048 GPUs is 2,048
 * programs of every micro-batch, and reading them all was half of the point's cost. A rank's
 * signature depends on its program's peers only through the parts of the ops naming them
 * (peer_part: a function of the rank and the op's peer fields), so the representative's program
 * is read once, recording its distinct ops naming peers (items) and their order; for each other
 * rank of its replica class the items are shifted and their parts written from that rank, and
 * ranks whose parts are all equal share one signature, the representative's stream with those
 * parts in place (the order walked once per such class). A rank whose compute factor differs
 * from its representative's (a straggler) is read whole. The middle and last replicas'
 * programs are read too, and any difference (a plan the rule was wrong about) reads every
 * program from the start. Representatives are taken as the rounds of prepass reach their
 * classes, so a pass that stops early reads little more than it would have.
 */
typedef struct {
  const bs_config *cfg;
  const bs_profile *prof;
  const bs_sim_source *src;
  fold_env env; /* each thread its own memo */
  int G, P, Ki, st, DP, t, nt, ntodo, rc;
  const int *todo; /* the representatives to read: todo[t], todo[t + nt], ... */
  rank_info *ri, *cls;
  sig_rec *rec;
  peer_part *parts; /* per class, then the rank's: nitem each */
  size_t nparts;
  char err[400];
} rep_job;

/* Rank q with its dp coordinate shifted by d (mod DP). */
static inline int dp_shift(int q, int st, int DP, int d) {
  int c = q / st % DP;
  return q + (wrap(c + d, DP) - c) * st;
}

/* The group of g's members shifted by d, written as plans write groups (its lowest member first,
 * g's stride and size); -1 when they are not such a group or leave the plan. */
static int shift_group(const bs_group *g, int st, int DP, int d, int G, bs_group *out) {
  if (g->stride < 1 || g->size < 1) return -1;
  int lo = G;
  for (int i = 0; i < g->size; i++) {
    int q = g->first + g->stride * i;
    if (q < 0 || q >= G) return -1;
    q = dp_shift(q, st, DP, d);
    if (q < lo) lo = q;
  }
  for (int i = 0; i < g->size; i++) {
    int off = dp_shift(g->first + g->stride * i, st, DP, d) - lo;
    if (off % g->stride || off / g->stride >= g->size) return -1;
  }
  *out = (bs_group){lo, g->stride, g->size};
  return 0;
}

static int same_part(const peer_part *a, const peer_part *b) {
  return a->vp == b->vp && a->vq == b->vq && a->node_off == b->node_off && a->idx_off == b->idx_off &&
         a->in_off == b->in_off && a->cross == b->cross && a->general == b->general;
}

/* The representative rep's class: its signature read (recording its items), every other replica's
 * derived. 1, 0 when the rule does not hold here (read everything), -1 on error. */
static int replica_class(rep_job *j, int rep) {
  sig_rec *rec = j->rec;
  int G = j->G, st = j->st, DP = j->DP;
  bs_coll_algo algo = j->cfg->cluster.coll_algo;
  rec_reset(rec);
  if (rank_signature(j->cfg, j->src, j->prof, algo, &j->env, rep, G, j->P, j->Ki, &j->ri[rep], rec, j->err,
                     sizeof j->err))
    return -1;
  if (rec->bad) return 0;
  int n = rec->nitem, ncls = 0;
  size_t need = (size_t)(DP + 1) * (size_t)(n ? n : 1);
  if (need > j->nparts) {
    peer_part *q = realloc(j->parts, need * sizeof *q);
    if (!q) {
      snprintf(j->err, sizeof j->err, "out of memory");
      return -1;
    }
    j->parts = q;
    j->nparts = need;
  }
  double slow = sim_compute_factor(j->cfg, rep);
  peer_part *mine = j->parts + (size_t)DP * (size_t)n;
  for (int d = 1; d < DP; d++) {
    int r = rep + d * st;
    if (sim_compute_factor(j->cfg, r) != slow) { /* a straggler: its own program */
      if (rank_signature(j->cfg, j->src, j->prof, algo, &j->env, r, G, j->P, j->Ki, &j->ri[r], NULL, j->err,
                         sizeof j->err))
        return -1;
      continue;
    }
    sig_frame f = frame_of(r, G, j->P, j->Ki);
    for (int k = 0; k < n; k++) {
      const sig_item *it = &rec->item[k];
      bs_group g;
      if (it->kind == 0) p2p_part(&f, dp_shift(it->peer, st, DP, d), &mine[k]);
      else if (shift_group(&it->g, st, DP, d, G, &g)) return 0;
      else coll_part(&j->env, it->ck, algo, &g, it->bytes, &f, &mine[k]);
    }
    int c = 0;
    for (; c < ncls; c++) {
      const peer_part *cp = j->parts + (size_t)c * (size_t)n;
      int k = 0;
      while (k < n && same_part(&cp[k], &mine[k])) k++;
      if (k == n) break;
    }
    if (c == ncls) { /* a new class: the representative's stream with these parts */
      peer_part *cp = j->parts + (size_t)c * (size_t)n;
      memcpy(cp, mine, (size_t)n * sizeof *cp);
      rank_info x;
      memset(&x, 0, sizeof x);
      sig_acc s = {rec->h, SEED_P, SEED_P};
      for (size_t i = 0; i < rec->nseq; i++) {
        s.hp = mix(s.hp, cp[rec->seq[i]].vp);
        s.hq = mix(s.hq, cp[rec->seq[i]].vq);
      }
      for (int k = 0; k < n; k++) { /* every item occurs: its offsets counted */
        sig_acc dummy = {0, 0, 0};
        add_part(&dummy, &x, &cp[k]);
      }
      x.has_coll = rec->has_coll;
      x.sig = mix(s.h, s.hp);
      x.sig2 = mix(s.h, s.hq);
      j->cls[c] = x;
      ncls++;
    }
    j->ri[r] = j->cls[c];
  }
  /* the check: the middle and last replicas' programs read */
  int check[2] = {DP / 2, DP - 1};
  for (int k = 0; k < 2; k++) {
    int r = rep + check[k] * st;
    rank_info y;
    if (sim_compute_factor(j->cfg, r) != slow) continue; /* read above */
    if (rank_signature(j->cfg, j->src, j->prof, algo, &j->env, r, G, j->P, j->Ki, &y, NULL, j->err, sizeof j->err))
      return -1;
    if (!same_info(&y, &j->ri[r])) return 0;
  }
  return 1;
}

static void *replica_worker(void *arg) {
  rep_job *j = arg;
  for (int i = j->t; i < j->ntodo && j->rc == 1; i += j->nt) j->rc = replica_class(j, j->todo[i]);
  return NULL;
}

/* The shortcut's state over the rounds of prepass: the threads' jobs and which representatives
 * are read. */
typedef struct {
  rep_job job[8];
  int nt, st, DP;
  char *done; /* per rank: the representative's class is read */
  int *todo;
} rep_pass;

static void replicas_free(rep_pass *rp) {
  for (int t = 0; t < rp->nt; t++) {
    if (rp->job[t].rec) free(rp->job[t].rec->seq);
    free(rp->job[t].rec);
    free(rp->job[t].parts);
    free(rp->job[t].cls);
  }
  free(rp->done);
  free(rp->todo);
  memset(rp, 0, sizeof *rp);
}

/* 1 when the plan proves its replicas alike and enough of them make the shortcut read fewer
 * programs (four or more: each class reads three), 0 when not, -1 out of memory. */
static int replicas_begin(const bs_plan *plan, const sig_job *sj, int nt, rep_pass *rp) {
  memset(rp, 0, sizeof *rp);
  int st, DP, G = sj->G;
  if (!plan || !bs_plan_replicas_uniform(plan, &st, &DP) || DP < 4 || st < 1 || (int64_t)st * DP > G) return 0;
  rp->nt = nt;
  rp->st = st;
  rp->DP = DP;
  rp->done = calloc((size_t)G, 1);
  rp->todo = malloc(sizeof *rp->todo * (size_t)G);
  int ok = rp->done && rp->todo;
  for (int t = 0; t < nt; t++) {
    rep_job *j = &rp->job[t];
    memset(j, 0, sizeof *j);
    j->cfg = sj->cfg;
    j->prof = sj->prof;
    j->src = sj->src;
    j->env = sj->env;
    j->G = G;
    j->P = sj->P;
    j->Ki = sj->Ki;
    j->ri = sj->ri;
    j->st = st;
    j->DP = DP;
    j->t = t;
    j->nt = nt;
    j->rc = 1;
    j->rec = calloc(1, sizeof *j->rec);
    j->cls = malloc(sizeof *j->cls * (size_t)DP);
    ok &= j->rec && j->cls;
  }
  if (!ok) {
    replicas_free(rp);
    return -1;
  }
  return 1;
}

/* Every rank of [lo, hi) given its signature: the classes of their representatives read (shared
 * among the threads). 1, 0 when the rule did not hold (read everything instead), -1 on error. */
static int replicas_cover(rep_pass *rp, int lo, int hi, char *err, size_t errlen) {
  int n = 0;
  for (int r = lo; r < hi; r++) {
    int rep = r - r / rp->st % rp->DP * rp->st;
    if (!rp->done[rep]) {
      rp->done[rep] = 1;
      rp->todo[n++] = rep;
    }
  }
  if (!n) return 1;
  int nt = rp->nt < n ? rp->nt : n, started = 1;
  pthread_t th[8];
  for (int t = 0; t < rp->nt; t++) {
    rp->job[t].todo = rp->todo;
    rp->job[t].ntodo = n;
    rp->job[t].nt = nt;
    rp->job[t].rc = 1;
  }
  for (int t = 1; t < nt; t++) {
    if (pthread_create(&th[t], NULL, replica_worker, &rp->job[t])) break;
    started = t + 1;
  }
  replica_worker(&rp->job[0]);
  for (int t = started; t < nt; t++) replica_worker(&rp->job[t]);
  for (int t = 1; t < started; t++) pthread_join(th[t], NULL);
  int rc = 1;
  for (int t = 0; t < nt; t++)
    if (rp->job[t].rc < 0) {
      snprintf(err, errlen, "%s", rp->job[t].err);
      return -1;
    } else if (rp->job[t].rc == 0) rc = 0;
  return rc;
}

/*
 * The pre-pass: every rank's signature, into ri, and what they need (*need). Up to 256 ranks,
 * in one go. Above, in rounds (one node's ranks, then twice as many each time) after each of
 * which the folds still possible are listed: every rule of fold_candidates only removes
 * candidates as the offsets grow and flags are set (the quotient's from an offset of 1 on,
 * hence the second look at D = 1), so once none is left no later rank can bring one back and
 * the pre-pass stops, the fold refused as the whole pass would refuse it. On a pipeline whose
 * stages lie whole nodes apart this is the first round (a 2048-GPU model step: 8 of 2048
 * programs read instead of all). *seen: the ranks read (G when not stopped).
 */
static int prepass(const bs_config *cfg, const bs_profile *prof, const bs_platform_spec *ps, const bs_sim_source *src,
                   const bs_plan *plan, const fold_env *env, int Ki, rank_info *ri, fold_need *need, int *seen,
                   char *err, size_t errlen) {
  int G = cfg->par.gpus, P = ps->ranks_per_node, K = G / P;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = G >= 256 && cores > 1 ? (int)(cores < 8 ? cores : 8) : 1;
  sig_job job[8];
  for (int t = 0; t < nt; t++) job[t] = (sig_job){cfg, prof, src, *env, G, P, Ki, t, nt, 0, 0, 0, ri, ""};
  /* every signature at once when the plan proves its ranks alike; the rounds below then only
   * decide, as they would have, where a pass that reads the programs stops */
  int have = uniform_signatures(plan, &job[0], Ki, ri, err, errlen);
  if (have < 0) return -1;
  /* or, replicas alike, the classes of the ranks each round reaches */
  rep_pass rp;
  int reps = have ? 0 : replicas_begin(plan, &job[0], nt, &rp);
  if (reps < 0) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (;;) {
    int lo = 0, round = G >= 256 ? P : G, again = 0;
    memset(need, 0, sizeof *need);
    while (lo < G) {
      int hi = G - lo < round ? G : lo + round;
      if (reps) {
        int rc = replicas_cover(&rp, lo, hi, err, errlen);
        if (rc < 0) {
          replicas_free(&rp);
          return -1;
        }
        if (!rc) { /* not what the rule says: read every program */
          again = 1;
          break;
        }
      } else if (!have && signatures(job, nt, lo, hi, err, errlen)) return -1;
      need_add(need, ri, lo, hi);
      lo = hi;
      round *= 2;
      int cand[64][3], M, Ml;
      fold_need one = *need;
      one.D = one.D > 1 ? one.D : 1;
      if (lo < G && !stage_fold(cfg, ps, need, Ki) &&
          !any_fold(cand, fold_candidates(cfg, ps, need, cand, &M, &Ml), K, P) &&
          !any_fold(cand, fold_candidates(cfg, ps, &one, cand, &M, &Ml), K, P))
        break;
    }
    if (reps) replicas_free(&rp);
    if (!again) {
      *seen = lo;
      return 0;
    }
    reps = 0;
  }
}

/*
 * The fold: M of K nodes and Pf of P ranks per node, such that every rank's
 * program equals that of its image ((node mod M), (index mod Pf)) with peers
 * relative, and the generated platform folds the same way: node shifts by
 * bs_topo_fold_nodes, index shifts on dgx nodes (every GPU its own NVSwitch
 * port and its own NIC rail) when all inter-node messages stay on their rail
 * and there are no collectives; failing those, the stage fold (stage_fold).
 * Returns 0 (maybe no fold: M = Ki = K, Pf = P) or -1 on error. why: a
 * sentence for the result.
 */
int sim_choose_fold(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof, const bs_platform_spec *ps,
                    const bs_sim_source *src, const bs_plan *plan, sim_fold *f, char *why, size_t whylen, char *err,
                    size_t errlen) {
  int G = cfg->par.gpus, P = ps->ranks_per_node, K = G / P;
  *f = (sim_fold){K, P, 0, K};
  snprintf(why, whylen, "off");
  if (opts->fold == BS_OFF) return 0;
  if (!ps->generated || ps->shared_host) {
    snprintf(why, whylen, "not applicable (%s)", !ps->generated ? "user platform file" : "one shared host");
    return 0;
  }
  /* A what-if of one node breaks the node symmetry the fold shifts by; failed NICs on every
   * node break the rails (the fold keeps a node's GPUs by whole NICs): no fold. */
  if (ps->topo.failed_nics > 0 || ps->topo.degrade_factor > 0) {
    if (ps->topo.failed_nics > 0 && ps->topo.failed_node < 0)
      snprintf(why, whylen, "no: cluster.failed_nics on every node breaks the rails");
    else
      snprintf(why, whylen, "no: %s of node %d breaks the node symmetry",
               ps->topo.failed_nics > 0 ? "cluster.failed_nics" : "cluster.degrade",
               ps->topo.failed_nics > 0 ? ps->topo.failed_node : ps->topo.degrade_node);
    return 0;
  }
  rank_info *ri = malloc(sizeof *ri * (size_t)G);
  if (!ri) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  fold_env env;
  memset(&env, 0, sizeof env);
  env.rails = bs_topo_has_rails(ps->topo.name);
  env.ps = env.rails ? ps : NULL;
  env.model = opts->coll_model;
  fold_need need = {0};
  int cand[64][3], M, Ml, nc, seen;
  int Ki = stage_block(cfg, ps);
  if (prepass(cfg, prof, ps, src, opts->prepass_full ? NULL : plan, &env, Ki, ri, &need, &seen, err, errlen)) {
    free(ri);
    return -1;
  }
  if (seen < G) { /* stopped early: no fold was left to prove */
    free(ri);
    if (need.coll && prof && prof->allreduce_lib == BS_ALLREDUCE_OMPI_LIBNBC)
      snprintf(why, whylen, "no: the profile's allreduce (open-mpi-libnbc) is rooted at one rank");
    else
      snprintf(why, whylen, "no: no fold keeps node offsets of %d or more (pre-pass stopped at %d of %d ranks)", need.D,
               seen, G);
    return 0;
  }
  int D = need.D, Din = need.Din;
  /* Open MPI libnbc's small allreduce is rooted at a group's first member: no shift maps it onto itself. */
  if (need.coll && prof && prof->allreduce_lib == BS_ALLREDUCE_OMPI_LIBNBC) {
    free(ri);
    snprintf(why, whylen, "no: the profile's allreduce (open-mpi-libnbc) is rooted at one rank");
    return 0;
  }
  nc = fold_candidates(cfg, ps, &need, cand, &M, &Ml);
  int Pf = cand[0][1];
  for (int c = 0; c < nc; c++) {
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
      *f = (sim_fold){m, pf, cand[c][2], K};
      snprintf(why, whylen,
               "%d of %d ranks simulated (%d of %d nodes%s, %d of %d per node; offsets %d node(s), %d in node)", m * pf,
               G, m, K,
               cand[c][2]                ? " with leaf wrap"
               : c < 2 || (c >= 7 && Ml) ? ", leaves merged"
                                         : "",
               pf, P, D, Din);
      free(ri);
      return 0;
    }
    if (why[0] == 'o')
      snprintf(why, whylen, "no: rank %d's program differs from its image's%s", bad,
               cfg->cluster.straggler_factor > 0 && cfg->cluster.straggler_factor != 1 ? " (cluster.straggler)" : "");
  }
  int m = stage_fold(cfg, ps, &need, Ki);
  if (m && stage_images(ri, G, P, Ki, m)) {
    *f = (sim_fold){m, P, 0, Ki};
    snprintf(why, whylen, "%d of %d ranks simulated (stage fold: %d of %d nodes x %d stages; offsets %d node(s))",
             K / Ki * m * P, G, m, Ki, K / Ki, need.Dst);
  } else if (M == K && Pf == P) snprintf(why, whylen, "no: the platform has no fold for node offsets up to %d", D);
  free(ri);
  return 0;
}
