/*
 * comm_nccl.c — the GPU backend of the communicator (see comm_nccl.h): NCCL
 * between processes (one GPU each, ncclUniqueId over MPI, grouped
 * point-to-point on a dedicated stream, collectives), and the local mode of
 * G virtual ranks on one GPU exchanging through device-to-device copies (its
 * matching and collectives in comm_nccl_local.c). Every request completes on CUDA events; every CUDA and NCCL call is checked
 * and reported through the caller's err buffer (or stderr where the comm.h
 * signature has none).
 */
#include "comm/comm_nccl_impl.h"

/* ---- slots ----------------------------------------------------------------------- */

static int new_slot(bs_comm_nccl *c, int parts, char *err, size_t len) {
  int s = -1;
  for (int i = 0; i < c->nslot; i++)
    if (!c->slots[i].busy) {
      s = i;
      break;
    }
  if (s < 0) {
    size_t had = c->cap;
    slot *ns = bs_vec_grow(c->slots, sizeof *ns, (size_t)c->nslot + 1, &c->cap, 64);
    if (!ns) {
      seterr(err, len, "comm nccl: out of memory");
      return -1;
    }
    memset(ns + had, 0, (c->cap - had) * sizeof *ns);
    c->slots = ns;
    s = c->nslot++;
  }
  slot *sl = &c->slots[s];
  for (int p = 0; p < 2; p++)
    if (!sl->ev[p]) {
      cudaError_t e = cudaEventCreateWithFlags(&sl->ev[p], cudaEventDisableTiming);
      if (e != cudaSuccess) {
        sl->ev[p] = NULL;
        seterr(err, len, "comm nccl: cudaEventCreate: %s", cudaGetErrorString(e));
        return -1;
      }
    }
  sl->busy = 1;
  sl->unissued = parts;
  sl->nev = parts;
  sl->failed = 0;
  c->pending++;
  return s;
}

static void release_slot(bs_comm_nccl *c, int s) {
  c->slots[s].busy = 0;
  c->pending--;
}

static int in_group(const bs_comm_nccl *c, bs_comm_group g, char *err, size_t len) {
  if (g.size < 1 || g.stride < 1 || g.first < 0 || g.first + (int64_t)(g.size - 1) * g.stride >= c->size ||
      c->rank < g.first || (c->rank - g.first) % g.stride != 0 || (c->rank - g.first) / g.stride >= g.size) {
    seterr(err, len, "comm nccl: rank %d is not in group %d+%d*i (%d ranks)", c->rank, g.first, g.stride, g.size);
    return 0;
  }
  return 1;
}

static int coll_args_ok(bs_comm_coll kind, bs_comm_type type, bs_comm_group g, int64_t bytes, char *err, size_t len) {
  if (kind < BS_COMM_ALLREDUCE || kind > BS_COMM_ALLTOALL) {
    seterr(err, len, "comm nccl: unknown collective %d", (int)kind);
    return 0;
  }
  if (bytes <= 0) {
    seterr(err, len, "comm nccl: collective of %lld bytes", (long long)bytes);
    return 0;
  }
  if ((kind == BS_COMM_ALLREDUCE || kind == BS_COMM_REDUCE_SCATTER) && type != BS_COMM_F32) {
    seterr(err, len, "comm nccl: reductions need fp32 data");
    return 0;
  }
  const int64_t unit = type == BS_COMM_F32 ? 4 : 1;
  if (kind == BS_COMM_ALLREDUCE && bytes % unit) {
    seterr(err, len, "comm nccl: %lld bytes are not whole fp32 values", (long long)bytes);
    return 0;
  }
  if ((kind == BS_COMM_REDUCE_SCATTER || kind == BS_COMM_ALLTOALL) && bytes % ((int64_t)g.size * unit)) {
    seterr(err, len, "comm nccl: %lld bytes do not split into %d equal blocks", (long long)bytes, g.size);
    return 0;
  }
  return 1;
}

int64_t bs_nccl_next_seq(bs_comm_nccl *c, bs_comm_group g, char *err, size_t len) {
  for (int i = 0; i < c->nseq; i++)
    if (c->seq[i].g.first == g.first && c->seq[i].g.stride == g.stride && c->seq[i].g.size == g.size)
      return c->seq[i].count++;
  if (c->nseq == MAX_GROUPS) {
    seterr(err, len, "comm nccl: more than %d groups", MAX_GROUPS);
    return -1;
  }
  c->seq[c->nseq].g = g;
  c->seq[c->nseq].count = 1;
  c->nseq++;
  return 0;
}

