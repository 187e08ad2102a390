/*
 * bench_kernels.c — measures the CPU attention kernels for `burstsim bench
 * kernels`: the fused forward and backward (kernels/cpu), the unfused
 * baseline (OpenBLAS sgemm + vector softmax + sgemm), and sgemm alone on the
 * score shape, each as GFLOP/s and as a fraction of this machine's FP32 FMA
 * peak, which is measured in the same run by a register-only FMA loop.
 *
 * Times are the best of the repetitions (others share these cores; the best
 * run is the least disturbed). The peak of each row is measured just before
 * and just after it (the better of the two), so that both see the same load
 * from other users of the machine. Extra memory is the growth of the peak RSS
 * (VmHWM, reset through /proc/self/clear_refs) during one call.
 */
#include "calib/bench_kernels.h"
#include <cblas.h>
#include <malloc.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/fill.h"
#include "kernels/attn.h"

double bs_bench_flops(const char *kernel, int B, int Z, int64_t n, int d, int causal) {
  double f = 4.0 * B * Z * (double)n * (double)n * d;
  if (!strcmp(kernel, "sgemm")) return 2.0 * B * Z * (double)n * (double)n * d;
  if (causal) f *= 0.5;
  if (!strcmp(kernel, "bwd")) f *= 2.5;
  return f;
}

/* ------------------------------------------------------------ FMA peak */

#define FMA_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2,fma"))) static double fma_loop_avx2(long iters, double *flops) {
  const __m256 m = _mm256_set1_ps(0.99999994f), c = _mm256_set1_ps(1e-7f);
#define DECL(i) __m256 a##i = _mm256_set1_ps(1.0f + (i)*1e-3f);
  FMA_CHAINS(DECL)
#undef DECL
  for (long it = 0; it < iters; it++) {
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
    FMA_CHAINS(STEP)
#undef STEP
  }
  __m256 s = _mm256_setzero_ps();
#define SUM(i) s = _mm256_add_ps(s, a##i);
  FMA_CHAINS(SUM)
#undef SUM
  float out[8];
  _mm256_storeu_ps(out, s);
  *flops = (double)iters * 12 * 8 * 2;
  return out[0];
}

__attribute__((target("avx512f"))) static double fma_loop_avx512(long iters, double *flops) {
  const __m512 m = _mm512_set1_ps(0.99999994f), c = _mm512_set1_ps(1e-7f);
#define DECL(i) __m512 a##i = _mm512_set1_ps(1.0f + (i)*1e-3f);
  FMA_CHAINS(DECL)
#undef DECL
  for (long it = 0; it < iters; it++) {
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
    FMA_CHAINS(STEP)
#undef STEP
  }
  __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, a##i);
  FMA_CHAINS(SUM)
#undef SUM
  *flops = (double)iters * 12 * 16 * 2;
  return _mm512_reduce_add_ps(s);
}
#endif

static double fma_loop_scalar(long iters, double *flops) {
  float a[12];
  for (int i = 0; i < 12; i++) a[i] = 1.0f + i * 1e-3f;
  for (long it = 0; it < iters; it++)
    for (int i = 0; i < 12; i++) a[i] = fmaf(a[i], 0.99999994f, 1e-7f);
  float s = 0;
  for (int i = 0; i < 12; i++) s += a[i];
  *flops = (double)iters * 12 * 2;
  return s;
}

/* Best FMA rate over `reps` runs of `iters` iterations on every thread. */
static double fma_peak(int threads, const char **isa, long iters, int reps) {
  int nt = threads > 0 ? threads : omp_get_max_threads();
  double (*loop)(long, double *) = fma_loop_scalar;
  const char *name = "scalar";
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    loop = fma_loop_avx512;
    name = "avx512";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    loop = fma_loop_avx2;
    name = "avx2";
  }
#endif
  if (isa) *isa = name;
  double best = 0, sink = 0;
  for (int rep = 0; rep < reps; rep++) {
    double total = 0;
    double t0 = omp_get_wtime();
#pragma omp parallel num_threads(nt) reduction(+ : total, sink)
    {
      double f;
      sink += loop(iters, &f);
      total += f;
    }
    double dt = omp_get_wtime() - t0;
    if (total / dt > best) best = total / dt;
  }
  if (sink == 12345.678) fprintf(stderr, "%g\n", sink); /* keeps the loops alive */
  return best / 1e9;
}

double bs_bench_fma_peak(int threads, const char **isa) { return fma_peak(threads, isa, 20000000, 5); }

/* ----------------------------------------------------------------- memory */

