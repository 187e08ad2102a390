/*
 * comm_mpi.c — the Open MPI backend of comm.h. Point-to-point maps to
 * MPI_Isend/Irecv on a private duplicate of the world communicator;
 * collectives to the non-blocking MPI-3 collectives on one communicator per
 * group, created on first use (MPI_Comm_create_group, collective over the
 * group only). Waits poll MPI_Test against a deadline so that a peer that
 * never answers becomes an error, not a hang.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "comm/comm_mpi.h"
#include "base/clock.h"

#define MAX_GROUPS 64

typedef struct {
  bs_comm_group g;
  MPI_Comm comm;
} group_comm;

typedef struct {
  MPI_Comm world;
  int rank, size;
  MPI_Request *req;
  char *busy; /* slot handed out and not yet reported complete */
  int nreq, cap, pending;
  group_comm groups[MAX_GROUPS];
  int ngroups;
} mpi_comm;

static const bs_comm_ops mc_ops;

int bs_comm_mpi_create(MPI_Comm world, bs_comm **out, char *err, size_t errlen) {
  *out = NULL;
  mpi_comm *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "comm: out of memory");
    return BS_COMM_ERR;
  }
  if (MPI_Comm_dup(world, &c->world) != MPI_SUCCESS) {
    free(c);
    snprintf(err, errlen, "comm: MPI_Comm_dup failed");
    return BS_COMM_ERR;
  }
  MPI_Comm_rank(c->world, &c->rank);
  MPI_Comm_size(c->world, &c->size);
  return bs_comm_wrap(&mc_ops, c, out, err, errlen);
}

static int mc_rank(const void *self) { return ((const mpi_comm *)self)->rank; }
static int mc_size(const void *self) { return ((const mpi_comm *)self)->size; }
static int mc_pending(const void *self) { return ((const mpi_comm *)self)->pending; }

static int new_slot(mpi_comm *c) {
  for (int i = 0; i < c->nreq; i++)
    if (!c->busy[i]) {
      c->busy[i] = 1;
      return i;
    }
  if (c->nreq == c->cap) {
    int cap = c->cap ? 2 * c->cap : 64;
    MPI_Request *r = realloc(c->req, (size_t)cap * sizeof *r);
    if (!r) return -1;
    c->req = r;
    char *b = realloc(c->busy, (size_t)cap);
    if (!b) return -1;
    c->busy = b;
    c->cap = cap;
  }
  c->req[c->nreq] = MPI_REQUEST_NULL;
  c->busy[c->nreq] = 1;
  return c->nreq++;
}

static int check_count(int64_t n, char *err, size_t errlen) {
  if (n < 0 || n > INT_MAX) {
    snprintf(err, errlen, "comm: %lld elements exceed one MPI message", (long long)n);
    return BS_COMM_ERR;
  }
  return BS_COMM_OK;
}

static int p2p(mpi_comm *c, int send, void *buf, int64_t bytes, int peer, int tag, int *req, char *err, size_t errlen) {
  if (check_count(bytes, err, errlen)) return BS_COMM_ERR;
  if (peer < 0 || peer >= c->size) {
    snprintf(err, errlen, "comm: peer %d outside 0..%d", peer, c->size - 1);
    return BS_COMM_ERR;
  }
  int s = new_slot(c);
  if (s < 0) {
    snprintf(err, errlen, "comm: out of memory");
    return BS_COMM_ERR;
  }
  int rc = send ? MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, c->world, &c->req[s])
                : MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, c->world, &c->req[s]);
  if (rc != MPI_SUCCESS) {
    snprintf(err, errlen, "comm: MPI_I%s to/from rank %d failed", send ? "send" : "recv", peer);
    return BS_COMM_ERR;
  }
  c->pending++;
  *req = s;
  return BS_COMM_OK;
}

