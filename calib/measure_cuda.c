/*
 * measure_cuda.c — the measuring side of `burstsim calib --backend cuda`:
 * every kernel the plans name, run through the runtime's COMPUTE executor
 * (runtime/compute.h) with the GPU's kernel table on device memory, in the
 * series and under the names the CPU calibration uses, so the same fits and
 * the same profile writer (profile_build.c) turn them into a profile. Each
 * timed call ends with the host waiting for the compute stream, so the time
 * is the device's (with the launch, as a run sees it). The links are NCCL's
 * (measure_cuda_links.c) when every rank has its own GPU, else Open MPI's
 * host benchmarks (measure_links.c), which the staged runs use.
 *
 * Nothing here includes CUDA: the device comes as runtime/device.h's table.
 */
#include "calib/measure_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "base/fill.h"
#include "kernels/attn.h"
#include "plans/plan.h"
#include "runtime/compute.h"

/* Every row of a call in one launch, as the runtime runs on a GPU. */
#define GPU_TILE ((int64_t)1 << 40)
/* Heads per attention launch: the runtime launches every head of a block at once on a GPU (the
 * backend's whole_heads), so the rates are measured on blocks of this many heads; a GPU holding fewer
 * heads of a block is filled less than the profile's rate says (on an H200, one head of a 8k x 8k
 * block reaches about a third of the rate of 16). */
#define GPU_HEADS 16

/* n random fp32 values (never zeros: a GPU runs zeros faster), stored as fp32 or bf16, on the device. */
static void *dev_random(const bs_rt_device *dev, size_t n, int bf16, uint64_t seed) {
  float *f = malloc((n ? n : 1) * sizeof *f);
  if (!f) return NULL;
  bs_fill_counter(f, n, seed);
  size_t bytes = n * (bf16 ? 2 : 4);
  if (bf16) {
    uint16_t *h = (uint16_t *)f; /* in place: element i is read before element i is written */
    for (size_t i = 0; i < n; i++) h[i] = attn_f32_to_bf16(f[i]);
  }
  void *d = dev->alloc(dev->self, bytes ? bytes : 1);
  if (d && dev->upload(dev->self, d, f, bytes)) {
    dev->free(dev->self, d);
    d = NULL;
  }
  free(f);
  return d;
}

typedef struct {
  const bs_rt_device *dev;
  bs_compute op;
  bs_compute_bufs b;
  void *mem[10];
  int nmem;
  /* projection GEMMs are timed on the table's GEMM directly (the plans only model them) */
  int proj;
  int64_t gm, gn, gk;
} gpu_call;

static void call_free(gpu_call *c) {
  for (int i = 0; i < c->nmem; i++) c->dev->free(c->dev->self, c->mem[i]);
  c->nmem = 0;
}

/* A device buffer of n elements (random when rnd, else zero), remembered for call_free. */
static void *call_buf(gpu_call *c, size_t n, int bf16, int rnd, uint64_t seed) {
  if (c->nmem == 10) return NULL;
  void *p = rnd ? dev_random(c->dev, n, bf16, seed) : c->dev->alloc(c->dev->self, (n ? n : 1) * (bf16 ? 2 : 4));
  if (p) c->mem[c->nmem++] = p;
  return p;
}

static int gpu_op(void *vctx) {
  gpu_call *c = vctx;
  const bs_kernel_backend *be = c->dev->be;
  int rc = 0;
  if (c->proj) {
    be->gemm(0, c->gm, c->gn, c->gk, 1.0f, c->b.in[0], c->gk, c->b.in[1], c->gn, 0.0f, c->b.out[0], c->gn);
  } else {
    bs_compute_ctx x = {be, 1, GPU_TILE, c->op.a.dtype == ATTN_BF16, 0, NULL, NULL};
    char err[160];
    rc = bs_compute_run(&x, &c->op, &c->b, err, sizeof err);
  }
  if (c->dev->sync(c->dev->self)) rc = -1;
  return rc;
}

typedef struct {
  MPI_Comm comm;
  const bs_calib_opts *o;
  bs_calib_data *d;
  const bs_rt_device *dev;
  bs_calib_policy pol;
  double point_budget_s;
  int share;         /* ranks per device: the whole-device-equivalent time is t_med / share */
  double gemm_rate;  /* FLOP/s of the last GEMM timed: a larger one predicted past the budget is skipped */
  double bytes_rate; /* bytes/s of the last pass (delta, merge, elementwise, copy): the same for those */
} gctx;