static int64_t status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int64_t v = -1;
  size_t kl = strlen(key);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, key, kl) && line[kl] == ':') {
      v = strtoll(line + kl + 1, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

/* Resets the peak RSS to the current RSS; returns the current RSS in bytes, -1 if unsupported. */
static int64_t rss_reset(void) {
  malloc_trim(0);
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f) return -1;
  int ok = fputs("5", f) >= 0;
  if (fclose(f) != 0 || !ok) return -1;
  int64_t kb = status_kb("VmRSS");
  return kb < 0 ? -1 : kb * 1024;
}

static int64_t rss_growth(int64_t base) {
  if (base < 0) return -1;
  int64_t hwm = status_kb("VmHWM");
  if (hwm < 0) return -1;
  int64_t g = hwm * 1024 - base;
  return g > 0 ? g : 0;
}

/* -------------------------------------------------------------- the runs */

typedef struct {
  attn_params p;
  size_t nq, nk;
  float *q, *k, *v, *o, *lse, *dout, *dq, *dk, *dv, *delta;
} bench_bufs;

/* base/fill.h's counter fill, over the OpenMP threads. */
static void fill_random(float *x, size_t n, uint64_t seed) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) x[i] = bs_fill_at(seed, i);
}

static void bufs_free(bench_bufs *b) {
  free(b->q);
  free(b->k);
  free(b->v);
  free(b->o);
  free(b->lse);
  free(b->dout);
  free(b->dq);
  free(b->dk);
  free(b->dv);
  free(b->delta);
  memset(b, 0, sizeof *b);
}

static int bufs_alloc(bench_bufs *b, int Z, int64_t n, int d, int threads) {
  memset(b, 0, sizeof *b);
  b->p = attn_params_make(1, Z, Z, n, n, d);
  b->p.threads = threads;
  b->nq = (size_t)Z * n * d;
  b->nk = b->nq;
  size_t rows = (size_t)Z * n;
  b->q = malloc(b->nq * 4);
  b->k = malloc(b->nk * 4);
  b->v = malloc(b->nk * 4);
  b->o = malloc(b->nq * 4);
  b->dout = malloc(b->nq * 4);
  b->dq = calloc(b->nq, 4);
  b->dk = calloc(b->nk, 4);
  b->dv = calloc(b->nk, 4);
  b->lse = calloc(rows, 4);
  b->delta = calloc(rows, 4);
  if (!b->q || !b->k || !b->v || !b->o || !b->dout || !b->dq || !b->dk || !b->dv || !b->lse || !b->delta) {
    bufs_free(b);
    return -1;
  }
  fill_random(b->q, b->nq, 1);
  fill_random(b->k, b->nk, 2);
  fill_random(b->v, b->nk, 3);
  fill_random(b->dout, b->nq, 4);
  /* Touch every output now, so that the RSS growth of a call is its own memory. */
  memset(b->o, 0, b->nq * 4);
  memset(b->dq, 0, b->nq * 4);
  memset(b->dk, 0, b->nk * 4);
  memset(b->dv, 0, b->nk * 4);
  memset(b->lse, 0, rows * 4);
  memset(b->delta, 0, rows * 4);
  return 0;
}

enum { K_FWD, K_BWD, K_UNFUSED, K_SGEMM };
static const char *const kernel_names[] = {"fwd", "bwd", "unfused_fwd", "sgemm"};

static int call_kernel(int kind, bench_bufs *b, float *ws) {
  attn_params *p = &b->p;
  switch (kind) {
  case K_FWD: return attn_fwd(p, b->q, b->k, b->v, b->o, b->lse, 0);
  case K_BWD: return attn_bwd(p, b->q, b->k, b->v, NULL, b->dout, b->lse, b->delta, b->dq, b->dk, b->dv);
  case K_UNFUSED: return attn_fwd_unfused(p, b->q, b->k, b->v, b->o, b->lse, 0, ws);
  default: {
    /* The score GEMM of every head: S = Q K^T, n x n x d. */
    int n = (int)p->Nq, d = p->d;
    for (int h = 0; h < p->Zq; h++)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, d, 1.0f, b->q + (size_t)h * n * d, d,
                  b->k + (size_t)h * n * d, d, 0.0f, ws, n);
    return 0;
  }
  }
}

