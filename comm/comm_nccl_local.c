/*
 * comm_nccl_local.c — the NCCL communicator's local mode (see comm_nccl.h): G
 * virtual ranks on one GPU, whose sends meet their receives by (source,
 * destination, tag) in posting order and are copied device to device on the
 * receiver's stream, and whose collectives run once every member has posted.
 * Every function here is called with the local world's mutex held.
 */
#include "comm/comm_nccl_impl.h"

/* ---- local mode: matching and copies (called with lw->mu held) --------------------- */

/* Copies a matched send into its receive on the receiver's stream; completes both parts. */
static int local_copy(lmsg *snd, lmsg *rcv, char *err, size_t len) {
  slot *ss = &snd->owner->slots[snd->slot], *rs = &rcv->owner->slots[rcv->slot];
  if (snd->bytes > rcv->bytes) {
    seterr(err, len, "comm nccl: rank %d sends %lld bytes to rank %d (tag %d), which receives %lld", snd->src,
           (long long)snd->bytes, snd->dst, snd->tag, (long long)rcv->bytes);
    ss->failed = rs->failed = 1;
    ss->unissued--;
    rs->unissued--;
    return BS_COMM_ERR;
  }
  cudaStream_t st = rcv->owner->stream;
  cudaError_t e = cudaStreamWaitEvent(st, snd->ready, 0);
  if (e == cudaSuccess && snd->bytes > 0)
    e = cudaMemcpyAsync(rcv->rbuf, snd->sbuf, (size_t)snd->bytes, cudaMemcpyDeviceToDevice, st);
  if (e == cudaSuccess) e = cudaEventRecord(ss->ev[snd->part], st);
  if (e == cudaSuccess) e = cudaEventRecord(rs->ev[rcv->part], st);
  ss->unissued--;
  rs->unissued--;
  if (e != cudaSuccess) {
    ss->failed = rs->failed = 1;
    seterr(err, len, "comm nccl: local copy rank %d -> %d: %s", snd->src, snd->dst, cudaGetErrorString(e));
    return BS_COMM_ERR;
  }
  return BS_COMM_OK;
}

static lmsg *take_match(lmsg **list, int src, int dst, int tag) {
  for (lmsg **pp = list; *pp; pp = &(*pp)->next)
    if ((*pp)->src == src && (*pp)->dst == dst && (*pp)->tag == tag) {
      lmsg *m = *pp;
      *pp = m->next;
      return m;
    }
  return NULL;
}

static void append(lmsg **list, lmsg *m) {
  m->next = NULL;
  while (*list) list = &(*list)->next;
  *list = m;
}

void bs_nccl_local_free_msg(lmsg *m) {
  if (m->ready) (void)cudaEventDestroy(m->ready); /* safe with waits still enqueued */
  free(m);
}

