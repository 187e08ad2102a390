/*
 * fidelity_point.c — one communication microbenchmark simulated as nccl-tests
 * runs it, for scripts/fidelity.py: a sendrecv from rank 0 to one peer, or one
 * collective over the first `ranks` GPUs, on a shipped topology and profile,
 * through the same engine as `burstsim sim` (bs_sim_run_source with a
 * hand-written program: the scenario's plans have no single-message point).
 * Prints the simulated time in seconds. Kernel figures need no helper: a
 * one-GPU `burstsim sim` point is a single attention kernel.
 *
 *   fidelity_point PROFILE TOPOLOGY GPUS sendrecv BYTES PEER [nics=N] [algo=ring|tree|auto]
 *   fidelity_point PROFILE TOPOLOGY GPUS allreduce|allgather|reduce_scatter|alltoall BYTES RANKS [nics=N] [algo=...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

#define MAX_OPS 4

typedef struct {
  int n[2];
  bs_op ops[2][MAX_OPS]; /* [0]: active ranks' program, [1] idle */
  int kind_peer;         /* sendrecv: the peer of rank 0 (-1: a collective) */
  int64_t bytes;
  bs_coll_kind coll;
  int ranks;
} program;

typedef struct {
  const program *p;
  int rank, pos;
  bs_op ops[MAX_OPS];
  int n;
} iter;

static void *iter_new(void *ctx, int rank) {
  iter *it = calloc(1, sizeof *it);
  if (!it) return NULL;
  const program *p = ctx;
  it->p = ctx;
  it->rank = rank;
  int h = 0;
  if (p->kind_peer >= 0 && (rank == 0 || rank == p->kind_peer)) {
    bs_op *op = &it->ops[it->n++];
    op->kind = rank == 0 ? BS_OP_SEND : BS_OP_RECV;
    op->handle = h;
    op->u.p2p.peer = rank == 0 ? p->kind_peer : 0;
    op->u.p2p.tag = 1;
    op->u.p2p.bytes = p->bytes;
    op->u.p2p.buf = BS_NOREF;
  } else if (p->kind_peer < 0 && rank < p->ranks) {
    bs_op *op = &it->ops[it->n++];
    op->kind = BS_OP_COLL;
    op->handle = h;
    op->u.coll.kind = p->coll;
    op->u.coll.group = (bs_group){0, 1, p->ranks};
    op->u.coll.bytes = p->bytes;
  } else return it; /* idle */
  bs_op *w = &it->ops[it->n++];
  w->kind = BS_OP_WAIT;
  w->handle = -1;
  w->u.wait.n = 1;
  w->u.wait.handles[0] = h;
  return it;
}

static int iter_next(void *v, bs_op *op) {
  iter *it = v;
  if (it->pos >= it->n) return 0;
  *op = it->ops[it->pos++];
  return 1;
}

static void iter_free(void *v) { free(v); }

static int usage(void) {
  fprintf(stderr,
          "usage: fidelity_point PROFILE TOPOLOGY GPUS sendrecv BYTES PEER [nics=N] [algo=A]\n"
          "       fidelity_point PROFILE TOPOLOGY GPUS allreduce|allgather|reduce_scatter|alltoall BYTES "
          "RANKS [nics=N] [algo=ring|tree|auto]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 7 || argc > 9) return usage();
  program p;
  memset(&p, 0, sizeof p);
  int gpus = atoi(argv[3]);
  p.bytes = strtoll(argv[5], NULL, 10);
  int arg = atoi(argv[6]);
  if (gpus < 1 || p.bytes < 1 || arg < 0 || arg >= gpus + 1) return usage();
  p.kind_peer = -1;
  if (!strcmp(argv[4], "sendrecv")) {
    if (arg < 1 || arg >= gpus) return usage();
    p.kind_peer = arg;
  } else {
    if (!strcmp(argv[4], "allreduce")) p.coll = BS_COLL_ALLREDUCE;
    else if (!strcmp(argv[4], "allgather")) p.coll = BS_COLL_ALLGATHER;
    else if (!strcmp(argv[4], "reduce_scatter")) p.coll = BS_COLL_REDUCE_SCATTER;
    else if (!strcmp(argv[4], "alltoall")) p.coll = BS_COLL_ALLTOALL;
    else return usage();
    if (arg < 2 || arg > gpus) return usage();
    p.ranks = arg;
  }
  bs_config c;
  bs_config_default(&c);
  c.par.gpus = gpus;
  snprintf(c.cluster.topology, sizeof c.cluster.topology, "%s", argv[2]);
  snprintf(c.cluster.profile, sizeof c.cluster.profile, "%s", argv[1]);
  for (int i = 7; i < argc; i++) {
    if (!strncmp(argv[i], "nics=", 5)) c.cluster.nics_per_node = atoi(argv[i] + 5);
    else if (!strcmp(argv[i], "algo=ring")) c.cluster.coll_algo = BS_COLL_ALGO_RING;
    else if (!strcmp(argv[i], "algo=tree")) c.cluster.coll_algo = BS_COLL_ALGO_TREE;
    else if (!strcmp(argv[i], "algo=auto")) c.cluster.coll_algo = BS_COLL_ALGO_AUTO;
    else return usage();
  }
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_sim_source s = {&p, gpus, iter_new, iter_next, iter_free, NULL, NULL};
  bs_result r;
  char err[1024] = "";
  if (bs_sim_run_source(&c, &o, &s, &r, NULL, NULL, err, sizeof err)) {
    fprintf(stderr, "fidelity_point: %s\n", err);
    return 1;
  }
  printf("%.9g\n", r.time.step);
  bs_result_free(&r);
  return 0;
}
