/*
 * test_comm_nccl_host.c — the GPU communicator's paths that need no GPU:
 * argument checks and the clear failure when no device exists (the local
 * mode and the NCCL mode both refuse to start, with a message, never crash).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "comm/comm_nccl.h"

static int have_device(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n > 0;
}

static void test_local_arguments(void **state) {
  (void)state;
  char err[256] = "";
  bs_comm_nccl *c[4];
  assert_int_equal(bs_comm_nccl_create_local(0, 0, c, err, sizeof err), BS_COMM_ERR);
  assert_non_null(strstr(err, "ranks"));
  assert_int_equal(bs_comm_nccl_create_local(BS_COMM_NCCL_MAX_LOCAL + 1, 0, c, err, sizeof err), BS_COMM_ERR);
  assert_int_equal(bs_comm_nccl_create_local(4, 0, NULL, err, sizeof err), BS_COMM_ERR);
  assert_int_equal(bs_comm_nccl_create(NULL, 0, c, err, sizeof err), BS_COMM_ERR);
  assert_int_equal(bs_cuda_reduce_f32(NULL, NULL, -1, BS_COMM_SUM, 0), BS_COMM_ERR);
  assert_int_equal(bs_cuda_reduce_f32(NULL, NULL, 0, BS_COMM_SUM, 0), BS_COMM_OK);
  /* NULL communicators are refused, not dereferenced. */
  int req;
  assert_int_equal(bs_comm_nccl_isend(NULL, err, 4, 0, 0, &req, err, sizeof err), BS_COMM_ERR);
  assert_int_equal(bs_comm_nccl_wait(NULL, 0, 0.0), BS_COMM_ERR);
}

static void test_no_device_is_a_clear_error(void **state) {
  (void)state;
  if (have_device()) skip();
  char err[256] = "";
  bs_comm_nccl *c[4] = {NULL, NULL, NULL, NULL};
  assert_int_equal(bs_comm_nccl_create_local(4, 0, c, err, sizeof err), BS_COMM_ERR);
  assert_non_null(strstr(err, "no CUDA device"));
  for (int r = 0; r < 4; r++) assert_null(c[r]);
  printf("  (%s)\n", err);
}

static void test_local_create_and_free(void **state) {
  (void)state;
  if (!have_device()) skip();
  char err[256] = "";
  bs_comm_nccl *c[3];
  assert_int_equal(bs_comm_nccl_create_local(3, 0, c, err, sizeof err), BS_COMM_OK);
  for (int r = 0; r < 3; r++) {
    assert_int_equal(bs_comm_nccl_rank(c[r]), r);
    assert_int_equal(bs_comm_nccl_size(c[r]), 3);
    assert_true(bs_comm_nccl_is_local(c[r]));
  }
  int req;
  assert_int_equal(bs_comm_nccl_isend(c[0], err, 4, 3, 0, &req, err, sizeof err), BS_COMM_ERR);
  for (int r = 0; r < 3; r++) bs_comm_nccl_free(c[r]);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_local_arguments),
    cmocka_unit_test(test_no_device_is_a_clear_error),
    cmocka_unit_test(test_local_create_and_free),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