/* ---- creation ---------------------------------------------------------------------- */

static int init_handle(bs_comm_nccl *c, int device, char *err, size_t len) {
  c->device = device;
  CU(cudaSetDevice(device), err, len);
  CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), err, len);
  CU(cudaEventCreateWithFlags(&c->after_ev, cudaEventDisableTiming), err, len);
  return BS_COMM_OK;
}

static void destroy_handle(bs_comm_nccl *c) {
  for (int i = 0; i < c->nslot; i++)
    for (int p = 0; p < 2; p++)
      if (c->slots[i].ev[p]) (void)cudaEventDestroy(c->slots[i].ev[p]);
  free(c->slots);
  if (c->after_ev) (void)cudaEventDestroy(c->after_ev);
  if (c->stream) (void)cudaStreamDestroy(c->stream);
}

int bs_comm_nccl_create_local(int G, int device, bs_comm_nccl **out, char *err, size_t errlen) {
  if (!out) {
    seterr(err, errlen, "comm nccl: out is NULL");
    return BS_COMM_ERR;
  }
  if (G < 1 || G > BS_COMM_NCCL_MAX_LOCAL) {
    seterr(err, errlen, "comm nccl: local mode takes 1..%d ranks, not %d", BS_COMM_NCCL_MAX_LOCAL, G);
    return BS_COMM_ERR;
  }
  for (int r = 0; r < G; r++) out[r] = NULL;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    (void)cudaGetLastError();
    seterr(err, errlen, "comm nccl: no CUDA device for the local mode (%s)",
           e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return BS_COMM_ERR;
  }
  if (device < 0 || device >= n) {
    seterr(err, errlen, "comm nccl: device %d outside 0..%d", device, n - 1);
    return BS_COMM_ERR;
  }
  local_world *lw = calloc(1, sizeof *lw);
  if (!lw) {
    seterr(err, errlen, "comm nccl: out of memory");
    return BS_COMM_ERR;
  }
  lw->G = G;
  lw->device = device;
  pthread_mutex_init(&lw->mu, NULL);
  int rc = BS_COMM_OK;
  e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&lw->coll_stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    seterr(err, errlen, "comm nccl: %s", cudaGetErrorString(e));
    pthread_mutex_destroy(&lw->mu);
    free(lw);
    return BS_COMM_ERR;
  }
  for (int r = 0; r < G && rc == BS_COMM_OK; r++) {
    bs_comm_nccl *c = calloc(1, sizeof *c);
    if (!c) {
      seterr(err, errlen, "comm nccl: out of memory");
      rc = BS_COMM_ERR;
      break;
    }
    c->local = 1;
    c->rank = r;
    c->size = G;
    c->lw = lw;
    lw->refs++;
    out[r] = c;
    rc = init_handle(c, device, err, errlen);
  }
  if (rc != BS_COMM_OK) {
    for (int r = 0; r < G; r++)
      if (out[r]) {
        bs_comm_nccl_free(out[r]);
        out[r] = NULL;
      }
  }
  return rc;
}

#ifndef BS_COMM_NCCL_LOCAL_ONLY
#define NC(call, err, len)                                                  \
  do {                                                                      \
    ncclResult_t r_ = (call);                                               \
    if (r_ != ncclSuccess) {                                                \
      seterr(err, len, "comm nccl: %s: %s", #call, ncclGetErrorString(r_)); \
      return BS_COMM_ERR;                                                   \
    }                                                                       \
  } while (0)

static int nccl_init_comm(MPI_Comm mc, int nranks, int rank, ncclComm_t *out, char *err, size_t len) {
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0) NC(ncclGetUniqueId(&id), err, len);
  if (MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mc) != MPI_SUCCESS) {
    seterr(err, len, "comm nccl: MPI_Bcast of the ncclUniqueId failed");
    return BS_COMM_ERR;
  }
  NC(ncclCommInitRank(out, nranks, id, rank), err, len);
  return BS_COMM_OK;
}
#endif

