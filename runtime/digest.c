/*
 * digest.c — see digest.h. Keys are hashed member by member (never the
 * struct's bytes, whose padding is undefined), each into its own hash over
 * all points, so that a mismatch can name the first key that differs.
 */
#include "digest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { K_I64, K_INT, K_U64, K_STR, K_ORDER, K_F64 } kind;
typedef struct {
  const char *name;
  size_t off;
  kind k;
} field;

#define F(name, member, k) \
  { name, offsetof(bs_config, member), k }
static const field fields[] = {
  F("model.preset", model.preset, K_STR),
  F("model.hidden", model.hidden, K_I64),
  F("model.heads", model.heads, K_I64),
  F("model.kv_heads", model.kv_heads, K_I64),
  F("model.head_dim", model.head_dim, K_I64),
  F("model.layers", model.layers, K_I64),
  F("model.ffn", model.ffn, K_I64),
  F("model.vocab", model.vocab, K_I64),
  F("model.dtype", model.dtype, K_INT),
  F("model.fp8", model.fp8, K_INT),
  F("model.attention", model.attention, K_INT),
  F("model.v_head_dim", model.v_head_dim, K_I64),
  F("model.experts", model.experts, K_I64),
  F("model.top_k", model.top_k, K_I64),
  F("model.moe_ffn", model.moe_ffn, K_I64),
  F("model.shared_experts", model.shared_experts, K_I64),
  F("model.capacity_factor", model.capacity_factor, K_F64),
  F("model.routing_skew", model.routing_skew, K_F64),
  F("workload.phase", work.phase, K_INT),
  F("workload.seq_len", work.seq_len, K_I64),
  F("workload.batch", work.batch, K_I64),
  F("workload.causal", work.causal, K_INT),
  F("workload.window", work.window, K_I64),
  F("workload.scope", work.scope, K_INT),
  F("workload.decode_tokens", work.decode_tokens, K_I64),
  F("workload.recompute", work.recompute, K_INT),
  F("workload.cached_tokens", work.cached_tokens, K_I64),
  F("workload.kv_cache", work.kv_cache, K_INT),
  F("workload.kv_block", work.kv_block, K_I64),
  F("workload.max_seq_len", work.max_seq_len, K_I64),
  F("workload.seed", seed, K_U64),
  F("parallel.method", par.method, K_INT),
  F("parallel.gpus", par.gpus, K_INT),
  F("parallel.layout", par.layout, K_INT),
  F("parallel.double_ring", par.double_ring, K_INT),
  F("parallel.lao", par.lao, K_INT),
  F("parallel.bwd_comm", par.bwd_opt, K_INT),
  F("parallel.ulysses_degree", par.ulysses_degree, K_INT),
  F("parallel.tp_variant", par.tp_variant, K_INT),
  F("parallel.zero", par.zero, K_INT),
  F("parallel.ranks_per_node", par.ranks_per_node, K_INT),
  F("parallel.tp", par.tp, K_INT),
  F("parallel.dp", par.dp, K_INT),
  F("parallel.pp", par.pp, K_INT),
  F("parallel.pp_schedule", par.pp_schedule, K_INT),
  F("parallel.pp_chunks", par.pp_chunks, K_INT),
  F("parallel.micro_batch", par.micro_batch, K_INT),
  F("parallel.order", par.order, K_ORDER),
  F("parallel.cp_pass", par.cp_pass, K_INT),
  F("parallel.ep", par.ep, K_INT),
  F("cluster.topology", cluster.topology, K_STR),
  F("cluster.profile", cluster.profile, K_STR),
  F("cluster.nodes", cluster.nodes, K_INT),
  F("cluster.coll_algo", cluster.coll_algo, K_INT),
  F("output.trace", trace, K_INT),
};
#define NFIELDS (sizeof fields / sizeof fields[0])
#define NSLOTS (NFIELDS + 2) /* [0] overall, [1] the number of points, then one per key */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

