/*
 * measure_kernels.c — the kernel microbenchmarks of `burstsim calib`: every
 * kernel the plans name, run through the runtime's own COMPUTE executor
 * (runtime/compute.h) on the CPU backend, so a profile times exactly the calls
 * a run makes (attention per head in the runtime's query-row tiles). Sizes
 * grow along a grid until a time budget; all ranks run each point at once.
 */
#include "calib/measure.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "base/fill.h"
#include "kernels/attn.h"
#include "kernels/backend.h"
#include "plans/plan.h"
#include "runtime/compute.h"

/* ------------------------------------------------------------ buffers */

/* A decode call reads its keys and values once, as a decode step reads the KV cache: the calls of a
 * decode point rotate over copies of K and V of at least this many bytes together, so that they come
 * from memory, not from a cache the previous repetition filled (1 x 4K keys x d 64 in fp32 is 2 MiB,
 * inside this machine's L2; a step of 4 heads reads 8 MiB and ran 4x slower per head than such a
 * cache-hot point). */
#define DECODE_STREAM_BYTES ((size_t)96 << 20)
#define DECODE_MAX_SETS 256

/* q, k, v, dout stored in the kernel's type; everything else fp32. */
typedef struct {
  attn_params p; /* one head, the whole block */
  int unfused;
  void *q, *k, *v, *dout;
  float *o, *lse, *dq, *dk, *dv, *delta, *ws;
  size_t ws_bytes;
  void *kset[DECODE_MAX_SETS], *vset[DECODE_MAX_SETS]; /* decode: more copies of k and v, read in turn */
  int nsets, turn;
} attn_bench;

static void attn_bench_free(attn_bench *b) {
  for (int i = 0; i < b->nsets; i++) {
    free(b->kset[i]);
    free(b->vset[i]);
  }
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
  bs_fill_counter(f, n, seed);
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
    s.Nq = nq < BS_COMPUTE_TILE_ROWS ? nq : BS_COMPUTE_TILE_ROWS;
    size_t w = attn_unfused_workspace_bytes(&s), w2 = attn_unfused_bwd_workspace_bytes(&s);
    b->ws_bytes = w > w2 ? w : w2;
    b->ws = malloc(b->ws_bytes);
  }
  if (!b->q || !b->k || !b->v || !b->dout || !b->o || !b->lse || !b->delta || !b->dq || !b->dk || !b->dv ||
      (unfused && !b->ws)) {
    attn_bench_free(b);
    return -1;
  }
  if (nq == 1) {
    size_t set = 2 * nke * (bf16 ? 2 : 4), want = (DECODE_STREAM_BYTES + set - 1) / set;
    for (size_t i = 1; i < want && b->nsets < DECODE_MAX_SETS; i++) {
      void *k = typed_random(nke, bf16, 12 + 2 * i), *v = typed_random(nke, bf16, 13 + 2 * i);
      b->kset[b->nsets] = k;
      b->vset[b->nsets++] = v;
      if (!k || !v) {
        attn_bench_free(b);
        return -1;
      }
    }
  }
  /* lse and delta of the full forward, for the backward. */
  if (attn_fwd(&b->p, b->q, b->k, b->v, b->o, b->lse, 0) || attn_delta(&b->p, b->o, b->dout, b->delta)) {
    attn_bench_free(b);
    return -1;
  }
  return 0;
}

/* The executor's context: the CPU backend, the runtime's default tile, no communicator to poll. */
static bs_compute_ctx compute_ctx(int threads) {
  bs_compute_ctx x = {bs_kernel_backend_cpu(), threads, BS_COMPUTE_TILE_ROWS, 0, 0, NULL, NULL};
  return x;
}

typedef struct {
  attn_bench *b;
  int bwd;
} attn_call;

