/*
 * test_attn.c — checks the CPU attention kernels (kernels/attn.h) against a
 * float64 naive reference written here, on fresh random inputs.
 *
 * Seed: from the clock, or BURSTSIM_SEED=N to replay; every failure message
 * names it. Error measure, per tensor: relative error = max|x - ref| / max|ref|
 * (absolute when ref is all zero). Bounds: fp32 storage < 1e-5; bf16 storage
 * < 1e-2, with the reference computed from the bf16-rounded inputs. Every
 * kernel check runs on each code path (scalar and the CPU's vector path).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "base/fill.h"
#include "kernels/attn.h"
#include "kernels/cpu/attn_internal.h"

#define FP32_BOUND 1e-5
#define BF16_BOUND 1e-2

static unsigned long long base_seed;

typedef struct {
  uint64_t s;
} rng;

/* Uniform in [-1, 1). */
static double rng_unif(rng *r) { return bs_unit_signed(bs_splitmix64(&r->s)); }

/* A stream per test, so BURSTSIM_SEED replays one test alone as well. */
static rng rng_for(const char *test) {
  uint64_t h = 1469598103934665603ull;
  for (const char *c = test; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
  rng r = {base_seed ^ h};
  return r;
}

static void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void failf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  print_error("%s (seed %llu; replay with BURSTSIM_SEED=%llu)\n", buf, base_seed, base_seed);
  fail();
}

static void *xcalloc(size_t n, size_t sz) {
  void *p = calloc(n ? n : 1, sz);
  assert_non_null(p);
  return p;
}

/* ---------------------------------------------------------------- inputs */

typedef struct {
  attn_params p;
  size_t nq, nk;               /* elements of q and of k */
  size_t no, nv;               /* elements of o (and dout) and of v: width dv */
  float *q, *k, *v, *dout;     /* values (bf16-rounded when the dtype is bf16) */
  uint16_t *qb, *kb, *vb, *gb; /* bf16 storage */
} tcase;

static void fill(rng *r, float *x, uint16_t *xb, size_t n, double amp) {
  for (size_t i = 0; i < n; i++) {
    float f = (float)(amp * rng_unif(r));
    if (xb) {
      xb[i] = attn_f32_to_bf16(f);
      f = attn_bf16_to_f32(xb[i]);
    }
    x[i] = f;
  }
}

static void case_init(tcase *c, attn_params p, rng *r) {
  memset(c, 0, sizeof *c);
  c->p = p;
  c->nq = (size_t)p.B * p.Zq * p.Nq * p.d;
  c->nk = (size_t)p.B * p.Zkv * p.Nk * p.d;
  c->no = (size_t)p.B * p.Zq * p.Nq * attn_dv(&p);
  c->nv = (size_t)p.B * p.Zkv * p.Nk * attn_dv(&p);
  c->q = xcalloc(c->nq, sizeof(float));
  c->dout = xcalloc(c->no, sizeof(float));
  c->k = xcalloc(c->nk, sizeof(float));
  c->v = xcalloc(c->nv, sizeof(float));
  int bf = p.dtype == ATTN_BF16;
  if (bf) {
    c->qb = xcalloc(c->nq, 2);
    c->gb = xcalloc(c->no, 2);
    c->kb = xcalloc(c->nk, 2);
    c->vb = xcalloc(c->nv, 2);
  }
  /* Unit variance (uniform on +-sqrt 3), as q, k after normalisation: with the
   * 1/sqrt(d) scale the scores have unit spread, neither flat nor one-hot. */
  double amp = sqrt(3.0);
  fill(r, c->q, c->qb, c->nq, amp);
  fill(r, c->k, c->kb, c->nk, amp);
  fill(r, c->v, c->vb, c->nv, amp);
  fill(r, c->dout, c->gb, c->no, amp);
}

static void case_free(tcase *c) {
  free(c->q);
  free(c->k);
  free(c->v);
  free(c->dout);
  free(c->qb);
  free(c->kb);
  free(c->vb);
  free(c->gb);
}

static const void *Qs(const tcase *c) { return c->qb ? (const void *)c->qb : c->q; }
static const void *Ks(const tcase *c) { return c->kb ? (const void *)c->kb : c->k; }
static const void *Vs(const tcase *c) { return c->vb ? (const void *)c->vb : c->v; }
static const void *Gs(const tcase *c) { return c->gb ? (const void *)c->gb : c->dout; }

/* ------------------------------------------------------------- reference */

/* The document of position x by a walk over the ends (not mask.h's search). */
static int64_t ref_doc(const attn_mask *m, int64_t x) {
  int64_t d = 0;
  while (d < m->docs && m->doc_end[d] <= x) d++;
  return d;
}

static int ref_pos_visible(const attn_mask *m, int64_t qp, int64_t kp) {
  if (ref_doc(m, qp) != ref_doc(m, kp)) return 0;
  if (m->causal && kp > qp) return 0;
  if (m->window > 0) {
    int64_t dist = m->causal ? qp - kp : llabs((long long)(qp - kp));
    if (dist >= m->window) return 0;
  }
  return 1;
}

static int ref_visible(const attn_mask *m, int64_t i, int64_t j) {
  int64_t qp = m->q_pos0 + i * m->q_stride, kp = m->k_pos0 + j * m->k_stride;
  if (ref_doc(m, qp) != ref_doc(m, kp)) return 0;
  if (m->causal && kp > qp) return 0;
  if (m->window > 0) {
    int64_t dist = m->causal ? qp - kp : llabs((long long)(qp - kp));
    if (dist >= m->window) return 0;
  }
  return 1;
}

/* Scores of one query row against all keys (-inf where masked); returns lse. */
static double ref_row_probs(const attn_params *p, const float *q, const float *k, int b, int hq, int64_t i,
                            double *pr) {
  int hkv = hq / (p->Zq / p->Zkv);
  const float *qi = q + (((size_t)b * p->Zq + hq) * p->Nq + i) * p->d;
  double m = -INFINITY;
  for (int64_t j = 0; j < p->Nk; j++) {
    const float *kj = k + (((size_t)b * p->Zkv + hkv) * p->Nk + j) * p->d;
    double s = 0;
    for (int c = 0; c < p->d; c++) s += (double)qi[c] * kj[c];
    pr[j] = ref_visible(&p->mask, i, j) ? s * p->scale : -INFINITY;
    if (pr[j] > m) m = pr[j];
  }
  if (m == -INFINITY) {
    for (int64_t j = 0; j < p->Nk; j++) pr[j] = 0;
    return -INFINITY;
  }
  double sum = 0;
  for (int64_t j = 0; j < p->Nk; j++) sum += exp(pr[j] - m);
  double lse = m + log(sum);
  for (int64_t j = 0; j < p->Nk; j++) pr[j] = exp(pr[j] - lse);
  return lse;
}

