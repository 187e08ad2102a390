/*
 * attn_cuda_bwd_mma.cu — the tensor-core backward (FlashAttention-2 structure):
 * one block per (batch, kv head, key tile of 16*NW rows); warp w owns 16 key
 * rows and keeps their dK and dV in fp32 registers while the block walks every
 * query head of its GQA group and every query tile that can see the key tile
 * (Q, dO, lse, delta stream through shared memory in two stages). Per tile:
 *   S^T = K Q^T, P^T = exp2(S^T*scale*log2e - lse*log2e), dV += P^T dO,
 *   dP^T = V dO^T, dS^T = P^T (dP^T - delta) * scale, dK += dS^T Q,
 * and dS^T goes through shared memory so that dQ += dS K is one more mma pass
 * whose results are added to the fp32 dq with atomicAdd (several key tiles
 * add into the same dq rows). dK, dV are added into the caller's buffers at
 * the end (each block owns its rows: plain read-add-write).
 */
#include <cstring>
#include "kernels/cuda/attn_cuda_mma.cuh"

namespace attn_cuda {

template <typename T, int D, int BM, int NW>
struct bwd_cfg {
  static constexpr int NT = NW * 32;
  static constexpr int BN = 16 * NW; /* key rows per block */
  static constexpr int LDS = D + 8;
  static constexpr int LDT = BM + 8; /* row stride of the dS^T tile, halves */
  static constexpr size_t SMEM =
    (size_t)(2 * BN + 4 * BM) * LDS * 2 + (size_t)4 * BM * sizeof(float) + (size_t)BN * LDT * 2;
};

template <typename T, int D, int BM, int NW>
__global__ void __launch_bounds__(NW * 32)
  bwd_mma_kernel(attn_params p, attn_mask m, const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                 const T *__restrict__ dout, const float *__restrict__ lse, const float *__restrict__ delta,
                 float *__restrict__ dq, float *__restrict__ dk, float *__restrict__ dv) {
  using C = bwd_cfg<T, D, BM, NW>;
  constexpr int BN = C::BN, LDS = C::LDS, LDT = C::LDT, NT = C::NT;
  constexpr int QB = BM / 8; /* query n-blocks of S^T */
  constexpr int DB = D / 8;  /* d n-blocks of dK, dV */
#ifdef ATTN_CUDA_EMU
  unsigned char *smem_raw = emu_dynamic_smem();
#else
  extern __shared__ __align__(16) unsigned char smem_raw[];
#endif
  T *sK = reinterpret_cast<T *>(smem_raw);
  T *sV = sK + BN * LDS;
  T *sQ = sV + BN * LDS;                                    /* [2][BM][LDS] */
  T *sG = sQ + 2 * BM * LDS;                                /* dO: [2][BM][LDS] */
  float *sL = reinterpret_cast<float *>(sG + 2 * BM * LDS); /* [2][BM]: lse * log2e */
  float *sDl = sL + 2 * BM;                                 /* [2][BM]: delta */
  T *sdS = reinterpret_cast<T *>(sDl + 2 * BM);             /* [BN][LDT] */

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int64_t ktiles = (p.Nk + BN - 1) / BN;
  const int64_t bid = (int64_t)blockIdx.x;
  const int64_t ktile = bid % ktiles;
  const int64_t bhk = bid / ktiles; /* b * Zkv + hk */
  const int64_t b = bhk / p.Zkv, hk = bhk % p.Zkv;
  const int group = p.Zq / p.Zkv;
  const int64_t j0 = ktile * BN;
  const int64_t nj = p.Nk - j0 < BN ? p.Nk - j0 : BN;

  const T *kh = k + bhk * p.Nk * D;
  const T *vh = v + bhk * p.Nk * D;

  int64_t ilo, ihi;
  attn_mask_query_range(&m, j0, nj, p.Nq, &ilo, &ihi);
  const int64_t it_begin = ilo / BM;
  const int64_t it_end = ihi > ilo ? (ihi + BM - 1) / BM : it_begin;
  const int64_t nqt = it_end - it_begin;
  const int64_t n_iter = nqt * group;

  /* Loads of iteration `it` (query head, query tile) into stage st. */
  auto load_iter = [&](int64_t it, int st) {
    const int64_t hh = it / nqt, qt = it_begin + it % nqt;
    const int64_t h = hk * group + hh;
    const int64_t bh = b * p.Zq + h;
    const int64_t i0 = qt * BM;
    load_tile<BM, D, LDS, NT>(sQ + st * BM * LDS, q + bh * p.Nq * D, i0, p.Nq);
    load_tile<BM, D, LDS, NT>(sG + st * BM * LDS, dout + bh * p.Nq * D, i0, p.Nq);
    for (int r = threadIdx.x; r < BM; r += NT) {
      const int64_t i = i0 + r;
      float l2 = CUDART_INF_F, dl = 0.0f; /* rows past Nq: P = exp2(-inf) = 0 */
      if (i < p.Nq) {
        const float lr = lse[bh * p.Nq + i];
        l2 = lr == -CUDART_INF_F ? CUDART_INF_F : lr * ATTN_CUDA_LOG2E;
        dl = delta[bh * p.Nq + i];
      }
      sL[st * BM + r] = l2;
      sDl[st * BM + r] = dl;
    }
  };

  load_tile<BN, D, LDS, NT>(sK, kh, j0, p.Nk);
  load_tile<BN, D, LDS, NT>(sV, vh, j0, p.Nk);
  if (n_iter > 0) load_iter(0, 0);
  cp_async_commit();

  float adk[DB][4], adv[DB][4];
#pragma unroll
  for (int db = 0; db < DB; db++)
#pragma unroll
    for (int c = 0; c < 4; c++) adk[db][c] = adv[db][c] = 0.0f;

  const float qs = p.scale * ATTN_CUDA_LOG2E;
  const int wkey = warp * 16; /* first key row of this warp in the tile */

  for (int64_t it = 0; it < n_iter; it++) {
    const int st = (int)(it & 1);
    __syncthreads(); /* the other stage and sdS are free (iteration it-1 done) */
    if (it + 1 < n_iter) load_iter(it + 1, st ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const int64_t hh = it / nqt, qt = it_begin + it % nqt;
    const int64_t bh = b * p.Zq + hk * group + hh;
    const int64_t i0 = qt * BM;
    const int64_t ni = p.Nq - i0 < BM ? p.Nq - i0 : BM;
    const T *cQ = sQ + st * BM * LDS;
    const T *cG = sG + st * BM * LDS;
    const float *cL = sL + st * BM;
    const float *cD = sDl + st * BM;

    /* S^T = K_w Q^T (16 keys x BM queries). */
    float sp[QB][4];
#pragma unroll
    for (int nb = 0; nb < QB; nb++)
#pragma unroll
      for (int c = 0; c < 4; c++) sp[nb][c] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      uint32_t a[4];
      ldsm_x4(a, sK + (wkey + (lane & 15)) * LDS + kk * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int nb2 = 0; nb2 < QB / 2; nb2++) {
        uint32_t bf[4];
        ldsm_x4(bf, cQ + (nb2 * 16 + (lane & 7) + 8 * (lane >> 4)) * LDS + kk * 16 + 8 * ((lane >> 3) & 1));
        mma_op<T>::run(sp[2 * nb2], a, bf[0], bf[1]);
        mma_op<T>::run(sp[2 * nb2 + 1], a, bf[2], bf[3]);
      }
    }

    /* P^T, masked to exactly 0 where a pair is not visible. */
    const bool full = (j0 + BN <= p.Nk) && (i0 + BM <= p.Nq) && attn_mask_tile_full(&m, i0, ni, j0, BN);
#pragma unroll
    for (int nb = 0; nb < QB; nb++)
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const int qc = nb * 8 + 2 * t4 + (c & 1);
        float pv = exp2f(sp[nb][c] * qs - cL[qc]);
        if (!full) {
          const int64_t j = j0 + wkey + g + ((c & 2) ? 8 : 0);
          const int64_t i = i0 + qc;
          const bool ok =
            i < p.Nq && j < p.Nk && attn_mask_visible(&m, m.q_pos0 + i * m.q_stride, m.k_pos0 + j * m.k_stride);
          if (!ok) pv = 0.0f;
        }
        sp[nb][c] = pv;
      }

      /* dV_w += P^T dO. */
#pragma unroll
    for (int kq = 0; kq < BM / 16; kq++) {
      uint32_t a[4];
      a[0] = mma_op<T>::pack(sp[2 * kq][0], sp[2 * kq][1]);
      a[1] = mma_op<T>::pack(sp[2 * kq][2], sp[2 * kq][3]);
      a[2] = mma_op<T>::pack(sp[2 * kq + 1][0], sp[2 * kq + 1][1]);
      a[3] = mma_op<T>::pack(sp[2 * kq + 1][2], sp[2 * kq + 1][3]);
#pragma unroll
      for (int db2 = 0; db2 < DB / 2; db2++) {
        uint32_t bf[4];
        ldsm_x4_t(bf, cG + (kq * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)) * LDS + db2 * 16 + 8 * (lane >> 4));
        mma_op<T>::run(adv[2 * db2], a, bf[0], bf[1]);
        mma_op<T>::run(adv[2 * db2 + 1], a, bf[2], bf[3]);
      }
    }

