/*
 * fill.h — seeded pseudo-random numbers for inputs that must be the same on
 * every run with the same seed: the runtime's input tensors, the calibration's
 * operands and the tests' cases. Two generators, both from SplitMix64 (Steele,
 * Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA
 * 2014): a stream (a state advanced by the golden gamma, then mixed) and a
 * counter hash (element i a function of seed + i alone, so any order or
 * thread fills the same values).
 */
#ifndef BURSTSIM_BASE_FILL_H
#define BURSTSIM_BASE_FILL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The next number of the SplitMix64 stream at *state (the state advances). */
uint64_t bs_splitmix64(uint64_t *state);

/* SplitMix64's output for the state x, without a stream: a 64-bit hash of x. */
uint64_t bs_mix64(uint64_t x);

/* The top 53 bits of r as a uniform double in [-1, 1). */
static inline double bs_unit_signed(uint64_t r) { return (double)(r >> 11) * (2.0 / 9007199254740992.0) - 1.0; }

/* x[0..n) uniform in [-1, 1) from the SplitMix64 stream at *state. */
void bs_fill_stream(float *x, size_t n, uint64_t *state);

/* Element i of the counter fill of seed: uniform in [-1, 1), a hash of seed + i. */
static inline float bs_fill_at(uint64_t seed, uint64_t i) {
  uint64_t z = (seed + i) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
  z ^= z >> 29;
  return (float)bs_unit_signed(z);
}

/* x[i] = bs_fill_at(seed, i) for i in [0, n). */
void bs_fill_counter(float *x, size_t n, uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif
