/*
 * bs_cuda_check.c — the GPU check and benchmark driver of the CUDA backend,
 * run by scripts/device-check.sh on a GPU machine (and by ctest, quick mode).
 *
 * 1. Correctness against a float64 CPU reference written here, on fresh
 *    random inputs (the seed is printed): forward, the accumulate merge over
 *    two key blocks, backward (D and O variants), causal with offsets, fully
 *    masked rows, sliding windows with strides, GQA, odd sizes, decode, merge;
 *    both the tensor-core (mma) and the simple path; bf16, fp16, fp32.
 *    Outputs are poisoned with NaN first; any non-finite value fails.
 * 2. Benchmark (unless --quick): TFLOP/s of forward and backward, bf16, at
 *    N = 4k, 16k, 64k, d in {64, 128}, causal and not; a tile sweep at the
 *    headline size; decode bandwidth; next to the cuBLAS bf16 GEMM ceiling and
 *    a device-to-device copy measured in the same run, and cuBLAS bf16 GEMMs of
 *    the projection shapes a transformer layer issues (rows "gemm_proj": n = m
 *    tokens, d = k, heads = n outputs), for fitting the simulator's tiled GEMM
 *    model (profile/profile.h: peak_fraction, tile and wave quantization, k_overhead).
 *
 * Exit: 0 all checks passed, 1 a check failed or a CUDA call failed, 2 usage,
 * 77 no CUDA device (ctest SKIP_RETURN_CODE). FLOP convention as the CPU
 * bench: forward 4*B*Z*Nq*Nk*d (halved when causal), backward 2.5x forward.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "tests/cuda/cuda_check.h"

#define SKIP_CODE 77

/* ---- main ------------------------------------------------------------------------ */

static void usage(void) {
  fprintf(stderr,
          "usage: bs_cuda_check [--quick] [--no-bench | --bench-only] [--path simple|mma|all]\n"
          "                     [--out DIR] [--seed N] [--budget SECONDS]\n"
          "  --quick       a reduced correctness set, no benchmark (ctest)\n"
          "  --path P      correctness of one path only (separate processes: a fault in one\n"
          "                path does not hide the other's results)\n"
          "  --bench-only  skip the correctness checks\n"
          "  --out DIR     append to correctness.txt and summary.txt, write bench.txt, bench.csv\n"
          "exit: 0 pass, 1 a check failed, 2 usage, 77 no CUDA device\n");
}

static FILE *open_in(const char *dir, const char *name, const char *mode) {
  if (!dir) return NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, mode);
  if (!f) fprintf(stderr, "bs_cuda_check: cannot write %s: %s\n", path, strerror(errno));
  return f;
}

/* The summary, last on standard output and appended to OUTDIR/summary.txt: the device, the seed,
 * the correctness counts and worst errors (pname NULL: not checked), the headline figures of the
 * benchmark (hl NULL: not run). */
static void write_summary(const char *out, const char *devline, uint64_t seed, const char *pname, const check_ctx *c,
                          int crc, const headline *hl, int brc) {
  char sum[4096];
  int n = 0;
  n += snprintf(sum + n, sizeof sum - n, "== bs_cuda_check%s%s ==\n%s", pname ? " --path " : " --bench-only",
                pname ? pname : "", devline);
  n += snprintf(sum + n, sizeof sum - n, "seed %llu\n", (unsigned long long)seed);
  if (pname) {
    n += snprintf(sum + n, sizeof sum - n, "correctness %-6s %d passed, %d failed%s\n", pname, c->pass, c->fail,
                  crc ? " (stopped by a CUDA error)" : "");
    const char *dn[3] = {"bf16", "fp16", "fp32"};
    for (int i = 0; i < 3; i++)
      if (c->worst[i][0] > 0 || c->worst[i][1] > 0)
        n += snprintf(sum + n, sizeof sum - n, "worst rel err    %s fwd %.2e  bwd %.2e  (bound %.1e)\n", dn[i],
                      c->worst[i][0], c->worst[i][1],
                      bound_for(i == 0   ? ATTN_BF16
                                : i == 1 ? ATTN_CUDA_FP16
                                         : ATTN_FP32));
  }
  if (hl) {
    n += snprintf(sum + n, sizeof sum - n, "cuBLAS bf16 GEMM 8192^3: %.1f TFLOP/s; d2d copy %.0f GB/s\n",
                  hl->gemm_tflops, hl->copy_gbs);
    n += snprintf(sum + n, sizeof sum - n,
                  "cuBLAS bf16 projection GEMMs (rows gemm_proj of bench.csv): %.1f .. %.1f TFLOP/s\n", hl->proj_min,
                  hl->proj_max);
    n += snprintf(sum + n, sizeof sum - n,
                  "fwd N=16k d=128 bf16 non-causal: %.1f TFLOP/s default tiles, best %.1f (%dx%d); target >= 300\n",
                  hl->fwd16k, hl->best_fwd, hl->best_fwd_t[0], hl->best_fwd_t[1]);
    n += snprintf(sum + n, sizeof sum - n,
                  "bwd N=16k d=128 bf16 non-causal: %.1f TFLOP/s default tiles, best %.1f (%dx%d); target >= 200\n",
                  hl->bwd16k, hl->best_bwd, hl->best_bwd_t[0], hl->best_bwd_t[1]);
    n += snprintf(sum + n, sizeof sum - n, "decode 256k keys bf16: %.0f GB/s of K/V\n", hl->decode_gbs);
    if (brc) n += snprintf(sum + n, sizeof sum - n, "benchmark stopped by an error (see log)\n");
  }
  fputs(sum, stdout);
  FILE *sf = open_in(out, "summary.txt", "a");
  if (sf) {
    fputs(sum, sf);
    fclose(sf);
  }
}