    /* dP^T = V_w dO^T. */
    float dp[QB][4];
#pragma unroll
    for (int nb = 0; nb < QB; nb++)
#pragma unroll
      for (int c = 0; c < 4; c++) dp[nb][c] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      uint32_t a[4];
      ldsm_x4(a, sV + (wkey + (lane & 15)) * LDS + kk * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int nb2 = 0; nb2 < QB / 2; nb2++) {
        uint32_t bf[4];
        ldsm_x4(bf, cG + (nb2 * 16 + (lane & 7) + 8 * (lane >> 4)) * LDS + kk * 16 + 8 * ((lane >> 3) & 1));
        mma_op<T>::run(dp[2 * nb2], a, bf[0], bf[1]);
        mma_op<T>::run(dp[2 * nb2 + 1], a, bf[2], bf[3]);
      }
    }

    /* dS^T = P^T (dP^T - delta) * scale, kept in dp; also to shared memory. */
#pragma unroll
    for (int nb = 0; nb < QB; nb++)
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const int qc = nb * 8 + 2 * t4 + (c & 1);
        dp[nb][c] = sp[nb][c] * (dp[nb][c] - cD[qc]) * p.scale;
      }
#pragma unroll
    for (int nb = 0; nb < QB; nb++)
#pragma unroll
      for (int hr = 0; hr < 2; hr++) {
        uint32_t pk = mma_op<T>::pack(dp[nb][2 * hr], dp[nb][2 * hr + 1]);
        memcpy((void *)(sdS + (wkey + g + 8 * hr) * LDT + nb * 8 + 2 * t4), &pk, sizeof pk);
      }

      /* dK_w += dS^T Q. */
