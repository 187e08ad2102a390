/*
 * run_driver.c — the runtime tests' MPI program: builds a config from
 * key=value arguments (independent of the scenario parser), runs it with
 * verification against the single-rank reference, prints a one-line summary
 * on rank 0 and exits 0 only when every output is within the bound.
 * Fault hooks: fault=exit|stall fault_rank=R fault_step=S timeout=T.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "runtime/runtime.h"

static int set(bs_config *c, bs_runtime_opts *o, const char *k, const char *v) {
  if (!strcmp(k, "method")) {
    for (int m = 0; m < BS_METHOD_COUNT; m++)
      if (!strcmp(v, bs_method_name((bs_method)m))) {
        c->par.method = (bs_method)m;
        return 0;
      }
    return -1;
  }
  if (!strcmp(k, "layout")) {
    for (int l = 0; l <= BS_STRIPED; l++)
      if (!strcmp(v, bs_layout_name((bs_layout)l))) {
        c->par.layout = (bs_layout)l;
        return 0;
      }
    return -1;
  }
  if (!strcmp(k, "phase")) {
    for (int l = 0; l <= BS_DECODE; l++)
      if (!strcmp(v, bs_phase_name((bs_phase)l))) {
        c->work.phase = (bs_phase)l;
        return 0;
      }
    return -1;
  }
  if (!strcmp(k, "dtype")) {
    c->model.dtype = !strcmp(v, "bf16") ? BS_BF16 : !strcmp(v, "fp16") ? BS_FP16 : BS_FP32;
    return 0;
  }
  if (!strcmp(k, "fault")) {
    o->fault = !strcmp(v, "exit") ? BS_FAULT_EXIT : !strcmp(v, "stall") ? BS_FAULT_STALL : BS_FAULT_NONE;
    return 0;
  }
  long long x = atoll(v);
  if (!strcmp(k, "N")) c->work.seq_len = x;
  else if (!strcmp(k, "heads")) c->model.heads = x;
  else if (!strcmp(k, "kv")) c->model.kv_heads = x;
  else if (!strcmp(k, "d")) c->model.head_dim = x;
  else if (!strcmp(k, "batch")) c->work.batch = x;
  else if (!strcmp(k, "causal")) c->work.causal = (int)x;
  else if (!strcmp(k, "window")) c->work.window = x;
  else if (!strcmp(k, "lao")) c->par.lao = (int)x;
  else if (!strcmp(k, "bwd_opt")) c->par.bwd_opt = (int)x;
  else if (!strcmp(k, "double_ring")) c->par.double_ring = x ? BS_ON : BS_OFF;
  else if (!strcmp(k, "rpn")) c->par.ranks_per_node = (int)x;
  else if (!strcmp(k, "ulysses_degree")) c->par.ulysses_degree = (int)x;
  else if (!strcmp(k, "ring_first")) c->par.ulysses_placement = x ? BS_RING_FIRST : BS_HEAD_FIRST;
  else if (!strcmp(k, "tp_variant")) c->par.tp_variant = (int)x;
  else if (!strcmp(k, "decode_tokens")) c->work.decode_tokens = x;
  else if (!strcmp(k, "seed")) c->seed = (uint64_t)x;
  else if (!strcmp(k, "fault_rank")) o->fault_rank = (int)x;
  else if (!strcmp(k, "fault_step")) o->fault_step = (int)x;
  else if (!strcmp(k, "timeout")) o->timeout_s = (double)x;
  else if (!strcmp(k, "tile")) o->tile_rows = x;
  else if (!strcmp(k, "threads")) o->threads = (int)x;
  else if (!strcmp(k, "overlap")) o->warmup = x ? -1 : 0; /* marker: run the overlap benchmark */
  else if (!strcmp(k, "reps")) o->fault_step = o->fault == BS_FAULT_NONE ? (int)x : o->fault_step;
  else return -1;
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bs_config c;
  bs_config_default(&c);
  c.model.heads = 4;
  c.model.kv_heads = 2;
  c.model.head_dim = 32;
  c.model.dtype = BS_FP32;
  c.work.seq_len = 192;
  c.work.phase = BS_TRAIN;
  c.par.gpus = size;
  c.par.ranks_per_node = size;
  c.par.double_ring = BS_OFF;
  c.par.ulysses_degree = 1;
  bs_runtime_opts o;
  memset(&o, 0, sizeof o);
  o.verify = 1;
  o.threads = 1;
  o.timeout_s = 60;
  for (int i = 1; i < argc; i++) {
    char k[64];
    const char *eq = strchr(argv[i], '=');
    if (!eq || eq - argv[i] >= (int)sizeof k) goto bad;
    memcpy(k, argv[i], (size_t)(eq - argv[i]));
    k[eq - argv[i]] = 0;
    if (set(&c, &o, k, eq + 1)) goto bad;
    continue;
  bad:
    if (rank == 0) fprintf(stderr, "run_driver: bad argument '%s'\n", argv[i]);
    MPI_Finalize();
    return 2;
  }
  c.model.hidden = c.model.heads * c.model.head_dim; /* tp: the block's activations */
  if (o.warmup < 0) { /* overlap benchmark: reps travel in fault_step when no fault is set */
    bs_overlap_result ov;
    char e[512] = "";
    o.warmup = 0;
    int reps = o.fault == BS_FAULT_NONE ? o.fault_step : 0;
    o.fault_step = 0;
    int rc = bs_runtime_overlap_bench(&c, MPI_COMM_WORLD, &o, reps, &ov, e, sizeof e);
    if (rc == BS_RUN_EFATAL) MPI_Abort(MPI_COMM_WORLD, 3);
    if (rank == 0) {
      if (rc) printf("input error: %s\n", e);
      else
        printf(
          "overlap: ranks %d threads %d block %lld tokens heads %lld d %lld, %lld B/step, %d reps: compute %.6f s, "
          "comm %.6f s (%.2f GB/s), overlapped %.6f s, ratio %.3f\n",
          size, ov.threads, (long long)ov.block_tokens, (long long)c.model.heads, (long long)c.model.head_dim,
          (long long)ov.bytes_per_step, ov.reps, ov.compute_s, ov.comm_s, (double)ov.bytes_per_step / ov.comm_s / 1e9,
          ov.overlap_s, ov.ratio);
    }
    MPI_Finalize();
    return rc ? 1 : 0;
  }
  bs_run_report rep;
  char err[512] = "";
  int rc = bs_runtime_run(&c, MPI_COMM_WORLD, &o, &rep, err, sizeof err);
  if (rc == BS_RUN_EFATAL) {
    fprintf(stderr, "run_driver: rank %d: %s\n", rank, err);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  if (rank == 0) {
    printf("%s G=%d N=%lld %s causal=%d phase=%s: ", bs_method_name(c.par.method), size, (long long)c.work.seq_len,
           bs_layout_name(c.par.layout), c.work.causal, bs_phase_name(c.work.phase));
    if (rc == BS_RUN_EINPUT) printf("input error: %s\n", err);
    else {
      for (int r = BS_ROLE_O; r <= BS_ROLE_DV; r++)
        if (rep.verify_err[r] >= 0) printf("%s %.2e  ", bs_role_name((bs_role)r), rep.verify_err[r]);
      printf("(bound %.0e) max sent %lld B %s\n", rep.verify_tol, (long long)rep.res.comm.per_rank_max_sent,
             rc == BS_RUN_OK ? "PASS" : "FAIL");
      if (rc) printf("  %s\n", err);
    }
  }
  bs_run_report_free(&rep);
  MPI_Finalize();
  return rc == BS_RUN_OK ? 0 : 1;
}
