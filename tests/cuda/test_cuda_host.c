/*
 * test_cuda_host.c — what of the CUDA backend can be tested without a GPU:
 * parameter validation, the choice of path and the launch geometry, the mask
 * ranges the kernels loop over (against brute force on random masks), and
 * every error path that must return a code (never crash) when the device is
 * missing or the input is bad. Random cases print their seed on failure.
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
#include "kernels/cuda/attn_cuda.h"
#include "kernels/cuda/attn_cuda_internal.h"

static attn_params base_params(attn_dtype dt, int d) {
  attn_params p;
  memset(&p, 0, sizeof p);
  p.B = 2;
  p.Zq = 8;
  p.Zkv = 2;
  p.Nq = 1000;
  p.Nk = 1500;
  p.d = d;
  p.scale = 1.0f / sqrtf((float)d);
  p.mask.q_stride = p.mask.k_stride = 1;
  p.dtype = dt;
  return p;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void test_check_accepts_and_rejects(void **state) {
  (void)state;
  char msg[160];
  attn_params p = base_params(ATTN_BF16, 128);
  assert_int_equal(attn_cuda_check_msg(&p, msg, sizeof msg), ATTN_OK);
  assert_string_equal(msg, "ok");
  p.dtype = ATTN_CUDA_FP16;
  assert_int_equal(attn_cuda_check_msg(&p, msg, sizeof msg), ATTN_OK);
  p.dtype = ATTN_FP32;
  assert_int_equal(attn_cuda_check_msg(&p, msg, sizeof msg), ATTN_OK);

  assert_int_equal(attn_cuda_check_msg(NULL, msg, sizeof msg), ATTN_ENULL);
  attn_params q = p;
  q.B = 0;
  assert_int_equal(attn_cuda_check_msg(&q, msg, sizeof msg), ATTN_EINVAL);
  assert_non_null(strstr(msg, "positive"));
  q = p;
  q.Zkv = 3;
  assert_int_equal(attn_cuda_check_msg(&q, msg, sizeof msg), ATTN_EINVAL);
  assert_non_null(strstr(msg, "GQA"));
  q = p;
  q.d = ATTN_CUDA_MAX_D + 1;
  assert_int_equal(attn_cuda_check_msg(&q, msg, sizeof msg), ATTN_EINVAL);
  q = p;
  q.Nk = -5;
  assert_int_equal(attn_cuda_check_msg(&q, msg, sizeof msg), ATTN_EINVAL);
  q = p;
  q.mask.k_stride = 0;
  assert_int_equal(attn_cuda_check_msg(&q, msg, sizeof msg), ATTN_EINVAL);
  q = p;
  q.mask.window = -1;
  assert_int_equal(attn_cuda_check_msg(&q, msg, sizeof msg), ATTN_EINVAL);
  q = p;
  q.mask.window = INT64_MAX;
  assert_int_equal(attn_cuda_check_msg(&q, msg, sizeof msg), ATTN_EINVAL);
  q = p;
  q.mask.q_pos0 = INT64_MIN + 1;
  assert_int_equal(attn_cuda_check_msg(&q, msg, sizeof msg), ATTN_EINVAL);
  q = p;
  q.scale = NAN;
  assert_int_equal(attn_cuda_check_msg(&q, msg, sizeof msg), ATTN_EINVAL);
  q = p;
  q.dtype = (attn_dtype)7;
  assert_int_equal(attn_cuda_check_msg(&q, msg, sizeof msg), ATTN_EDTYPE);
  q = p;
  q.tile_q = -1;
  assert_int_equal(attn_cuda_check_msg(&q, msg, sizeof msg), ATTN_EINVAL);
}

static void test_plan_forward_mma_geometry(void **state) {
  (void)state;
  char msg[160];
  attn_cuda_launch L;
  for (int d = 64; d <= 128; d += 64) {
    attn_params p = base_params(ATTN_BF16, d);
    assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_AUTO, 0, 1, &L, msg, sizeof msg), ATTN_OK);
    assert_int_equal(L.path, ATTN_CUDA_MMA);
    assert_true(L.tile_q == 64 || L.tile_q == 128);
    assert_true(L.tile_k == 32 || L.tile_k == 64);
    assert_int_equal(L.warps, 4);
    /* One block per (batch, query head, query tile); Q + 2 stages of K and V. */
    assert_int_equal(L.blocks, cdiv(p.Nq, L.tile_q) * p.B * p.Zq);
    assert_int_equal(L.smem_bytes, (size_t)(L.tile_q + 4 * L.tile_k) * (size_t)(d + 8) * 2);
    assert_true(L.smem_bytes <= 227 * 1024); /* the sm_90 per-block opt-in limit */
    /* Every explicit tile pair is accepted and honoured. */
    const int tq[2] = {64, 128}, tk[2] = {32, 64};
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 2; b++) {
        p.tile_q = tq[a];
        p.tile_k = tk[b];
        assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_MMA, 0, 1, &L, msg, sizeof msg), ATTN_OK);
        assert_int_equal(L.tile_q, tq[a]);
        assert_int_equal(L.tile_k, tk[b]);
        assert_int_equal(L.blocks, cdiv(p.Nq, tq[a]) * p.B * p.Zq);
      }
    p.tile_q = 96;
    assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_MMA, 0, 1, &L, msg, sizeof msg), ATTN_EINVAL);
    assert_non_null(strstr(msg, "tile_q"));
    p.tile_q = 64;
    p.tile_k = 128;
    assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_MMA, 0, 1, &L, msg, sizeof msg), ATTN_EINVAL);
    assert_non_null(strstr(msg, "tile_k"));
  }
}

