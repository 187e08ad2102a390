/*
 * attn_cuda_fwd_mma.cu — the tensor-core forward (FlashAttention-2 structure):
 * one block of 4 warps per (batch, query head, query tile); each warp owns
 * 16*MT query rows; K and V tiles stream through shared memory in two stages
 * (cp.async, the next tile loads while this one is computed); S = Q K^T and
 * O += P V run on mma.sync m16n8k16 with fp32 accumulators; the softmax is
 * online in base 2. The result is merged into a running (O, lse) when
 * accumulate is set. Tile sizes are template parameters (see attn_cuda_plan).
 */
#include <cstring>
#include "kernels/cuda/attn_cuda_mma.cuh"

namespace attn_cuda {

#define FWD_WARPS 4

template <typename T, int D, int MT, int BN>
struct fwd_cfg {
  static constexpr int NT = FWD_WARPS * 32;
  static constexpr int BM = 16 * MT * FWD_WARPS; /* query rows per block */
  static constexpr int LDS = D + 8;              /* padded shared row, in halves */
  static constexpr size_t SMEM = (size_t)(BM + 4 * BN) * LDS * 2;
};

template <typename T, int D, int MT, int BN>
__global__ void __launch_bounds__(FWD_WARPS * 32)
  fwd_mma_kernel(attn_params p, attn_mask m, const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                 float *__restrict__ o, float *__restrict__ lse, int accumulate) {
  using C = fwd_cfg<T, D, MT, BN>;
  constexpr int BM = C::BM, LDS = C::LDS, NT = C::NT;
  constexpr int NB = BN / 8; /* key n-blocks of S */
  constexpr int DB = D / 8;  /* d n-blocks of O */
#ifdef ATTN_CUDA_EMU
  unsigned char *smem_raw = emu_dynamic_smem();
#else
  extern __shared__ __align__(16) unsigned char smem_raw[];
#endif
  T *sQ = reinterpret_cast<T *>(smem_raw);
  T *sK = sQ + BM * LDS;     /* [2][BN][LDS] */
  T *sV = sK + 2 * BN * LDS; /* [2][BN][LDS] */

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int64_t ntiles = (p.Nq + BM - 1) / BM;
  const int64_t bid = (int64_t)blockIdx.x;
  const int64_t tile = ntiles - 1 - bid % ntiles; /* heavy causal tiles first */
  const int64_t bh = bid / ntiles;                /* b * Zq + h */
  const int64_t b = bh / p.Zq, h = bh % p.Zq;
  const int64_t hk = h / (p.Zq / p.Zkv);
  const int64_t i0 = tile * BM;
  const int64_t ni = p.Nq - i0 < BM ? p.Nq - i0 : BM;

  const T *qh = q + bh * p.Nq * D;
  const T *kh = k + (b * p.Zkv + hk) * p.Nk * D;
  const T *vh = v + (b * p.Zkv + hk) * p.Nk * D;

  int64_t jlo, jhi;
  attn_mask_key_range(&m, i0, ni, p.Nk, &jlo, &jhi);
  const int64_t t_begin = jlo / BN;
  const int64_t t_end = jhi > jlo ? (jhi + BN - 1) / BN : t_begin;

  load_tile<BM, D, LDS, NT>(sQ, qh, i0, p.Nq);
  if (t_begin < t_end) {
    load_tile<BN, D, LDS, NT>(sK, kh, t_begin * BN, p.Nk);
    load_tile<BN, D, LDS, NT>(sV, vh, t_begin * BN, p.Nk);
  }
  cp_async_commit();

  float acc[MT][DB][4];
  float row_m[MT][2], row_l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
#pragma unroll
    for (int db = 0; db < DB; db++)
#pragma unroll
      for (int c = 0; c < 4; c++) acc[mt][db][c] = 0.0f;
    row_m[mt][0] = row_m[mt][1] = -CUDART_INF_F;
    row_l[mt][0] = row_l[mt][1] = 0.0f;
  }
  const float qs = p.scale * ATTN_CUDA_LOG2E;
  const int wrow = warp * MT * 16; /* first query row of this warp in the tile */

