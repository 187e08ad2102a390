/*
 * bs_cuda_check.c — the GPU check and benchmark driver of the CUDA backend,
 * run by scripts/device-check.sh on a GPU machine (and by ctest, quick mode).
 *
 * 1. Correctness against a float64 CPU reference written here, on fresh
 *    random inputs (the seed is printed): forward, the accumulate merge over
 *    two key blocks, backward (D and O variants), causal with offsets, fully
 *    masked rows, sliding windows with strides, GQA, odd sizes, decode, merge;
 *    both the tensor-core (mma) and the simple path; bf16, fp16, fp32.
 *    Outputs are poisoned with NaN first; any non-finite value fails.
 * 2. Benchmark (unless --quick): TFLOP/s of forward and backward, bf16, at
 *    N = 4k, 16k, 64k, d in {64, 128}, causal and not; a tile sweep at the
 *    headline size; decode bandwidth; next to the cuBLAS bf16 GEMM ceiling and
 *    a device-to-device copy measured in the same run, and cuBLAS bf16 GEMMs of
 *    the projection shapes a transformer layer issues (rows "gemm_proj": n = m
 *    tokens, d = k, heads = n outputs), for fitting the simulator's tiled GEMM
 *    model (sim/profile.h: peak_fraction, tile and wave quantization, k_overhead).
 *
 * Exit: 0 all checks passed, 1 a check failed or a CUDA call failed, 2 usage,
 * 77 no CUDA device (ctest SKIP_RETURN_CODE). FLOP convention as the CPU
 * bench: forward 4*B*Z*Nq*Nk*d (halved when causal), backward 2.5x forward.
 */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "kernels/cuda/attn_cuda.h"

#define SKIP_CODE 77

/* ---- bookkeeping -------------------------------------------------------- */

typedef struct {
  FILE *log;      /* correctness.txt (or NULL) */
  int pass, fail; /* checks */
  double worst[3][2]; /* [dtype: bf16, fp16, fp32][0 fwd, 1 bwd] worst relative error */
  uint64_t seed;
  int verbose;
} check_ctx;

static void say(check_ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (c->verbose) {
    va_list ap2;
    va_copy(ap2, ap);
    vprintf(fmt, ap2);
    va_end(ap2);
  }
  if (c->log) vfprintf(c->log, fmt, ap);
  va_end(ap);
}

#define CK(call)                                                                           \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "bs_cuda_check: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,         \
              cudaGetErrorString(e_));                                                     \
      return -1;                                                                           \
    }                                                                                      \
  } while (0)