static void log_point(FILE *f, const bs_calib_kpoint *k, int ranks) {
  if (!f) return;
  fprintf(f, "%17s %-22s %7lld %7lld %10.3f %10.3f %10.3f %9.1f %5d\n", bs_kernel_name((bs_kernel)k->kernel), k->series,
          (long long)k->nq, (long long)(k->nk ? k->nk : k->elems), k->t_med * 1e3, k->t_min * 1e3, k->t_max * 1e3,
          k->t_med > 0 ? k->flops * ranks / k->t_med / 1e12 : 0.0, k->reps);
  fflush(f);
}

/* Times c into a new point (fields set by the caller after); 0, or -1 with a message. */
static int time_point(gctx *g, gpu_call *c, bs_calib_kpoint *k, char *err, size_t errlen) {
  int rc = bs_calib_time(g->comm, &g->pol, gpu_op, c, &k->t_med, &k->t_min, &k->t_max, &k->reps);
  call_free(c);
  if (rc) {
    snprintf(err, errlen, "calib: %s (%s, %lld x %lld) failed on the GPU of some rank",
             bs_kernel_name((bs_kernel)k->kernel), k->series, (long long)k->nq, (long long)k->nk);
    return -1;
  }
  k->t_eff = k->t_med / g->share;
  log_point(g->o->log, k, g->d->ranks);
  return 0;
}

static int attn_series(gctx *g, int bwd, int d, int causal, int bf16, int decode, const int64_t *sizes, int n,
                       char *err, size_t errlen) {
  double rate = 0;
  for (int i = 0; i < n; i++) {
    int64_t nk = sizes[i], nq = decode ? 1 : sizes[i];
    if (!decode && g->o->max_block > 0 && nk > g->o->max_block && i > 0 && sizes[i - 1] >= g->o->max_block) break;
    double flops = GPU_HEADS * (bwd ? 10.0 : 4.0) * d * (double)bs_visible_pairs(nk - nq, nq, 0, nk, 1, causal, 0);
    if (rate > 0 && flops / rate * (g->pol.min_reps + g->pol.warmup) > g->point_budget_s) break;
    gpu_call c;
    memset(&c, 0, sizeof c);
    c.dev = g->dev;
    c.op.kernel = bwd ? BS_K_ATTN_BWD : BS_K_ATTN_FWD;
    c.op.a = attn_params_make(1, GPU_HEADS, GPU_HEADS, nq, nk, d);
    c.op.a.dtype = bf16 ? ATTN_BF16 : ATTN_FP32;
    c.op.a.mask.causal = causal;
    c.op.a.mask.q_pos0 = nk - nq;
    c.op.accumulate = 1;
    size_t nqe = (size_t)GPU_HEADS * nq * d, nke = (size_t)GPU_HEADS * nk * d, nrow = (size_t)GPU_HEADS * nq;
    void *q = call_buf(&c, nqe, bf16, 1, 11), *k = call_buf(&c, nke, bf16, 1, 12), *v = call_buf(&c, nke, bf16, 1, 13);
    void *dout = call_buf(&c, nqe, bf16, 1, 14), *o = call_buf(&c, nqe, 0, 0, 0), *lse = call_buf(&c, nrow, 0, 0, 0);
    void *delta = call_buf(&c, nrow, 0, 0, 0), *dq = call_buf(&c, nqe, 0, 0, 0);
    void *dk = call_buf(&c, nke, 0, 0, 0), *dv = call_buf(&c, nke, 0, 0, 0);
    int ok = q && k && v && dout && o && lse && delta && dq && dk && dv;
    /* lse and delta of the full forward, for the backward */
    if (ok && (g->dev->be->fwd(&c.op.a, q, k, v, o, lse, 0) || g->dev->be->delta(&c.op.a, o, dout, delta) ||
               g->dev->sync(g->dev->self)))
      ok = 0;
    if (!bs_calib_all_ok(g->comm, ok)) {
      call_free(&c);
      snprintf(err, errlen, "calib: device memory or kernel error for attention nq=%lld nk=%lld d=%d", (long long)nq,
               (long long)nk, d);
      return -1;
    }
    c.b.in[0] = q;
    c.b.in[1] = k;
    c.b.in[2] = v;
    if (bwd) {
      c.b.in[3] = o;
      c.b.in[4] = dout;
      c.b.in[5] = lse;
      c.b.in[6] = delta;
      c.b.out[0] = dq;
      c.b.out[1] = dk;
      c.b.out[2] = dv;
    } else {
      c.b.out[0] = o;
      c.b.out[1] = lse;
    }
    bs_calib_kpoint *kp = bs_calib_add_k(g->d);
    if (!kp) {
      call_free(&c);
      snprintf(err, errlen, "calib: out of memory");
      return -1;
    }
    kp->kernel = c.op.kernel;
    snprintf(kp->series, sizeof kp->series, "d%d/%s/%s/%s", d, causal ? "causal" : "full", bf16 ? "bf16" : "fp32",
             decode ? "decode" : "block");
    kp->d = d;
    kp->causal = causal;
    kp->bf16 = bf16;
    kp->decode = decode;
    kp->heads = GPU_HEADS;
    kp->nq = nq;
    kp->nk = nk;
    kp->flops = flops;
    kp->x = sqrt((double)nq * (double)nk);
    if (time_point(g, &c, kp, err, errlen)) return -1;
    rate = flops / kp->t_med;
  }
  return 0;
}