static void ref_fwd(const attn_params *p, const float *q, const float *k, const float *v, double *o, double *lse) {
  double *pr = xcalloc((size_t)p->Nk, sizeof(double));
  for (int b = 0; b < p->B; b++)
    for (int hq = 0; hq < p->Zq; hq++) {
      int hkv = hq / (p->Zq / p->Zkv);
      for (int64_t i = 0; i < p->Nq; i++) {
        size_t row = ((size_t)b * p->Zq + hq) * p->Nq + i;
        lse[row] = ref_row_probs(p, q, k, b, hq, i, pr);
        const int dv = attn_dv(p);
        double *orow = o + row * dv;
        for (int c = 0; c < dv; c++) orow[c] = 0;
        for (int64_t j = 0; j < p->Nk; j++) {
          const float *vj = v + (((size_t)b * p->Zkv + hkv) * p->Nk + j) * dv;
          for (int c = 0; c < dv; c++) orow[c] += pr[j] * vj[c];
        }
      }
    }
  free(pr);
}

/* Gradients of sum(O * dout) over this (query, key) block, added into dq, dk, dv. */
static void ref_bwd(const attn_params *p, const float *q, const float *k, const float *v, const float *dout, double *dq,
                    double *dk, double *dv) {
  double *pr = xcalloc((size_t)p->Nk, sizeof(double));
  double *dp = xcalloc((size_t)p->Nk, sizeof(double));
  for (int b = 0; b < p->B; b++)
    for (int hq = 0; hq < p->Zq; hq++) {
      int hkv = hq / (p->Zq / p->Zkv);
      for (int64_t i = 0; i < p->Nq; i++) {
        size_t row = ((size_t)b * p->Zq + hq) * p->Nq + i;
        if (ref_row_probs(p, q, k, b, hq, i, pr) == -INFINITY) continue;
        const int dvw = attn_dv(p);
        const float *g = dout + row * dvw, *qi = q + row * p->d;
        double D = 0;
        for (int64_t j = 0; j < p->Nk; j++) {
          const float *vj = v + (((size_t)b * p->Zkv + hkv) * p->Nk + j) * dvw;
          double s = 0;
          for (int c = 0; c < dvw; c++) s += (double)g[c] * vj[c];
          dp[j] = s;
          D += pr[j] * s;
        }
        for (int64_t j = 0; j < p->Nk; j++) {
          size_t kr = ((size_t)b * p->Zkv + hkv) * p->Nk + j;
          const float *kj = k + kr * p->d;
          double ds = pr[j] * (dp[j] - D) * p->scale;
          for (int c = 0; c < dvw; c++) dv[kr * dvw + c] += pr[j] * g[c];
          for (int c = 0; c < p->d; c++) {
            dk[kr * p->d + c] += ds * qi[c];
            dq[row * p->d + c] += ds * kj[c];
          }
        }
      }
    }
  free(pr);
  free(dp);
}

/* ----------------------------------------------------------- comparisons */

static double rel_err(const float *x, const double *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i])) return INFINITY;
    double e = fabs(x[i] - ref[i]);
    if (e > num) num = e;
    if (fabs(ref[i]) > den) den = fabs(ref[i]);
  }
  return den > 0 ? num / den : num;
}

static void check_rel(const char *what, const char *ctx, const float *x, const double *ref, size_t n, double bound) {
  double e = rel_err(x, ref, n);
  if (getenv("BURSTSIM_TEST_VERBOSE")) printf("  %-4s %-60s rel err %.2e (bound %.0e)\n", what, ctx, e, bound);
  if (!(e < bound)) failf("%s [%s]: relative error %.3g >= bound %.1g", what, ctx, e, bound);
}

/* lse: the -inf rows must match exactly, the rest by relative error. */
static void check_lse(const char *ctx, const float *x, const double *ref, size_t n, double bound) {
  double *r2 = xcalloc(n, sizeof(double));
  float *x2 = xcalloc(n, sizeof(float));
  for (size_t i = 0; i < n; i++) {
    if ((ref[i] == -INFINITY) != (x[i] == -INFINITY))
      failf("lse [%s]: row %zu is %g, reference %g", ctx, i, (double)x[i], ref[i]);
    r2[i] = ref[i] == -INFINITY ? 0 : ref[i];
    x2[i] = x[i] == -INFINITY ? 0 : x[i];
  }
  check_rel("lse", ctx, x2, r2, n, bound);
  free(r2);
  free(x2);
}

static double bound_of(const attn_params *p) { return p->dtype == ATTN_BF16 ? BF16_BOUND : FP32_BOUND; }

/* The code paths to exercise: the portable one, AVX2, and the one this CPU picks (AVX-512 here). */
static const char *const variants[] = {"scalar", "avx2", NULL};
#define NVARIANTS 3

static void use_variant(const char *v) {
  if (v) setenv("BURSTSIM_ATTN_VARIANT", v, 1);
  else unsetenv("BURSTSIM_ATTN_VARIANT");
}

/* Runs fused and unfused forward on c and checks both against the reference. */
static void check_fwd_case(const tcase *c, const char *label) {
  const attn_params *p = &c->p;
  size_t rows = (size_t)p->B * p->Zq * p->Nq;
  double *oref = xcalloc(c->no, sizeof(double)), *lref = xcalloc(rows, sizeof(double));
  ref_fwd(p, c->q, c->k, c->v, oref, lref);
  float *o = xcalloc(c->no, sizeof(float)), *lse = xcalloc(rows, sizeof(float));
  char ctx[200];
  for (int vi = 0; vi < NVARIANTS; vi++) {
    use_variant(variants[vi]);
    snprintf(ctx, sizeof ctx, "%s, fused, path %s", label, attn_cpu_variant());
    assert_int_equal(attn_fwd(p, Qs(c), Ks(c), Vs(c), o, lse, 0), ATTN_OK);
    check_rel("O", ctx, o, oref, c->no, bound_of(p));
    check_lse(ctx, lse, lref, rows, bound_of(p));
  }
  use_variant(NULL);
  snprintf(ctx, sizeof ctx, "%s, unfused", label);
  memset(o, 0, c->no * sizeof(float));
  assert_int_equal(attn_fwd_unfused(p, Qs(c), Ks(c), Vs(c), o, lse, 0, NULL), ATTN_OK);
  check_rel("O", ctx, o, oref, c->no, bound_of(p));
  check_lse(ctx, lse, lref, rows, bound_of(p));
  free(oref);
  free(lref);
  free(o);
  free(lse);
}

