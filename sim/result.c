/*
 * result.c — the figures of a finished point (plans/result.h): the step and
 * phase times are the slowest rank's, bytes are summed over the ranks and
 * scaled back when folded (every simulated rank stands for G/A ranks), memory
 * is the highest peak with its breakdown by class (the capacity it is held
 * against is the profile's less its per-process reserve), and all-rank tree
 * allreduces timed as a whole add every rank's bytes by its tree role; where
 * the step goes (explain) is the critical rank's and the mean over ranks. A
 * total that passes int64 or a time the simulator cannot resolve is an error,
 * never a wrapped or meaningless figure.
 */
#include "sim/point.h"
#include "sim/coll_shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOTAL_TOO_LARGE "comm_bytes.total: the bytes of all ranks pass 2^63 - 1 (the point is too large)"

/*
 * All-rank tree allreduces timed as a whole (coll.c): every real rank's bytes
 * by its tree role, added to the totals; *tsent_out (malloc'd) gets each
 * rank's. 0, or -1 with a message.
 */
static int whole_tree_bytes(const sim_ctx *c, int64_t *total, int64_t *intra, int64_t *inter, int64_t *maxsent,
                            int64_t **tsent_out, char *err, size_t errlen) {
  int G = c->G;
  int *node = malloc(sizeof *node * (size_t)G);
  int64_t *s1 = malloc(sizeof *s1 * 2 * (size_t)G), *i1 = s1 ? s1 + G : NULL;
  int64_t *tsent = calloc((size_t)G, sizeof *tsent);
  if (!node || !s1 || !tsent) {
    free(node);
    free(s1);
    free(tsent);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int bad = 0;
  for (int s = 0; s < c->A && !bad; s++) { /* each group's first member holds its counts */
    const rank_state *rs = &c->rs[s];
    for (int w = 0; w < rs->nwtree && !bad; w++) {
      int first = rs->rank, stride = rs->wtree[w].stride, n = G / stride;
      for (int i = 0; i < n; i++) node[i] = node_of_rank(c, first + stride * i);
      if (bs_tree_member_bytes(n, node, rs->wtree[w].bytes, s1, i1)) {
        bad = 1;
        break;
      }
      for (int i = 0; i < n && !bad; i++) {
        int64_t a, b;
        int r = first + stride * i;
        bad = __builtin_mul_overflow(s1[i], rs->wtree[w].count, &a) ||
              __builtin_mul_overflow(i1[i], rs->wtree[w].count, &b) || __builtin_add_overflow(tsent[r], a, &tsent[r]) ||
              __builtin_add_overflow(*total, a, total) || __builtin_add_overflow(*inter, b, inter) ||
              __builtin_add_overflow(*intra, a - b, intra);
      }
    }
  }
  free(node);
  free(s1);
  if (bad) {
    free(tsent);
    snprintf(err, errlen, TOTAL_TOO_LARGE);
    return -1;
  }
  for (int r = 0; r < G && !bad; r++) {
    int64_t sent, recvd;
    const rank_state *rs = &c->rs[slot_of(c, r)];
    bad = __builtin_add_overflow(rs->sent, tsent[r], &sent) || __builtin_add_overflow(rs->recvd, tsent[r], &recvd);
    if (sent > *maxsent) *maxsent = sent;
  }
  if (bad) {
    free(tsent);
    snprintf(err, errlen, "comm_bytes.per_rank: a rank's bytes pass 2^63 - 1 (the point is too large)");
    return -1;
  }
  *tsent_out = tsent;
  return 0;
}

int sim_fill_result(sim_ctx *c, bs_result *out, char *err, size_t errlen) {
  int G = c->G, A = c->A;
  out->nranks = G;
  out->ranks = calloc((size_t)G, sizeof *out->ranks);
  double step = 0, fwd = 0, bwd = 0, comp = 0, expo = 0, peer = 0;
  int64_t maxsent = 0, total = 0, intra = 0, inter = 0, peak = 0;
  int peak_slot = 0;
  for (int s = 0; s < A; s++) {
    const rank_state *rs = &c->rs[s];
    if (rs->end > step) step = rs->end;
    if (rs->fwd > fwd) fwd = rs->fwd;
    if (rs->bwd > bwd) bwd = rs->bwd;
    if (rs->compute > comp) comp = rs->compute;
    if (rs->exposed > expo) expo = rs->exposed;
    if (rs->peer_wait > peer) peer = rs->peer_wait;
    if (rs->sent > maxsent) maxsent = rs->sent;
    if (__builtin_add_overflow(total, rs->sent, &total) || __builtin_add_overflow(intra, rs->intra, &intra) ||
        __builtin_add_overflow(inter, rs->inter, &inter)) {
      snprintf(err, errlen, TOTAL_TOO_LARGE);
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
    snprintf(err, errlen, TOTAL_TOO_LARGE);
    return -1;
  }
  int64_t *tsent = NULL;
  int nwtree = 0;
  for (int s = 0; s < A; s++) nwtree += c->rs[s].nwtree;
  if (nwtree && whole_tree_bytes(c, &total, &intra, &inter, &maxsent, &tsent, err, errlen)) return -1;
  out->time.step = step;
  out->time.fwd = fwd;
  out->time.bwd = bwd;
  out->time.compute = comp;
  out->time.comm_exposed = expo;
  out->time.wait_for_peers = peer;
  out->comm.per_rank_max_sent = maxsent;
  out->comm.total = total;
  out->comm.intra_node = intra;
  out->comm.inter_node = inter;
  out->mem.peak_bytes_max = peak;
  out->mem.capacity_bytes = bs_profile_capacity_bytes(c->prof);      /* less the CUDA context and NCCL buffers */
  out->mem.oom = bs_mem_over(c->cfg, peak, out->mem.capacity_bytes); /* with the allocator's reserve */
  memcpy(out->mem.breakdown, c->rs[peak_slot].cls_at_peak, sizeof out->mem.breakdown);
  if (out->ranks)
    for (int r = 0; r < G; r++) {
      const rank_state *rs = &c->rs[slot_of(c, r)];
      int64_t t = tsent ? tsent[r] : 0; /* a tree member receives what it sends */
      out->ranks[r] = (bs_rank_result){r,           rs->end,      rs->fwd,       rs->bwd,      rs->compute,
                                       rs->exposed, rs->sent + t, rs->recvd + t, rs->mem_peak, rs->peer_wait,
                                       {0}};
      memcpy(out->ranks[r].by_group, rs->by_group, sizeof rs->by_group);
    }
  for (int r = 0; r < G; r++)
    for (int d = 0; d < BS_DIM_COUNT; d++)
      if (c->rs[slot_of(c, r)].by_group[d] > out->comm.by_group[d])
        out->comm.by_group[d] = c->rs[slot_of(c, r)].by_group[d];
  free(tsent);
  /* where the step goes: every real rank by its actor's parts (folded: G / A ranks share each) */
  bs_explain_begin(&out->explain);
  for (int r = 0; r < G; r++) bs_explain_add(&out->explain, r, c->rs[slot_of(c, r)].end, &c->rs[slot_of(c, r)].explain);
  bs_explain_end(&out->explain);
  out->sim_events = c->events;
  return 0;
}

/*
 * The simulated times before they are reported: finite, >= 0 and at most
 * BS_SIM_TIME_MAX (beyond it SimGrid's double clock no longer resolves a
 * microsecond, and such a figure comes from a rate or bandwidth near zero).
 */
#define BS_SIM_TIME_MAX 1e18

int sim_check_times(const bs_result *out, char *err, size_t errlen) {
  const struct {
    const char *key;
    double v;
  } t[] = {{"time.step", out->time.step},
           {"time.fwd", out->time.fwd},
           {"time.bwd", out->time.bwd},
           {"time.compute", out->time.compute},
           {"time.comm_exposed", out->time.comm_exposed},
           {"time.wait_for_peers", out->time.wait_for_peers}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (!(t[i].v >= 0 && t[i].v <= BS_SIM_TIME_MAX)) {
      snprintf(err, errlen,
               "%s: the simulated %g s is not a time the simulator can report (finite, at most %g s; "
               "a rate or bandwidth near zero?)",
               t[i].key, t[i].v, BS_SIM_TIME_MAX);
      return -1;
    }
  return 0;
}

void sim_record_profile(bs_result *out, const bs_sim_opts *opts) {
  if (opts && opts->profile) snprintf(out->cfg.cluster.profile, sizeof out->cfg.cluster.profile, "%s", opts->profile);
  /* --nodes-per-leaf and --oversub win over the keys (platform.c): the result says what ran */
  if (opts && bs_topo_has_rails(out->cfg.cluster.topology)) {
    if (opts->nodes_per_leaf > 0) out->cfg.cluster.nodes_per_leaf = opts->nodes_per_leaf;
    if (opts->oversub > 0) out->cfg.cluster.oversub = opts->oversub;
  }
}