  for (int64_t t = t_begin; t < t_end; t++) {
    const int st = (int)((t - t_begin) & 1);
    __syncthreads(); /* every warp is done with the other stage (tile t-1) */
    if (t + 1 < t_end) {
      load_tile<BN, D, LDS, NT>(sK + (st ^ 1) * BN * LDS, kh, (t + 1) * BN, p.Nk);
      load_tile<BN, D, LDS, NT>(sV + (st ^ 1) * BN * LDS, vh, (t + 1) * BN, p.Nk);
    }
    cp_async_commit();
    cp_async_wait<1>(); /* this thread's copies of tile t (and Q) have landed */
    __syncthreads();    /* ... and everybody else's */
    const T *cK = sK + st * BN * LDS;
    const T *cV = sV + st * BN * LDS;
    const int64_t j0 = t * BN;

    /* S = Q K^T for this warp's rows. */
    float s[MT][NB][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int nb = 0; nb < NB; nb++)
#pragma unroll
        for (int c = 0; c < 4; c++) s[mt][nb][c] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
        ldsm_x4(a[mt], sQ + (wrow + mt * 16 + (lane & 15)) * LDS + kk * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int nb2 = 0; nb2 < NB / 2; nb2++) {
        uint32_t bf[4];
        ldsm_x4(bf, cK + (nb2 * 16 + (lane & 7) + 8 * (lane >> 4)) * LDS + kk * 16 + 8 * ((lane >> 3) & 1));
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          mma_op<T>::run(s[mt][2 * nb2], a[mt], bf[0], bf[1]);
          mma_op<T>::run(s[mt][2 * nb2 + 1], a[mt], bf[2], bf[3]);
        }
      }
    }

    /* Scale into base 2 and mask. */
    const bool full = (j0 + BN <= p.Nk) && attn_mask_tile_full(&m, i0, ni, j0, BN);
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int nb = 0; nb < NB; nb++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
          float x = s[mt][nb][c] * qs;
          if (!full) {
            const int64_t i = i0 + wrow + mt * 16 + g + ((c & 2) ? 8 : 0);
            const int64_t j = j0 + nb * 8 + 2 * t4 + (c & 1);
            const bool ok =
              i < p.Nq && j < p.Nk && attn_mask_visible(&m, m.q_pos0 + i * m.q_stride, m.k_pos0 + j * m.k_stride);
            if (!ok) x = -CUDART_INF_F;
          }
          s[mt][nb][c] = x;
        }

        /* Online softmax: row maxima over the quad, rescale, P = exp2(S - m). */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int hr = 0; hr < 2; hr++) {
        float mx = -CUDART_INF_F;
#pragma unroll
        for (int nb = 0; nb < NB; nb++) mx = fmaxf(mx, fmaxf(s[mt][nb][2 * hr], s[mt][nb][2 * hr + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mnew = fmaxf(row_m[mt][hr], mx);
        const float base = mnew == -CUDART_INF_F ? 0.0f : mnew; /* no -inf - -inf */
        const float corr = exp2f(row_m[mt][hr] - base);
        float sum = 0.0f;
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
          const float p0 = exp2f(s[mt][nb][2 * hr] - base);
          const float p1 = exp2f(s[mt][nb][2 * hr + 1] - base);
          s[mt][nb][2 * hr] = p0;
          s[mt][nb][2 * hr + 1] = p1;
          sum += p0 + p1;
        }
        row_l[mt][hr] = row_l[mt][hr] * corr + sum; /* this thread's share of the row */
        row_m[mt][hr] = mnew;
#pragma unroll
        for (int db = 0; db < DB; db++) {
          acc[mt][db][2 * hr] *= corr;
          acc[mt][db][2 * hr + 1] *= corr;
        }
      }

      /* O += P V: P leaves the accumulators as the A operand (same layout). */
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        a[mt][0] = mma_op<T>::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = mma_op<T>::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = mma_op<T>::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = mma_op<T>::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int db2 = 0; db2 < DB / 2; db2++) {
        uint32_t bf[4];
        ldsm_x4_t(bf, cV + (kk * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)) * LDS + db2 * 16 + 8 * (lane >> 4));
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          mma_op<T>::run(acc[mt][2 * db2], a[mt], bf[0], bf[1]);
          mma_op<T>::run(acc[mt][2 * db2 + 1], a[mt], bf[2], bf[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  /* Finish: full row sums over the quad, lse, and the merge into (o, lse). */
  float lse_new[MT][2], inv_l[MT][2], lse_old[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
      float l = row_l[mt][hr];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      lse_new[mt][hr] = l > 0.0f ? (row_m[mt][hr] + log2f(l)) * ATTN_CUDA_LN2 : -CUDART_INF_F;
      inv_l[mt][hr] = l > 0.0f ? 1.0f / l : 0.0f;
      const int64_t i = i0 + wrow + mt * 16 + g + 8 * hr;
      lse_old[mt][hr] = (accumulate && i < p.Nq) ? lse[bh * p.Nq + i] : 0.0f;
    }
  __syncwarp(); /* the quad has read lse_old before its lane t4 == 0 overwrites it */
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
      const int64_t i = i0 + wrow + mt * 16 + g + 8 * hr;
      if (i >= p.Nq) continue;
      const merge_w w = merge_weights(accumulate, lse_old[mt][hr], lse_new[mt][hr]);
      float *orow = o + (bh * p.Nq + i) * D;
#pragma unroll
      for (int db = 0; db < DB; db++) {
        float2 *dst = reinterpret_cast<float2 *>(orow + db * 8 + 2 * t4);
        float2 val;
        val.x = w.w_new * (acc[mt][db][2 * hr] * inv_l[mt][hr]);
        val.y = w.w_new * (acc[mt][db][2 * hr + 1] * inv_l[mt][hr]);
        if (w.w_old != 0.0f) {
          const float2 old = *dst;
          val.x += w.w_old * old.x;
          val.y += w.w_old * old.y;
        }
        *dst = val;
      }
      if (t4 == 0) lse[bh * p.Nq + i] = w.lse;
    }
}

#ifndef ATTN_CUDA_EMU
template <typename T, int D, int MT, int BN>
static int launch_fwd(const attn_params *p, const attn_cuda_launch *L, const void *q, const void *k, const void *v,
                      float *o, float *lse, int accumulate, cudaStream_t s) {
  using C = fwd_cfg<T, D, MT, BN>;
  if (L->smem_bytes != C::SMEM || L->tile_q != C::BM || L->tile_k != BN) {
    fprintf(stderr, "burstsim cuda: forward plan and kernel disagree (smem %zu vs %zu)\n", L->smem_bytes, C::SMEM);
    return ATTN_EINVAL;
  }
  auto kern = fwd_mma_kernel<T, D, MT, BN>;
  ATTN_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM));
  attn_mask m = attn_cuda_mask_of(p);
  kern<<<(unsigned)L->blocks, C::NT, C::SMEM, s>>>(*p, m, (const T *)q, (const T *)k, (const T *)v, o, lse, accumulate);
  ATTN_CUDA_LAUNCHED("fwd_mma_kernel");
  return ATTN_OK;
}

