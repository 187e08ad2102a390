/*
 * attn_cuda.h — the CUDA backend of the attention kernels. Same contract as
 * kernels/attn.h (read that first: layouts, the mask from global positions,
 * GQA, fp32 O/lse, ACCUMULATED fp32 gradients, the accumulate flag that merges
 * into a running (O, lse)), but every tensor is a DEVICE pointer and every call
 * is enqueued on a stream. Calls return as soon as the work is enqueued; errors
 * of the kernels themselves surface at the next synchronisation.
 *
 * Storage: ATTN_BF16 and ATTN_CUDA_FP16 use the tensor cores (mma.sync
 * m16n8k16, fp32 accumulation) when d is 64 or 128 and the pointers are
 * 16-byte aligned; everything else (fp32 storage, other d up to 256,
 * misaligned views) takes a simple CUDA-core path that computes the same
 * function. attn_cuda_path_name() says which path a call takes.
 *
 * Errors: the attn.h codes, plus ATTN_ECUDA (a CUDA call or launch failed; the
 * reason from cudaGetErrorString is printed to stderr with file:line) and
 * ATTN_ENODEV (no usable CUDA device). This header is plain C so the runtime,
 * calibration and tests (C11) can include it; cudaStream_t comes from the
 * runtime API header.
 */
#ifndef BURSTSIM_ATTN_CUDA_H
#define BURSTSIM_ATTN_CUDA_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>
#include "kernels/attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fp16 storage (IEEE half). Only this backend accepts it; the value stays
 * clear of attn_dtype's named members. */
#define ATTN_CUDA_FP16 ((attn_dtype)2)

/* Extra error codes of this backend (attn.h's are 0..-4). */
#define ATTN_ECUDA (-5)
#define ATTN_ENODEV (-6)

/* Which implementation a call uses. AUTO picks MMA whenever it is eligible. */
typedef enum {
  ATTN_CUDA_AUTO = 0,
  ATTN_CUDA_SIMPLE = 1, /* CUDA cores, fp32 math, any storage, d <= 256 */
  ATTN_CUDA_MMA = 2     /* tensor cores: bf16/fp16 storage, d in {64,128} */
} attn_cuda_path;

/* Largest head dimension any path supports. */
#define ATTN_CUDA_MAX_D 256
/* Largest number of query rows attn_cuda_decode takes. */
#define ATTN_CUDA_DECODE_MAX_Q 8

/*
 * Launch geometry of one kernel, computed on the host without touching the
 * device (so it is unit-tested without a GPU). grid is 1-D: blocks.
 */
typedef struct {
  attn_cuda_path path;
  int tile_q, tile_k; /* rows of Q and of K per tile actually used */
  int warps;          /* warps per block */
  int64_t blocks;     /* grid size */
  size_t smem_bytes;  /* dynamic shared memory per block */
  int splits;         /* decode only: KV splits per (batch, head) */
} attn_cuda_launch;

/* Validation under this backend's rules (attn.h's, plus: dtype FP32, BF16 or
 * FP16; d <= ATTN_CUDA_MAX_D; the grid fits). Writes a one-line reason. */
int attn_cuda_check_msg(const attn_params *p, char *msg, size_t len);
const char *attn_cuda_strerror(int err);
const char *attn_cuda_path_name(attn_cuda_path path);

/*
 * Plans a forward (or, with bwd = 1, a backward) launch for params p under the
 * requested path; align16 says whether every tensor pointer is 16-byte aligned.
 * AUTO resolves to MMA or SIMPLE. Requesting MMA where it is not eligible, or
 * tile sizes the MMA path was not built with, is ATTN_EINVAL with the reason
 * in msg. Supported MMA tiles: forward tile_q in {64,128}, tile_k in {32,64};
 * backward tile_q in {32,64}, tile_k in {64,128} (0 = the default per d).
 */
int attn_cuda_plan(const attn_params *p, attn_cuda_path want, int bwd, int align16, attn_cuda_launch *out, char *msg,
                   size_t len);

/* Number of CUDA devices; on failure (no driver, no device) returns
 * ATTN_ENODEV, sets *count = 0 and writes the CUDA reason to msg. */
int attn_cuda_device_count(int *count, char *msg, size_t len);

/* Forward; see attn_fwd in attn.h. o and lse are fp32 device buffers. */
int attn_cuda_fwd(const attn_params *p, const void *q, const void *k, const void *v, float *o, float *lse,
                  int accumulate, cudaStream_t stream);
int attn_cuda_fwd_path(const attn_params *p, attn_cuda_path path, const void *q, const void *k, const void *v, float *o,
                       float *lse, int accumulate, cudaStream_t stream);

/* delta[row] = sum_j dout[row, j] * o[row, j] over B*Zq*Nq rows. */
int attn_cuda_delta(const attn_params *p, const float *o, const void *dout, float *delta, cudaStream_t stream);

/*
 * Backward of one (query block, key block) pair; adds into dq, dk, dv (fp32).
 * lse is the FULL forward's. Give delta (the D variant) or o with delta = NULL
 * (the O variant: delta is computed into a buffer from cudaMalloc, freed after
 * the stream is synchronised — prefer the D variant in loops).
 */
int attn_cuda_bwd(const attn_params *p, const void *q, const void *k, const void *v, const float *o, const void *dout,
                  const float *lse, const float *delta, float *dq, float *dk, float *dv, cudaStream_t stream);
int attn_cuda_bwd_path(const attn_params *p, attn_cuda_path path, const void *q, const void *k, const void *v,
                       const float *o, const void *dout, const float *lse, const float *delta, float *dq, float *dk,
                       float *dv, cudaStream_t stream);

/* Merge a partial (o2, lse2) into (o, lse) over rows rows of width d. */
int attn_cuda_merge(int64_t rows, int d, float *o, float *lse, const float *o2, const float *lse2, cudaStream_t stream);

/*
 * Decode: Nq <= ATTN_CUDA_DECODE_MAX_Q query rows against a long key block.
 * The keys are split over `splits` blocks per (batch, head) (0 = chosen from
 * Nk), each writes a partial (O, lse) into workspace, and a second kernel
 * merges them by lse (and into (o, lse) when accumulate). workspace must hold
 * attn_cuda_decode_workspace_bytes(p, splits) bytes, or be NULL (then it comes
 * from cudaMalloc and is freed after the stream is synchronised).
 */
int attn_cuda_decode_splits(const attn_params *p);
size_t attn_cuda_decode_workspace_bytes(const attn_params *p, int splits);
int attn_cuda_decode(const attn_params *p, const void *q, const void *k, const void *v, float *o, float *lse,
                     int accumulate, int splits, void *workspace, cudaStream_t stream);

/*
 * Fills n elements of dst (storage dtype) with uniform values in
 * [-scale, scale) from a counter-based hash of (seed, index): reproducible, and
 * never zeros, for benchmarks and calibration (timing zeros flatters a GPU).
 */
int attn_cuda_fill_random(void *dst, attn_dtype dtype, int64_t n, uint64_t seed, float scale, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
