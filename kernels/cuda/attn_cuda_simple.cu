/*
 * attn_cuda_simple.cu — the CUDA-core path: one warp per row, fp32 math, any
 * storage type, any d up to 256. It is the path for fp32 storage and odd head
 * dimensions, and the GPU cross-check of the tensor-core kernels. Also here:
 * delta = rowsum(dO * O), the merge of two partial (O, lse), and the decode
 * kernels (keys split over blocks, partial results reduced by lse).
 */
#include "kernels/cuda/attn_cuda_common.cuh"

namespace attn_cuda {

/* Columns a lane owns: c = lane + 32*u for u < COLS (d <= 32*COLS). */
#define SIMPLE_COLS 8
#define SIMPLE_WARPS 4

/* Row r of [B, Z, N] -> (b, z, i). */
struct row3 {
  int64_t b, z, i;
};
__device__ __forceinline__ row3 split_row(int64_t r, int Z, int64_t N) {
  row3 x;
  x.i = r % N;
  int64_t bz = r / N;
  x.z = bz % Z;
  x.b = bz / Z;
  return x;
}

/* ---- forward ---------------------------------------------------------- */

template <typename T>
__global__ void __launch_bounds__(SIMPLE_WARPS * 32)
  fwd_simple_kernel(attn_params p, attn_mask m, const T *__restrict__ q, const T *__restrict__ k,
                    const T *__restrict__ v, float *__restrict__ o, float *__restrict__ lse, int accumulate) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * SIMPLE_WARPS + (threadIdx.x >> 5);
  const int64_t rows = (int64_t)p.B * p.Zq * p.Nq;
  if (row >= rows) return; /* whole warps leave together: row is warp-uniform */
  const int d = p.d;
  row3 x = split_row(row, p.Zq, p.Nq);
  const int64_t hk = x.z / (p.Zq / p.Zkv);
  const T *qrow = q + row * d;
  const T *kbase = k + ((x.b * p.Zkv + hk) * p.Nk) * d;
  const T *vbase = v + ((x.b * p.Zkv + hk) * p.Nk) * d;
  const float qs = p.scale * ATTN_CUDA_LOG2E;
  float qr[SIMPLE_COLS], acc[SIMPLE_COLS];
#pragma unroll
  for (int u = 0; u < SIMPLE_COLS; u++) {
    int c = lane + 32 * u;
    qr[u] = c < d ? to_f32(qrow[c]) * qs : 0.0f;
    acc[u] = 0.0f;
  }
  int64_t jlo, jhi;
  attn_mask_key_range(&m, x.i, 1, p.Nk, &jlo, &jhi);
  const int64_t qp = m.q_pos0 + x.i * m.q_stride;
  float mx = -CUDART_INF_F, l = 0.0f;
  for (int64_t j = jlo; j < jhi; j++) {
    if (!attn_mask_visible(&m, qp, m.k_pos0 + j * m.k_stride)) continue; /* warp-uniform */
    const T *kr = kbase + j * d;
    float s = 0.0f;
#pragma unroll
    for (int u = 0; u < SIMPLE_COLS; u++) {
      int c = lane + 32 * u;
      if (c < d) s += qr[u] * to_f32(kr[c]);
    }
    s = warp_sum(s);
    float mnew = fmaxf(mx, s);
    float corr = exp2f(mx - mnew); /* mx = -inf on the first key: corr = 0 */
    float pj = exp2f(s - mnew);
    l = l * corr + pj;
    const T *vr = vbase + j * d;
#pragma unroll
    for (int u = 0; u < SIMPLE_COLS; u++) {
      int c = lane + 32 * u;
      acc[u] = acc[u] * corr + (c < d ? pj * to_f32(vr[c]) : 0.0f);
    }
    mx = mnew;
  }
  const float lse_new = l > 0.0f ? (mx + log2f(l)) * ATTN_CUDA_LN2 : -CUDART_INF_F;
  const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
  const float lse_old = accumulate ? lse[row] : 0.0f;
  __syncwarp(); /* every lane has read lse_old before lane 0 overwrites it */
  merge_w w = merge_weights(accumulate, lse_old, lse_new);
  float *orow = o + row * d;
#pragma unroll
  for (int u = 0; u < SIMPLE_COLS; u++) {
    int c = lane + 32 * u;
    if (c < d) {
      float on = acc[u] * inv_l;
      float val = w.w_new * on;
      if (w.w_old != 0.0f) val += w.w_old * orow[c];
      orow[c] = val;
    }
  }
  if (lane == 0) lse[row] = w.lse;
}

