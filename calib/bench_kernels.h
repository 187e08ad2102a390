/*
 * bench_kernels.h — microbenchmarks of the CPU attention kernels: times the
 * fused forward and backward, the unfused baseline and OpenBLAS sgemm on the
 * attention shapes, next to this machine's FP32 FMA peak measured in the same
 * run. Measuring only: src/cmd_bench.c prints the table and writes the JSON.
 */
#ifndef BURSTSIM_BENCH_KERNELS_H
#define BURSTSIM_BENCH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  char kernel[16]; /* "fwd", "bwd", "unfused_fwd", "sgemm" */
  int B, Z;        /* batch, heads */
  int64_t n;       /* sequence length (query rows = key rows) */
  int d;           /* head dimension */
  int causal;
  double seconds;     /* best of the repetitions */
  double gflops;      /* FLOP convention below / seconds / 1e9 */
  double peak_gflops; /* the FMA peak measured next to this row, in this run */
  double peak_fraction;
  int64_t rss_bytes; /* growth of the peak RSS during one call (extra memory) */
} bs_bench_row;

typedef struct {
  int quick;   /* a small, fast subset (smoke tests) */
  int threads; /* 0 = all cores */
  int heads;   /* 0 = 8 (2 when quick) */
  /* Called after each row when not NULL (progress). */
  void (*on_row)(const bs_bench_row *row, void *ctx);
  void *ctx;
} bs_bench_opts;

/*
 * FLOP convention: forward 4*B*Z*N^2*d, halved when causal; backward 2.5x the
 * forward; sgemm 2*M*N*K per call (here M = N = n, K = d, one call per head).
 */
double bs_bench_flops(const char *kernel, int B, int Z, int64_t n, int d, int causal);

/* FP32 FMA peak in GFLOP/s from a register-only FMA loop on `threads` threads (0 = all). */
double bs_bench_fma_peak(int threads, const char **isa);

/*
 * Runs the benchmark; *rows is malloc'ed (free it); *peak is the best FMA peak
 * seen during the run. Returns 0, or -1 with err set.
 */
int bs_bench_kernels(const bs_bench_opts *o, bs_bench_row **rows, int *nrows, double *peak, const char **isa, char *err,
                     size_t errlen);

#endif