/* Forward then backward (fused, both delta forms; unfused) against the reference. */
static void check_bwd_case(const tcase *c, const char *label) {
  const attn_params *p = &c->p;
  size_t rows = (size_t)p->B * p->Zq * p->Nq;
  double *dqr = xcalloc(c->nq, sizeof(double)), *dkr = xcalloc(c->nk, sizeof(double));
  double *dvr = xcalloc(c->nv, sizeof(double));
  ref_bwd(p, c->q, c->k, c->v, c->dout, dqr, dkr, dvr);
  float *o = xcalloc(c->no, sizeof(float)), *lse = xcalloc(rows, sizeof(float));
  float *delta = xcalloc(rows, sizeof(float));
  float *dq = xcalloc(c->nq, sizeof(float)), *dk = xcalloc(c->nk, sizeof(float));
  float *dv = xcalloc(c->nv, sizeof(float));
  char ctx[200];
  assert_int_equal(attn_fwd(p, Qs(c), Ks(c), Vs(c), o, lse, 0), ATTN_OK);
  assert_int_equal(attn_delta(p, o, Gs(c), delta), ATTN_OK);
  for (int vi = 0; vi < NVARIANTS; vi++) {
    use_variant(variants[vi]);
    for (int with_delta = 0; with_delta < 2; with_delta++) {
      snprintf(ctx, sizeof ctx, "%s, fused, path %s, %s", label, attn_cpu_variant(),
               with_delta ? "delta given" : "delta from O");
      memset(dq, 0, c->nq * sizeof(float));
      memset(dk, 0, c->nk * sizeof(float));
      memset(dv, 0, c->nv * sizeof(float));
      assert_int_equal(
        attn_bwd(p, Qs(c), Ks(c), Vs(c), with_delta ? NULL : o, Gs(c), lse, with_delta ? delta : NULL, dq, dk, dv),
        ATTN_OK);
      check_rel("dQ", ctx, dq, dqr, c->nq, bound_of(p));
      check_rel("dK", ctx, dk, dkr, c->nk, bound_of(p));
      check_rel("dV", ctx, dv, dvr, c->nv, bound_of(p));
    }
  }
  use_variant(NULL);
  snprintf(ctx, sizeof ctx, "%s, unfused", label);
  memset(dq, 0, c->nq * sizeof(float));
  memset(dk, 0, c->nk * sizeof(float));
  memset(dv, 0, c->nv * sizeof(float));
  assert_int_equal(attn_bwd_unfused(p, Qs(c), Ks(c), Vs(c), o, Gs(c), lse, NULL, dq, dk, dv, NULL), ATTN_OK);
  check_rel("dQ", ctx, dq, dqr, c->nq, bound_of(p));
  check_rel("dK", ctx, dk, dkr, c->nk, bound_of(p));
  check_rel("dV", ctx, dv, dvr, c->nv, bound_of(p));
  free(dqr);
  free(dkr);
  free(dvr);
  free(o);
  free(lse);
  free(delta);
  free(dq);
  free(dk);
  free(dv);
}

static attn_params mk(int B, int Zq, int Zkv, int64_t Nq, int64_t Nk, int d) {
  attn_params p = attn_params_make(B, Zq, Zkv, Nq, Nk, d);
  p.threads = 2;
  return p;
}

static void run_fwd_bwd(const char *test, attn_params p, const char *label, int bwd) {
  rng r = rng_for(test);
  r.s ^= (uint64_t)p.Nq * 1000003u + (uint64_t)p.Nk * 7919u + (uint64_t)p.d;
  tcase c;
  case_init(&c, p, &r);
  check_fwd_case(&c, label);
  if (bwd) check_bwd_case(&c, label);
  case_free(&c);
}

/* ----------------------------------------------------------------- tests */

/* Packed documents: the kernels against the float64 reference (which walks the document ends),
 * forward and backward, causal and not, odd sizes, offsets, GQA, strided and with a window. */
static void test_documents(void **state) {
  (void)state;
  static const int64_t ends_a[] = {7, 40, 41, 90}, ends_b[] = {-3, 25, 130};
  char label[120];
  for (int causal = 0; causal < 2; causal++) {
    attn_params p = mk(2, 4, 2, 77, 101, 64);
    p.mask.causal = causal;
    p.mask.q_pos0 = 20;
    p.mask.docs = 4;
    p.mask.doc_end = ends_a;
    snprintf(label, sizeof label, "docs 7/40/41/90 causal %d Nq77 Nk101 q_pos0 20", causal);
    run_fwd_bwd("docs", p, label, 1);
    attn_params s = mk(1, 2, 1, 33, 45, 80);
    s.mask.causal = causal;
    s.mask.q_stride = s.mask.k_stride = 3;
    s.mask.q_pos0 = 1;
    s.mask.k_pos0 = 2;
    s.mask.window = causal ? 50 : 0;
    s.mask.docs = 3;
    s.mask.doc_end = ends_b;
    snprintf(label, sizeof label, "docs -3/25/130 striped 3 causal %d window %lld", causal, (long long)s.mask.window);
    run_fwd_bwd("docs", s, label, 1);
  }
  attn_params t = mk(1, 2, 2, 600, 260, 64); /* several tiles, one document boundary inside a tile */
  static const int64_t ends_c[] = {130, 333};
  t.mask.causal = 1;
  t.mask.q_pos0 = 100;
  t.mask.docs = 2;
  t.mask.doc_end = ends_c;
  run_fwd_bwd("docs", t, "docs 130/333 Nq600 Nk260 causal", 1);
}

/* Random document ends in [-60, 200) for the mask tests, or none (half the time). */
static void random_docs(rng *r, attn_mask *m, int64_t ends[6]) {
  m->docs = (int64_t)(bs_splitmix64(&r->s) % 2 ? 0 : 1 + bs_splitmix64(&r->s) % 5);
  int64_t x = -60;
  for (int64_t d = 0; d < m->docs; d++) {
    x += 1 + (int64_t)(bs_splitmix64(&r->s) % 50);
    ends[d] = x;
  }
  m->doc_end = ends;
}

static void test_full_mask(void **state) {
  (void)state;
  run_fwd_bwd("full", mk(2, 3, 3, 45, 70, 64), "B2 Z3 Nq45 Nk70 d64", 1);
}

static void test_odd_sizes(void **state) {
  (void)state;
  static const int ds[] = {64, 80, 128};
  static const int64_t ns[][2] = {{1, 1}, {1, 37}, {5, 1}, {33, 65}, {97, 131}};
  char label[100];
  for (size_t a = 0; a < 3; a++)
    for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
      attn_params p = mk(1, 2, 1, ns[b][0], ns[b][1], ds[a]);
      snprintf(label, sizeof label, "Nq%lld Nk%lld d%d", (long long)ns[b][0], (long long)ns[b][1], ds[a]);
      run_fwd_bwd("odd", p, label, 1);
    }
}

static void test_decode_long_keys(void **state) {
  (void)state;
  /* One or two query rows, many keys, one head: the key-split path. */
  attn_params p = mk(1, 1, 1, 1, 1500, 128);
  run_fwd_bwd("decode", p, "decode Nq1 Nk1500", 0);
  p = mk(1, 2, 1, 2, 777, 64);
  p.mask.causal = 1;
  p.mask.q_pos0 = 700;
  run_fwd_bwd("decode", p, "decode causal Nq2 Nk777", 1);
  /* GQA decode: the query heads of a kv group are handled together. */
  p = mk(2, 8, 2, 3, 500, 64);
  p.mask.causal = 1;
  p.mask.q_pos0 = 420;
  run_fwd_bwd("decode", p, "GQA decode 8/2 Nq3 causal", 1);
  p = mk(1, 4, 1, 1, 300, 80);
  p.mask.causal = 1;
  p.mask.window = 100;
  p.mask.q_pos0 = 299;
  run_fwd_bwd("decode", p, "GQA decode 4/1 d80 window", 1);
  p = mk(1, 6, 3, 2, 200, 128);
  p.dtype = ATTN_BF16;
  run_fwd_bwd("decode", p, "GQA decode bf16 6/3", 1);
}

