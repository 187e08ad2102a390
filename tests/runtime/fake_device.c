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
 * moved tracked device memory the right way, (nccl) the stream hooks ran, and devplan.h's sizing
 * pass gives every rank's peak as the CPU run measured it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "runtime/runtime.h"
#include "tests/runtime/fake_device.h"

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
  fake_device_init(&d, f, !strcmp(xport, "nccl") ? BS_XPORT_NCCL : BS_XPORT_MPI, 0);
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
    bs_plan *plan = NULL;
    if (bs_plan_create(&c, c.par.ranks_per_node, &plan, err, sizeof err)) {
      fprintf(stderr, "fake_device: plan: %s\n", err);
      fail = 1;
    }
    for (int q = 0; plan && q < size; q++) {
      bs_dev_bytes db;
      if (bs_dev_bytes_of(plan, q, &db, err, sizeof err) || db.peak != a->ranks[q].peak_bytes) {
        fprintf(stderr, "fake_device: rank %d: sizing pass peak %lld, the CPU run's %lld\n", q, (long long)db.peak,
                (long long)a->ranks[q].peak_bytes);
        fail = 1;
      }
    }
    bs_plan_free(plan);
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
