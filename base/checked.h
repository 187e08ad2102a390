/*
 * checked.h — the one helper for products of counts (tokens, heads, bytes)
 * that must not wrap: a product of int64 factors, each non-negative, with
 * every step checked (__builtin_mul_overflow). The README promises that
 * counts never wrap; plans and scenarios check their largest products here
 * before any plan forms them unchecked.
 */
#ifndef BURSTSIM_BASE_CHECKED_H
#define BURSTSIM_BASE_CHECKED_H

#include <stdint.h>

/* *out = f[0] x ... x f[n-1]. 0, or -1 when a factor is negative or the product passes limit
 * (*out is then INT64_MAX). */
static inline int bs_mul_checked(const int64_t *f, int n, int64_t limit, int64_t *out) {
  int64_t p = 1;
  for (int i = 0; i < n; i++)
    if (f[i] < 0 || __builtin_mul_overflow(p, f[i], &p) || p > limit) {
      *out = INT64_MAX;
      return -1;
    }
  *out = p;
  return 0;
}

#endif