template <typename T, int D>
static int launch_fwd_d(const attn_params *p, const attn_cuda_launch *L, const void *q, const void *k, const void *v,
                        float *o, float *lse, int accumulate, cudaStream_t s) {
  if (L->tile_q == 64 && L->tile_k == 32) return launch_fwd<T, D, 1, 32>(p, L, q, k, v, o, lse, accumulate, s);
  if (L->tile_q == 64 && L->tile_k == 64) return launch_fwd<T, D, 1, 64>(p, L, q, k, v, o, lse, accumulate, s);
  if (L->tile_q == 128 && L->tile_k == 32) return launch_fwd<T, D, 2, 32>(p, L, q, k, v, o, lse, accumulate, s);
  if (L->tile_q == 128 && L->tile_k == 64) return launch_fwd<T, D, 2, 64>(p, L, q, k, v, o, lse, accumulate, s);
  fprintf(stderr, "burstsim cuda: no forward kernel for tiles %d x %d\n", L->tile_q, L->tile_k);
  return ATTN_EINVAL;
}

template <typename T>
static int launch_fwd_t(const attn_params *p, const attn_cuda_launch *L, const void *q, const void *k, const void *v,
                        float *o, float *lse, int accumulate, cudaStream_t s) {
  if (p->d == 64) return launch_fwd_d<T, 64>(p, L, q, k, v, o, lse, accumulate, s);
  if (p->d == 128) return launch_fwd_d<T, 128>(p, L, q, k, v, o, lse, accumulate, s);
  fprintf(stderr, "burstsim cuda: no forward kernel for d = %d\n", p->d);
  return ATTN_EINVAL;
}

#endif // ATTN_CUDA_EMU

} // namespace attn_cuda

#ifndef ATTN_CUDA_EMU
extern "C" int attn_cuda_launch_fwd_mma(const attn_params *p, const attn_cuda_launch *L, const void *q, const void *k,
                                        const void *v, float *o, float *lse, int accumulate, cudaStream_t s) {
  if (p->dtype == ATTN_BF16) return attn_cuda::launch_fwd_t<__nv_bfloat16>(p, L, q, k, v, o, lse, accumulate, s);
  if (p->dtype == ATTN_CUDA_FP16) return attn_cuda::launch_fwd_t<__half>(p, L, q, k, v, o, lse, accumulate, s);
  fprintf(stderr, "burstsim cuda: the MMA forward needs bf16 or fp16 storage\n");
  return ATTN_EDTYPE;
}
#endif
