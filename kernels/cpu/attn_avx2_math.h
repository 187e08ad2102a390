/*
 * attn_avx2_math.h — AVX2+FMA helpers for the CPU attention files: a vector
 * exp2 (no scalar expf in any inner loop) and horizontal reductions. Include it
 * only inside an avx2,fma target region (GCC's pragma or clang's attribute push).
 */
#ifndef BURSTSIM_ATTN_AVX2_MATH_H
#define BURSTSIM_ATTN_AVX2_MATH_H

#include <immintrin.h>

/*
 * 2^x for x <= 127. Round to the nearest integer n, f = x - n in [-1/2, 1/2],
 * 2^f by its degree-6 Taylor polynomial (relative error < 1.3e-7), times 2^n
 * built in the exponent bits. x <= -127 (including -inf) gives exactly 0.
 */
static inline __m256 attn_exp2_ps(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 f = _mm256_sub_ps(x, n);
  __m256 r = _mm256_set1_ps(1.5403530393381606e-4f);
  r = _mm256_fmadd_ps(r, f, _mm256_set1_ps(1.3333558146428443e-3f));
  r = _mm256_fmadd_ps(r, f, _mm256_set1_ps(9.6181291076284772e-3f));
  r = _mm256_fmadd_ps(r, f, _mm256_set1_ps(5.5504108664821580e-2f));
  r = _mm256_fmadd_ps(r, f, _mm256_set1_ps(2.4022650695910071e-1f));
  r = _mm256_fmadd_ps(r, f, _mm256_set1_ps(6.9314718055994531e-1f));
  r = _mm256_fmadd_ps(r, f, _mm256_set1_ps(1.0f));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(r, _mm256_castsi256_ps(e));
}

static inline float attn_hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

static inline float attn_hmax_ps(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

#endif