static void test_causal_offsets(void **state) {
  (void)state;
  /* Query block after, at, across, and before the key block. */
  static const int64_t offs[][2] = {{200, 0}, {0, 0}, {30, 0}, {0, 25}, {10, 90}, {0, 300}};
  char label[100];
  for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
    attn_params p = mk(1, 2, 2, 70, 90, 64);
    p.mask.causal = 1;
    p.mask.q_pos0 = offs[i][0];
    p.mask.k_pos0 = offs[i][1];
    snprintf(label, sizeof label, "causal q_pos0 %lld k_pos0 %lld", (long long)offs[i][0], (long long)offs[i][1]);
    run_fwd_bwd("causal", p, label, 1);
  }
}

static void test_striped(void **state) {
  (void)state;
  /* Striped layout over G = 4 ranks: rank r holds positions r, r+4, ... */
  static const int64_t rk[][2] = {{1, 3}, {3, 1}, {2, 2}};
  char label[100];
  for (size_t i = 0; i < 3; i++) {
    attn_params p = mk(1, 2, 1, 50, 60, 64);
    p.mask.causal = 1;
    p.mask.q_stride = p.mask.k_stride = 4;
    p.mask.q_pos0 = rk[i][0];
    p.mask.k_pos0 = rk[i][1];
    snprintf(label, sizeof label, "striped q rank %lld k rank %lld", (long long)rk[i][0], (long long)rk[i][1]);
    run_fwd_bwd("striped", p, label, 1);
  }
}

static void test_window(void **state) {
  (void)state;
  attn_params p = mk(1, 2, 2, 80, 100, 64);
  p.mask.causal = 1;
  p.mask.window = 17;
  p.mask.q_pos0 = 40;
  run_fwd_bwd("window", p, "causal window 17", 1);
  p.mask.causal = 0;
  p.mask.window = 23;
  p.mask.q_pos0 = 10;
  run_fwd_bwd("window", p, "two-sided window 23", 1);
}

static void test_gqa(void **state) {
  (void)state;
  run_fwd_bwd("gqa", mk(2, 6, 2, 40, 50, 64), "GQA 6/2", 1);
  attn_params p = mk(1, 4, 1, 33, 70, 128);
  p.mask.causal = 1;
  p.mask.q_pos0 = 37;
  run_fwd_bwd("gqa", p, "GQA 4/1 causal", 1);
}

static void test_bf16(void **state) {
  (void)state;
  attn_params p = mk(1, 4, 2, 60, 90, 128);
  p.dtype = ATTN_BF16;
  p.mask.causal = 1;
  p.mask.q_pos0 = 30;
  run_fwd_bwd("bf16", p, "bf16 causal GQA", 1);
  p = mk(1, 2, 2, 3, 400, 80);
  p.dtype = ATTN_BF16;
  run_fwd_bwd("bf16", p, "bf16 decode d80", 1);
}

static void test_threads(void **state) {
  (void)state;
  /* One thread, and more threads than work; the backward's key-tile mode (1 kv head). */
  static const int th[] = {1, 3, 5};
  char label[100];
  for (int i = 0; i < 3; i++) {
    attn_params p = mk(1, 1, 1, 70, 200, 64);
    p.threads = th[i];
    p.mask.causal = 1;
    p.mask.q_pos0 = 130;
    snprintf(label, sizeof label, "threads %d", th[i]);
    run_fwd_bwd("threads", p, label, 1);
  }
}

static void test_multi_tile(void **state) {
  (void)state;
  /* More query rows than one default tile of any path, with a ragged last tile. */
  attn_params p = mk(1, 2, 1, 600, 260, 64);
  p.mask.causal = 1;
  p.mask.q_pos0 = 100;
  run_fwd_bwd("multitile", p, "Nq600 Nk260 causal", 1);
  p = mk(1, 1, 1, 270, 90, 128);
  p.dtype = ATTN_BF16;
  run_fwd_bwd("multitile", p, "bf16 Nq270 Nk90", 1);
}

static void test_tiles(void **state) {
  (void)state;
  attn_params p = mk(1, 2, 2, 50, 70, 64);
  p.tile_q = 7;
  p.tile_k = 11;
  p.mask.causal = 1;
  p.mask.q_pos0 = 20;
  run_fwd_bwd("tiles", p, "tile_q 7 tile_k 11", 1);
}

/* Copies key rows [j0, j0+n) of every head of x into a new [B, Zkv, n, d] tensor. */
static float *slice_keys(const attn_params *p, const float *x, int64_t j0, int64_t n) {
  float *s = xcalloc((size_t)p->B * p->Zkv * n * p->d, sizeof(float));
  for (int h = 0; h < p->B * p->Zkv; h++)
    memcpy(s + (size_t)h * n * p->d, x + ((size_t)h * p->Nk + j0) * p->d, (size_t)n * p->d * sizeof(float));
  return s;
}

static void unslice_add(const attn_params *p, float *x, const float *s, int64_t j0, int64_t n) {
  for (int h = 0; h < p->B * p->Zkv; h++)
    for (size_t e = 0; e < (size_t)n * p->d; e++) x[((size_t)h * p->Nk + j0) * p->d + e] += s[(size_t)h * n * p->d + e];
}

