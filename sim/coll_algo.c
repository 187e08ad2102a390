/*
 * coll_algo.c — how a collective will run, decided the same way by every
 * member and by the fold pre-pass (coll_algo.h): its representative links,
 * its rings and their neighbours, and NCCL's ring-or-tree rule.
 */
#include "sim/coll_algo.h"

const char *bs_coll_model_name(bs_coll_model m) {
  switch (m) {
  case BS_COLL_STEPS: return "steps";
  case BS_COLL_FLOW: return "flow";
  case BS_COLL_ANALYTIC: return "analytic";
  default: return "auto";
  }
}

void sim_group_pairs(const bs_group *g, const int *node, int p[4]) {
  int n = g->size, ia = -1, ib = -1, ea = -1, eb = -1;
  for (int m = 1; m < n && (ia < 0 || ea < 0); m++) {
    if (ia < 0 && node[m] == node[m - 1]) ia = m - 1, ib = m;
    if (ea < 0 && node[m] != node[0]) ea = 0, eb = m;
  }
  if (ia < 0) ia = ea, ib = eb;
  if (ea < 0) ea = ia, eb = ib;
  p[0] = ia, p[1] = ib, p[2] = ea, p[3] = eb;
}

int sim_group_links_model(const bs_platform_spec *ps, const bs_group *g, const int *node, bs_coll_links *l) {
  int p[4];
  sim_group_pairs(g, node, p);
  return bs_platform_route(ps, sim_member(g, p[0]), sim_member(g, p[1]), &l->lat_intra, &l->bw_intra) ||
         bs_platform_route(ps, sim_member(g, p[2]), sim_member(g, p[3]), &l->lat_inter, &l->bw_inter);
}

int sim_ring_channels(int rails, int rpn, const bs_group *g) {
  if (!rails || rpn < 2 || g->stride != 1 || g->first % rpn || g->size % rpn || g->size / rpn < 2) return 1;
  return rpn > BS_MAX_CHANNELS ? 1 : rpn;
}

int sim_ring_peer(int C, int rpn, int n, int ch, int me, int dir) {
  if (C == 1) return (me + n + dir) % n;
  return bs_ring_channel_peer(rpn, n / rpn, ch, me, dir);
}

double sim_ring_lockstep_time(const bs_coll_links *l, int multi, int steps, int64_t chunk) {
  double lat = multi && l->lat_inter > l->lat_intra ? l->lat_inter : l->lat_intra;
  double bw = multi && l->bw_inter < l->bw_intra ? l->bw_inter : l->bw_intra;
  return bs_ring_time(steps, chunk < 1 ? 1 : chunk, lat, bw);
}

/*
 * NCCL's rule: the lower modelled time (NCCL src/graph/tuning.cc). Every
 * member decides alike: the ring is timed at its slowest link class, not at a
 * member's own next hop.
 */
bs_coll_algo sim_auto_algo(int n, const int *node, int multi, int64_t bytes, const bs_coll_links *l, int C,
                           double *t_tree) {
  *t_tree = bs_tree_allreduce_time(n, node, bytes, l);
  if (*t_tree < 0) return BS_COLL_ALGO_RING;
  return *t_tree < sim_ring_lockstep_time(l, multi, 2 * (n - 1), bytes / n / C) ? BS_COLL_ALGO_TREE : BS_COLL_ALGO_RING;
}

int sim_whole_tree(int G, const bs_group *g) {
  return g->stride >= 1 && g->first >= 0 && g->first < g->stride && (int64_t)g->stride * g->size == G && g->size > 1;
}