static void test_plan_backward_mma_geometry(void **state) {
  (void)state;
  char msg[160];
  attn_cuda_launch L;
  for (int d = 64; d <= 128; d += 64) {
    attn_params p = base_params(ATTN_CUDA_FP16, d);
    assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_AUTO, 1, 1, &L, msg, sizeof msg), ATTN_OK);
    assert_int_equal(L.path, ATTN_CUDA_MMA);
    /* One block per (batch, kv head, key tile), one warp per 16 keys. */
    assert_int_equal(L.blocks, cdiv(p.Nk, L.tile_k) * p.B * p.Zkv);
    assert_int_equal(L.warps * 16, L.tile_k);
    const size_t row = (size_t)(d + 8) * 2;
    assert_int_equal(L.smem_bytes, (size_t)(2 * L.tile_k + 4 * L.tile_q) * row + (size_t)4 * L.tile_q * 4 +
                                     (size_t)L.tile_k * (size_t)(L.tile_q + 8) * 2);
    assert_true(L.smem_bytes <= 227 * 1024);
    const int tq[2] = {32, 64}, tk[2] = {64, 128};
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 2; b++) {
        p.tile_q = tq[a];
        p.tile_k = tk[b];
        assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_MMA, 1, 1, &L, msg, sizeof msg), ATTN_OK);
        assert_int_equal(L.tile_q, tq[a]);
        assert_int_equal(L.tile_k, tk[b]);
        assert_true(L.smem_bytes <= 227 * 1024);
      }
    p.tile_q = 128;
    assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_MMA, 1, 1, &L, msg, sizeof msg), ATTN_EINVAL);
  }
}

static void test_plan_path_choice(void **state) {
  (void)state;
  char msg[160];
  attn_cuda_launch L;
  attn_params p = base_params(ATTN_FP32, 128);
  assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_AUTO, 0, 1, &L, msg, sizeof msg), ATTN_OK);
  assert_int_equal(L.path, ATTN_CUDA_SIMPLE);
  assert_int_equal(L.blocks, cdiv((int64_t)p.B * p.Zq * p.Nq, L.warps));
  assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_MMA, 0, 1, &L, msg, sizeof msg), ATTN_EINVAL);
  assert_non_null(strstr(msg, "bf16 or fp16"));
  /* The simple backward covers both of its passes (query rows, key rows). */
  p.Nk = 100000;
  assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_SIMPLE, 1, 1, &L, msg, sizeof msg), ATTN_OK);
  assert_int_equal(L.blocks, cdiv((int64_t)p.B * p.Zkv * p.Nk, L.warps));

  p = base_params(ATTN_BF16, 80); /* a head dimension the MMA kernels are not built for */
  assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_AUTO, 0, 1, &L, msg, sizeof msg), ATTN_OK);
  assert_int_equal(L.path, ATTN_CUDA_SIMPLE);
  assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_MMA, 1, 1, &L, msg, sizeof msg), ATTN_EINVAL);

  p = base_params(ATTN_BF16, 64); /* misaligned views fall back */
  assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_AUTO, 0, 0, &L, msg, sizeof msg), ATTN_OK);
  assert_int_equal(L.path, ATTN_CUDA_SIMPLE);
  assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_MMA, 0, 0, &L, msg, sizeof msg), ATTN_EINVAL);
  assert_non_null(strstr(msg, "aligned"));
  assert_int_equal(attn_cuda_plan(&p, (attn_cuda_path)9, 0, 1, &L, msg, sizeof msg), ATTN_EINVAL);
  assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_AUTO, 0, 1, NULL, msg, sizeof msg), ATTN_ENULL);

  /* A grid beyond 2^31 - 1 blocks is refused, not truncated. */
  p = base_params(ATTN_FP32, 64);
  p.B = 64;
  p.Zq = p.Zkv = 64;
  p.Nq = (int64_t)1 << 22;
  assert_int_equal(attn_cuda_plan(&p, ATTN_CUDA_SIMPLE, 0, 1, &L, msg, sizeof msg), ATTN_EINVAL);
  assert_non_null(strstr(msg, "grid"));

  assert_string_equal(attn_cuda_path_name(ATTN_CUDA_MMA), "mma");
  assert_string_equal(attn_cuda_path_name(ATTN_CUDA_SIMPLE), "simple");
}