#define CKA(call)                                                                          \
  do {                                                                                     \
    int a_ = (call);                                                                       \
    if (a_ != ATTN_OK) {                                                                   \
      fprintf(stderr, "bs_cuda_check: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,         \
              attn_cuda_strerror(a_));                                                     \
      return -1;                                                                           \
    }                                                                                      \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- host numbers ------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
  uint64_t x = (*s += 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static double rng_normal(uint64_t *s) {
  double u1 = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
  double u2 = (double)(rng_next(s) >> 11) / 9007199254740992.0;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static uint16_t f32_to_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* IEEE binary16, round to nearest even (written out: no _Float16 needed). */
static uint16_t f32_to_f16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  const uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
  if (a < 0x38800000u) {                                   /* below 2^-14: subnormal or 0 */
    if (a < 0x33000000u) return (uint16_t)sign;            /* below 2^-25: rounds to 0 */
    const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e; /* 14..24: value = m * 2^(e-150), unit 2^-24 */
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((a >> 13) - (112u << 10)); /* rebias exponent 127 -> 15 */
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float f;
  if (e == 0) {
    f = ldexpf((float)m, -24);
    return sign ? -f : f;
  }
  uint32_t u = sign | (e == 31 ? (0xffu << 23) | (m << 13) : ((e + 112u) << 23) | (m << 13));
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Random normal tensor rounded to dtype: the rounded values in vals (what the
 * reference sees), the storage bytes in raw. */
static void make_tensor(uint64_t *rng, attn_dtype dt, size_t n, float *vals, void *raw) {
  for (size_t i = 0; i < n; i++) {
    float x = (float)rng_normal(rng);
    if (dt == ATTN_BF16) {
      uint16_t b = f32_to_bf16(x);
      ((uint16_t *)raw)[i] = b;
      vals[i] = bf16_to_f32(b);
    } else if (dt == ATTN_CUDA_FP16) {
      uint16_t b = f32_to_f16(x);
      ((uint16_t *)raw)[i] = b;
      vals[i] = f16_to_f32(b);
    } else {
      ((float *)raw)[i] = x;
      vals[i] = x;
    }
  }
}

static size_t esize(attn_dtype dt) { return dt == ATTN_FP32 ? 4 : 2; }

/* ---- float64 reference ----------------------------------------------------- */

static int ref_visible(const attn_mask *m, int64_t i, int64_t j) {
  int64_t qp = m->q_pos0 + i * m->q_stride, kp = m->k_pos0 + j * m->k_stride;
  if (m->causal && kp > qp) return 0;
  if (m->window > 0) {
    int64_t dist = m->causal ? qp - kp : (qp > kp ? qp - kp : kp - qp);
    if (dist >= m->window) return 0;
  }
  return 1;
}

/* O [B,Zq,Nq,d] and lse [B,Zq,Nq] in double. */
static void ref_fwd(const attn_params *p, const float *q, const float *k, const float *v,
                    double *o, double *lse) {
  const int d = p->d, grp = p->Zq / p->Zkv;
  double *s = malloc((size_t)p->Nk * sizeof(double));
  for (int b = 0; b < p->B; b++)
    for (int h = 0; h < p->Zq; h++) {
      const size_t kvo = ((size_t)b * p->Zkv + h / grp) * (size_t)p->Nk * d;
      for (int64_t i = 0; i < p->Nq; i++) {
        const size_t row = ((size_t)b * p->Zq + h) * (size_t)p->Nq + (size_t)i;
        const float *qr = q + row * d;
        double mx = -INFINITY;
        for (int64_t j = 0; j < p->Nk; j++) {
          if (!ref_visible(&p->mask, i, j)) {
            s[j] = -INFINITY;
            continue;
          }
          const float *kr = k + kvo + (size_t)j * d;
          double acc = 0.0;
          for (int c = 0; c < d; c++) acc += (double)qr[c] * (double)kr[c];
          s[j] = acc * (double)p->scale;
          if (s[j] > mx) mx = s[j];
        }
        double *orow = o + row * d;
        for (int c = 0; c < d; c++) orow[c] = 0.0;
        if (mx == -INFINITY) {
          lse[row] = -INFINITY;
          continue;
        }
        double l = 0.0;
        for (int64_t j = 0; j < p->Nk; j++) {
          if (s[j] == -INFINITY) continue;
          double pj = exp(s[j] - mx);
          l += pj;
          const float *vr = v + kvo + (size_t)j * d;
          for (int c = 0; c < d; c++) orow[c] += pj * (double)vr[c];
        }
        for (int c = 0; c < d; c++) orow[c] /= l;
        lse[row] = mx + log(l);
      }
    }
  free(s);
}

/* Gradients (added into dq, dk, dv, which hold the initial values) given the
 * full forward's lse and O. */
static void ref_bwd(const attn_params *p, const float *q, const float *k, const float *v,
                    const float *dout, const double *o, const double *lse, double *dq,
                    double *dk, double *dv) {
  const int d = p->d, grp = p->Zq / p->Zkv;
  for (int b = 0; b < p->B; b++)
    for (int h = 0; h < p->Zq; h++) {
      const size_t kvo = ((size_t)b * p->Zkv + h / grp) * (size_t)p->Nk * d;
      for (int64_t i = 0; i < p->Nq; i++) {
        const size_t row = ((size_t)b * p->Zq + h) * (size_t)p->Nq + (size_t)i;
        if (lse[row] == -INFINITY) continue;
        const float *qr = q + row * d, *gr = dout + row * d;
        double D = 0.0;
        for (int c = 0; c < d; c++) D += (double)gr[c] * o[row * d + c];
        for (int64_t j = 0; j < p->Nk; j++) {
          if (!ref_visible(&p->mask, i, j)) continue;
          const float *kr = k + kvo + (size_t)j * d, *vr = v + kvo + (size_t)j * d;
          double s = 0.0, dp = 0.0;
          for (int c = 0; c < d; c++) {
            s += (double)qr[c] * (double)kr[c];
            dp += (double)gr[c] * (double)vr[c];
          }
          double pj = exp(s * (double)p->scale - lse[row]);
          double ds = pj * (dp - D) * (double)p->scale;
          for (int c = 0; c < d; c++) {
            dq[row * d + c] += ds * (double)kr[c];
            dk[kvo + (size_t)j * d + c] += ds * (double)qr[c];
            dv[kvo + (size_t)j * d + c] += pj * (double)gr[c];
          }
        }
      }
    }
}

/* ---- comparison ------------------------------------------------------------ */

/*
 * ||got - ref|| / ||ref|| over entries where ref is finite; entries where ref
 * is -inf (lse of a fully masked row) must be -inf in got too; any NaN or
 * other non-finite value in got fails. Returns 1 when within bound.
 */
static int compare(check_ctx *c, const char *what, const float *got, const double *ref, size_t n,
                   double bound, double *rel_out) {
  double num = 0.0, den = 0.0, maxerr = 0.0, maxref = 0.0;
  size_t bad = 0, inf_mismatch = 0;
  for (size_t i = 0; i < n; i++) {
    if (ref[i] == -INFINITY) {
      if (got[i] != -INFINITY) inf_mismatch++;
      continue;
    }
    if (!isfinite(got[i])) {
      bad++;
      continue;
    }
    double e = (double)got[i] - ref[i];
    num += e * e;
    den += ref[i] * ref[i];
    if (fabs(e) > maxerr) maxerr = fabs(e);
    if (fabs(ref[i]) > maxref) maxref = fabs(ref[i]);
  }
  double rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
  int ok = bad == 0 && inf_mismatch == 0 && rel <= bound;
  if (rel_out) *rel_out = bad || inf_mismatch ? INFINITY : rel;
  say(c, "    %-4s %-8s rel %.3e  max|err|/max|ref| %.3e  nonfinite %zu  -inf mismatch %zu  (bound %.1e)\n",
      ok ? "ok" : "FAIL", what, rel, maxref > 0 ? maxerr / maxref : maxerr, bad, inf_mismatch, bound);
  if (ok) c->pass++; else c->fail++;
  return ok;
}

static int dtype_index(attn_dtype dt) { return dt == ATTN_BF16 ? 0 : dt == ATTN_CUDA_FP16 ? 1 : 2; }
static const char *dtype_name(attn_dtype dt) {
  return dt == ATTN_BF16 ? "bf16" : dt == ATTN_CUDA_FP16 ? "fp16" : "fp32";
}

/* Bounds fixed before any run: about 2.5 units of roundoff of the storage
 * type's P and dS rounding (bf16 u = 2^-8, fp16 u = 2^-11); fp32 storage uses
 * fp32 arithmetic throughout. */
static double bound_for(attn_dtype dt) {
  return dt == ATTN_BF16 ? 1e-2 : dt == ATTN_CUDA_FP16 ? 2.5e-3 : 1e-5;
}

static void note_worst(check_ctx *c, attn_dtype dt, int bwd, double rel) {
  double *w = &c->worst[dtype_index(dt)][bwd];
  if (rel > *w) *w = rel;
}

/* ---- device helpers --------------------------------------------------------- */

static int upload(void **dptr, const void *src, size_t bytes) {
  CK(cudaMalloc(dptr, bytes));
  CK(cudaMemcpy(*dptr, src, bytes, cudaMemcpyHostToDevice));
  return 0;
}

static int download_f(float *dst, const float *src, size_t n) {
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost));
  return 0;
}

/*
 * An attention call returned an error: a failed check. If the device context
 * is still usable (the error was a refused launch, not a fault) the run goes
 * on; a sticky error (illegal address, ...) ends it. Returns 0 to go on.
 */
static int call_failed(check_ctx *c, const char *what, int err) {
  say(c, "    FAIL %-8s the call returned %d (%s)\n", what, err, attn_cuda_strerror(err));
  c->fail++;
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    fprintf(stderr, "bs_cuda_check: device unusable after %s: %s\n", what, cudaGetErrorString(e));
    return -1;
  }
  (void)cudaGetLastError();
  return 0;
}

/* ---- one correctness case ----------------------------------------------------- */

typedef struct {
  const char *name;
  int B, Zq, Zkv;
  int64_t Nq, Nk;
  int causal;
  int64_t window, q_pos0, q_stride, k_pos0, k_stride;
} case_def;

static attn_params params_of(const case_def *cd, int d, attn_dtype dt) {
  attn_params p;
  memset(&p, 0, sizeof p);
  p.B = cd->B;
  p.Zq = cd->Zq;
  p.Zkv = cd->Zkv;
  p.Nq = cd->Nq;
  p.Nk = cd->Nk;
  p.d = d;
  p.scale = 1.0f / sqrtf((float)d);
  p.mask.q_pos0 = cd->q_pos0;
  p.mask.q_stride = cd->q_stride;
  p.mask.k_pos0 = cd->k_pos0;
  p.mask.k_stride = cd->k_stride;
  p.mask.causal = cd->causal;
  p.mask.window = cd->window;
  p.dtype = dt;
  return p;
}

/* Copies key rows [j0, j0+n) of every (b, kv head) of x [B,Zkv,Nk,d] (elem bytes es). */
static void *slice_keys(const void *x, const attn_params *p, int64_t j0, int64_t n, size_t es) {
  const size_t row = (size_t)p->d * es;
  char *out = malloc((size_t)p->B * p->Zkv * (size_t)n * row);
  for (int bh = 0; bh < p->B * p->Zkv; bh++)
    memcpy(out + (size_t)bh * n * row, (const char *)x + ((size_t)bh * p->Nk + (size_t)j0) * row,
           (size_t)n * row);
  return out;
}

typedef struct {
  void *q, *k, *v, *g, *k1, *v1, *k2, *v2;
  float *o, *lse, *delta, *oref, *lseref, *dq, *dk, *dv;
} dev_bufs;

static void free_bufs(dev_bufs *b) {
  void *all[] = {b->q, b->k, b->v, b->g, b->k1, b->v1, b->k2, b->v2, b->o, b->lse,
                 b->delta, b->oref, b->lseref, b->dq, b->dk, b->dv};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]) (void)cudaFree(all[i]);
  memset(b, 0, sizeof *b);
}

/*
 * Runs every check of one (case, d, dtype, path). Returns -1 on a CUDA error,
 * else 0 (check results are counted in c).
 */
static int run_case(check_ctx *c, const case_def *cd, int d, attn_dtype dt, attn_cuda_path path,
                    const int tiles[4]) {
  attn_params p = params_of(cd, d, dt);
  /* Forward calls use pf's tiles, backward calls pb's (tiles: fwd q, k, bwd q, k). */
  attn_params pf = p, pb = p;
  if (tiles) {
    pf.tile_q = tiles[0];
    pf.tile_k = tiles[1];
    pb.tile_q = tiles[2];
    pb.tile_k = tiles[3];
  }
  attn_cuda_launch Lf, Lb;
  char msg[160];
  if (attn_cuda_plan(&pf, path, 0, 1, &Lf, msg, sizeof msg) ||
      attn_cuda_plan(&pb, path, 1, 1, &Lb, msg, sizeof msg)) {
    say(c, "  %-20s d=%-3d %s %-6s: not eligible (%s), skipped\n", cd->name, d, dtype_name(dt),
        attn_cuda_path_name(path), msg);
    return 0;
  }
  say(c, "  %-20s d=%-3d %s %-6s (fwd tiles %dx%d, bwd tiles %dx%d)\n", cd->name, d,
      dtype_name(dt), attn_cuda_path_name(Lf.path), Lf.tile_q, Lf.tile_k, Lb.tile_q, Lb.tile_k);
  const size_t nq = (size_t)p.B * p.Zq * (size_t)p.Nq * d, nk = (size_t)p.B * p.Zkv * (size_t)p.Nk * d;
  const size_t rows = (size_t)p.B * p.Zq * (size_t)p.Nq;
  const size_t es = esize(dt);
  uint64_t rng = c->seed ^ (uint64_t)(d * 1000003 + dtype_index(dt) * 7919 + (int)cd->Nq * 31 + (int)cd->Nk);
  float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *g = malloc(nq * 4);
  void *qr = malloc(nq * es), *kr = malloc(nk * es), *vr = malloc(nk * es), *gr = malloc(nq * es);
  double *o = malloc(nq * 8), *lse = malloc(rows * 8);
  double *dq = malloc(nq * 8), *dk = malloc(nk * 8), *dv = malloc(nk * 8);
  float *init_q = malloc(nq * 4), *init_k = malloc(nk * 4), *init_v = malloc(nk * 4);
  float *got = malloc((nq > nk ? nq : nk) * 4), *got_l = malloc(rows * 4);
  float *of = malloc(nq * 4), *lf = malloc(rows * 4), *df = malloc(rows * 4);
  void *k1 = NULL, *v1 = NULL, *k2 = NULL, *v2 = NULL;
  dev_bufs db;
  memset(&db, 0, sizeof db);
  int rc = 0;
  make_tensor(&rng, dt, nq, q, qr);
  make_tensor(&rng, dt, nk, k, kr);
  make_tensor(&rng, dt, nk, v, vr);
  make_tensor(&rng, dt, nq, g, gr);
  for (size_t i = 0; i < nq; i++) init_q[i] = (float)rng_normal(&rng);
  for (size_t i = 0; i < nk; i++) init_k[i] = (float)rng_normal(&rng);
  for (size_t i = 0; i < nk; i++) init_v[i] = (float)rng_normal(&rng);
  ref_fwd(&p, q, k, v, o, lse);
  for (size_t i = 0; i < nq; i++) dq[i] = init_q[i];
  for (size_t i = 0; i < nk; i++) {
    dk[i] = init_k[i];
    dv[i] = init_v[i];
  }
  ref_bwd(&p, q, k, v, g, o, lse, dq, dk, dv);
  for (size_t i = 0; i < nq; i++) of[i] = (float)o[i];
  for (size_t r = 0; r < rows; r++) {
    lf[r] = (float)lse[r];
    double D = 0.0;
    for (int cc = 0; cc < d; cc++) D += (double)g[r * d + cc] * o[r * d + cc];
    df[r] = (float)D;
  }
  const double bound = bound_for(dt);
  double rel;
#define TRY(x) do { if ((x) != 0) { rc = -1; goto done; } } while (0)
  TRY(upload(&db.q, qr, nq * es));
  TRY(upload(&db.k, kr, nk * es));
  TRY(upload(&db.v, vr, nk * es));
  TRY(upload(&db.g, gr, nq * es));
  if (cudaMalloc((void **)&db.o, nq * 4) || cudaMalloc((void **)&db.lse, rows * 4) ||
      cudaMalloc((void **)&db.dq, nq * 4) || cudaMalloc((void **)&db.dk, nk * 4) ||
      cudaMalloc((void **)&db.dv, nk * 4)) {
    fprintf(stderr, "bs_cuda_check: cudaMalloc failed\n");
    rc = -1;
    goto done;
  }
  TRY(upload((void **)&db.oref, of, nq * 4));
  TRY(upload((void **)&db.lseref, lf, rows * 4));
  TRY(upload((void **)&db.delta, df, rows * 4));

  /* Forward, overwriting NaN-poisoned outputs. */
  if (cudaMemset(db.o, 0xff, nq * 4) || cudaMemset(db.lse, 0xff, rows * 4)) { rc = -1; goto done; }
  int e = attn_cuda_fwd_path(&pf, path, db.q, db.k, db.v, db.o, db.lse, 0, 0);
  if (e) {
    if (call_failed(c, "fwd", e)) { rc = -1; goto done; }
  } else {
    TRY(download_f(got, db.o, nq));
    TRY(download_f(got_l, db.lse, rows));
    compare(c, "fwd O", got, o, nq, bound, &rel);
    note_worst(c, dt, 0, rel);
    compare(c, "fwd lse", got_l, lse, rows, bound, &rel);
    note_worst(c, dt, 0, rel);
  }

  /* Accumulate: keys in two blocks, the second merged into the first. */
  if (p.Nk >= 2) {
    const int64_t n1 = p.Nk / 3 + 1, n2 = p.Nk - n1;
    attn_params p1 = pf, p2 = pf;
    p1.Nk = n1;
    p2.Nk = n2;
    p2.mask.k_pos0 = p.mask.k_pos0 + n1 * p.mask.k_stride;
    k1 = slice_keys(kr, &p, 0, n1, es);
    v1 = slice_keys(vr, &p, 0, n1, es);
    k2 = slice_keys(kr, &p, n1, n2, es);
    v2 = slice_keys(vr, &p, n1, n2, es);
    const size_t b1 = (size_t)p.B * p.Zkv * (size_t)n1 * d * es, b2 = (size_t)p.B * p.Zkv * (size_t)n2 * d * es;
    TRY(upload(&db.k1, k1, b1));
    TRY(upload(&db.v1, v1, b1));
    TRY(upload(&db.k2, k2, b2));
    TRY(upload(&db.v2, v2, b2));
    if (cudaMemset(db.o, 0xff, nq * 4) || cudaMemset(db.lse, 0xff, rows * 4)) { rc = -1; goto done; }
    e = attn_cuda_fwd_path(&p1, path, db.q, db.k1, db.v1, db.o, db.lse, 0, 0);
    if (!e) e = attn_cuda_fwd_path(&p2, path, db.q, db.k2, db.v2, db.o, db.lse, 1, 0);
    if (e) {
      if (call_failed(c, "acc", e)) { rc = -1; goto done; }
    } else {
      TRY(download_f(got, db.o, nq));
      TRY(download_f(got_l, db.lse, rows));
      compare(c, "acc O", got, o, nq, bound, &rel);
      note_worst(c, dt, 0, rel);
      compare(c, "acc lse", got_l, lse, rows, bound, &rel);
      note_worst(c, dt, 0, rel);
    }
  }

  /* Backward, D variant then O variant, adding into random initial gradients. */
  for (int variant = 0; variant < 2; variant++) {
    if (cudaMemcpy(db.dq, init_q, nq * 4, cudaMemcpyHostToDevice) ||
        cudaMemcpy(db.dk, init_k, nk * 4, cudaMemcpyHostToDevice) ||
        cudaMemcpy(db.dv, init_v, nk * 4, cudaMemcpyHostToDevice)) {
      rc = -1;
      goto done;
    }
    e = variant == 0
                ? attn_cuda_bwd_path(&pb, path, db.q, db.k, db.v, NULL, db.g, db.lseref, db.delta,
                                     db.dq, db.dk, db.dv, 0)
                : attn_cuda_bwd_path(&pb, path, db.q, db.k, db.v, db.oref, db.g, db.lseref, NULL,
                                     db.dq, db.dk, db.dv, 0);
    if (e) {
      if (call_failed(c, variant ? "bwdO" : "bwdD", e)) { rc = -1; goto done; }
      continue;
    }
    const char *nm[2][3] = {{"bwdD dq", "bwdD dk", "bwdD dv"}, {"bwdO dq", "bwdO dk", "bwdO dv"}};
    TRY(download_f(got, db.dq, nq));
    compare(c, nm[variant][0], got, dq, nq, bound, &rel);
    note_worst(c, dt, 1, rel);
    TRY(download_f(got, db.dk, nk));
    compare(c, nm[variant][1], got, dk, nk, bound, &rel);
    note_worst(c, dt, 1, rel);
    TRY(download_f(got, db.dv, nk));
    compare(c, nm[variant][2], got, dv, nk, bound, &rel);
    note_worst(c, dt, 1, rel);
  }
  /* The delta kernel alone. */
  {
    double *dref = malloc(rows * 8);
    for (size_t r = 0; r < rows; r++) dref[r] = df[r];
    if (cudaMemset(db.lse, 0xff, rows * 4) ||
        attn_cuda_delta(&pb, db.oref, db.g, db.lse, 0)) {
      free(dref);
      rc = -1;
      goto done;
    }
    if (download_f(got_l, db.lse, rows)) {
      free(dref);
      rc = -1;
      goto done;
    }
    compare(c, "delta", got_l, dref, rows, 1e-5, NULL); /* fp32 sums of exact products */
    free(dref);
  }
#undef TRY
done:
  free_bufs(&db);
  free(q); free(k); free(v); free(g); free(qr); free(kr); free(vr); free(gr);
  free(o); free(lse); free(dq); free(dk); free(dv); free(init_q); free(init_k); free(init_v);
  free(got); free(got_l); free(of); free(lf); free(df); free(k1); free(v1); free(k2); free(v2);
  return rc;
}

/* Decode: Nq <= 8 rows against a long key block, in two halves (accumulate). */
static int run_decode(check_ctx *c, int d, attn_dtype dt, int64_t Nq, int causal, int64_t window) {
  case_def cd = {"decode", 2, 8, 2, Nq, 3001, causal, window, 2990, 1, 0, 1};
  attn_params p = params_of(&cd, d, dt);
  say(c, "  decode Nq=%lld Nk=%lld d=%d %s causal=%d window=%lld\n", (long long)Nq,
      (long long)p.Nk, d, dtype_name(dt), causal, (long long)window);
  const size_t nq = (size_t)p.B * p.Zq * (size_t)p.Nq * d, nk = (size_t)p.B * p.Zkv * (size_t)p.Nk * d;
  const size_t rows = (size_t)p.B * p.Zq * (size_t)p.Nq, es = esize(dt);
  uint64_t rng = c->seed ^ (0xdec0de00ull + (uint64_t)(d + Nq * 7 + causal * 131 + window));
  float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4);
  void *qr = malloc(nq * es), *kr = malloc(nk * es), *vr = malloc(nk * es);
  double *o = malloc(nq * 8), *lse = malloc(rows * 8);
  float *got = malloc(nq * 4), *got_l = malloc(rows * 4);
  make_tensor(&rng, dt, nq, q, qr);
  make_tensor(&rng, dt, nk, k, kr);
  make_tensor(&rng, dt, nk, v, vr);
  ref_fwd(&p, q, k, v, o, lse);
  const int64_t n1 = 1234, n2 = p.Nk - n1;
  attn_params p1 = p, p2 = p;
  p1.Nk = n1;
  p2.Nk = n2;
  p2.mask.k_pos0 = p.mask.k_pos0 + n1;
  void *k1 = slice_keys(kr, &p, 0, n1, es), *v1 = slice_keys(vr, &p, 0, n1, es);
  void *k2 = slice_keys(kr, &p, n1, n2, es), *v2 = slice_keys(vr, &p, n1, n2, es);
  void *dq = NULL, *dk1 = NULL, *dv1 = NULL, *dk2 = NULL, *dv2 = NULL;
  float *dout = NULL, *dl = NULL;
  int rc = 0;
  const size_t b1 = (size_t)p.B * p.Zkv * (size_t)n1 * d * es, b2 = (size_t)p.B * p.Zkv * (size_t)n2 * d * es;
  if (upload(&dq, qr, nq * es) || upload(&dk1, k1, b1) || upload(&dv1, v1, b1) ||
      upload(&dk2, k2, b2) || upload(&dv2, v2, b2) || cudaMalloc((void **)&dout, nq * 4) ||
      cudaMalloc((void **)&dl, rows * 4) || cudaMemset(dout, 0xff, nq * 4) ||
      cudaMemset(dl, 0xff, rows * 4) ||
      attn_cuda_decode(&p1, dq, dk1, dv1, dout, dl, 0, 0, NULL, 0) ||
      attn_cuda_decode(&p2, dq, dk2, dv2, dout, dl, 1, 7, NULL, 0) ||
      download_f(got, dout, nq) || download_f(got_l, dl, rows)) {
    rc = -1;
  } else {
    double rel;
    compare(c, "dec O", got, o, nq, bound_for(dt), &rel);
    note_worst(c, dt, 0, rel);
    compare(c, "dec lse", got_l, lse, rows, bound_for(dt), &rel);
    note_worst(c, dt, 0, rel);
  }
  void *all[] = {dq, dk1, dv1, dk2, dv2, dout, dl};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]) (void)cudaFree(all[i]);
  free(q); free(k); free(v); free(qr); free(kr); free(vr); free(o); free(lse); free(got);
  free(got_l); free(k1); free(v1); free(k2); free(v2);
  return rc;
}

