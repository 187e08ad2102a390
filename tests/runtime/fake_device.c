/*
 * fake_device.c — the GPU path of the plan executor (runtime.c with
 * opts.device) run on a machine without a GPU: a device table
 * (runtime/device.h) whose "device memory" is host memory it tracks, whose
 * kernels are the CPU table, whose events are host clock readings and whose
 * NCCL is Open MPI with the stream hooks counted. Every device-only branch
 * of the executor (uploads, downloads, host staging, the scratch copies,
 * the event marks and their time accounting, the group set-up, the verify
 * gather through downloads) then runs under mpirun against the CPU path.
 *
 * mpirun -np G fake_device xport=mpi|nccl method=burst|ring|usp|ulysses scope=attention|layer N=...
 * runs the point on the CPU path, then on the fake device, and exits 0 only when
 * the device run verifies (attention scope), its bytes per rank and plan peak equal the CPU run's,
 * its times are consistent (compute and exposed within the step, fwd + bwd <= step), every copy
 * moved tracked device memory the right way, and (nccl) the stream hooks ran.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "base/clock.h"
#include "kernels/comm/comm_mpi.h"
#include "runtime/runtime.h"

/* ---------------- the fake device ---------------- */

#define MAX_LIVE 65536

typedef struct {
  void *live[MAX_LIVE];
  size_t bytes[MAX_LIVE];
  int nlive;
  double *marks;
  int nmarks, cap;
  long uploads, downloads, syncs, afters, stream_waits, bad, groups_made;
} fake;

static int find(fake *f, const void *p, size_t n) {
  for (int i = 0; i < f->nlive; i++)
    if ((const char *)p >= (const char *)f->live[i] && (const char *)p + n <= (const char *)f->live[i] + f->bytes[i])
      return i;
  return -1;
}

static void *f_alloc(void *self, size_t bytes) {
  fake *f = self;
  if (f->nlive == MAX_LIVE) return NULL;
  void *p = calloc(1, bytes ? bytes : 1);
  if (p) {
    f->live[f->nlive] = p;
    f->bytes[f->nlive++] = bytes ? bytes : 1;
  }
  return p;
}

