/*
 * calib.c — `burstsim calib`: the microbenchmarks (first half) and the
 * profile built from their fits (second half). Every kernel the plans name is
 * timed the way the runtime calls it (attention per head in 256-row query
 * tiles, runtime/runtime.c), on all ranks at once; links are timed through
 * the communicator (kernels/comm/comm.h, Open MPI backend): ping-pong and
 * bidirectional exchange between ranks 0 and 1, a ring step over all ranks,
 * and the four collectives. Warm-up, then repetitions until a time budget;
 * median, minimum and maximum are kept, and rank 0 prints tables shaped like
 * nccl-tests' (size, time, algbw, busbw).
 */
#include "calib/calib.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <sys/stat.h>
#include "base/fileio.h"
#include "calib/bench_kernels.h"
#include "calib/fit.h"
#include "sim/profile.h"
#include "kernels/attn.h"
#include "kernels/comm/comm_mpi.h"
#include "plans/plan.h"

/* Query rows per kernel call, as the runtime's default tile (bs_runtime_opts.tile_rows = 0 -> 256). */
#define CALIB_TILE_ROWS 256
/* Largest relative residual at which a fit, rather than the measured rates, fills a table. */
#define BS_CALIB_FIT_TOL 0.10

void bs_calib_opts_default(bs_calib_opts *o) {
  memset(o, 0, sizeof *o);
  o->log = NULL;
}

