/*
 * measure_links.c — the link microbenchmarks of `burstsim calib`, through the
 * communicator the runtime drives (comm/comm.h, Open MPI backend):
 * ping-pong and bidirectional exchange between rank 0 and a rank of its own
 * node and of another node, a ring step over all ranks, and the four
 * collectives, 8 B (1 KiB for the rest) up to 64 or 256 MiB. Rank 0 prints
 * tables shaped like nccl-tests' (size, time, algbw, busbw). Last, the per-call
 * cost of a collective met cold, as a decode step meets it (test
 * "allreduce_cold"): one small allreduce after every rank has streamed through
 * a buffer larger than its caches, timed alone; back-to-back repetitions keep
 * the library's state and the caches warm and never see that cost.
 */
#include "calib/measure.h"

#include <stdlib.h>
#include <string.h>
#include "comm/comm_mpi.h"
#include "runtime/watchdog.h"

typedef struct {
  bs_comm *comm;
  MPI_Comm mpi;
  int rank, size;
  char *sbuf, *rbuf;
  int64_t bytes;
  int test; /* 0 pingpong, 1 bidir, 2 ring, 3.. collectives */
  double timeout;
  int peer; /* pingpong, bidir: rank 0's partner */
} link_call;

enum { T_PINGPONG = 0, T_BIDIR, T_RING, T_ALLREDUCE, T_ALLGATHER, T_REDUCE_SCATTER, T_ALLTOALL, T_COUNT };
static const char *const test_names[T_COUNT] = {"pingpong",  "bidir",          "ring",    "allreduce",
                                                "allgather", "reduce_scatter", "alltoall"};

static int wait_req(link_call *l, int req) { return bs_comm_wait(l->comm, req, l->timeout) == BS_COMM_OK ? 0 : -1; }

static int link_op(void *vctx) {
  link_call *l = vctx;
  char e[160];
  int r1, r2, rc = 0;
  switch (l->test) {
  case T_PINGPONG:
    if (l->rank == 0) {
      if (bs_comm_isend(l->comm, l->sbuf, l->bytes, l->peer, 1, &r1, e, sizeof e) || wait_req(l, r1)) return -1;
      if (bs_comm_irecv(l->comm, l->rbuf, l->bytes, l->peer, 2, &r2, e, sizeof e) || wait_req(l, r2)) return -1;
    } else if (l->rank == l->peer) {
      if (bs_comm_irecv(l->comm, l->rbuf, l->bytes, 0, 1, &r2, e, sizeof e) || wait_req(l, r2)) return -1;
      if (bs_comm_isend(l->comm, l->sbuf, l->bytes, 0, 2, &r1, e, sizeof e) || wait_req(l, r1)) return -1;
    }
    return 0;
  case T_BIDIR: {
    if (l->rank != 0 && l->rank != l->peer) return 0;
    int other = l->rank == 0 ? l->peer : 0;
    if (bs_comm_irecv(l->comm, l->rbuf, l->bytes, other, 3, &r2, e, sizeof e) ||
        bs_comm_isend(l->comm, l->sbuf, l->bytes, other, 3, &r1, e, sizeof e))
      return -1;
    rc |= wait_req(l, r1);
    rc |= wait_req(l, r2);
    return rc;
  }
  case T_RING: {
    int next = (l->rank + 1) % l->size, prev = (l->rank + l->size - 1) % l->size;
    if (bs_comm_irecv(l->comm, l->rbuf, l->bytes, prev, 4, &r2, e, sizeof e) ||
        bs_comm_isend(l->comm, l->sbuf, l->bytes, next, 4, &r1, e, sizeof e))
      return -1;
    rc |= wait_req(l, r1);
    rc |= wait_req(l, r2);
    return rc;
  }
  default: {
    static const bs_comm_coll kinds[] = {BS_COMM_ALLREDUCE, BS_COMM_ALLGATHER, BS_COMM_REDUCE_SCATTER,
                                         BS_COMM_ALLTOALL};
    bs_comm_coll k = kinds[l->test - T_ALLREDUCE];
    bs_comm_group g = {0, 1, l->size};
    bs_comm_type ty = (k == BS_COMM_ALLREDUCE || k == BS_COMM_REDUCE_SCATTER) ? BS_COMM_F32 : BS_COMM_BYTES;
    if (bs_comm_icoll(l->comm, k, BS_COMM_SUM, ty, g, l->sbuf, l->rbuf, l->bytes, &r1, e, sizeof e)) return -1;
    return wait_req(l, r1);
  }
  }
}