#pragma unroll
    for (int kq = 0; kq < BM / 16; kq++) {
      uint32_t a[4];
      a[0] = mma_op<T>::pack(dp[2 * kq][0], dp[2 * kq][1]);
      a[1] = mma_op<T>::pack(dp[2 * kq][2], dp[2 * kq][3]);
      a[2] = mma_op<T>::pack(dp[2 * kq + 1][0], dp[2 * kq + 1][1]);
      a[3] = mma_op<T>::pack(dp[2 * kq + 1][2], dp[2 * kq + 1][3]);
#pragma unroll
      for (int db2 = 0; db2 < DB / 2; db2++) {
        uint32_t bf[4];
        ldsm_x4_t(bf, cQ + (kq * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)) * LDS + db2 * 16 + 8 * (lane >> 4));
        mma_op<T>::run(adk[2 * db2], a, bf[0], bf[1]);
        mma_op<T>::run(adk[2 * db2 + 1], a, bf[2], bf[3]);
      }
    }

    __syncthreads(); /* the whole dS^T tile is in shared memory */

    /* dQ += dS K: items (query m-tile, pair of d n-blocks) spread over warps. */
    constexpr int MTQ = BM / 16, ITEMS = MTQ * (D / 16);
    float *dqh = dq + bh * p.Nq * D;
    for (int item = warp; item < ITEMS; item += NW) {
      const int mt = item % MTQ, db2 = item / MTQ;
      float c0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int kb = 0; kb < BN / 16; kb++) {
        uint32_t a[4], bf[4];
        ldsm_x4_t(a, sdS + (kb * 16 + (lane & 7) + 8 * (lane >> 4)) * LDT + mt * 16 + 8 * ((lane >> 3) & 1));
        ldsm_x4_t(bf, sK + (kb * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)) * LDS + db2 * 16 + 8 * (lane >> 4));
        mma_op<T>::run(c0, a, bf[0], bf[1]);
        mma_op<T>::run(c1, a, bf[2], bf[3]);
      }
#pragma unroll
      for (int hr = 0; hr < 2; hr++) {
        const int64_t i = i0 + mt * 16 + g + 8 * hr;
        if (i >= p.Nq) continue;
        float *row = dqh + i * D + db2 * 16 + 2 * t4;
        atomicAdd(row, c0[2 * hr]);
        atomicAdd(row + 1, c0[2 * hr + 1]);
        atomicAdd(row + 8, c1[2 * hr]);
        atomicAdd(row + 9, c1[2 * hr + 1]);
      }
    }
  }
  cp_async_wait<0>();
  if (n_iter == 0) return; /* no query sees these keys: nothing to add */

  float *dkh = dk + bhk * p.Nk * D, *dvh = dv + bhk * p.Nk * D;
