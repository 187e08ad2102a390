/*
 * bench.c — the overlap benchmark of runtime.h: how much of a ring step's
 * K,V transfer hides behind its attention compute on real hardware, measured
 * as compute alone, communication alone and overlapped in one run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "runtime.h"
#include "runtime/compute.h"
#include "comm/comm_mpi.h"
#include "base/clock.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void progress(void *comm) { bs_comm_progress(comm); }

/* Attention of the local block, executed as a run executes it (compute.h): (head, row-tile) calls,
 * polling the communicator between them when one is given. */
static int compute_block(const attn_params *a, int64_t tile, const void *q, const void *k, const void *v, float *o,
                         float *lse, bs_comm *comm) {
  bs_compute c;
  bs_compute_bufs b;
  memset(&c, 0, sizeof c);
  memset(&b, 0, sizeof b);
  c.kernel = BS_K_ATTN_FWD;
  c.a = *a;
  b.in[0] = (void *)q;
  b.in[1] = (void *)k;
  b.in[2] = (void *)v;
  b.out[0] = o;
  b.out[1] = lse;
  bs_compute_ctx x = {bs_kernel_backend_cpu(), a->threads, tile, a->dtype == ATTN_BF16, 0,
                      comm ? progress : NULL,  comm};
  char err[160];
  return bs_compute_run(&x, &c, &b, err, sizeof err);
}

