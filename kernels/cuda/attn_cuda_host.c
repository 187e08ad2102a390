/*
 * attn_cuda_host.c — the host half of the CUDA backend: parameter validation
 * under this backend's rules, the choice of path and launch geometry (pure
 * arithmetic, unit-tested without a GPU), error strings, the device count, and
 * the forward/backward entry points that validate, plan and then call the
 * launchers in the .cu files.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "kernels/cuda/attn_cuda_internal.h"

/* Positions and windows beyond this are refused, so that q_pos0 + i*q_stride
 * and window arithmetic can never overflow int64 inside a kernel. */
#define ATTN_CUDA_POS_LIMIT ((int64_t)1 << 60)
#define ATTN_CUDA_MAX_BLOCKS ((int64_t)2147483647)

size_t attn_cuda_elem_bytes(attn_dtype dt) {
  if (dt == ATTN_FP32) return 4;
  if (dt == ATTN_BF16 || dt == ATTN_CUDA_FP16) return 2;
  return 0;
}

attn_mask attn_cuda_mask_of(const attn_params *p) {
  attn_mask m;
  m.q_pos0 = p->mask.q_pos0;
  m.q_stride = p->mask.q_stride;
  m.k_pos0 = p->mask.k_pos0;
  m.k_stride = p->mask.k_stride;
  m.window = p->mask.window;
  m.causal = p->mask.causal ? 1 : 0;
  m.docs = 0; /* refused by attn_cuda_check_msg: the table is host memory */
  m.doc_end = NULL;
  return m;
}

int attn_cuda_aligned16(int n, const void *const *ptrs) {
  for (int i = 0; i < n; i++)
    if (ptrs[i] && ((uintptr_t)ptrs[i] & 15u) != 0) return 0;
  return 1;
}

static int64_t abs64(int64_t x) { return x < 0 ? -x : x; }

/* Does pos0 + (n-1)*stride stay inside the position limit? */
static int positions_ok(int64_t pos0, int64_t stride, int64_t n) {
  if (abs64(pos0) >= ATTN_CUDA_POS_LIMIT) return 0;
  if (stride >= ATTN_CUDA_POS_LIMIT || n >= ATTN_CUDA_POS_LIMIT) return 0;
  double last = (double)pos0 + (double)(n - 1) * (double)stride;
  return fabs(last) < (double)ATTN_CUDA_POS_LIMIT;
}

int attn_cuda_check_msg(const attn_params *p, char *msg, size_t len) {
  const char *why = NULL;
  int err = ATTN_OK;
  if (!p) {
    why = "params is NULL";
    err = ATTN_ENULL;
  } else if (p->B <= 0 || p->Zq <= 0 || p->Zkv <= 0) {
    why = "B, Zq and Zkv must be positive";
    err = ATTN_EINVAL;
  } else if (p->Nq <= 0 || p->Nk <= 0) {
    why = "Nq and Nk must be positive";
    err = ATTN_EINVAL;
  } else if (p->d <= 0) {
    why = "head dimension d must be positive";
    err = ATTN_EINVAL;
  } else if (p->d > ATTN_CUDA_MAX_D) {
    why = "head dimension d must be <= 256 on the CUDA backend";
    err = ATTN_EINVAL;
  } else if (attn_dv(p) != p->d) {
    why = "the CUDA backend takes one head dimension for q, k and v (dv = d); a narrower v runs on the CPU backend";
    err = ATTN_EINVAL;
  } else if (p->Zq % p->Zkv != 0) {
    why = "Zq must be a multiple of Zkv (GQA)";
    err = ATTN_EINVAL;
  } else if (!isfinite(p->scale)) {
    why = "scale must be finite";
    err = ATTN_EINVAL;
  } else if (p->mask.q_stride <= 0 || p->mask.k_stride <= 0) {
    why = "mask strides must be >= 1";
    err = ATTN_EINVAL;
  } else if (p->mask.window < 0) {
    why = "mask window must be >= 0";
    err = ATTN_EINVAL;
  } else if (p->mask.docs != 0) {
    why = "document masks (packed documents) are not in the CUDA kernels yet: their table is host memory";
    err = ATTN_EINVAL;
  } else if (p->mask.window >= ATTN_CUDA_POS_LIMIT || !positions_ok(p->mask.q_pos0, p->mask.q_stride, p->Nq) ||
             !positions_ok(p->mask.k_pos0, p->mask.k_stride, p->Nk)) {
    why = "mask positions or window out of range (|position| must stay below 2^60)";
    err = ATTN_EINVAL;
  } else if (p->tile_q < 0 || p->tile_k < 0 || p->threads < 0) {
    why = "tile sizes and threads must be >= 0";
    err = ATTN_EINVAL;
  } else if (attn_cuda_elem_bytes(p->dtype) == 0) {
    why = "dtype must be ATTN_FP32, ATTN_BF16 or ATTN_CUDA_FP16";
    err = ATTN_EDTYPE;
  } else if ((double)p->B * p->Zq * (double)p->Nq * p->d > 9.0e15 ||
             (double)p->B * p->Zkv * (double)p->Nk * p->d > 9.0e15) {
    why = "tensor sizes overflow";
    err = ATTN_EINVAL;
  }
  if (msg && len) snprintf(msg, len, "%s", why ? why : "ok");
  return err;
}

