/*
 * attn_cuda_emu.h — a host emulation of the few device features the MMA
 * kernels use, so their index arithmetic (ldmatrix addressing, fragment
 * layouts, the accumulator-to-operand reuse, masks, the cp.async pipeline)
 * is tested on a machine without a GPU. Compiled only with ATTN_CUDA_EMU
 * defined, by the host test tests/cuda/test_mma_emulated.cpp: every CUDA
 * thread of a block is a host thread; __syncthreads and the warp-collective
 * operations (shuffles, ldmatrix, mma.sync) meet at barriers.
 *
 * What it proves and what not: it checks the kernels against the PTX ISA's
 * fragment layouts as written down in attn_cuda_mma.cuh (the same reading of
 * the documentation the kernels were written from) — a slip in any index is
 * caught, a misreading of the documentation itself is not. cp.async copies
 * can be run at issue or deferred to the wait (EMU_CP_DEFER), to expose both a
 * read before the data landed and an overwrite while a tile is still read.
 */
#ifndef BURSTSIM_ATTN_CUDA_EMU_H
#define BURSTSIM_ATTN_CUDA_EMU_H

#ifndef ATTN_CUDA_EMU
#error "attn_cuda_emu.h is for the host emulation build only"
#endif

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <vector>

#undef __global__
#define __global__
#define __launch_bounds__(...)
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#ifndef __device__
#define __device__
#endif
#ifndef __host__
#define __host__
#endif
#undef __align__
#define __align__(n) alignas(n)

inline float __int_as_float(unsigned int u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

struct emu_dim3 {
  unsigned x, y, z;
};

/* One block's shared state: barriers and the warps' exchange areas. */
struct emu_block {
  int nthreads;
  pthread_barrier_t block_bar;
  pthread_barrier_t warp_bar[32];
  uint64_t xchg[32][32][12]; /* [warp][lane][words] */
  std::vector<unsigned char> smem;
};

struct emu_cp {
  void *dst;
  const void *src;
  int valid;
};

struct emu_thread {
  emu_block *blk;
  int tid;
  std::vector<std::vector<emu_cp>> groups; /* committed cp.async groups, oldest first */
  std::vector<emu_cp> open;                /* issued, not yet committed */
  int defer;                               /* run copies at the wait, not at issue */
};

inline thread_local emu_thread *emu_self = nullptr;
inline thread_local emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

inline void __syncthreads() { pthread_barrier_wait(&emu_self->blk->block_bar); }
inline void emu_warp_bar() { pthread_barrier_wait(&emu_self->blk->warp_bar[emu_self->tid / 32]); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)mask;
  emu_warp_bar();
}
inline uint64_t *emu_slot(int lane) { return emu_self->blk->xchg[emu_self->tid / 32][lane]; }
inline int emu_lane() { return emu_self->tid % 32; }

inline float __shfl_xor_sync(unsigned mask, float v, int lanemask) {
  (void)mask;
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  emu_slot(emu_lane())[0] = u;
  emu_warp_bar();
  uint32_t o = (uint32_t)emu_slot(emu_lane() ^ lanemask)[0];
  emu_warp_bar();
  float r;
  memcpy(&r, &o, sizeof r);
  return r;
}

inline float atomicAdd(float *p, float v) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&mu);
  float old = *p;
  *p = old + v;
  pthread_mutex_unlock(&mu);
  return old;
}

inline uint16_t emu_b16(const void *row, int col) {
  uint16_t x;
  memcpy(&x, (const unsigned char *)row + 2 * col, 2);
  return x;
}

/* ldmatrix .x4 (trans = 0 or 1): lanes 8i..8i+7 give the row addresses of matrix i. */
inline void emu_ldsm_x4(uint32_t r[4], const void *p, int trans) {
  const int lane = emu_lane();
  emu_slot(lane)[0] = (uint64_t)(uintptr_t)p;
  emu_warp_bar();
  const int g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; i++) {
    uint16_t lo, hi;
    if (!trans) {
      const void *row = (const void *)(uintptr_t)emu_slot(8 * i + g)[0];
      lo = emu_b16(row, 2 * t);
      hi = emu_b16(row, 2 * t + 1);
    } else {
      lo = emu_b16((const void *)(uintptr_t)emu_slot(8 * i + 2 * t)[0], g);
      hi = emu_b16((const void *)(uintptr_t)emu_slot(8 * i + 2 * t + 1)[0], g);
    }
    r[i] = (uint32_t)lo | ((uint32_t)hi << 16);
  }
  emu_warp_bar();
}

template <typename T>
inline float emu_to_f(uint16_t x) {
  T h;
  memcpy((void *)&h, &x, 2);
  return (float)h;
}

