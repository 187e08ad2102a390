/*
 * test_cuda_emulated.cpp — runs the CUDA kernels (the very source of
 * kernels/cuda/attn_cuda_{fwd,bwd}_mma.cu and attn_cuda_simple.cu) on the host
 * under the emulation of kernels/cuda/attn_cuda_emu.h and compares them with
 * a float64 reference: every tile variant, d = 64 and 128, bf16 and fp16,
 * full / causal with fully masked rows / striped sliding window, GQA, sizes
 * that are not multiples of any tile, the accumulate merge over two key
 * blocks, the D-variant backward adding into non-zero gradients; cp.async
 * copies both at issue and deferred to their wait; then the simple path
 * (forward, both backward passes, fp32 and bf16, d = 80), delta, merge, the
 * split-KV decode, and tree decode's rescale and finalize (elemwise_cuda.cu).
 * Outputs are NaN-poisoned.
 * This needs no GPU; it checks index arithmetic, not the hardware (see the
 * emulation header for what that does and does not prove).
 */
#define ATTN_CUDA_EMU 1
#include "kernels/cuda/attn_cuda_fwd_mma.cu"
#include "kernels/cuda/attn_cuda_bwd_mma.cu"
#include "kernels/cuda/attn_cuda_simple.cu"
#include "kernels/cuda/elemwise_cuda.cu"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace attn_cuda;