void bs_calib_data_free(bs_calib_data *d) {
  free(d->k);
  free(d->l);
  memset(d, 0, sizeof *d);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

/* Repetition policy shared by every benchmark: decided on allreduced times, so every rank agrees. */
typedef struct {
  int warmup, min_reps, max_reps;
  double budget_s;
  double min_call_s;        /* kernels: shorter calls are repeated within a repetition (0 = never) */
} rep_policy;

static rep_policy policy(int quick) {
  rep_policy p = {1, quick ? 3 : 5, quick ? 7 : 25, quick ? 0.25 : 1.0, 0.0};
  return p;
}

typedef int (*bench_fn)(void *ctx);

/*
 * Times fn on every rank at once: warm-up, then repetitions (quiet barrier,
 * call, slowest rank's time). Fills med/min/max/reps. Returns 0, or -1 when
 * fn failed on some rank.
 */
static int time_collective(MPI_Comm comm, const rep_policy *p, bench_fn fn, void *ctx, double *med,
                           double *mn, double *mx, int *reps) {
  double t[64];
  int n = 0, bad = 0;
  double w0 = now_s();
  for (int w = 0; w < p->warmup; w++) bad |= fn(ctx) != 0;
  double wdt = (now_s() - w0) / (p->warmup > 0 ? p->warmup : 1), wmax;
  MPI_Allreduce(&wdt, &wmax, 1, MPI_DOUBLE, MPI_MAX, comm);
  /* Short calls are repeated inside one timed repetition, so that the ranks
   * really run at the same time (the barrier releases them within ~0.2 ms). */
  int inner = 1;
  if (p->min_call_s > 0 && wmax < p->min_call_s) inner = (int)ceil(p->min_call_s / (wmax > 1e-7 ? wmax : 1e-7));
  if (inner > 4096) inner = 4096;
  double spent = 0;
  while (n < p->max_reps && n < 64) {
    quiet_barrier(comm);
    double t0 = now_s();
    for (int i = 0; i < inner; i++) bad |= fn(ctx) != 0;
    double dt = (now_s() - t0) / inner, dmax;
    MPI_Allreduce(&dt, &dmax, 1, MPI_DOUBLE, MPI_MAX, comm);
    t[n++] = dmax;
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

/* ------------------------------------------------------------ buffers */

static void fill_random(float *x, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    uint64_t z = (seed + i) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    z ^= z >> 29;
    x[i] = (float)((double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0);
  }
}

/* q, k, v, dout stored in the kernel's type; everything else fp32. */
typedef struct {
  attn_params p;            /* one head, the whole block */
  int unfused;
  void *q, *k, *v, *dout;
  float *o, *lse, *dq, *dk, *dv, *delta, *ws;
} attn_bench;

static void attn_bench_free(attn_bench *b) {
  free(b->q);
  free(b->k);
  free(b->v);
  free(b->dout);
  free(b->o);
  free(b->lse);
  free(b->dq);
  free(b->dk);
  free(b->dv);
  free(b->delta);
  free(b->ws);
  memset(b, 0, sizeof *b);
}

static void *typed_random(size_t n, int bf16, uint64_t seed) {
  float *f = malloc(n * sizeof *f);
  if (!f) return NULL;
  fill_random(f, n, seed);
  if (!bf16) return f;
  uint16_t *h = malloc(n * sizeof *h);
  if (h)
    for (size_t i = 0; i < n; i++) h[i] = attn_f32_to_bf16(f[i]);
  free(f);
  return h;
}

static int attn_bench_alloc(attn_bench *b, int64_t nq, int64_t nk, int d, int causal, int bf16, int unfused,
                            int threads) {
  memset(b, 0, sizeof *b);
  b->p = attn_params_make(1, 1, 1, nq, nk, d);
  b->p.dtype = bf16 ? ATTN_BF16 : ATTN_FP32;
  b->p.threads = threads;
  b->p.mask.causal = causal;
  /* Decode (nq < nk): queries sit after the keys, as in the plans. */
  b->p.mask.q_pos0 = nk - nq;
  b->unfused = unfused;
  size_t nqe = (size_t)nq * d, nke = (size_t)nk * d;
  b->q = typed_random(nqe, bf16, 11);
  b->k = typed_random(nke, bf16, 12);
  b->v = typed_random(nke, bf16, 13);
  b->dout = typed_random(nqe, bf16, 14);
  b->o = calloc(nqe, sizeof(float));
  b->lse = calloc((size_t)nq, sizeof(float));
  b->delta = calloc((size_t)nq, sizeof(float));
  b->dq = calloc(nqe, sizeof(float));
  b->dk = calloc(nke, sizeof(float));
  b->dv = calloc(nke, sizeof(float));
  if (unfused) {
    attn_params s = b->p;
    s.Nq = nq < CALIB_TILE_ROWS ? nq : CALIB_TILE_ROWS;
    size_t w = attn_unfused_workspace_bytes(&s), w2 = attn_unfused_bwd_workspace_bytes(&s);
    b->ws = malloc(w > w2 ? w : w2);
  }
  if (!b->q || !b->k || !b->v || !b->dout || !b->o || !b->lse || !b->delta || !b->dq || !b->dk || !b->dv ||
      (unfused && !b->ws)) {
    attn_bench_free(b);
    return -1;
  }
  /* lse and delta of the full forward, for the backward. */
  if (attn_fwd(&b->p, b->q, b->k, b->v, b->o, b->lse, 0) || attn_delta(&b->p, b->o, b->dout, b->delta)) {
    attn_bench_free(b);
    return -1;
  }
  return 0;
}

typedef struct {
  attn_bench *b;
  int bwd;
} attn_call;

/* One attention op of one head, in the runtime's row tiles. */
static int attn_op(void *vctx) {
  attn_call *c = vctx;
  attn_bench *b = c->b;
  size_t es = b->p.dtype == ATTN_BF16 ? 2 : 4;
  int d = b->p.d;
  for (int64_t r0 = 0; r0 < b->p.Nq; r0 += CALIB_TILE_ROWS) {
    attn_params s = b->p;
    s.Nq = b->p.Nq - r0 < CALIB_TILE_ROWS ? b->p.Nq - r0 : CALIB_TILE_ROWS;
    s.mask.q_pos0 = b->p.mask.q_pos0 + r0;
    const char *q = (const char *)b->q + (size_t)r0 * d * es;
    const char *dout = (const char *)b->dout + (size_t)r0 * d * es;
    float *o = b->o + r0 * d, *lse = b->lse + r0, *delta = b->delta + r0, *dq = b->dq + r0 * d;
    int rc;
    if (!c->bwd)
      rc = b->unfused ? attn_fwd_unfused(&s, q, b->k, b->v, o, lse, 1, b->ws) : attn_fwd(&s, q, b->k, b->v, o, lse, 1);
    else
      rc = b->unfused ? attn_bwd_unfused(&s, q, b->k, b->v, o, dout, lse, delta, dq, b->dk, b->dv, b->ws)
                      : attn_bwd(&s, q, b->k, b->v, o, dout, lse, delta, dq, b->dk, b->dv);
    if (rc) return rc;
  }
  return 0;
}

/* ------------------------------------------------------- other kernels */

typedef struct {
  int kind;                 /* bs_kernel */
  int64_t rows, d, bytes, n;
  int64_t gm, gn, gk;       /* GEMM of a projection shape: [gm x gk] x [gk x gn] (0: the score shape n x n x d) */
  int threads, bf16;
  float *a, *b, *c, *e, *f;
  void *dout;
} misc_call;

static int misc_op(void *vctx) {
  misc_call *m = vctx;
  switch (m->kind) {
  case BS_K_ATTN_DELTA: {
    attn_params p = attn_params_make(1, 1, 1, m->rows, m->rows, (int)m->d);
    p.dtype = m->bf16 ? ATTN_BF16 : ATTN_FP32;
    p.threads = m->threads;
    return attn_delta(&p, m->a, m->dout, m->c);
  }
  case BS_K_ATTN_MERGE:
    return attn_merge(m->rows, (int)m->d, m->a, m->c, m->b, m->e);
  case BS_K_ELEMWISE: {
    /* The tree rescale of the runtime: num = o * exp(lse - m), den = exp(lse - m). */
    for (int64_t r = 0; r < m->rows; r++) {
      float w = expf(m->c[r] - m->e[r]);
      m->f[r] = w;
      for (int64_t x = 0; x < m->d; x++) m->b[r * m->d + x] = m->a[r * m->d + x] * w;
    }
    return 0;
  }
  case BS_K_COPY:
    memcpy(m->b, m->a, (size_t)m->bytes);
    return 0;
  case BS_K_GEMM: {
    if (m->gk > 0) {
      /* A projection as a transformer layer issues it: Y[tokens x out] = X[tokens x in] W[in x out]. */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m->gm, (int)m->gn, (int)m->gk, 1.0f, m->a,
                  (int)m->gk, m->b, (int)m->gn, 0.0f, m->c, (int)m->gn);
      return 0;
    }
    /* The score GEMM of one head as the runtime issues it: S = scale * q k^T. */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m->n, (int)m->n, (int)m->d, 0.125f,
                m->a, (int)m->d, m->b, (int)m->d, 0.0f, m->c, (int)m->n);
    return 0;
  }
  default: return -1;
  }
}

static void misc_free(misc_call *m) {
  free(m->a);
  free(m->b);
  free(m->c);
  free(m->e);
  free(m->f);
  free(m->dout);
}

static int misc_alloc(misc_call *m) {
  size_t big, small = (size_t)m->rows, na, nb, nc;
  switch (m->kind) {
  case BS_K_COPY: big = (size_t)m->bytes / sizeof(float) + 1; small = 1; break;
  case BS_K_GEMM: big = (size_t)m->n * (size_t)(m->n > m->d ? m->n : m->d); break;
  default: big = (size_t)m->rows * m->d;
  }
  na = nb = big;
  nc = m->kind == BS_K_GEMM ? big : small;
  if (m->kind == BS_K_GEMM && m->gk > 0) {
    na = (size_t)m->gm * (size_t)m->gk;
    nb = (size_t)m->gk * (size_t)m->gn;
    nc = (size_t)m->gm * (size_t)m->gn;
  }
  m->a = malloc(na * sizeof(float));
  m->b = malloc(nb * sizeof(float));
  m->c = malloc(nc * sizeof(float));
  m->e = malloc(small * sizeof(float));
  m->f = malloc(small * sizeof(float));
  m->dout = m->kind == BS_K_ATTN_DELTA ? typed_random((size_t)m->rows * m->d, m->bf16, 21) : malloc(1);
  if (!m->a || !m->b || !m->c || !m->e || !m->f || !m->dout) return -1;
  fill_random(m->a, na, 22);
  fill_random(m->b, nb, 23);
  fill_random(m->c, nc, 24);
  fill_random(m->e, small, 25);
  return 0;
}

/* ---------------------------------------------------------- bookkeeping */

static bs_calib_kpoint *add_k(bs_calib_data *d) {
  if (d->nk == d->capk) {
    int cap = d->capk ? 2 * d->capk : 128;
    bs_calib_kpoint *k = realloc(d->k, (size_t)cap * sizeof *k);
    if (!k) return NULL;
    d->k = k;
    d->capk = cap;
  }
  bs_calib_kpoint *p = &d->k[d->nk++];
  memset(p, 0, sizeof *p);
  return p;
}

static bs_calib_lpoint *add_l(bs_calib_data *d) {
  if (d->nl == d->capl) {
    int cap = d->capl ? 2 * d->capl : 128;
    bs_calib_lpoint *l = realloc(d->l, (size_t)cap * sizeof *l);
    if (!l) return NULL;
    d->l = l;
    d->capl = cap;
  }
  bs_calib_lpoint *p = &d->l[d->nl++];
  memset(p, 0, sizeof *p);
  return p;
}

/* Every rank must agree that an allocation worked before anyone times anything. */
static int all_ok(MPI_Comm comm, int ok) {
  int all;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
  return all;
}

static void log_kpoint(FILE *f, const bs_calib_kpoint *k, int ranks) {
  if (!f) return;
  fprintf(f, "%17s %-22s %7lld %7lld %10.3f %10.3f %10.3f %9.2f %5d\n", bs_kernel_name((bs_kernel)k->kernel),
          k->series, (long long)k->nq, (long long)(k->nk ? k->nk : k->elems), k->t_med * 1e3, k->t_min * 1e3,
          k->t_max * 1e3, k->t_med > 0 ? k->flops * ranks / k->t_med / 1e9 : 0.0, k->reps);
  fflush(f);
}

/* ------------------------------------------------------------- kernels */

static double attn_flops(int bwd, int64_t nq, int64_t nk, int d, int causal) {
  int64_t pairs = bs_visible_pairs(nk - nq, nq, 0, nk, 1, causal, 0);
  return (bwd ? 10.0 : 4.0) * d * (double)pairs;
}

typedef struct {
  MPI_Comm comm;
  const bs_calib_opts *o;
  bs_calib_data *d;
  rep_policy pol;
  double point_budget_s;   /* skip a point whose estimated batch time exceeds this */
} kctx;

/* One attention series (kernel, d, mask, type, block or decode); sizes grow until the budget. */
static int attn_series(kctx *c, int kernel, int d, int causal, int bf16, int decode, const int64_t *sizes, int nsizes,
                       char *err, size_t errlen) {
  int bwd = kernel == BS_K_ATTN_BWD || kernel == BS_K_ATTN_BWD_UNFUSED;
  int unfused = kernel == BS_K_ATTN_FWD_UNFUSED || kernel == BS_K_ATTN_BWD_UNFUSED;
  double rate = 0;
  for (int i = 0; i < nsizes; i++) {
    int64_t nk = sizes[i], nq = decode ? 1 : sizes[i];
    if (!decode && c->o->max_block > 0 && nk > c->o->max_block && i > 0 && sizes[i - 1] >= c->o->max_block) break;
    double flops = attn_flops(bwd, nq, nk, d, causal);
    /* Estimated time of this point with all ranks busy, from the last point's rate. */
    if (rate > 0 && flops / rate * (c->pol.min_reps + c->pol.warmup) > c->point_budget_s) break;
    attn_bench b;
    int ok = attn_bench_alloc(&b, nq, nk, d, causal, bf16, unfused, c->d->threads) == 0;
    if (!all_ok(c->comm, ok)) {
      if (ok) attn_bench_free(&b);
      snprintf(err, errlen, "calib: out of memory (or kernel error) for %s nq=%lld nk=%lld d=%d",
               bs_kernel_name((bs_kernel)kernel), (long long)nq, (long long)nk, d);
      return -1;
    }
    bs_calib_kpoint *k = add_k(c->d);
    if (!k) {
      attn_bench_free(&b);
      snprintf(err, errlen, "calib: out of memory");
      return -1;
    }
    k->kernel = kernel;
    snprintf(k->series, sizeof k->series, "d%d/%s/%s/%s", d, causal ? "causal" : "full", bf16 ? "bf16" : "fp32",
             decode ? "decode" : "block");
    k->d = d;
    k->causal = causal;
    k->bf16 = bf16;
    k->decode = decode;
    k->nq = nq;
    k->nk = nk;
    k->flops = flops;
    k->x = sqrt((double)nq * (double)nk);
    attn_call call = {&b, bwd};
    int rc = time_collective(c->comm, &c->pol, attn_op, &call, &k->t_med, &k->t_min, &k->t_max, &k->reps);
    attn_bench_free(&b);
    if (rc) {
      snprintf(err, errlen, "calib: %s failed on some rank (nq=%lld nk=%lld d=%d)", bs_kernel_name((bs_kernel)kernel),
               (long long)nq, (long long)nk, d);
      return -1;
    }
    k->t_eff = k->t_med / c->d->ranks;
    rate = flops / k->t_med;
    log_kpoint(c->o->log, k, c->d->ranks);
  }
  return 0;
}

static int misc_series(kctx *c, int kernel, int d, int bf16, const int64_t *sizes, int nsizes, char *err,
                       size_t errlen) {
  for (int i = 0; i < nsizes; i++) {
    misc_call m;
    memset(&m, 0, sizeof m);
    m.kind = kernel;
    m.d = d;
    m.threads = c->d->threads;
    m.bf16 = bf16;
    if (kernel == BS_K_COPY) m.bytes = sizes[i];
    else if (kernel == BS_K_GEMM) m.n = sizes[i];
    else m.rows = sizes[i];
    int ok = misc_alloc(&m) == 0;
    if (!all_ok(c->comm, ok)) {
      misc_free(&m);
      snprintf(err, errlen, "calib: out of memory for %s size %lld", bs_kernel_name((bs_kernel)kernel),
               (long long)sizes[i]);
      return -1;
    }
    bs_calib_kpoint *k = add_k(c->d);
    if (!k) {
      misc_free(&m);
      snprintf(err, errlen, "calib: out of memory");
      return -1;
    }
    k->kernel = kernel;
    k->d = d;
    k->bf16 = bf16;
    snprintf(k->series, sizeof k->series, "d%d/%s", d, bf16 ? "bf16" : "fp32");
    switch (kernel) {
    case BS_K_COPY:
      k->elems = sizes[i];
      snprintf(k->series, sizeof k->series, "bytes");
      break;
    case BS_K_GEMM:
      k->nq = k->nk = sizes[i];
      k->flops = 2.0 * (double)sizes[i] * (double)sizes[i] * d;
      break;
    case BS_K_ATTN_DELTA:
      k->nq = sizes[i];
      k->elems = sizes[i] * d;
      k->flops = 2.0 * (double)k->elems;
      break;
    default:
      k->nq = sizes[i];
      k->elems = sizes[i] * d;
    }
    int rc = time_collective(c->comm, &c->pol, misc_op, &m, &k->t_med, &k->t_min, &k->t_max, &k->reps);
    misc_free(&m);
    if (rc) {
      snprintf(err, errlen, "calib: %s failed on some rank", bs_kernel_name((bs_kernel)kernel));
      return -1;
    }
    k->t_eff = k->t_med / c->d->ranks;
    log_kpoint(c->o->log, k, c->d->ranks);
  }
  return 0;
}

/*
 * GEMMs of the shapes a transformer layer issues (fp32, OpenBLAS): m tokens, k
 * inputs, n outputs (QKV and output projections, the MLP's up and down).
 */
static int gemm_proj_series(kctx *c, const int64_t (*shapes)[3], int nshapes, char *err, size_t errlen) {
  for (int i = 0; i < nshapes; i++) {
    misc_call m;
    memset(&m, 0, sizeof m);
    m.kind = BS_K_GEMM;
    m.threads = c->d->threads;
    m.gm = shapes[i][0];
    m.gk = shapes[i][1];
    m.gn = shapes[i][2];
    int ok = misc_alloc(&m) == 0;
    if (!all_ok(c->comm, ok)) {
      misc_free(&m);
      snprintf(err, errlen, "calib: out of memory for a %lld x %lld x %lld GEMM", (long long)m.gm, (long long)m.gk,
               (long long)m.gn);
      return -1;
    }
    bs_calib_kpoint *k = add_k(c->d);
    if (!k) {
      misc_free(&m);
      snprintf(err, errlen, "calib: out of memory");
      return -1;
    }
    k->kernel = BS_K_GEMM;
    snprintf(k->series, sizeof k->series, "proj/k%lld/fp32", (long long)m.gk);
    k->nq = m.gm;
    k->nk = m.gn;
    k->d = (int)m.gk;
    k->flops = 2.0 * (double)m.gm * (double)m.gn * (double)m.gk;
    /* OpenBLAS on the rank's own threads, as the other kernels run (and `bench kernels` times sgemm). */
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(m.threads);
    int rc = time_collective(c->comm, &c->pol, misc_op, &m, &k->t_med, &k->t_min, &k->t_max, &k->reps);
    openblas_set_num_threads(blas_threads);
    misc_free(&m);
    if (rc) {
      snprintf(err, errlen, "calib: gemm failed on some rank");
      return -1;
    }
    k->t_eff = k->t_med / c->d->ranks;
    log_kpoint(c->o->log, k, c->d->ranks);
  }
  return 0;
}

static int measure_kernels(MPI_Comm comm, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen) {
  kctx c = {comm, o, d, policy(o->quick), o->quick ? 2.5 : 6.0};
  c.pol.min_call_s = 0.03;
  static const int64_t blocks_full[] = {256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
  static const int64_t blocks_quick[] = {256, 512, 1024, 2048, 4096, 8192, 16384};
  static const int64_t unf_full[] = {256, 512, 1024, 2048, 4096};
  static const int64_t unf_quick[] = {256, 512, 1024};
  static const int64_t dec_full[] = {1024, 2048, 4096, 8192, 16384, 32768};
  static const int64_t dec_quick[] = {1024, 4096, 16384};
  static const int64_t rows_full[] = {1024, 4096, 16384, 65536};
  static const int64_t rows_quick[] = {1024, 8192, 65536};
  static const int64_t copy_full[] = {65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  static const int64_t copy_quick[] = {65536, 1 << 20, 16 << 20};
  static const int64_t gemm_full[] = {256, 512, 1024, 2048};
  static const int64_t gemm_quick[] = {256, 512, 1024};
  /* Projection shapes, m (tokens) x k (in) x n (out): 36 GFLOP quick, 320 GFLOP full, per rank. */
  static const int64_t proj_quick[][3] = {{256, 512, 512}, {512, 1024, 1024}, {1024, 2048, 2048}, {2048, 4096, 1024},
                                          {256, 4096, 4096}};
  static const int64_t proj_full[][3] = {{256, 512, 512},   {512, 1024, 1024},   {1024, 2048, 2048},
                                         {2048, 4096, 1024}, {256, 4096, 4096},   {1024, 4096, 4096},
                                         {2048, 4096, 4096}, {1024, 4096, 11008}, {1024, 11008, 4096}};
#define PICK(a, b) (o->quick ? (b) : (a)), (o->quick ? (int)(sizeof(b) / sizeof(b)[0]) : (int)(sizeof(a) / sizeof(a)[0]))
  int types[2], nt = 0;
  int want32 = o->fp32 || !o->bf16, want16 = o->bf16 || !o->fp32;
  if (want32) types[nt++] = 0;
  if (want16) types[nt++] = 1;
  if (o->log)
    fprintf(o->log,
            "#\n# kernels: %d rank(s) at once, %d thread(s) each; time = slowest rank, GFLOP/s = all ranks together\n"
            "#%16s %-22s %7s %7s %10s %10s %10s %9s %5s\n",
            d->ranks, d->threads, "kernel", "series", "nq", "nk|elems", "med(ms)", "min(ms)", "max(ms)", "GFLOP/s",
            "reps");
  static const int ds_all[] = {64, 128};
  int ds[2] = {64, 128}, nds = 2;
  if (o->head_dim > 0) {
    ds[0] = o->head_dim;
    nds = 1;
  }
  (void)ds_all;
  for (int ti = 0; ti < nt; ti++)
    for (int di = 0; di < nds; di++) {
      int bf16 = types[ti], dd = ds[di];
      for (int causal = 0; causal < 2; causal++) {
        if (attn_series(&c, BS_K_ATTN_FWD, dd, causal, bf16, 0, PICK(blocks_full, blocks_quick), err, errlen) ||
            attn_series(&c, BS_K_ATTN_BWD, dd, causal, bf16, 0, PICK(blocks_full, blocks_quick), err, errlen) ||
            attn_series(&c, BS_K_ATTN_FWD_UNFUSED, dd, causal, bf16, 0, PICK(unf_full, unf_quick), err, errlen) ||
            attn_series(&c, BS_K_ATTN_BWD_UNFUSED, dd, causal, bf16, 0, PICK(unf_full, unf_quick), err, errlen))
          return -1;
      }
      if (attn_series(&c, BS_K_ATTN_FWD, dd, 0, bf16, 1, PICK(dec_full, dec_quick), err, errlen)) return -1;
      if (misc_series(&c, BS_K_ATTN_DELTA, dd, bf16, PICK(rows_full, rows_quick), err, errlen)) return -1;
    }
  for (int di = 0; di < nds; di++)
    if (misc_series(&c, BS_K_ATTN_MERGE, ds[di], 0, PICK(rows_full, rows_quick), err, errlen) ||
        misc_series(&c, BS_K_ELEMWISE, ds[di], 0, PICK(rows_full, rows_quick), err, errlen) ||
        misc_series(&c, BS_K_GEMM, ds[di], 0, PICK(gemm_full, gemm_quick), err, errlen))
      return -1;
  if (gemm_proj_series(&c, PICK(proj_full, proj_quick), err, errlen)) return -1;
  if (misc_series(&c, BS_K_COPY, 1, 0, PICK(copy_full, copy_quick), err, errlen)) return -1;
#undef PICK
  return 0;
}

/* --------------------------------------------------------------- links */

typedef struct {
  bs_comm *comm;
  MPI_Comm mpi;
  int rank, size;
  char *sbuf, *rbuf;
  int64_t bytes;
  int test;                 /* 0 pingpong, 1 bidir, 2 ring, 3.. collectives */
  double timeout;
  int peer;                 /* pingpong, bidir: rank 0's partner */
} link_call;

enum { T_PINGPONG = 0, T_BIDIR, T_RING, T_ALLREDUCE, T_ALLGATHER, T_REDUCE_SCATTER, T_ALLTOALL, T_COUNT };
static const char *const test_names[T_COUNT] = {"pingpong", "bidir", "ring", "allreduce", "allgather",
                                                "reduce_scatter", "alltoall"};

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

static int measure_links(MPI_Comm mpi, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen) {
  if (d->ranks < 2) return 0;
  bs_comm *comm = NULL;
  if (bs_comm_mpi_create(mpi, &comm, err, errlen)) return -1;
  rep_policy pol = policy(o->quick);
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
  if (!all_ok(mpi, ok)) {
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
              test == T_PINGPONG ? " (time = one way: round trip / 2)" : "", "size(B)",
              "time(us)", "min(us)", "max(us)", "algbw(GB/s)", "busbw(GB/s)", "reps");
    for (int64_t b = lo; b <= max_bytes && !rc; b *= step) {
      int64_t bytes = b;
      if (test == T_ALLGATHER && bytes * d->ranks > cap) break;
      if ((test == T_REDUCE_SCATTER || test == T_ALLTOALL) && bytes % (4 * d->ranks)) continue;
      if ((test == T_ALLREDUCE || test == T_REDUCE_SCATTER) && bytes % 4) continue;
      l.bytes = bytes;
      l.test = test;
      bs_calib_lpoint *p = add_l(d);
      if (!p) {
        rc = -1;
        snprintf(err, errlen, "calib: out of memory");
        break;
      }
      snprintf(p->test, sizeof p->test, "%s", test_names[test]);
      snprintf(p->cls, sizeof p->cls, "%s", classes[ri]);
      p->ranks = test <= T_BIDIR ? 2 : d->ranks;
      p->bytes = bytes;
      if (time_collective(mpi, &pol, link_op, &l, &p->t_med, &p->t_min, &p->t_max, &p->reps)) {
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
                p->t_min * 1e6, p->t_max * 1e6, p->algbw / 1e9, p->busbw / 1e9, p->reps), fflush(o->log);
    }
  }
  free(sbuf);
  free(rbuf);
  bs_comm_free(comm);
  return rc;
}

/* -------------------------------------------------------------- machine */

static void machine_info(bs_calib_data *d) {
  struct utsname u;
  if (uname(&u) == 0) snprintf(d->machine, sizeof d->machine, "%s %s %s %s", u.sysname, u.nodename, u.release, u.machine);
  FILE *f = fopen("/proc/cpuinfo", "r");
  snprintf(d->cpu_model, sizeof d->cpu_model, "unknown");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "model name", 10)) {
        char *c = strchr(line, ':');
        if (c) {
          c++;
          while (*c == ' ' || *c == '\t') c++;
          c[strcspn(c, "\n")] = 0;
          snprintf(d->cpu_model, sizeof d->cpu_model, "%s", c);
        }
        break;
      }
    fclose(f);
  }
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(d->date, sizeof d->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  long pages = sysconf(_SC_PHYS_PAGES), ps = sysconf(_SC_PAGESIZE);
  d->mem_total = pages > 0 && ps > 0 ? (int64_t)pages * ps : 0;
}