/* ---- backward --------------------------------------------------------- */

/* dQ: one warp per query row; walks the keys it may see. */
template <typename T>
__global__ void __launch_bounds__(SIMPLE_WARPS * 32)
  bwd_dq_simple_kernel(attn_params p, attn_mask m, const T *__restrict__ q, const T *__restrict__ k,
                       const T *__restrict__ v, const T *__restrict__ dout, const float *__restrict__ lse,
                       const float *__restrict__ delta, float *__restrict__ dq) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * SIMPLE_WARPS + (threadIdx.x >> 5);
  const int64_t rows = (int64_t)p.B * p.Zq * p.Nq;
  if (row >= rows) return;
  const float lrow = lse[row];
  if (lrow == -CUDART_INF_F) return; /* no key visible anywhere: no gradient */
  const int d = p.d;
  row3 x = split_row(row, p.Zq, p.Nq);
  const int64_t hk = x.z / (p.Zq / p.Zkv);
  const T *kbase = k + ((x.b * p.Zkv + hk) * p.Nk) * d;
  const T *vbase = v + ((x.b * p.Zkv + hk) * p.Nk) * d;
  const float qs = p.scale * ATTN_CUDA_LOG2E, l2 = lrow * ATTN_CUDA_LOG2E, drow = delta[row];
  float qr[SIMPLE_COLS], g[SIMPLE_COLS], acc[SIMPLE_COLS];
#pragma unroll
  for (int u = 0; u < SIMPLE_COLS; u++) {
    int c = lane + 32 * u;
    qr[u] = c < d ? to_f32(q[row * d + c]) * qs : 0.0f;
    g[u] = c < d ? to_f32(dout[row * d + c]) : 0.0f;
    acc[u] = 0.0f;
  }
  int64_t jlo, jhi;
  attn_mask_key_range(&m, x.i, 1, p.Nk, &jlo, &jhi);
  const int64_t qp = m.q_pos0 + x.i * m.q_stride;
  for (int64_t j = jlo; j < jhi; j++) {
    if (!attn_mask_visible(&m, qp, m.k_pos0 + j * m.k_stride)) continue;
    const T *kr = kbase + j * d, *vr = vbase + j * d;
    float s = 0.0f, dp = 0.0f;
#pragma unroll
    for (int u = 0; u < SIMPLE_COLS; u++) {
      int c = lane + 32 * u;
      if (c < d) {
        s += qr[u] * to_f32(kr[c]);
        dp += g[u] * to_f32(vr[c]);
      }
    }
    s = warp_sum(s);
    dp = warp_sum(dp);
    float pj = exp2f(s - l2);
    float ds = pj * (dp - drow) * p.scale;
#pragma unroll
    for (int u = 0; u < SIMPLE_COLS; u++) {
      int c = lane + 32 * u;
      if (c < d) acc[u] += ds * to_f32(kr[c]);
    }
  }
#pragma unroll
  for (int u = 0; u < SIMPLE_COLS; u++) {
    int c = lane + 32 * u;
    if (c < d) dq[row * d + c] += acc[u];
  }
}

/* dK, dV: one warp per key row; walks every query head of its group and the
 * query rows that may see it. Each warp owns its rows: no atomics. */
