/*
 * fake_device.h — a device table (runtime/device.h) for tests on machines
 * without a GPU: its "device memory" is host memory it tracks (every copy is
 * checked to go host -> device or device -> host), its kernels are the CPU
 * table, its events are host clock readings, and its NCCL is Open MPI with
 * the stream hooks counted. Header only: the fake_device drivers include it.
 */
#ifndef BS_TESTS_FAKE_DEVICE_H
#define BS_TESTS_FAKE_DEVICE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "base/clock.h"
#include "comm/comm_mpi.h"
#include "runtime/device.h"

#define MAX_LIVE 65536

typedef struct {
  void *live[MAX_LIVE];
  size_t bytes[MAX_LIVE];
  int nlive;
  double *marks;
  int nmarks, cap;
  long uploads, downloads, syncs, afters, stream_waits, bad, groups_made;
} fake;

static inline int find(fake *f, const void *p, size_t n) {
  for (int i = 0; i < f->nlive; i++)
    if ((const char *)p >= (const char *)f->live[i] && (const char *)p + n <= (const char *)f->live[i] + f->bytes[i])
      return i;
  return -1;
}

static inline void *f_alloc(void *self, size_t bytes) {
  fake *f = self;
  if (f->nlive == MAX_LIVE) return NULL;
  void *p = calloc(1, bytes ? bytes : 1);
  if (p) {
    f->live[f->nlive] = p;
    f->bytes[f->nlive++] = bytes ? bytes : 1;
  }
  return p;
}

static inline void f_free(void *self, void *p) {
  fake *f = self;
  if (!p) return;
  for (int i = 0; i < f->nlive; i++)
    if (f->live[i] == p) {
      f->live[i] = f->live[--f->nlive];
      f->bytes[i] = f->bytes[f->nlive];
      free(p);
      return;
    }
  f->bad++; /* freeing what the device never gave */
  fprintf(stderr, "fake_device: free of a pointer the device did not allocate\n");
}

static inline int f_upload(void *self, void *dst, const void *src, size_t n) {
  fake *f = self;
  f->uploads++;
  if (find(f, dst, n) < 0 || (n && find(f, src, 1) >= 0)) {
    f->bad++;
    fprintf(stderr, "fake_device: upload of %zu bytes not host -> device\n", n);
    return -1;
  }
  memcpy(dst, src, n);
  return 0;
}

static inline int f_download(void *self, void *dst, const void *src, size_t n) {
  fake *f = self;
  f->downloads++;
  if (find(f, src, n) < 0 || (n && find(f, dst, 1) >= 0)) {
    f->bad++;
    fprintf(stderr, "fake_device: download of %zu bytes not device -> host\n", n);
    return -1;
  }
  memcpy(dst, src, n);
  return 0;
}

static inline int f_sync(void *self) {
  ((fake *)self)->syncs++;
  return 0;
}

static inline int f_mark(void *self) {
  fake *f = self;
  if (f->nmarks == f->cap) {
    int nc = f->cap ? 2 * f->cap : 256;
    double *m = realloc(f->marks, (size_t)nc * sizeof *m);
    if (!m) return -1;
    f->marks = m;
    f->cap = nc;
  }
  f->marks[f->nmarks] = bs_now_s();
  return f->nmarks++;
}

static inline int f_mark_ms(void *self, int i, double *ms) {
  fake *f = self;
  if (i < 0 || i >= f->nmarks) return -1;
  *ms = (f->marks[i] - f->marks[0]) * 1e3;
  return 0;
}

static inline void f_marks_reset(void *self) { ((fake *)self)->nmarks = 0; }

static inline int f_comm_create(void *self, const void *world, const bs_dev_groups *g, bs_comm **out, char *err,
                                size_t errlen) {
  fake *f = self;
  f->groups_made += g->n;
  return bs_comm_mpi_create(*(const MPI_Comm *)world, out, err, errlen);
}

static inline int f_after(void *self, bs_comm *c, char *err, size_t errlen) {
  (void)c, (void)err, (void)errlen;
  ((fake *)self)->afters++;
  return 0;
}

static inline int f_stream_wait(void *self, bs_comm *c, int req, char *err, size_t errlen) {
  (void)c, (void)req, (void)err, (void)errlen;
  ((fake *)self)->stream_waits++;
  return 0;
}

static inline int64_t f_mem(void *self) {
  (void)self;
  return -1;
}

/* d over f (zeroed by the caller), moving data as xport says; `device` is the ordinal it reports. */
static inline void fake_device_init(bs_rt_device *d, fake *f, bs_xport_kind xport, int device) {
  memset(d, 0, sizeof *d);
  d->be = bs_kernel_backend_cpu();
  d->xport = xport;
  d->device = device;
  snprintf(d->name, sizeof d->name, "fake device");
  snprintf(d->where, sizeof d->where, "fake host/device %d", device);
  d->self = f;
  d->alloc = f_alloc;
  d->free = f_free;
  d->upload = f_upload;
  d->download = f_download;
  d->sync = f_sync;
  d->mark = f_mark;
  d->mark_ms = f_mark_ms;
  d->marks_reset = f_marks_reset;
  d->comm_create = f_comm_create;
  d->comm_after = f_after;
  d->stream_wait = f_stream_wait;
  d->mem_used = f_mem;
  d->mem_total = f_mem;
}

#endif