static int mc_isend(void *self, const void *buf, int64_t bytes, int peer, int tag, int *req, char *err, size_t errlen) {
  return p2p(self, 1, (void *)buf, bytes, peer, tag, req, err, errlen);
}
static int mc_irecv(void *self, void *buf, int64_t bytes, int peer, int tag, int *req, char *err, size_t errlen) {
  return p2p(self, 0, buf, bytes, peer, tag, req, err, errlen);
}

static MPI_Comm group_comm_of(mpi_comm *c, bs_comm_group g, char *err, size_t errlen) {
  for (int i = 0; i < c->ngroups; i++)
    if (c->groups[i].g.first == g.first && c->groups[i].g.stride == g.stride && c->groups[i].g.size == g.size)
      return c->groups[i].comm;
  if (c->ngroups == MAX_GROUPS) {
    snprintf(err, errlen, "comm: more than %d groups", MAX_GROUPS);
    return MPI_COMM_NULL;
  }
  int *ranks = malloc((size_t)g.size * sizeof *ranks);
  if (!ranks) {
    snprintf(err, errlen, "comm: out of memory");
    return MPI_COMM_NULL;
  }
  for (int i = 0; i < g.size; i++) ranks[i] = g.first + i * g.stride;
  MPI_Group wg, sub;
  MPI_Comm nc = MPI_COMM_NULL;
  MPI_Comm_group(c->world, &wg);
  MPI_Group_incl(wg, g.size, ranks, &sub);
  int tag = (int)((g.first * 131 + g.stride * 7 + g.size) % 32000);
  int rc = MPI_Comm_create_group(c->world, sub, tag, &nc);
  MPI_Group_free(&sub);
  MPI_Group_free(&wg);
  free(ranks);
  if (rc != MPI_SUCCESS || nc == MPI_COMM_NULL) {
    snprintf(err, errlen, "comm: could not create the communicator of group %d+%d*i (%d ranks)", g.first, g.stride,
             g.size);
    return MPI_COMM_NULL;
  }
  c->groups[c->ngroups].g = g;
  c->groups[c->ngroups].comm = nc;
  c->ngroups++;
  return nc;
}

static int mc_icoll(void *self, bs_comm_coll kind, bs_comm_red red, bs_comm_type type, bs_comm_group g,
                    const void *send, void *recv, int64_t bytes, int *req, char *err, size_t errlen) {
  mpi_comm *c = self;
  if (g.size < 1 || g.stride < 1 || g.first < 0 || g.first + (int64_t)(g.size - 1) * g.stride >= c->size ||
      c->rank < g.first || (c->rank - g.first) % g.stride != 0 || (c->rank - g.first) / g.stride >= g.size) {
    snprintf(err, errlen, "comm: rank %d is not in group %d+%d*i (%d ranks)", c->rank, g.first, g.stride, g.size);
    return BS_COMM_ERR;
  }
  if ((kind == BS_COMM_ALLREDUCE || kind == BS_COMM_REDUCE_SCATTER) && type != BS_COMM_F32) {
    snprintf(err, errlen, "comm: reductions need fp32 data");
    return BS_COMM_ERR;
  }
  if (bytes % ((int64_t)g.size * (type == BS_COMM_F32 ? 4 : 1)) != 0 && kind != BS_COMM_ALLGATHER &&
      kind != BS_COMM_ALLREDUCE) {
    snprintf(err, errlen, "comm: %lld bytes do not split into %d equal blocks", (long long)bytes, g.size);
    return BS_COMM_ERR;
  }
  MPI_Comm gc = group_comm_of(c, g, err, errlen);
  if (gc == MPI_COMM_NULL) return BS_COMM_ERR;
  int s = new_slot(c);
  if (s < 0) {
    snprintf(err, errlen, "comm: out of memory");
    return BS_COMM_ERR;
  }
  MPI_Op op = red == BS_COMM_MAX ? MPI_MAX : MPI_SUM;
  const void *sb = send == recv ? MPI_IN_PLACE : send;
  int rc;
  switch (kind) {
  case BS_COMM_ALLREDUCE:
    if (check_count(bytes / 4, err, errlen)) return BS_COMM_ERR;
    rc = MPI_Iallreduce(sb, recv, (int)(bytes / 4), MPI_FLOAT, op, gc, &c->req[s]);
    break;
  case BS_COMM_ALLGATHER:
    if (check_count(bytes, err, errlen)) return BS_COMM_ERR;
    rc = MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, gc, &c->req[s]);
    break;
  case BS_COMM_REDUCE_SCATTER:
    if (check_count(bytes / 4 / g.size, err, errlen)) return BS_COMM_ERR;
    rc = MPI_Ireduce_scatter_block(send, recv, (int)(bytes / 4 / g.size), MPI_FLOAT, op, gc, &c->req[s]);
    break;
  case BS_COMM_ALLTOALL:
    if (check_count(bytes / g.size, err, errlen)) return BS_COMM_ERR;
    rc = MPI_Ialltoall(send, (int)(bytes / g.size), MPI_BYTE, recv, (int)(bytes / g.size), MPI_BYTE, gc, &c->req[s]);
    break;
  default: snprintf(err, errlen, "comm: unknown collective %d", (int)kind); return BS_COMM_ERR;
  }
  if (rc != MPI_SUCCESS) {
    snprintf(err, errlen, "comm: collective %d failed to start", (int)kind);
    return BS_COMM_ERR;
  }
  c->pending++;
  *req = s;
  return BS_COMM_OK;
}

