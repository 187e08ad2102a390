/*
 * bs_comm_check.c — the GPU check of the communicator's local multi-rank mode
 * (G virtual ranks on one GPU, device-to-device copies): ring steps with
 * double buffers, tag matching in either posting order, every collective on
 * the whole group and on a strided subgroup, stream-ordered waits, and the
 * error paths (size mismatch, unmatched wait timing out, bad peer). Data are
 * fresh random values (seed printed); results are checked exactly on the host.
 * Exit: 0 pass, 1 fail, 77 no CUDA device.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/fill.h"
#include "comm/comm_nccl.h"

#define G 4
#define N 4099 /* floats per message: not a multiple of anything */

typedef struct {
  int pass, fail;
} tally;

static void check(tally *t, int ok, const char *what) {
  printf("  %-4s %s\n", ok ? "ok" : "FAIL", what);
  if (ok) t->pass++;
  else t->fail++;
}

#define CK(call)                                                                                            \
  do {                                                                                                      \
    cudaError_t e_ = (call);                                                                                \
    if (e_ != cudaSuccess) {                                                                                \
      fprintf(stderr, "bs_comm_check: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                                              \
    }                                                                                                       \
  } while (0)

#define CC(call)                                                                            \
  do {                                                                                      \
    if ((call) != BS_COMM_OK) {                                                             \
      fprintf(stderr, "bs_comm_check: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, w->err); \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* The G ranks of the local mode and their buffers: per rank a host block and its read-back,
 * a device send buffer and two receive buffers, G * N floats each; the seeded generator and the tally. */
typedef struct {
  bs_comm_nccl *c[G];
  float *h[G], *hr[G], *d[G], *dr[G][2], *big;
  size_t bytes;
  uint64_t s;
  tally t;
  char err[256];
} world;

/* 1. Ring: G-1 steps pass every rank's block around with two receive buffers. */
static void check_ring(world *w) {
  bs_comm_nccl **c = w->c;
  float **h = w->h, **hr = w->hr, **d = w->d;
  float *(*dr)[2] = w->dr;
  const size_t bytes = w->bytes;
  uint64_t *s = &w->s;
  tally *t = &w->t;
  for (int r = 0; r < G; r++) {
    bs_fill_stream(h[r], N, s);
    CK(cudaMemcpy(d[r], h[r], bytes, cudaMemcpyHostToDevice));
  }
  {
    int req[G];
    const float *cur[G];
    for (int r = 0; r < G; r++) cur[r] = d[r];
    int ok = 1;
    for (int step = 0; step < G - 1; step++) {
      for (int r = 0; r < G; r++)
        CC(bs_comm_nccl_sendrecv(c[r], cur[r], (int64_t)bytes, (r + 1) % G, dr[r][step & 1], (int64_t)bytes,
                                 (r + G - 1) % G, 100 + step, &req[r], w->err, sizeof w->err));
      for (int r = 0; r < G; r++) ok &= bs_comm_nccl_wait(c[r], req[r], 10.0) == BS_COMM_OK;
      for (int r = 0; r < G; r++) {
        CK(cudaMemcpy(hr[r], dr[r][step & 1], bytes, cudaMemcpyDeviceToHost));
        ok &= same(hr[r], h[(r + G - 1 - step + 2 * G) % G], N);
      }
      for (int r = 0; r < G; r++) cur[r] = dr[r][step & 1];
    }
    check(t, ok, "ring: G-1 sendrecv steps deliver every block to every rank");
    for (int r = 0; r < G; r++) ok &= bs_comm_nccl_pending(c[r]) == 0;
    check(t, ok, "ring: no request left in flight");
  }
}

/* 2. Tags: sends posted 5 then 7, receives 7 then 5; and receive before send. */
static void check_tags(world *w) {
  bs_comm_nccl **c = w->c;
  float **h = w->h, **hr = w->hr, **d = w->d;
  float *(*dr)[2] = w->dr;
  const size_t bytes = w->bytes;
  uint64_t *s = &w->s;
  tally *t = &w->t;
  int a, b, x, y;
  bs_fill_stream(h[0], 2 * N, s);
  CK(cudaMemcpy(d[0], h[0], 2 * bytes, cudaMemcpyHostToDevice));
  CC(bs_comm_nccl_irecv(c[1], dr[1][0], (int64_t)bytes, 0, 7, &x, w->err, sizeof w->err));
  CC(bs_comm_nccl_isend(c[0], d[0], (int64_t)bytes, 1, 5, &a, w->err, sizeof w->err));
  CC(bs_comm_nccl_isend(c[0], d[0] + N, (int64_t)bytes, 1, 7, &b, w->err, sizeof w->err));
  CC(bs_comm_nccl_irecv(c[1], dr[1][1], (int64_t)bytes, 0, 5, &y, w->err, sizeof w->err));
  int ok = bs_comm_nccl_wait(c[0], a, 10) == BS_COMM_OK && bs_comm_nccl_wait(c[0], b, 10) == BS_COMM_OK &&
           bs_comm_nccl_wait(c[1], x, 10) == BS_COMM_OK && bs_comm_nccl_wait(c[1], y, 10) == BS_COMM_OK;
  CK(cudaMemcpy(hr[1], dr[1][0], bytes, cudaMemcpyDeviceToHost));
  ok &= same(hr[1], h[0] + N, N);
  CK(cudaMemcpy(hr[1], dr[1][1], bytes, cudaMemcpyDeviceToHost));
  ok &= same(hr[1], h[0], N);
  check(t, ok, "p2p: matching by tag, receive posted before its send");
}

/* 3. Collectives: allreduce sum and max on the whole group. */
static void check_allreduce(world *w) {
  bs_comm_nccl **c = w->c;
  float **h = w->h, **hr = w->hr, **d = w->d;
  float *(*dr)[2] = w->dr;
  const size_t bytes = w->bytes;
  uint64_t *s = &w->s;
  tally *t = &w->t;
  const bs_comm_group all = {0, 1, G};
  for (int red = 0; red < 2; red++) {
    int req[G];
    for (int r = 0; r < G; r++) {
      bs_fill_stream(h[r], N, s);
      CK(cudaMemcpy(d[r], h[r], bytes, cudaMemcpyHostToDevice));
    }
    for (int r = 0; r < G; r++)
      CC(bs_comm_nccl_icoll(c[r], BS_COMM_ALLREDUCE, (bs_comm_red)red, BS_COMM_F32, all, d[r], dr[r][0], (int64_t)bytes,
                            &req[r], w->err, sizeof w->err));
    int ok = 1;
    for (int r = 0; r < G; r++) ok &= bs_comm_nccl_wait(c[r], req[r], 10) == BS_COMM_OK;
    float *want = malloc(bytes);
    for (int i = 0; i < N; i++) {
      float acc = h[0][i];
      for (int r = 1; r < G; r++) acc = red ? fmaxf(acc, h[r][i]) : acc + h[r][i];
      want[i] = acc;
    }
    for (int r = 0; r < G; r++) {
      CK(cudaMemcpy(hr[r], dr[r][0], bytes, cudaMemcpyDeviceToHost));
      /* Same order of additions as the reference: rank 0 first. */
      for (int i = 0; i < N; i++) ok &= fabsf(hr[r][i] - want[i]) <= 1e-6f * (1.0f + fabsf(want[i]));
    }
    check(t, ok, red ? "allreduce max, 4 ranks" : "allreduce sum, 4 ranks");
    free(want);
  }
}

/* 3. Collectives: allreduce in place on the strided subgroup {1, 3}. */
static void check_subgroup(world *w) {
  bs_comm_nccl **c = w->c;
  float **h = w->h, **hr = w->hr, **d = w->d;
  const size_t bytes = w->bytes;
  uint64_t *s = &w->s;
  tally *t = &w->t;
  const bs_comm_group odd = {1, 2, G / 2};
  int req[G];
  for (int r = 1; r < G; r += 2) {
    bs_fill_stream(h[r], N, s);
    CK(cudaMemcpy(d[r], h[r], bytes, cudaMemcpyHostToDevice));
    CC(bs_comm_nccl_icoll(c[r], BS_COMM_ALLREDUCE, BS_COMM_SUM, BS_COMM_F32, odd, d[r], d[r], (int64_t)bytes, &req[r],
                          w->err, sizeof w->err)); /* in place */
  }
  int ok = 1;
  for (int r = 1; r < G; r += 2) ok &= bs_comm_nccl_wait(c[r], req[r], 10) == BS_COMM_OK;
  for (int r = 1; r < G; r += 2) {
    CK(cudaMemcpy(hr[r], d[r], bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++) ok &= hr[r][i] == h[1][i] + h[3][i];
  }
  int bad;
  ok &= bs_comm_nccl_icoll(c[0], BS_COMM_ALLREDUCE, BS_COMM_SUM, BS_COMM_F32, odd, d[0], d[0], (int64_t)bytes, &bad,
                           w->err, sizeof w->err) == BS_COMM_ERR;
  check(t, ok, "allreduce in place on subgroup {1,3}; a non-member is refused");
}

/* 3. Collectives: allgather on the whole group. */
static void check_allgather(world *w) {
  bs_comm_nccl **c = w->c;
  float **h = w->h, **hr = w->hr, **d = w->d;
  float *(*dr)[2] = w->dr;
  const size_t bytes = w->bytes;
  uint64_t *s = &w->s;
  tally *t = &w->t;
  const bs_comm_group all = {0, 1, G};
  int req[G], ok = 1;
  for (int r = 0; r < G; r++) {
    bs_fill_stream(h[r], N, s);
    CK(cudaMemcpy(d[r], h[r], bytes, cudaMemcpyHostToDevice));
  }
  for (int r = 0; r < G; r++)
    CC(bs_comm_nccl_icoll(c[r], BS_COMM_ALLGATHER, BS_COMM_SUM, BS_COMM_BYTES, all, d[r], dr[r][0], (int64_t)bytes,
                          &req[r], w->err, sizeof w->err));
  for (int r = 0; r < G; r++) ok &= bs_comm_nccl_wait(c[r], req[r], 10) == BS_COMM_OK;
  for (int r = 0; r < G; r++) {
    CK(cudaMemcpy(hr[r], dr[r][0], bytes * G, cudaMemcpyDeviceToHost));
    for (int m = 0; m < G; m++) ok &= same(hr[r] + (size_t)m * N, h[m], N);
  }
  check(t, ok, "allgather, 4 ranks");
}

/* 3. Collectives: reduce-scatter, then all-to-all of the same inputs. */
static void check_reduce_scatter_alltoall(world *w) {
  bs_comm_nccl **c = w->c;
  float **h = w->h, **hr = w->hr, **d = w->d;
  float *(*dr)[2] = w->dr;
  const size_t bytes = w->bytes;
  uint64_t *s = &w->s;
  tally *t = &w->t;
  const bs_comm_group all = {0, 1, G};
  /* reduce-scatter: each rank's send holds G parts of N/... use G*N floats. */
  int req[G], ok = 1;
  for (int r = 0; r < G; r++) {
    bs_fill_stream(h[r], (size_t)G * N, s);
    CK(cudaMemcpy(d[r], h[r], bytes * G, cudaMemcpyHostToDevice));
  }
  for (int r = 0; r < G; r++)
    CC(bs_comm_nccl_icoll(c[r], BS_COMM_REDUCE_SCATTER, BS_COMM_SUM, BS_COMM_F32, all, d[r], dr[r][0],
                          (int64_t)(bytes * G), &req[r], w->err, sizeof w->err));
  for (int r = 0; r < G; r++) ok &= bs_comm_nccl_wait(c[r], req[r], 10) == BS_COMM_OK;
  for (int r = 0; r < G; r++) {
    CK(cudaMemcpy(hr[r], dr[r][0], bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++) {
      float acc = h[0][(size_t)r * N + i];
      for (int m = 1; m < G; m++) acc += h[m][(size_t)r * N + i];
      ok &= fabsf(hr[r][i] - acc) <= 1e-6f * (1.0f + fabsf(acc));
    }
  }
  check(t, ok, "reduce-scatter, 4 ranks");
  for (int r = 0; r < G; r++)
    CC(bs_comm_nccl_icoll(c[r], BS_COMM_ALLTOALL, BS_COMM_SUM, BS_COMM_BYTES, all, d[r], dr[r][1], (int64_t)(bytes * G),
                          &req[r], w->err, sizeof w->err));
  ok = 1;
  for (int r = 0; r < G; r++) ok &= bs_comm_nccl_wait(c[r], req[r], 10) == BS_COMM_OK;
  for (int r = 0; r < G; r++) {
    CK(cudaMemcpy(hr[r], dr[r][1], bytes * G, cudaMemcpyDeviceToHost));
    for (int m = 0; m < G; m++) ok &= same(hr[r] + (size_t)m * N, h[m] + (size_t)r * N, N);
  }
  check(t, ok, "all-to-all, 4 ranks");
}

/* 4. Stream ordering: a compute stream waits for a receive on the device. */
static void check_stream_wait(world *w) {
  bs_comm_nccl **c = w->c;
  float **h = w->h, **hr = w->hr, **d = w->d;
  float *(*dr)[2] = w->dr;
  const size_t bytes = w->bytes;
  uint64_t *s = &w->s;
  tally *t = &w->t;
  cudaStream_t comp;
  CK(cudaStreamCreateWithFlags(&comp, cudaStreamNonBlocking));
  bs_fill_stream(h[2], N, s);
  CK(cudaMemcpy(d[2], h[2], bytes, cudaMemcpyHostToDevice));
  int a, b, ok = 1;
  CC(bs_comm_nccl_after(c[2], comp, w->err, sizeof w->err));
  CC(bs_comm_nccl_isend(c[2], d[2], (int64_t)bytes, 3, 9, &a, w->err, sizeof w->err));
  CC(bs_comm_nccl_irecv(c[3], dr[3][0], (int64_t)bytes, 2, 9, &b, w->err, sizeof w->err));
  CC(bs_comm_nccl_stream_wait(c[3], b, comp, w->err, sizeof w->err));
  CK(cudaMemcpyAsync(w->big, dr[3][0], bytes, cudaMemcpyDeviceToDevice, comp));
  CK(cudaStreamSynchronize(comp));
  CK(cudaMemcpy(hr[3], w->big, bytes, cudaMemcpyDeviceToHost));
  ok &= same(hr[3], h[2], N);
  ok &= bs_comm_nccl_wait(c[2], a, 10) == BS_COMM_OK && bs_comm_nccl_wait(c[3], b, 10) == BS_COMM_OK;
  check(t, ok, "stream_wait: a compute stream sees the received data");
  CK(cudaStreamDestroy(comp));
}

/* 5. Errors: too large a send, an unmatched wait times out, a bad peer. */
static void check_errors(world *w) {
  bs_comm_nccl **c = w->c;
  float **d = w->d;
  float *(*dr)[2] = w->dr;
  const size_t bytes = w->bytes;
  tally *t = &w->t;
  const bs_comm_group all = {0, 1, G};
  int a, b, ok = 1;
  CC(bs_comm_nccl_irecv(c[1], dr[1][0], (int64_t)(bytes / 2), 0, 11, &b, w->err, sizeof w->err));
  ok &= bs_comm_nccl_isend(c[0], d[0], (int64_t)bytes, 1, 11, &a, w->err, sizeof w->err) == BS_COMM_ERR;
  ok &= strstr(w->err, "receives") != NULL;
  ok &= bs_comm_nccl_wait(c[1], b, 5) == BS_COMM_ERR; /* the receive learns of it too */
  check(t, ok, "a send larger than its receive fails on both sides");
  CC(bs_comm_nccl_irecv(c[2], dr[2][0], (int64_t)bytes, 1, 12, &b, w->err, sizeof w->err));
  ok = bs_comm_nccl_wait(c[2], b, 0.2) == BS_COMM_TIMEOUT;
  check(t, ok, "a receive nobody sends to times out");
  ok = bs_comm_nccl_isend(c[0], d[0], 4, G, 0, &a, w->err, sizeof w->err) == BS_COMM_ERR;
  /* N floats (odd) do not split into G equal blocks */
  ok &= bs_comm_nccl_icoll(c[0], BS_COMM_REDUCE_SCATTER, BS_COMM_SUM, BS_COMM_F32, all, d[0], dr[0][0], (int64_t)bytes,
                           &a, w->err, sizeof w->err) == BS_COMM_ERR;
  check(t, ok, "a bad peer and an unsplittable reduce-scatter are refused");
}

int main(void) {
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev <= 0) {
    printf("SKIP: no CUDA device (%s); the communicator's GPU checks need one\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  static world ws;
  world *w = &ws;
  uint64_t seed = (uint64_t)time(NULL);
  w->s = seed;
  printf("bs_comm_check: local mode, %d ranks, seed %llu\n", G, (unsigned long long)seed);
  CC(bs_comm_nccl_create_local(G, 0, w->c, w->err, sizeof w->err));
  w->bytes = N * sizeof(float);
  for (int r = 0; r < G; r++) {
    w->h[r] = malloc(w->bytes * G);
    w->hr[r] = malloc(w->bytes * G);
    CK(cudaMalloc((void **)&w->d[r], w->bytes * G));
    CK(cudaMalloc((void **)&w->dr[r][0], w->bytes * G));
    CK(cudaMalloc((void **)&w->dr[r][1], w->bytes * G));
  }
  CK(cudaMalloc((void **)&w->big, w->bytes * G));

  check_ring(w);
  check_tags(w);
  check_allreduce(w);
  check_subgroup(w);
  check_allgather(w);
  check_reduce_scatter_alltoall(w);
  check_stream_wait(w);
  check_errors(w);

  for (int r = 0; r < G; r++) {
    bs_comm_nccl_free(w->c[r]);
    free(w->h[r]);
    free(w->hr[r]);
    (void)cudaFree(w->d[r]);
    (void)cudaFree(w->dr[r][0]);
    (void)cudaFree(w->dr[r][1]);
  }
  (void)cudaFree(w->big);
  printf("bs_comm_check: %d passed, %d failed (seed %llu)\n", w->t.pass, w->t.fail, (unsigned long long)seed);
  return w->t.fail ? 1 : 0;
}
