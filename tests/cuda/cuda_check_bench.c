/*
 * cuda_check_bench.c — bs_cuda_check's benchmark: TFLOP/s of the bf16 forward
 * and backward over N, d and causal, a tile sweep at the headline size, decode
 * bandwidth, next to ceilings measured in the same run (cuBLAS bf16 GEMM, a
 * device-to-device copy) and cuBLAS GEMMs of a transformer layer's projection
 * shapes (rows gemm_proj) for the simulator's tiled GEMM model. Each run stops
 * adding rows when its time budget is spent.
 */
#include <cublas_v2.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tests/cuda/cuda_check.h"

typedef int (*bench_fn)(void *arg);

/* Median seconds of fn over repeated runs, timed with events after a warm-up. */
static int time_median(bench_fn fn, void *arg, double *median_s, int *reps_out) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  if (fn(arg)) return -1; /* warm-up: module load, attribute setting */
  CK(cudaDeviceSynchronize());
  float ms = 0.0f;
  CK(cudaEventRecord(e0, 0));
  if (fn(arg)) return -1;
  CK(cudaEventRecord(e1, 0));
  CK(cudaEventSynchronize(e1));
  CK(cudaEventElapsedTime(&ms, e0, e1));
  double first = ms * 1e-3;
  int reps = first > 1.0 ? 1 : (int)(0.25 / (first > 1e-6 ? first : 1e-6));
  if (reps < 3 && first <= 1.0) reps = 3;
  if (reps > 20) reps = 20;
  double t[20];
  for (int r = 0; r < reps; r++) {
    CK(cudaEventRecord(e0, 0));
    if (fn(arg)) return -1;
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t[r] = ms * 1e-3;
  }
  for (int i = 1; i < reps; i++) /* insertion sort, reps <= 20 */
    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
      double x = t[j];
      t[j] = t[j - 1];
      t[j - 1] = x;
    }
  *median_s = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
  if (reps_out) *reps_out = reps;
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return 0;
}

typedef struct {
  attn_params pf, pb;
  void *q, *k, *v, *g;
  float *o, *lse, *delta, *dq, *dk, *dv;
  void *ws;
  cublasHandle_t blas;
  void *A, *Bm, *Cm;
  int gemm_m, gemm_n, gemm_k; /* column-major C[m x n] = A[m x k] B[k x n] */
  size_t copy_bytes;
} bench_bufs;

static int fn_fwd(void *a) {
  bench_bufs *b = a;
  return attn_cuda_fwd(&b->pf, b->q, b->k, b->v, b->o, b->lse, 0, 0);
}
static int fn_bwd(void *a) {
  bench_bufs *b = a;
  return attn_cuda_bwd(&b->pb, b->q, b->k, b->v, NULL, b->g, b->lse, b->delta, b->dq, b->dk, b->dv, 0);
}
static int fn_decode(void *a) {
  bench_bufs *b = a;
  return attn_cuda_decode(&b->pf, b->q, b->k, b->v, b->o, b->lse, 0, 0, b->ws, 0);
}
static int fn_gemm(void *a) {
  bench_bufs *b = a;
  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t st = cublasGemmEx(b->blas, CUBLAS_OP_N, CUBLAS_OP_N, b->gemm_m, b->gemm_n, b->gemm_k, &alpha, b->A,
                                   CUDA_R_16BF, b->gemm_m, b->Bm, CUDA_R_16BF, b->gemm_k, &beta, b->Cm, CUDA_R_16BF,
                                   b->gemm_m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "bs_cuda_check: cublasGemmEx: status %d\n", (int)st);
    return -1;
  }
  return 0;
}
static int fn_copy(void *a) {
  bench_bufs *b = a;
  CK(cudaMemcpyAsync(b->Cm, b->A, b->copy_bytes, cudaMemcpyDeviceToDevice, 0));
  return 0;
}

static void bench_row(bench_ctx *bc, const char *kernel, int64_t n, int d, int causal, int heads, int tq, int tk,
                      double sec, double flops, double bytes, int reps) {
  double tflops = flops > 0 ? flops / sec * 1e-12 : 0.0, gbs = bytes > 0 ? bytes / sec * 1e-9 : 0.0;
  char line[256];
  snprintf(line, sizeof line, "%-10s %7lld %4d %6s %5d %4dx%-4d %10.3f %9.1f %9.1f %4d\n", kernel, (long long)n, d,
           causal ? "yes" : "no", heads, tq, tk, sec * 1e3, tflops, gbs, reps);
  fputs(line, stdout);
  if (bc->txt) fputs(line, bc->txt);
  if (bc->csv)
    fprintf(bc->csv, "%s,%lld,%d,%d,%d,%d,%d,%.9g,%.6g,%.6g,%d\n", kernel, (long long)n, d, causal, heads, tq, tk, sec,
            tflops, gbs, reps);
  fflush(stdout);
}