const char *attn_cuda_strerror(int err) {
  if (err == ATTN_ECUDA) return "a CUDA call or kernel launch failed (reason printed above)";
  if (err == ATTN_ENODEV) return "no usable CUDA device";
  switch (err) {
  case ATTN_OK: return "success";
  case ATTN_EINVAL: return "invalid attention parameters (a size <= 0, Zq % Zkv != 0, or a bad mask)";
  case ATTN_ENULL: return "a required buffer is NULL";
  case ATTN_ENOMEM: return "attention workspace allocation failed";
  case ATTN_EDTYPE: return "storage type not supported by this backend";
  default: return "unknown attention error";
  }
}

const char *attn_cuda_path_name(attn_cuda_path path) {
  switch (path) {
  case ATTN_CUDA_AUTO: return "auto";
  case ATTN_CUDA_SIMPLE: return "simple";
  case ATTN_CUDA_MMA: return "mma";
  default: return "unknown";
  }
}

int attn_cuda_device_count(int *count, char *msg, size_t len) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (count) *count = 0;
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* clear it, so later calls do not report it again */
    if (msg && len) snprintf(msg, len, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
    return ATTN_ENODEV;
  }
  if (n <= 0) {
    if (msg && len) snprintf(msg, len, "cudaGetDeviceCount: 0 devices");
    return ATTN_ENODEV;
  }
  if (count) *count = n;
  if (msg && len) snprintf(msg, len, "%d device(s)", n);
  return ATTN_OK;
}

static int ceil_div64(int64_t a, int64_t b) { return (int)((a + b - 1) / b); }

/* Shared memory rows are padded by 8 halves (16 bytes) against bank conflicts. */
static size_t mma_row_bytes(int d) { return (size_t)(d + 8) * 2; }

static int mma_eligible(const attn_params *p, int align16, const char **why) {
  if (p->dtype != ATTN_BF16 && p->dtype != ATTN_CUDA_FP16) {
    *why = "the MMA path needs bf16 or fp16 storage";
    return 0;
  }
  if (p->d != 64 && p->d != 128) {
    *why = "the MMA path is built for d = 64 and d = 128";
    return 0;
  }
  if (!align16) {
    *why = "the MMA path needs 16-byte aligned tensors";
    return 0;
  }
  return 1;
}

static int plan_fwd_mma(const attn_params *p, attn_cuda_launch *L, const char **why) {
  /* Defaults measured on an H200 (bs_cuda_check's tile sweep, N = 16k, d = 128, 16 heads, bf16):
   * 128 x 64 ran at 301 TFLOP/s against 252 for 128 x 32, although it spills 188 bytes at d = 128. */
  int tq = p->tile_q ? p->tile_q : 128;
  int tk = p->tile_k ? p->tile_k : 64;
  if (tq != 64 && tq != 128) {
    *why = "MMA forward: tile_q must be 64 or 128";
    return ATTN_EINVAL;
  }
  if (tk != 32 && tk != 64) {
    *why = "MMA forward: tile_k must be 32 or 64";
    return ATTN_EINVAL;
  }
  L->path = ATTN_CUDA_MMA;
  L->tile_q = tq;
  L->tile_k = tk;
  L->warps = 4;
  L->blocks = (int64_t)ceil_div64(p->Nq, tq) * p->B * p->Zq;
  /* Q tile + two stages of K and V tiles. */
  L->smem_bytes = (size_t)(tq + 4 * tk) * mma_row_bytes(p->d);
  return ATTN_OK;
}