int bs_comm_nccl_create(const void *mpi_world, int device, bs_comm_nccl **out, char *err, size_t errlen) {
  if (!out || !mpi_world) {
    seterr(err, errlen, "comm nccl: NULL argument");
    return BS_COMM_ERR;
  }
  *out = NULL;
#ifdef BS_COMM_NCCL_LOCAL_ONLY
  (void)device;
  seterr(err, errlen, "comm nccl: built without NCCL and MPI (local mode only)");
  return BS_COMM_ERR;
#else
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    (void)cudaGetLastError();
    seterr(err, errlen, "comm nccl: no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return BS_COMM_ERR;
  }
  if (device < 0 || device >= n) {
    seterr(err, errlen, "comm nccl: device %d outside 0..%d", device, n - 1);
    return BS_COMM_ERR;
  }
  bs_comm_nccl *c = calloc(1, sizeof *c);
  if (!c) {
    seterr(err, errlen, "comm nccl: out of memory");
    return BS_COMM_ERR;
  }
  c->world = MPI_COMM_NULL;
  if (MPI_Comm_dup(*(const MPI_Comm *)mpi_world, &c->world) != MPI_SUCCESS) {
    seterr(err, errlen, "comm nccl: MPI_Comm_dup failed");
    free(c);
    return BS_COMM_ERR;
  }
  MPI_Comm_rank(c->world, &c->rank);
  MPI_Comm_size(c->world, &c->size);
  if (init_handle(c, device, err, errlen) != BS_COMM_OK ||
      nccl_init_comm(c->world, c->size, c->rank, &c->nccl, err, errlen) != BS_COMM_OK) {
    c->nccl = NULL;
    bs_comm_nccl_free(c);
    return BS_COMM_ERR;
  }
  *out = c;
  return BS_COMM_OK;
#endif
}

int bs_comm_nccl_rank(const bs_comm_nccl *c) { return c->rank; }
int bs_comm_nccl_size(const bs_comm_nccl *c) { return c->size; }
int bs_comm_nccl_is_local(const bs_comm_nccl *c) { return c->local; }
cudaStream_t bs_comm_nccl_stream(const bs_comm_nccl *c) { return c->stream; }
int bs_comm_nccl_pending(const bs_comm_nccl *c) { return c->pending; }

/* ---- NCCL mode ------------------------------------------------------------------------- */

#ifndef BS_COMM_NCCL_LOCAL_ONLY
static int queue_op(bs_comm_nccl *c, int send, void *buf, int64_t bytes, int peer, int s, int part, char *err,
                    size_t len) {
  p2p_op *q = bs_vec_grow(c->queue, sizeof *q, (size_t)c->nq + 1, &c->qcap, 32);
  if (!q) {
    seterr(err, len, "comm nccl: out of memory");
    return BS_COMM_ERR;
  }
  c->queue = q;
  p2p_op *op = &c->queue[c->nq++];
  op->send = send;
  op->buf = buf;
  op->bytes = bytes;
  op->peer = peer;
  op->slot = s;
  op->part = part;
  return BS_COMM_OK;
}

static int nccl_flush(bs_comm_nccl *c, char *err, size_t len) {
  if (c->nq == 0) return BS_COMM_OK;
  ncclResult_t r = ncclGroupStart();
  for (int i = 0; i < c->nq && r == ncclSuccess; i++) {
    p2p_op *op = &c->queue[i];
    r = op->send ? ncclSend(op->buf, (size_t)op->bytes, ncclUint8, op->peer, c->nccl, c->stream)
                 : ncclRecv(op->buf, (size_t)op->bytes, ncclUint8, op->peer, c->nccl, c->stream);
  }
  ncclResult_t r2 = ncclGroupEnd();
  if (r == ncclSuccess) r = r2;
  cudaError_t e = cudaSuccess;
  for (int i = 0; i < c->nq; i++) {
    slot *sl = &c->slots[c->queue[i].slot];
    if (r == ncclSuccess && e == cudaSuccess) e = cudaEventRecord(sl->ev[c->queue[i].part], c->stream);
    sl->unissued--;
    if (r != ncclSuccess || e != cudaSuccess) sl->failed = 1;
  }
  c->nq = 0;
  if (r != ncclSuccess) {
    seterr(err, len, "comm nccl: grouped send/recv: %s", ncclGetErrorString(r));
    return BS_COMM_ERR;
  }
  if (e != cudaSuccess) {
    seterr(err, len, "comm nccl: cudaEventRecord: %s", cudaGetErrorString(e));
    return BS_COMM_ERR;
  }
  return BS_COMM_OK;
}