/* Merge of two partial (O, lse), some rows -inf on either side. */
static int run_merge(check_ctx *c) {
  const int64_t rows = 1000;
  const int d = 72;
  uint64_t rng = c->seed ^ 0x6d65726765ull;
  const size_t n = (size_t)rows * d;
  float *o1 = malloc(n * 4), *o2 = malloc(n * 4), *l1 = malloc(rows * 4), *l2 = malloc(rows * 4);
  double *ro = malloc(n * 8), *rl = malloc(rows * 8);
  float *got = malloc(n * 4), *got_l = malloc(rows * 4);
  for (size_t i = 0; i < n; i++) {
    o1[i] = (float)rng_normal(&rng);
    o2[i] = (float)rng_normal(&rng);
  }
  for (int64_t r = 0; r < rows; r++) {
    l1[r] = (float)(3.0 * rng_normal(&rng));
    l2[r] = (float)(3.0 * rng_normal(&rng));
    if (r % 10 == 3) l1[r] = -INFINITY;
    if (r % 10 == 7) l2[r] = -INFINITY;
    if (r % 50 == 11) l1[r] = l2[r] = -INFINITY;
    if (l1[r] == -INFINITY) for (int cc = 0; cc < d; cc++) o1[r * d + cc] = 0.0f;
    if (l2[r] == -INFINITY) for (int cc = 0; cc < d; cc++) o2[r * d + cc] = 0.0f;
    double a = l1[r], b = l2[r];
    if (b == -INFINITY) {
      rl[r] = a;
      for (int cc = 0; cc < d; cc++) ro[r * d + cc] = o1[r * d + cc];
    } else if (a == -INFINITY) {
      rl[r] = b;
      for (int cc = 0; cc < d; cc++) ro[r * d + cc] = o2[r * d + cc];
    } else {
      double m = a > b ? a : b, wa = exp(a - m), wb = exp(b - m);
      rl[r] = m + log(wa + wb);
      for (int cc = 0; cc < d; cc++)
        ro[r * d + cc] = (wa * o1[r * d + cc] + wb * o2[r * d + cc]) / (wa + wb);
    }
  }
  float *d1 = NULL, *d2 = NULL, *e1 = NULL, *e2 = NULL;
  int rc = 0;
  say(c, "  merge rows=%lld d=%d\n", (long long)rows, d);
  if (upload((void **)&d1, o1, n * 4) || upload((void **)&d2, o2, n * 4) ||
      upload((void **)&e1, l1, rows * 4) || upload((void **)&e2, l2, rows * 4) ||
      attn_cuda_merge(rows, d, d1, e1, d2, e2, 0) || download_f(got, d1, n) ||
      download_f(got_l, e1, rows)) {
    rc = -1;
  } else {
    compare(c, "merge O", got, ro, n, 1e-5, NULL);
    compare(c, "mergelse", got_l, rl, (size_t)rows, 1e-5, NULL);
  }
  void *all[] = {d1, d2, e1, e2};
  for (size_t i = 0; i < 4; i++)
    if (all[i]) (void)cudaFree(all[i]);
  free(o1); free(o2); free(l1); free(l2); free(ro); free(rl); free(got); free(got_l);
  return rc;
}