static void hash_field(uint64_t *h, const bs_config *c, const field *f) {
  const char *p = (const char *)c + f->off;
  switch (f->k) {
  case K_I64: {
    int64_t v;
    memcpy(&v, p, sizeof v);
    *h = fnv(*h, &v, sizeof v);
    break;
  }
  case K_F64: {
    double v;
    memcpy(&v, p, sizeof v);
    *h = fnv(*h, &v, sizeof v);
    break;
  }
  case K_U64: {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    *h = fnv(*h, &v, sizeof v);
    break;
  }
  case K_INT: {
    int v;
    memcpy(&v, p, sizeof v);
    *h = fnv(*h, &v, sizeof v);
    break;
  }
  case K_STR: *h = fnv(*h, p, strnlen(p, 256) + 1); break;
  case K_ORDER: *h = fnv(*h, p, BS_DIM_COUNT); break;
  }
}

static void digests(const bs_config *points, int n, uint64_t *d) {
  const uint64_t basis = 0xcbf29ce484222325ULL;
  d[1] = fnv(basis, &n, sizeof n);
  for (size_t k = 0; k < NFIELDS; k++) {
    d[k + 2] = basis;
    for (int i = 0; i < n; i++) hash_field(&d[k + 2], &points[i], &fields[k]);
  }
  d[0] = fnv(basis, &d[1], sizeof *d * (NSLOTS - 1));
}

uint64_t bs_points_digest(const bs_config *points, int n) {
  uint64_t d[NSLOTS];
  digests(points, n, d);
  return d[0];
}

/* Gathers every rank's slots; names the ranks that differ from rank 0 and the first slot that differs. */
static int compare(MPI_Comm comm, const uint64_t *mine, int nslots, const char *const *names, const char *what,
                   char *err, size_t errlen) {
  int size;
  MPI_Comm_size(comm, &size);
  uint64_t *all = malloc(sizeof *all * (size_t)nslots * (size_t)size);
  if (!all) {
    snprintf(err, errlen, "checking the %s across ranks: out of memory", what);
    return -1;
  }
  if (MPI_Allgather(mine, nslots, MPI_UINT64_T, all, nslots, MPI_UINT64_T, comm) != MPI_SUCCESS) {
    free(all);
    snprintf(err, errlen, "checking the %s across ranks: MPI_Allgather failed", what);
    return -1;
  }
  char list[96] = "";
  int ndiff = 0, first = -1;
  for (int r = 1; r < size; r++) {
    if (all[(size_t)r * (size_t)nslots] == all[0]) continue;
    if (first < 0) first = r;
    size_t l = strlen(list);
    if (ndiff < 8) snprintf(list + l, sizeof list - l, "%s%d", ndiff ? ", " : "", r);
    else if (ndiff == 8) snprintf(list + l, sizeof list - l, ", ...");
    ndiff++;
  }
  int rc = 0;
  if (ndiff) {
    const char *key = NULL;
    for (int k = 1; k < nslots && !key; k++)
      if (all[(size_t)first * (size_t)nslots + (size_t)k] != all[k]) key = names ? names[k] : NULL;
    snprintf(err, errlen,
             "rank%s %s resolved a different %s from rank 0%s%s%s: every rank must be started with the "
             "same file and options",
             ndiff > 1 ? "s" : "", list, what, key ? " (first at " : "", key ? key : "", key ? ")" : "");
    rc = -1;
  }
  free(all);
  return rc;
}

int bs_points_same(MPI_Comm comm, const bs_config *points, int n, char *err, size_t errlen) {
  uint64_t d[NSLOTS];
  const char *names[NSLOTS];
  digests(points, n, d);
  names[0] = NULL;
  names[1] = "the number of points";
  for (size_t k = 0; k < NFIELDS; k++) names[k + 2] = fields[k].name;
  return compare(comm, d, (int)NSLOTS, names, "scenario", err, errlen);
}

int bs_bytes_same(MPI_Comm comm, const void *data, size_t len, const char *what, char *err, size_t errlen) {
  uint64_t d[1] = {fnv(0xcbf29ce484222325ULL, data, len)};
  return compare(comm, d, 1, NULL, what, err, errlen);
}