static void test_aligned16(void **state) {
  (void)state;
  static _Alignas(16) unsigned char buf[64];
  const void *ok[] = {buf, buf + 16, NULL};
  const void *bad[] = {buf, buf + 8};
  assert_int_equal(attn_cuda_aligned16(3, ok), 1);
  assert_int_equal(attn_cuda_aligned16(2, bad), 0);
}

/* ---- mask ranges against brute force ---------------------------------------- */

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void random_mask(uint64_t *s, attn_mask *m) {
  m->causal = (int)(rnd(s) % 2);
  m->window = rnd(s) % 3 == 0 ? 0 : (int64_t)(rnd(s) % 60) + 1;
  m->q_stride = (int64_t)(rnd(s) % 4) + 1;
  m->k_stride = (int64_t)(rnd(s) % 4) + 1;
  m->q_pos0 = (int64_t)(rnd(s) % 300) - 100;
  m->k_pos0 = (int64_t)(rnd(s) % 300) - 100;
  m->docs = 0;
  m->doc_end = NULL;
}

static void test_mask_ranges_brute_force(void **state) {
  (void)state;
  uint64_t seed = (uint64_t)time(NULL) | 1u, s = seed;
  for (int trial = 0; trial < 3000; trial++) {
    attn_mask m;
    random_mask(&s, &m);
    const int64_t nq = (int64_t)(rnd(&s) % 90) + 1, nk = (int64_t)(rnd(&s) % 90) + 1;
    const int64_t i0 = (int64_t)(rnd(&s) % (uint64_t)nq);
    const int64_t ni = (int64_t)(rnd(&s) % (uint64_t)(nq - i0)) + 1;
    int64_t jlo, jhi;
    attn_mask_key_range(&m, i0, ni, nk, &jlo, &jhi);
    int64_t vmin = nk, vmax = -1;
    for (int64_t i = i0; i < i0 + ni; i++)
      for (int64_t j = 0; j < nk; j++)
        if (attn_mask_visible(&m, m.q_pos0 + i * m.q_stride, m.k_pos0 + j * m.k_stride)) {
          if (j < vmin) vmin = j;
          if (j > vmax) vmax = j;
        }
    if (vmax >= 0 && !(jlo <= vmin && vmax < jhi)) {
      fprintf(stderr, "seed %llu trial %d: key range [%lld,%lld) misses [%lld,%lld]\n", (unsigned long long)seed, trial,
              (long long)jlo, (long long)jhi, (long long)vmin, (long long)vmax);
      fail();
    }
    assert_true(0 <= jlo && jhi <= nk);
    /* Without a window and with unit key stride the causal range is exact. */
    if (!m.window && vmax >= 0 && m.k_stride == 1) assert_int_equal(jhi, vmax + 1);
    if (vmax < 0 && (m.causal || m.window)) {
      /* Nothing visible: the range may be a superset, but it must be valid. */
      assert_true(jlo <= jhi);
    }

    /* The mirror: query rows that may see key rows [j0, j0 + nj). */
    const int64_t j0 = (int64_t)(rnd(&s) % (uint64_t)nk);
    const int64_t nj = (int64_t)(rnd(&s) % (uint64_t)(nk - j0)) + 1;
    int64_t ilo, ihi;
    attn_mask_query_range(&m, j0, nj, nq, &ilo, &ihi);
    int64_t qmin = nq, qmax = -1;
    for (int64_t j = j0; j < j0 + nj; j++)
      for (int64_t i = 0; i < nq; i++)
        if (attn_mask_visible(&m, m.q_pos0 + i * m.q_stride, m.k_pos0 + j * m.k_stride)) {
          if (i < qmin) qmin = i;
          if (i > qmax) qmax = i;
        }
    if (qmax >= 0 && !(ilo <= qmin && qmax < ihi)) {
      fprintf(stderr, "seed %llu trial %d: query range [%lld,%lld) misses [%lld,%lld]\n", (unsigned long long)seed,
              trial, (long long)ilo, (long long)ihi, (long long)qmin, (long long)qmax);
      fail();
    }
    assert_true(0 <= ilo && ihi <= nq);

    /* tile_full is never wrong when it says "all visible". */
    const int64_t tj = (int64_t)(rnd(&s) % (uint64_t)nk);
    const int64_t tn = (int64_t)(rnd(&s) % (uint64_t)(nk - tj)) + 1;
    if (attn_mask_tile_full(&m, i0, ni, tj, tn)) {
      for (int64_t i = i0; i < i0 + ni; i++)
        for (int64_t j = tj; j < tj + tn; j++)
          if (!attn_mask_visible(&m, m.q_pos0 + i * m.q_stride, m.k_pos0 + j * m.k_stride)) {
            fprintf(stderr, "seed %llu trial %d: tile_full wrong at (%lld,%lld)\n", (unsigned long long)seed, trial,
                    (long long)i, (long long)j);
            fail();
          }
    }
  }
  /* A full mask is recognised as such. */
  attn_mask full = {0, 1, 0, 1, 0, 0, 0, NULL};
  assert_true(attn_mask_tile_full(&full, 0, 64, 0, 64));
}