/* One attention op of one head, executed as the runtime executes it (runtime/compute.h). */
static int attn_op(void *vctx) {
  attn_call *c = vctx;
  attn_bench *b = c->b;
  bs_compute op;
  bs_compute_bufs bufs;
  memset(&op, 0, sizeof op);
  memset(&bufs, 0, sizeof bufs);
  op.kernel = c->bwd ? (b->unfused ? BS_K_ATTN_BWD_UNFUSED : BS_K_ATTN_BWD)
                     : (b->unfused ? BS_K_ATTN_FWD_UNFUSED : BS_K_ATTN_FWD);
  op.a = b->p;
  op.accumulate = 1;
  bufs.in[0] = b->q;
  bufs.in[1] = b->k;
  bufs.in[2] = b->v;
  if (b->nsets > 0 && b->turn > 0) { /* decode: the next copy of K and V (turn 0: the originals) */
    bufs.in[1] = b->kset[b->turn - 1];
    bufs.in[2] = b->vset[b->turn - 1];
  }
  if (b->nsets > 0) b->turn = (b->turn + 1) % (b->nsets + 1);
  if (!c->bwd) {
    bufs.in[3] = b->ws;
    bufs.out[0] = b->o;
    bufs.out[1] = b->lse;
  } else {
    bufs.in[3] = b->o;
    bufs.in[4] = b->dout;
    bufs.in[5] = b->lse;
    bufs.in[6] = b->delta;
    bufs.in[7] = b->ws;
    bufs.out[0] = b->dq;
    bufs.out[1] = b->dk;
    bufs.out[2] = b->dv;
  }
  bufs.ws_bytes = (int64_t)b->ws_bytes;
  bs_compute_ctx x = compute_ctx(b->p.threads);
  char err[160];
  return bs_compute_run(&x, &op, &bufs, err, sizeof err);
}

/* ------------------------------------------------------- other kernels */

typedef struct {
  int kind; /* bs_kernel */
  int64_t rows, d, bytes, n;
  int64_t gm, gn, gk; /* GEMM of a projection shape: [gm x gk] x [gk x gn] (0: the score shape n x n x d) */
  int threads, bf16;
  float *a, *b, *c, *e, *f;
  void *dout;
} misc_call;

/* A projection as a transformer layer issues it: Y[tokens x out] = X[tokens x in] W[in x out]. The plans
 * model these GEMMs without computing them, so the backend's GEMM is timed directly. */
static int proj_op(misc_call *m) {
  bs_kernel_backend_cpu()->gemm(0, m->gm, m->gn, m->gk, 1.0f, m->a, m->gk, m->b, m->gn, 0.0f, m->c, m->gn);
  return 0;
}

/* delta, merge, the tree rescale, a copy or the score GEMM of one head, executed as the runtime executes them. */
static int misc_op(void *vctx) {
  misc_call *m = vctx;
  if (m->kind == BS_K_GEMM && m->gk > 0) return proj_op(m);
  bs_compute op;
  bs_compute_bufs b;
  memset(&op, 0, sizeof op);
  memset(&b, 0, sizeof b);
  op.kernel = (bs_kernel)m->kind;
  switch (m->kind) {
  case BS_K_ATTN_DELTA:
    op.a = attn_params_make(1, 1, 1, m->rows, m->rows, (int)m->d);
    op.a.dtype = m->bf16 ? ATTN_BF16 : ATTN_FP32;
    b.in[0] = m->a;
    b.in[1] = m->dout;
    b.out[0] = m->c;
    break;
  case BS_K_ATTN_MERGE:
    op.a.d = (int)m->d;
    op.elems = m->rows * m->d;
    b.in[0] = m->b;
    b.in[1] = m->e;
    b.out[0] = m->a;
    b.out[1] = m->c;
    break;
  case BS_K_ELEMWISE:
    /* The tree rescale: num = o * exp(lse - m), den = exp(lse - m). */
    op.ew = BS_EW_TREE_RESCALE;
    op.a.d = (int)m->d;
    op.elems = m->rows * m->d;
    b.in[0] = m->a;
    b.in[1] = m->c;
    b.in[2] = m->e;
    b.out[0] = m->b;
    b.out[1] = m->f;
    break;
  case BS_K_COPY:
    op.elems = m->bytes;
    b.in[0] = m->a;
    b.out[0] = m->b;
    break;
  case BS_K_GEMM:
    /* The score GEMM of one head: S = scale * q k^T. */
    op.gemm = BS_GEMM_QK;
    op.a = attn_params_make(1, 1, 1, m->n, m->n, (int)m->d);
    op.a.scale = 0.125f;
    op.ld = m->n;
    b.in[0] = m->a;
    b.in[1] = m->b;
    b.out[0] = m->c;
    break;
  default: return -1;
  }
  bs_compute_ctx x = compute_ctx(m->threads);
  char err[160];
  return bs_compute_run(&x, &op, &b, err, sizeof err);
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
  case BS_K_COPY:
    big = (size_t)m->bytes / sizeof(float) + 1;
    small = 1;
    break;
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
  bs_fill_counter(m->a, na, 22);
  bs_fill_counter(m->b, nb, 23);
  bs_fill_counter(m->c, nc, 24);
  bs_fill_counter(m->e, small, 25);
  return 0;
}