#pragma unroll
  for (int hr = 0; hr < 2; hr++) {
    const int64_t j = j0 + wkey + g + 8 * hr;
    if (j >= p.Nk) continue;
#pragma unroll
    for (int db = 0; db < DB; db++) {
      float2 *pk = reinterpret_cast<float2 *>(dkh + j * D + db * 8 + 2 * t4);
      float2 *pv = reinterpret_cast<float2 *>(dvh + j * D + db * 8 + 2 * t4);
      float2 xk = *pk, xv = *pv;
      xk.x += adk[db][2 * hr];
      xk.y += adk[db][2 * hr + 1];
      xv.x += adv[db][2 * hr];
      xv.y += adv[db][2 * hr + 1];
      *pk = xk;
      *pv = xv;
    }
  }
}

#ifndef ATTN_CUDA_EMU
template <typename T, int D, int BM, int NW>
static int launch_bwd(const attn_params *p, const attn_cuda_launch *L, const void *q, const void *k, const void *v,
                      const void *dout, const float *lse, const float *delta, float *dq, float *dk, float *dv,
                      cudaStream_t s) {
  using C = bwd_cfg<T, D, BM, NW>;
  if (L->smem_bytes != C::SMEM || L->tile_q != BM || L->tile_k != C::BN || L->warps != NW) {
    fprintf(stderr, "burstsim cuda: backward plan and kernel disagree (smem %zu vs %zu)\n", L->smem_bytes, C::SMEM);
    return ATTN_EINVAL;
  }
  auto kern = bwd_mma_kernel<T, D, BM, NW>;
  ATTN_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM));
  attn_mask m = attn_cuda_mask_of(p);
  kern<<<(unsigned)L->blocks, C::NT, C::SMEM, s>>>(*p, m, (const T *)q, (const T *)k, (const T *)v, (const T *)dout,
                                                   lse, delta, dq, dk, dv);
  ATTN_CUDA_LAUNCHED("bwd_mma_kernel");
  return ATTN_OK;
}

template <typename T, int D>
static int launch_bwd_d(const attn_params *p, const attn_cuda_launch *L, const void *q, const void *k, const void *v,
                        const void *dout, const float *lse, const float *delta, float *dq, float *dk, float *dv,
                        cudaStream_t s) {
  if (L->tile_q == 32 && L->tile_k == 64)
    return launch_bwd<T, D, 32, 4>(p, L, q, k, v, dout, lse, delta, dq, dk, dv, s);
  if (L->tile_q == 64 && L->tile_k == 64)
    return launch_bwd<T, D, 64, 4>(p, L, q, k, v, dout, lse, delta, dq, dk, dv, s);
  if (L->tile_q == 32 && L->tile_k == 128)
    return launch_bwd<T, D, 32, 8>(p, L, q, k, v, dout, lse, delta, dq, dk, dv, s);
  if (L->tile_q == 64 && L->tile_k == 128)
    return launch_bwd<T, D, 64, 8>(p, L, q, k, v, dout, lse, delta, dq, dk, dv, s);
  fprintf(stderr, "burstsim cuda: no backward kernel for tiles %d x %d\n", L->tile_q, L->tile_k);
  return ATTN_EINVAL;
}

template <typename T>
static int launch_bwd_t(const attn_params *p, const attn_cuda_launch *L, const void *q, const void *k, const void *v,
                        const void *dout, const float *lse, const float *delta, float *dq, float *dk, float *dv,
                        cudaStream_t s) {
  if (p->d == 64) return launch_bwd_d<T, 64>(p, L, q, k, v, dout, lse, delta, dq, dk, dv, s);
  if (p->d == 128) return launch_bwd_d<T, 128>(p, L, q, k, v, dout, lse, delta, dq, dk, dv, s);
  fprintf(stderr, "burstsim cuda: no backward kernel for d = %d\n", p->d);
  return ATTN_EINVAL;
}

#endif // ATTN_CUDA_EMU

} // namespace attn_cuda

#ifndef ATTN_CUDA_EMU
extern "C" int attn_cuda_launch_bwd_mma(const attn_params *p, const attn_cuda_launch *L, const void *q, const void *k,
                                        const void *v, const void *dout, const float *lse, const float *delta,
                                        float *dq, float *dk, float *dv, cudaStream_t s) {
  if (p->dtype == ATTN_BF16)
    return attn_cuda::launch_bwd_t<__nv_bfloat16>(p, L, q, k, v, dout, lse, delta, dq, dk, dv, s);
  if (p->dtype == ATTN_CUDA_FP16)
    return attn_cuda::launch_bwd_t<__half>(p, L, q, k, v, dout, lse, delta, dq, dk, dv, s);
  fprintf(stderr, "burstsim cuda: the MMA backward needs bf16 or fp16 storage\n");
  return ATTN_EDTYPE;
}
#endif