static void test_floordiv(void **state) {
  (void)state;
  for (int64_t a = -50; a <= 50; a++)
    for (int64_t b = 1; b <= 7; b++) {
      int64_t f = attn_mask_floordiv(a, b);
      assert_true(f * b <= a && a < (f + 1) * b);
    }
}

/* ---- error paths that must not need (or crash without) a device ------------------ */

static int have_device(void) {
  int n = 0;
  char msg[200];
  return attn_cuda_device_count(&n, msg, sizeof msg) == ATTN_OK && n > 0;
}

static void test_device_count_reports(void **state) {
  (void)state;
  int n = -1;
  char msg[200] = "";
  int rc = attn_cuda_device_count(&n, msg, sizeof msg);
  assert_true(strlen(msg) > 0);
  if (rc == ATTN_OK) {
    assert_true(n > 0);
  } else {
    assert_int_equal(rc, ATTN_ENODEV);
    assert_int_equal(n, 0);
    assert_non_null(strstr(msg, "cudaGetDeviceCount"));
    printf("  (no device here: %s)\n", msg);
  }
}

static void test_bad_input_returns_codes(void **state) {
  (void)state;
  static _Alignas(16) unsigned char fake[256];
  float *o = (float *)fake;
  attn_params p = base_params(ATTN_BF16, 64);
  /* Checked before any CUDA call: identical with or without a device. */
  assert_int_equal(attn_cuda_fwd(&p, NULL, fake, fake, o, o, 0, 0), ATTN_ENULL);
  assert_int_equal(attn_cuda_fwd(NULL, fake, fake, fake, o, o, 0, 0), ATTN_ENULL);
  attn_params bad = p;
  bad.Zkv = 3;
  assert_int_equal(attn_cuda_fwd(&bad, fake, fake, fake, o, o, 0, 0), ATTN_EINVAL);
  assert_int_equal(attn_cuda_bwd(&p, fake, fake, fake, NULL, fake, o, NULL, o, o, o, 0), ATTN_ENULL);
  assert_int_equal(attn_cuda_bwd(&bad, fake, fake, fake, o, fake, o, o, o, o, o, 0), ATTN_EINVAL);
  assert_int_equal(attn_cuda_fwd_path(&p, ATTN_CUDA_MMA, fake + 2, fake, fake, o, o, 0, 0),
                   ATTN_EINVAL); /* misaligned q cannot take the MMA path */
  assert_int_equal(attn_cuda_delta(&p, o, NULL, o, 0), ATTN_ENULL);
  assert_int_equal(attn_cuda_merge(0, 64, o, o, o, o, 0), ATTN_EINVAL);
  assert_int_equal(attn_cuda_merge(10, 64, o, NULL, o, o, 0), ATTN_ENULL);
  attn_params dec = p;
  dec.Nq = ATTN_CUDA_DECODE_MAX_Q + 1;
  assert_int_equal(attn_cuda_decode(&dec, fake, fake, fake, o, o, 0, 0, NULL, 0), ATTN_EINVAL);
  dec.Nq = 1;
  assert_int_equal(attn_cuda_decode(&dec, fake, fake, fake, o, o, 0, -3, NULL, 0), ATTN_EINVAL);
  assert_int_equal(attn_cuda_fill_random(NULL, ATTN_BF16, 10, 1, 1.0f, 0), ATTN_ENULL);
  assert_int_equal(attn_cuda_fill_random(fake, (attn_dtype)9, 10, 1, 1.0f, 0), ATTN_EDTYPE);
  assert_true(strcmp(attn_cuda_strerror(ATTN_ECUDA), attn_cuda_strerror(ATTN_ENODEV)) != 0);
  assert_non_null(strstr(attn_cuda_strerror(ATTN_EDTYPE), "storage"));
}