/* Times one kernel on b: rss from the first call, then the best of repetitions. */
static int bench_one(int kind, bench_bufs *b, double budget_s, bs_bench_row *row, char *err, size_t errlen) {
  float *ws = NULL;
  int blas_threads = openblas_get_num_threads();
  if (kind == K_SGEMM) {
    ws = malloc((size_t)b->p.Nq * b->p.Nk * sizeof(float));
    if (!ws) {
      snprintf(err, errlen, "bench: out of memory for the %lld^2 score block", (long long)b->p.Nq);
      return -1;
    }
    openblas_set_num_threads(b->p.threads > 0 ? b->p.threads : omp_get_max_threads());
  }
  int64_t base = rss_reset();
  double t0 = omp_get_wtime();
  int rc = call_kernel(kind, b, ws);
  double best = omp_get_wtime() - t0, spent = best;
  row->rss_bytes = rss_growth(base);
  for (int rep = 1; rc == 0 && (rep < 3 || spent < budget_s) && spent + best < budget_s * 2; rep++) {
    t0 = omp_get_wtime();
    rc = call_kernel(kind, b, ws);
    double dt = omp_get_wtime() - t0;
    spent += dt;
    if (dt < best) best = dt;
  }
  if (kind == K_SGEMM) openblas_set_num_threads(blas_threads);
  free(ws);
  if (rc) {
    snprintf(err, errlen, "bench: %s failed: %s", kernel_names[kind], attn_strerror(rc));
    return -1;
  }
  row->seconds = best;
  return 0;
}

int bs_bench_kernels(const bs_bench_opts *o, bs_bench_row **rows_out, int *nrows, double *peak_out, const char **isa,
                     char *err, size_t errlen) {
  static const int64_t full_n[] = {1024, 4096, 16384}, quick_n[] = {256, 512};
  static const int full_d[] = {64, 128}, quick_d[] = {64};
  const int64_t *ns = o->quick ? quick_n : full_n;
  const int *ds = o->quick ? quick_d : full_d;
  int nn = o->quick ? 2 : 3, nd = o->quick ? 1 : 2;
  int Z = o->heads > 0 ? o->heads : (o->quick ? 2 : 8);
  double budget = o->quick ? 0.05 : 1.0;
  /* Per shape: sgemm, unfused, fwd x2 (causal), bwd x2. */
  int cap = nn * nd * 6, n = 0;
  bs_bench_row *rows = calloc((size_t)cap, sizeof *rows);
  if (!rows) {
    snprintf(err, errlen, "bench: out of memory");
    return -1;
  }
  double peak = bs_bench_fma_peak(o->threads, isa);
  long peak_iters = o->quick ? 2000000 : 10000000;
  for (int di = 0; di < nd; di++) {
    for (int ni = 0; ni < nn; ni++) {
      bench_bufs b;
      if (bufs_alloc(&b, Z, ns[ni], ds[di], o->threads)) {
        snprintf(err, errlen, "bench: out of memory for N=%lld d=%d", (long long)ns[ni], ds[di]);
        free(rows);
        return -1;
      }
      static const int plan[][2] = {{K_SGEMM, 0}, {K_UNFUSED, 0}, {K_FWD, 0}, {K_FWD, 1}, {K_BWD, 0}, {K_BWD, 1}};
      for (size_t s = 0; s < sizeof plan / sizeof plan[0]; s++) {
        int kind = plan[s][0], causal = plan[s][1];
        b.p.mask.causal = causal;
        if (kind == K_BWD) {
          /* lse and delta of the full forward of this mask. */
          if (attn_fwd(&b.p, b.q, b.k, b.v, b.o, b.lse, 0) || attn_delta(&b.p, b.o, b.dout, b.delta)) {
            snprintf(err, errlen, "bench: forward for the backward failed");
            bufs_free(&b);
            free(rows);
            return -1;
          }
        }
        bs_bench_row *r = &rows[n];
        memset(r, 0, sizeof *r);
        double local0 = fma_peak(o->threads, NULL, peak_iters, 3);
        snprintf(r->kernel, sizeof r->kernel, "%s", kernel_names[kind]);
        r->B = 1;
        r->Z = Z;
        r->n = ns[ni];
        r->d = ds[di];
        r->causal = causal;
        if (bench_one(kind, &b, budget, r, err, errlen)) {
          bufs_free(&b);
          free(rows);
          return -1;
        }
        /* The peak next to the row: both see the same load from other users. */
        double local = fma_peak(o->threads, NULL, peak_iters, 3);
        if (local0 > local) local = local0;
        if (local > peak) peak = local;
        r->gflops = bs_bench_flops(r->kernel, 1, Z, r->n, r->d, causal) / r->seconds / 1e9;
        r->peak_gflops = local;
        r->peak_fraction = local > 0 ? r->gflops / local : 0;
        n++;
        if (o->on_row) o->on_row(r, o->ctx);
      }
      bufs_free(&b);
    }
  }
  *rows_out = rows;
  *nrows = n;
  if (peak_out) *peak_out = peak;
  return 0;
}