/* delta, merge, the elementwise pass (scale), a device copy, the score GEMM and the projection GEMMs. */
static int misc_point(gctx *g, int kernel, int d, int bf16, int64_t size, const int64_t *proj, char *err,
                      size_t errlen) {
  /* what the point costs, for the budget: FLOPs of a GEMM, bytes of a pass (read + written) */
  double work = kernel == BS_K_GEMM   ? (proj ? 2.0 * (double)proj[0] * (double)proj[1] * (double)proj[2]
                                              : 2.0 * (double)size * (double)size * d)
                : kernel == BS_K_COPY ? 2.0 * (double)size
                                      : 8.0 * (double)size * d;
  double rate = kernel == BS_K_GEMM ? g->gemm_rate : g->bytes_rate;
  if (rate > 0 && work / rate * (g->pol.min_reps + g->pol.warmup) > g->point_budget_s) return 0;
  gpu_call c;
  memset(&c, 0, sizeof c);
  c.dev = g->dev;
  c.op.kernel = (bs_kernel)kernel;
  int64_t rows = size, elems = size * d;
  int ok = 1;
  switch (kernel) {
  case BS_K_ATTN_DELTA:
    c.op.a = attn_params_make(1, 1, 1, rows, rows, d);
    c.op.a.dtype = bf16 ? ATTN_BF16 : ATTN_FP32;
    ok = (c.b.in[0] = call_buf(&c, (size_t)elems, 0, 1, 21)) &&
         (c.b.in[1] = call_buf(&c, (size_t)elems, bf16, 1, 22)) && (c.b.out[0] = call_buf(&c, (size_t)rows, 0, 0, 0));
    break;
  case BS_K_ATTN_MERGE:
    c.op.a.d = d;
    c.op.elems = elems;
    ok = (c.b.in[0] = call_buf(&c, (size_t)elems, 0, 1, 23)) && (c.b.in[1] = call_buf(&c, (size_t)rows, 0, 1, 24)) &&
         (c.b.out[0] = call_buf(&c, (size_t)elems, 0, 1, 25)) && (c.b.out[1] = call_buf(&c, (size_t)rows, 0, 1, 26));
    break;
  case BS_K_ELEMWISE: /* the generic pass of the plans (norms, activations): x *= 1, in place */
    c.op.ew = BS_EW_GENERIC;
    c.op.a.d = d;
    c.op.elems = elems;
    ok = (c.b.out[0] = call_buf(&c, (size_t)elems, 0, 1, 27)) != NULL;
    break;
  case BS_K_COPY:
    c.op.elems = size;
    ok = (c.b.in[0] = call_buf(&c, (size_t)(size / 4 + 1), 0, 1, 28)) &&
         (c.b.out[0] = call_buf(&c, (size_t)(size / 4 + 1), 0, 0, 0));
    break;
  case BS_K_GEMM:
    if (proj) {
      c.proj = 1;
      c.gm = proj[0];
      c.gk = proj[1];
      c.gn = proj[2];
      ok = (c.b.in[0] = call_buf(&c, (size_t)(c.gm * c.gk), 0, 1, 29)) &&
           (c.b.in[1] = call_buf(&c, (size_t)(c.gk * c.gn), 0, 1, 30)) &&
           (c.b.out[0] = call_buf(&c, (size_t)(c.gm * c.gn), 0, 0, 0));
    } else {
      c.op.gemm = BS_GEMM_QK;
      c.op.a = attn_params_make(1, 1, 1, size, size, d);
      c.op.a.scale = 0.125f;
      c.op.ld = size;
      ok = (c.b.in[0] = call_buf(&c, (size_t)(size * d), 0, 1, 31)) &&
           (c.b.in[1] = call_buf(&c, (size_t)(size * d), 0, 1, 32)) &&
           (c.b.out[0] = call_buf(&c, (size_t)(size * size), 0, 0, 0));
    }
    break;
  default: ok = 0;
  }
  if (!bs_calib_all_ok(g->comm, ok)) {
    call_free(&c);
    snprintf(err, errlen, "calib: no device memory for %s size %lld", bs_kernel_name((bs_kernel)kernel),
             (long long)size);
    return -1;
  }
  bs_calib_kpoint *k = bs_calib_add_k(g->d);
  if (!k) {
    call_free(&c);
    snprintf(err, errlen, "calib: out of memory");
    return -1;
  }
  if (proj) bs_calib_kpoint_proj(k, proj[0], proj[1], proj[2]);
  else bs_calib_kpoint_misc(k, kernel, d, bf16, size);
  if (time_point(g, &c, k, err, errlen)) return -1;
  if (kernel == BS_K_GEMM) g->gemm_rate = work / k->t_med;
  else g->bytes_rate = work / k->t_med;
  return 0;
}

