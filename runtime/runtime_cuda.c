/*
 * runtime_cuda.c — the GPU side of a real run (runtime_cuda.h): picks this
 * rank's device from its rank on the node (runtime/devplan.h's rule), and
 * fills the runtime's device table (runtime/device.h) with device memory,
 * copies, timing events on the compute stream (the default stream, where the
 * CUDA backend table enqueues every kernel) and the NCCL communicator with
 * the plan's group communicators made up front, in devplan.h's order.
 */
#include "runtime/runtime_cuda.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm/comm_nccl.h"
#include "kernels/cuda/attn_cuda.h"

typedef struct {
  bs_rt_device table;
  cudaEvent_t *ev;
  int nev, cap;
} cuda_rt;

static void *rt_alloc(void *self, size_t bytes) {
  (void)self;
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  if (cudaMemset(p, 0, bytes) != cudaSuccess) {
    cudaFree(p);
    return NULL;
  }
  return p;
}

static void rt_free(void *self, void *p) {
  (void)self;
  if (p) cudaFree(p);
}

static int rt_upload(void *self, void *dst, const void *src, size_t bytes) {
  (void)self;
  return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
}

static int rt_download(void *self, void *dst, const void *src, size_t bytes) {
  (void)self;
  return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
}

static int rt_sync(void *self) {
  (void)self;
  cudaError_t e = cudaStreamSynchronize(0);
  if (e != cudaSuccess) fprintf(stderr, "burstsim cuda: compute stream: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : -1;
}

static int rt_mark(void *self) {
  cuda_rt *r = self;
  if (r->nev == r->cap) {
    int nc = r->cap ? 2 * r->cap : 256;
    cudaEvent_t *ne = realloc(r->ev, (size_t)nc * sizeof *ne);
    if (!ne) return -1;
    r->ev = ne;
    for (int i = r->cap; i < nc; i++)
      if (cudaEventCreate(&r->ev[i]) != cudaSuccess) {
        r->cap = i;
        return -1;
      }
    r->cap = nc;
  }
  if (cudaEventRecord(r->ev[r->nev], 0) != cudaSuccess) return -1;
  return r->nev++;
}

static int rt_mark_ms(void *self, int i, double *ms) {
  cuda_rt *r = self;
  float f = 0;
  if (i < 0 || i >= r->nev || cudaEventElapsedTime(&f, r->ev[0], r->ev[i]) != cudaSuccess) return -1;
  *ms = f;
  return 0;
}

static void rt_marks_reset(void *self) { ((cuda_rt *)self)->nev = 0; }

static int rt_comm_create(void *self, const void *mpi_world, const bs_dev_groups *groups, bs_comm **out, char *err,
                          size_t errlen) {
  cuda_rt *r = self;
  bs_comm_nccl *c = NULL;
  *out = NULL;
  if (bs_comm_nccl_create(mpi_world, r->table.device, &c, err, errlen)) return -1;
  MPI_Comm world = *(const MPI_Comm *)mpi_world;
  int rank = bs_comm_nccl_rank(c), rc = 0;
  for (int layer = 0; !rc && layer < groups->nlayers; layer++) {
    int key = 0, colour = bs_dev_group_colour(groups, layer, rank, &key);
    MPI_Comm mc = MPI_COMM_NULL;
    if (MPI_Comm_split(world, colour < 0 ? MPI_UNDEFINED : colour, key, &mc) != MPI_SUCCESS) {
      snprintf(err, errlen, "MPI_Comm_split of group layer %d failed", layer);
      rc = -1;
      break;
    }
    if (colour < 0) continue;
    const bs_dev_group *g = NULL;
    for (int i = 0, seen = 0; i < groups->n && !g; i++)
      if (groups->groups[i].layer == layer && seen++ == colour) g = &groups->groups[i];
    bs_comm_group cg = {g->g.first, g->g.stride, g->g.size};
    rc = bs_comm_nccl_adopt_group(c, cg, &mc, err, errlen);
    MPI_Comm_free(&mc);
  }
  if (rc) {
    bs_comm_nccl_free(c);
    return -1;
  }
  return bs_comm_nccl_as_comm(c, out, err, errlen) ? -1 : 0;
}

static int rt_comm_after(void *self, bs_comm *c, char *err, size_t errlen) {
  (void)self;
  return bs_comm_nccl_after(bs_comm_self(c), 0, err, errlen) ? -1 : 0;
}

static int rt_stream_wait(void *self, bs_comm *c, int req, char *err, size_t errlen) {
  (void)self;
  return bs_comm_nccl_stream_wait(bs_comm_self(c), req, 0, err, errlen) ? -1 : 0;
}

static int64_t rt_mem_used(void *self) {
  (void)self;
  size_t free_b = 0, total = 0;
  if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) return -1;
  return (int64_t)(total - free_b);
}