static void test_split_merge(void **state) {
  (void)state;
  static const int pieces[] = {2, 3, 7};
  rng r = rng_for("merge");
  attn_params p = mk(1, 2, 1, 41, 150, 64);
  p.mask.causal = 1;
  p.mask.q_pos0 = 60; /* some pieces lie wholly in the future of some rows */
  tcase c;
  case_init(&c, p, &r);
  size_t rows = (size_t)p.B * p.Zq * p.Nq;
  double *oref = xcalloc(c.nq, sizeof(double)), *lref = xcalloc(rows, sizeof(double));
  ref_fwd(&p, c.q, c.k, c.v, oref, lref);
  double *dqr = xcalloc(c.nq, sizeof(double)), *dkr = xcalloc(c.nk, sizeof(double));
  double *dvr = xcalloc(c.nk, sizeof(double));
  ref_bwd(&p, c.q, c.k, c.v, c.dout, dqr, dkr, dvr);
  float *oa = xcalloc(c.nq, sizeof(float)), *la = xcalloc(rows, sizeof(float));
  float *om = xcalloc(c.nq, sizeof(float)), *lm = xcalloc(rows, sizeof(float));
  float *o2 = xcalloc(c.nq, sizeof(float)), *l2 = xcalloc(rows, sizeof(float));
  float *delta = xcalloc(rows, sizeof(float));
  float *dq = xcalloc(c.nq, sizeof(float)), *dk = xcalloc(c.nk, sizeof(float));
  float *dv = xcalloc(c.nk, sizeof(float));
  char ctx[120];
  for (int vi = 0; vi < NVARIANTS; vi++) {
    use_variant(variants[vi]);
    for (int pi = 0; pi < 3; pi++) {
      int np = pieces[pi];
      for (int unf = 0; unf < 2; unf++) {
        snprintf(ctx, sizeof ctx, "%d pieces, %s, path %s", np, unf ? "unfused" : "fused", attn_cpu_variant());
        for (int s = 0; s < np; s++) {
          int64_t j0 = p.Nk * s / np, j1 = p.Nk * (s + 1) / np;
          attn_params ps = p;
          ps.Nk = j1 - j0;
          ps.mask.k_pos0 = p.mask.k_pos0 + j0;
          float *ks = slice_keys(&p, c.k, j0, j1 - j0), *vs = slice_keys(&p, c.v, j0, j1 - j0);
          /* Running result by accumulate = 1, and a separate partial merged by attn_merge. */
          if (unf) {
            assert_int_equal(attn_fwd_unfused(&ps, c.q, ks, vs, oa, la, s > 0, NULL), ATTN_OK);
            assert_int_equal(attn_fwd_unfused(&ps, c.q, ks, vs, o2, l2, 0, NULL), ATTN_OK);
          } else {
            assert_int_equal(attn_fwd(&ps, c.q, ks, vs, oa, la, s > 0), ATTN_OK);
            assert_int_equal(attn_fwd(&ps, c.q, ks, vs, o2, l2, 0), ATTN_OK);
          }
          if (s == 0) {
            memcpy(om, o2, c.nq * sizeof(float));
            memcpy(lm, l2, rows * sizeof(float));
          } else {
            assert_int_equal(attn_merge((int64_t)rows, p.d, om, lm, o2, l2), ATTN_OK);
          }
          free(ks);
          free(vs);
        }
        check_rel("O (accumulate)", ctx, oa, oref, c.nq, FP32_BOUND);
        check_lse(ctx, la, lref, rows, FP32_BOUND);
        check_rel("O (attn_merge)", ctx, om, oref, c.nq, FP32_BOUND);
        check_lse(ctx, lm, lref, rows, FP32_BOUND);
      }
      /* Backward over the same pieces with the full lse and delta sums to the whole. */
      snprintf(ctx, sizeof ctx, "bwd over %d pieces, path %s", np, attn_cpu_variant());
      assert_int_equal(attn_delta(&p, oa, c.dout, delta), ATTN_OK);
      memset(dq, 0, c.nq * sizeof(float));
      memset(dk, 0, c.nk * sizeof(float));
      memset(dv, 0, c.nk * sizeof(float));
      for (int s = 0; s < np; s++) {
        int64_t j0 = p.Nk * s / np, j1 = p.Nk * (s + 1) / np;
        attn_params ps = p;
        ps.Nk = j1 - j0;
        ps.mask.k_pos0 = p.mask.k_pos0 + j0;
        float *ks = slice_keys(&p, c.k, j0, j1 - j0), *vs = slice_keys(&p, c.v, j0, j1 - j0);
        size_t nkp = (size_t)p.B * p.Zkv * ps.Nk * p.d;
        float *dks = xcalloc(nkp, sizeof(float)), *dvs = xcalloc(nkp, sizeof(float));
        assert_int_equal(attn_bwd(&ps, c.q, ks, vs, NULL, c.dout, la, delta, dq, dks, dvs), ATTN_OK);
        unslice_add(&p, dk, dks, j0, ps.Nk);
        unslice_add(&p, dv, dvs, j0, ps.Nk);
        free(ks);
        free(vs);
        free(dks);
        free(dvs);
      }
      check_rel("dQ", ctx, dq, dqr, c.nq, FP32_BOUND);
      check_rel("dK", ctx, dk, dkr, c.nk, FP32_BOUND);
      check_rel("dV", ctx, dv, dvr, c.nk, FP32_BOUND);
    }
  }
  use_variant(NULL);
  free(oref);
  free(lref);
  free(dqr);
  free(dkr);
  free(dvr);
  free(oa);
  free(la);
  free(om);
  free(lm);
  free(o2);
  free(l2);
  free(delta);
  free(dq);
  free(dk);
  free(dv);
  case_free(&c);
}

static void test_fully_masked_rows(void **state) {
  (void)state;
  rng r = rng_for("masked");
  attn_params p = mk(1, 2, 1, 30, 40, 64);
  p.mask.causal = 1;
  p.mask.k_pos0 = 12; /* query rows 0..11 see no key */
  tcase c;
  case_init(&c, p, &r);
  size_t rows = (size_t)p.Zq * p.Nq;
  float *o = xcalloc(c.nq, sizeof(float)), *lse = xcalloc(rows, sizeof(float));
  float *dq = xcalloc(c.nq, sizeof(float)), *dk = xcalloc(c.nk, sizeof(float));
  float *dv = xcalloc(c.nk, sizeof(float));
  for (int vi = 0; vi < NVARIANTS; vi++) {
    use_variant(variants[vi]);
    for (int unf = 0; unf < 2; unf++) {
      for (size_t e = 0; e < c.nq; e++) o[e] = NAN; /* must be overwritten */
      assert_int_equal(
        unf ? attn_fwd_unfused(&p, c.q, c.k, c.v, o, lse, 0, NULL) : attn_fwd(&p, c.q, c.k, c.v, o, lse, 0), ATTN_OK);
      for (int h = 0; h < p.Zq; h++)
        for (int64_t i = 0; i < p.Nq; i++) {
          size_t row = (size_t)h * p.Nq + i;
          if (i < 12) {
            if (lse[row] != -INFINITY) failf("row %zu: lse %g, expected -inf", row, (double)lse[row]);
            for (int cc = 0; cc < p.d; cc++)
              if (o[row * p.d + cc] != 0.0f) failf("row %zu: O not 0", row);
          } else if (!isfinite(lse[row])) {
            failf("row %zu: lse %g not finite", row, (double)lse[row]);
          }
          for (int cc = 0; cc < p.d; cc++)
            if (isnan(o[row * p.d + cc])) failf("row %zu: NaN in O", row);
        }
      memset(dq, 0, c.nq * sizeof(float));
      memset(dk, 0, c.nk * sizeof(float));
      memset(dv, 0, c.nk * sizeof(float));
      assert_int_equal(unf ? attn_bwd_unfused(&p, c.q, c.k, c.v, o, c.dout, lse, NULL, dq, dk, dv, NULL)
                           : attn_bwd(&p, c.q, c.k, c.v, o, c.dout, lse, NULL, dq, dk, dv),
                       ATTN_OK);
      for (size_t e = 0; e < c.nq; e++) {
        if (!isfinite(dq[e])) failf("dQ[%zu] not finite", e);
        if ((e / p.d) % p.Nq < 12 && dq[e] != 0.0f) failf("dQ of a fully masked row not 0");
      }
      for (size_t e = 0; e < c.nk; e++)
        if (!isfinite(dk[e]) || !isfinite(dv[e])) failf("dK/dV[%zu] not finite", e);
    }
    /* A block in the future of every row: everything masked; accumulate keeps the running result. */
    attn_params pf = p;
    pf.mask.k_pos0 = 1000;
    for (size_t e = 0; e < c.nq; e++) o[e] = 0.25f;
    for (size_t e = 0; e < rows; e++) lse[e] = 1.5f;
    assert_int_equal(attn_fwd(&pf, c.q, c.k, c.v, o, lse, 1), ATTN_OK);
    for (size_t e = 0; e < c.nq; e++)
      if (o[e] != 0.25f) failf("accumulate of an invisible block changed O");
    for (size_t e = 0; e < rows; e++)
      if (lse[e] != 1.5f) failf("accumulate of an invisible block changed lse");
  }
  use_variant(NULL);
  free(o);
  free(lse);
  free(dq);
  free(dk);
  free(dv);
  case_free(&c);
}