int bs_runtime_overlap_bench(const bs_config *cfg, MPI_Comm world, const bs_runtime_opts *opts, int reps,
                             bs_overlap_result *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  int G, rank;
  MPI_Comm_size(world, &G);
  MPI_Comm_rank(world, &rank);
  if (G < 2) {
    snprintf(err, errlen, "parallel.gpus: the overlap benchmark needs at least 2 ranks");
    return BS_RUN_EINPUT;
  }
  if (cfg->work.seq_len % G) {
    snprintf(err, errlen, "parallel.gpus: %d does not divide seq_len %lld", G, (long long)cfg->work.seq_len);
    return BS_RUN_EINPUT;
  }
  if (cfg->model.dtype != BS_FP32 && cfg->model.dtype != BS_BF16) {
    snprintf(err, errlen, "model.dtype: %s is not supported by the CPU runtime", bs_dtype_name(cfg->model.dtype));
    return BS_RUN_EINPUT;
  }
  int64_t n = cfg->work.seq_len / G, B = cfg->work.batch, Z = cfg->model.heads, Zk = cfg->model.kv_heads,
          d = cfg->model.head_dim;
  size_t es = cfg->model.dtype == BS_FP32 ? 4 : 2;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = opts->threads > 0 ? opts->threads : (int)(cores / G > 0 ? cores / G : 1);
  int64_t tile = opts->tile_rows > 0 ? opts->tile_rows : BS_COMPUTE_TILE_ROWS;
  attn_params a;
  memset(&a, 0, sizeof a);
  a.B = (int)B;
  a.Zq = (int)Z;
  a.Zkv = (int)Zk;
  a.Nq = n;
  a.Nk = n;
  a.d = (int)d;
  a.scale = (float)(1.0 / sqrt((double)d));
  a.mask.q_stride = a.mask.k_stride = 1;
  a.dtype = es == 4 ? ATTN_FP32 : ATTN_BF16;
  a.threads = threads;
  int64_t qe = B * Z * n * d, ke = B * Zk * n * d, kvb = ke * (int64_t)es;
  char *q = calloc((size_t)qe, es), *k = calloc((size_t)ke, es), *v = calloc((size_t)ke, es);
  char *kr = calloc((size_t)ke, es), *vr = calloc((size_t)ke, es);
  float *o = calloc((size_t)qe, sizeof(float)), *lse = calloc((size_t)(B * Z * n), sizeof(float));
  bs_comm *comm = NULL;
  int rc = BS_RUN_OK;
  if (!q || !k || !v || !kr || !vr || !o || !lse) {
    snprintf(err, errlen, "out of memory");
    rc = BS_RUN_EFATAL;
    goto out;
  }
  for (int64_t i = 0; i < qe; i++) {
    float x = (float)sin(0.37 * (double)i + rank);
    if (es == 4) ((float *)q)[i] = x;
    else ((uint16_t *)q)[i] = attn_f32_to_bf16(x);
  }
  for (int64_t i = 0; i < ke; i++) {
    float x = (float)cos(0.11 * (double)i), y = (float)sin(0.23 * (double)i);
    if (es == 4) {
      ((float *)k)[i] = x;
      ((float *)v)[i] = y;
    } else {
      ((uint16_t *)k)[i] = attn_f32_to_bf16(x);
      ((uint16_t *)v)[i] = attn_f32_to_bf16(y);
    }
  }
  if (bs_comm_mpi_create(world, &comm, err, errlen)) {
    rc = BS_RUN_EFATAL;
    goto out;
  }
  int next = (rank + 1) % G, prev = (rank - 1 + G) % G;
  double timeout = opts->timeout_s > 0 ? opts->timeout_s : 120.0;
  /* a first untimed compute sizes the repetitions (about 3 s per mode, at least 3) */
  double t0 = bs_now_s();
  if (compute_block(&a, tile, q, k, v, o, lse, NULL)) {
    snprintf(err, errlen, "attn_fwd failed");
    rc = BS_RUN_EFATAL;
    goto out;
  }
  double tc = bs_now_s() - t0, tmax;
  MPI_Allreduce(&tc, &tmax, 1, MPI_DOUBLE, MPI_MAX, world);
  if (reps <= 0) reps = tmax > 0 ? (int)(3.0 / tmax) : 1000;
  if (reps < 3) reps = 3;
  if (reps > 1000) reps = 1000;
  double *ts[3];
  for (int m = 0; m < 3; m++) ts[m] = calloc((size_t)reps, sizeof(double));
  for (int r = 0; r < reps && rc == BS_RUN_OK; r++)
    for (int m = 0; m < 3 && rc == BS_RUN_OK; m++) { /* 0 compute, 1 comm, 2 overlapped: interleaved against drift */
      int req[4];
      MPI_Barrier(world);
      t0 = bs_now_s();
      if (m >= 1) {
        if (bs_comm_irecv(comm, kr, kvb, prev, 1, &req[0], err, errlen) ||
            bs_comm_irecv(comm, vr, kvb, prev, 2, &req[1], err, errlen) ||
            bs_comm_isend(comm, k, kvb, next, 1, &req[2], err, errlen) ||
            bs_comm_isend(comm, v, kvb, next, 2, &req[3], err, errlen)) {
          rc = BS_RUN_EFATAL;
          break;
        }
      }
      if (m != 1 && compute_block(&a, tile, q, k, v, o, lse, m == 2 ? comm : NULL)) {
        snprintf(err, errlen, "attn_fwd failed");
        rc = BS_RUN_EFATAL;
        break;
      }
      if (m >= 1)
        for (int j = 0; j < 4; j++)
          if (bs_comm_wait(comm, req[j], timeout) != BS_COMM_OK) {
            snprintf(err, errlen, "rank %d: the benchmark exchange did not complete within %.0f s", rank, timeout);
            rc = BS_RUN_EFATAL;
            break;
          }
      ts[m][r] = bs_now_s() - t0;
    }
  if (rc == BS_RUN_OK) {
    double med[3], mx[3];
    for (int m = 0; m < 3; m++) {
      qsort(ts[m], (size_t)reps, sizeof(double), cmp_d);
      med[m] = ts[m][reps / 2];
    }
    MPI_Allreduce(med, mx, 3, MPI_DOUBLE, MPI_MAX, world);
    out->block_tokens = n;
    out->bytes_per_step = 2 * kvb;
    out->reps = reps;
    out->threads = threads;
    out->compute_s = mx[0];
    out->comm_s = mx[1];
    out->overlap_s = mx[2];
    out->ratio = mx[2] / (mx[0] > mx[1] ? mx[0] : mx[1]);
  }
  for (int m = 0; m < 3; m++) free(ts[m]);
out:
  if (comm && rc != BS_RUN_EFATAL) bs_comm_free(comm);
  free(q);
  free(k);
  free(v);
  free(kr);
  free(vr);
  free(o);
  free(lse);
  return rc;
}
