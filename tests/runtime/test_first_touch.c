/*
 * test_first_touch.c — a run's timed phases must not pay for mapping its
 * buffers. Fresh pages are mapped at their first touch; if the runtime's
 * allocations left that to the kernels, the backward (the first to write dq,
 * dk and dv) and the forward (o) would be timed with a page fault per page,
 * which the calibration, timing kernels on buffers already in use, never sees.
 *
 * Hand count for one rank, burst, causal training, 4 heads x 4096 tokens x
 * d = 64 in fp32: o, dq, dk and dv hold 4 x 4 x 4096 x 64 x 4 B = 16 MiB, i.e.
 * 4096 pages of 4 KiB, each faulted at least once by a kernel if the ALLOC ops
 * handed out untouched memory. The run's minor faults outside its ALLOC ops
 * (bs_run_report.step_faults) must stay under a quarter of that page count,
 * with and without a warm-up execution (the second allocates again after the
 * first freed everything). What remains is the kernels' own workspace, which
 * the heap hands back and grows again once per op (a few hundred pages with
 * 2 threads, whatever the sequence length); the calibration times it too.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#include "runtime/runtime.h"

static int run_once(int warmup, int64_t bound) {
  bs_config c;
  bs_config_default(&c);
  c.model.heads = 4;
  c.model.kv_heads = 4;
  c.model.head_dim = 64;
  c.model.hidden = 256;
  c.model.dtype = BS_FP32;
  c.work.seq_len = 4096;
  c.work.phase = BS_TRAIN;
  c.work.causal = 1;
  c.par.method = BS_BURST;
  c.par.gpus = 1;
  c.par.ranks_per_node = 1;
  c.par.double_ring = BS_OFF;
  c.par.ulysses_degree = 1;
  bs_runtime_opts o;
  memset(&o, 0, sizeof o);
  o.threads = 2;
  o.timeout_s = 60;
  o.warmup = warmup;
  bs_run_report rep;
  char err[512] = "";
  int rc = bs_runtime_run(&c, MPI_COMM_WORLD, &o, &rep, err, sizeof err);
  if (rc) {
    fprintf(stderr, "test_first_touch: run failed: %s\n", err);
    return 1;
  }
  int64_t faults = rep.step_faults;
  bs_run_report_free(&rep);
  printf("warmup %d: %lld minor faults in the measured execution outside ALLOC ops (bound %lld)\n", warmup,
         (long long)faults, (long long)bound);
  return faults < bound ? 0 : 1;
}

int main(int argc, char **argv) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* The sanitizers' allocators hand out fresh memory for every kernel workspace (AddressSanitizer's
   * quarantine holds freed blocks back) and map shadow pages: the count means nothing there. */
  (void)argc;
  (void)argv;
  (void)run_once;
  printf("skipped: a sanitizer build\n");
  return 77;
#else
  MPI_Init(&argc, &argv);
  long page = sysconf(_SC_PAGESIZE);
  int64_t out_bytes = 4LL * 4 * 4096 * 64 * 4; /* o, dq, dk, dv */
  int64_t pages = out_bytes / (page > 0 ? page : 4096);
  int bad = run_once(0, pages / 4) | run_once(1, pages / 4);
  MPI_Finalize();
  return bad;
#endif
}