template <typename T>
__global__ void __launch_bounds__(SIMPLE_WARPS * 32)
  bwd_dkdv_simple_kernel(attn_params p, attn_mask m, const T *__restrict__ q, const T *__restrict__ k,
                         const T *__restrict__ v, const T *__restrict__ dout, const float *__restrict__ lse,
                         const float *__restrict__ delta, float *__restrict__ dk, float *__restrict__ dv) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * SIMPLE_WARPS + (threadIdx.x >> 5);
  const int64_t rows = (int64_t)p.B * p.Zkv * p.Nk;
  if (row >= rows) return;
  const int d = p.d;
  row3 x = split_row(row, p.Zkv, p.Nk); /* x.z = kv head, x.i = key row j */
  const int group = p.Zq / p.Zkv;
  const float qs = p.scale * ATTN_CUDA_LOG2E;
  float kr[SIMPLE_COLS], vr[SIMPLE_COLS], ak[SIMPLE_COLS], av[SIMPLE_COLS];
#pragma unroll
  for (int u = 0; u < SIMPLE_COLS; u++) {
    int c = lane + 32 * u;
    kr[u] = c < d ? to_f32(k[row * d + c]) : 0.0f;
    vr[u] = c < d ? to_f32(v[row * d + c]) : 0.0f;
    ak[u] = 0.0f;
    av[u] = 0.0f;
  }
  int64_t ilo, ihi;
  attn_mask_query_range(&m, x.i, 1, p.Nq, &ilo, &ihi);
  const int64_t kp = m.k_pos0 + x.i * m.k_stride;
  for (int hh = 0; hh < group; hh++) {
    const int64_t h = x.z * group + hh;
    const int64_t qrow0 = (x.b * p.Zq + h) * p.Nq;
    for (int64_t i = ilo; i < ihi; i++) {
      if (!attn_mask_visible(&m, m.q_pos0 + i * m.q_stride, kp)) continue;
      const int64_t r = qrow0 + i;
      const float lrow = lse[r];
      if (lrow == -CUDART_INF_F) continue;
      const T *qr = q + r * d, *gr = dout + r * d;
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int u = 0; u < SIMPLE_COLS; u++) {
        int c = lane + 32 * u;
        if (c < d) {
          s += to_f32(qr[c]) * kr[u];
          dp += to_f32(gr[c]) * vr[u];
        }
      }
      s = warp_sum(s);
      dp = warp_sum(dp);
      float pj = exp2f(s * qs - lrow * ATTN_CUDA_LOG2E);
      float ds = pj * (dp - delta[r]) * p.scale;
#pragma unroll
      for (int u = 0; u < SIMPLE_COLS; u++) {
        int c = lane + 32 * u;
        if (c < d) {
          av[u] += pj * to_f32(gr[c]);
          ak[u] += ds * to_f32(qr[c]);
        }
      }
    }
  }
#pragma unroll
  for (int u = 0; u < SIMPLE_COLS; u++) {
    int c = lane + 32 * u;
    if (c < d) {
      dk[row * d + c] += ak[u];
      dv[row * d + c] += av[u];
    }
  }
}

/* ---- delta and merge ---------------------------------------------------- */

template <typename T>
__global__ void __launch_bounds__(SIMPLE_WARPS * 32)
  delta_kernel(int64_t rows, int d, const float *__restrict__ o, const T *__restrict__ dout,
               float *__restrict__ delta) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * SIMPLE_WARPS + (threadIdx.x >> 5);
  if (row >= rows) return;
  float acc = 0.0f;
  for (int c = lane; c < d; c += 32) acc += o[row * d + c] * to_f32(dout[row * d + c]);
  acc = warp_sum(acc);
  if (lane == 0) delta[row] = acc;
}

__global__ void __launch_bounds__(SIMPLE_WARPS * 32)
  merge_kernel(int64_t rows, int d, float *__restrict__ o, float *__restrict__ lse, const float *__restrict__ o2,
               const float *__restrict__ lse2) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * SIMPLE_WARPS + (threadIdx.x >> 5);
  if (row >= rows) return;
  const float l1 = lse[row], l2 = lse2[row];
  __syncwarp();
  merge_w w = merge_weights(1, l1, l2);
  for (int c = lane; c < d; c += 32) {
    float val = w.w_new != 0.0f ? w.w_new * o2[row * d + c] : 0.0f;
    if (w.w_old != 0.0f) val += w.w_old * o[row * d + c];
    o[row * d + c] = val;
  }
  if (lane == 0) lse[row] = w.lse;
}