namespace {

struct shape {
  const char *name;
  int B, Zq, Zkv;
  int64_t Nq, Nk;
  int causal;
  int64_t window, q0, qs, k0, ks;
};

attn_params params_of(const shape &s, int d, attn_dtype dt) {
  attn_params p;
  memset(&p, 0, sizeof p);
  p.B = s.B;
  p.Zq = s.Zq;
  p.Zkv = s.Zkv;
  p.Nq = s.Nq;
  p.Nk = s.Nk;
  p.d = d;
  p.scale = 1.0f / sqrtf((float)d);
  p.mask.q_pos0 = s.q0;
  p.mask.q_stride = s.qs;
  p.mask.k_pos0 = s.k0;
  p.mask.k_stride = s.ks;
  p.mask.causal = s.causal;
  p.mask.window = s.window;
  p.dtype = dt;
  return p;
}

bool visible(const attn_params &p, int64_t i, int64_t j) {
  const int64_t qp = p.mask.q_pos0 + i * p.mask.q_stride, kp = p.mask.k_pos0 + j * p.mask.k_stride;
  if (p.mask.causal && kp > qp) return false;
  if (p.mask.window > 0) {
    const int64_t dist = p.mask.causal ? qp - kp : (qp > kp ? qp - kp : kp - qp);
    if (dist >= p.mask.window) return false;
  }
  return true;
}

struct ref_out {
  std::vector<double> o, lse, dq, dk, dv;
};

/* Forward and backward in float64 (dq, dk, dv start at the given values). */
void reference(const attn_params &p, const std::vector<float> &q, const std::vector<float> &k,
               const std::vector<float> &v, const std::vector<float> &g, ref_out &r) {
  const int d = p.d, grp = p.Zq / p.Zkv;
  r.o.assign(q.size(), 0.0);
  r.lse.assign((size_t)p.B * p.Zq * p.Nq, -INFINITY);
  std::vector<double> s(p.Nk);
  for (int b = 0; b < p.B; b++)
    for (int h = 0; h < p.Zq; h++) {
      const size_t kvo = ((size_t)b * p.Zkv + h / grp) * p.Nk * d;
      for (int64_t i = 0; i < p.Nq; i++) {
        const size_t row = ((size_t)b * p.Zq + h) * p.Nq + i;
        double mx = -INFINITY;
        for (int64_t j = 0; j < p.Nk; j++) {
          s[j] = -INFINITY;
          if (!visible(p, i, j)) continue;
          double acc = 0;
          for (int c = 0; c < d; c++) acc += (double)q[row * d + c] * k[kvo + j * d + c];
          s[j] = acc * p.scale;
          mx = std::max(mx, s[j]);
        }
        if (mx == -INFINITY) continue;
        double l = 0;
        for (int64_t j = 0; j < p.Nk; j++) {
          if (s[j] == -INFINITY) continue;
          const double pj = exp(s[j] - mx);
          l += pj;
          for (int c = 0; c < d; c++) r.o[row * d + c] += pj * v[kvo + j * d + c];
        }
        for (int c = 0; c < d; c++) r.o[row * d + c] /= l;
        r.lse[row] = mx + log(l);
        double D = 0;
        for (int c = 0; c < d; c++) D += (double)g[row * d + c] * r.o[row * d + c];
        for (int64_t j = 0; j < p.Nk; j++) {
          if (s[j] == -INFINITY) continue;
          const double pj = exp(s[j] - r.lse[row]);
          double dp = 0;
          for (int c = 0; c < d; c++) dp += (double)g[row * d + c] * v[kvo + j * d + c];
          const double ds = pj * (dp - D) * p.scale;
          for (int c = 0; c < d; c++) {
            r.dq[row * d + c] += ds * k[kvo + j * d + c];
            r.dk[kvo + j * d + c] += ds * q[row * d + c];
            r.dv[kvo + j * d + c] += pj * g[row * d + c];
          }
        }
      }
    }
}

double rel_err(const std::vector<float> &got, const std::vector<double> &ref, bool *bad) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); i++) {
    if (ref[i] == -INFINITY) {
      if (got[i] != -INFINITY) *bad = true;
      continue;
    }
    if (!std::isfinite(got[i])) {
      *bad = true;
      continue;
    }
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double normal(uint64_t *s) {
  *s = mix(*s);
  const double u1 = ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
  *s = mix(*s);
  const double u2 = (double)(*s >> 11) / 9007199254740992.0;
  return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

template <typename T>
void make(uint64_t *s, size_t n, std::vector<T> &raw, std::vector<float> &vals) {
  raw.resize(n);
  vals.resize(n);
  for (size_t i = 0; i < n; i++) {
    raw[i] = T((float)normal(s));
    vals[i] = (float)raw[i];
  }
}

template <typename T>
std::vector<T> slice_keys(const std::vector<T> &x, const attn_params &p, int64_t j0, int64_t n) {
  std::vector<T> out((size_t)p.B * p.Zkv * n * p.d);
  for (int bh = 0; bh < p.B * p.Zkv; bh++)
    memcpy(&out[(size_t)bh * n * p.d], &x[((size_t)bh * p.Nk + j0) * p.d], (size_t)n * p.d * sizeof(T));
  return out;
}

/* The by-value mask the kernels take (as attn_cuda_mask_of; kept here so the
 * test links none of the launchers). */
attn_mask mask_of(const attn_params &p) {
  attn_mask m;
  m.q_pos0 = p.mask.q_pos0;
  m.q_stride = p.mask.q_stride;
  m.k_pos0 = p.mask.k_pos0;
  m.k_stride = p.mask.k_stride;
  m.window = p.mask.window;
  m.causal = p.mask.causal ? 1 : 0;
  m.docs = 0;
  m.doc_end = nullptr;
  return m;
}

template <typename T, int D, int MT, int BN>
void run_fwd(const attn_params &p, const T *q, const T *k, const T *v, float *o, float *lse, int acc, int defer) {
  using C = fwd_cfg<T, D, MT, BN>;
  const attn_mask m = mask_of(p);
  const unsigned blocks = (unsigned)(((p.Nq + C::BM - 1) / C::BM) * p.B * p.Zq);
  emu_run_grid([&]() { fwd_mma_kernel<T, D, MT, BN>(p, m, q, k, v, o, lse, acc); }, blocks, C::NT, C::SMEM, defer);
}

template <typename T, int D, int BM, int NW>
void run_bwd(const attn_params &p, const T *q, const T *k, const T *v, const T *g, const float *lse, const float *delta,
             float *dq, float *dk, float *dv, int defer) {
  using C = bwd_cfg<T, D, BM, NW>;
  const attn_mask m = mask_of(p);
  const unsigned blocks = (unsigned)(((p.Nk + C::BN - 1) / C::BN) * p.B * p.Zkv);
  emu_run_grid([&]() { bwd_mma_kernel<T, D, BM, NW>(p, m, q, k, v, g, lse, delta, dq, dk, dv); }, blocks, C::NT,
               C::SMEM, defer);
}

struct tally {
  int pass = 0, fail = 0;
};

void report(tally &t, const char *what, double rel, bool bad, double bound) {
  const bool ok = !bad && rel <= bound;
  printf("    %-4s %-8s rel %.3e%s (bound %.1e)\n", ok ? "ok" : "FAIL", what, rel,
         bad ? " NONFINITE/-inf mismatch" : "", bound);
  if (ok) t.pass++;
  else t.fail++;
}

/* One (shape, dtype, tiles) check of forward, accumulate and backward. */
template <typename T, int D, int MT, int BN, int BBM, int BNW>
void check(tally &t, const shape &s, attn_dtype dt, uint64_t seed, int defer) {
  attn_params p = params_of(s, D, dt);
  printf("  %-18s d=%-3d %s fwd %dx%d bwd %dx%d cp.async %s\n", s.name, D, dt == ATTN_BF16 ? "bf16" : "fp16",
         16 * MT * 4, BN, BBM, 16 * BNW, defer ? "deferred" : "at issue");
  const size_t nq = (size_t)p.B * p.Zq * p.Nq * D, nk = (size_t)p.B * p.Zkv * p.Nk * D;
  const size_t rows = (size_t)p.B * p.Zq * p.Nq;
  uint64_t rs = seed;
  std::vector<T> q, k, v, g;
  std::vector<float> qf, kf, vf, gf;
  make(&rs, nq, q, qf);
  make(&rs, nk, k, kf);
  make(&rs, nk, v, vf);
  make(&rs, nq, g, gf);
  ref_out r;
  r.dq.resize(nq);
  r.dk.resize(nk);
  r.dv.resize(nk);
  std::vector<float> dq0(nq), dk0(nk), dv0(nk);
  for (size_t i = 0; i < nq; i++) r.dq[i] = dq0[i] = (float)normal(&rs);
  for (size_t i = 0; i < nk; i++) r.dk[i] = dk0[i] = (float)normal(&rs);
  for (size_t i = 0; i < nk; i++) r.dv[i] = dv0[i] = (float)normal(&rs);
  reference(p, qf, kf, vf, gf, r);
  const double bound = dt == ATTN_BF16 ? 1e-2 : 2.5e-3;
  bool bad = false;

  std::vector<float> o(nq, NAN), lse(rows, NAN);
  run_fwd<T, D, MT, BN>(p, q.data(), k.data(), v.data(), o.data(), lse.data(), 0, defer);
  report(t, "fwd O", rel_err(o, r.o, &bad), bad, bound);
  bad = false;
  report(t, "fwd lse", rel_err(lse, r.lse, &bad), bad, bound);

  /* Accumulate: keys split in two blocks. */
  const int64_t n1 = p.Nk / 3 + 1, n2 = p.Nk - n1;
  attn_params p1 = p, p2 = p;
  p1.Nk = n1;
  p2.Nk = n2;
  p2.mask.k_pos0 = p.mask.k_pos0 + n1 * p.mask.k_stride;
  std::vector<T> k1 = slice_keys(k, p, 0, n1), v1 = slice_keys(v, p, 0, n1);
  std::vector<T> k2 = slice_keys(k, p, n1, n2), v2 = slice_keys(v, p, n1, n2);
  std::fill(o.begin(), o.end(), NAN);
  std::fill(lse.begin(), lse.end(), NAN);
  run_fwd<T, D, MT, BN>(p1, q.data(), k1.data(), v1.data(), o.data(), lse.data(), 0, defer);
  run_fwd<T, D, MT, BN>(p2, q.data(), k2.data(), v2.data(), o.data(), lse.data(), 1, defer);
  bad = false;
  report(t, "acc O", rel_err(o, r.o, &bad), bad, bound);
  bad = false;
  report(t, "acc lse", rel_err(lse, r.lse, &bad), bad, bound);

  /* Backward, D variant, from the reference lse and delta. */
  std::vector<float> lsef(rows), delta(rows);
  for (size_t i = 0; i < rows; i++) {
    lsef[i] = (float)r.lse[i];
    double D_ = 0;
    for (int c = 0; c < D; c++) D_ += (double)gf[i * D + c] * r.o[i * D + c];
    delta[i] = (float)D_;
  }
  std::vector<float> dq = dq0, dk = dk0, dv = dv0;
  run_bwd<T, D, BBM, BNW>(p, q.data(), k.data(), v.data(), g.data(), lsef.data(), delta.data(), dq.data(), dk.data(),
                          dv.data(), defer);
  bad = false;
  report(t, "bwd dq", rel_err(dq, r.dq, &bad), bad, bound);
  bad = false;
  report(t, "bwd dk", rel_err(dk, r.dk, &bad), bad, bound);
  bad = false;
  report(t, "bwd dv", rel_err(dv, r.dv, &bad), bad, bound);
}

/* The simple path, delta, merge and decode on one shape and storage type. */
template <typename T>
void check_simple(tally &t, const shape &s, int d, attn_dtype dt, uint64_t seed) {
  attn_params p = params_of(s, d, dt);
  printf("  %-18s d=%-3d %s simple path, delta, merge, decode\n", s.name, d,
         dt == ATTN_BF16   ? "bf16"
         : dt == ATTN_FP32 ? "fp32"
                           : "fp16");
  const size_t nq = (size_t)p.B * p.Zq * p.Nq * d, nk = (size_t)p.B * p.Zkv * p.Nk * d;
  const size_t rows = (size_t)p.B * p.Zq * p.Nq;
  uint64_t rs = seed;
  std::vector<T> q, k, v, g;
  std::vector<float> qf, kf, vf, gf;
  make(&rs, nq, q, qf);
  make(&rs, nk, k, kf);
  make(&rs, nk, v, vf);
  make(&rs, nq, g, gf);
  ref_out r;
  r.dq.assign(nq, 0.0);
  r.dk.assign(nk, 0.0);
  r.dv.assign(nk, 0.0);
  std::vector<float> dq0(nq), dk0(nk), dv0(nk);
  for (size_t i = 0; i < nq; i++) r.dq[i] = dq0[i] = (float)normal(&rs);
  for (size_t i = 0; i < nk; i++) r.dk[i] = dk0[i] = (float)normal(&rs);
  for (size_t i = 0; i < nk; i++) r.dv[i] = dv0[i] = (float)normal(&rs);
  reference(p, qf, kf, vf, gf, r);
  const double bound = dt == ATTN_FP32 ? 1e-5 : dt == ATTN_BF16 ? 1e-2 : 2.5e-3;
  const attn_mask m = mask_of(p);
  const unsigned qblocks = (unsigned)((rows + SIMPLE_WARPS - 1) / SIMPLE_WARPS);
  const unsigned kblocks = (unsigned)(((size_t)p.B * p.Zkv * p.Nk + SIMPLE_WARPS - 1) / SIMPLE_WARPS);
  bool bad = false;

  /* Forward over two key blocks (the second accumulated). */
  const int64_t n1 = p.Nk / 3 + 1, n2 = p.Nk - n1;
  attn_params p1 = p, p2 = p;
  p1.Nk = n1;
  p2.Nk = n2;
  p2.mask.k_pos0 = p.mask.k_pos0 + n1 * p.mask.k_stride;
  std::vector<T> k1 = slice_keys(k, p, 0, n1), v1 = slice_keys(v, p, 0, n1);
  std::vector<T> k2 = slice_keys(k, p, n1, n2), v2 = slice_keys(v, p, n1, n2);
  std::vector<float> o(nq, NAN), lse(rows, NAN);
  const attn_mask m1 = mask_of(p1), m2 = mask_of(p2);
  emu_run_grid([&]() { fwd_simple_kernel<T>(p1, m1, q.data(), k1.data(), v1.data(), o.data(), lse.data(), 0); },
               qblocks, SIMPLE_WARPS * 32, 0, 0);
  emu_run_grid([&]() { fwd_simple_kernel<T>(p2, m2, q.data(), k2.data(), v2.data(), o.data(), lse.data(), 1); },
               qblocks, SIMPLE_WARPS * 32, 0, 0);
  report(t, "smp O", rel_err(o, r.o, &bad), bad, bound);
  bad = false;
  report(t, "smp lse", rel_err(lse, r.lse, &bad), bad, bound);

  /* delta from the reference O (as fp32), then the two backward passes. */
  std::vector<float> of(nq), lsef(rows), delta(rows, NAN);
  for (size_t i = 0; i < nq; i++) of[i] = (float)r.o[i];
  for (size_t i = 0; i < rows; i++) lsef[i] = (float)r.lse[i];
  emu_run_grid([&]() { delta_kernel<T>((int64_t)rows, d, of.data(), g.data(), delta.data()); }, qblocks,
               SIMPLE_WARPS * 32, 0, 0);
  std::vector<double> dref(rows);
  for (size_t i = 0; i < rows; i++) {
    double D_ = 0;
    for (int c = 0; c < d; c++) D_ += (double)gf[i * d + c] * of[i * d + c];
    dref[i] = D_;
  }
  bad = false;
  report(t, "delta", rel_err(delta, dref, &bad), bad, 1e-5);
  std::vector<float> dq = dq0, dk = dk0, dv = dv0;
  emu_run_grid(
    [&]() {
      bwd_dq_simple_kernel<T>(p, m, q.data(), k.data(), v.data(), g.data(), lsef.data(), delta.data(), dq.data());
    },
    qblocks, SIMPLE_WARPS * 32, 0, 0);
  emu_run_grid(
    [&]() {
      bwd_dkdv_simple_kernel<T>(p, m, q.data(), k.data(), v.data(), g.data(), lsef.data(), delta.data(), dk.data(),
                                dv.data());
    },
    kblocks, SIMPLE_WARPS * 32, 0, 0);
  bad = false;
  report(t, "smp dq", rel_err(dq, r.dq, &bad), bad, bound);
  bad = false;
  report(t, "smp dk", rel_err(dk, r.dk, &bad), bad, bound);
  bad = false;
  report(t, "smp dv", rel_err(dv, r.dv, &bad), bad, bound);

  /* Merge: (O, lse) of the first key block merged with that of the second. */
  {
    std::vector<float> oa(nq, NAN), la(rows, NAN), ob(nq, NAN), lb(rows, NAN);
    emu_run_grid([&]() { fwd_simple_kernel<T>(p1, m1, q.data(), k1.data(), v1.data(), oa.data(), la.data(), 0); },
                 qblocks, SIMPLE_WARPS * 32, 0, 0);
    emu_run_grid([&]() { fwd_simple_kernel<T>(p2, m2, q.data(), k2.data(), v2.data(), ob.data(), lb.data(), 0); },
                 qblocks, SIMPLE_WARPS * 32, 0, 0);
    emu_run_grid([&]() { merge_kernel((int64_t)rows, d, oa.data(), la.data(), ob.data(), lb.data()); }, qblocks,
                 SIMPLE_WARPS * 32, 0, 0);
    bad = false;
    report(t, "merge O", rel_err(oa, r.o, &bad), bad, bound);
    bad = false;
    report(t, "mergelse", rel_err(la, r.lse, &bad), bad, bound);
  }

  /* Decode: the last 3 query rows, keys split over 5 blocks, two key blocks. */
  {
    attn_params pd = p;
    const int64_t i0 = p.Nq - 3;
    pd.Nq = 3;
    pd.mask.q_pos0 = p.mask.q_pos0 + i0 * p.mask.q_stride;
    const size_t dn = (size_t)pd.B * pd.Zq * 3 * d, drows = (size_t)pd.B * pd.Zq * 3;
    std::vector<T> qd(dn);
    std::vector<float> qdf(dn);
    for (int bh = 0; bh < pd.B * pd.Zq; bh++)
      for (size_t x = 0; x < (size_t)3 * d; x++) {
        qd[(size_t)bh * 3 * d + x] = q[((size_t)bh * p.Nq + i0) * d + x];
        qdf[(size_t)bh * 3 * d + x] = qf[((size_t)bh * p.Nq + i0) * d + x];
      }
    ref_out rd;
    rd.dq.assign(dn, 0.0);
    rd.dk.assign(nk, 0.0);
    rd.dv.assign(nk, 0.0);
    std::vector<float> gd(dn, 0.0f);
    reference(pd, qdf, kf, vf, gd, rd);
    attn_params pd1 = pd, pd2 = pd;
    pd1.Nk = n1;
    pd2.Nk = n2;
    pd2.mask.k_pos0 = pd.mask.k_pos0 + n1 * pd.mask.k_stride;
    const int splits = 5;
    std::vector<float> part_o(drows * splits * d), part_l(drows * splits), od(dn, NAN), ld(drows, NAN);
    const attn_mask md1 = mask_of(pd1), md2 = mask_of(pd2);
    const unsigned dblocks = (unsigned)(pd.B * pd.Zq * splits), rblocks = (unsigned)((drows + 3) / 4);
    for (int half = 0; half < 2; half++) {
      const attn_params &ph = half ? pd2 : pd1;
      const attn_mask &mh = half ? md2 : md1;
      const T *kh = half ? k2.data() : k1.data();
      const T *vh = half ? v2.data() : v1.data();
      std::fill(part_o.begin(), part_o.end(), NAN);
      std::fill(part_l.begin(), part_l.end(), NAN);
      emu_run_grid([&]() { decode_partial_kernel<T>(ph, mh, splits, qd.data(), kh, vh, part_o.data(), part_l.data()); },
                   dblocks, DECODE_WARPS * 32, sizeof(decode_smem), 0);
      emu_run_grid(
        [&]() {
          decode_reduce_kernel((int64_t)drows, d, splits, part_o.data(), part_l.data(), od.data(), ld.data(), half);
        },
        rblocks, SIMPLE_WARPS * 32, 0, 0);
    }
    bad = false;
    report(t, "dec O", rel_err(od, rd.o, &bad), bad, bound);
    bad = false;
    report(t, "dec lse", rel_err(ld, rd.lse, &bad), bad, bound);
  }
}
} // namespace

/* elemwise_cuda.cu: tree decode's two passes, num = o w, den = w, w = exp(lse - m) (0 for lse = -inf), then o = num / den,
 * lse = m + log den, against float64 over rows with lse = -inf and den = 0 among them; scale and add. */
void check_tree(tally &t, uint64_t seed) {
  printf("  elementwise: tree decode rescale and finalize, scale, add; 37 rows x d=80\n");
  const int64_t rows = 37, d = 80, n = rows * d;
  uint64_t rs = seed;
  std::vector<float> o(n), lse(rows), m(rows), num(n, NAN), den(rows, NAN), o2(n, NAN), lse2(rows, NAN);
  std::vector<double> rnum(n), rden(rows), ro(n), rlse(rows);
  for (int64_t i = 0; i < n; i++) o[i] = (float)normal(&rs);
  for (int64_t r = 0; r < rows; r++) {
    lse[r] = r % 7 == 3 ? -INFINITY : (float)(4 * normal(&rs));
    m[r] = (lse[r] == -INFINITY ? 0.0f : lse[r]) + (float)fabs(normal(&rs));
    rden[r] = lse[r] == -INFINITY ? 0.0 : exp((double)lse[r] - m[r]);
    for (int64_t x = 0; x < d; x++) rnum[r * d + x] = o[r * d + x] * rden[r];
  }
  const unsigned blocks = 3, threads = 64; /* fewer threads than elements: the grid-stride loop */
  emu_run_grid([&]() { tree_rescale_kernel(rows, d, o.data(), lse.data(), m.data(), num.data(), den.data()); }, blocks,
               threads, 0, 0);
  bool bad = false;
  report(t, "rescale num", rel_err(num, rnum, &bad), bad, 1e-6);
  bad = false;
  report(t, "rescale den", rel_err(den, rden, &bad), bad, 1e-6);
  for (int64_t r = 0; r < rows; r++) {
    rlse[r] = rden[r] > 0 ? m[r] + log((double)den[r]) : -INFINITY;
    for (int64_t x = 0; x < d; x++) ro[r * d + x] = rden[r] > 0 ? (double)num[r * d + x] / den[r] : 0.0;
  }
  emu_run_grid([&]() { tree_finalize_kernel(rows, d, num.data(), den.data(), m.data(), o2.data(), lse2.data()); },
               blocks, threads, 0, 0);
  bad = false;
  report(t, "final O", rel_err(o2, ro, &bad), bad, 1e-6);
  bad = false;
  report(t, "finallse", rel_err(lse2, rlse, &bad), bad, 1e-6);
  /* the generic pass (x *= alpha) and add (dst += src) over the same grid */
  std::vector<float> x(o), y(num);
  std::vector<double> rx(n), ry(n);
  for (int64_t i = 0; i < n; i++) {
    rx[i] = (double)o[i] * 0.75f;
    ry[i] = (double)num[i] + rx[i];
  }
  emu_run_grid([&]() { scale_kernel(x.data(), n, 0.75f); }, blocks, threads, 0, 0);
  emu_run_grid([&]() { add_kernel(y.data(), x.data(), n); }, blocks, threads, 0, 0);
  bad = false;
  report(t, "scale", rel_err(x, rx, &bad), bad, 1e-7);
  bad = false;
  report(t, "add", rel_err(y, ry, &bad), bad, 1e-6);
}

int main(int argc, char **argv) {
  const bool quick = argc > 1 && !strcmp(argv[1], "--quick");
  const uint64_t seed = argc > 2 ? strtoull(argv[2], nullptr, 0) : (uint64_t)time(nullptr);
  printf("test_cuda_emulated: seed %llu (rerun: test_cuda_emulated %s %llu)\n", (unsigned long long)seed,
         quick ? "--quick" : "--full", (unsigned long long)seed);
  const shape full = {"full_gqa", 1, 2, 1, 70, 90, 0, 0, 0, 1, 0, 1};
  const shape causal = {"causal_masked_rows", 1, 2, 2, 77, 100, 1, 0, 0, 1, 20, 1};
  const shape window = {"window_striped", 1, 2, 1, 45, 70, 1, 23, 5, 3, 0, 2};
  const shape bidir = {"window_bidir", 1, 1, 1, 66, 66, 0, 17, 0, 1, 9, 1};
  tally t;
  auto t0 = std::chrono::steady_clock::now();
  /* --quick (ctest): every forward tile (64x32, 128x32, 128x64, 64x64) and every
   * backward tile (32x64, 64x64, 64x128, 32x128) once, both d, both storage
   * types, both cp.async orders. --full adds four more combinations. */
  check<__nv_bfloat16, 64, 1, 32, 32, 4>(t, causal, ATTN_BF16, seed + 1, 1);
  check<__half, 64, 2, 32, 64, 4>(t, full, ATTN_CUDA_FP16, seed + 6, 1);
  check<__nv_bfloat16, 64, 2, 64, 64, 8>(t, window, ATTN_BF16, seed + 4, 0);
  check<__nv_bfloat16, 128, 1, 64, 32, 8>(t, causal, ATTN_BF16, seed + 5, 1);
  if (!quick) {
    check<__nv_bfloat16, 128, 2, 32, 32, 4>(t, full, ATTN_BF16, seed + 2, 0);
    check<__half, 128, 1, 64, 64, 4>(t, window, ATTN_CUDA_FP16, seed + 3, 1);
    check<__nv_bfloat16, 128, 2, 64, 64, 8>(t, bidir, ATTN_BF16, seed + 7, 1);
    check<__half, 128, 2, 64, 32, 4>(t, causal, ATTN_CUDA_FP16, seed + 8, 0);
  }
  check_simple<float>(t, causal, 64, ATTN_FP32, seed + 9);
  check_simple<__nv_bfloat16>(t, window, 80, ATTN_BF16, seed + 10);
  if (!quick) {
    check_simple<__half>(t, full, 128, ATTN_CUDA_FP16, seed + 11);
    check_simple<float>(t, bidir, 96, ATTN_FP32, seed + 12);
  }
  check_tree(t, seed + 13);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("test_cuda_emulated: %d passed, %d failed (%.1f s, seed %llu)\n", t.pass, t.fail, secs,
         (unsigned long long)seed);
  return t.fail ? 1 : 0;
}