/* nccl-tests: algbw = size / time; busbw = algbw x factor (doc/PERFORMANCE.md, nccl-tests). */
static void bandwidths(int test, int64_t bytes, int n, double t, double *algbw, double *busbw) {
  double size = (double)bytes;
  if (test == T_ALLGATHER) size = (double)bytes * n; /* nccl-tests size: the gathered buffer */
  double f = 1.0;
  if (test == T_ALLREDUCE) f = 2.0 * (n - 1) / n;
  else if (test >= T_ALLGATHER) f = (double)(n - 1) / n;
  *algbw = t > 0 ? size / t : 0;
  *busbw = *algbw * f;
}

/* Cold calls: repetitions, bytes streamed per rank before each, and the allreduce's size. */
#define COLD_REPS 9
#define COLD_EVICT_BYTES (64 << 20)
#define COLD_BYTES 4

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One allreduce of COLD_BYTES per repetition, after the caches are flushed and a barrier: the
 * slowest rank's time; the median, minimum and maximum over the repetitions into a point. */
static int measure_cold(link_call *l, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen) {
  char *evict = malloc(COLD_EVICT_BYTES);
  if (!bs_calib_all_ok(l->mpi, evict != NULL)) {
    free(evict);
    snprintf(err, errlen, "calib: out of memory for the cold-call buffer");
    return -1;
  }
  double t[COLD_REPS];
  int rc = 0;
  l->test = T_ALLREDUCE;
  l->bytes = COLD_BYTES;
  for (int rep = 0; rep < COLD_REPS && !rc; rep++) {
    memset(evict, rep + 1, COLD_EVICT_BYTES);
    MPI_Barrier(l->mpi);
    double t0 = MPI_Wtime();
    int bad = link_op(l) != 0, any = 0;
    double dt = MPI_Wtime() - t0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, l->mpi);
    MPI_Allreduce(&dt, &t[rep], 1, MPI_DOUBLE, MPI_MAX, l->mpi);
    bs_watchdog_feed();
    if (any) {
      snprintf(err, errlen, "calib: a cold %d-byte allreduce failed or timed out", COLD_BYTES);
      rc = -1;
    }
  }
  free(evict);
  if (rc) return -1;
  qsort(t, COLD_REPS, sizeof t[0], cmp_double);
  bs_calib_lpoint *p = bs_calib_add_l(d);
  if (!p) {
    snprintf(err, errlen, "calib: out of memory");
    return -1;
  }
  snprintf(p->test, sizeof p->test, "allreduce_cold");
  p->ranks = d->ranks;
  p->bytes = COLD_BYTES;
  p->t_med = t[COLD_REPS / 2];
  p->t_min = t[0];
  p->t_max = t[COLD_REPS - 1];
  p->reps = COLD_REPS;
  if (o->log)
    fprintf(o->log,
            "#\n# allreduce_cold over %d ranks (one call after %d MiB streamed per rank and a barrier)\n"
            "%14d %12.2f %12.2f %12.2f %12s %12s %5d\n",
            d->ranks, COLD_EVICT_BYTES >> 20, COLD_BYTES, p->t_med * 1e6, p->t_min * 1e6, p->t_max * 1e6, "-", "-",
            COLD_REPS),
      fflush(o->log);
  return 0;
}

