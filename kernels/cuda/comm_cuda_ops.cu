/*
 * comm_cuda_ops.cu — the one kernel the GPU communicator needs of its own:
 * element-wise fp32 reduction dst = dst + src (or max), used by the local
 * multi-rank mode's allreduce and reduce-scatter (NCCL does its own).
 */
#include <cstdio>
#include "comm/comm_nccl.h"

namespace {

__global__ void reduce_f32_kernel(float *__restrict__ dst, const float *__restrict__ src, int64_t n, int op_max) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = op_max ? fmaxf(dst[i], src[i]) : dst[i] + src[i];
}

} // namespace

extern "C" int bs_cuda_reduce_f32(float *dst, const float *src, int64_t n, bs_comm_red red, cudaStream_t stream) {
  if (n < 0 || (n > 0 && (!dst || !src))) {
    fprintf(stderr, "comm nccl: reduce: bad arguments\n");
    return BS_COMM_ERR;
  }
  if (n == 0) return BS_COMM_OK;
  const int64_t want = (n + 255) / 256;
  const unsigned blocks = (unsigned)(want < 8192 ? want : 8192);
  reduce_f32_kernel<<<blocks, 256, 0, stream>>>(dst, src, n, red == BS_COMM_MAX ? 1 : 0);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    fprintf(stderr, "comm nccl: launch of reduce_f32_kernel: %s\n", cudaGetErrorString(e));
    return BS_COMM_ERR;
  }
  return BS_COMM_OK;
}