static int over_budget(bench_ctx *bc) {
  if (!bc->over && bs_now_s() - bc->t0 > bc->budget_s) {
    bc->over = 1;
    printf("(benchmark budget of %.0f s spent: remaining rows skipped)\n", bc->budget_s);
    if (bc->txt) fprintf(bc->txt, "(benchmark budget of %.0f s spent: remaining rows skipped)\n", bc->budget_s);
  }
  return bc->over;
}

static void free_bench(bench_bufs *b) {
  void *all[] = {b->q, b->k, b->v, b->g, b->o, b->lse, b->delta, b->dq, b->dk, b->dv, b->ws};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]) (void)cudaFree(all[i]);
  b->q = b->k = b->v = b->g = NULL;
  b->o = b->lse = b->delta = b->dq = b->dk = b->dv = NULL;
  b->ws = NULL;
}

/* Allocates and fills (random, never zeros) the tensors of an attention run. */
static int alloc_attn(bench_bufs *b, const attn_params *p, uint64_t seed) {
  const size_t nq = (size_t)p->B * p->Zq * (size_t)p->Nq * p->d;
  const size_t nk = (size_t)p->B * p->Zkv * (size_t)p->Nk * p->d;
  const size_t rows = (size_t)p->B * p->Zq * (size_t)p->Nq, es = esize(p->dtype);
  CK(cudaMalloc(&b->q, nq * es));
  CK(cudaMalloc(&b->k, nk * es));
  CK(cudaMalloc(&b->v, nk * es));
  CK(cudaMalloc(&b->g, nq * es));
  CK(cudaMalloc((void **)&b->o, nq * 4));
  CK(cudaMalloc((void **)&b->lse, rows * 4));
  CK(cudaMalloc((void **)&b->delta, rows * 4));
  CK(cudaMalloc((void **)&b->dq, nq * 4));
  CK(cudaMalloc((void **)&b->dk, nk * 4));
  CK(cudaMalloc((void **)&b->dv, nk * 4));
  CKA(attn_cuda_fill_random(b->q, p->dtype, (int64_t)nq, seed + 1, 1.7f, 0));
  CKA(attn_cuda_fill_random(b->k, p->dtype, (int64_t)nk, seed + 2, 1.7f, 0));
  CKA(attn_cuda_fill_random(b->v, p->dtype, (int64_t)nk, seed + 3, 1.7f, 0));
  CKA(attn_cuda_fill_random(b->g, p->dtype, (int64_t)nq, seed + 4, 1.7f, 0));
  CK(cudaMemset(b->dq, 0, nq * 4));
  CK(cudaMemset(b->dk, 0, nk * 4));
  CK(cudaMemset(b->dv, 0, nk * 4));
  return 0;
}

/* One (N, d, causal) point, forward and backward, tiles from p (0 = default). */
static int bench_point(bench_ctx *bc, bench_bufs *b, int64_t N, int d, int causal, int heads, int ftq, int ftk, int btq,
                       int btk, double *fwd_tf, double *bwd_tf) {
  attn_params p;
  memset(&p, 0, sizeof p);
  p.B = 1;
  p.Zq = p.Zkv = heads;
  p.Nq = p.Nk = N;
  p.d = d;
  p.scale = 1.0f / sqrtf((float)d);
  p.mask.q_stride = p.mask.k_stride = 1;
  p.mask.causal = causal;
  p.dtype = ATTN_BF16;
  b->pf = b->pb = p;
  b->pf.tile_q = ftq;
  b->pf.tile_k = ftk;
  b->pb.tile_q = btq;
  b->pb.tile_k = btk;
  attn_cuda_launch Lf, Lb;
  char msg[160];
  if (attn_cuda_plan(&b->pf, ATTN_CUDA_AUTO, 0, 1, &Lf, msg, sizeof msg) ||
      attn_cuda_plan(&b->pb, ATTN_CUDA_AUTO, 1, 1, &Lb, msg, sizeof msg)) {
    fprintf(stderr, "bs_cuda_check: plan: %s\n", msg);
    return -1;
  }
  if (alloc_attn(b, &p, (uint64_t)N * 131 + (uint64_t)d * 7 + (uint64_t)causal)) return -1;
  double flops = 4.0 * heads * (double)N * (double)N * d * (causal ? 0.5 : 1.0);
  double sec;
  int reps;
  if (time_median(fn_fwd, b, &sec, &reps)) return -1;
  bench_row(bc, "fwd", N, d, causal, heads, Lf.tile_q, Lf.tile_k, sec, flops, 0, reps);
  if (fwd_tf) *fwd_tf = flops / sec * 1e-12;
  /* The backward needs the real lse and delta of this forward. */
  if (fn_fwd(b)) return -1;
  CKA(attn_cuda_delta(&b->pb, b->o, b->g, b->delta, 0));
  if (!over_budget(bc)) {
    if (time_median(fn_bwd, b, &sec, &reps)) return -1;
    bench_row(bc, "bwd", N, d, causal, heads, Lb.tile_q, Lb.tile_k, sec, 2.5 * flops, 0, reps);
    if (bwd_tf) *bwd_tf = 2.5 * flops / sec * 1e-12;
  }
  free_bench(b);
  CK(cudaDeviceSynchronize());
  return 0;
}

