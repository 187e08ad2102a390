/*
 * coll_setup.c — see coll_setup.h: what every member of a collective works out before its part
 * runs, for the lowering both engines run (coll_lower.c).
 */
#include "sim/coll_setup.h"

#include <math.h>
#include <stdlib.h>
#include <simgrid/host.h>

/* Steps and chunk of the collective (all-to-all: steps -1, chunk per pair); -1 when unknown. */
static int volume(bs_coll_kind kind, int64_t bytes, int n, int *steps, int64_t *chunk) {
  *chunk = bytes / n;
  switch (kind) {
  case BS_COLL_ALLREDUCE: *steps = 2 * (n - 1); break;
  case BS_COLL_ALLGATHER:
    *steps = n - 1;
    *chunk = bytes;
    break;
  case BS_COLL_REDUCE_SCATTER: *steps = n - 1; break;
  case BS_COLL_ALLTOALL: *steps = -1; break;
  default: return -1;
  }
  if (*chunk < 1) *chunk = 1;
  return 0;
}

/* Route latency and bandwidth inside a node and between nodes, from the group's first pair of each. */
static void group_links(sim_ctx *c, const bs_group *g, const int *node, bs_coll_links *l) {
  int p[4];
  sim_group_pairs(g, node, p);
  sim_route_figures(c, host_of(c, sim_member(g, p[0])), host_of(c, sim_member(g, p[1])), &l->lat_intra, &l->bw_intra);
  sim_route_figures(c, host_of(c, sim_member(g, p[2])), host_of(c, sim_member(g, p[3])), &l->lat_inter, &l->bw_inter);
}

/*
 * The algorithm: only allreduce has a tree in NCCL (allgather and reduce-scatter are rings); auto
 * decides from the group's links. On a generated dgx platform the fold pre-pass decides from the
 * same route model (fold.c), so the routes SimGrid gives must be the modelled ones. 0 or -1.
 */
static int pick_algo(sim_ctx *c, bs_coll_kind kind, const bs_group *g, int64_t bytes, sim_coll_setup *s) {
  const bs_coll_links *l = &s->l;
  s->algo = kind == BS_COLL_ALLREDUCE ? c->cfg->cluster.coll_algo : BS_COLL_ALGO_RING;
  s->t_tree = -1;
  s->binomial = kind == BS_COLL_ALLREDUCE && c->prof && c->prof->allreduce_lib == BS_ALLREDUCE_OMPI_LIBNBC &&
                bs_nbc_allreduce_binomial(s->n, bytes);
  if (s->binomial || s->algo != BS_COLL_ALGO_AUTO) return 0;
  bs_coll_links lm;
  if (c->ps && !sim_group_links_model(c->ps, g, s->node, &lm) &&
      (fabs(lm.lat_intra - l->lat_intra) > 1e-12 * (1 + l->lat_intra) ||
       fabs(lm.lat_inter - l->lat_inter) > 1e-12 * (1 + l->lat_inter) ||
       fabs(lm.bw_intra - l->bw_intra) > 1e-9 * l->bw_intra || fabs(lm.bw_inter - l->bw_inter) > 1e-9 * l->bw_inter)) {
    sim_error(c,
              "internal: the route model of %s differs from SimGrid's routes (intra %g s %g B/s vs "
              "%g s %g B/s, inter %g s %g B/s vs %g s %g B/s)",
              c->ps->topo.name, lm.lat_intra, lm.bw_intra, l->lat_intra, l->bw_intra, lm.lat_inter, lm.bw_inter,
              l->lat_inter, l->bw_inter);
    return -1;
  }
  s->algo = sim_auto_algo(s->n, s->node, s->multi, bytes, l, s->C, &s->t_tree);
  return 0;
}

/* 0 to run the part, 1 nothing to run (a group of one), -1 failed; sim_coll_setup_free after. */
int sim_coll_prepare(sim_ctx *c, const rank_state *rs, bs_coll_kind kind, const bs_group *g, int64_t bytes,
                     sim_coll_setup *s) {
  s->n = g->size;
  s->me = -1;
  s->node = NULL;
  for (int i = 0; i < s->n; i++)
    if (sim_member(g, i) == rs->rank) s->me = i;
  if (s->me < 0 || s->n < 1) {
    sim_error(c, "rank %d: COLL %s over group {first %d, stride %d, size %d} that does not hold it", rs->rank,
              bs_coll_name(kind), g->first, g->stride, g->size);
    return -1;
  }
  if (s->n == 1) return 1;
  if (volume(kind, bytes, s->n, &s->steps, &s->chunk)) {
    sim_error(c, "rank %d: unknown collective %d", rs->rank, (int)kind);
    return -1;
  }
  s->node = s->n <= SIM_COLL_NODE_INLINE ? s->node_in : malloc(sizeof *s->node * (size_t)s->n);
  if (!s->node) {
    sim_error(c, "out of memory");
    return -1;
  }
  s->multi = 0;
  for (int i = 0; i < s->n; i++) {
    s->node[i] = node_of_rank(c, sim_member(g, i));
    s->multi |= s->node[i] != s->node[0];
  }
  group_links(c, g, s->node, &s->l);
  s->C = s->steps < 0 ? 1 : sim_ring_channels(c->rails, c->rpn, g);
  if (pick_algo(c, kind, g, bytes, s)) return -1;
  s->model = c->opts->coll_model;
  if (s->model == BS_COLL_MODEL_AUTO) s->model = s->multi ? BS_COLL_FLOW : BS_COLL_STEPS;
  return 0;
}

void sim_coll_setup_free(sim_coll_setup *s) {
  if (s->node != s->node_in) free(s->node);
  s->node = NULL;
}