static int mc_test(void *self, int req, int *done) {
  mpi_comm *c = self;
  *done = 0;
  if (req < 0 || req >= c->nreq || !c->busy[req]) return BS_COMM_ERR;
  if (c->req[req] != MPI_REQUEST_NULL) {
    int flag = 0;
    if (MPI_Test(&c->req[req], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return BS_COMM_ERR;
    if (!flag) return BS_COMM_OK;
    c->pending--;
  }
  *done = 1;
  c->busy[req] = 0;
  return BS_COMM_OK;
}

static int mc_wait(void *self, int req, double timeout_s) {
  double deadline = bs_now_s() + timeout_s;
  int spins = 0;
  for (;;) {
    int done;
    if (mc_test(self, req, &done)) return BS_COMM_ERR;
    if (done) return BS_COMM_OK;
    if (++spins >= 64) {
      spins = 0;
      if (bs_now_s() > deadline) return BS_COMM_TIMEOUT;
      /* oversubscribed ranks: give the core to the peer we are waiting for */
      struct timespec ts = {0, 2000};
      nanosleep(&ts, NULL);
    }
  }
}

static void mc_progress(void *self) {
  mpi_comm *c = self;
  if (c->pending == 0) return;
  int flag;
  /* Each MPI_Test enters the progress engine: large transfers advance here. */
  for (int i = 0; i < c->nreq; i++)
    if (c->req[i] != MPI_REQUEST_NULL) {
      MPI_Test(&c->req[i], &flag, MPI_STATUS_IGNORE);
      if (flag) c->pending--; /* the slot stays busy until its owner tests it */
    }
}

static void mc_abort(void *self, int code) {
  mpi_comm *c = self;
  MPI_Abort(c ? c->world : MPI_COMM_WORLD, code);
}

static void mc_free(void *self) {
  mpi_comm *c = self;
  if (!c) return;
  for (int i = 0; i < c->ngroups; i++) MPI_Comm_free(&c->groups[i].comm);
  MPI_Comm_free(&c->world);
  free(c->req);
  free(c->busy);
  free(c);
}

static const bs_comm_ops mc_ops = {
  .name = "mpi",
  .rank = mc_rank,
  .size = mc_size,
  .isend = mc_isend,
  .irecv = mc_irecv,
  .icoll = mc_icoll,
  .test = mc_test,
  .wait = mc_wait,
  .progress = mc_progress,
  .pending = mc_pending,
  .abort = mc_abort,
  .free = mc_free,
};