static void test_bwd_accumulates(void **state) {
  (void)state;
  rng r = rng_for("bwdacc");
  attn_params p = mk(1, 2, 1, 35, 45, 80);
  p.mask.causal = 1;
  p.mask.q_pos0 = 20;
  tcase c;
  case_init(&c, p, &r);
  size_t rows = (size_t)p.Zq * p.Nq;
  double *dqr = xcalloc(c.nq, sizeof(double)), *dkr = xcalloc(c.nk, sizeof(double));
  double *dvr = xcalloc(c.nk, sizeof(double));
  float *dq = xcalloc(c.nq, sizeof(float)), *dk = xcalloc(c.nk, sizeof(float));
  float *dv = xcalloc(c.nk, sizeof(float));
  float *o = xcalloc(c.nq, sizeof(float)), *lse = xcalloc(rows, sizeof(float));
  /* Start from random values: the result must be start + gradient. */
  for (size_t e = 0; e < c.nq; e++) dqr[e] = dq[e] = (float)rng_unif(&r);
  for (size_t e = 0; e < c.nk; e++) {
    dkr[e] = dk[e] = (float)rng_unif(&r);
    dvr[e] = dv[e] = (float)rng_unif(&r);
  }
  ref_bwd(&p, c.q, c.k, c.v, c.dout, dqr, dkr, dvr);
  assert_int_equal(attn_fwd(&p, c.q, c.k, c.v, o, lse, 0), ATTN_OK);
  assert_int_equal(attn_bwd(&p, c.q, c.k, c.v, o, c.dout, lse, NULL, dq, dk, dv), ATTN_OK);
  check_rel("dQ", "accumulate", dq, dqr, c.nq, FP32_BOUND);
  check_rel("dK", "accumulate", dk, dkr, c.nk, FP32_BOUND);
  check_rel("dV", "accumulate", dv, dvr, c.nk, FP32_BOUND);
  free(dqr);
  free(dkr);
  free(dvr);
  free(dq);
  free(dk);
  free(dv);
  free(o);
  free(lse);
  case_free(&c);
}

/* loss = sum(O * dout) in double, from the fp32 kernel's O. */
static double loss_of(const tcase *c, float *o, float *lse) {
  assert_int_equal(attn_fwd(&c->p, c->q, c->k, c->v, o, lse, 0), ATTN_OK);
  double s = 0;
  for (size_t e = 0; e < c->nq; e++) s += (double)o[e] * c->dout[e];
  return s;
}

/*
 * Central differences on the fused fp32 forward of a tiny case. With step
 * h = 1e-2 the truncation error is about h^2 |f'''| / 6 ~ 1e-5 and the fp32
 * rounding of the loss about 1e-7 |loss| / h ~ 1e-5, so a gradient component
 * matches within 1e-3 of the largest one; a wrong formula misses by O(1).
 */
static void test_finite_difference(void **state) {
  (void)state;
  rng r = rng_for("fd");
  attn_params p = mk(1, 2, 1, 3, 5, 4);
  p.mask.causal = 1;
  p.mask.q_pos0 = 2;
  tcase c;
  case_init(&c, p, &r);
  size_t rows = (size_t)p.Zq * p.Nq;
  float *o = xcalloc(c.nq, sizeof(float)), *lse = xcalloc(rows, sizeof(float));
  float *dq = xcalloc(c.nq, sizeof(float)), *dk = xcalloc(c.nk, sizeof(float));
  float *dv = xcalloc(c.nk, sizeof(float));
  loss_of(&c, o, lse);
  assert_int_equal(attn_bwd(&p, c.q, c.k, c.v, o, c.dout, lse, NULL, dq, dk, dv), ATTN_OK);
  struct {
    const char *name;
    float *x, *g;
    size_t n;
  } t[3] = {{"dQ", c.q, dq, c.nq}, {"dK", c.k, dk, c.nk}, {"dV", c.v, dv, c.nk}};
  const float h = 1e-2f;
  for (int a = 0; a < 3; a++) {
    double gmax = 0, emax = 0;
    for (size_t e = 0; e < t[a].n; e++) {
      float x0 = t[a].x[e];
      t[a].x[e] = x0 + h;
      double lp = loss_of(&c, o, lse);
      t[a].x[e] = x0 - h;
      double lm = loss_of(&c, o, lse);
      t[a].x[e] = x0;
      double num = (lp - lm) / (2.0 * h);
      if (fabs(num - t[a].g[e]) > emax) emax = fabs(num - t[a].g[e]);
      if (fabs(t[a].g[e]) > gmax) gmax = fabs(t[a].g[e]);
    }
    if (!(gmax > 0) || !(emax < 1e-3 * gmax))
      failf("%s: finite-difference mismatch %.3g vs max gradient %.3g", t[a].name, emax, gmax);
  }
  free(o);
  free(lse);
  free(dq);
  free(dk);
  free(dv);
  case_free(&c);
}