/* ---- random fill --------------------------------------------------------- */

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ void store_as(float *d, float x) { *d = x; }
__device__ __forceinline__ void store_as(__nv_bfloat16 *d, float x) { *d = __float2bfloat16_rn(x); }
__device__ __forceinline__ void store_as(__half *d, float x) { *d = __float2half_rn(x); }

template <typename T>
__global__ void fill_random_kernel(T *__restrict__ dst, int64_t n, uint64_t seed, float scale) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t r = mix64(seed ^ mix64((uint64_t)i));
    const float u = (float)(r >> 40) * (1.0f / 16777216.0f); /* [0, 1) from 24 bits */
    store_as(dst + i, (2.0f * u - 1.0f) * scale);
  }
}

/* ---- decode ------------------------------------------------------------- */

#define DECODE_WARPS 4

/* The decode block's shared memory (dynamic, 41 KB: under the 48 KB default). */
struct decode_smem {
  float q[ATTN_CUDA_DECODE_MAX_Q][ATTN_CUDA_MAX_D];
  float m[DECODE_WARPS][ATTN_CUDA_DECODE_MAX_Q];
  float l[DECODE_WARPS][ATTN_CUDA_DECODE_MAX_Q];
  float o[DECODE_WARPS][ATTN_CUDA_DECODE_MAX_Q][ATTN_CUDA_MAX_D];
};

/* One block per (batch, query head, split): every query row (Nq <= 8) against
 * its share of the keys; writes a normalised partial (O, lse) per row. */
