/*
 * ctx.c — the few things every part of a point's simulation writes to its
 * shared state: the first error (the cause; later ones are its consequences),
 * the byte counters that refuse to wrap, and the wall clock the point's own
 * cost is measured with.
 */
#include "sim/point.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

void sim_error(sim_ctx *c, const char *fmt, ...) {
  if (c->error[0]) return; /* the first error is the cause */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof c->error, fmt, ap);
  va_end(ap);
}

void sim_add_bytes(rank_state *rs, int64_t *acc, int64_t b, const char *what) {
  if (__builtin_add_overflow(*acc, b, acc))
    sim_error(rs->ctx, "rank %d op #%lld: %s overflows a 64-bit byte count (the point is too large)", rs->rank,
              (long long)rs->op_index, what);
}

void sim_account_sent(rank_state *rs, int peer_rank, int64_t bytes) {
  sim_ctx *c = rs->ctx;
  sim_add_bytes(rs, &rs->sent, bytes, "bytes sent");
  if (node_of_rank(c, peer_rank) == node_of_rank(c, rs->rank)) sim_add_bytes(rs, &rs->intra, bytes, "intra-node bytes");
  else sim_add_bytes(rs, &rs->inter, bytes, "inter-node bytes");
}

double sim_wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