static int64_t rt_mem_total(void *self) {
  (void)self;
  size_t free_b = 0, total = 0;
  if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) return -1;
  return (int64_t)total;
}

int bs_cuda_rt_open(const void *mpi_world, bs_xport_kind x, bs_rt_device **out, char *err, size_t errlen) {
  *out = NULL;
  char msg[256] = "";
  int ndev = 0, bad = 0;
  /* a rank without a device still takes part in the collectives below, so that none waits for it */
  if (attn_cuda_device_count(&ndev, msg, sizeof msg) != ATTN_OK || ndev < 1) {
    snprintf(err, errlen, "no CUDA device on this machine (%s)", msg[0] ? msg : "0 devices");
    bad = BS_CUDA_RT_NODEV;
  }
  MPI_Comm world = *(const MPI_Comm *)mpi_world, node = MPI_COMM_NULL;
  int lrank = 0, lsize = 1, wrank = 0;
  MPI_Comm_rank(world, &wrank);
  if (MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, wrank, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    if (!bad) snprintf(err, errlen, "MPI_Comm_split_type (the ranks of this node) failed");
    return bad ? bad : BS_CUDA_RT_EINPUT;
  }
  MPI_Comm_rank(node, &lrank);
  MPI_Comm_size(node, &lsize);
  int device = -1;
  cudaError_t e = cudaSuccess;
  char host[MPI_MAX_PROCESSOR_NAME] = "", bus[32] = "?", where[192];
  int hl = 0;
  MPI_Get_processor_name(host, &hl);
  if (!bad && bs_dev_pick(lrank, ndev, &device, err, errlen)) bad = BS_CUDA_RT_EINPUT;
  if (!bad) e = cudaSetDevice(device);
  if (!bad && e == cudaSuccess) e = cudaFree(NULL); /* creates the context now, outside any timed region */
  if (!bad && e == cudaSuccess) e = cudaDeviceGetPCIBusId(bus, (int)sizeof bus, device);
  if (!bad && e != cudaSuccess) {
    snprintf(err, errlen, "CUDA device %d: %s", device, cudaGetErrorString(e));
    bad = BS_CUDA_RT_NODEV;
  }
  /* which ranks of the node hold the same physical device (collective over the node: every rank) */
  snprintf(where, sizeof where, "%.120s/%.31s", host, bus);
  char *ids = calloc((size_t)lsize, sizeof where);
  if (ids) MPI_Allgather(where, (int)sizeof where, MPI_CHAR, ids, (int)sizeof where, MPI_CHAR, node);
  MPI_Comm_free(&node);
  int sharing = ids ? bs_dev_sharing(ids, sizeof where, lsize, lrank) : 1;
  free(ids);
  if (!bad && bs_dev_check_sharing(x, sharing, where, err, errlen)) bad = BS_CUDA_RT_EINPUT;
  if (bad) return bad;
  cuda_rt *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(err, errlen, "out of memory");
    return BS_CUDA_RT_EINPUT;
  }
  snprintf(r->table.where, sizeof r->table.where, "%s", where);
  int shared = sharing > 1;
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
    snprintf(r->table.name, sizeof r->table.name, "%.127s", prop.name);
  bs_rt_device *t = &r->table;
  t->be = bs_kernel_backend_cuda();
  t->xport = x;
  t->device = device;
  t->shared = shared;
  t->self = r;
  t->alloc = rt_alloc;
  t->free = rt_free;
  t->upload = rt_upload;
  t->download = rt_download;
  t->sync = rt_sync;
  t->mark = rt_mark;
  t->mark_ms = rt_mark_ms;
  t->marks_reset = rt_marks_reset;
  t->comm_create = rt_comm_create;
  t->comm_after = rt_comm_after;
  t->stream_wait = rt_stream_wait;
  t->mem_used = rt_mem_used;
  t->mem_total = rt_mem_total;
  *out = t;
  return 0;
}

int bs_cuda_rt_device_count(int *n, char *msg, size_t len) { return attn_cuda_device_count(n, msg, len); }

void bs_cuda_rt_close(bs_rt_device *d) {
  if (!d) return;
  cuda_rt *r = d->self;
  (void)cudaDeviceSynchronize();
  for (int i = 0; i < r->cap; i++) cudaEventDestroy(r->ev[i]);
  free(r->ev);
  free(r);
}
