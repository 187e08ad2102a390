/*
 * comm_nccl_impl.h — what the two files of the NCCL communicator share
 * (comm_nccl.c: creation, NCCL mode, the comm.h calls; comm_nccl_local.c: the
 * local mode's matching, copies and collectives): the request slots, the local
 * world of G virtual ranks, the communicator's state, the CUDA check and the
 * error helper. Private to comm/.
 */
#ifndef BURSTSIM_COMM_NCCL_IMPL_H
#define BURSTSIM_COMM_NCCL_IMPL_H

#include "comm/comm_nccl.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/clock.h"
#include "base/vec.h"

#ifndef BS_COMM_NCCL_LOCAL_ONLY
#include <mpi.h>
#include <nccl.h>
#endif

#define MAX_GROUPS 64

static inline void seterr(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void seterr(char *err, size_t len, const char *fmt, ...) {
  if (!err || !len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
}

/* A request: up to two parts (a ring step has a send and a receive), each
 * completing on its own event once issued. */
typedef struct {
  int busy;
  int unissued; /* parts not yet issued (queued for a group, or unmatched) */
  int nev;      /* parts */
  int failed;
  cudaEvent_t ev[2];
} slot;

/* ---- local mode: shared state of the G virtual ranks -------------------------- */

typedef struct lmsg {
  int src, dst, tag;
  const void *sbuf; /* send side */
  void *rbuf;       /* receive side */
  int64_t bytes;
  cudaEvent_t ready; /* send side: the data is ready on the sender's stream */
  bs_comm_nccl *owner;
  int slot, part;
  struct lmsg *next;
} lmsg;

typedef struct lcoll {
  bs_comm_group g;
  int64_t seq;
  bs_comm_coll kind;
  bs_comm_red red;
  bs_comm_type type;
  int64_t bytes;
  int posted;
  const void *send[BS_COMM_NCCL_MAX_LOCAL];
  void *recv[BS_COMM_NCCL_MAX_LOCAL];
  cudaEvent_t ready[BS_COMM_NCCL_MAX_LOCAL];
  bs_comm_nccl *owner[BS_COMM_NCCL_MAX_LOCAL];
  int slot[BS_COMM_NCCL_MAX_LOCAL];
  struct lcoll *next;
} lcoll;

typedef struct {
  int G, device, refs;
  pthread_mutex_t mu;
  cudaStream_t coll_stream;
  lmsg *sends, *recvs; /* unmatched, in posting order */
  lcoll *colls;        /* collectives waiting for members */
} local_world;

typedef struct {
  bs_comm_group g;
  int64_t count;
} group_seq;

#ifndef BS_COMM_NCCL_LOCAL_ONLY
typedef struct {
  bs_comm_group g;
  MPI_Comm mpi;
  ncclComm_t nccl;
} nccl_group;

typedef struct {
  int send;
  void *buf;
  int64_t bytes;
  int peer, slot, part;
} p2p_op;
#endif

struct bs_comm_nccl {
  int local, rank, size, device;
  cudaStream_t stream;
  cudaEvent_t after_ev;
  slot *slots;
  int nslot, pending;
  size_t cap;
  local_world *lw;
  group_seq seq[MAX_GROUPS];
  int nseq;
#ifndef BS_COMM_NCCL_LOCAL_ONLY
  MPI_Comm world;
  ncclComm_t nccl;
  nccl_group groups[MAX_GROUPS];
  int ngroups;
  p2p_op *queue;
  int nq;
  size_t qcap;
#endif
};

#define CU(call, err, len)                                                  \
  do {                                                                      \
    cudaError_t e_ = (call);                                                \
    if (e_ != cudaSuccess) {                                                \
      seterr(err, len, "comm nccl: %s: %s", #call, cudaGetErrorString(e_)); \
      return BS_COMM_ERR;                                                   \
    }                                                                       \
  } while (0)

/* comm_nccl.c: the next sequence number of a collective on group g (its members' calls match by it). */
int64_t bs_nccl_next_seq(bs_comm_nccl *c, bs_comm_group g, char *err, size_t len);

/* comm_nccl_local.c, called with lw->mu held. */
void bs_nccl_local_free_msg(lmsg *m);
int bs_nccl_local_post(bs_comm_nccl *c, int send, const void *sbuf, void *rbuf, int64_t bytes, int peer, int tag, int s,
                       int part, char *err, size_t len);
int bs_nccl_local_coll(bs_comm_nccl *c, bs_comm_coll kind, bs_comm_red red, bs_comm_type type, bs_comm_group g,
                       const void *send, void *recv, int64_t bytes, int s, char *err, size_t len);

#endif