static int plan_bwd_mma(const attn_params *p, attn_cuda_launch *L, const char **why) {
  /* Defaults measured on an H200 (the same sweep): at d = 128, 64 x 128 ran at 154 TFLOP/s against
   * 123 for 32 x 64 (half the dQ atomics per key tile) */
  int tq = p->tile_q ? p->tile_q : 64;
  int tk = p->tile_k ? p->tile_k : (p->d <= 64 ? 64 : 128);
  if (tq != 32 && tq != 64) {
    *why = "MMA backward: tile_q must be 32 or 64";
    return ATTN_EINVAL;
  }
  if (tk != 64 && tk != 128) {
    *why = "MMA backward: tile_k must be 64 or 128";
    return ATTN_EINVAL;
  }
  L->path = ATTN_CUDA_MMA;
  L->tile_q = tq;
  L->tile_k = tk;
  L->warps = tk / 16;
  L->blocks = (int64_t)ceil_div64(p->Nk, tk) * p->B * p->Zkv;
  /* K and V tiles; two stages of Q and dO tiles; two stages of lse and delta;
   * the dS^T tile [tile_k][tile_q + 8] in 16-bit. */
  L->smem_bytes = (size_t)(2 * tk + 4 * tq) * mma_row_bytes(p->d) + (size_t)4 * tq * sizeof(float) +
                  (size_t)tk * (size_t)(tq + 8) * 2;
  return ATTN_OK;
}

/* The simple path: one warp per row, 4 warps per block. */
#define SIMPLE_WARPS 4

int attn_cuda_plan(const attn_params *p, attn_cuda_path want, int bwd, int align16, attn_cuda_launch *out, char *msg,
                   size_t len) {
  const char *why = NULL;
  int err = attn_cuda_check_msg(p, msg, len);
  if (err) return err;
  if (!out) {
    if (msg && len) snprintf(msg, len, "launch plan output is NULL");
    return ATTN_ENULL;
  }
  memset(out, 0, sizeof *out);
  if (want != ATTN_CUDA_AUTO && want != ATTN_CUDA_SIMPLE && want != ATTN_CUDA_MMA) {
    if (msg && len) snprintf(msg, len, "unknown CUDA path %d", (int)want);
    return ATTN_EINVAL;
  }
  int use_mma = 0;
  if (want == ATTN_CUDA_MMA) {
    if (!mma_eligible(p, align16, &why)) {
      if (msg && len) snprintf(msg, len, "%s", why);
      return ATTN_EINVAL;
    }
    use_mma = 1;
  } else if (want == ATTN_CUDA_AUTO) {
    use_mma = mma_eligible(p, align16, &why);
  }
  if (use_mma) {
    err = bwd ? plan_bwd_mma(p, out, &why) : plan_fwd_mma(p, out, &why);
    if (err) {
      if (msg && len) snprintf(msg, len, "%s", why);
      return err;
    }
  } else {
    out->path = ATTN_CUDA_SIMPLE;
    out->tile_q = 1;
    out->tile_k = 1;
    out->warps = SIMPLE_WARPS;
    /* Forward and the dQ pass: one warp per query row; the backward's dK/dV
     * pass (launched second) has one warp per key row, see the launcher. */
    out->blocks = ((int64_t)p->B * p->Zq * p->Nq + SIMPLE_WARPS - 1) / SIMPLE_WARPS;
    if (bwd) {
      int64_t kb = ((int64_t)p->B * p->Zkv * p->Nk + SIMPLE_WARPS - 1) / SIMPLE_WARPS;
      if (kb > out->blocks) out->blocks = kb;
    }
    out->smem_bytes = 0;
  }
  if (out->blocks > ATTN_CUDA_MAX_BLOCKS) {
    if (msg && len) snprintf(msg, len, "grid of %lld blocks exceeds the CUDA limit", (long long)out->blocks);
    return ATTN_EINVAL;
  }
  if (msg && len) snprintf(msg, len, "ok");
  return ATTN_OK;
}

int attn_cuda_fwd_path(const attn_params *p, attn_cuda_path path, const void *q, const void *k, const void *v, float *o,
                       float *lse, int accumulate, cudaStream_t stream) {
  char msg[160];
  int err = attn_cuda_check_msg(p, msg, sizeof msg);
  if (err) {
    fprintf(stderr, "burstsim cuda: attn_cuda_fwd: %s\n", msg);
    return err;
  }
  if (!q || !k || !v || !o || !lse) {
    fprintf(stderr, "burstsim cuda: attn_cuda_fwd: a required buffer is NULL\n");
    return ATTN_ENULL;
  }
  /* lse and delta are read per row: only the row-major tensors need alignment. */
  const void *ptrs[] = {q, k, v, o};
  attn_cuda_launch L;
  err = attn_cuda_plan(p, path, 0, attn_cuda_aligned16(4, ptrs), &L, msg, sizeof msg);
  if (err) {
    fprintf(stderr, "burstsim cuda: attn_cuda_fwd: %s\n", msg);
    return err;
  }
  if (L.path == ATTN_CUDA_MMA) return attn_cuda_launch_fwd_mma(p, &L, q, k, v, o, lse, accumulate, stream);
  return attn_cuda_launch_fwd_simple(p, &L, q, k, v, o, lse, accumulate, stream);
}