/*
 * Which ranks share a node: rank r is on node r / ranks_per_node when that is
 * given (as `ranks_per_node` groups ranks in real runs), else ranks with the same
 * host name (MPI_Get_processor_name) share one. Picks rank 0's ping-pong partners.
 */
static int find_nodes(MPI_Comm comm, int ranks_per_node, bs_calib_data *d, char *err, size_t errlen) {
  int G = d->ranks;
  int *node = calloc((size_t)G, sizeof *node);
  char *names = calloc((size_t)G, MPI_MAX_PROCESSOR_NAME);
  char mine[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0, ok = node && names;
  if (!all_ok(comm, ok)) {
    free(node);
    free(names);
    snprintf(err, errlen, "calib: out of memory for the rank placement");
    return -1;
  }
  MPI_Get_processor_name(mine, &len);
  MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm);
  d->nodes = 0;
  for (int r = 0; r < G; r++) {
    if (ranks_per_node > 0) {
      node[r] = r / ranks_per_node;
    } else {
      node[r] = -1;
      for (int q = 0; q < r && node[r] < 0; q++)
        if (!strncmp(names + (size_t)q * MPI_MAX_PROCESSOR_NAME, names + (size_t)r * MPI_MAX_PROCESSOR_NAME,
                     MPI_MAX_PROCESSOR_NAME))
          node[r] = node[q];
      if (node[r] < 0) node[r] = d->nodes;
    }
    if (node[r] + 1 > d->nodes) d->nodes = node[r] + 1;
  }
  d->peer_intra = d->peer_inter = -1;
  for (int r = 1; r < G; r++) {
    if (node[r] == node[0] && d->peer_intra < 0) d->peer_intra = r;
    if (node[r] != node[0] && d->peer_inter < 0) d->peer_inter = r;
  }
  free(node);
  free(names);
  return 0;
}

