/*
 * timing.c — how calibration times anything (measure.h): every rank runs the
 * same call at the same time after a quiet barrier, each repetition's time is
 * the slowest rank's, and warm-up and repetitions follow one policy decided on
 * allreduced times, so every rank agrees on when to stop.
 */
#include "calib/measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/clock.h"
#include "base/vec.h"
#include "runtime/watchdog.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Waits for every rank without spinning (oversubscribed ranks must not steal the cores). */
static void quiet_barrier(MPI_Comm comm) {
  MPI_Request r;
  MPI_Ibarrier(comm, &r);
  int done = 0;
  while (!done) {
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (!done) {
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
  }
}

bs_calib_policy bs_calib_policy_of(int quick) {
  bs_calib_policy p = {1, quick ? 3 : 5, quick ? 7 : 25, quick ? 0.25 : 1.0, 0.0};
  return p;
}

int bs_calib_time(MPI_Comm comm, const bs_calib_policy *p, bs_calib_fn fn, void *ctx, double *med, double *mn,
                  double *mx, int *reps) {
  double t[64];
  int n = 0, bad = 0, rank;
  MPI_Comm_rank(comm, &rank);
  bs_test_stall(rank, "measure");
  bs_watchdog_feed(); /* each collective step below is bounded by calib's --timeout (cmd_calib arms it) */
  double w0 = bs_now_s();
  for (int w = 0; w < p->warmup; w++) bad |= fn(ctx) != 0;
  double wdt = (bs_now_s() - w0) / (p->warmup > 0 ? p->warmup : 1), wmax;
  MPI_Allreduce(&wdt, &wmax, 1, MPI_DOUBLE, MPI_MAX, comm);
  /* Short calls are repeated inside one timed repetition, so that the ranks
   * really run at the same time (the barrier releases them within ~0.2 ms). */
  int inner = 1;
  if (p->min_call_s > 0 && wmax < p->min_call_s) inner = (int)ceil(p->min_call_s / (wmax > 1e-7 ? wmax : 1e-7));
  if (inner > 4096) inner = 4096;
  double spent = 0;
  while (n < p->max_reps && n < 64) {
    quiet_barrier(comm);
    double t0 = bs_now_s();
    for (int i = 0; i < inner; i++) bad |= fn(ctx) != 0;
    double dt = (bs_now_s() - t0) / inner, dmax;
    MPI_Allreduce(&dt, &dmax, 1, MPI_DOUBLE, MPI_MAX, comm);
    t[n++] = dmax;
    bs_watchdog_feed();
    spent += dmax * inner;
    if (n >= p->min_reps && spent >= p->budget_s) break;
  }
  int anybad;
  MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, comm);
  qsort(t, (size_t)n, sizeof t[0], cmp_double);
  *med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  *mn = t[0];
  *mx = t[n - 1];
  *reps = n;
  return anybad ? -1 : 0;
}

bs_calib_kpoint *bs_calib_add_k(bs_calib_data *d) {
  bs_calib_kpoint *k = bs_vec_grow(d->k, sizeof *k, (size_t)d->nk + 1, &d->capk, 128);
  if (!k) return NULL;
  d->k = k;
  bs_calib_kpoint *p = &d->k[d->nk++];
  memset(p, 0, sizeof *p);
  return p;
}

void bs_calib_kpoint_misc(bs_calib_kpoint *k, int kernel, int d, int bf16, int64_t size) {
  k->kernel = kernel;
  k->d = d;
  k->bf16 = bf16;
  snprintf(k->series, sizeof k->series, "d%d/%s", d, bf16 ? "bf16" : "fp32");
  switch (kernel) {
  case BS_K_COPY:
    k->elems = size;
    snprintf(k->series, sizeof k->series, "bytes");
    break;
  case BS_K_GEMM:
    k->nq = k->nk = size;
    k->flops = 2.0 * (double)size * (double)size * d;
    break;
  case BS_K_ATTN_DELTA:
    k->nq = size;
    k->elems = size * d;
    k->flops = 2.0 * (double)k->elems;
    break;
  default: k->nq = size; k->elems = size * d;
  }
}

void bs_calib_kpoint_proj(bs_calib_kpoint *k, int64_t m, int64_t kin, int64_t n) {
  k->kernel = BS_K_GEMM;
  snprintf(k->series, sizeof k->series, "proj/k%lld/fp32", (long long)kin);
  k->nq = m;
  k->nk = n;
  k->d = (int)kin;
  k->flops = 2.0 * (double)m * (double)n * (double)kin;
}

bs_calib_lpoint *bs_calib_add_l(bs_calib_data *d) {
  bs_calib_lpoint *l = bs_vec_grow(d->l, sizeof *l, (size_t)d->nl + 1, &d->capl, 128);
  if (!l) return NULL;
  d->l = l;
  bs_calib_lpoint *p = &d->l[d->nl++];
  memset(p, 0, sizeof *p);
  return p;
}

int bs_calib_all_ok(MPI_Comm comm, int ok) {
  int all;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
  return all;
}