static int nccl_group_comm(bs_comm_nccl *c, bs_comm_group g, ncclComm_t *out, char *err, size_t len) {
  if (g.first == 0 && g.stride == 1 && g.size == c->size) {
    *out = c->nccl;
    return BS_COMM_OK;
  }
  for (int i = 0; i < c->ngroups; i++)
    if (c->groups[i].g.first == g.first && c->groups[i].g.stride == g.stride && c->groups[i].g.size == g.size) {
      *out = c->groups[i].nccl;
      return BS_COMM_OK;
    }
  if (c->ngroups == MAX_GROUPS) {
    seterr(err, len, "comm nccl: more than %d groups", MAX_GROUPS);
    return BS_COMM_ERR;
  }
  int *ranks = malloc((size_t)g.size * sizeof *ranks);
  if (!ranks) {
    seterr(err, len, "comm nccl: out of memory");
    return BS_COMM_ERR;
  }
  for (int i = 0; i < g.size; i++) ranks[i] = g.first + i * g.stride;
  MPI_Group wg, sub;
  MPI_Comm mc = MPI_COMM_NULL;
  MPI_Comm_group(c->world, &wg);
  MPI_Group_incl(wg, g.size, ranks, &sub);
  int tag = (int)((g.first * 131 + g.stride * 7 + g.size) % 32000);
  int mrc = MPI_Comm_create_group(c->world, sub, tag, &mc);
  MPI_Group_free(&sub);
  MPI_Group_free(&wg);
  free(ranks);
  if (mrc != MPI_SUCCESS || mc == MPI_COMM_NULL) {
    seterr(err, len, "comm nccl: MPI communicator of group %d+%d*i failed", g.first, g.stride);
    return BS_COMM_ERR;
  }
  ncclComm_t nc = NULL;
  if (nccl_init_comm(mc, g.size, (c->rank - g.first) / g.stride, &nc, err, len) != BS_COMM_OK) {
    MPI_Comm_free(&mc);
    return BS_COMM_ERR;
  }
  c->groups[c->ngroups].g = g;
  c->groups[c->ngroups].mpi = mc;
  c->groups[c->ngroups].nccl = nc;
  c->ngroups++;
  *out = nc;
  return BS_COMM_OK;
}

/* A group communicator made ahead of its first use over mc (a communicator of exactly g's ranks,
 * ranked by position in g), so that every rank creates its groups in one agreed order. */
static int nccl_adopt(bs_comm_nccl *c, bs_comm_group g, MPI_Comm mc, char *err, size_t len) {
  for (int i = 0; i < c->ngroups; i++)
    if (c->groups[i].g.first == g.first && c->groups[i].g.stride == g.stride && c->groups[i].g.size == g.size) {
      seterr(err, len, "comm nccl: group %d+%d*i (%d ranks) set up twice", g.first, g.stride, g.size);
      return BS_COMM_ERR;
    }
  if (c->ngroups == MAX_GROUPS) {
    seterr(err, len, "comm nccl: more than %d groups", MAX_GROUPS);
    return BS_COMM_ERR;
  }
  int n = 0, r = 0;
  MPI_Comm_size(mc, &n);
  MPI_Comm_rank(mc, &r);
  if (n != g.size || r != (c->rank - g.first) / g.stride) {
    seterr(err, len, "comm nccl: rank %d: the communicator of group %d+%d*i has %d ranks (this one %d), expected %d",
           c->rank, g.first, g.stride, n, r, g.size);
    return BS_COMM_ERR;
  }
  MPI_Comm dup = MPI_COMM_NULL;
  if (MPI_Comm_dup(mc, &dup) != MPI_SUCCESS) {
    seterr(err, len, "comm nccl: MPI_Comm_dup failed");
    return BS_COMM_ERR;
  }
  ncclComm_t nc = NULL;
  if (nccl_init_comm(dup, n, r, &nc, err, len) != BS_COMM_OK) {
    MPI_Comm_free(&dup);
    return BS_COMM_ERR;
  }
  c->groups[c->ngroups].g = g;
  c->groups[c->ngroups].mpi = dup;
  c->groups[c->ngroups].nccl = nc;
  c->ngroups++;
  return BS_COMM_OK;
}