static void f_free(void *self, void *p) {
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

static int f_upload(void *self, void *dst, const void *src, size_t n) {
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

static int f_download(void *self, void *dst, const void *src, size_t n) {
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

static int f_sync(void *self) {
  ((fake *)self)->syncs++;
  return 0;
}

static int f_mark(void *self) {
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

static int f_mark_ms(void *self, int i, double *ms) {
  fake *f = self;
  if (i < 0 || i >= f->nmarks) return -1;
  *ms = (f->marks[i] - f->marks[0]) * 1e3;
  return 0;
}

static void f_marks_reset(void *self) { ((fake *)self)->nmarks = 0; }

static int f_comm_create(void *self, const void *world, const bs_dev_groups *g, bs_comm **out, char *err,
                         size_t errlen) {
  fake *f = self;
  f->groups_made += g->n;
  return bs_comm_mpi_create(*(const MPI_Comm *)world, out, err, errlen);
}

static int f_after(void *self, bs_comm *c, char *err, size_t errlen) {
  (void)c, (void)err, (void)errlen;
  ((fake *)self)->afters++;
  return 0;
}

static int f_stream_wait(void *self, bs_comm *c, int req, char *err, size_t errlen) {
  (void)c, (void)req, (void)err, (void)errlen;
  ((fake *)self)->stream_waits++;
  return 0;
}

static int64_t f_mem(void *self) {
  (void)self;
  return -1;
}

/* ---------------- the driver ---------------- */

static int arg(int argc, char **argv, const char *k, const char *def, char *v, size_t n) {
  snprintf(v, n, "%s", def);
  for (int i = 1; i < argc; i++)
    if (!strncmp(argv[i], k, strlen(k)) && argv[i][strlen(k)] == '=') snprintf(v, n, "%s", argv[i] + strlen(k) + 1);
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char xport[16], method[32], scope[16], nbuf[32];
  arg(argc, argv, "xport", "mpi", xport, sizeof xport);
  arg(argc, argv, "method", "burst", method, sizeof method);
  arg(argc, argv, "scope", "attention", scope, sizeof scope);
  arg(argc, argv, "N", "256", nbuf, sizeof nbuf);
  bs_config c;
  bs_config_default(&c);
  c.model.heads = 4;
  c.model.kv_heads = 4;
  c.model.head_dim = 32;
  c.model.hidden = 128;
  c.model.ffn = 256;
  c.model.dtype = BS_FP32;
  c.work.seq_len = atoll(nbuf);
  c.work.phase = BS_TRAIN;
  c.work.causal = 1;
  c.par.gpus = size;
  c.par.ranks_per_node = size;
  c.par.double_ring = BS_OFF;
  c.par.ulysses_degree = 1;
  c.par.layout = BS_ZIGZAG;
  for (int m = 0; m < BS_METHOD_COUNT; m++)
    if (!strcmp(method, bs_method_name((bs_method)m))) c.par.method = (bs_method)m;
  if (c.par.method == BS_USP) c.par.ulysses_degree = 2;
  if (c.par.method == BS_ULYSSES) c.par.layout = BS_CONTIGUOUS; /* it gathers contiguous shards */
  if (!strcmp(scope, "layer")) c.work.scope = BS_SCOPE_LAYER;
  bs_runtime_opts o;
  memset(&o, 0, sizeof o);
  o.verify = c.work.scope == BS_SCOPE_ATTENTION;
  o.threads = 1;
  o.timeout_s = 60;
  bs_run_report cpu, dev;
  char err[512] = "";
  int rc = bs_runtime_run(&c, MPI_COMM_WORLD, &o, &cpu, err, sizeof err);
  if (rc) {
    fprintf(stderr, "fake_device: rank %d: the CPU run failed: %s\n", rank, err);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  fake *f = calloc(1, sizeof *f);
  bs_rt_device d;
  memset(&d, 0, sizeof d);
  d.be = bs_kernel_backend_cpu();
  d.xport = !strcmp(xport, "nccl") ? BS_XPORT_NCCL : BS_XPORT_MPI;
  snprintf(d.name, sizeof d.name, "fake device");
  d.self = f;
  d.alloc = f_alloc;
  d.free = f_free;
  d.upload = f_upload;
  d.download = f_download;
  d.sync = f_sync;
  d.mark = f_mark;
  d.mark_ms = f_mark_ms;
  d.marks_reset = f_marks_reset;
  d.comm_create = f_comm_create;
  d.comm_after = f_after;
  d.stream_wait = f_stream_wait;
  d.mem_used = f_mem;
  d.mem_total = f_mem;
  o.device = &d;
  rc = bs_runtime_run(&c, MPI_COMM_WORLD, &o, &dev, err, sizeof err);
  if (rc == BS_RUN_EFATAL) {
    fprintf(stderr, "fake_device: rank %d: the device run failed: %s\n", rank, err);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  int fail = rc != BS_RUN_OK || f->bad > 0 || f->nlive != 0;
  if (f->nlive) fprintf(stderr, "fake_device: rank %d: %d device buffers never freed\n", rank, f->nlive);
  if (d.xport == BS_XPORT_NCCL && (f->afters == 0 || f->stream_waits == 0) && size > 1) {
    fprintf(stderr, "fake_device: rank %d: NCCL schedule: %ld comm-afters, %ld stream waits\n", rank, f->afters,
            f->stream_waits);
    fail = 1;
  }
  if (d.xport == BS_XPORT_MPI && size > 1 && f->downloads == 0) {
    fprintf(stderr, "fake_device: rank %d: MPI staging copied nothing down\n", rank);
    fail = 1;
  }
  if (rank == 0) {
    const bs_result *a = &cpu.res, *b = &dev.res;
    for (int q = 0; q < size; q++) {
      const bs_rank_result *x = &a->ranks[q], *y = &b->ranks[q];
      if (x->bytes_sent != y->bytes_sent || x->bytes_recv != y->bytes_recv || x->peak_bytes != y->peak_bytes) {
        fprintf(stderr, "fake_device: rank %d: cpu sent %lld recv %lld peak %lld, device %lld %lld %lld\n", q,
                (long long)x->bytes_sent, (long long)x->bytes_recv, (long long)x->peak_bytes, (long long)y->bytes_sent,
                (long long)y->bytes_recv, (long long)y->peak_bytes);
        fail = 1;
      }
      double slack = 1e-3 + 0.01 * y->step;
      if (!(y->step > 0) || !(y->compute > 0) || y->compute > y->step + slack || y->comm_exposed < 0 ||
          y->comm_exposed > y->step + slack || y->fwd + y->bwd > y->step + slack || !isfinite(y->step)) {
        fprintf(stderr, "fake_device: rank %d: times do not add up: step %g fwd %g bwd %g compute %g exposed %g\n", q,
                y->step, y->fwd, y->bwd, y->compute, y->comm_exposed);
        fail = 1;
      }
    }
    printf(
      "fake_device %s %s %s G=%d: step %.4f s (cpu %.4f s), compute %.4f, exposed %.4f; verify %s; %ld uploads, "
      "%ld downloads, %ld syncs, %ld comm-afters, %ld stream waits, %ld groups: %s\n",
      xport, method, scope, size, b->time.step, a->time.step, b->time.compute, b->time.comm_exposed,
      o.verify ? (dev.verified ? "PASS" : "FAIL") : "n/a", f->uploads, f->downloads, f->syncs, f->afters,
      f->stream_waits, f->groups_made, fail ? "FAIL" : "PASS");
  }
  int any = fail;
  MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  bs_run_report_free(&cpu);
  bs_run_report_free(&dev);
  free(f->marks);
  free(f);
  MPI_Finalize();
  return any ? 1 : 0;
}