static void test_deterministic(void **state) {
  (void)state;
  rng r = rng_for("det");
  attn_params p = mk(1, 1, 1, 3, 900, 64); /* key-split forward, key-tile backward */
  tcase c;
  case_init(&c, p, &r);
  size_t rows = p.Nq;
  float *o[2], *l[2], *dq[2], *dk[2], *dv[2];
  for (int rep = 0; rep < 2; rep++) {
    o[rep] = xcalloc(c.nq, sizeof(float));
    l[rep] = xcalloc(rows, sizeof(float));
    dq[rep] = xcalloc(c.nq, sizeof(float));
    dk[rep] = xcalloc(c.nk, sizeof(float));
    dv[rep] = xcalloc(c.nk, sizeof(float));
    assert_int_equal(attn_fwd(&p, c.q, c.k, c.v, o[rep], l[rep], 0), ATTN_OK);
    assert_int_equal(attn_bwd(&p, c.q, c.k, c.v, o[rep], c.dout, l[rep], NULL, dq[rep], dk[rep], dv[rep]), ATTN_OK);
  }
  assert_memory_equal(o[0], o[1], c.nq * sizeof(float));
  assert_memory_equal(l[0], l[1], rows * sizeof(float));
  assert_memory_equal(dq[0], dq[1], c.nq * sizeof(float));
  assert_memory_equal(dk[0], dk[1], c.nk * sizeof(float));
  assert_memory_equal(dv[0], dv[1], c.nk * sizeof(float));
  for (int rep = 0; rep < 2; rep++) {
    free(o[rep]);
    free(l[rep]);
    free(dq[rep]);
    free(dk[rep]);
    free(dv[rep]);
  }
  case_free(&c);
}

static void test_bad_input(void **state) {
  (void)state;
  float buf[4096];
  float *b = buf;
  memset(buf, 0, sizeof buf);
  attn_params good = mk(1, 2, 1, 4, 4, 8);
  char msg[200];
  assert_int_equal(attn_check_msg(&good, msg, sizeof msg), ATTN_OK);
  attn_params bad[10];
  for (int i = 0; i < 10; i++) bad[i] = good;
  bad[0].Zq = 3;
  bad[0].Zkv = 2; /* Zq % Zkv != 0 */
  bad[1].B = 0;
  bad[2].Nq = 0;
  bad[3].Nk = -5;
  bad[4].d = 0;
  bad[5].Zkv = -1;
  bad[6].mask.q_stride = 0;
  bad[7].mask.window = -1;
  bad[8].threads = -2;
  bad[9].d = -64;
  for (int i = 0; i < 10; i++) {
    attn_params *p = &bad[i];
    msg[0] = 0;
    assert_int_equal(attn_check_msg(p, msg, sizeof msg), ATTN_EINVAL);
    assert_true(strlen(msg) > 0 && strcmp(msg, "ok") != 0);
    assert_int_equal(attn_fwd(p, b, b, b, b, b, 0), ATTN_EINVAL);
    assert_int_equal(attn_fwd_unfused(p, b, b, b, b, b, 0, NULL), ATTN_EINVAL);
    assert_int_equal(attn_bwd(p, b, b, b, b, b, b, NULL, b, b, b), ATTN_EINVAL);
    assert_int_equal(attn_bwd_unfused(p, b, b, b, b, b, b, NULL, b, b, b, NULL), ATTN_EINVAL);
    assert_int_equal(attn_delta(p, b, b, b), ATTN_EINVAL);
    assert_int_equal(attn_unfused_workspace_bytes(p), 0);
  }
  attn_params bt = good;
  bt.dtype = (attn_dtype)7;
  assert_int_equal(attn_fwd(&bt, b, b, b, b, b, 0), ATTN_EDTYPE);
  assert_int_equal(attn_check(NULL), ATTN_ENULL);
  assert_int_equal(attn_fwd(NULL, b, b, b, b, b, 0), ATTN_ENULL);
  assert_int_equal(attn_fwd(&good, NULL, b, b, b, b, 0), ATTN_ENULL);
  assert_int_equal(attn_fwd(&good, b, b, b, b, NULL, 0), ATTN_ENULL);
  assert_int_equal(attn_fwd_unfused(&good, b, NULL, b, b, b, 0, NULL), ATTN_ENULL);
  assert_int_equal(attn_bwd(&good, b, b, b, NULL, b, b, NULL, b, b, b), ATTN_ENULL); /* no o nor delta */
  assert_int_equal(attn_bwd(&good, b, b, b, b, b, b, NULL, NULL, b, b), ATTN_ENULL);
  assert_int_equal(attn_bwd_unfused(&good, b, b, b, b, NULL, b, NULL, b, b, b, NULL), ATTN_ENULL);
  assert_int_equal(attn_delta(&good, NULL, b, b), ATTN_ENULL);
  assert_int_equal(attn_merge(4, 8, NULL, b, b, b), ATTN_ENULL);
  assert_int_equal(attn_merge(0, 8, b, b, b, b), ATTN_EINVAL);
  assert_int_equal(attn_merge(4, -1, b, b, b, b), ATTN_EINVAL);
  for (int e = 0; e >= -5; e--) assert_non_null(attn_strerror(e));
  assert_string_not_equal(attn_strerror(ATTN_EINVAL), attn_strerror(ATTN_ENULL));
}

/* The per-row visible run and the tile classes the vector paths use agree with the rule. */
static void test_mask_runs(void **state) {
  (void)state;
  rng r = rng_for("maskruns");
  int64_t ends[6];
  for (int t = 0; t < 3000; t++) {
    attn_mask m;
    random_docs(&r, &m, ends);
    m.causal = (int)(bs_splitmix64(&r.s) % 2);
    m.window = (int64_t)(bs_splitmix64(&r.s) % 3 == 0 ? 0 : bs_splitmix64(&r.s) % 25);
    m.q_stride = 1 + (int64_t)(bs_splitmix64(&r.s) % 5);
    m.k_stride = 1 + (int64_t)(bs_splitmix64(&r.s) % 5);
    m.q_pos0 = (int64_t)(bs_splitmix64(&r.s) % 100) - 50;
    m.k_pos0 = (int64_t)(bs_splitmix64(&r.s) % 100) - 50;
    int64_t i0 = (int64_t)(bs_splitmix64(&r.s) % 20), ni = 1 + (int64_t)(bs_splitmix64(&r.s) % 20);
    int64_t j0 = (int64_t)(bs_splitmix64(&r.s) % 20), nj = 1 + (int64_t)(bs_splitmix64(&r.s) % 40);
    int any = 0, all = 1;
    for (int64_t i = i0; i < i0 + ni; i++) {
      int64_t qp = m.q_pos0 + i * m.q_stride, lo, hi;
      attn_mask_visible_run(&m, qp, j0, nj, &lo, &hi);
      for (int64_t j = 0; j < nj; j++) {
        int vis = attn_mask_visible(&m, qp, m.k_pos0 + (j0 + j) * m.k_stride);
        if (vis != ref_pos_visible(&m, qp, m.k_pos0 + (j0 + j) * m.k_stride))
          failf("visible wrong (case %d, row %lld, key %lld)", t, (long long)i, (long long)j);
        if (vis != (j >= lo && j <= hi))
          failf("visible run wrong (case %d, row %lld, key %lld)", t, (long long)i, (long long)j);
        any |= vis;
        all &= vis;
      }
    }
    int cls = attn_mask_tile_class(&m, i0, ni, j0, nj);
    if (cls == ATTN_TILE_NONE && any) failf("tile class NONE but a key is visible (case %d)", t);
    if (cls == ATTN_TILE_FULL && !all) failf("tile class FULL but a key is masked (case %d)", t);
    if (attn_mask_tile_full(&m, i0, ni, j0, nj) != (cls == ATTN_TILE_FULL)) failf("tile_full disagrees (case %d)", t);
  }
}