/* Posts one part (send or receive) of request slot s. */
int bs_nccl_local_post(bs_comm_nccl *c, int send, const void *sbuf, void *rbuf, int64_t bytes, int peer, int tag, int s,
                       int part, char *err, size_t len) {
  local_world *lw = c->lw;
  lmsg *m = calloc(1, sizeof *m);
  if (!m) {
    seterr(err, len, "comm nccl: out of memory");
    c->slots[s].failed = 1;
    return BS_COMM_ERR;
  }
  m->src = send ? c->rank : peer;
  m->dst = send ? peer : c->rank;
  m->tag = tag;
  m->sbuf = sbuf;
  m->rbuf = rbuf;
  m->bytes = bytes;
  m->owner = c;
  m->slot = s;
  m->part = part;
  if (send) {
    cudaError_t e = cudaEventCreateWithFlags(&m->ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(m->ready, c->stream);
    if (e != cudaSuccess) {
      seterr(err, len, "comm nccl: %s", cudaGetErrorString(e));
      c->slots[s].failed = 1;
      bs_nccl_local_free_msg(m);
      return BS_COMM_ERR;
    }
    lmsg *r = take_match(&lw->recvs, m->src, m->dst, tag);
    if (!r) {
      append(&lw->sends, m);
      return BS_COMM_OK;
    }
    int rc = local_copy(m, r, err, len);
    bs_nccl_local_free_msg(m);
    bs_nccl_local_free_msg(r);
    return rc;
  }
  lmsg *sm = take_match(&lw->sends, m->src, m->dst, tag);
  if (!sm) {
    append(&lw->recvs, m);
    return BS_COMM_OK;
  }
  int rc = local_copy(sm, m, err, len);
  bs_nccl_local_free_msg(sm);
  bs_nccl_local_free_msg(m);
  return rc;
}

/* Runs a collective whose members have all posted, on the shared stream. */
static int local_run_coll(local_world *lw, lcoll *cl, char *err, size_t len) {
  cudaStream_t st = lw->coll_stream;
  const int n = cl->g.size;
  cudaError_t e = cudaSuccess;
  int rc = BS_COMM_OK;
  for (int m = 0; m < n && e == cudaSuccess; m++) e = cudaStreamWaitEvent(st, cl->ready[m], 0);
  const size_t b = (size_t)cl->bytes;
  switch (cl->kind) {
  case BS_COMM_ALLREDUCE: {
    const int64_t cnt = cl->bytes / 4;
    if (e == cudaSuccess && cl->recv[0] != cl->send[0])
      e = cudaMemcpyAsync(cl->recv[0], cl->send[0], b, cudaMemcpyDeviceToDevice, st);
    for (int m = 1; m < n && e == cudaSuccess; m++)
      if (bs_cuda_reduce_f32((float *)cl->recv[0], (const float *)cl->send[m], cnt, cl->red, st))
        e = cudaErrorLaunchFailure;
    for (int m = 1; m < n && e == cudaSuccess; m++)
      e = cudaMemcpyAsync(cl->recv[m], cl->recv[0], b, cudaMemcpyDeviceToDevice, st);
    break;
  }
  case BS_COMM_ALLGATHER:
    for (int r = 0; r < n && e == cudaSuccess; r++)
      for (int m = 0; m < n && e == cudaSuccess; m++) {
        char *dst = (char *)cl->recv[r] + (size_t)m * b;
        if (dst != (const char *)cl->send[m]) e = cudaMemcpyAsync(dst, cl->send[m], b, cudaMemcpyDeviceToDevice, st);
      }
    break;
  case BS_COMM_REDUCE_SCATTER: {
    const size_t part = b / (size_t)n;
    for (int r = 0; r < n && e == cudaSuccess; r++) {
      e =
        cudaMemcpyAsync(cl->recv[r], (const char *)cl->send[0] + (size_t)r * part, part, cudaMemcpyDeviceToDevice, st);
      for (int m = 1; m < n && e == cudaSuccess; m++)
        if (bs_cuda_reduce_f32((float *)cl->recv[r], (const float *)((const char *)cl->send[m] + (size_t)r * part),
                               (int64_t)(part / 4), cl->red, st))
          e = cudaErrorLaunchFailure;
    }
    break;
  }
  case BS_COMM_ALLTOALL: {
    const size_t blk = b / (size_t)n;
    for (int r = 0; r < n && e == cudaSuccess; r++)
      for (int m = 0; m < n && e == cudaSuccess; m++)
        e = cudaMemcpyAsync((char *)cl->recv[r] + (size_t)m * blk, (const char *)cl->send[m] + (size_t)r * blk, blk,
                            cudaMemcpyDeviceToDevice, st);
    break;
  }
  }
  for (int m = 0; m < n; m++) {
    slot *sl = &cl->owner[m]->slots[cl->slot[m]];
    if (e == cudaSuccess) {
      cudaError_t re = cudaEventRecord(sl->ev[0], st);
      if (re != cudaSuccess) e = re;
    }
    sl->unissued = 0;
    if (e != cudaSuccess) sl->failed = 1;
  }
  if (e != cudaSuccess) {
    seterr(err, len, "comm nccl: local collective %d: %s", (int)cl->kind, cudaGetErrorString(e));
    rc = BS_COMM_ERR;
  }
  return rc;
}

int bs_nccl_local_coll(bs_comm_nccl *c, bs_comm_coll kind, bs_comm_red red, bs_comm_type type, bs_comm_group g,
                       const void *send, void *recv, int64_t bytes, int s, char *err, size_t len) {
  local_world *lw = c->lw;
  int64_t seq = bs_nccl_next_seq(c, g, err, len);
  if (seq < 0) return BS_COMM_ERR;
  lcoll *cl = lw->colls;
  for (; cl; cl = cl->next)
    if (cl->seq == seq && cl->g.first == g.first && cl->g.stride == g.stride && cl->g.size == g.size) break;
  if (!cl) {
    cl = calloc(1, sizeof *cl);
    if (!cl) {
      seterr(err, len, "comm nccl: out of memory");
      return BS_COMM_ERR;
    }
    cl->g = g;
    cl->seq = seq;
    cl->kind = kind;
    cl->red = red;
    cl->type = type;
    cl->bytes = bytes;
    cl->next = lw->colls;
    lw->colls = cl;
  } else if (cl->kind != kind || cl->red != red || cl->type != type || cl->bytes != bytes) {
    seterr(err, len, "comm nccl: rank %d's collective #%lld on group %d+%d*i (%d ranks) differs from its peers'",
           c->rank, (long long)seq, g.first, g.stride, g.size);
    return BS_COMM_ERR;
  }
  const int m = (c->rank - g.first) / g.stride;
  CU(cudaEventCreateWithFlags(&cl->ready[m], cudaEventDisableTiming), err, len);
  CU(cudaEventRecord(cl->ready[m], c->stream), err, len);
  cl->send[m] = send;
  cl->recv[m] = recv;
  cl->owner[m] = c;
  cl->slot[m] = s;
  if (++cl->posted < g.size) return BS_COMM_OK;
  int rc = local_run_coll(lw, cl, err, len);
  for (lcoll **pp = &lw->colls; *pp; pp = &(*pp)->next)
    if (*pp == cl) {
      *pp = cl->next;
      break;
    }
  for (int i = 0; i < g.size; i++)
    if (cl->ready[i]) (void)cudaEventDestroy(cl->ready[i]);
  free(cl);
  return rc;
}