/* Valid input but no device: a CUDA error code and a message, not a crash. */
static void test_no_device_launch_fails_cleanly(void **state) {
  (void)state;
  if (have_device()) skip(); /* fake pointers must never reach a real device */
  static _Alignas(16) unsigned char fake[256];
  float *o = (float *)fake;
  attn_params p = base_params(ATTN_BF16, 64);
  assert_int_equal(attn_cuda_fwd(&p, fake, fake, fake, o, o, 0, 0), ATTN_ECUDA);
  assert_int_equal(attn_cuda_fwd_path(&p, ATTN_CUDA_SIMPLE, fake, fake, fake, o, o, 1, 0), ATTN_ECUDA);
  assert_int_equal(attn_cuda_bwd(&p, fake, fake, fake, NULL, fake, o, o, o, o, o, 0), ATTN_ECUDA);
  /* The O variant allocates its delta first: that is what fails. */
  assert_int_equal(attn_cuda_bwd(&p, fake, fake, fake, o, fake, o, NULL, o, o, o, 0), ATTN_ECUDA);
  assert_int_equal(attn_cuda_merge(10, 64, o, o, o, o, 0), ATTN_ECUDA);
  attn_params dec = p;
  dec.Nq = 2;
  assert_int_equal(attn_cuda_decode(&dec, fake, fake, fake, o, o, 0, 0, NULL, 0), ATTN_ECUDA);
  assert_int_equal(attn_cuda_fill_random(fake, ATTN_BF16, 10, 1, 1.0f, 0), ATTN_ECUDA);
}

static void test_decode_sizing(void **state) {
  (void)state;
  attn_params p = base_params(ATTN_BF16, 128);
  p.Nq = 1;
  p.Nk = 1 << 20;
  int s = attn_cuda_decode_splits(&p);
  assert_true(s >= 1 && s <= 1024);
  assert_true((int64_t)s * 256 <= p.Nk + 255); /* at least ~256 keys per split */
  assert_int_equal(attn_cuda_decode_workspace_bytes(&p, s),
                   (size_t)p.B * p.Zq * (size_t)p.Nq * (size_t)s * (size_t)(p.d + 1) * 4);
  p.Nk = 10;
  assert_int_equal(attn_cuda_decode_splits(&p), 1);
  assert_int_equal(attn_cuda_decode_workspace_bytes(&p, 0), 0);
  p.B = 0;
  assert_int_equal(attn_cuda_decode_workspace_bytes(&p, 4), 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_check_accepts_and_rejects),
    cmocka_unit_test(test_plan_forward_mma_geometry),
    cmocka_unit_test(test_plan_backward_mma_geometry),
    cmocka_unit_test(test_plan_path_choice),
    cmocka_unit_test(test_aligned16),
    cmocka_unit_test(test_mask_ranges_brute_force),
    cmocka_unit_test(test_floordiv),
    cmocka_unit_test(test_device_count_reports),
    cmocka_unit_test(test_bad_input_returns_codes),
    cmocka_unit_test(test_no_device_launch_fails_cleanly),
    cmocka_unit_test(test_decode_sizing),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