template <typename T>
__global__ void __launch_bounds__(DECODE_WARPS * 32)
  decode_partial_kernel(attn_params p, attn_mask m, int splits, const T *__restrict__ q, const T *__restrict__ k,
                        const T *__restrict__ v, float *__restrict__ part_o, float *__restrict__ part_lse) {
#ifdef ATTN_CUDA_EMU
  decode_smem &S = *reinterpret_cast<decode_smem *>(emu_dynamic_smem());
#else
  extern __shared__ __align__(16) unsigned char smem_raw[];
  decode_smem &S = *reinterpret_cast<decode_smem *>(smem_raw);
#endif
  float(*sq)[ATTN_CUDA_MAX_D] = S.q;
  float(*sm)[ATTN_CUDA_DECODE_MAX_Q] = S.m;
  float(*sl)[ATTN_CUDA_DECODE_MAX_Q] = S.l;
  float(*so)[ATTN_CUDA_DECODE_MAX_Q][ATTN_CUDA_MAX_D] = S.o;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t blk = (int64_t)blockIdx.x;
  const int split = (int)(blk % splits);
  const int64_t bh = blk / splits; /* b * Zq + h */
  const int64_t b = bh / p.Zq, h = bh % p.Zq;
  const int64_t hk = h / (p.Zq / p.Zkv);
  const int d = p.d, nq = (int)p.Nq;
  const float qs = p.scale * ATTN_CUDA_LOG2E;
  for (int t = threadIdx.x; t < ATTN_CUDA_DECODE_MAX_Q * ATTN_CUDA_MAX_D; t += blockDim.x) {
    int r = t / ATTN_CUDA_MAX_D, c = t % ATTN_CUDA_MAX_D;
    sq[r][c] = (r < nq && c < d) ? to_f32(q[(bh * p.Nq + r) * d + c]) * qs : 0.0f;
  }
  __syncthreads();
  int64_t jlo, jhi;
  attn_mask_key_range(&m, 0, p.Nq, p.Nk, &jlo, &jhi);
  const int64_t span = jhi > jlo ? jhi - jlo : 0;
  const int64_t chunk = (span + splits - 1) / splits;
  int64_t j0 = jlo + (int64_t)split * chunk, j1 = j0 + chunk;
  if (j1 > jhi) j1 = jhi;
  const T *kbase = k + ((b * p.Zkv + hk) * p.Nk) * d;
  const T *vbase = v + ((b * p.Zkv + hk) * p.Nk) * d;
  float mx[ATTN_CUDA_DECODE_MAX_Q], l[ATTN_CUDA_DECODE_MAX_Q];
  float acc[ATTN_CUDA_DECODE_MAX_Q][SIMPLE_COLS];
#pragma unroll
  for (int r = 0; r < ATTN_CUDA_DECODE_MAX_Q; r++) {
    mx[r] = -CUDART_INF_F;
    l[r] = 0.0f;
#pragma unroll
    for (int u = 0; u < SIMPLE_COLS; u++) acc[r][u] = 0.0f;
  }
  for (int64_t j = j0 + warp; j < j1; j += DECODE_WARPS) {
    float kr[SIMPLE_COLS], vr[SIMPLE_COLS];
#pragma unroll
    for (int u = 0; u < SIMPLE_COLS; u++) {
      int c = lane + 32 * u;
      kr[u] = c < d ? to_f32(kbase[j * d + c]) : 0.0f;
      vr[u] = c < d ? to_f32(vbase[j * d + c]) : 0.0f;
    }
    const int64_t kp = m.k_pos0 + j * m.k_stride;
#pragma unroll
    for (int r = 0; r < ATTN_CUDA_DECODE_MAX_Q; r++) {
      if (r >= nq) break;
      float s = 0.0f;
#pragma unroll
      for (int u = 0; u < SIMPLE_COLS; u++) {
        int c = lane + 32 * u;
        if (c < d) s += sq[r][c] * kr[u];
      }
      s = warp_sum(s);
      if (!attn_mask_visible(&m, m.q_pos0 + r * m.q_stride, kp)) continue;
      float mnew = fmaxf(mx[r], s);
      float corr = exp2f(mx[r] - mnew), pj = exp2f(s - mnew);
      l[r] = l[r] * corr + pj;
#pragma unroll
      for (int u = 0; u < SIMPLE_COLS; u++) acc[r][u] = acc[r][u] * corr + pj * vr[u];
      mx[r] = mnew;
    }
  }
#pragma unroll
  for (int r = 0; r < ATTN_CUDA_DECODE_MAX_Q; r++) {
    if (lane == 0) {
      sm[warp][r] = mx[r];
      sl[warp][r] = l[r];
    }
#pragma unroll
    for (int u = 0; u < SIMPLE_COLS; u++) {
      int c = lane + 32 * u;
      if (c < ATTN_CUDA_MAX_D) so[warp][r][c] = acc[r][u];
    }
  }
  __syncthreads();
  /* Combine the warps: row r, column c per thread. */
  for (int t = threadIdx.x; t < nq * d; t += blockDim.x) {
    int r = t / d, c = t % d;
    float M = -CUDART_INF_F;
    for (int w = 0; w < DECODE_WARPS; w++) M = fmaxf(M, sm[w][r]);
    float L = 0.0f, O = 0.0f;
    if (M != -CUDART_INF_F) {
      for (int w = 0; w < DECODE_WARPS; w++) {
        if (sl[w][r] == 0.0f) continue;
        float f = exp2f(sm[w][r] - M);
        L += sl[w][r] * f;
        O += so[w][r][c] * f;
      }
    }
    const int64_t prow = (bh * p.Nq + r) * splits + split;
    part_o[prow * d + c] = L > 0.0f ? O / L : 0.0f;
    if (c == 0) part_lse[prow] = L > 0.0f ? (M + log2f(L)) * ATTN_CUDA_LN2 : -CUDART_INF_F;
  }
}

