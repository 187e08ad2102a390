/*
 * cmd_bench.c — `burstsim bench kernels`: the kernel throughput table (shaped
 * like nccl-tests' output) and, with --json, the same rows as a JSON list.
 * The measuring is calib/bench_kernels.c; this file parses options, prints
 * and writes.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "calib/bench_kernels.h"
#include "calib/blas_core.h"
#include "cmd_args.h"
#include "commands.h"
#include "kernels/attn.h"
#include "output.h"

static void bench_usage(FILE *f) {
  fprintf(f,
          "usage: burstsim bench kernels [--backend cpu] [--json FILE] [--quick] [--threads N]\n"
          "                              [--heads Z]\n"
          "\n"
          "Times the CPU attention kernels (fused forward and backward, the unfused\n"
          "sgemm + softmax + sgemm baseline, and sgemm alone on the score shape) for\n"
          "N in {1k, 4k, 16k}, d in {64, 128}, 8 heads, batch 1, and compares each with\n"
          "this machine's FP32 FMA peak measured in the same run.\n"
          "\n"
          "  --backend cpu   the only backend of bench, in every build (a CUDA build times\n"
          "                  its GPU kernels with calib --backend cuda)\n"
          "  --json FILE     also write the rows as a JSON list (\"-\" = stdout)\n"
          "  --quick         a small, fast subset (N in {256, 512}, d 64, 2 heads)\n"
          "  --threads N     threads, 1 .. %d (default: all cores)\n"
          "  --heads Z       heads, 1 .. 1024 (default 8, 2 with --quick)\n"
          "\n"
          "FLOP: forward 4*B*Z*N^2*d (halved when causal), backward 2.5x forward,\n"
          "sgemm 2*Z*N^2*d. time: best of the repetitions. extra MiB: growth of the\n"
          "peak RSS during one call.\n",
          BS_ARGS_MAX_THREADS);
}

typedef struct {
  FILE *out;
} table_ctx;

static void print_row(const bs_bench_row *r, void *vctx) {
  table_ctx *t = vctx;
  char mem[32];
  if (r->rss_bytes >= 0) snprintf(mem, sizeof mem, "%.1f", (double)r->rss_bytes / (1024.0 * 1024.0));
  else snprintf(mem, sizeof mem, "n/a");
  fprintf(t->out, "%13s %3d %3d %7lld %5d %7s %12.3f %10.1f %7.1f %11s\n", r->kernel, r->B, r->Z, (long long)r->n, r->d,
          r->causal ? "yes" : "no", r->seconds * 1e3, r->gflops, 100.0 * r->peak_fraction, mem);
  fflush(t->out);
}

static char *rows_json(const bs_bench_row *rows, int n) {
  cJSON *arr = cJSON_CreateArray();
  if (!arr) return NULL;
  for (int i = 0; i < n; i++) {
    const bs_bench_row *r = &rows[i];
    cJSON *o = cJSON_CreateObject();
    if (!o) {
      cJSON_Delete(arr);
      return NULL;
    }
    cJSON_AddItemToArray(arr, o);
    cJSON_AddStringToObject(o, "kernel", r->kernel);
    cJSON_AddNumberToObject(o, "B", r->B);
    cJSON_AddNumberToObject(o, "Z", r->Z);
    cJSON_AddNumberToObject(o, "n", (double)r->n);
    cJSON_AddNumberToObject(o, "d", r->d);
    cJSON_AddBoolToObject(o, "causal", r->causal);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON_AddNumberToObject(o, "gflops", r->gflops);
    cJSON_AddNumberToObject(o, "peak_gflops", r->peak_gflops);
    cJSON_AddNumberToObject(o, "peak_fraction", r->peak_fraction);
    cJSON_AddNumberToObject(o, "rss_bytes", (double)r->rss_bytes);
  }
  char *s = cJSON_Print(arr);
  cJSON_Delete(arr);
  return s;
}

int cmd_bench(int argc, char **argv) {
  bs_bench_args A;
  char aerr[512];
  if (bs_bench_args_parse(argc, argv, &A, aerr, sizeof aerr)) {
    fprintf(stderr, "burstsim bench: %s\n\n", aerr);
    bench_usage(stderr);
    return 2;
  }
  if (A.help) {
    bench_usage(stdout);
    return 0;
  }
  bs_blas_core_warn("bench");
  const char *json = A.json;
  bs_bench_opts o;
  memset(&o, 0, sizeof o);
  o.quick = A.quick;
  o.threads = A.threads;
  o.heads = A.heads;
  if (json) { /* before minutes of measuring, creating nothing */
    char cerr[1024];
    const bs_path_role outs[] = {{"--json", json}};
    if (bs_out_check_all(outs, 1, NULL, 0, cerr, sizeof cerr)) {
      fprintf(stderr, "burstsim bench kernels: %s\n", cerr);
      return 2;
    }
  }
  table_ctx t = {json && !strcmp(json, "-") ? stderr : stdout};
  o.on_row = print_row;
  o.ctx = &t;
  fprintf(t.out, "# burstsim bench kernels: backend cpu, kernel path %s%s\n", attn_cpu_variant(),
          o.quick ? ", quick subset" : "");
  bs_bench_row *rows = NULL;
  int n = 0;
  double peak = 0;
  const char *isa = "?";
  char err[256] = "";
  fprintf(t.out, "#\n# %11s %3s %3s %7s %5s %7s %12s %10s %7s %11s\n", "kernel", "B", "Z", "N", "d", "causal",
          "time(ms)", "GFLOP/s", "%peak", "extra MiB");
  if (bs_bench_kernels(&o, &rows, &n, &peak, &isa, err, sizeof err)) {
    fprintf(stderr, "burstsim bench kernels: %s\n", err);
    return 1;
  }
  fprintf(t.out,
          "#\n# FP32 FMA peak (%s loop, all threads): best %.1f GFLOP/s in this run;\n"
          "# %%peak compares each row with the peak measured next to it.\n",
          isa, peak);
  int rc = 0;
  if (json) {
    char *s = rows_json(rows, n);
    if (!s) {
      fprintf(stderr, "burstsim bench kernels: out of memory writing JSON\n");
      rc = 1;
    } else {
      size_t len = strlen(s);
      char *withnl = malloc(len + 2);
      if (!withnl) {
        fprintf(stderr, "burstsim bench kernels: out of memory writing JSON\n");
        rc = 1;
      } else {
        memcpy(withnl, s, len);
        withnl[len] = '\n';
        withnl[len + 1] = 0;
        if (bs_write_file(json, withnl, len + 1, err, sizeof err)) {
          fprintf(stderr, "burstsim bench kernels: --json %s\n", err);
          rc = 1;
        }
        free(withnl);
      }
      free(s);
    }
  }
  free(rows);
  return rc;
}