typedef struct {
  char *a, *b;
  size_t n;
} copy_call;

static int copy_op(void *vctx) {
  copy_call *c = vctx;
  memcpy(c->b, c->a, c->n);
  return 0;
}

int bs_calib_measure(MPI_Comm comm, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
  double t_start = now_s();
  int rank;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &d->ranks);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  d->cores = cores > 0 ? (int)cores : 1;
  d->threads = o->threads > 0 ? o->threads : (d->cores / d->ranks > 0 ? d->cores / d->ranks : 1);
  d->quick = o->quick;
  machine_info(d);
  if (find_nodes(comm, o->ranks_per_node, d, err, errlen)) return -1;
  snprintf(d->kernel_path, sizeof d->kernel_path, "%s", attn_cpu_variant());
  const char *isa = "?";
  /* FMA peak of every rank at once (each bs_bench_fma_peak is a best of 5 on its threads). */
  {
    double mine = bs_bench_fma_peak(d->threads, &isa) * 1e9, sum;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
    d->fma_peak = sum;
    snprintf(d->isa, sizeof d->isa, "%s", isa);
  }
  {
    rep_policy pol = policy(o->quick);
    copy_call c = {malloc(64 << 20), malloc(64 << 20), 64 << 20};
    int ok = c.a && c.b;
    if (!all_ok(comm, ok)) {
      free(c.a);
      free(c.b);
      snprintf(err, errlen, "calib: out of memory for the copy bandwidth buffers");
      return -1;
    }
    memset(c.a, 3, c.n);
    memset(c.b, 0, c.n);
    double med, mn, mx;
    int reps;
    time_collective(comm, &pol, copy_op, &c, &med, &mn, &mx, &reps);
    d->copy_Bps = 2.0 * (double)c.n * d->ranks / med;
    free(c.a);
    free(c.b);
  }
  if (o->log)
    fprintf(o->log, "# burstsim calib: %d rank(s), %d core(s), %d thread(s) per rank, kernel path %s\n"
                    "# FMA peak (all ranks at once): %.1f GFLOP/s; memcpy (read + write): %.2f GB/s\n",
            d->ranks, d->cores, d->threads, d->kernel_path, d->fma_peak / 1e9, d->copy_Bps / 1e9);
  if (!o->no_kernels && measure_kernels(comm, o, d, err, errlen)) return -1;
  if (!o->no_links && measure_links(comm, o, d, err, errlen)) return -1;
  d->wall_s = now_s() - t_start;
  (void)rank;
  return 0;
}

/* =====================================================================
 * The profile: fits of the measurements in the format of sim/profile.h.
 * ===================================================================== */

typedef struct {
  double x[64], flops[64], t[64];
  int n;
} series_pts;

static void collect(const bs_calib_data *d, int kernel, int dd, int causal, int bf16, int decode, series_pts *s) {
  s->n = 0;
  for (int i = 0; i < d->nk && s->n < 64; i++) {
    const bs_calib_kpoint *k = &d->k[i];
    if (k->kernel != kernel || k->d != dd || k->causal != causal || k->bf16 != bf16 || k->decode != decode) continue;
    s->x[s->n] = k->x;
    s->flops[s->n] = k->flops;
    s->t[s->n] = k->t_eff;
    s->n++;
  }
}

static cJSON *num_obj(cJSON *o, const char *k, double v) {
  cJSON_AddNumberToObject(o, k, isfinite(v) ? v : 0.0);
  return o;
}

static cJSON *quality_json(const bs_fit_quality *q) {
  cJSON *o = cJSON_CreateObject();
  num_obj(o, "r2", q->r2);
  num_obj(o, "max_rel_resid", q->max_rel_resid);
  num_obj(o, "rms_rel_resid", q->rms_rel_resid);
  num_obj(o, "n", q->n);
  return o;
}

/*
 * One rate table of an attention kernel: the saturating fit of the block
 * series sampled at x = 256 .. 64K (square blocks: diagonal ones for
 * "causal"), preceded for the full forward by the decode series (one query
 * row against nk keys, x = sqrt(nk) < 256). The fit's t0 is folded into the
 * sampled rate (launch_s = 0), so the table reproduces t0 + flops / rate at
 * the sampled shapes. Without enough points for a fit, the measured rates are
 * tabulated as they are.
 */