/* which: 0 every path, 1 the simple path (and decode, merge), 2 the MMA path. */
static int run_correctness(check_ctx *c, int quick, int which) {
  const case_def cases[] = {
      /* name                B  Zq Zkv  Nq   Nk  causal win  q0  qs  k0  ks */
      {"full_gqa", 2, 4, 2, 193, 257, 0, 0, 0, 1, 0, 1},
      {"causal_diag", 1, 4, 4, 256, 256, 1, 0, 0, 1, 0, 1},
      {"causal_offset_gqa", 2, 4, 1, 150, 300, 1, 0, 100, 1, 0, 1},
      {"causal_masked_rows", 1, 2, 2, 130, 200, 1, 0, 0, 1, 64, 1},
      {"window_striped", 1, 4, 2, 177, 211, 1, 37, 5, 3, 0, 2},
      {"window_bidir", 2, 2, 2, 160, 160, 0, 50, 0, 1, 30, 1},
      {"tiny", 1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 1},
      {"odd_causal", 1, 3, 1, 17, 33, 1, 0, 20, 1, 0, 1},
  };
  const int ncases = quick ? 4 : (int)(sizeof cases / sizeof cases[0]);
  const int dims[] = {64, 128};
  struct {
    attn_dtype dt;
    attn_cuda_path path;
  } runs[] = {{ATTN_BF16, ATTN_CUDA_MMA}, {ATTN_CUDA_FP16, ATTN_CUDA_MMA},
              {ATTN_BF16, ATTN_CUDA_SIMPLE}, {ATTN_FP32, ATTN_CUDA_SIMPLE}};
  const int nruns = quick ? 2 : 4;
  const int do_mma = which != 1, do_simple = which != 2;
  for (int ci = 0; ci < ncases; ci++)
    for (int di = 0; di < 2; di++)
      for (int ri = 0; ri < nruns; ri++) {
        if (runs[ri].path == ATTN_CUDA_MMA ? !do_mma : !do_simple) continue;
        if (run_case(c, &cases[ci], dims[di], runs[ri].dt, runs[ri].path, NULL)) return -1;
      }
  /* Head dimensions the MMA path is not built for: AUTO takes the simple path. */
  if (do_simple && run_case(c, &cases[0], 80, ATTN_BF16, ATTN_CUDA_AUTO, NULL)) return -1;
  if (do_simple && !quick && run_case(c, &cases[4], 96, ATTN_CUDA_FP16, ATTN_CUDA_AUTO, NULL))
    return -1;
  if (!do_mma) goto rest;
  /* Every tile variant of the MMA kernels, on masked cases, both d. */
  {
    const int tv[4][4] = {{64, 32, 32, 64}, {64, 64, 64, 64}, {128, 32, 32, 128}, {128, 64, 64, 128}};
    for (int ti = 0; ti < (quick ? 1 : 4); ti++)
      for (int di = 0; di < 2; di++) {
        if (run_case(c, &cases[2], dims[di], ATTN_BF16, ATTN_CUDA_MMA, tv[ti])) return -1;
        if (!quick && run_case(c, &cases[4], dims[di], ATTN_CUDA_FP16, ATTN_CUDA_MMA, tv[ti]))
          return -1;
      }
  }
rest:
  if (!do_simple) return 0;
  if (run_decode(c, 128, ATTN_BF16, 1, 1, 0)) return -1;
  if (run_decode(c, 64, ATTN_CUDA_FP16, 3, 1, 0)) return -1;
  if (!quick) {
    if (run_decode(c, 128, ATTN_FP32, 8, 0, 0)) return -1;
    if (run_decode(c, 128, ATTN_BF16, 4, 1, 700)) return -1;
  }
  if (run_merge(c)) return -1;
  return 0;
}

