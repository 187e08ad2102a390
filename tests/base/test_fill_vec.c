/*
 * test_fill_vec.c — the ground floor's seeded fills (base/fill.h) and growable
 * array (base/vec.h). The fills are the inputs of real runs, calibration and
 * kernel tests, so their sequences are pinned: SplitMix64's published first
 * outputs for state 0, the stream and the counter fill against their element
 * formulas, and the range [-1, 1). The array's capacity doubles from its first
 * size and a failed growth leaves the array as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "base/fill.h"
#include "base/vec.h"

static void test_splitmix64_reference(void **state) {
  (void)state;
  /* The reference implementation's first three outputs from state 0. */
  uint64_t s = 0;
  assert_true(bs_splitmix64(&s) == 0xe220a8397b1dcdafull);
  assert_true(bs_splitmix64(&s) == 0x6e789e6aa1b965f4ull);
  assert_true(bs_splitmix64(&s) == 0x06c45d188009454full);
  assert_true(s == 3 * 0x9e3779b97f4a7c15ull);
  assert_true(bs_mix64(0) == 0xe220a8397b1dcdafull);
}

static void test_unit_signed_range(void **state) {
  (void)state;
  assert_true(bs_unit_signed(0) == -1.0);
  assert_true(bs_unit_signed(UINT64_MAX) < 1.0);
  assert_true(bs_unit_signed((uint64_t)1 << 63) == 0.0);
}

static void test_fill_stream_and_counter(void **state) {
  (void)state;
  enum { N = 1000 };
  static float x[N];
  uint64_t s = 42, t = 42;
  bs_fill_stream(x, N, &s);
  for (int i = 0; i < N; i++) {
    assert_true(x[i] == (float)bs_unit_signed(bs_splitmix64(&t)));
    assert_true(x[i] >= -1.0f && x[i] <= 1.0f);
  }
  assert_true(s == t);
  bs_fill_counter(x, N, 7);
  for (int i = 0; i < N; i++) assert_true(x[i] == bs_fill_at(7, (uint64_t)i));
  /* Element i is a function of seed + i: the fill of seed 8 is that of seed 7 shifted by one. */
  for (int i = 1; i < N; i++) assert_true(bs_fill_at(8, (uint64_t)i - 1) == x[i]);
}

static void test_vec_doubles(void **state) {
  (void)state;
  int *v = NULL;
  size_t cap = 0;
  for (size_t n = 0; n < 1000; n++) {
    int *w = bs_vec_grow(v, sizeof *w, n + 1, &cap, 16);
    assert_non_null(w);
    v = w;
    v[n] = (int)n;
    assert_true(cap >= n + 1);
    assert_true(cap == 16 || (cap / 2 < n + 1 && cap % 16 == 0));
  }
  for (int i = 0; i < 1000; i++) assert_int_equal(v[i], i);
  assert_true(cap == 1024);
  /* Enough room: the same array, the same capacity. */
  assert_ptr_equal(bs_vec_grow(v, sizeof *v, 1000, &cap, 16), v);
  assert_true(cap == 1024);
  /* Several doublings at once, as a byte buffer asks for a run. */
  char *b = NULL;
  size_t bc = 0;
  b = bs_vec_grow(b, 1, 100000, &bc, 1 << 16);
  assert_non_null(b);
  assert_true(bc == (size_t)1 << 17);
  free(b);
  /* Too large: NULL, and the array and its capacity untouched. */
  assert_null(bs_vec_grow(v, sizeof *v, SIZE_MAX / 2, &cap, 16));
  assert_true(cap == 1024);
  assert_int_equal(v[999], 999);
  free(v);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_splitmix64_reference),
    cmocka_unit_test(test_unit_signed_range),
    cmocka_unit_test(test_fill_stream_and_counter),
    cmocka_unit_test(test_vec_doubles),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
