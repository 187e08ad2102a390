/*
 * fill.c — see fill.h.
 */
#include "fill.h"

uint64_t bs_splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t bs_mix64(uint64_t x) { return bs_splitmix64(&x); }

void bs_fill_stream(float *x, size_t n, uint64_t *state) {
  for (size_t i = 0; i < n; i++) x[i] = (float)bs_unit_signed(bs_splitmix64(state));
}

void bs_fill_counter(float *x, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) x[i] = bs_fill_at(seed, i);
}
