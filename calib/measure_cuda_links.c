/*
 * measure_cuda_links.c — the NCCL link benchmarks of `burstsim calib
 * --backend cuda` (measure_cuda.h): the communicator a GPU run uses
 * (runtime/device.h's comm_create), on device buffers: ping-pong and
 * bidirectional exchange of rank 0 with a rank of its node (and of another
 * node), a ring step of all ranks, and allreduce, allgather, reduce-scatter
 * and all-to-all over all ranks, 8 B (1 KiB for the rest) to 256 MiB. The
 * points go in the same lists, under the same test names, as the host
 * benchmarks' (measure_links.c), with nccl-tests' size, time, algbw and busbw.
 */
#include "calib/measure_cuda.h"

#include <stdlib.h>
#include <string.h>
#include "base/fill.h"

enum { L_PINGPONG = 0, L_BIDIR, L_RING, L_ALLREDUCE, L_ALLGATHER, L_REDUCE_SCATTER, L_ALLTOALL, L_COUNT };
static const char *const lnames[L_COUNT] = {"pingpong",  "bidir",          "ring",    "allreduce",
                                            "allgather", "reduce_scatter", "alltoall"};

typedef struct {
  bs_comm *comm;
  int rank, size, test, peer;
  void *sbuf, *rbuf;
  int64_t bytes;
} nccl_call;

static int done(nccl_call *l, int req) { return bs_comm_wait(l->comm, req, 60.0) == BS_COMM_OK ? 0 : -1; }

static int nccl_op(void *vctx) {
  nccl_call *l = vctx;
  char e[200];
  int r1 = -1, r2 = -1, rc = 0;
  switch (l->test) {
  case L_PINGPONG:
    if (l->rank == 0) {
      if (bs_comm_isend(l->comm, l->sbuf, l->bytes, l->peer, 1, &r1, e, sizeof e) || done(l, r1)) return -1;
      if (bs_comm_irecv(l->comm, l->rbuf, l->bytes, l->peer, 2, &r2, e, sizeof e) || done(l, r2)) return -1;
    } else if (l->rank == l->peer) {
      if (bs_comm_irecv(l->comm, l->rbuf, l->bytes, 0, 1, &r2, e, sizeof e) || done(l, r2)) return -1;
      if (bs_comm_isend(l->comm, l->sbuf, l->bytes, 0, 2, &r1, e, sizeof e) || done(l, r1)) return -1;
    }
    return 0;
  case L_BIDIR:
  case L_RING: {
    int to, from;
    if (l->test == L_BIDIR) {
      if (l->rank != 0 && l->rank != l->peer) return 0;
      to = from = l->rank == 0 ? l->peer : 0;
    } else {
      to = (l->rank + 1) % l->size;
      from = (l->rank + l->size - 1) % l->size;
    }
    /* posted together: NCCL issues them as one group at the first wait */
    if (bs_comm_irecv(l->comm, l->rbuf, l->bytes, from, 3, &r2, e, sizeof e) ||
        bs_comm_isend(l->comm, l->sbuf, l->bytes, to, 3, &r1, e, sizeof e))
      return -1;
    rc |= done(l, r1);
    rc |= done(l, r2);
    return rc;
  }
  default: {
    static const bs_comm_coll kinds[] = {BS_COMM_ALLREDUCE, BS_COMM_ALLGATHER, BS_COMM_REDUCE_SCATTER,
                                         BS_COMM_ALLTOALL};
    bs_comm_coll k = kinds[l->test - L_ALLREDUCE];
    bs_comm_group g = {0, 1, l->size};
    bs_comm_type ty = (k == BS_COMM_ALLREDUCE || k == BS_COMM_REDUCE_SCATTER) ? BS_COMM_F32 : BS_COMM_BYTES;
    if (bs_comm_icoll(l->comm, k, BS_COMM_SUM, ty, g, l->sbuf, l->rbuf, l->bytes, &r1, e, sizeof e)) return -1;
    return done(l, r1);
  }
  }
}

/* nccl-tests (doc/PERFORMANCE.md of NVIDIA/nccl-tests): algbw = size / time, busbw = algbw x factor. */
static void bandwidths(int test, int64_t bytes, int n, double t, double *algbw, double *busbw) {
  double size = test == L_ALLGATHER ? (double)bytes * n : (double)bytes, f = 1.0;
  if (test == L_ALLREDUCE) f = 2.0 * (n - 1) / n;
  else if (test >= L_ALLGATHER) f = (double)(n - 1) / n;
  *algbw = t > 0 ? size / t : 0;
  *busbw = *algbw * f;
}