static int attn_table(const bs_calib_data *d, int kernel, int dd, int causal, int bf16, bs_prof_table *t, cJSON *fits) {
  int bwd = kernel == BS_K_ATTN_BWD || kernel == BS_K_ATTN_BWD_UNFUSED;
  series_pts blk, dec;
  collect(d, kernel, dd, causal, bf16, 0, &blk);
  collect(d, kernel, dd, causal, bf16, 1, &dec);
  if (blk.n == 0) return 0;
  memset(t, 0, sizeof *t);
  t->head_dim = dd;
  t->causal = causal;
  char e[160];
  bs_fit_sat fb, fd;
  int have_b = bs_fit_saturating(blk.x, blk.flops, blk.t, blk.n, &fb, e, sizeof e) == 0;
  int have_d = dec.n >= 3 && bs_fit_saturating(dec.x, dec.flops, dec.t, dec.n, &fd, e, sizeof e) == 0;
  const char *dn = bf16 ? "bf16" : "fp32";
  for (int part = 0; part < 2; part++) {
    const series_pts *s = part ? &blk : &dec;
    const bs_fit_sat *f = part ? &fb : &fd;
    int fitted = part ? have_b : have_d;
    /* Use what fits: the fit when it follows every point within 10 %, else the measured rates. */
    int have = fitted && f->q.max_rel_resid <= BS_CALIB_FIT_TOL;
    if (s->n == 0) continue;
    cJSON *fj = cJSON_CreateObject();
    char series[64];
    snprintf(series, sizeof series, "d%d/%s/%s/%s", dd, causal ? "causal" : "full", dn, part ? "block" : "decode");
    cJSON_AddStringToObject(fj, "series", series);
    cJSON_AddStringToObject(fj, "dtype", dn);
    num_obj(fj, "x_min", s->x[0]);
    num_obj(fj, "x_max", s->x[s->n - 1]);
    cJSON_AddStringToObject(fj, "table_from", have ? "fit" : "measured rates (fit residual above 10 % or too few points)");
    if (fitted) {
      cJSON_AddStringToObject(fj, "model", "t = t0 + flops / (rmax * x / (x + xh)), gsl_multifit_nlinear on relative residuals");
      num_obj(fj, "t0_s", f->t0);
      num_obj(fj, "rmax_flops", f->rmax);
      num_obj(fj, "xh", f->xh);
      num_obj(fj, "iterations", f->iterations);
      num_obj(fj, "solver_status", f->status);
      cJSON_AddItemToObject(fj, "quality", quality_json(&f->q));
    } else {
      cJSON_AddStringToObject(fj, "model", "measured rates tabulated (too few points for a fit)");
    }
    cJSON_AddItemToArray(fits, fj);
    if (have && part == 0) {
      static const double nks[] = {1024, 2048, 4096, 8192, 16384, 32768};
      for (int i = 0; i < 6; i++) {
        double x = sqrt(nks[i]), fl = 4.0 * dd * nks[i];
        t->x[t->n] = x;
        t->tflops[t->n++] = fl / bs_fit_sat_time(f, x, fl) / 1e12;
      }
    } else if (have) {
      for (double b = 256; b <= 65536 && t->n < BS_PROF_MAX_POINTS; b *= 2) {
        double fl = (bwd ? 10.0 : 4.0) * dd * (causal ? b * (b + 1) / 2 : b * b);
        t->x[t->n] = b;
        t->tflops[t->n++] = fl / bs_fit_sat_time(f, b, fl) / 1e12;
      }
    } else {
      for (int i = 0; i < s->n && t->n < BS_PROF_MAX_POINTS; i++) {
        if (t->n && s->x[i] <= t->x[t->n - 1]) continue;
        t->x[t->n] = s->x[i];
        t->tflops[t->n++] = s->flops[i] / s->t[i] / 1e12;
      }
    }
  }
  return t->n > 0;
}

/* A COMPUTE op with the shape of a measurement, as the plans would emit it. */
static bs_compute point_op(const bs_calib_kpoint *k) {
  bs_compute c;
  memset(&c, 0, sizeof c);
  c.kernel = (bs_kernel)k->kernel;
  int64_t nq = k->nq > 0 ? k->nq : 1, nk = k->nk > 0 ? k->nk : nq;
  c.a = attn_params_make(1, 1, 1, nq, nk, k->d > 0 ? k->d : 1);
  c.a.mask.causal = k->causal;
  c.a.mask.q_pos0 = nk - nq;
  c.a.dtype = k->bf16 ? ATTN_BF16 : ATTN_FP32;
  c.flops = k->flops;
  c.elems = k->elems;
  if (k->kernel == BS_K_GEMM) {
    c.m = k->nq;
    c.n = k->nk > 0 ? k->nk : k->nq;
    c.k = k->d;
  }
  return c;
}

static double model_time(const bs_profile *p, const bs_calib_kpoint *k) {
  char e[160];
  bs_compute c = point_op(k);
  return bs_profile_kernel_time(p, &c, k->bf16 ? BS_BF16 : BS_FP32, e, sizeof e);
}

static const int roofline_kernels[] = {BS_K_ATTN_DELTA, BS_K_ATTN_MERGE, BS_K_ELEMWISE, BS_K_COPY};
#define N_ROOFLINE 4

/* launch_s and efficiency of a roofline kernel: t = launch + T1 / eff, T1 the model time at eff 1. */
static int roofline_fit(const bs_calib_data *d, bs_profile *p, int kernel, int bf16, bs_fit_lin *fit) {
  double u[64], t[64];
  int n = 0;
  p->kernel[kernel].kind = BS_KM_ROOFLINE;
  p->kernel[kernel].launch_s = 0;
  p->kernel[kernel].efficiency = 1;
  for (int i = 0; i < d->nk && n < 64; i++) {
    const bs_calib_kpoint *k = &d->k[i];
    if (k->kernel != kernel || (kernel == BS_K_ATTN_DELTA && k->bf16 != bf16)) continue;
    double m = model_time(p, k);
    if (!(m > 0)) continue;
    u[n] = m;
    t[n++] = k->t_eff;
  }
  char e[160];
  if (n < 2 || bs_fit_linear(u, t, n, fit, e, sizeof e)) {
    p->kernel[kernel].kind = BS_KM_NONE;
    return 0;
  }
  double eff = 1.0 / fit->c1;
  p->kernel[kernel].launch_s = fit->c0;
  p->kernel[kernel].efficiency = eff > 1 ? 1 : eff;
  return 1;
}

/*
 * The GEMM entry: the tiled model of sim/profile.h with no tile or wave
 * quantization on a CPU (tile 1 x 1, one unit: OpenBLAS runs edges with
 * narrower micro-kernels and splits the rows over threads), its bandwidth term
 * at the memcpy bandwidth, and launch_s, peak_fraction and k_overhead fitted
 * (calib/fit.h) to every GEMM measured: the attention-score shapes (k = d)
 * and the projection shapes (k = 512 .. 11008). The fitted record goes to
 * fits.gemm. Returns 1 when fitted, 0 without enough points.
 */
static int gemm_fit(const bs_calib_data *d, bs_profile *p, cJSON *fits) {
  bs_kernel_model *g = &p->kernel[BS_K_GEMM];
  memset(g, 0, sizeof *g);
  g->kind = BS_KM_TILED;
  g->peak_fraction = g->bw_efficiency = 1;
  g->tile_m = g->tile_n = g->sms = 1;
  double t1[64], kk[64], t[64];
  int n = 0, bytes_bound = 0;
  for (int i = 0; i < d->nk && n < 64; i++) {
    const bs_calib_kpoint *k = &d->k[i];
    if (k->kernel != BS_K_GEMM || !(k->flops > 0) || k->d < 1) continue;
    t1[n] = k->flops / p->peak_flops;
    kk[n] = k->d;
    t[n++] = k->t_eff;
  }
  bs_fit_gemm f;
  char e[160];
  if (n < 3 || bs_fit_gemm_k(t1, kk, t, n, &f, e, sizeof e)) {
    g->kind = BS_KM_NONE;
    return 0;
  }
  g->launch_s = f.launch_s;
  g->peak_fraction = f.peak_fraction > 1 ? 1 : f.peak_fraction;
  g->k_overhead = f.k_overhead;
  /* Points the model puts on its bandwidth bound (the fit assumed compute): reported, not refitted. */
  for (int i = 0; i < d->nk; i++) {
    const bs_calib_kpoint *k = &d->k[i];
    if (k->kernel != BS_K_GEMM) continue;
    double bytes = ((double)k->nq * k->d + (double)k->d * (k->nk > 0 ? k->nk : k->nq) +
                    (double)k->nq * (k->nk > 0 ? k->nk : k->nq)) * 4;
    bytes_bound += bytes / p->mem_bw_Bps > bs_fit_gemm_time(&f, k->flops / p->peak_flops, k->d) - f.launch_s;
  }
  cJSON *fj = cJSON_CreateObject();
  cJSON_AddStringToObject(fj, "model", "tiled, no tile or wave quantization on a CPU (tile 1 x 1, sms 1): t = launch_s + "
                                       "flops (k + k_overhead) / (k peak_flops peak_fraction), gsl_multifit_wlinear on "
                                       "relative residuals over the score (k = d) and projection GEMMs");
  num_obj(fj, "launch_s", f.launch_s);
  num_obj(fj, "peak_fraction_fitted", f.peak_fraction);
  num_obj(fj, "k_overhead", f.k_overhead);
  num_obj(fj, "points_bytes_bound", bytes_bound);
  cJSON_AddItemToObject(fj, "quality", quality_json(&f.q));
  cJSON_AddItemToObject(fits, bs_kernel_name(BS_K_GEMM), fj);
  return 1;
}

