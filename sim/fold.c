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
} rank_info;

static int circ(int d, int n) {
  d = ((d % n) + n) % n;
  return d > n - d ? n - d : d;
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
typedef struct {
  int rails;
  const bs_platform_spec *ps;
  bs_coll_model model;
  int n;
  algo_memo memo[64];
} fold_env;

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
 * rule. Returns 1 when it applied.
 */
static int coll_ring_only(fold_env *env, bs_coll_kind kind, bs_coll_algo algo, const bs_group *g, int64_t bytes,
                          int rank, int rpn, int G, uint64_t *h, rank_info *ri) {
  if (kind == BS_COLL_ALLTOALL || g->stride < 1 || g->size < 2 || (rank - g->first) % g->stride != 0) return 0;
  int me = (rank - g->first) / g->stride, K = G / rpn, mynode = rank / rpn, myidx = rank % rpn;
  if (kind == BS_COLL_ALLREDUCE) {
    int a = prepass_algo(env, algo, g, bytes, rpn);
    /* A tree over every rank (of one residue, its first member on node 0, which a fold keeps)
     * timed as a whole (coll.c) is the same on every member. */
    if (a == BS_COLL_ALGO_TREE && sim_whole_tree(G, g) && g->stride <= rpn && env->model != BS_COLL_STEPS &&
        (env->model != BS_COLL_MODEL_AUTO || K >= 2))
      return 1;
    /* Any other tree talks to tree neighbours, not ring ones. */
    if (a != BS_COLL_ALGO_RING) return 0;
  }
  if (me < 0 || me >= g->size) return 0;
  int C = sim_ring_channels(env->rails, rpn, g);
  for (int ch = 0; ch < C; ch++) {
    int nb[2] = {sim_member(g, sim_ring_peer(C, rpn, g->size, ch, me, +1)),
                 sim_member(g, sim_ring_peer(C, rpn, g->size, ch, me, -1))};
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
static int rank_signature(const bs_config *cfg, const bs_sim_source *src, const bs_profile *prof, bs_coll_algo algo,
                          fold_env *env, int rank, int G, int rpn, rank_info *ri, char *err, size_t errlen) {
  bs_dtype dt = cfg->model.dtype;
  double slow = sim_compute_factor(cfg, rank); /* a straggler's program differs from its image's */
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
      h = mix(h, dbits(d * slow));
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
      for (int i = 0; i < op.u.wait.n && i < BS_MAX_WAIT; i++) h = mix(h, (uint64_t)(uint32_t)op.u.wait.handles[i]);
      break;
    case BS_OP_PHASE: h = mix(h, (uint64_t)op.u.phase.fwd_bwd * 2 + (uint64_t)op.u.phase.begin); break;
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

/* A degrade of a network class (NIC or fabric) on every node, or NICs of another line rate: the
 * leaves-merged fold assumes uplinks that carry their leaf's NICs in full, which a degraded fabric
 * (or, by the same rule, a changed NIC class) no longer proves; the other folds compare routes and
 * keep it. */
static int whatif_network(const bs_config *cfg) {
  const bs_cluster *k = &cfg->cluster;
  return k->nic_gbps > 0 ||
         (k->degrade_factor > 0 && (k->degrade_class == BS_LINK_FABRIC || k->degrade_class == BS_LINK_NIC));
}

/* Signatures of ranks t, t + nt, t + 2 nt, ... (one pre-pass thread). */
typedef struct {
  const bs_config *cfg;
  const bs_profile *prof;
  const bs_sim_source *src;
  fold_env env; /* each thread its own memo */
  int G, P, t, nt, rc;
  rank_info *ri;
  char err[400];
} sig_job;

static void *sig_worker(void *arg) {
  sig_job *j = arg;
  for (int r = j->t; r < j->G && !j->rc; r += j->nt)
    j->rc = rank_signature(j->cfg, j->src, j->prof, j->cfg->cluster.coll_algo, &j->env, r, j->G, j->P, &j->ri[r],
                           j->err, sizeof j->err);
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
int sim_choose_fold(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof, const bs_platform_spec *ps,
                    const bs_sim_source *src, int *M_out, int *Pf_out, int *wrap_out, char *why, size_t whylen,
                    char *err, size_t errlen) {
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
  /* Open MPI libnbc's small allreduce is rooted at a group's first member: no shift maps it onto itself. */
  if (coll && prof && prof->allreduce_lib == BS_ALLREDUCE_OMPI_LIBNBC) {
    free(ri);
    snprintf(why, whylen, "no: the profile's allreduce (open-mpi-libnbc) is rooted at one rank");
    return 0;
  }
  int M = K >= 2 ? bs_topo_fold_nodes(&ps->topo, D) : 0;
  if (!M) M = K;
  int Pf = P;
  if (bs_topo_has_rails(ps->topo.name) && !cross && !coll)
    for (int p = 2; p < P; p++)
      if (P % p == 0 && p > 2 * Din && p % (P / bs_topo_nics(&ps->topo)) == 0) { /* whole NICs */
        Pf = p;
        break;
      }
  /* The quotient reproduces same-rail routes only; ring collectives whose hops all stay
   * on their rail (coll_ring_only) fold like point-to-point. */
  int Mq = !cross && !coll_general ? bs_topo_fold_quotient(&ps->topo, D) : 0;
  /*
   * Leaves merged: on a dgx fabric whose leaf uplinks carry the full bandwidth of their
   * leaf's NICs (oversubscription 1) and add no latency, an uplink can never be what limits
   * a flow (everything it carries came through one of those NICs), so a route across leaves
   * times as one inside a leaf and the fabric folds as a single leaf would. Same-rail
   * messages only (routes across rails are not compared).
   */
  int Ml = 0;
  if (bs_topo_has_rails(ps->topo.name) && ps->topo.nodes_per_leaf < K && ps->topo.oversub <= 1 &&
      ps->topo.link[BS_LINK_FABRIC].lat_s == 0 && !cross && !coll_general && !whatif_network(cfg)) {
    bs_topo_params one = ps->topo;
    one.nodes_per_leaf = K;
    Ml = bs_topo_fold_nodes(&one, D);
  }
  /* Largest reduction first, then less; then larger node counts, for plans whose programs repeat
   * only every few nodes (composed parallelism: a context-parallel ring per replica). */
  int cand[64][3] = {{Ml, Pf, 0}, {Ml, P, 0}, {Mq, Pf, D}, {Mq, P, D}, {M, Pf, 0}, {M, P, 0}, {K, Pf, 0}};
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
      *M_out = m;
      *Pf_out = pf;
      *wrap_out = cand[c][2];
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
  if (M == K && Pf == P) snprintf(why, whylen, "no: the platform has no fold for node offsets up to %d", D);
  free(ri);
  return 0;
}
