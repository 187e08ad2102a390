/*
 * attn_vmath.c — row-wise softmax pieces for the unfused baseline: in-place
 * exp2 of a row and a full base-2 softmax of a row returning its lse. An
 * AVX2+FMA version is chosen at run time when the CPU has it; the scalar one
 * is the fallback (and the statement of what is computed).
 */
#include <math.h>
#include "kernels/cpu/attn_internal.h"

static float softmax_row_scalar(float *row, int64_t n) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n; j++) m = row[j] > m ? row[j] : m;
  if (m == -INFINITY) {
    memset(row, 0, (size_t)n * sizeof(float));
    return -INFINITY;
  }
  float s = 0.0f;
  for (int64_t j = 0; j < n; j++) {
    row[j] = exp2f(row[j] - m);
    s += row[j];
  }
  float inv = 1.0f / s;
  for (int64_t j = 0; j < n; j++) row[j] *= inv;
  return (m + log2f(s)) * ATTN_LN2;
}

static void exp2_row_scalar(float *row, int64_t n) {
  for (int64_t j = 0; j < n; j++) row[j] = exp2f(row[j]);
}

#if defined(__x86_64__)
#include <immintrin.h> /* before the target region: clang gives its intrinsics their own targets */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#include "kernels/cpu/attn_avx2_math.h"

static float softmax_row_avx2(float *row, int64_t n) {
  __m256 vm = _mm256_set1_ps(-INFINITY);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(row + j));
  float m = attn_hmax_ps(vm);
  for (; j < n; j++) m = row[j] > m ? row[j] : m;
  if (m == -INFINITY) {
    memset(row, 0, (size_t)n * sizeof(float));
    return -INFINITY;
  }
  __m256 bm = _mm256_set1_ps(m), vs = _mm256_setzero_ps();
  for (j = 0; j + 8 <= n; j += 8) {
    __m256 e = attn_exp2_ps(_mm256_sub_ps(_mm256_loadu_ps(row + j), bm));
    _mm256_storeu_ps(row + j, e);
    vs = _mm256_add_ps(vs, e);
  }
  float s = attn_hsum_ps(vs);
  for (; j < n; j++) {
    row[j] = exp2f(row[j] - m);
    s += row[j];
  }
  __m256 inv = _mm256_set1_ps(1.0f / s);
  for (j = 0; j + 8 <= n; j += 8) _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), inv));
  for (; j < n; j++) row[j] *= 1.0f / s;
  return (m + log2f(s)) * ATTN_LN2;
}

static void exp2_row_avx2(float *row, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(row + j, attn_exp2_ps(_mm256_loadu_ps(row + j)));
  for (; j < n; j++) row[j] = exp2f(row[j]);
}
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

static int have_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

float attn_softmax_row_exp2(float *row, int64_t n) {
#if defined(__x86_64__)
  if (have_avx2()) return softmax_row_avx2(row, n);
#endif
  return softmax_row_scalar(row, n);
}

void attn_exp2_row(float *row, int64_t n) {
#if defined(__x86_64__)
  if (have_avx2()) {
    exp2_row_avx2(row, n);
    return;
  }
#endif
  exp2_row_scalar(row, n);
}