int main(int argc, char **argv) {
  int quick = 0, bench = 1, check = 1, which = 0;
  const char *out = NULL;
  double budget = 200.0;
  uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) {
      quick = 1;
      bench = 0;
    } else if (!strcmp(argv[i], "--no-bench")) {
      bench = 0;
    } else if (!strcmp(argv[i], "--bench-only")) {
      check = 0;
    } else if (!strcmp(argv[i], "--path") && i + 1 < argc) {
      const char *w = argv[++i];
      which = !strcmp(w, "simple") ? 1 : !strcmp(w, "mma") ? 2 : !strcmp(w, "all") ? 0 : -1;
      if (which < 0) {
        fprintf(stderr, "bs_cuda_check: --path takes simple, mma or all\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
      out = argv[++i];
    } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
      seed = strtoull(argv[++i], NULL, 0);
    } else if (!strcmp(argv[i], "--budget") && i + 1 < argc) {
      budget = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage();
      return 0;
    } else {
      fprintf(stderr, "bs_cuda_check: unknown argument '%s'\n", argv[i]);
      usage();
      return 2;
    }
  }
  int ndev = 0;
  char msg[256];
  if (attn_cuda_device_count(&ndev, msg, sizeof msg) != ATTN_OK) {
    printf("SKIP: no CUDA device (%s); the GPU checks need one\n", msg);
    return SKIP_CODE;
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    printf("SKIP: cudaGetDeviceProperties failed on device 0\n");
    return SKIP_CODE;
  }
  if (prop.major < 8) {
    printf("SKIP: device 0 (%s) is sm_%d%d; the kernels are built for sm_80 and up\n", prop.name, prop.major,
           prop.minor);
    return SKIP_CODE;
  }
  if (out) {
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
      fprintf(stderr, "bs_cuda_check: cannot create %s: %s\n", out, strerror(errno));
      return 2;
    }
  }
  char devline[512];
  snprintf(devline, sizeof devline, "device: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB, smem/block opt-in %zu KiB\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount,
           (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), prop.l2CacheSize >> 20,
           prop.sharedMemPerBlockOptin >> 10);
  fputs(devline, stdout);

  check_ctx c;
  memset(&c, 0, sizeof c);
  c.seed = seed;
  c.verbose = 1;
  const char *pname = which == 1 ? "simple" : which == 2 ? "mma" : "all";
  int crc = 0;
  if (check) {
    c.log = open_in(out, "correctness.txt", "a");
    say(&c, "correctness (path %s), seed %llu (rerun with --path %s --seed %llu)\n", pname, (unsigned long long)seed,
        pname, (unsigned long long)seed);
    double t0 = bs_now_s();
    crc = run_correctness(&c, quick, which);
    double tcheck = bs_now_s() - t0;
    say(&c, "correctness (path %s): %d passed, %d failed%s (%.1f s)\n", pname, c.pass, c.fail,
        crc ? ", stopped by a CUDA error" : "", tcheck);
    if (c.log) fclose(c.log);
  }

  headline hl;
  memset(&hl, 0, sizeof hl);
  int brc = 0;
  if (bench && crc == 0) {
    bench_ctx bc;
    memset(&bc, 0, sizeof bc);
    bc.t0 = bs_now_s();
    bc.budget_s = budget;
    bc.txt = open_in(out, "bench.txt", "w");
    bc.csv = open_in(out, "bench.csv", "w");
    if (bc.txt) fputs(devline, bc.txt);
    brc = run_bench(&bc, &hl);
    if (bc.txt) fclose(bc.txt);
    if (bc.csv) fclose(bc.csv);
  }

  write_summary(out, devline, seed, check ? pname : NULL, &c, crc, bench && crc == 0 ? &hl : NULL, brc);
  return (crc || brc || c.fail) ? 1 : 0;
}
