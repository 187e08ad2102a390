/*
 * compute.h — the one function that executes a plan's COMPUTE op on a kernel
 * backend (kernels/backend.h). The runtime calls it for every COMPUTE of a
 * real run, and the calibration times it, so a profile measures exactly the
 * calls a run makes: attention per (batch, head, query-row tile) with an
 * optional progress poll between tiles, delta, merge, the explicit-score
 * GEMMs, the elementwise ops the plans name, and copies. The ops a layer
 * plan only models (GENERIC GEMM and ELEMWISE) run on the operands the
 * caller hands in (the runtime's scratch, runtime/scratch.h), or not at all
 * when it hands none.
 */
#ifndef BURSTSIM_RUNTIME_COMPUTE_H
#define BURSTSIM_RUNTIME_COMPUTE_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/backend.h"
#include "plans/plan.h"

/* Query rows per attention call when the caller names none (bs_runtime_opts.tile_rows = 0). */
#define BS_COMPUTE_TILE_ROWS 256

/* Where one op's bs_ref in[] and out[] point (NULL: no buffer). */
typedef struct {
  void *in[BS_OP_IN];
  void *out[BS_OP_OUT];
  int64_t ws_bytes; /* unfused attention: bytes usable from the workspace (in[3] forward, in[7] backward) */
} bs_compute_bufs;

typedef struct {
  const bs_kernel_backend *be;
  int threads;                 /* kernel threads of attention and delta */
  int64_t tile_rows;           /* query rows per attention call (> 0) */
  int bf16;                    /* the run stores q, k, v in bf16 (the explicit-score GEMM is fp32 only) */
  int step;                    /* the op's step, for messages */
  void (*progress)(void *arg); /* called between tiles and heads (NULL: never) */
  void *progress_arg;
} bs_compute_ctx;

/* Executes c on the buffers b. Returns 0, or -1 with a message naming the step. */
int bs_compute_run(const bs_compute_ctx *x, const bs_compute *c, const bs_compute_bufs *b, char *err, size_t errlen);

#endif
