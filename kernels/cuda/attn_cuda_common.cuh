/*
 * attn_cuda_common.cuh — device helpers every CUDA kernel file uses: loading
 * any storage type as fp32, warp reductions, and the merge of a finished
 * (O, lse) row into a running one with the exact rules of attn_merge
 * (a side with lse = -inf contributes nothing; never NaN).
 */
#ifndef BURSTSIM_ATTN_CUDA_COMMON_CUH
#define BURSTSIM_ATTN_CUDA_COMMON_CUH

#ifdef ATTN_CUDA_EMU
#include "kernels/cuda/attn_cuda_emu.h" /* host emulation for tests, see there */
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <math_constants.h>
#include <cstring>
#include "kernels/cuda/attn_cuda_internal.h"

#define ATTN_CUDA_LOG2E 1.4426950408889634f
#define ATTN_CUDA_LN2 0.6931471805599453f

namespace attn_cuda {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

/*
 * Weights for merging (o_old, lse_old) with (o_new, lse_new): the result is
 * w_old * o_old + w_new * o_new with lse_out. When accumulate is 0 the old side
 * is ignored. Natural-log units.
 */
struct merge_w {
  float w_old, w_new, lse;
};

__device__ __forceinline__ merge_w merge_weights(int accumulate, float lse_old, float lse_new) {
  merge_w r;
  if (!accumulate || lse_old == -CUDART_INF_F) {
    r.w_old = 0.0f;
    r.w_new = lse_new == -CUDART_INF_F ? 0.0f : 1.0f;
    r.lse = lse_new;
    return r;
  }
  if (lse_new == -CUDART_INF_F) {
    r.w_old = 1.0f;
    r.w_new = 0.0f;
    r.lse = lse_old;
    return r;
  }
  float mx = fmaxf(lse_old, lse_new);
  float a = expf(lse_old - mx), c = expf(lse_new - mx);
  float s = a + c;
  r.w_old = a / s;
  r.w_new = c / s;
  r.lse = mx + logf(s);
  return r;
}

/* Grid-stride over a 1-D grid whose size may exceed one launch dimension. */
__device__ __forceinline__ int64_t global_block() { return (int64_t)blockIdx.x; }

} // namespace attn_cuda

#endif
