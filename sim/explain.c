/*
 * explain.c — where a step's time goes (explain.h): each rank's compute by
 * kernel kind, launch cost, exposed communication by link class and waiting
 * for slower peers, accumulated from plain numbers the engine hands over, then
 * summarised per point as the critical rank's parts and the mean over ranks.
 * No simulator call is made here.
 */
#include "sim/explain.h"
#include "topologies/topo.h"

#include <string.h>

bs_explain_kind bs_explain_kind_of(bs_kernel kernel) {
  switch (kernel) {
  case BS_K_ATTN_FWD:
  case BS_K_ATTN_FWD_UNFUSED: return BS_XK_ATTN_FWD;
  case BS_K_ATTN_BWD:
  case BS_K_ATTN_BWD_UNFUSED:
  case BS_K_ATTN_DELTA: return BS_XK_ATTN_BWD;
  case BS_K_ATTN_MERGE: return BS_XK_MERGE;
  case BS_K_GEMM: return BS_XK_GEMM;
  case BS_K_ELEMWISE: return BS_XK_ELEMWISE;
  default: return BS_XK_OTHER;
  }
}

void bs_explain_compute(bs_explain_parts *x, bs_kernel kernel, double seconds, double launch_s) {
  double launch = launch_s > 0 ? launch_s : 0;
  if (launch > seconds) launch = seconds; /* never more than the op took */
  if (launch < 0) launch = 0;
  x->launch += launch;
  x->compute[bs_explain_kind_of(kernel)] += seconds - launch;
}

void bs_explain_wait(bs_explain_parts *x, double t0, double ready, double t1, bs_explain_link link) {
  double peers_until = ready < t1 ? ready : t1;
  if (peers_until < t0) peers_until = t0;
  if ((int)link < 0 || link >= BS_XL_COUNT) link = BS_XL_OTHER;
  x->wait_for_peers += peers_until - t0;
  x->exposed[link] += t1 - peers_until;
}

bs_explain_link bs_explain_route(const int *link_classes, int n) {
  int net = 0, pcie = 0, nvlink = 0, shm = 0;
  for (int i = 0; i < n; i++) switch (link_classes[i]) {
    case BS_LINK_NIC:
    case BS_LINK_FABRIC: net = 1; break;
    case BS_LINK_PCIE:
    case BS_LINK_HOSTBRIDGE: pcie = 1; break;
    case BS_LINK_NVLINK: nvlink = 1; break;
    case BS_LINK_SHM: shm = 1; break;
    default: break;
    }
  return net ? BS_XL_NETWORK : pcie ? BS_XL_PCIE : nvlink ? BS_XL_NVLINK : shm ? BS_XL_SHM : BS_XL_OTHER;
}

bs_explain_link bs_explain_group(int spans_nodes, bs_explain_link intra) { return spans_nodes ? BS_XL_NETWORK : intra; }

double bs_explain_compute_total(const bs_explain_parts *x) {
  double s = x->launch;
  for (int k = 0; k < BS_XK_COUNT; k++) s += x->compute[k];
  return s;
}

double bs_explain_blocked_total(const bs_explain_parts *x) {
  double s = x->wait_for_peers;
  for (int l = 0; l < BS_XL_COUNT; l++) s += x->exposed[l];
  return s;
}

double bs_explain_total(const bs_explain_parts *x) { return bs_explain_compute_total(x) + bs_explain_blocked_total(x); }

void bs_explain_begin(bs_explain *e) {
  memset(e, 0, sizeof *e);
  e->critical_rank = -1;
}

/* The critical rank: the latest end, the lowest rank of a tie (whatever the order of the adds). */
void bs_explain_add(bs_explain *e, int rank, double end, const bs_explain_parts *x) {
  if (e->critical_rank < 0 || end > e->step || (end == e->step && rank < e->critical_rank)) {
    e->critical_rank = rank;
    e->step = end;
    e->critical = *x;
  }
  for (int k = 0; k < BS_XK_COUNT; k++) e->mean.compute[k] += x->compute[k];
  e->mean.launch += x->launch;
  for (int l = 0; l < BS_XL_COUNT; l++) e->mean.exposed[l] += x->exposed[l];
  e->mean.wait_for_peers += x->wait_for_peers;
  e->ranks++;
}

void bs_explain_end(bs_explain *e) {
  if (e->ranks < 1) return;
  double n = e->ranks;
  for (int k = 0; k < BS_XK_COUNT; k++) e->mean.compute[k] /= n;
  e->mean.launch /= n;
  for (int l = 0; l < BS_XL_COUNT; l++) e->mean.exposed[l] /= n;
  e->mean.wait_for_peers /= n;
}

static double ext(double a, double b, int64_t k) { return a + (double)k * (b - a); }

static void extend_parts(const bs_explain_parts *a, bs_explain_parts *b, int64_t k) {
  for (int i = 0; i < BS_XK_COUNT; i++) b->compute[i] = ext(a->compute[i], b->compute[i], k);
  b->launch = ext(a->launch, b->launch, k);
  for (int l = 0; l < BS_XL_COUNT; l++) b->exposed[l] = ext(a->exposed[l], b->exposed[l], k);
  b->wait_for_peers = ext(a->wait_for_peers, b->wait_for_peers, k);
}

void bs_explain_extend(const bs_explain *a, bs_explain *b, int64_t k) {
  b->step = ext(a->step, b->step, k);
  extend_parts(&a->critical, &b->critical, k);
  extend_parts(&a->mean, &b->mean, k);
}

const char *bs_explain_kind_name(bs_explain_kind k) {
  static const char *const n[BS_XK_COUNT] = {"attn_fwd", "attn_bwd", "merge", "gemm", "elemwise", "other"};
  return (int)k >= 0 && k < BS_XK_COUNT ? n[k] : "?";
}

const char *bs_explain_link_name(bs_explain_link l) {
  static const char *const n[BS_XL_COUNT] = {"nvlink", "pcie", "shm", "network", "other"};
  return (int)l >= 0 && l < BS_XL_COUNT ? n[l] : "?";
}