static void *dev_ones(const bs_rt_device *dev, int64_t bytes) {
  float *h = malloc((size_t)bytes);
  void *d = h ? dev->alloc(dev->self, (size_t)bytes) : NULL;
  if (h) bs_fill_counter(h, (size_t)bytes / sizeof(float), 41);
  if (d && dev->upload(dev->self, d, h, (size_t)bytes)) {
    dev->free(dev->self, d);
    d = NULL;
  }
  free(h);
  return d;
}

int bs_calib_measure_links_nccl(MPI_Comm mpi, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen) {
  const bs_rt_device *dev = o->device;
  bs_dev_groups none = {0};
  bs_comm *comm = NULL;
  int made = dev->comm_create(dev->self, &mpi, &none, &comm, err, errlen) == 0;
  if (!bs_calib_all_ok(mpi, made)) {
    if (made) bs_comm_free(comm);
    else if (!err[0]) snprintf(err, errlen, "calib: NCCL set-up failed on some rank");
    return -1;
  }
  int64_t max_bytes = o->quick ? (64 << 20) : (256 << 20), cap = max_bytes * (d->ranks > 2 ? 1 : 2);
  void *sbuf = dev_ones(dev, max_bytes), *rbuf = dev->alloc(dev->self, (size_t)cap);
  if (!bs_calib_all_ok(mpi, sbuf && rbuf)) {
    dev->free(dev->self, sbuf);
    dev->free(dev->self, rbuf);
    bs_comm_free(comm);
    snprintf(err, errlen, "calib: no device memory for %lld-byte link buffers", (long long)max_bytes);
    return -1;
  }
  bs_calib_policy pol = bs_calib_policy_of(o->quick);
  pol.max_reps = o->quick ? 9 : 21;
  nccl_call l = {comm, 0, d->ranks, 0, 1, sbuf, rbuf, 0};
  MPI_Comm_rank(mpi, &l.rank);
  int rc = 0;
  for (int test = 0; test < L_COUNT && !rc; test++)
    for (int cls = 0; cls < 2 && !rc; cls++) {
      int peer = cls == 0 ? d->peer_intra : d->peer_inter;
      if (test <= L_BIDIR && peer < 0) continue;
      if (test > L_BIDIR && cls == 1) continue;
      l.peer = peer;
      l.test = test;
      const char *cname = test <= L_BIDIR ? (cls == 0 ? "intra" : "inter") : "";
      if (o->log)
        fprintf(
          o->log, "#\n# NCCL %s over %s%s\n#%13s %12s %12s %12s %12s %12s %5s\n", lnames[test],
          test <= L_BIDIR ? (cls == 0 ? "rank 0 and its node's peer" : "rank 0 and another node's rank") : "all ranks",
          test == L_PINGPONG ? " (time = one way: round trip / 2)" : "", "size(B)", "time(us)", "min(us)", "max(us)",
          "algbw(GB/s)", "busbw(GB/s)", "reps");
      int step = test >= L_ALLREDUCE ? (o->quick ? 16 : 4) : (o->quick ? 4 : 2);
      for (int64_t b = test <= L_BIDIR ? 8 : 1024; b <= max_bytes && !rc; b *= step) {
        if (test == L_ALLGATHER && b * d->ranks > cap) break;
        if ((test == L_REDUCE_SCATTER || test == L_ALLTOALL) && b % (4 * d->ranks)) continue;
        if ((test == L_ALLREDUCE || test == L_REDUCE_SCATTER) && b % 4) continue;
        l.bytes = b;
        bs_calib_lpoint *p = bs_calib_add_l(d);
        if (!p) {
          snprintf(err, errlen, "calib: out of memory");
          rc = -1;
          break;
        }
        snprintf(p->test, sizeof p->test, "%s", lnames[test]);
        snprintf(p->cls, sizeof p->cls, "%s", cname);
        p->ranks = test <= L_BIDIR ? 2 : d->ranks;
        p->bytes = b;
        if (bs_calib_time(mpi, &pol, nccl_op, &l, &p->t_med, &p->t_min, &p->t_max, &p->reps)) {
          snprintf(err, errlen, "calib: NCCL %s of %lld bytes failed or timed out", lnames[test], (long long)b);
          rc = -1;
          break;
        }
        if (test == L_PINGPONG) { /* one way */
          p->t_med /= 2;
          p->t_min /= 2;
          p->t_max /= 2;
        }
        bandwidths(test, b, p->ranks, p->t_med, &p->algbw, &p->busbw);
        if (o->log)
          fprintf(o->log, "%14lld %12.2f %12.2f %12.2f %12.2f %12.2f %5d\n", (long long)b, p->t_med * 1e6,
                  p->t_min * 1e6, p->t_max * 1e6, p->algbw / 1e9, p->busbw / 1e9, p->reps);
      }
    }
  dev->free(dev->self, sbuf);
  dev->free(dev->self, rbuf);
  bs_comm_free(comm);
  return rc;
}