/* Link points of one test: ping-pong and bidir of class cls ("intra", "inter"), or with
 * cls NULL every point but the inter-node ones. Returns how many (at most 64). */
static int link_points(const bs_calib_data *d, const char *test, const char *cls, double *b, double *t) {
  int n = 0;
  for (int i = 0; i < d->nl && n < 64; i++) {
    const bs_calib_lpoint *l = &d->l[i];
    if (strcmp(l->test, test) || (cls ? strcmp(l->cls, cls) != 0 : !strcmp(l->cls, "inter"))) continue;
    b[n] = (double)l->bytes;
    t[n++] = l->t_med;
  }
  return n;
}

/* A piecewise link fit as JSON: its segments and the fit quality, added to o. */
static void link_fit_json(cJSON *o, const bs_fit_link *f) {
  cJSON *segs = cJSON_AddArrayToObject(o, "segments");
  for (int s = 0; s < f->nseg; s++) {
    cJSON *sj = cJSON_CreateObject();
    num_obj(sj, "min_bytes", f->seg[s].min_bytes);
    num_obj(sj, "latency_s", f->seg[s].lat_s);
    num_obj(sj, "bandwidth_Bps", f->seg[s].bw_Bps);
    cJSON_AddItemToArray(segs, sj);
  }
  cJSON_AddItemToObject(o, "quality", quality_json(&f->q));
}

/*
 * The link of class cls ("intra" or "inter" ping-pong points): latency and bandwidth per
 * size range (GSL piecewise fit), as SimGrid-style factors relative to the bulk range.
 * Writes the fit under fitj[name] when fitj is given. 0 = done, 1 = no such points, -1 = error.
 */
static int link_from_pingpong(const bs_calib_data *d, const char *cls, bs_prof_link *lk, bs_fit_link *out,
                              cJSON *fitj, const char *name, char *err, size_t errlen) {
  double b[64], t[64];
  int n = link_points(d, "pingpong", cls, b, t);
  if (n == 0) return 1;
  bs_fit_link pp;
  if (bs_fit_link_piecewise(b, t, n, 3, 3, &pp, err, errlen)) return -1;
  lk->present = 1;
  lk->bw_Bps = pp.seg[pp.nseg - 1].bw_Bps;
  lk->lat_s = pp.seg[0].lat_s;
  lk->nfactors = pp.nseg;
  for (int s = 0; s < pp.nseg; s++) {
    lk->factors[s].min_bytes = pp.seg[s].min_bytes;
    lk->factors[s].bandwidth = pp.seg[s].bw_Bps / pp.seg[pp.nseg - 1].bw_Bps;
    lk->factors[s].latency = lk->lat_s > 0 ? pp.seg[s].lat_s / lk->lat_s : 1.0;
    if (!(lk->factors[s].latency >= 0)) lk->factors[s].latency = 1.0;
  }
  lk->factors[pp.nseg - 1].bandwidth = 1.0;
  lk->factors[pp.nseg - 1].latency = 1.0;
  if (out) *out = pp;
  if (fitj) {
    cJSON *pj = cJSON_CreateObject();
    cJSON_AddStringToObject(pj, "model", "pingpong one way: t = latency + bytes / bandwidth per size range; a break only where one range misses a point by > 5 % and the split cuts chi2 fourfold");
    cJSON_AddStringToObject(pj, "ranks", !strcmp(cls, "intra") ? "rank 0 and a rank of its node" : "rank 0 and a rank of another node");
    link_fit_json(pj, &pp);
    cJSON_AddItemToObject(fitj, name, pj);
  }
  return 0;
}

static int build_profile(const bs_calib_data *d, const bs_calib_opts *o, const char *name, bs_profile *p, cJSON *fits,
                         cJSON *links_fit, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  p->memory_bytes = d->mem_total > 0 ? (double)d->mem_total / d->ranks : 1e9;
  p->peak_flops = d->fma_peak > 0 ? d->fma_peak : 1e9;
  p->mem_bw_Bps = d->copy_Bps > 0 ? d->copy_Bps : 1e9;
  p->host_speed = p->peak_flops;
  p->host_cores = d->cores;
  snprintf(p->net_model, sizeof p->net_model, "CM02");
  int primary = o->primary_bf16 ? 1 : 0;
  /* Attention: fused and unfused, tables of the primary type first (the simulator reads those). */
  static const int attn_k[] = {BS_K_ATTN_FWD, BS_K_ATTN_FWD_UNFUSED, BS_K_ATTN_BWD, BS_K_ATTN_BWD_UNFUSED};
  for (int ki = 0; ki < 4; ki++) {
    int kernel = attn_k[ki];
    bs_kernel_model *m = &p->kernel[kernel];
    cJSON *kf = cJSON_CreateArray();
    for (int pass = 0; pass < 2; pass++) {
      int bf16 = pass == 0 ? primary : !primary;
      for (int dd = 64; dd <= 128; dd *= 2)
        for (int causal = 0; causal < 2; causal++) {
          if (m->ntables >= BS_PROF_MAX_TABLES) break;
          if (attn_table(d, kernel, dd, causal, bf16, &m->tables[m->ntables], kf)) m->ntables++;
        }
    }
    if (m->ntables) {
      m->kind = BS_KM_TABLE;
      m->launch_s = 0;
    }
    cJSON_AddItemToObject(fits, bs_kernel_name((bs_kernel)kernel), kf);
  }
  /* Roofline kernels; memory bandwidth raised when a kernel streams faster than memcpy. */
  for (int pass = 0; pass < 3; pass++) {
    double worst = 1;
    for (int r = 0; r < N_ROOFLINE; r++) {
      bs_fit_lin f;
      if (!roofline_fit(d, p, roofline_kernels[r], primary, &f)) continue;
      if (1.0 / f.c1 > worst) worst = 1.0 / f.c1;
    }
    if (worst <= 1.0 + 1e-9) break;
    p->mem_bw_Bps *= worst;
  }
  for (int r = 0; r < N_ROOFLINE; r++) {
    bs_fit_lin f;
    int kernel = roofline_kernels[r];
    if (!roofline_fit(d, p, kernel, primary, &f)) continue;
    cJSON *fj = cJSON_CreateObject();
    cJSON_AddStringToObject(fj, "model", "t = launch_s + T1 / efficiency, T1 = the roofline time at efficiency 1 (weighted linear fit)");
    num_obj(fj, "launch_s", f.c0);
    num_obj(fj, "efficiency_fitted", 1.0 / f.c1);
    cJSON_AddItemToObject(fj, "quality", quality_json(&f.q));
    cJSON_AddItemToObject(fits, bs_kernel_name((bs_kernel)kernel), fj);
  }
  gemm_fit(d, p, fits);
  /* Links: ping-pong within rank 0's node gives the shm class, to another node the NIC class. */
  bs_prof_link *shm = &p->link[BS_LINK_SHM];
  int have_intra = 0;
  bs_fit_link pp;
  if (d->ranks >= 2) {
    int r = link_from_pingpong(d, "intra", shm, &pp, links_fit, "pingpong", err, errlen);
    if (r < 0) return -1;
    have_intra = r == 0;
    r = link_from_pingpong(d, "inter", &p->link[BS_LINK_NIC], NULL, links_fit, "pingpong_inter", err, errlen);
    if (r < 0) return -1;
  }
  if (have_intra) {
    /* Ring step: every rank sends to the next at once; the host has one shm link they share. */
    double rb[64], rt[64];
    int rn = 0;
    for (int i = 0; i < d->nl && rn < 64; i++)
      if (!strcmp(d->l[i].test, "ring") && d->l[i].bytes >= (1 << 20)) {
        rb[rn] = (double)d->l[i].bytes;
        rt[rn++] = d->l[i].t_med;
      }
    bs_fit_lin ring;
    double agg = pp.seg[pp.nseg - 1].bw_Bps;
    int ring_ok = rn >= 2 && bs_fit_linear(rb, rt, rn, &ring, err, errlen) == 0;
    /* One node: every flow of the ring shares the host's one shm link. */
    if (d->nodes == 1 && ring_ok) agg = d->ranks / ring.c1;
    shm->bw_Bps = agg;
    cJSON *rj = cJSON_CreateObject();
    cJSON_AddStringToObject(rj, "model", d->nodes == 1 ? "ring step of all ranks (>= 1 MiB): t = c0 + bytes / flow_bw; shm link bandwidth = ranks x flow_bw (one link shared by every flow)"
                                                       : "ring step of all ranks over several nodes (>= 1 MiB): recorded; shm bandwidth from the intra-node ping-pong");
    num_obj(rj, "flow_bw_Bps", ring_ok ? 1.0 / ring.c1 : 0);
    num_obj(rj, "link_bw_Bps", agg);
    if (ring_ok) cJSON_AddItemToObject(rj, "quality", quality_json(&ring.q));
    cJSON_AddItemToObject(links_fit, "ring", rj);
    cJSON_AddStringToObject(links_fit, "factors_note",
                            "factors[] = SimGrid SMPI-style pieces from the ping-pong segments, relative to the bulk piece; "
                            "the simulator applies the last piece (bulk) to every message, with latency_s = the eager latency");
    /* Collectives: recorded fits (the simulator runs them as point-to-point steps over the shm link). */
    static const char *colls[] = {"bidir", "allreduce", "allgather", "reduce_scatter", "alltoall"};
    for (int c = 0; c < 5; c++) {
      double cb[64], ct[64];
      int cn = link_points(d, colls[c], NULL, cb, ct);
      bs_fit_link cf;
      char e[160];
      if (cn < 4 || bs_fit_link_piecewise(cb, ct, cn, 2, 2, &cf, e, sizeof e)) continue;
      cJSON *cj = cJSON_CreateObject();
      link_fit_json(cj, &cf);
      cJSON_AddItemToObject(links_fit, colls[c], cj);
    }
  } else {
    /* One rank, or no second rank on rank 0's node: keep the shipped host profile's shm link. */
    bs_profile shipped;
    char e[256];
    if (bs_profile_load("host", &shipped, e, sizeof e) == 0 && shipped.link[BS_LINK_SHM].present) *shm = shipped.link[BS_LINK_SHM];
    else {
      shm->present = 1;
      shm->bw_Bps = 1e9;
      shm->lat_s = 1e-6;
    }
    cJSON_AddStringToObject(links_fit, "note", "no two ranks on one node: shm not measured, copied from the shipped host profile");
  }
  return 0;
}