static int measure_kernels(gctx *g, char *err, size_t errlen) {
  const bs_calib_opts *o = g->o;
  static const int64_t blocks_full[] = {256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
  /* the quick grid reaches the blocks of a long sequence on one GPU too (--max-block cuts it, and the
   * point budget ends a series when a call gets long): a rate extrapolated from 8k under-states 16k */
  static const int64_t blocks_quick[] = {256, 1024, 4096, 8192, 16384, 32768};
  static const int64_t dec_full[] = {1024, 4096, 16384, 65536, 262144};
  static const int64_t dec_quick[] = {1024, 16384, 65536};
  static const int64_t rows_full[] = {4096, 65536, 262144, 1048576};
  static const int64_t rows_quick[] = {4096, 65536, 1048576};
  static const int64_t copy_full[] = {1 << 20, 16 << 20, 64 << 20, 256 << 20};
  static const int64_t copy_quick[] = {1 << 20, 64 << 20, 256 << 20};
  static const int64_t gemm_full[] = {1024, 2048, 4096, 8192};
  static const int64_t gemm_quick[] = {1024, 4096};
  /* m tokens x k in x n out: QKV / output projections and the MLP of 4096- and 8192-wide layers */
  static const int64_t proj_full[][3] = {{4096, 4096, 4096},  {4096, 4096, 12288}, {4096, 4096, 14336},
                                         {4096, 14336, 4096}, {8192, 8192, 8192},  {8192, 8192, 28672}};
  static const int64_t proj_quick[][3] = {{4096, 4096, 4096}, {4096, 4096, 14336}, {8192, 8192, 8192}};
#define PICK(a, b) \
  (o->quick ? (b) : (a)), (o->quick ? (int)(sizeof(b) / sizeof(b)[0]) : (int)(sizeof(a) / sizeof(a)[0]))
  int types[2], nt = 0;
  if (o->fp32 || !o->bf16) types[nt++] = 0;
  if (o->bf16 || !o->fp32) types[nt++] = 1;
  int ds[2] = {64, 128}, nds = 2;
  if (o->head_dim > 0) {
    ds[0] = o->head_dim;
    nds = 1;
  }
  if (o->log)
    fprintf(o->log,
            "#\n# kernels on %s (%d rank(s), %d per device); time = slowest rank, TFLOP/s = all ranks together\n"
            "#%16s %-22s %7s %7s %10s %10s %10s %9s %5s\n",
            g->dev->name, g->d->ranks, g->share, "kernel", "series", "nq", "nk|elems", "med(ms)", "min(ms)", "max(ms)",
            "TFLOP/s", "reps");
  for (int ti = 0; ti < nt; ti++)
    for (int di = 0; di < nds; di++) {
      int bf16 = types[ti], dd = ds[di];
      for (int causal = 0; causal < 2; causal++)
        for (int bwd = 0; bwd < 2; bwd++)
          if (attn_series(g, bwd, dd, causal, bf16, 0, PICK(blocks_full, blocks_quick), err, errlen)) return -1;
      if (attn_series(g, 0, dd, 0, bf16, 1, PICK(dec_full, dec_quick), err, errlen)) return -1;
      const int64_t *rows = o->quick ? rows_quick : rows_full;
      int nrows = o->quick ? 3 : 4;
      for (int i = 0; i < nrows; i++)
        if (misc_point(g, BS_K_ATTN_DELTA, dd, bf16, rows[i], NULL, err, errlen)) return -1;
    }
  for (int di = 0; di < nds; di++) {
    const int64_t *rows = o->quick ? rows_quick : rows_full, *gs = o->quick ? gemm_quick : gemm_full;
    int nrows = o->quick ? 3 : 4, ngs = o->quick ? 2 : 4;
    for (int i = 0; i < nrows; i++)
      if (misc_point(g, BS_K_ATTN_MERGE, ds[di], 0, rows[i], NULL, err, errlen) ||
          misc_point(g, BS_K_ELEMWISE, ds[di], 0, rows[i], NULL, err, errlen))
        return -1;
    for (int i = 0; i < ngs; i++)
      if (misc_point(g, BS_K_GEMM, ds[di], 0, gs[i], NULL, err, errlen)) return -1;
  }
  int np = o->quick ? 3 : 6;
  for (int i = 0; i < np; i++)
    if (misc_point(g, BS_K_GEMM, 0, 0, 0, o->quick ? proj_quick[i] : proj_full[i], err, errlen)) return -1;
  const int64_t *cs = o->quick ? copy_quick : copy_full;
  int ncs = o->quick ? 3 : 4;
  for (int i = 0; i < ncs; i++)
    if (misc_point(g, BS_K_COPY, 1, 0, cs[i], NULL, err, errlen)) return -1;
#undef PICK
  return 0;
}

int bs_calib_measure_device(MPI_Comm comm, const bs_calib_opts *o, bs_calib_data *d, char *err, size_t errlen) {
  const bs_rt_device *dev = o->device;
  size_t w = sizeof dev->where;
  char *all = calloc((size_t)d->ranks, w);
  if (!bs_calib_all_ok(comm, all != NULL)) {
    free(all);
    snprintf(err, errlen, "calib: out of memory");
    return -1;
  }
  /* ranks on rank 0's device (host and PCI bus id): its time is shared as CPU cores are on the host */
  MPI_Allgather(dev->where, (int)w, MPI_CHAR, all, (int)w, MPI_CHAR, comm);
  int share = bs_dev_sharing(all, w, d->ranks, 0);
  free(all);
  gctx g = {comm, o, d, dev, bs_calib_policy_of(o->quick), o->quick ? 1.0 : 4.0, share > 0 ? share : 1, 0, 0};
  g.pol.min_call_s = 0.002;
  d->threads = 1;
  snprintf(d->kernel_path, sizeof d->kernel_path, "cuda");
  snprintf(d->isa, sizeof d->isa, "cuda");
  snprintf(d->cpu_model, sizeof d->cpu_model, "%s", dev->name);
  if (!o->no_kernels && measure_kernels(&g, err, errlen)) return -1;
  /* the device's own ceilings, for the profile's roofline: the fastest GEMM and device copy seen */
  double gemm_rate = 0, copy_rate = 0;
  for (int i = 0; i < d->nk; i++) {
    const bs_calib_kpoint *k = &d->k[i];
    if (k->kernel == BS_K_GEMM && k->t_med > 0 && k->flops / k->t_med > gemm_rate) gemm_rate = k->flops / k->t_med;
    if (k->kernel == BS_K_COPY && k->t_med > 0 && 2.0 * (double)k->elems / k->t_med > copy_rate)
      copy_rate = 2.0 * (double)k->elems / k->t_med;
  }
  d->fma_peak = gemm_rate * d->ranks / share;
  d->copy_Bps = copy_rate * d->ranks / share;
  int64_t total = dev->mem_total ? dev->mem_total(dev->self) : -1;
  if (total > 0) d->mem_total = total * d->ranks / share; /* the profile's memory per rank: the device's */
  if (o->log)
    fprintf(o->log, "# device ceilings seen: fp32 GEMM %.1f TFLOP/s, device copy (read + write) %.0f GB/s\n",
            gemm_rate / 1e12, copy_rate / 1e9);
  if (o->no_links || d->ranks < 2) return 0;
  return share == 1 ? bs_calib_measure_links_nccl(comm, o, d, err, errlen)
                    : bs_calib_measure_links(comm, o, d, err, errlen);
}