int bs_calib_measure_links(MPI_Comm mpi, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen) {
  if (d->ranks < 2) return 0;
  bs_comm *comm = NULL;
  if (bs_comm_mpi_create(mpi, &comm, err, errlen)) return -1;
  bs_calib_policy pol = bs_calib_policy_of(o->quick);
  pol.max_reps = o->quick ? 9 : 21;
  int64_t max_bytes = o->quick ? (64 << 20) : (256 << 20);
  int step = o->quick ? 4 : 2;
  /* allgather receives size x bytes: keep that under the largest buffer. */
  int64_t cap = max_bytes * (d->ranks > 2 ? 1 : 2);
  char *sbuf = malloc((size_t)max_bytes), *rbuf = malloc((size_t)cap);
  int ok = sbuf && rbuf;
  if (ok) {
    memset(sbuf, 1, (size_t)max_bytes);
    memset(rbuf, 0, (size_t)cap);
  }
  if (!bs_calib_all_ok(mpi, ok)) {
    free(sbuf);
    free(rbuf);
    bs_comm_free(comm);
    snprintf(err, errlen, "calib: out of memory for %lld-byte link buffers", (long long)max_bytes);
    return -1;
  }
  link_call l = {comm, mpi, 0, d->ranks, sbuf, rbuf, 0, 0, 60.0, 1};
  MPI_Comm_rank(mpi, &l.rank);
  int rc = 0;
  /* Ping-pong and bidirectional once per link class present: rank 0 with a rank of its
   * own node (intra), then with one on another node (inter); the rest once over all ranks. */
  int runs[T_COUNT + 2], peers[T_COUNT + 2], nruns = 0;
  const char *classes[T_COUNT + 2];
  for (int test = 0; test < T_COUNT; test++) {
    if (test <= T_BIDIR) {
      if (d->peer_intra >= 0) runs[nruns] = test, peers[nruns] = d->peer_intra, classes[nruns++] = "intra";
      if (d->peer_inter >= 0) runs[nruns] = test, peers[nruns] = d->peer_inter, classes[nruns++] = "inter";
    } else {
      runs[nruns] = test, peers[nruns] = -1, classes[nruns++] = "";
    }
  }
  for (int ri = 0; ri < nruns && !rc; ri++) {
    int test = runs[ri];
    l.peer = peers[ri];
    int64_t lo = test <= T_BIDIR ? 8 : 1024;
    if (test >= T_ALLREDUCE) step = o->quick ? 16 : 4;
    char over[64];
    if (test <= T_BIDIR) snprintf(over, sizeof over, "ranks 0 and %d (%s-node)", l.peer, classes[ri]);
    else snprintf(over, sizeof over, "%d ranks on %d node(s)", d->ranks, d->nodes);
    if (o->log)
      fprintf(o->log, "#\n# %s over %s%s\n#%13s %12s %12s %12s %12s %12s %5s\n", test_names[test], over,
              test == T_PINGPONG ? " (time = one way: round trip / 2)" : "", "size(B)", "time(us)", "min(us)",
              "max(us)", "algbw(GB/s)", "busbw(GB/s)", "reps");
    for (int64_t b = lo; b <= max_bytes && !rc; b *= step) {
      int64_t bytes = b;
      if (test == T_ALLGATHER && bytes * d->ranks > cap) break;
      if ((test == T_REDUCE_SCATTER || test == T_ALLTOALL) && bytes % (4 * d->ranks)) continue;
      if ((test == T_ALLREDUCE || test == T_REDUCE_SCATTER) && bytes % 4) continue;
      l.bytes = bytes;
      l.test = test;
      bs_calib_lpoint *p = bs_calib_add_l(d);
      if (!p) {
        rc = -1;
        snprintf(err, errlen, "calib: out of memory");
        break;
      }
      snprintf(p->test, sizeof p->test, "%s", test_names[test]);
      snprintf(p->cls, sizeof p->cls, "%s", classes[ri]);
      p->ranks = test <= T_BIDIR ? 2 : d->ranks;
      p->bytes = bytes;
      if (bs_calib_time(mpi, &pol, link_op, &l, &p->t_med, &p->t_min, &p->t_max, &p->reps)) {
        snprintf(err, errlen, "calib: %s of %lld bytes failed or timed out", test_names[test], (long long)bytes);
        rc = -1;
        break;
      }
      if (test == T_PINGPONG) {
        p->t_med /= 2;
        p->t_min /= 2;
        p->t_max /= 2;
      }
      bandwidths(test, bytes, p->ranks, p->t_med, &p->algbw, &p->busbw);
      if (o->log)
        fprintf(o->log, "%14lld %12.2f %12.2f %12.2f %12.3f %12.3f %5d\n", (long long)bytes, p->t_med * 1e6,
                p->t_min * 1e6, p->t_max * 1e6, p->algbw / 1e9, p->busbw / 1e9, p->reps),
          fflush(o->log);
    }
  }
  if (!rc) rc = measure_cold(&l, o, d, err, errlen);
  free(sbuf);
  free(rbuf);
  bs_comm_free(comm);
  return rc;
}