/* ---- benchmark ------------------------------------------------------------------ */

typedef struct {
  FILE *txt, *csv;
  double t0, budget_s; /* wall clock start and budget of the benchmark part */
  int over;            /* the budget ran out: later rows are skipped */
} bench_ctx;

typedef int (*bench_fn)(void *arg);

/* Median seconds of fn over repeated runs, timed with events after a warm-up. */
static int time_median(bench_fn fn, void *arg, double *median_s, int *reps_out) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  if (fn(arg)) return -1; /* warm-up: module load, attribute setting */
  CK(cudaDeviceSynchronize());
  float ms = 0.0f;
  CK(cudaEventRecord(e0, 0));
  if (fn(arg)) return -1;
  CK(cudaEventRecord(e1, 0));
  CK(cudaEventSynchronize(e1));
  CK(cudaEventElapsedTime(&ms, e0, e1));
  double first = ms * 1e-3;
  int reps = first > 1.0 ? 1 : (int)(0.25 / (first > 1e-6 ? first : 1e-6));
  if (reps < 3 && first <= 1.0) reps = 3;
  if (reps > 20) reps = 20;
  double t[20];
  for (int r = 0; r < reps; r++) {
    CK(cudaEventRecord(e0, 0));
    if (fn(arg)) return -1;
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t[r] = ms * 1e-3;
  }
  for (int i = 1; i < reps; i++) /* insertion sort, reps <= 20 */
    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
      double x = t[j];
      t[j] = t[j - 1];
      t[j - 1] = x;
    }
  *median_s = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
  if (reps_out) *reps_out = reps;
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return 0;
}

typedef struct {
  attn_params pf, pb;
  void *q, *k, *v, *g;
  float *o, *lse, *delta, *dq, *dk, *dv;
  void *ws;
  cublasHandle_t blas;
  void *A, *Bm, *Cm;
  int gemm_m, gemm_n, gemm_k; /* column-major C[m x n] = A[m x k] B[k x n] */
  size_t copy_bytes;
} bench_bufs;