int run_bench(bench_ctx *bc, headline *hl) {
  bench_bufs b;
  memset(&b, 0, sizeof b);
  const char *hdr = "kernel           N    d causal heads tiles       time_ms   TFLOP/s      GB/s reps\n";
  fputs(hdr, stdout);
  if (bc->txt) fputs(hdr, bc->txt);
  if (bc->csv) fprintf(bc->csv, "kernel,n,d,causal,heads,tile_q,tile_k,seconds,tflops,gbs,reps\n");

  /* Ceilings measured in this run: cuBLAS bf16 GEMM and a device copy. */
  if (cublasCreate(&b.blas) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "bs_cuda_check: cublasCreate failed\n");
    return -1;
  }
  /* Projection shapes (m tokens, n outputs, k inputs) of LLaMA-2-7B (hidden 4096, QKV 12288,
   * gate+up 22016, ffn 11008) at 512 .. 8192 tokens per GPU, the weight gradient (k = tokens),
   * and m steps of 128 rows across wave boundaries at n = k = 4096. */
  static const int proj[][3] = {{512, 12288, 4096},  {512, 4096, 4096},  {512, 22016, 4096},  {512, 4096, 11008},
                                {2048, 12288, 4096}, {2048, 4096, 4096}, {2048, 22016, 4096}, {2048, 4096, 11008},
                                {8192, 12288, 4096}, {8192, 4096, 4096}, {8192, 22016, 4096}, {8192, 4096, 11008},
                                {4096, 4096, 512},   {4096, 4096, 2048}, {4096, 4096, 8192},  {1024, 4096, 4096},
                                {1152, 4096, 4096},  {1280, 4096, 4096}, {1408, 4096, 4096},  {1536, 4096, 4096},
                                {8320, 4096, 4096},  {8448, 4096, 4096}, {1, 12288, 4096},    {16, 12288, 4096}};
  const int nproj = (int)(sizeof proj / sizeof proj[0]);
  size_t na = (size_t)8192 * 8192, nb = na, nc = na;
  for (int i = 0; i < nproj; i++) {
    size_t a = (size_t)proj[i][0] * proj[i][2], bb = (size_t)proj[i][2] * proj[i][1];
    size_t cc = (size_t)proj[i][0] * proj[i][1];
    if (a > na) na = a;
    if (bb > nb) nb = bb;
    if (cc > nc) nc = cc;
  }
  CK(cudaMalloc(&b.A, na * 2));
  CK(cudaMalloc(&b.Bm, nb * 2));
  CK(cudaMalloc(&b.Cm, nc * 2));
  CKA(attn_cuda_fill_random(b.A, ATTN_BF16, (int64_t)na, 11, 1.0f, 0));
  CKA(attn_cuda_fill_random(b.Bm, ATTN_BF16, (int64_t)nb, 12, 1.0f, 0));
  b.gemm_m = b.gemm_n = b.gemm_k = 8192;
  const size_t gn = (size_t)8192 * 8192;
  double sec;
  int reps;
  if (time_median(fn_gemm, &b, &sec, &reps)) return -1;
  double gflop = 2.0 * (double)gn * 8192;
  hl->gemm_tflops = gflop / sec * 1e-12;
  bench_row(bc, "cublas_gemm", 8192, 0, 0, 1, 0, 0, sec, gflop, 0, reps);
  hl->proj_min = hl->proj_max = 0;
  for (int i = 0; i < nproj && !over_budget(bc); i++) {
    b.gemm_m = proj[i][0];
    b.gemm_n = proj[i][1];
    b.gemm_k = proj[i][2];
    if (time_median(fn_gemm, &b, &sec, &reps)) return -1;
    double fl = 2.0 * proj[i][0] * (double)proj[i][1] * proj[i][2];
    double bytes =
      2.0 * ((double)proj[i][0] * proj[i][2] + (double)proj[i][2] * proj[i][1] + (double)proj[i][0] * proj[i][1]);
    bench_row(bc, "gemm_proj", proj[i][0], proj[i][2], 0, proj[i][1], 0, 0, sec, fl, bytes, reps);
    double tf = fl / sec * 1e-12;
    if (proj[i][0] >= 512 && (hl->proj_min == 0 || tf < hl->proj_min)) hl->proj_min = tf;
    if (tf > hl->proj_max) hl->proj_max = tf;
  }
  b.copy_bytes = gn * 2;
  if (time_median(fn_copy, &b, &sec, &reps)) return -1;
  hl->copy_gbs = 2.0 * (double)b.copy_bytes / sec * 1e-9;
  bench_row(bc, "d2d_copy", (int64_t)b.copy_bytes, 0, 0, 1, 0, 0, sec, 0, 2.0 * (double)b.copy_bytes, reps);
  (void)cudaFree(b.A);
  (void)cudaFree(b.Bm);
  (void)cudaFree(b.Cm);
  b.A = b.Bm = b.Cm = NULL;
  (void)cublasDestroy(b.blas);

  /* The grid; the headline point (16k, d = 128, non-causal) is the 6th of 12, early
   * enough that the budget never cuts it. */
  const int64_t Ns[] = {4096, 16384, 65536};
  const int dims[] = {64, 128};
  for (int ni = 0; ni < 3; ni++)
    for (int di = 0; di < 2; di++)
      for (int causal = 0; causal < 2; causal++) {
        if (over_budget(bc)) break;
        const int64_t N = Ns[ni];
        const int heads = (int)(262144 / N);
        double f = 0, g = 0;
        if (bench_point(bc, &b, N, dims[di], causal, heads, 0, 0, 0, 0, &f, &g)) return -1;
        if (N == 16384 && dims[di] == 128 && !causal) {
          hl->fwd16k = f;
          hl->bwd16k = g;
        }
      }

  /* Tile sweep at the headline point. */
  const int ft[4][2] = {{64, 32}, {64, 64}, {128, 32}, {128, 64}};
  const int bt[4][2] = {{32, 64}, {64, 64}, {32, 128}, {64, 128}};
  for (int ti = 0; ti < 4 && !over_budget(bc); ti++) {
    double f = 0, g = 0;
    if (bench_point(bc, &b, 16384, 128, 0, 16, ft[ti][0], ft[ti][1], bt[ti][0], bt[ti][1], &f, &g)) return -1;
    if (f > hl->best_fwd) {
      hl->best_fwd = f;
      hl->best_fwd_t[0] = ft[ti][0];
      hl->best_fwd_t[1] = ft[ti][1];
    }
    if (g > hl->best_bwd) {
      hl->best_bwd = g;
      hl->best_bwd_t[0] = bt[ti][0];
      hl->best_bwd_t[1] = bt[ti][1];
    }
  }

  /* Decode: one query token per head against 256k keys (GQA 32/8), bandwidth. */
  if (!over_budget(bc)) {
    attn_params p;
    memset(&p, 0, sizeof p);
    p.B = 1;
    p.Zq = 32;
    p.Zkv = 8;
    p.Nq = 1;
    p.Nk = 262144;
    p.d = 128;
    p.scale = 1.0f / sqrtf(128.0f);
    p.mask.q_stride = p.mask.k_stride = 1;
    p.dtype = ATTN_BF16;
    b.pf = b.pb = p;
    if (alloc_attn(&b, &p, 99)) return -1;
    int splits = attn_cuda_decode_splits(&p);
    CK(cudaMalloc(&b.ws, attn_cuda_decode_workspace_bytes(&p, splits)));
    if (time_median(fn_decode, &b, &sec, &reps)) return -1;
    double bytes = 2.0 * p.Zkv * (double)p.Nk * p.d * 2.0;
    hl->decode_gbs = bytes / sec * 1e-9;
    bench_row(bc, "decode", p.Nk, p.d, 0, p.Zq, 1, splits, sec, 4.0 * p.Zq * (double)p.Nk * p.d, bytes, reps);
    free_bench(&b);
  }
  return 0;
}