static cJSON *measurements_json(const bs_calib_data *d) {
  cJSON *m = cJSON_CreateObject();
  cJSON *ks = cJSON_AddArrayToObject(m, "kernels");
  for (int i = 0; i < d->nk; i++) {
    const bs_calib_kpoint *k = &d->k[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kernel", bs_kernel_name((bs_kernel)k->kernel));
    cJSON_AddStringToObject(o, "series", k->series);
    num_obj(o, "d", k->d);
    num_obj(o, "causal", k->causal);
    cJSON_AddStringToObject(o, "dtype", k->bf16 ? "bf16" : "fp32");
    num_obj(o, "nq", (double)k->nq);
    num_obj(o, "nk", (double)k->nk);
    num_obj(o, "elems", (double)k->elems);
    num_obj(o, "flops", k->flops);
    num_obj(o, "t_med_s", k->t_med);
    num_obj(o, "t_min_s", k->t_min);
    num_obj(o, "t_max_s", k->t_max);
    num_obj(o, "spread", k->t_med > 0 ? (k->t_max - k->t_min) / k->t_med : 0);
    num_obj(o, "t_eff_s", k->t_eff);
    num_obj(o, "reps", k->reps);
    cJSON_AddItemToArray(ks, o);
  }
  cJSON *ls = cJSON_AddArrayToObject(m, "links");
  for (int i = 0; i < d->nl; i++) {
    const bs_calib_lpoint *l = &d->l[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "test", l->test);
    if (l->cls[0]) cJSON_AddStringToObject(o, "class", l->cls);
    num_obj(o, "ranks", l->ranks);
    num_obj(o, "bytes", (double)l->bytes);
    num_obj(o, "t_med_s", l->t_med);
    num_obj(o, "t_min_s", l->t_min);
    num_obj(o, "t_max_s", l->t_max);
    num_obj(o, "algbw_Bps", l->algbw);
    num_obj(o, "busbw_Bps", l->busbw);
    num_obj(o, "reps", l->reps);
    cJSON_AddItemToArray(ls, o);
  }
  return m;
}

/* Measured against the simulator's own formula (bs_profile_kernel_time) for every point of the primary type. */
static cJSON *profile_check(const bs_calib_data *d, const bs_profile *p, int primary) {
  cJSON *c = cJSON_CreateObject();
  for (int kernel = 0; kernel < BS_K_COUNT; kernel++) {
    double m[256], t[256];
    int n = 0;
    for (int i = 0; i < d->nk && n < 256; i++) {
      const bs_calib_kpoint *k = &d->k[i];
      if (k->kernel != kernel || (k->bf16 != primary && kernel != BS_K_COPY && kernel != BS_K_GEMM &&
                                  kernel != BS_K_ATTN_MERGE && kernel != BS_K_ELEMWISE))
        continue;
      double mt = model_time(p, k);
      if (!(mt > 0)) continue;
      m[n] = mt;
      t[n++] = k->t_eff;
    }
    if (!n) continue;
    bs_fit_quality q;
    bs_fit_quality_of(m, t, n, &q);
    cJSON_AddItemToObject(c, bs_kernel_name((bs_kernel)kernel), quality_json(&q));
  }
  return c;
}

/* gnuplot data, script and PNGs: per kernel GFLOP/s (or GB/s) against size, per link time against bytes. */
static int write_plots(const bs_calib_data *d, const bs_profile *p, const bs_calib_opts *o, const char *dir,
                       char *err, size_t errlen) {
  if (mkdir(dir, 0755) && errno != EEXIST) {
    snprintf(err, errlen, "%s: cannot create the plot directory: %s", dir, strerror(errno));
    return -1;
  }
  char path[1100];
  snprintf(path, sizeof path, "%s/plots.gp", dir);
  bs_outfile *gpo = bs_out_open(path, err, errlen);
  if (!gpo) return -1;
  FILE *gp = bs_out_stream(gpo);
  fprintf(gp, "# burstsim calib: measured (points) against the profile's model (lines). Run: gnuplot plots.gp\n"
              "set terminal pngcairo size 1000,650\nset logscale x 2\nset key outside right\nset grid\n");
  int primary = o->primary_bf16 ? 1 : 0;
  for (int kernel = 0; kernel < BS_K_COUNT; kernel++) {
    snprintf(path, sizeof path, "%s/kernel_%s.dat", dir, bs_kernel_name((bs_kernel)kernel));
    bs_outfile *fo = NULL;
    FILE *f = NULL;
    char last[48] = "";
    int blocks = 0;
    char titles[16][48];
    for (int i = 0; i < d->nk; i++) {
      const bs_calib_kpoint *k = &d->k[i];
      if (k->kernel != kernel || (k->bf16 != primary && kernel <= BS_K_ATTN_DELTA)) continue;
      if (!f) {
        if (!(fo = bs_out_open(path, err, errlen))) {
          bs_out_abort(gpo);
          return -1;
        }
        f = bs_out_stream(fo);
      }
      if (strcmp(last, k->series)) {
        if (blocks >= 16) break;
        if (blocks) fprintf(f, "\n\n");
        snprintf(last, sizeof last, "%s", k->series);
        snprintf(titles[blocks++], 48, "%s", k->series);
        fprintf(f, "# %s: size  measured_s  model_s  measured_rate  model_rate\n", k->series);
      }
      double size = kernel == BS_K_COPY ? (double)k->elems : (k->x > 0 ? k->x : (double)k->nq);
      double work = k->flops > 0 ? k->flops : (double)(kernel == BS_K_COPY ? 2 * k->elems : k->elems);
      double mt = model_time(p, k);
      fprintf(f, "%g %g %g %g %g\n", size, k->t_eff, mt, work / k->t_eff / 1e9, mt > 0 ? work / mt / 1e9 : 0);
    }
    if (!f) continue;
    if (bs_out_commit(fo, err, errlen)) {
      bs_out_abort(gpo);
      return -1;
    }
    fprintf(gp, "set output 'kernel_%s.png'\nset title '%s: measured vs profile (whole-CPU-equivalent, %d rank(s))'\n"
                "set xlabel '%s'\nset ylabel '%s'\nplot ",
            bs_kernel_name((bs_kernel)kernel), bs_kernel_name((bs_kernel)kernel), d->ranks,
            kernel <= BS_K_ATTN_BWD_UNFUSED ? "x = sqrt(nq * nk)" : kernel == BS_K_COPY ? "bytes" : "rows / n",
            kernel == BS_K_COPY || kernel == BS_K_ELEMWISE || kernel == BS_K_ATTN_MERGE ? "G elements/s" : "GFLOP/s");
    for (int b = 0; b < blocks; b++)
      fprintf(gp, "%s'kernel_%s.dat' index %d using 1:4 with points pt 7 lc %d title '%s measured', "
                  "'' index %d using 1:5 with lines lc %d title '%s model'",
              b ? ", \\\n     " : "", bs_kernel_name((bs_kernel)kernel), b, b + 1, titles[b], b, b + 1, titles[b]);
    fprintf(gp, "\n");
  }
  if (d->nl) {
    static const char *tests[] = {"pingpong", "bidir", "ring", "allreduce", "allgather", "reduce_scatter", "alltoall"};
    snprintf(path, sizeof path, "%s/links.dat", dir);
    bs_outfile *fo = bs_out_open(path, err, errlen);
    if (!fo) {
      bs_out_abort(gpo);
      return -1;
    }
    FILE *f = bs_out_stream(fo);
    const bs_prof_link *shm = &p->link[BS_LINK_SHM];
    for (int t = 0; t < 7; t++) {
      fprintf(f, "%s# %s: bytes measured_s model_s (pingpong, ring: the shm link of the profile)\n", t ? "\n\n" : "", tests[t]);
      for (int i = 0; i < d->nl; i++) {
        const bs_calib_lpoint *l = &d->l[i];
        if (strcmp(l->test, tests[t]) || !strcmp(l->cls, "inter")) continue;
        double flows = !strcmp(l->test, "ring") ? l->ranks : 1;
        double mt = shm->lat_s + (double)l->bytes * flows / shm->bw_Bps;
        fprintf(f, "%lld %g %g\n", (long long)l->bytes, l->t_med, mt);
      }
    }
    if (bs_out_commit(fo, err, errlen)) {
      bs_out_abort(gpo);
      return -1;
    }
    fprintf(gp, "set output 'links.png'\nset logscale xy\nset title 'links (%d ranks): measured (points), shm link model (lines)'\n"
                "set xlabel 'bytes'\nset ylabel 'seconds'\nplot ", d->ranks);
    for (int t = 0; t < 7; t++)
      fprintf(gp, "%s'links.dat' index %d using 1:2 with points pt 7 lc %d title '%s'%s", t ? ", \\\n     " : "", t, t + 1,
              tests[t], t <= 2 ? "" : "");
    fprintf(gp, ", \\\n     'links.dat' index 0 using 1:3 with lines lc 1 title 'pingpong model', "
                "'links.dat' index 2 using 1:3 with lines lc 3 title 'ring model'\n");
  }
  if (bs_out_commit(gpo, err, errlen)) return -1;
  char cmd[1300];
  snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot plots.gp", dir);
  int rc = system(cmd);
  if (rc != 0 && o->log) fprintf(o->log, "# calib: gnuplot failed (exit %d); data and script are in %s\n", rc, dir);
  return 0;
}

int bs_calib_write_profile(const bs_calib_data *d, const bs_calib_opts *o, const char *path, const char *plots_dir,
                           char *err, size_t errlen) {
  char name[64];
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  snprintf(name, sizeof name, "%.*s", (int)(strlen(base) > 5 && !strcmp(base + strlen(base) - 5, ".json") ? strlen(base) - 5 : strlen(base)), base);
  bs_profile *p = calloc(1, sizeof *p);
  cJSON *fits = cJSON_CreateObject(), *links_fit = cJSON_CreateObject();
  int rc = -1;
  char *text = NULL;
  cJSON *root = NULL;
  bs_outfile *po = NULL;
  if (!p || !fits || !links_fit) {
    snprintf(err, errlen, "calib: out of memory");
    goto out;
  }
  if (build_profile(d, o, name, p, fits, links_fit, err, errlen)) goto out;
  int nkm = 0;
  for (int k = 0; k < BS_K_COUNT; k++) nkm += p->kernel[k].kind != BS_KM_NONE;
  if (!nkm && !o->no_kernels) {
    snprintf(err, errlen, "calib: no kernel model could be fitted");
    goto out;
  }
  char source[400];
  snprintf(source, sizeof source, "burstsim calib %s on %s (%d rank(s) x %d thread(s)); fits and raw measurements in this file",
           d->date, d->cpu_model, d->ranks, d->threads);
  root = bs_profile_to_json(p, source);
  if (!root) {
    snprintf(err, errlen, "calib: out of memory");
    goto out;
  }
  /* Table types ("dtype", ignored by the loader: the simulator reads the first table per head_dim and mask). */
  cJSON *ks = cJSON_GetObjectItemCaseSensitive(root, "kernels");
  static const int attn_k[] = {BS_K_ATTN_FWD, BS_K_ATTN_FWD_UNFUSED, BS_K_ATTN_BWD, BS_K_ATTN_BWD_UNFUSED};
  for (int ki = 0; ki < 4; ki++) {
    cJSON *kj = cJSON_GetObjectItemCaseSensitive(ks, bs_kernel_name((bs_kernel)attn_k[ki]));
    cJSON *ts = cJSON_GetObjectItemCaseSensitive(kj, "tables");
    cJSON *fk = cJSON_GetObjectItemCaseSensitive(fits, bs_kernel_name((bs_kernel)attn_k[ki]));
    int t = 0, prim = o->primary_bf16 ? 1 : 0;
    cJSON *tj;
    /* Tables were filled primary type first, per d, per mask: count them back. */
    int per_type = 0;
    for (int dd = 64; dd <= 128; dd *= 2)
      for (int causal = 0; causal < 2; causal++) {
        series_pts s;
        collect(d, attn_k[ki], dd, causal, prim, 0, &s);
        per_type += s.n > 0;
      }
    cJSON_ArrayForEach(tj, ts) {
      cJSON_AddStringToObject(tj, "dtype", (t < per_type ? prim : !prim) ? "bf16" : "fp32");
      t++;
    }
    if (kj && fk) cJSON_AddItemReferenceToObject(kj, "fits", fk);
  }
  cJSON_ReplaceItemInObject(root, "name", cJSON_CreateString(name));
  cJSON_AddStringToObject(root, "description",
                          "Measured by burstsim calib on this machine for the host topology: every rank an actor on one shared "
                          "CPU; kernel times are whole-CPU-equivalent (time with all ranks busy / ranks)");
  cJSON *mj = cJSON_AddObjectToObject(root, "machine");
  cJSON_AddStringToObject(mj, "uname", d->machine);
  cJSON_AddStringToObject(mj, "cpu_model", d->cpu_model);
  num_obj(mj, "cores", d->cores);
  num_obj(mj, "memory_bytes", (double)d->mem_total);
  cJSON_AddStringToObject(mj, "fma_isa", d->isa);
  cJSON_AddStringToObject(mj, "kernel_path", d->kernel_path);
  cJSON_AddStringToObject(root, "date", d->date);
  cJSON *cj = cJSON_AddObjectToObject(root, "calibration");
  num_obj(cj, "ranks", d->ranks);
  num_obj(cj, "threads_per_rank", d->threads);
  num_obj(cj, "nodes", d->nodes);
  num_obj(cj, "pingpong_peer_intra", d->peer_intra);
  num_obj(cj, "pingpong_peer_inter", d->peer_inter);
  cJSON_AddBoolToObject(cj, "quick", d->quick);
  num_obj(cj, "wall_s", d->wall_s);
  num_obj(cj, "tile_rows", CALIB_TILE_ROWS);
  num_obj(cj, "fma_peak_flops", d->fma_peak);
  num_obj(cj, "memcpy_Bps", d->copy_Bps);
  cJSON_AddStringToObject(cj, "primary_dtype", o->primary_bf16 ? "bf16" : "fp32");
  cJSON_AddStringToObject(cj, "time_convention",
                          "kernel times: median over repetitions of the slowest rank, all ranks running the kernel at once, "
                          "divided by the number of ranks");
  cJSON_AddItemToObject(root, "fits", fits);
  fits = NULL;
  cJSON_AddItemToObject(root, "links_fit", links_fit);
  links_fit = NULL;
  cJSON_AddItemToObject(root, "profile_check", profile_check(d, p, o->primary_bf16 ? 1 : 0));
  cJSON_AddItemToObject(root, "measurements", measurements_json(d));
  text = cJSON_Print(root);
  if (!text) {
    snprintf(err, errlen, "calib: out of memory");
    goto out;
  }
  /* The profile replaces PATH last: only once it loads back and the plots are written. */
  if (!(po = bs_out_open(path, err, errlen))) goto out;
  if (fputs(text, bs_out_stream(po)) < 0 || fputc('\n', bs_out_stream(po)) == EOF ||
      fflush(bs_out_stream(po))) {
    snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
    goto out;
  }
  const char *written = bs_out_temp_path(po);
  if (written) { /* a device or FIFO is written in place and cannot be read back */
    bs_profile check;
    char lerr[512];
    if (bs_profile_load(written, &check, lerr, sizeof lerr)) {
      snprintf(err, errlen, "%s: the profile does not load back (%s); not written", path, lerr);
      goto out;
    }
  }
  if (plots_dir && write_plots(d, p, o, plots_dir, err, errlen)) goto out;
  rc = bs_out_commit(po, err, errlen);
  po = NULL;
out:
  bs_out_abort(po);
  free(text);
  cJSON_Delete(root);
  cJSON_Delete(fits);
  cJSON_Delete(links_fit);
  free(p);
  return rc;
}