static int fn_fwd(void *a) {
  bench_bufs *b = a;
  return attn_cuda_fwd(&b->pf, b->q, b->k, b->v, b->o, b->lse, 0, 0);
}
static int fn_bwd(void *a) {
  bench_bufs *b = a;
  return attn_cuda_bwd(&b->pb, b->q, b->k, b->v, NULL, b->g, b->lse, b->delta, b->dq, b->dk,
                       b->dv, 0);
}
static int fn_decode(void *a) {
  bench_bufs *b = a;
  return attn_cuda_decode(&b->pf, b->q, b->k, b->v, b->o, b->lse, 0, 0, b->ws, 0);
}
static int fn_gemm(void *a) {
  bench_bufs *b = a;
  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t st = cublasGemmEx(b->blas, CUBLAS_OP_N, CUBLAS_OP_N, b->gemm_m, b->gemm_n,
                                   b->gemm_k, &alpha, b->A, CUDA_R_16BF, b->gemm_m, b->Bm,
                                   CUDA_R_16BF, b->gemm_k, &beta, b->Cm, CUDA_R_16BF, b->gemm_m,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "bs_cuda_check: cublasGemmEx: status %d\n", (int)st);
    return -1;
  }
  return 0;
}
static int fn_copy(void *a) {
  bench_bufs *b = a;
  CK(cudaMemcpyAsync(b->Cm, b->A, b->copy_bytes, cudaMemcpyDeviceToDevice, 0));
  return 0;
}

static void bench_row(bench_ctx *bc, const char *kernel, int64_t n, int d, int causal, int heads,
                      int tq, int tk, double sec, double flops, double bytes, int reps) {
  double tflops = flops > 0 ? flops / sec * 1e-12 : 0.0, gbs = bytes > 0 ? bytes / sec * 1e-9 : 0.0;
  char line[256];
  snprintf(line, sizeof line, "%-10s %7lld %4d %6s %5d %4dx%-4d %10.3f %9.1f %9.1f %4d\n", kernel,
           (long long)n, d, causal ? "yes" : "no", heads, tq, tk, sec * 1e3, tflops, gbs, reps);
  fputs(line, stdout);
  if (bc->txt) fputs(line, bc->txt);
  if (bc->csv)
    fprintf(bc->csv, "%s,%lld,%d,%d,%d,%d,%d,%.9g,%.6g,%.6g,%d\n", kernel, (long long)n, d, causal,
            heads, tq, tk, sec, tflops, gbs, reps);
  fflush(stdout);
}

static int over_budget(bench_ctx *bc) {
  if (!bc->over && now_s() - bc->t0 > bc->budget_s) {
    bc->over = 1;
    printf("(benchmark budget of %.0f s spent: remaining rows skipped)\n", bc->budget_s);
    if (bc->txt) fprintf(bc->txt, "(benchmark budget of %.0f s spent: remaining rows skipped)\n", bc->budget_s);
  }
  return bc->over;
}

static void free_bench(bench_bufs *b) {
  void *all[] = {b->q, b->k, b->v, b->g, b->o, b->lse, b->delta, b->dq, b->dk, b->dv, b->ws};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]) (void)cudaFree(all[i]);
  b->q = b->k = b->v = b->g = NULL;
  b->o = b->lse = b->delta = b->dq = b->dk = b->dv = NULL;
  b->ws = NULL;
}

/* Allocates and fills (random, never zeros) the tensors of an attention run. */
static int alloc_attn(bench_bufs *b, const attn_params *p, uint64_t seed) {
  const size_t nq = (size_t)p->B * p->Zq * (size_t)p->Nq * p->d;
  const size_t nk = (size_t)p->B * p->Zkv * (size_t)p->Nk * p->d;
  const size_t rows = (size_t)p->B * p->Zq * (size_t)p->Nq, es = esize(p->dtype);
  CK(cudaMalloc(&b->q, nq * es));
  CK(cudaMalloc(&b->k, nk * es));
  CK(cudaMalloc(&b->v, nk * es));
  CK(cudaMalloc(&b->g, nq * es));
  CK(cudaMalloc((void **)&b->o, nq * 4));
  CK(cudaMalloc((void **)&b->lse, rows * 4));
  CK(cudaMalloc((void **)&b->delta, rows * 4));
  CK(cudaMalloc((void **)&b->dq, nq * 4));
  CK(cudaMalloc((void **)&b->dk, nk * 4));
  CK(cudaMalloc((void **)&b->dv, nk * 4));
  CKA(attn_cuda_fill_random(b->q, p->dtype, (int64_t)nq, seed + 1, 1.7f, 0));
  CKA(attn_cuda_fill_random(b->k, p->dtype, (int64_t)nk, seed + 2, 1.7f, 0));
  CKA(attn_cuda_fill_random(b->v, p->dtype, (int64_t)nk, seed + 3, 1.7f, 0));
  CKA(attn_cuda_fill_random(b->g, p->dtype, (int64_t)nq, seed + 4, 1.7f, 0));
  CK(cudaMemset(b->dq, 0, nq * 4));
  CK(cudaMemset(b->dk, 0, nk * 4));
  CK(cudaMemset(b->dv, 0, nk * 4));
  return 0;
}

typedef struct {
  double gemm_tflops, copy_gbs;
  double proj_min, proj_max;     /* TFLOP/s over the projection shapes (min over m >= 512) */
  double fwd16k, bwd16k;         /* default tiles, N = 16k, d = 128, non-causal */
  double best_fwd, best_bwd;     /* best over the tile sweep */
  int best_fwd_t[2], best_bwd_t[2];
  double decode_gbs;
} headline;

/* One (N, d, causal) point, forward and backward, tiles from p (0 = default). */
static int bench_point(bench_ctx *bc, bench_bufs *b, int64_t N, int d, int causal, int heads,
                       int ftq, int ftk, int btq, int btk, double *fwd_tf, double *bwd_tf) {
  attn_params p;
  memset(&p, 0, sizeof p);
  p.B = 1;
  p.Zq = p.Zkv = heads;
  p.Nq = p.Nk = N;
  p.d = d;
  p.scale = 1.0f / sqrtf((float)d);
  p.mask.q_stride = p.mask.k_stride = 1;
  p.mask.causal = causal;
  p.dtype = ATTN_BF16;
  b->pf = b->pb = p;
  b->pf.tile_q = ftq;
  b->pf.tile_k = ftk;
  b->pb.tile_q = btq;
  b->pb.tile_k = btk;
  attn_cuda_launch Lf, Lb;
  char msg[160];
  if (attn_cuda_plan(&b->pf, ATTN_CUDA_AUTO, 0, 1, &Lf, msg, sizeof msg) ||
      attn_cuda_plan(&b->pb, ATTN_CUDA_AUTO, 1, 1, &Lb, msg, sizeof msg)) {
    fprintf(stderr, "bs_cuda_check: plan: %s\n", msg);
    return -1;
  }
  if (alloc_attn(b, &p, (uint64_t)N * 131 + (uint64_t)d * 7 + (uint64_t)causal)) return -1;
  double flops = 4.0 * heads * (double)N * (double)N * d * (causal ? 0.5 : 1.0);
  double sec;
  int reps;
  if (time_median(fn_fwd, b, &sec, &reps)) return -1;
  bench_row(bc, "fwd", N, d, causal, heads, Lf.tile_q, Lf.tile_k, sec, flops, 0, reps);
  if (fwd_tf) *fwd_tf = flops / sec * 1e-12;
  /* The backward needs the real lse and delta of this forward. */
  if (fn_fwd(b)) return -1;
  CKA(attn_cuda_delta(&b->pb, b->o, b->g, b->delta, 0));
  if (!over_budget(bc)) {
    if (time_median(fn_bwd, b, &sec, &reps)) return -1;
    bench_row(bc, "bwd", N, d, causal, heads, Lb.tile_q, Lb.tile_k, sec, 2.5 * flops, 0, reps);
    if (bwd_tf) *bwd_tf = 2.5 * flops / sec * 1e-12;
  }
  free_bench(b);
  CK(cudaDeviceSynchronize());
  return 0;
}