static int nccl_coll(bs_comm_nccl *c, bs_comm_coll kind, bs_comm_red red, bs_comm_group g, const void *send, void *recv,
                     int64_t bytes, int s, char *err, size_t len) {
  ncclComm_t gc;
  if (nccl_flush(c, err, len) || nccl_group_comm(c, g, &gc, err, len)) return BS_COMM_ERR;
  ncclRedOp_t op = red == BS_COMM_MAX ? ncclMax : ncclSum;
  ncclResult_t r = ncclSuccess;
  switch (kind) {
  case BS_COMM_ALLREDUCE: r = ncclAllReduce(send, recv, (size_t)(bytes / 4), ncclFloat32, op, gc, c->stream); break;
  case BS_COMM_ALLGATHER: r = ncclAllGather(send, recv, (size_t)bytes, ncclUint8, gc, c->stream); break;
  case BS_COMM_REDUCE_SCATTER:
    r = ncclReduceScatter(send, recv, (size_t)(bytes / 4 / g.size), ncclFloat32, op, gc, c->stream);
    break;
  case BS_COMM_ALLTOALL: {
    const size_t blk = (size_t)(bytes / g.size);
    r = ncclGroupStart();
    for (int i = 0; i < g.size && r == ncclSuccess; i++) {
      r = ncclSend((const char *)send + (size_t)i * blk, blk, ncclUint8, i, gc, c->stream);
      if (r == ncclSuccess) r = ncclRecv((char *)recv + (size_t)i * blk, blk, ncclUint8, i, gc, c->stream);
    }
    ncclResult_t r2 = ncclGroupEnd();
    if (r == ncclSuccess) r = r2;
    break;
  }
  }
  if (r != ncclSuccess) {
    c->slots[s].failed = 1;
    c->slots[s].unissued = 0;
    seterr(err, len, "comm nccl: collective %d: %s", (int)kind, ncclGetErrorString(r));
    return BS_COMM_ERR;
  }
  c->slots[s].unissued = 0;
  CU(cudaEventRecord(c->slots[s].ev[0], c->stream), err, len);
  return BS_COMM_OK;
}
#endif

/* ---- the comm.h calls --------------------------------------------------------------------- */

static void lock(bs_comm_nccl *c) {
  if (c->local) pthread_mutex_lock(&c->lw->mu);
}
static void unlock(bs_comm_nccl *c) {
  if (c->local) pthread_mutex_unlock(&c->lw->mu);
}

static int check_peer(const bs_comm_nccl *c, int peer, int64_t bytes, char *err, size_t len) {
  if (peer < 0 || peer >= c->size) {
    seterr(err, len, "comm nccl: peer %d outside 0..%d", peer, c->size - 1);
    return 0;
  }
  if (bytes < 0) {
    seterr(err, len, "comm nccl: negative byte count %lld", (long long)bytes);
    return 0;
  }
  return 1;
}

static int post_p2p(bs_comm_nccl *c, int send, const void *buf, int64_t bytes, int peer, int tag, int *req, char *err,
                    size_t len) {
  if (!c || !req) {
    seterr(err, len, "comm nccl: NULL communicator or request");
    return BS_COMM_ERR;
  }
  if (!check_peer(c, peer, bytes, err, len)) return BS_COMM_ERR;
  if (!buf && bytes > 0) {
    seterr(err, len, "comm nccl: NULL buffer");
    return BS_COMM_ERR;
  }
  lock(c);
  int rc = BS_COMM_ERR;
  int s = new_slot(c, 1, err, len);
  if (s >= 0) {
    if (c->local) {
      rc = bs_nccl_local_post(c, send, buf, (void *)buf, bytes, peer, tag, s, 0, err, len);
    } else {
#ifndef BS_COMM_NCCL_LOCAL_ONLY
      rc = queue_op(c, send, (void *)buf, bytes, peer, s, 0, err, len);
#endif
    }
    /* On an error nothing references the slot any more: the request dies. */
    if (rc != BS_COMM_OK) release_slot(c, s);
    else *req = s;
  }
  unlock(c);
  return rc;
}

int bs_comm_nccl_isend(bs_comm_nccl *c, const void *buf, int64_t bytes, int peer, int tag, int *req, char *err,
                       size_t errlen) {
  return post_p2p(c, 1, buf, bytes, peer, tag, req, err, errlen);
}

int bs_comm_nccl_irecv(bs_comm_nccl *c, void *buf, int64_t bytes, int peer, int tag, int *req, char *err,
                       size_t errlen) {
  return post_p2p(c, 0, buf, bytes, peer, tag, req, err, errlen);
}

