/*
 * cuda_check.h — what the parts of bs_cuda_check share: the check counters and
 * log, CUDA error macros, host numbers (random inputs rounded to a dtype), the
 * float64 reference, comparison, device transfer helpers, and the two halves
 * the driver runs (correctness in cuda_check_cases.c, benchmark in
 * cuda_check_bench.c).
 */
#ifndef BS_TESTS_CUDA_CHECK_H
#define BS_TESTS_CUDA_CHECK_H

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include "base/clock.h"
#include "kernels/cuda/attn_cuda.h"

typedef struct {
  FILE *log;          /* correctness.txt (or NULL) */
  int pass, fail;     /* checks */
  double worst[3][2]; /* [dtype: bf16, fp16, fp32][0 fwd, 1 bwd] worst relative error */
  uint64_t seed;
  int verbose;
} check_ctx;

#define CK(call)                                                                                            \
  do {                                                                                                      \
    cudaError_t e_ = (call);                                                                                \
    if (e_ != cudaSuccess) {                                                                                \
      fprintf(stderr, "bs_cuda_check: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      return -1;                                                                                            \
    }                                                                                                       \
  } while (0)

#define CKA(call)                                                                                           \
  do {                                                                                                      \
    int a_ = (call);                                                                                        \
    if (a_ != ATTN_OK) {                                                                                    \
      fprintf(stderr, "bs_cuda_check: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, attn_cuda_strerror(a_)); \
      return -1;                                                                                            \
    }                                                                                                       \
  } while (0)

/* cuda_check_host.c: the log, host numbers, comparison, device helpers (the clock is base/clock.h). */
void say(check_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double rng_normal(uint64_t *s);
void make_tensor(uint64_t *rng, attn_dtype dt, size_t n, float *vals, void *raw);
size_t esize(attn_dtype dt);
int compare(check_ctx *c, const char *what, const float *got, const double *ref, size_t n, double bound,
            double *rel_out);
int dtype_index(attn_dtype dt);
const char *dtype_name(attn_dtype dt);
double bound_for(attn_dtype dt);
void note_worst(check_ctx *c, attn_dtype dt, int bwd, double rel);
int upload(void **dptr, const void *src, size_t bytes);
int download_f(float *dst, const float *src, size_t n);
int call_failed(check_ctx *c, const char *what, int err);

/* cuda_check_ref.c: the float64 reference. */
void ref_fwd(const attn_params *p, const float *q, const float *k, const float *v, double *o, double *lse);
void ref_bwd(const attn_params *p, const float *q, const float *k, const float *v, const float *dout, const double *o,
             const double *lse, double *dq, double *dk, double *dv);

/* cuda_check_cases.c: every correctness case. which: 0 every path, 1 the simple path (and decode,
 * merge), 2 the MMA path. Returns -1 on a CUDA error (check results are counted in c). */
int run_correctness(check_ctx *c, int quick, int which);

/* cuda_check_bench.c: the benchmark rows and the headline figures of the summary. */
typedef struct {
  FILE *txt, *csv;
  double t0, budget_s; /* wall clock start and budget of the benchmark part */
  int over;            /* the budget ran out: later rows are skipped */
} bench_ctx;

typedef struct {
  double gemm_tflops, copy_gbs;
  double proj_min, proj_max; /* TFLOP/s over the projection shapes (min over m >= 512) */
  double fwd16k, bwd16k;     /* default tiles, N = 16k, d = 128, non-causal */
  double best_fwd, best_bwd; /* best over the tile sweep */
  int best_fwd_t[2], best_bwd_t[2];
  double decode_gbs;
} headline;

int run_bench(bench_ctx *bc, headline *hl);

#endif
