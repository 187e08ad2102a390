/*
 * cuda_check_host.c — bs_cuda_check's host side: the log, random inputs
 * (base/fill.h's stream) rounded to bf16 / fp16 / fp32 (conversions written
 * out, no _Float16 needed), the comparison with the float64 reference and its
 * error bounds, and the device transfer helpers.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "tests/cuda/cuda_check.h"
#include "base/fill.h"

/* ---- bookkeeping -------------------------------------------------------- */

void say(check_ctx *c, const char *fmt, ...) {
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

/* ---- host numbers ------------------------------------------------------- */

double rng_normal(uint64_t *s) {
  double u1 = ((double)(bs_splitmix64(s) >> 11) + 0.5) / 9007199254740992.0;
  double u2 = (double)(bs_splitmix64(s) >> 11) / 9007199254740992.0;
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
void make_tensor(uint64_t *rng, attn_dtype dt, size_t n, float *vals, void *raw) {
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

size_t esize(attn_dtype dt) { return dt == ATTN_FP32 ? 4 : 2; }

/* ---- comparison ------------------------------------------------------------ */

/*
 * ||got - ref|| / ||ref|| over entries where ref is finite; entries where ref
 * is -inf (lse of a fully masked row) must be -inf in got too; any NaN or
 * other non-finite value in got fails. Returns 1 when within bound.
 */
int compare(check_ctx *c, const char *what, const float *got, const double *ref, size_t n, double bound,
            double *rel_out) {
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
  if (ok) c->pass++;
  else c->fail++;
  return ok;
}

int dtype_index(attn_dtype dt) { return dt == ATTN_BF16 ? 0 : dt == ATTN_CUDA_FP16 ? 1 : 2; }
const char *dtype_name(attn_dtype dt) { return dt == ATTN_BF16 ? "bf16" : dt == ATTN_CUDA_FP16 ? "fp16" : "fp32"; }

/* Bounds fixed before any run: about 2.5 units of roundoff of the storage
 * type's P and dS rounding (bf16 u = 2^-8, fp16 u = 2^-11); fp32 storage uses
 * fp32 arithmetic throughout. */
double bound_for(attn_dtype dt) { return dt == ATTN_BF16 ? 1e-2 : dt == ATTN_CUDA_FP16 ? 2.5e-3 : 1e-5; }

void note_worst(check_ctx *c, attn_dtype dt, int bwd, double rel) {
  double *w = &c->worst[dtype_index(dt)][bwd];
  if (rel > *w) *w = rel;
}

/* ---- device helpers --------------------------------------------------------- */

int upload(void **dptr, const void *src, size_t bytes) {
  CK(cudaMalloc(dptr, bytes));
  CK(cudaMemcpy(*dptr, src, bytes, cudaMemcpyHostToDevice));
  return 0;
}

int download_f(float *dst, const float *src, size_t n) {
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost));
  return 0;
}

/*
 * An attention call returned an error: a failed check. If the device context
 * is still usable (the error was a refused launch, not a fault) the run goes
 * on; a sticky error (illegal address, ...) ends it. Returns 0 to go on.
 */
int call_failed(check_ctx *c, const char *what, int err) {
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