static int run_bench(bench_ctx *bc, headline *hl) {
  bench_bufs b;
  memset(&b, 0, sizeof b);
  const char *hdr = "kernel           N    d causal heads tiles       time_ms   TFLOP/s      GB/s reps\n";
  fputs(hdr, stdout);
  if (bc->txt) fputs(hdr, bc->txt);
  if (bc->csv) fprintf(bc->csv, "kernel,n,d,causal,heads,tile_q,tile_k,seconds,tflops,gbs,reps\n");

  /* Ceilings measured in this run: cuBLAS bf16 GEMM and a device copy. */
  if (cublasCreate(&b.blas) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "bs_cuda_check: cublasCreate failed\n");
    return -1;
  }
  /* Projection shapes (m tokens, n outputs, k inputs) of LLaMA-2-7B (hidden 4096, QKV 12288,
   * gate+up 22016, ffn 11008) at 512 .. 8192 tokens per GPU, the weight gradient (k = tokens),
   * and m steps of 128 rows across wave boundaries at n = k = 4096. */
  static const int proj[][3] = {
      {512, 12288, 4096},  {512, 4096, 4096},   {512, 22016, 4096},  {512, 4096, 11008},
      {2048, 12288, 4096}, {2048, 4096, 4096},  {2048, 22016, 4096}, {2048, 4096, 11008},
      {8192, 12288, 4096}, {8192, 4096, 4096},  {8192, 22016, 4096}, {8192, 4096, 11008},
      {4096, 4096, 512},   {4096, 4096, 2048},  {4096, 4096, 8192},  {1024, 4096, 4096},
      {1152, 4096, 4096},  {1280, 4096, 4096},  {1408, 4096, 4096},  {1536, 4096, 4096},
      {8320, 4096, 4096},  {8448, 4096, 4096},  {1, 12288, 4096},    {16, 12288, 4096}};
  const int nproj = (int)(sizeof proj / sizeof proj[0]);
  size_t na = (size_t)8192 * 8192, nb = na, nc = na;
  for (int i = 0; i < nproj; i++) {
    size_t a = (size_t)proj[i][0] * proj[i][2], bb = (size_t)proj[i][2] * proj[i][1];
    size_t cc = (size_t)proj[i][0] * proj[i][1];
    if (a > na) na = a;
    if (bb > nb) nb = bb;
    if (cc > nc) nc = cc;
  }
  CK(cudaMalloc(&b.A, na * 2));
  CK(cudaMalloc(&b.Bm, nb * 2));
  CK(cudaMalloc(&b.Cm, nc * 2));
  CKA(attn_cuda_fill_random(b.A, ATTN_BF16, (int64_t)na, 11, 1.0f, 0));
  CKA(attn_cuda_fill_random(b.Bm, ATTN_BF16, (int64_t)nb, 12, 1.0f, 0));
  b.gemm_m = b.gemm_n = b.gemm_k = 8192;
  const size_t gn = (size_t)8192 * 8192;
  double sec;
  int reps;
  if (time_median(fn_gemm, &b, &sec, &reps)) return -1;
  double gflop = 2.0 * (double)gn * 8192;
  hl->gemm_tflops = gflop / sec * 1e-12;
  bench_row(bc, "cublas_gemm", 8192, 0, 0, 1, 0, 0, sec, gflop, 0, reps);
  hl->proj_min = hl->proj_max = 0;
  for (int i = 0; i < nproj && !over_budget(bc); i++) {
    b.gemm_m = proj[i][0];
    b.gemm_n = proj[i][1];
    b.gemm_k = proj[i][2];
    if (time_median(fn_gemm, &b, &sec, &reps)) return -1;
    double fl = 2.0 * proj[i][0] * (double)proj[i][1] * proj[i][2];
    double bytes = 2.0 * ((double)proj[i][0] * proj[i][2] + (double)proj[i][2] * proj[i][1] +
                          (double)proj[i][0] * proj[i][1]);
    bench_row(bc, "gemm_proj", proj[i][0], proj[i][2], 0, proj[i][1], 0, 0, sec, fl, bytes, reps);
    double tf = fl / sec * 1e-12;
    if (proj[i][0] >= 512 && (hl->proj_min == 0 || tf < hl->proj_min)) hl->proj_min = tf;
    if (tf > hl->proj_max) hl->proj_max = tf;
  }
  b.copy_bytes = gn * 2;
  if (time_median(fn_copy, &b, &sec, &reps)) return -1;
  hl->copy_gbs = 2.0 * (double)b.copy_bytes / sec * 1e-9;
  bench_row(bc, "d2d_copy", (int64_t)b.copy_bytes, 0, 0, 1, 0, 0, sec, 0, 2.0 * (double)b.copy_bytes, reps);
  (void)cudaFree(b.A);
  (void)cudaFree(b.Bm);
  (void)cudaFree(b.Cm);
  b.A = b.Bm = b.Cm = NULL;
  (void)cublasDestroy(b.blas);

  /* The grid; the headline point (16k, d = 128, non-causal) is the 6th of 12, early
   * enough that the budget never cuts it. */
  const int64_t Ns[] = {4096, 16384, 65536};
  const int dims[] = {64, 128};
  for (int ni = 0; ni < 3; ni++)
    for (int di = 0; di < 2; di++)
      for (int causal = 0; causal < 2; causal++) {
        if (over_budget(bc)) break;
        const int64_t N = Ns[ni];
        const int heads = (int)(262144 / N);
        double f = 0, g = 0;
        if (bench_point(bc, &b, N, dims[di], causal, heads, 0, 0, 0, 0, &f, &g)) return -1;
        if (N == 16384 && dims[di] == 128 && !causal) {
          hl->fwd16k = f;
          hl->bwd16k = g;
        }
      }

  /* Tile sweep at the headline point. */
  const int ft[4][2] = {{64, 32}, {64, 64}, {128, 32}, {128, 64}};
  const int bt[4][2] = {{32, 64}, {64, 64}, {32, 128}, {64, 128}};
  for (int ti = 0; ti < 4 && !over_budget(bc); ti++) {
    double f = 0, g = 0;
    if (bench_point(bc, &b, 16384, 128, 0, 16, ft[ti][0], ft[ti][1], bt[ti][0], bt[ti][1], &f, &g))
      return -1;
    if (f > hl->best_fwd) {
      hl->best_fwd = f;
      hl->best_fwd_t[0] = ft[ti][0];
      hl->best_fwd_t[1] = ft[ti][1];
    }
    if (g > hl->best_bwd) {
      hl->best_bwd = g;
      hl->best_bwd_t[0] = bt[ti][0];
      hl->best_bwd_t[1] = bt[ti][1];
    }
  }

  /* Decode: one query token per head against 256k keys (GQA 32/8), bandwidth. */
  if (!over_budget(bc)) {
    attn_params p;
    memset(&p, 0, sizeof p);
    p.B = 1;
    p.Zq = 32;
    p.Zkv = 8;
    p.Nq = 1;
    p.Nk = 262144;
    p.d = 128;
    p.scale = 1.0f / sqrtf(128.0f);
    p.mask.q_stride = p.mask.k_stride = 1;
    p.dtype = ATTN_BF16;
    b.pf = b.pb = p;
    if (alloc_attn(&b, &p, 99)) return -1;
    int splits = attn_cuda_decode_splits(&p);
    CK(cudaMalloc(&b.ws, attn_cuda_decode_workspace_bytes(&p, splits)));
    if (time_median(fn_decode, &b, &sec, &reps)) return -1;
    double bytes = 2.0 * p.Zkv * (double)p.Nk * p.d * 2.0;
    hl->decode_gbs = bytes / sec * 1e-9;
    bench_row(bc, "decode", p.Nk, p.d, 0, p.Zq, 1, splits, sec, 4.0 * p.Zq * (double)p.Nk * p.d, bytes, reps);
    free_bench(&b);
  }
  return 0;
}

