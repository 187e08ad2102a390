/*
 * attn_cuda_mma.cuh — the tensor-core building blocks of the MMA kernels, as
 * inline PTX (sm_80 and up): mma.sync m16n8k16 with fp32 accumulators for bf16
 * and fp16, ldmatrix (plain and transposed), cp.async 16-byte copies with zero
 * fill, and packing two fp32 values into one 16-bit pair.
 *
 * Fragment layout of m16n8k16 (PTX ISA, "matrix fragments for mma.m16n8k16"),
 * with g = lane / 4 and t = lane % 4:
 *   A (16x16, row-major) a[0]: (g, 2t..2t+1)  a[1]: (g+8, 2t..)  a[2]: (g, 2t+8..)  a[3]: (g+8, 2t+8..)
 *   B (16x8, k x n)      b[0]: (k = 2t..2t+1, n = g)              b[1]: (k = 2t+8.., n = g)
 *   C (16x8, fp32)       c[0..1]: (g, 2t..2t+1)                   c[2..3]: (g+8, 2t..2t+1)
 * The lower 16 bits of each register hold the element with the smaller index.
 * ldmatrix .x4: lanes 8i..8i+7 give the row addresses of 8x8 matrix i; each
 * lane receives matrix i's (lane/4, 2*(lane%4)..+1) in register i (.trans:
 * the transposed matrix's).
 */
#ifndef BURSTSIM_ATTN_CUDA_MMA_CUH
#define BURSTSIM_ATTN_CUDA_MMA_CUH

#include "kernels/cuda/attn_cuda_common.cuh"

namespace attn_cuda {

template <typename T>
struct mma_op;

template <>
struct mma_op<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#ifdef ATTN_CUDA_EMU
    emu_mma<__nv_bfloat16>(c, a, b0, b1);
#else
    asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi); /* .x = lo: the lower 16 bits */
    uint32_t u;
    memcpy(&u, &h, sizeof u);
    return u;
  }
};

template <>
struct mma_op<__half> {
  static __device__ __forceinline__ void run(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#ifdef ATTN_CUDA_EMU
    emu_mma<__half>(c, a, b0, b1);
#else
    asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, sizeof u);
    return u;
  }
};

#ifndef ATTN_CUDA_EMU
__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
#endif

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) {
#ifdef ATTN_CUDA_EMU
  emu_ldsm_x4(r, p, 0);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p))
               : "memory");
#endif
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void *p) {
#ifdef ATTN_CUDA_EMU
  emu_ldsm_x4(r, p, 1);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p))
               : "memory");
#endif
}

/* 16 bytes global -> shared; when valid is false the 16 bytes are zero-filled
 * and nothing is read (src must still be a valid address: callers pass the
 * tensor's base). */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
#ifdef ATTN_CUDA_EMU
  emu_cp_async16(dst, src, valid);
#else
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(n) : "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#ifdef ATTN_CUDA_EMU
  emu_cp_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
#ifdef ATTN_CUDA_EMU
  emu_cp_wait(N);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/*
 * Copies rows [row0, row0 + R) of a [nrows, D] 16-bit matrix at g into shared
 * memory s (row stride LDS halves) with all NT threads; rows >= nrows become 0.
 */
template <int R, int D, int LDS, int NT, typename T>
__device__ __forceinline__ void load_tile(T *s, const T *g, int64_t row0, int64_t nrows) {
  constexpr int CPR = D / 8; /* 16-byte chunks per row */
  constexpr int TOTAL = R * CPR;
#pragma unroll
  for (int c = threadIdx.x; c < TOTAL; c += NT) {
    const int r = c / CPR, col = (c % CPR) * 8;
    const int64_t gr = row0 + r;
    const bool ok = gr < nrows;
    cp_async16(s + r * LDS + col, ok ? (const void *)(g + gr * D + col) : (const void *)g, ok);
  }
}

} // namespace attn_cuda

#endif
