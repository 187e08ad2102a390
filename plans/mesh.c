/*
 * mesh.c — the rank grid of composed parallelism. Megatron-LM, NeMo and
 * torchtitan lay the ranks out as tp x cp x dp x pp, one dimension varying
 * fastest (Megatron's default order: tp, then cp, then dp, then pp), so that
 * the tensor-parallel group sits inside a node and a context-parallel ring
 * crosses nodes rail by rail. A config resolves to sizes, strides and the
 * microbatches every floor reads; the checks name the keys at fault. Pure
 * computation.
 */
#include <stdio.h>
#include <string.h>
#include "config.h"

static const char *const dim_names[BS_DIM_COUNT] = {"tp", "cp", "dp", "pp"};

const char *bs_dim_name(bs_dim d) { return d >= 0 && d < BS_DIM_COUNT ? dim_names[d] : "?"; }

static const int8_t default_order[BS_DIM_COUNT] = {BS_DIM_TP, BS_DIM_CP, BS_DIM_DP, BS_DIM_PP};

/* The order, or Megatron's when unset (all zero) or not a permutation. */
static int order_valid(const int8_t o[BS_DIM_COUNT]) {
  int seen = 0;
  for (int i = 0; i < BS_DIM_COUNT; i++) {
    if (o[i] < 0 || o[i] >= BS_DIM_COUNT || (seen >> o[i] & 1)) return 0;
    seen |= 1 << o[i];
  }
  return 1;
}

void bs_order_string(const int8_t order[BS_DIM_COUNT], char *buf, size_t n) {
  const int8_t *o = order_valid(order) ? order : default_order;
  snprintf(buf, n, "%s-%s-%s-%s", dim_names[o[0]], dim_names[o[1]], dim_names[o[2]], dim_names[o[3]]);
}

int bs_order_parse(const char *s, int8_t order[BS_DIM_COUNT]) {
  int8_t o[BS_DIM_COUNT];
  const char *at = s;
  for (int i = 0; i < BS_DIM_COUNT; i++) {
    int found = -1;
    for (int d = 0; d < BS_DIM_COUNT; d++)
      if (!strncmp(at, dim_names[d], 2)) found = d;
    if (found < 0) return -1;
    o[i] = (int8_t)found;
    at += 2;
    if (i < BS_DIM_COUNT - 1 && *at++ != '-') return -1;
  }
  if (*at || !order_valid(o)) return -1;
  memcpy(order, o, sizeof o);
  return 0;
}

int bs_mesh_coord(const bs_mesh *m, int rank, int d) { return rank / m->stride[d] % m->size[d]; }

/* The dimensions in which ranks a and b differ, as bits. */
static int differ(const bs_mesh *m, int a, int b) {
  int bits = 0;
  for (int d = 0; d < BS_DIM_COUNT; d++)
    if (bs_mesh_coord(m, a, d) != bs_mesh_coord(m, b, d)) bits |= 1 << d;
  return bits;
}

static int kind_of_bits(int bits) {
  if (!bits) return -1;
  if (bits & 1 << BS_DIM_DP) return BS_DIM_DP; /* gradients over dp, or dp x cp */
  if (bits & 1 << BS_DIM_PP) return BS_DIM_PP;
  if (bits & 1 << BS_DIM_CP) return BS_DIM_CP;
  return BS_DIM_TP;
}

int bs_mesh_pair_kind(const bs_mesh *m, int a, int b) { return kind_of_bits(differ(m, a, b)); }

int bs_mesh_group_kind(const bs_mesh *m, int first, int stride, int size) {
  if (size < 2) return -1;
  return kind_of_bits(differ(m, first, first + stride) | differ(m, first, first + stride * (size - 1)));
}

void bs_mesh_sizes(const bs_parallel *p, int size[BS_DIM_COUNT]) {
  long long tp = p->tp > 0 ? p->tp : 1, dp = p->dp > 0 ? p->dp : 1, pp = p->pp > 0 ? p->pp : 1, G = p->gpus;
  if (p->method == BS_TP) tp = G / (dp * pp);
  size[BS_DIM_TP] = (int)tp;
  size[BS_DIM_CP] = p->method == BS_TP ? 1 : (int)(G / (tp * dp * pp));
  size[BS_DIM_DP] = (int)dp;
  size[BS_DIM_PP] = (int)pp;
}

#define FAIL(...)                                          \
  do {                                                     \
    if (err && errlen) snprintf(err, errlen, __VA_ARGS__); \
    return -1;                                             \
  } while (0)

int bs_mesh_of(const bs_config *c, bs_mesh *m, char *err, size_t errlen) {
  const bs_parallel *p = &c->par;
  memset(m, 0, sizeof *m);
  long long tp = p->tp > 0 ? p->tp : 1, dp = p->dp > 0 ? p->dp : 1, pp = p->pp > 0 ? p->pp : 1, G = p->gpus;
  if (p->tp < 0) FAIL("parallel.tp: %d must be at least 1", p->tp);
  if (p->dp < 0) FAIL("parallel.dp: %d must be at least 1", p->dp);
  if (p->pp < 0) FAIL("parallel.pp: %d must be at least 1", p->pp);
  if (G < 1) FAIL("parallel.gpus: %lld must be at least 1", G);
  if (dp * pp > G || G % (dp * pp) != 0)
    FAIL("parallel.gpus: %lld is not divisible by parallel.dp x parallel.pp = %lld", G, dp * pp);
  if (p->method == BS_TP) {
    long long t = G / (dp * pp);
    if (p->tp > 1 && p->tp != t)
      FAIL(
        "parallel.tp: method tp spans gpus / (dp x pp) = %lld ranks; set parallel.tp = %lld or leave it out (to "
        "run another method over context-parallel groups of tp ranks, set parallel.method to it)",
        t, t);
  } else if (tp * dp * pp > G || G % (tp * dp * pp) != 0)
    FAIL("parallel.gpus: %lld is not divisible by parallel.tp x parallel.dp x parallel.pp = %lld", G, tp * dp * pp);
  bs_mesh_sizes(p, m->size);
  const int8_t *o = order_valid(p->order) ? p->order : default_order;
  int s = 1;
  for (int i = 0; i < BS_DIM_COUNT; i++) {
    m->stride[o[i]] = s;
    s *= m->size[o[i]];
  }
  m->att_dim = p->method == BS_TP ? BS_DIM_TP : BS_DIM_CP;
  int64_t B = c->work.batch;
  if (B < 1) FAIL("workload.batch: must be at least 1");
  if (B % dp != 0)
    FAIL("workload.batch: %lld sequences do not split over parallel.dp = %lld replicas", (long long)B, dp);
  if (p->micro_batch < 0) FAIL("parallel.micro_batch: %d must be at least 1", p->micro_batch);
  m->micro_batch = p->micro_batch > 0 ? p->micro_batch : (pp > 1 ? 1 : B / dp);
  if ((B / dp) % m->micro_batch != 0)
    FAIL("parallel.micro_batch: %lld does not divide the %lld sequences of a replica (batch / dp)",
         (long long)m->micro_batch, (long long)(B / dp));
  m->microbatches = B / dp / m->micro_batch;
  return 0;
}