/* Key and query ranges hold every visible pair; the pair count of two blocks
 * (the plans' FLOPs and skipping) equals brute force. */
static void test_mask_ranges_and_pairs(void **state) {
  (void)state;
  rng r = rng_for("maskpairs");
  int64_t ends[6];
  for (int t = 0; t < 3000; t++) {
    attn_mask m;
    random_docs(&r, &m, ends);
    m.causal = (int)(bs_splitmix64(&r.s) % 2);
    m.window = (int64_t)(bs_splitmix64(&r.s) % 3 == 0 ? 0 : bs_splitmix64(&r.s) % 25);
    m.q_stride = 1 + (int64_t)(bs_splitmix64(&r.s) % 5);
    m.k_stride = bs_splitmix64(&r.s) % 2 ? m.q_stride : 1 + (int64_t)(bs_splitmix64(&r.s) % 5);
    m.q_pos0 = (int64_t)(bs_splitmix64(&r.s) % 100) - 50;
    m.k_pos0 = (int64_t)(bs_splitmix64(&r.s) % 100) - 50;
    int64_t nq = 1 + (int64_t)(bs_splitmix64(&r.s) % 30), nk = 1 + (int64_t)(bs_splitmix64(&r.s) % 30), pairs = 0;
    for (int64_t i = 0; i < nq; i++) {
      int64_t jlo, jhi;
      attn_mask_key_range(&m, i, 1, nk, &jlo, &jhi);
      for (int64_t j = 0; j < nk; j++) {
        if (!ref_visible(&m, i, j)) continue;
        pairs++;
        int64_t ilo, ihi;
        attn_mask_query_range(&m, j, 1, nq, &ilo, &ihi);
        if (j < jlo || j >= jhi) failf("key range misses a visible key (case %d)", t);
        if (i < ilo || i >= ihi) failf("query range misses a visible query (case %d)", t);
      }
    }
    if (m.q_stride == m.k_stride && attn_mask_pairs(&m, nq, nk) != pairs)
      failf("pairs %lld, brute force %lld (case %d)", (long long)attn_mask_pairs(&m, nq, nk), (long long)pairs, t);
  }
}

static void test_bf16_rounding(void **state) {
  (void)state;
  /* 1 + 2^-8 lies halfway between bf16 1 and 1 + 2^-7: ties to even gives 1. */
  assert_int_equal(attn_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  /* 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even). */
  assert_int_equal(attn_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  assert_int_equal(attn_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  assert_true(attn_bf16_to_f32(attn_f32_to_bf16(-2.5f)) == -2.5f);
  assert_true(isnan(attn_bf16_to_f32(attn_f32_to_bf16(NAN))));
  assert_true(isinf(attn_bf16_to_f32(attn_f32_to_bf16(INFINITY))));
  const char *v = attn_cpu_variant();
  assert_true(!strcmp(v, "scalar") || !strcmp(v, "avx2") || !strcmp(v, "avx512"));
}

/* Multi-head latent attention's shapes (DeepSeek-V2, arXiv 2405.04434): q and k of one width,
 * v, o and dout of another (192 and 128 in DeepSeek-V3), forward and backward on every path,
 * causal and not, GQA, bf16, a decode split over keys, v wider than k, and with documents. */
static void test_head_dims(void **state) {
  (void)state;
  char label[120];
  for (int causal = 0; causal < 2; causal++) {
    attn_params p = mk(1, 2, 2, 70, 90, 192);
    p.dv = 128;
    p.scale = 1.0f / sqrtf(192.0f);
    p.mask.causal = causal;
    p.mask.q_pos0 = 20;
    snprintf(label, sizeof label, "d192 dv128 causal %d Nq70 Nk90", causal);
    run_fwd_bwd("head_dims", p, label, 1);
  }
  attn_params g = mk(2, 4, 1, 33, 47, 24); /* one latent kv head shared by every query head */
  g.dv = 16;
  g.mask.causal = 1;
  g.mask.q_pos0 = 14;
  run_fwd_bwd("head_dims", g, "d24 dv16 GQA 4:1 causal", 1);
  attn_params w = mk(1, 3, 3, 41, 29, 16); /* v wider than k */
  w.dv = 40;
  run_fwd_bwd("head_dims", w, "d16 dv40", 1);
  attn_params b = mk(1, 2, 1, 37, 65, 48);
  b.dv = 32;
  b.dtype = ATTN_BF16;
  b.mask.causal = 1;
  b.mask.q_pos0 = 28;
  run_fwd_bwd("head_dims", b, "d48 dv32 bf16 causal", 1);
  attn_params dec = mk(1, 2, 2, 1, 2000, 40); /* few rows, many keys: the key split and its merge */
  dec.dv = 24;
  dec.mask.causal = 1;
  dec.mask.q_pos0 = 1999;
  run_fwd_bwd("head_dims", dec, "d40 dv24 decode Nk2000", 0);
  static const int64_t ends[] = {30, 61};
  attn_params doc = mk(1, 2, 2, 80, 80, 24);
  doc.dv = 8;
  doc.mask.causal = 1;
  doc.mask.docs = 2;
  doc.mask.doc_end = ends;
  run_fwd_bwd("head_dims", doc, "d24 dv8 documents 30/61 causal", 1);
  attn_params bad = mk(1, 1, 1, 4, 4, 8);
  bad.dv = -1;
  assert_int_equal(attn_check(&bad), ATTN_EINVAL);
}

/* Arguments, if any, name the tests to run; a name no test has fails (tests/run_named.h). */
int main(int argc, char **argv) {
  const char *env = getenv("BURSTSIM_SEED");
  base_seed = env ? strtoull(env, NULL, 10) : (unsigned long long)time(NULL);
  printf("test_attn: seed %llu (replay with BURSTSIM_SEED=%llu)\n", base_seed, base_seed);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_bad_input),
    cmocka_unit_test(test_bf16_rounding),
    cmocka_unit_test(test_mask_runs),
    cmocka_unit_test(test_mask_ranges_and_pairs),
    cmocka_unit_test(test_full_mask),
    cmocka_unit_test(test_documents),
    cmocka_unit_test(test_head_dims),
    cmocka_unit_test(test_odd_sizes),
    cmocka_unit_test(test_decode_long_keys),
    cmocka_unit_test(test_causal_offsets),
    cmocka_unit_test(test_striped),
    cmocka_unit_test(test_window),
    cmocka_unit_test(test_gqa),
    cmocka_unit_test(test_bf16),
    cmocka_unit_test(test_threads),
    cmocka_unit_test(test_tiles),
    cmocka_unit_test(test_multi_tile),
    cmocka_unit_test(test_split_merge),
    cmocka_unit_test(test_fully_masked_rows),
    cmocka_unit_test(test_bwd_accumulates),
    cmocka_unit_test(test_finite_difference),
    cmocka_unit_test(test_deterministic),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