int bs_comm_nccl_sendrecv(bs_comm_nccl *c, const void *sendbuf, int64_t send_bytes, int to, void *recvbuf,
                          int64_t recv_bytes, int from, int tag, int *req, char *err, size_t errlen) {
  if (!c || !req) {
    seterr(err, errlen, "comm nccl: NULL communicator or request");
    return BS_COMM_ERR;
  }
  if (!check_peer(c, to, send_bytes, err, errlen) || !check_peer(c, from, recv_bytes, err, errlen)) return BS_COMM_ERR;
  if ((!sendbuf && send_bytes > 0) || (!recvbuf && recv_bytes > 0)) {
    seterr(err, errlen, "comm nccl: NULL buffer");
    return BS_COMM_ERR;
  }
  lock(c);
  int rc = BS_COMM_ERR;
  int s = new_slot(c, 2, err, errlen);
  if (s >= 0) {
    if (c->local) {
      rc = bs_nccl_local_post(c, 1, sendbuf, NULL, send_bytes, to, tag, s, 0, err, errlen);
      if (rc == BS_COMM_OK) rc = bs_nccl_local_post(c, 0, NULL, recvbuf, recv_bytes, from, tag, s, 1, err, errlen);
    } else {
#ifndef BS_COMM_NCCL_LOCAL_ONLY
      rc = queue_op(c, 1, (void *)sendbuf, send_bytes, to, s, 0, err, errlen);
      if (rc == BS_COMM_OK) rc = queue_op(c, 0, recvbuf, recv_bytes, from, s, 1, err, errlen);
      if (rc == BS_COMM_OK) rc = nccl_flush(c, err, errlen); /* a ring step goes out now */
#endif
    }
    if (rc != BS_COMM_OK && (!c->local || c->slots[s].unissued == 0)) {
      release_slot(c, s);
    } else {
      /* Local mode, one part still posted: keep the slot (failed) for test/wait. */
      *req = s;
      if (rc != BS_COMM_OK) c->slots[s].failed = 1;
    }
  }
  unlock(c);
  return rc;
}

int bs_comm_nccl_icoll(bs_comm_nccl *c, bs_comm_coll kind, bs_comm_red red, bs_comm_type type, bs_comm_group g,
                       const void *send, void *recv, int64_t bytes, int *req, char *err, size_t errlen) {
  if (!c || !req || !send || !recv) {
    seterr(err, errlen, "comm nccl: NULL communicator, request or buffer");
    return BS_COMM_ERR;
  }
  if (!in_group(c, g, err, errlen) || !coll_args_ok(kind, type, g, bytes, err, errlen)) return BS_COMM_ERR;
  lock(c);
  int rc = BS_COMM_ERR;
  int s = new_slot(c, 1, err, errlen);
  if (s >= 0) {
    if (c->local) {
      rc = bs_nccl_local_coll(c, kind, red, type, g, send, recv, bytes, s, err, errlen);
    } else {
#ifndef BS_COMM_NCCL_LOCAL_ONLY
      rc = nccl_coll(c, kind, red, g, send, recv, bytes, s, err, errlen);
#endif
    }
    /* On an error no collective entry references the slot any more. */
    if (rc != BS_COMM_OK) release_slot(c, s);
    else *req = s;
  }
  unlock(c);
  return rc;
}

int bs_comm_nccl_adopt_group(bs_comm_nccl *c, bs_comm_group g, const void *mpi_comm, char *err, size_t errlen) {
  if (!c || !mpi_comm || c->local) {
    seterr(err, errlen, "comm nccl: adopt_group: %s", !c || !mpi_comm ? "NULL argument" : "not in NCCL mode");
    return BS_COMM_ERR;
  }
#ifdef BS_COMM_NCCL_LOCAL_ONLY
  (void)g;
  seterr(err, errlen, "comm nccl: built without NCCL and MPI (local mode only)");
  return BS_COMM_ERR;
#else
  if (!in_group(c, g, err, errlen)) return BS_COMM_ERR;
  lock(c);
  int rc = nccl_adopt(c, g, *(const MPI_Comm *)mpi_comm, err, errlen);
  unlock(c);
  return rc;
#endif
}

int bs_comm_nccl_flush(bs_comm_nccl *c, char *err, size_t errlen) {
  if (!c) return BS_COMM_ERR;
#ifndef BS_COMM_NCCL_LOCAL_ONLY
  if (!c->local) return nccl_flush(c, err, errlen);
#endif
  (void)err;
  (void)errlen;
  return BS_COMM_OK;
}

/* With the lock held. */
static int test_locked(bs_comm_nccl *c, int req, int *done) {
  *done = 0;
  if (req < 0 || req >= c->nslot || !c->slots[req].busy) return BS_COMM_ERR;
  slot *sl = &c->slots[req];
#ifndef BS_COMM_NCCL_LOCAL_ONLY
  if (!c->local && sl->unissued > 0) {
    char err[256];
    if (nccl_flush(c, err, sizeof err)) fprintf(stderr, "%s\n", err);
  }
#endif
  if (sl->failed && sl->unissued == 0) {
    release_slot(c, req);
    return BS_COMM_ERR;
  }
  if (sl->unissued > 0) return BS_COMM_OK; /* waiting for the peer to post */
  for (int p = 0; p < sl->nev; p++) {
    cudaError_t e = cudaEventQuery(sl->ev[p]);
    if (e == cudaErrorNotReady) return BS_COMM_OK;
    if (e != cudaSuccess) {
      fprintf(stderr, "comm nccl: request %d: %s\n", req, cudaGetErrorString(e));
      release_slot(c, req);
      return BS_COMM_ERR;
    }
  }
  const int failed = sl->failed;
  release_slot(c, req);
  if (failed) return BS_COMM_ERR;
  *done = 1;
  return BS_COMM_OK;
}