/* ---- main ------------------------------------------------------------------------ */

static void usage(void) {
  fprintf(stderr,
          "usage: bs_cuda_check [--quick] [--no-bench | --bench-only] [--path simple|mma|all]\n"
          "                     [--out DIR] [--seed N] [--budget SECONDS]\n"
          "  --quick       a reduced correctness set, no benchmark (ctest)\n"
          "  --path P      correctness of one path only (separate processes: a fault in one\n"
          "                path does not hide the other's results)\n"
          "  --bench-only  skip the correctness checks\n"
          "  --out DIR     append to correctness.txt and summary.txt, write bench.txt, bench.csv\n"
          "exit: 0 pass, 1 a check failed, 2 usage, 77 no CUDA device\n");
}

static FILE *open_in(const char *dir, const char *name, const char *mode) {
  if (!dir) return NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, mode);
  if (!f) fprintf(stderr, "bs_cuda_check: cannot write %s: %s\n", path, strerror(errno));
  return f;
}

int main(int argc, char **argv) {
  int quick = 0, bench = 1, check = 1, which = 0;
  const char *out = NULL;
  double budget = 200.0;
  uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) {
      quick = 1;
      bench = 0;
    } else if (!strcmp(argv[i], "--no-bench")) {
      bench = 0;
    } else if (!strcmp(argv[i], "--bench-only")) {
      check = 0;
    } else if (!strcmp(argv[i], "--path") && i + 1 < argc) {
      const char *w = argv[++i];
      which = !strcmp(w, "simple") ? 1 : !strcmp(w, "mma") ? 2 : !strcmp(w, "all") ? 0 : -1;
      if (which < 0) {
        fprintf(stderr, "bs_cuda_check: --path takes simple, mma or all\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
      out = argv[++i];
    } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
      seed = strtoull(argv[++i], NULL, 0);
    } else if (!strcmp(argv[i], "--budget") && i + 1 < argc) {
      budget = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage();
      return 0;
    } else {
      fprintf(stderr, "bs_cuda_check: unknown argument '%s'\n", argv[i]);
      usage();
      return 2;
    }
  }
  int ndev = 0;
  char msg[256];
  if (attn_cuda_device_count(&ndev, msg, sizeof msg) != ATTN_OK) {
    printf("SKIP: no CUDA device (%s); the GPU checks need one\n", msg);
    return SKIP_CODE;
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    printf("SKIP: cudaGetDeviceProperties failed on device 0\n");
    return SKIP_CODE;
  }
  if (prop.major < 8) {
    printf("SKIP: device 0 (%s) is sm_%d%d; the kernels are built for sm_80 and up\n", prop.name,
           prop.major, prop.minor);
    return SKIP_CODE;
  }
  if (out) {
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
      fprintf(stderr, "bs_cuda_check: cannot create %s: %s\n", out, strerror(errno));
      return 2;
    }
  }
  char devline[512];
  snprintf(devline, sizeof devline,
           "device: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB, smem/block opt-in %zu KiB\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount,
           (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), prop.l2CacheSize >> 20,
           prop.sharedMemPerBlockOptin >> 10);
  fputs(devline, stdout);

  check_ctx c;
  memset(&c, 0, sizeof c);
  c.seed = seed;
  c.verbose = 1;
  const char *pname = which == 1 ? "simple" : which == 2 ? "mma" : "all";
  int crc = 0;
  if (check) {
    c.log = open_in(out, "correctness.txt", "a");
    say(&c, "correctness (path %s), seed %llu (rerun with --path %s --seed %llu)\n", pname,
        (unsigned long long)seed, pname, (unsigned long long)seed);
    double t0 = now_s();
    crc = run_correctness(&c, quick, which);
    double tcheck = now_s() - t0;
    say(&c, "correctness (path %s): %d passed, %d failed%s (%.1f s)\n", pname, c.pass, c.fail,
        crc ? ", stopped by a CUDA error" : "", tcheck);
    if (c.log) fclose(c.log);
  }

  headline hl;
  memset(&hl, 0, sizeof hl);
  int brc = 0;
  if (bench && crc == 0) {
    bench_ctx bc;
    memset(&bc, 0, sizeof bc);
    bc.t0 = now_s();
    bc.budget_s = budget;
    bc.txt = open_in(out, "bench.txt", "w");
    bc.csv = open_in(out, "bench.csv", "w");
    if (bc.txt) fputs(devline, bc.txt);
    brc = run_bench(&bc, &hl);
    if (bc.txt) fclose(bc.txt);
    if (bc.csv) fclose(bc.csv);
  }

  /* Summary last. */
  char sum[4096];
  int n = 0;
  n += snprintf(sum + n, sizeof sum - n, "== bs_cuda_check%s%s ==\n%s", check ? " --path " : " --bench-only",
                check ? pname : "", devline);
  n += snprintf(sum + n, sizeof sum - n, "seed %llu\n", (unsigned long long)seed);
  if (check) {
    n += snprintf(sum + n, sizeof sum - n, "correctness %-6s %d passed, %d failed%s\n", pname, c.pass,
                  c.fail, crc ? " (stopped by a CUDA error)" : "");
    const char *dn[3] = {"bf16", "fp16", "fp32"};
    for (int i = 0; i < 3; i++)
      if (c.worst[i][0] > 0 || c.worst[i][1] > 0)
        n += snprintf(sum + n, sizeof sum - n, "worst rel err    %s fwd %.2e  bwd %.2e  (bound %.1e)\n",
                      dn[i], c.worst[i][0], c.worst[i][1],
                      bound_for(i == 0 ? ATTN_BF16 : i == 1 ? ATTN_CUDA_FP16 : ATTN_FP32));
  }
  if (bench && crc == 0) {
    n += snprintf(sum + n, sizeof sum - n, "cuBLAS bf16 GEMM 8192^3: %.1f TFLOP/s; d2d copy %.0f GB/s\n",
                  hl.gemm_tflops, hl.copy_gbs);
    n += snprintf(sum + n, sizeof sum - n,
                  "cuBLAS bf16 projection GEMMs (rows gemm_proj of bench.csv): %.1f .. %.1f TFLOP/s\n",
                  hl.proj_min, hl.proj_max);
    n += snprintf(sum + n, sizeof sum - n,
                  "fwd N=16k d=128 bf16 non-causal: %.1f TFLOP/s default tiles, best %.1f (%dx%d); target >= 300\n",
                  hl.fwd16k, hl.best_fwd, hl.best_fwd_t[0], hl.best_fwd_t[1]);
    n += snprintf(sum + n, sizeof sum - n,
                  "bwd N=16k d=128 bf16 non-causal: %.1f TFLOP/s default tiles, best %.1f (%dx%d); target >= 200\n",
                  hl.bwd16k, hl.best_bwd, hl.best_bwd_t[0], hl.best_bwd_t[1]);
    n += snprintf(sum + n, sizeof sum - n, "decode 256k keys bf16: %.0f GB/s of K/V\n", hl.decode_gbs);
    if (brc) n += snprintf(sum + n, sizeof sum - n, "benchmark stopped by an error (see log)\n");
  }
  fputs(sum, stdout);
  FILE *sf = open_in(out, "summary.txt", "a");
  if (sf) {
    fputs(sum, sf);
    fclose(sf);
  }
  return (crc || brc || c.fail) ? 1 : 0;
}