/* mma.sync m16n8k16 row.col, fp32 accumulate, from the PTX fragment layout. */
template <typename T>
inline void emu_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  const int lane = emu_lane();
  uint64_t *me = emu_slot(lane);
  for (int i = 0; i < 4; i++) me[i] = a[i];
  me[4] = b0;
  me[5] = b1;
  emu_warp_bar();
  float A[16][16], B[16][8];
  for (int L = 0; L < 32; L++) {
    const uint64_t *s = emu_slot(L);
    const int g = L / 4, t = L % 4;
    const int ar[4] = {g, g + 8, g, g + 8}, ac[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
    for (int i = 0; i < 4; i++) {
      A[ar[i]][ac[i]] = emu_to_f<T>((uint16_t)(s[i] & 0xffff));
      A[ar[i]][ac[i] + 1] = emu_to_f<T>((uint16_t)(s[i] >> 16));
    }
    B[2 * t][g] = emu_to_f<T>((uint16_t)(s[4] & 0xffff));
    B[2 * t + 1][g] = emu_to_f<T>((uint16_t)(s[4] >> 16));
    B[2 * t + 8][g] = emu_to_f<T>((uint16_t)(s[5] & 0xffff));
    B[2 * t + 9][g] = emu_to_f<T>((uint16_t)(s[5] >> 16));
  }
  emu_warp_bar();
  const int g = lane / 4, t = lane % 4;
  const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int i = 0; i < 4; i++) {
    float acc = c[i];
    for (int k = 0; k < 16; k++) acc += A[rows[i]][k] * B[k][cols[i]];
    c[i] = acc;
  }
}

inline void emu_cp_run(const emu_cp &c) {
  if (c.valid) memcpy(c.dst, c.src, 16);
  else memset(c.dst, 0, 16);
}

inline void emu_cp_async16(void *dst, const void *src, bool valid) {
  emu_cp c = {dst, src, valid ? 1 : 0};
  if (emu_self->defer) emu_self->open.push_back(c);
  else emu_cp_run(c);
}

inline void emu_cp_commit() {
  emu_self->groups.push_back(emu_self->open);
  emu_self->open.clear();
}

inline void emu_cp_wait(int n) {
  auto &gs = emu_self->groups;
  while ((int)gs.size() > n) {
    for (const emu_cp &c : gs.front()) emu_cp_run(c);
    gs.erase(gs.begin());
  }
}

/* Runs kernel(args) as one block of nthreads host threads. */
template <typename F>
struct emu_launch_arg {
  F *fn;
  emu_block *blk;
  int tid, defer;
  emu_dim3 bidx, bdim, gdim;
};

template <typename F>
inline void *emu_thread_main(void *p) {
  emu_launch_arg<F> *a = (emu_launch_arg<F> *)p;
  emu_thread self;
  self.blk = a->blk;
  self.tid = a->tid;
  self.defer = a->defer;
  emu_self = &self;
  threadIdx.x = (unsigned)a->tid;
  threadIdx.y = threadIdx.z = 0;
  blockIdx = a->bidx;
  blockDim = a->bdim;
  gridDim = a->gdim;
  (*a->fn)();
  emu_cp_wait(0);
  return nullptr;
}

template <typename F>
inline int emu_run_grid(F fn, unsigned blocks, int nthreads, size_t smem, int defer) {
  for (unsigned b = 0; b < blocks; b++) {
    emu_block *blk = new emu_block;
    blk->nthreads = nthreads;
    blk->smem.assign(smem + 16, 0xA5); /* garbage, not zeros */
    pthread_barrier_init(&blk->block_bar, nullptr, (unsigned)nthreads);
    for (int w = 0; w < nthreads / 32; w++) pthread_barrier_init(&blk->warp_bar[w], nullptr, 32);
    std::vector<pthread_t> th(nthreads);
    std::vector<emu_launch_arg<F>> args(nthreads);
    for (int t = 0; t < nthreads; t++) {
      args[t].fn = &fn;
      args[t].blk = blk;
      args[t].tid = t;
      args[t].defer = defer;
      args[t].bidx = emu_dim3{b, 0, 0};
      args[t].bdim = emu_dim3{(unsigned)nthreads, 1, 1};
      args[t].gdim = emu_dim3{blocks, 1, 1};
      if (pthread_create(&th[t], nullptr, emu_thread_main<F>, &args[t]) != 0) return -1;
    }
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], nullptr);
    pthread_barrier_destroy(&blk->block_bar);
    for (int w = 0; w < nthreads / 32; w++) pthread_barrier_destroy(&blk->warp_bar[w]);
    delete blk;
  }
  return 0;
}

/* The dynamic shared memory of the calling thread's block. */
inline unsigned char *emu_dynamic_smem() {
  uintptr_t p = (uintptr_t)emu_self->blk->smem.data();
  return (unsigned char *)((p + 15) & ~(uintptr_t)15);
}

#endif