/* One warp per (batch, head, row): merges the splits by lse, then into (o, lse). */
__global__ void __launch_bounds__(SIMPLE_WARPS * 32)
  decode_reduce_kernel(int64_t rows, int d, int splits, const float *__restrict__ part_o,
                       const float *__restrict__ part_lse, float *__restrict__ o, float *__restrict__ lse,
                       int accumulate) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * SIMPLE_WARPS + (threadIdx.x >> 5);
  if (row >= rows) return;
  const float *pl = part_lse + row * splits;
  float M = -CUDART_INF_F;
  for (int s = 0; s < splits; s++) M = fmaxf(M, pl[s]);
  float S = 0.0f;
  if (M != -CUDART_INF_F)
    for (int s = 0; s < splits; s++) S += pl[s] == -CUDART_INF_F ? 0.0f : expf(pl[s] - M);
  const float lse_new = S > 0.0f ? M + logf(S) : -CUDART_INF_F;
  const float lse_old = accumulate ? lse[row] : 0.0f;
  __syncwarp();
  merge_w w = merge_weights(accumulate, lse_old, lse_new);
  for (int c = lane; c < d; c += 32) {
    float on = 0.0f;
    if (S > 0.0f)
      for (int s = 0; s < splits; s++)
        if (pl[s] != -CUDART_INF_F) on += expf(pl[s] - M) / S * part_o[(row * splits + s) * d + c];
    float val = w.w_new * on;
    if (w.w_old != 0.0f) val += w.w_old * o[row * d + c];
    o[row * d + c] = val;
  }
  if (lane == 0) lse[row] = w.lse;
}

} // namespace attn_cuda

#ifndef ATTN_CUDA_EMU
using namespace attn_cuda;

static unsigned blocks_for_rows(int64_t rows) { return (unsigned)((rows + SIMPLE_WARPS - 1) / SIMPLE_WARPS); }

extern "C" int attn_cuda_launch_fwd_simple(const attn_params *p, const attn_cuda_launch *L, const void *q,
                                           const void *k, const void *v, float *o, float *lse, int accumulate,
                                           cudaStream_t s) {
  attn_mask m = attn_cuda_mask_of(p);
  dim3 grid((unsigned)L->blocks), block(SIMPLE_WARPS * 32);
  if (p->dtype == ATTN_BF16)
    fwd_simple_kernel<__nv_bfloat16><<<grid, block, 0, s>>>(*p, m, (const __nv_bfloat16 *)q, (const __nv_bfloat16 *)k,
                                                            (const __nv_bfloat16 *)v, o, lse, accumulate);
  else if (p->dtype == ATTN_CUDA_FP16)
    fwd_simple_kernel<__half>
      <<<grid, block, 0, s>>>(*p, m, (const __half *)q, (const __half *)k, (const __half *)v, o, lse, accumulate);
  else
    fwd_simple_kernel<float>
      <<<grid, block, 0, s>>>(*p, m, (const float *)q, (const float *)k, (const float *)v, o, lse, accumulate);
  ATTN_CUDA_LAUNCHED("fwd_simple_kernel");
  return ATTN_OK;
}

template <typename T>
static int bwd_simple_t(const attn_params *p, const void *q, const void *k, const void *v, const void *dout,
                        const float *lse, const float *delta, float *dq, float *dk, float *dv, cudaStream_t s) {
  attn_mask m = attn_cuda_mask_of(p);
  dim3 block(SIMPLE_WARPS * 32);
  const int64_t qrows = (int64_t)p->B * p->Zq * p->Nq, krows = (int64_t)p->B * p->Zkv * p->Nk;
  bwd_dq_simple_kernel<T><<<blocks_for_rows(qrows), block, 0, s>>>(*p, m, (const T *)q, (const T *)k, (const T *)v,
                                                                   (const T *)dout, lse, delta, dq);
  ATTN_CUDA_LAUNCHED("bwd_dq_simple_kernel");
  bwd_dkdv_simple_kernel<T><<<blocks_for_rows(krows), block, 0, s>>>(*p, m, (const T *)q, (const T *)k, (const T *)v,
                                                                     (const T *)dout, lse, delta, dk, dv);
  ATTN_CUDA_LAUNCHED("bwd_dkdv_simple_kernel");
  return ATTN_OK;
}