static void log_kpoint(FILE *f, const bs_calib_kpoint *k, int ranks) {
  if (!f) return;
  fprintf(f, "%17s %-22s %7lld %7lld %10.3f %10.3f %10.3f %9.2f %5d\n", bs_kernel_name((bs_kernel)k->kernel), k->series,
          (long long)k->nq, (long long)(k->nk ? k->nk : k->elems), k->t_med * 1e3, k->t_min * 1e3, k->t_max * 1e3,
          k->t_med > 0 ? k->flops * ranks / k->t_med / 1e9 : 0.0, k->reps);
  fflush(f);
}

/* ------------------------------------------------------------- series */

static double attn_flops(int bwd, int64_t nq, int64_t nk, int d, int causal) {
  int64_t pairs = bs_visible_pairs(nk - nq, nq, 0, nk, 1, causal, 0);
  return (bwd ? 10.0 : 4.0) * d * (double)pairs;
}

typedef struct {
  MPI_Comm comm;
  const bs_calib_opts *o;
  bs_calib_data *d;
  bs_calib_policy pol;
  double point_budget_s; /* skip a point whose estimated batch time exceeds this */
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
    if (!bs_calib_all_ok(c->comm, ok)) {
      if (ok) attn_bench_free(&b);
      snprintf(err, errlen, "calib: out of memory (or kernel error) for %s nq=%lld nk=%lld d=%d",
               bs_kernel_name((bs_kernel)kernel), (long long)nq, (long long)nk, d);
      return -1;
    }
    bs_calib_kpoint *k = bs_calib_add_k(c->d);
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
    int rc = bs_calib_time(c->comm, &c->pol, attn_op, &call, &k->t_med, &k->t_min, &k->t_max, &k->reps);
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
    if (!bs_calib_all_ok(c->comm, ok)) {
      misc_free(&m);
      snprintf(err, errlen, "calib: out of memory for %s size %lld", bs_kernel_name((bs_kernel)kernel),
               (long long)sizes[i]);
      return -1;
    }
    bs_calib_kpoint *k = bs_calib_add_k(c->d);
    if (!k) {
      misc_free(&m);
      snprintf(err, errlen, "calib: out of memory");
      return -1;
    }
    bs_calib_kpoint_misc(k, kernel, d, bf16, sizes[i]);
    int rc = bs_calib_time(c->comm, &c->pol, misc_op, &m, &k->t_med, &k->t_min, &k->t_max, &k->reps);
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
    if (!bs_calib_all_ok(c->comm, ok)) {
      misc_free(&m);
      snprintf(err, errlen, "calib: out of memory for a %lld x %lld x %lld GEMM", (long long)m.gm, (long long)m.gk,
               (long long)m.gn);
      return -1;
    }
    bs_calib_kpoint *k = bs_calib_add_k(c->d);
    if (!k) {
      misc_free(&m);
      snprintf(err, errlen, "calib: out of memory");
      return -1;
    }
    bs_calib_kpoint_proj(k, m.gm, m.gk, m.gn);
    /* OpenBLAS on the rank's own threads, as the other kernels run (and `bench kernels` times sgemm). */
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(m.threads);
    int rc = bs_calib_time(c->comm, &c->pol, misc_op, &m, &k->t_med, &k->t_min, &k->t_max, &k->reps);
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

int bs_calib_measure_kernels(MPI_Comm comm, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen) {
  kctx c = {comm, o, d, bs_calib_policy_of(o->quick), o->quick ? 2.5 : 6.0};
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
  static const int64_t proj_quick[][3] = {
    {256, 512, 512}, {512, 1024, 1024}, {1024, 2048, 2048}, {2048, 4096, 1024}, {256, 4096, 4096}};
  static const int64_t proj_full[][3] = {{256, 512, 512},    {512, 1024, 1024},   {1024, 2048, 2048},
                                         {2048, 4096, 1024}, {256, 4096, 4096},   {1024, 4096, 4096},
                                         {2048, 4096, 4096}, {1024, 4096, 11008}, {1024, 11008, 4096}};
#define PICK(a, b) \
  (o->quick ? (b) : (a)), (o->quick ? (int)(sizeof(b) / sizeof(b)[0]) : (int)(sizeof(a) / sizeof(a)[0]))
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