int bs_comm_nccl_test(bs_comm_nccl *c, int req, int *done) {
  if (!c || !done) return BS_COMM_ERR;
  lock(c);
  int rc = test_locked(c, req, done);
  unlock(c);
  return rc;
}

int bs_comm_nccl_wait(bs_comm_nccl *c, int req, double timeout_s) {
  if (!c) return BS_COMM_ERR;
  const double deadline = bs_now_s() + timeout_s;
  for (;;) {
    int done = 0;
    int rc = bs_comm_nccl_test(c, req, &done);
    if (rc != BS_COMM_OK) return rc;
    if (done) return BS_COMM_OK;
#ifndef BS_COMM_NCCL_LOCAL_ONLY
    if (!c->local) {
      ncclResult_t as = ncclSuccess;
      if (ncclCommGetAsyncError(c->nccl, &as) == ncclSuccess && as != ncclSuccess && as != ncclInProgress) {
        fprintf(stderr, "comm nccl: rank %d: %s\n", c->rank, ncclGetErrorString(as));
        return BS_COMM_ERR;
      }
    }
#endif
    if (bs_now_s() > deadline) return BS_COMM_TIMEOUT;
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

void bs_comm_nccl_progress(bs_comm_nccl *c) {
  if (!c) return;
#ifndef BS_COMM_NCCL_LOCAL_ONLY
  if (!c->local) {
    char err[256];
    if (nccl_flush(c, err, sizeof err)) fprintf(stderr, "%s\n", err);
  }
#endif
}

int bs_comm_nccl_after(bs_comm_nccl *c, cudaStream_t compute, char *err, size_t errlen) {
  if (!c) return BS_COMM_ERR;
  lock(c);
  cudaError_t e = cudaEventRecord(c->after_ev, compute);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(c->stream, c->after_ev, 0);
  unlock(c);
  if (e != cudaSuccess) {
    seterr(err, errlen, "comm nccl: after: %s", cudaGetErrorString(e));
    return BS_COMM_ERR;
  }
  return BS_COMM_OK;
}

int bs_comm_nccl_stream_wait(bs_comm_nccl *c, int req, cudaStream_t compute, char *err, size_t errlen) {
  if (!c) return BS_COMM_ERR;
  lock(c);
  int rc = BS_COMM_OK;
  if (req < 0 || req >= c->nslot || !c->slots[req].busy) {
    seterr(err, errlen, "comm nccl: stream_wait: request %d is not in flight", req);
    rc = BS_COMM_ERR;
  } else {
#ifndef BS_COMM_NCCL_LOCAL_ONLY
    if (!c->local && c->slots[req].unissued > 0) rc = nccl_flush(c, err, errlen);
#endif
    slot *sl = &c->slots[req];
    if (rc == BS_COMM_OK && (sl->unissued > 0 || sl->failed)) {
      seterr(err, errlen, "comm nccl: stream_wait: request %d %s", req,
             sl->failed ? "failed" : "is not matched by its peer yet");
      rc = BS_COMM_ERR;
    }
    for (int p = 0; rc == BS_COMM_OK && p < sl->nev; p++) {
      cudaError_t e = cudaStreamWaitEvent(compute, sl->ev[p], 0);
      if (e != cudaSuccess) {
        seterr(err, errlen, "comm nccl: stream_wait: %s", cudaGetErrorString(e));
        rc = BS_COMM_ERR;
      }
    }
  }
  unlock(c);
  return rc;
}

void bs_comm_nccl_abort(bs_comm_nccl *c, int code) {
#ifndef BS_COMM_NCCL_LOCAL_ONLY
  if (c && !c->local) {
    if (c->nccl) (void)ncclCommAbort(c->nccl);
    MPI_Abort(c->world, code);
  }
#endif
  (void)c;
  fprintf(stderr, "comm nccl: abort with code %d\n", code);
  exit(code);
}

void bs_comm_nccl_free(bs_comm_nccl *c) {
  if (!c) return;
  if (c->stream) (void)cudaStreamSynchronize(c->stream);
  if (c->local) {
    local_world *lw = c->lw;
    pthread_mutex_lock(&lw->mu);
    /* Unmatched posts of this rank die with it. */
    lmsg **lists[2] = {&lw->sends, &lw->recvs};
    for (int l = 0; l < 2; l++)
      for (lmsg **pp = lists[l]; *pp;) {
        if ((*pp)->owner == c) {
          lmsg *m = *pp;
          *pp = m->next;
          bs_nccl_local_free_msg(m);
        } else {
          pp = &(*pp)->next;
        }
      }
    /* Collectives this rank joined but that never completed: their other
     * members' requests stay unissued (their waits time out). */
    for (lcoll **pp = &lw->colls; *pp;) {
      int mine = 0;
      for (int i = 0; i < (*pp)->g.size; i++)
        if ((*pp)->owner[i] == c) mine = 1;
      if (mine) {
        lcoll *cl = *pp;
        *pp = cl->next;
        for (int i = 0; i < cl->g.size; i++)
          if (cl->ready[i]) (void)cudaEventDestroy(cl->ready[i]);
        free(cl);
      } else {
        pp = &(*pp)->next;
      }
    }
    destroy_handle(c);
    const int last = --lw->refs == 0;
    pthread_mutex_unlock(&lw->mu);
    free(c);
    if (last) {
      (void)cudaStreamSynchronize(lw->coll_stream);
      (void)cudaStreamDestroy(lw->coll_stream);
      while (lw->colls) {
        lcoll *cl = lw->colls;
        lw->colls = cl->next;
        for (int i = 0; i < cl->g.size; i++)
          if (cl->ready[i]) (void)cudaEventDestroy(cl->ready[i]);
        free(cl);
      }
      pthread_mutex_destroy(&lw->mu);
      free(lw);
    }
    return;
  }
#ifndef BS_COMM_NCCL_LOCAL_ONLY
  for (int i = 0; i < c->ngroups; i++) {
    (void)ncclCommDestroy(c->groups[i].nccl);
    MPI_Comm_free(&c->groups[i].mpi);
  }
  if (c->nccl) (void)ncclCommDestroy(c->nccl);
  if (c->world != MPI_COMM_NULL) MPI_Comm_free(&c->world);
  free(c->queue);
#endif
  destroy_handle(c);
  free(c);
}

/* ---------------- the comm.h backend table ---------------- */

static int nc_rank(const void *self) { return bs_comm_nccl_rank(self); }
static int nc_size(const void *self) { return bs_comm_nccl_size(self); }
static int nc_pending(const void *self) { return bs_comm_nccl_pending(self); }
static int nc_isend(void *self, const void *buf, int64_t bytes, int peer, int tag, int *req, char *err, size_t errlen) {
  return bs_comm_nccl_isend(self, buf, bytes, peer, tag, req, err, errlen);
}
static int nc_irecv(void *self, void *buf, int64_t bytes, int peer, int tag, int *req, char *err, size_t errlen) {
  return bs_comm_nccl_irecv(self, buf, bytes, peer, tag, req, err, errlen);
}
static int nc_icoll(void *self, bs_comm_coll kind, bs_comm_red red, bs_comm_type type, bs_comm_group g,
                    const void *send, void *recv, int64_t bytes, int *req, char *err, size_t errlen) {
  return bs_comm_nccl_icoll(self, kind, red, type, g, send, recv, bytes, req, err, errlen);
}
static int nc_test(void *self, int req, int *done) { return bs_comm_nccl_test(self, req, done); }
static int nc_wait(void *self, int req, double timeout_s) { return bs_comm_nccl_wait(self, req, timeout_s); }
static void nc_progress(void *self) { bs_comm_nccl_progress(self); }
static void nc_abort(void *self, int code) { bs_comm_nccl_abort(self, code); }
static void nc_free(void *self) { bs_comm_nccl_free(self); }

static const bs_comm_ops nccl_ops = {
  .name = "nccl",
  .rank = nc_rank,
  .size = nc_size,
  .isend = nc_isend,
  .irecv = nc_irecv,
  .icoll = nc_icoll,
  .test = nc_test,
  .wait = nc_wait,
  .progress = nc_progress,
  .pending = nc_pending,
  .abort = nc_abort,
  .free = nc_free,
};

int bs_comm_nccl_as_comm(bs_comm_nccl *c, bs_comm **out, char *err, size_t errlen) {
  return bs_comm_wrap(&nccl_ops, c, out, err, errlen);
}