extern "C" int attn_cuda_launch_bwd_simple(const attn_params *p, const attn_cuda_launch *L, const void *q,
                                           const void *k, const void *v, const void *dout, const float *lse,
                                           const float *delta, float *dq, float *dk, float *dv, cudaStream_t s) {
  (void)L;
  if (p->dtype == ATTN_BF16) return bwd_simple_t<__nv_bfloat16>(p, q, k, v, dout, lse, delta, dq, dk, dv, s);
  if (p->dtype == ATTN_CUDA_FP16) return bwd_simple_t<__half>(p, q, k, v, dout, lse, delta, dq, dk, dv, s);
  return bwd_simple_t<float>(p, q, k, v, dout, lse, delta, dq, dk, dv, s);
}

extern "C" int attn_cuda_delta(const attn_params *p, const float *o, const void *dout, float *delta, cudaStream_t s) {
  char msg[160];
  int err = attn_cuda_check_msg(p, msg, sizeof msg);
  if (err) {
    fprintf(stderr, "burstsim cuda: attn_cuda_delta: %s\n", msg);
    return err;
  }
  if (!o || !dout || !delta) {
    fprintf(stderr, "burstsim cuda: attn_cuda_delta: a required buffer is NULL\n");
    return ATTN_ENULL;
  }
  const int64_t rows = (int64_t)p->B * p->Zq * p->Nq;
  dim3 block(SIMPLE_WARPS * 32);
  if (p->dtype == ATTN_BF16)
    delta_kernel<__nv_bfloat16>
      <<<blocks_for_rows(rows), block, 0, s>>>(rows, p->d, o, (const __nv_bfloat16 *)dout, delta);
  else if (p->dtype == ATTN_CUDA_FP16)
    delta_kernel<__half><<<blocks_for_rows(rows), block, 0, s>>>(rows, p->d, o, (const __half *)dout, delta);
  else delta_kernel<float><<<blocks_for_rows(rows), block, 0, s>>>(rows, p->d, o, (const float *)dout, delta);
  ATTN_CUDA_LAUNCHED("delta_kernel");
  return ATTN_OK;
}

extern "C" int attn_cuda_merge(int64_t rows, int d, float *o, float *lse, const float *o2, const float *lse2,
                               cudaStream_t s) {
  if (rows <= 0 || d <= 0 || rows > ((int64_t)1 << 36)) {
    fprintf(stderr, "burstsim cuda: attn_cuda_merge: rows and d must be positive\n");
    return ATTN_EINVAL;
  }
  if (!o || !lse || !o2 || !lse2) {
    fprintf(stderr, "burstsim cuda: attn_cuda_merge: a required buffer is NULL\n");
    return ATTN_ENULL;
  }
  merge_kernel<<<blocks_for_rows(rows), SIMPLE_WARPS * 32, 0, s>>>(rows, d, o, lse, o2, lse2);
  ATTN_CUDA_LAUNCHED("merge_kernel");
  return ATTN_OK;
}

template <typename T>
static int decode_t(const attn_params *p, int splits, const void *q, const void *k, const void *v, float *part_o,
                    float *part_lse, float *o, float *lse, int accumulate, cudaStream_t s) {
  attn_mask m = attn_cuda_mask_of(p);
  const int64_t heads = (int64_t)p->B * p->Zq;
  decode_partial_kernel<T><<<(unsigned)(heads * splits), DECODE_WARPS * 32, sizeof(decode_smem), s>>>(
    *p, m, splits, (const T *)q, (const T *)k, (const T *)v, part_o, part_lse);
  ATTN_CUDA_LAUNCHED("decode_partial_kernel");
  const int64_t rows = heads * p->Nq;
  decode_reduce_kernel<<<blocks_for_rows(rows), SIMPLE_WARPS * 32, 0, s>>>(rows, p->d, splits, part_o, part_lse, o, lse,
                                                                           accumulate);
  ATTN_CUDA_LAUNCHED("decode_reduce_kernel");
  return ATTN_OK;
}