int attn_cuda_fwd(const attn_params *p, const void *q, const void *k, const void *v, float *o, float *lse,
                  int accumulate, cudaStream_t stream) {
  return attn_cuda_fwd_path(p, ATTN_CUDA_AUTO, q, k, v, o, lse, accumulate, stream);
}

int attn_cuda_bwd_path(const attn_params *p, attn_cuda_path path, const void *q, const void *k, const void *v,
                       const float *o, const void *dout, const float *lse, const float *delta, float *dq, float *dk,
                       float *dv, cudaStream_t stream) {
  char msg[160];
  int err = attn_cuda_check_msg(p, msg, sizeof msg);
  if (err) {
    fprintf(stderr, "burstsim cuda: attn_cuda_bwd: %s\n", msg);
    return err;
  }
  if (!q || !k || !v || !dout || !lse || !dq || !dk || !dv || (!delta && !o)) {
    fprintf(stderr,
            "burstsim cuda: attn_cuda_bwd: a required buffer is NULL "
            "(delta and o may not both be NULL)\n");
    return ATTN_ENULL;
  }
  const void *ptrs[] = {q, k, v, dout, dq, dk, dv};
  attn_cuda_launch L;
  err = attn_cuda_plan(p, path, 1, attn_cuda_aligned16(7, ptrs), &L, msg, sizeof msg);
  if (err) {
    fprintf(stderr, "burstsim cuda: attn_cuda_bwd: %s\n", msg);
    return err;
  }
  float *own_delta = NULL;
  if (!delta) {
    size_t bytes = (size_t)p->B * p->Zq * (size_t)p->Nq * sizeof(float);
    ATTN_CUDA_TRY(cudaMalloc((void **)&own_delta, bytes));
    err = attn_cuda_delta(p, o, dout, own_delta, stream);
    if (err) {
      (void)cudaFree(own_delta);
      return err;
    }
    delta = own_delta;
  }
  if (L.path == ATTN_CUDA_MMA) err = attn_cuda_launch_bwd_mma(p, &L, q, k, v, dout, lse, delta, dq, dk, dv, stream);
  else err = attn_cuda_launch_bwd_simple(p, &L, q, k, v, dout, lse, delta, dq, dk, dv, stream);
  if (own_delta) {
    /* The kernels may still read it: wait for the stream before freeing. */
    cudaError_t se = cudaStreamSynchronize(stream);
    cudaError_t fe = cudaFree(own_delta);
    if (!err && se != cudaSuccess) {
      fprintf(stderr, "burstsim cuda: attn_cuda_bwd: stream: %s\n", cudaGetErrorString(se));
      err = ATTN_ECUDA;
    }
    if (!err && fe != cudaSuccess) {
      fprintf(stderr, "burstsim cuda: attn_cuda_bwd: cudaFree: %s\n", cudaGetErrorString(fe));
      err = ATTN_ECUDA;
    }
  }
  return err;
}

int attn_cuda_bwd(const attn_params *p, const void *q, const void *k, const void *v, const float *o, const void *dout,
                  const float *lse, const float *delta, float *dq, float *dk, float *dv, cudaStream_t stream) {
  return attn_cuda_bwd_path(p, ATTN_CUDA_AUTO, q, k, v, o, dout, lse, delta, dq, dk, dv, stream);
}

int attn_cuda_decode_splits(const attn_params *p) {
  if (attn_cuda_check_msg(p, NULL, 0)) return 1;
  /* At least ~256 keys per split; enough blocks for ~4 per SM of a big GPU. */
  int64_t by_keys = (p->Nk + 255) / 256;
  int64_t heads = (int64_t)p->B * p->Zq;
  int64_t by_fill = (528 + heads - 1) / heads;
  int64_t s = by_keys < by_fill ? by_keys : by_fill;
  if (s > 1024) s = 1024;
  if (s < 1) s = 1;
  return (int)s;
}

size_t attn_cuda_decode_workspace_bytes(const attn_params *p, int splits) {
  if (attn_cuda_check_msg(p, NULL, 0) || splits <= 0) return 0;
  size_t rows = (size_t)p->B * p->Zq * (size_t)p->Nq * (size_t)splits;
  return rows * (size_t)(p->d + 1) * sizeof(float);
}