extern "C" int attn_cuda_decode(const attn_params *p, const void *q, const void *k, const void *v, float *o, float *lse,
                                int accumulate, int splits, void *workspace, cudaStream_t s) {
  char msg[160];
  int err = attn_cuda_check_msg(p, msg, sizeof msg);
  if (err) {
    fprintf(stderr, "burstsim cuda: attn_cuda_decode: %s\n", msg);
    return err;
  }
  if (p->Nq > ATTN_CUDA_DECODE_MAX_Q) {
    fprintf(stderr, "burstsim cuda: attn_cuda_decode: Nq = %lld, at most %d query rows\n", (long long)p->Nq,
            ATTN_CUDA_DECODE_MAX_Q);
    return ATTN_EINVAL;
  }
  if (!q || !k || !v || !o || !lse) {
    fprintf(stderr, "burstsim cuda: attn_cuda_decode: a required buffer is NULL\n");
    return ATTN_ENULL;
  }
  if (splits == 0) splits = attn_cuda_decode_splits(p);
  if (splits < 0 || splits > 65536 || (int64_t)p->B * p->Zq * splits > 2147483647LL) {
    fprintf(stderr, "burstsim cuda: attn_cuda_decode: bad split count %d\n", splits);
    return ATTN_EINVAL;
  }
  const size_t bytes = attn_cuda_decode_workspace_bytes(p, splits);
  void *ws = workspace;
  if (!ws) ATTN_CUDA_TRY(cudaMalloc(&ws, bytes));
  const size_t prow = (size_t)p->B * p->Zq * (size_t)p->Nq * (size_t)splits;
  float *part_o = (float *)ws, *part_lse = part_o + prow * (size_t)p->d;
  if (p->dtype == ATTN_BF16) err = decode_t<__nv_bfloat16>(p, splits, q, k, v, part_o, part_lse, o, lse, accumulate, s);
  else if (p->dtype == ATTN_CUDA_FP16)
    err = decode_t<__half>(p, splits, q, k, v, part_o, part_lse, o, lse, accumulate, s);
  else err = decode_t<float>(p, splits, q, k, v, part_o, part_lse, o, lse, accumulate, s);
  if (!workspace) {
    cudaError_t se = cudaStreamSynchronize(s);
    cudaError_t fe = cudaFree(ws);
    if (!err && (se != cudaSuccess || fe != cudaSuccess)) {
      fprintf(stderr, "burstsim cuda: attn_cuda_decode: %s\n", cudaGetErrorString(se != cudaSuccess ? se : fe));
      err = ATTN_ECUDA;
    }
  }
  return err;
}

extern "C" int attn_cuda_fill_random(void *dst, attn_dtype dtype, int64_t n, uint64_t seed, float scale,
                                     cudaStream_t s) {
  if (!dst) {
    fprintf(stderr, "burstsim cuda: attn_cuda_fill_random: dst is NULL\n");
    return ATTN_ENULL;
  }
  if (n <= 0 || attn_cuda_elem_bytes(dtype) == 0) {
    fprintf(stderr, "burstsim cuda: attn_cuda_fill_random: bad size or dtype\n");
    return n <= 0 ? ATTN_EINVAL : ATTN_EDTYPE;
  }
  const int64_t want = (n + 255) / 256;
  const unsigned blocks = (unsigned)(want < 65536 ? want : 65536);
  if (dtype == ATTN_BF16) fill_random_kernel<<<blocks, 256, 0, s>>>((__nv_bfloat16 *)dst, n, seed, scale);
  else if (dtype == ATTN_CUDA_FP16) fill_random_kernel<<<blocks, 256, 0, s>>>((__half *)dst, n, seed, scale);
  else fill_random_kernel<<<blocks, 256, 0, s>>>((float *)dst, n, seed, scale);
  ATTN_CUDA_LAUNCHED("fill_random_kernel");
  return ATTN_OK;
}

#endif // ATTN_CUDA_EMU
