/*
 * cmd_run.c — `mpirun -np G burstsim run SCENARIO.ini [--set k=v]... [--out F.json]
 * [--trace F.json] [--verify]`: runs each scenario point whose gpus equals the
 * MPI size with the real runtime (runtime/runtime.h), prints a per-rank table
 * on rank 0, writes the result JSON (mode "run", with bytes per peer added to
 * every rank) and optionally a Chrome trace-event timeline, one track per rank.
 * --backend cuda runs the same executor on one GPU per rank
 * (runtime/runtime_cuda.h) over --comm nccl or mpi.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "cmd_args.h"
#include "commands.h"
#include "output.h"
#include "scenario.h"
#include "calib/blas_core.h"
#include "runtime/digest.h"
#include "runtime/hostmem.h"
#include "runtime/runtime.h"
#include "runtime/watchdog.h"
#include "runtime/devplan.h"
#include "cuda_module.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np G burstsim run SCENARIO.ini [--set section.key=value]... [--out FILE.json]\n"
          "                                [--trace FILE.json] [--verify] [--threads N] [--timeout S] [--warmup N]\n"
          "                                [--backend cpu|cuda] [--comm mpi|nccl]\n"
          "  Runs the scenario's plan for real on G MPI ranks with the CPU kernels. At layer and model scope\n"
          "  the projections, norms and optimizer step run on scratch operands outside the plan's memory.\n"
          "  --backend   cpu (default) or cuda: the CUDA kernels, one GPU per rank (the rank's index on its\n"
          "              node among the devices CUDA_VISIBLE_DEVICES leaves), times from CUDA events; exits %d\n"
          "              when this build has no CUDA or this machine no CUDA device\n"
          "  --comm      mpi (default; with cuda through host staging, ranks may share a GPU) or nccl (cuda\n"
          "              only, one GPU per rank, the plan's group communicators made at start)\n"
          "  --verify    gather outputs and gradients to rank 0 and compare with a single-rank reference\n"
          "              (attention scope only; layer and model scope run their projections on scratch)\n"
          "  --threads   kernel threads per rank, 1 .. %d (default: cores / ranks; the bound is above any\n"
          "              machine's cores and keeps the OpenMP runtime from failing to start the threads)\n"
          "  --timeout   seconds any wait may block before the run is aborted, > 0 and at most a week\n"
          "              (default 120); it also bounds MPI start-up, the start of each execution, the result\n"
          "              gather and, with --verify, the gather of the outputs and rank 0's reference\n"
          "  --warmup    untimed executions before the measured one, 0 .. 1000 (default 0)\n"
          "  --tile      query rows per kernel call between progress polls, 1 .. 2^30 (default 256)\n"
          "  --overlap-bench [--reps R]  instead of the plan, time one burst forward ring step three ways:\n"
          "              compute alone, K,V exchange alone, and both overlapped (R: 1 .. 10^6)\n"
          "  Every rank must be given the same scenario and --set options: the resolved scenarios are\n"
          "  compared at start-up.\n",
          BS_EXIT_NO_DEVICE, BS_ARGS_MAX_THREADS);
}

/* Where the key a message starts with ("parallel.gpus: ...") was given: "FILE:LINE", "--set[i]", a
 * preset's place (bs_scenario_where), or NULL. */
static const char *key_where(const bs_scenario *sc, const char *msg) {
  char key[64];
  size_t n = strcspn(msg, ": ");
  if (n == 0 || n >= sizeof key || msg[n] != ':') return NULL;
  memcpy(key, msg, n);
  key[n] = '\0';
  return bs_scenario_where(sc, key);
}

static void print_table(FILE *f, const bs_run_report *rep) {
  const bs_result *r = &rep->res;
  fprintf(f, "%s  G=%d  N=%lld  %s  %s%s  %s scope  threads/rank=%d\n", bs_method_name(r->cfg.par.method), r->nranks,
          (long long)r->cfg.work.seq_len, bs_phase_name(r->cfg.work.phase), bs_layout_name(r->cfg.par.layout),
          r->cfg.work.causal ? " causal" : "", bs_scope_name(r->cfg.work.scope), rep->threads);
  fprintf(f, "%5s %10s %10s %10s %10s %10s %12s %12s %12s\n", "rank", "step_s", "fwd_s", "bwd_s", "compute_s",
          "exposed_s", "sent_B", "recv_B", "peak_B");
  for (int i = 0; i < r->nranks; i++) {
    const bs_rank_result *x = &r->ranks[i];
    fprintf(f, "%5d %10.4f %10.4f %10.4f %10.4f %10.4f %12lld %12lld %12lld\n", x->rank, x->step, x->fwd, x->bwd,
            x->compute, x->comm_exposed, (long long)x->bytes_sent, (long long)x->bytes_recv, (long long)x->peak_bytes);
  }
  fprintf(f, "peak RSS %.1f MiB", (double)r->mem.rss_bytes / 1048576.0);
  if (rep->scratch_bytes > 0) /* the operands of the modelled ops: in the RSS, outside the plan's peak_B */
    fprintf(f, " (of which scratch %.1f MiB, outside peak_B)", (double)rep->scratch_bytes / 1048576.0);
  if (rep->verify_tol > 0) {
    fprintf(f, "; verify (max error / max|ref|, bound %.0e):", rep->verify_tol);
    for (int k = BS_ROLE_O; k <= BS_ROLE_DV; k++)
      if (rep->verify_err[k] >= 0) fprintf(f, " %s %.2e", bs_role_name((bs_role)k), rep->verify_err[k]);
    fprintf(f, " %s", rep->verified ? "PASS" : "FAIL");
  }
  fprintf(f, "\n");
}

/* The result JSON with bytes per peer, threads and the verification added, written once. */
static int write_json(const char *path, bs_run_report *reps, const bs_result *res, int n, const bs_rt_device *dev,
                      char *err, size_t errlen) {
  cJSON *root = bs_output_json_tree("run", res, n);
  cJSON *arr = root ? cJSON_GetObjectItem(root, "results") : NULL;
  for (int i = 0; arr && i < n && i < cJSON_GetArraySize(arr); i++) {
    cJSON *rj = cJSON_GetArrayItem(arr, i), *ranks = cJSON_GetObjectItem(rj, "ranks");
    const bs_run_report *rep = &reps[i];
    int G = rep->res.nranks;
    cJSON_AddNumberToObject(rj, "threads_per_rank", rep->threads);
    if (dev) { /* a GPU run: what ran it (absent on the CPU backend) */
      cJSON_AddStringToObject(rj, "backend", "cuda");
      cJSON_AddStringToObject(rj, "comm", bs_xport_kind_name(dev->xport));
      cJSON_AddStringToObject(rj, "device", dev->name);
      cJSON_AddBoolToObject(rj, "device_shared", dev->shared);
    }
    if (rep->scratch_bytes > 0) cJSON_AddNumberToObject(rj, "scratch_bytes", (double)rep->scratch_bytes);
    for (int q = 0; ranks && q < G && q < cJSON_GetArraySize(ranks); q++) {
      cJSON *e = cJSON_GetArrayItem(ranks, q);
      cJSON *to = cJSON_AddArrayToObject(e, "sent_to"), *from = cJSON_AddArrayToObject(e, "recv_from");
      for (int p = 0; p < G; p++) {
        cJSON_AddItemToArray(to, cJSON_CreateNumber((double)rep->peer_sent[q * G + p]));
        cJSON_AddItemToArray(from, cJSON_CreateNumber((double)rep->peer_sent[p * G + q]));
      }
      cJSON_AddNumberToObject(e, "coll_sent", (double)rep->coll_sent[q]);
      cJSON *bd = cJSON_AddObjectToObject(e, "peak_breakdown");
      for (int c = 0; c < BS_MEM_CLASS_COUNT; c++)
        cJSON_AddNumberToObject(bd, bs_mem_class_name((bs_mem_class)c), (double)rep->peak_cls[q][c]);
    }
    if (rep->verify_tol > 0) {
      cJSON *v = cJSON_AddObjectToObject(rj, "verify");
      cJSON_AddNumberToObject(v, "bound", rep->verify_tol);
      cJSON_AddBoolToObject(v, "pass", rep->verified);
      for (int k = BS_ROLE_O; k <= BS_ROLE_DV; k++)
        if (rep->verify_err[k] >= 0) cJSON_AddNumberToObject(v, bs_role_name((bs_role)k), rep->verify_err[k]);
    }
  }
  int rc = bs_output_json_write(path, root, err, errlen);
  cJSON_Delete(root);
  return rc;
}

static const char *event_name(const bs_trace_event *e) {
  switch (e->kind) {
  case BS_OP_COMPUTE: return bs_kernel_name((bs_kernel)e->detail);
  case BS_OP_COLL: return bs_coll_name((bs_coll_kind)e->detail);
  default: return bs_op_kind_name((bs_op_kind)e->kind);
  }
}

static int write_trace(const char *path, bs_run_report *reps, int n, char *err, size_t errlen) {
  cJSON *root = cJSON_CreateObject(), *ev = cJSON_AddArrayToObject(root, "traceEvents");
  for (int i = 0; i < n; i++) {
    for (int r = 0; r < reps[i].res.nranks; r++) {
      cJSON *m = cJSON_CreateObject();
      char nm[32];
      snprintf(nm, sizeof nm, "rank %d", r);
      cJSON_AddStringToObject(m, "name", "thread_name");
      cJSON_AddStringToObject(m, "ph", "M");
      cJSON_AddNumberToObject(m, "pid", i);
      cJSON_AddNumberToObject(m, "tid", r);
      cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "args"), "name", nm);
      cJSON_AddItemToArray(ev, m);
    }
    for (int64_t j = 0; j < reps[i].nevents; j++) {
      const bs_trace_event *e = &reps[i].events[j];
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "name", event_name(e));
      cJSON_AddStringToObject(o, "cat", bs_op_kind_name((bs_op_kind)e->kind));
      cJSON_AddStringToObject(o, "ph", "X");
      if (!isfinite(e->t0 * 1e6) || !isfinite((e->t1 - e->t0) * 1e6)) { /* JSON has no inf or nan */
        cJSON_Delete(o);
        cJSON_Delete(root);
        snprintf(err, errlen, "%s: rank %d's event %lld has a time that is not finite; no trace written", path, e->rank,
                 (long long)j);
        return -1;
      }
      cJSON_AddNumberToObject(o, "ts", e->t0 * 1e6);
      cJSON_AddNumberToObject(o, "dur", (e->t1 - e->t0) * 1e6);
      cJSON_AddNumberToObject(o, "pid", i);
      cJSON_AddNumberToObject(o, "tid", e->rank);
      cJSON *a = cJSON_AddObjectToObject(o, "args");
      cJSON_AddNumberToObject(a, "step", e->step);
      if (e->peer >= 0) cJSON_AddNumberToObject(a, "peer", e->peer);
      if (e->bytes) cJSON_AddNumberToObject(a, "bytes", (double)e->bytes);
      cJSON_AddItemToArray(ev, o);
    }
  }
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) {
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  int rc = bs_write_file(path, text, strlen(text), err, errlen);
  free(text);
  return rc;
}

/* --overlap-bench: the first point with gpus = ranks, timed by bs_runtime_overlap_bench. */
static int run_overlap(const bs_scenario *sc, const char *scen, const bs_runtime_opts *o, int reps, const char *out,
                       int rank, int size) {
  char err[512] = "";
  for (int i = 0; i < sc->npoints; i++) {
    if (sc->points[i].par.gpus != size) continue;
    bs_overlap_result r;
    int rc = bs_runtime_overlap_bench(&sc->points[i], MPI_COMM_WORLD, o, reps, &r, err, sizeof err);
    if (rc == BS_RUN_EFATAL) {
      fprintf(stderr, "burstsim run: rank %d: %s\n", rank, err);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (rc) {
      if (rank == 0) fprintf(stderr, "%s: %s\n", scen, err);
      return 2;
    }
    if (rank == 0) {
      const bs_config *c = &sc->points[i];
      printf(
        "overlap benchmark: burst forward step, %d ranks x %d threads, B=%lld heads=%lld kv_heads=%lld d=%lld, "
        "block %lld tokens, %s, %d reps (medians, max over ranks)\n",
        size, r.threads, (long long)c->work.batch, (long long)c->model.heads, (long long)c->model.kv_heads,
        (long long)c->model.head_dim, (long long)r.block_tokens, bs_dtype_name(c->model.dtype), r.reps);
      printf(
        "  compute alone %.6f s | K,V exchange alone %.6f s (%lld B, %.2f GB/s) | overlapped %.6f s | "
        "overlapped / max = %.3f\n",
        r.compute_s, r.comm_s, (long long)r.bytes_per_step, (double)r.bytes_per_step / r.comm_s / 1e9, r.overlap_s,
        r.ratio);
      if (out) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "tool", "burstsim");
        cJSON_AddStringToObject(j, "mode", "overlap-bench");
        cJSON_AddNumberToObject(j, "ranks", size);
        cJSON_AddNumberToObject(j, "threads_per_rank", r.threads);
        cJSON_AddNumberToObject(j, "seq_len", (double)c->work.seq_len);
        cJSON_AddNumberToObject(j, "heads", (double)c->model.heads);
        cJSON_AddNumberToObject(j, "head_dim", (double)c->model.head_dim);
        cJSON_AddNumberToObject(j, "block_tokens", (double)r.block_tokens);
        cJSON_AddNumberToObject(j, "bytes_per_step", (double)r.bytes_per_step);
        cJSON_AddNumberToObject(j, "reps", r.reps);
        cJSON_AddNumberToObject(j, "compute_s", r.compute_s);
        cJSON_AddNumberToObject(j, "comm_s", r.comm_s);
        cJSON_AddNumberToObject(j, "overlap_s", r.overlap_s);
        cJSON_AddNumberToObject(j, "ratio", r.ratio);
        char *text = cJSON_Print(j);
        cJSON_Delete(j);
        if (!text || bs_write_file(out, text, strlen(text), err, sizeof err)) {
          fprintf(stderr, "burstsim run: %s\n", text ? err : "out of memory");
          free(text);
          return 2;
        }
        free(text);
      }
    }
    return 0;
  }
  if (rank == 0) fprintf(stderr, "%s: parallel.gpus: no scenario point has gpus = %d (the mpirun -np)\n", scen, size);
  return 2;
}

/*
 * --backend cuda: every rank opens its GPU (collective). Returns 0 with *dev set (NULL for the CPU
 * backend), or the exit status: BS_EXIT_NO_DEVICE (no CUDA in the build or no device), 2 (the ranks
 * do not fit the devices); rank 0 prints the reason.
 */
static int open_device(const bs_run_args *A, int rank, bs_cuda_module *mod, bs_rt_device **dev) {
  *dev = NULL;
  if (!A->backend) return 0;
  char err[512] = "";
  int code = bs_cuda_module_load(mod, err, sizeof err) ? BS_EXIT_NO_DEVICE : 0;
  if (!code) {
    MPI_Comm world = MPI_COMM_WORLD;
    int rc = mod->open(&world, A->comm ? BS_XPORT_NCCL : BS_XPORT_MPI, dev, err, sizeof err);
    code = rc == 0 ? 0 : rc == BS_CUDA_MODULE_NODEV ? BS_EXIT_NO_DEVICE : 2;
  }
  int worst = code;
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (code) fprintf(stderr, "burstsim run: rank %d: --backend cuda: %s\n", rank, err);
  else if (worst && rank == 0) fprintf(stderr, "burstsim run: --backend cuda: another rank has no usable device\n");
  if (worst && *dev) {
    mod->close(*dev);
    *dev = NULL;
  }
  if (!worst && rank == 0 && *dev)
    printf("backend cuda on %s, comm %s%s\n", (*dev)->name, A->comm ? "nccl" : "mpi (host staging)",
           (*dev)->shared ? ", ranks share the GPU" : "");
  return worst;
}

/*
 * Every rank must run with the same flags that shape its communication (--verify, --warmup,
 * --overlap-bench, --reps, --tile, --timeout, --backend, --comm, the fault hook): ranks given
 * different ones (an MPMD line) would meet different collectives, and a watchdog abort racing
 * MPI_Finalize could hang mpirun. Collective; 0, or -1 on every rank with the message in err.
 */
static int flags_same(const bs_run_args *A, char *err, size_t errlen) {
  struct {
    int64_t tile;
    double timeout;
    int verify, overlap, reps, warmup, fault, fault_rank, fault_step, backend, comm;
  } f;
  memset(&f, 0, sizeof f); /* padding included: the bytes are hashed */
  f.tile = A->tile;
  f.timeout = A->timeout;
  f.verify = A->verify;
  f.overlap = A->overlap;
  f.reps = A->reps;
  f.warmup = A->warmup;
  f.fault = A->fault;
  f.fault_rank = A->fault_rank;
  f.fault_step = A->fault_step;
  f.backend = A->backend;
  f.comm = A->comm;
  char derr[512];
  if (!bs_bytes_same(
        MPI_COMM_WORLD, &f, sizeof f,
        "set of run flags (--verify, --warmup, --overlap-bench, --reps, --tile, --timeout, --backend, --comm)", derr,
        sizeof derr))
    return 0;
  snprintf(err, errlen, "%s; every rank must be given the same flags", derr);
  return -1;
}

/* MPI_Finalize, bounded: a rank that never reaches it must not hang the others. */
static void finalize(int rank, double timeout) {
  bs_test_stall(rank, "finalize");
  bs_watchdog_arm("burstsim run", rank, "MPI shutdown (MPI_Finalize)", timeout);
  MPI_Finalize();
  bs_watchdog_disarm();
}

int cmd_run(int argc, char **argv) {
  bs_run_args A;
  char aerr[512];
  if (bs_run_args_parse(argc, argv, &A, aerr, sizeof aerr)) {
    fprintf(stderr, "burstsim run: %s\n", aerr);
    usage(stderr);
    return 2;
  }
  if (A.help) {
    usage(stdout);
    return 0;
  }
  if (!A.backend) bs_blas_core_warn("run");
  const char *scen = A.scenario, *out = A.out, *trace = A.trace;
  char **sets = A.sets;
  int nsets = A.nsets, overlap = A.overlap, reps = A.reps;
  bs_runtime_opts o;
  memset(&o, 0, sizeof o);
  o.verify = A.verify;
  o.tile_rows = A.tile;
  o.threads = A.threads;
  o.timeout_s = A.timeout;
  o.warmup = A.warmup;
  o.fault = A.fault == 1 ? BS_FAULT_EXIT : A.fault == 2 ? BS_FAULT_STALL : BS_FAULT_NONE;
  o.fault_rank = A.fault_rank;
  o.fault_step = A.fault_step;
  o.trace = trace != NULL;
  char lerr[512];
  if (bs_host_mpi_limit_ok(lerr, sizeof lerr)) { /* before MPI_Init, which would crash on it */
    if (bs_launcher_rank() == 0) fprintf(stderr, "burstsim run: %s\n", lerr);
    return 2;
  }
  int provided;
  /* A rank that never starts (stopped, or launched wrong) must not hang the others in MPI_Init. */
  bs_watchdog_arm("burstsim run", -1, "MPI start-up (MPI_Init)", A.timeout);
  bs_test_stall(bs_launcher_rank(), "init");
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bs_scenario sc;
  char err[1024] = "";
  bs_watchdog_arm("burstsim run", rank, "start-up (comparing the scenarios of the ranks)", A.timeout);
  int bad = bs_scenario_load(scen, sets, nsets, &sc, err, sizeof err) != 0, anybad = bad;
  MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (anybad) {
    if (bad && rank == 0) fprintf(stderr, "burstsim run: %s\n", err);
    else if (bad) fprintf(stderr, "burstsim run: rank %d: %s\n", rank, err);
    if (!bad) bs_scenario_free(&sc);
    finalize(rank, A.timeout);
    return 2;
  }
  if (flags_same(&A, err, sizeof err) || bs_points_same(MPI_COMM_WORLD, sc.points, sc.npoints, err, sizeof err)) {
    if (rank == 0) fprintf(stderr, "burstsim run: %s: %s\n", scen, err);
    bs_scenario_free(&sc);
    finalize(rank, A.timeout);
    return 2;
  }
  bs_watchdog_disarm();
  int out_ok = 1; /* outputs checked before the first point, creating nothing */
  if (rank == 0) {
    const bs_path_role outs[] = {{"--out", out}, {"--trace", trace}};
    if (bs_output_precheck(outs, 2, scen, NULL, NULL, err, sizeof err)) {
      fprintf(stderr, "burstsim run: %s\n", err);
      out_ok = 0;
    }
  }
  MPI_Bcast(&out_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!out_ok) {
    bs_scenario_free(&sc);
    finalize(rank, A.timeout);
    return 2;
  }
  if (overlap) {
    int code = run_overlap(&sc, scen, &o, reps, out, rank, size);
    bs_scenario_free(&sc);
    finalize(rank, A.timeout);
    return code;
  }
  bs_rt_device *dev = NULL;
  bs_cuda_module mod;
  memset(&mod, 0, sizeof mod);
  int dcode = open_device(&A, rank, &mod, &dev);
  if (dcode) {
    bs_scenario_free(&sc);
    finalize(rank, A.timeout);
    return dcode;
  }
  o.device = dev;
  bs_run_report *reps_out = calloc((size_t)sc.npoints, sizeof *reps_out);
  int nrep = 0, code = 0;
  for (int i = 0; i < sc.npoints && code == 0; i++) {
    if (sc.points[i].par.gpus != size) continue;
    int rc = bs_runtime_run(&sc.points[i], MPI_COMM_WORLD, &o, &reps_out[nrep], err, sizeof err);
    if (rc == BS_RUN_EFATAL) {
      fprintf(stderr, "burstsim run: rank %d: %s\n", rank, err);
      fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (rc == BS_RUN_EINPUT) {
      if (rank == 0) {
        const char *where = key_where(&sc, err); /* --set[i] for a value --set gave, as sim says */
        if (where && where[0]) fprintf(stderr, "%s: %s\n", where, err);
        else fprintf(stderr, "%s: %s\n", scen, err);
      }
      code = 2;
      bs_run_report_free(&reps_out[nrep]);
      break;
    }
    const char *outs[] = {out, trace};
    if (rank == 0) print_table(bs_output_table_stream(outs, 2), &reps_out[nrep]);
    if (rc == BS_RUN_EVERIFY) {
      if (rank == 0) fprintf(stderr, "burstsim run: %s\n", err);
      code = 1;
    }
    nrep++;
  }
  if (nrep == 0 && code == 0) {
    if (rank == 0) fprintf(stderr, "%s: parallel.gpus: no scenario point has gpus = %d (the mpirun -np)\n", scen, size);
    code = 2;
  }
  if (rank == 0 && nrep > 0 && code != 2) {
    bs_result *res = calloc((size_t)nrep, sizeof *res);
    if (!res) {
      fprintf(stderr, "burstsim run: out of memory for the results\n");
      code = 2;
    }
    for (int i = 0; res && i < nrep; i++) res[i] = reps_out[i].res;
    if (res && out && write_json(out, reps_out, res, nrep, dev, err, sizeof err)) {
      fprintf(stderr, "burstsim run: --out %s\n", err);
      code = 2;
    }
    if (res && trace && write_trace(trace, reps_out, nrep, err, sizeof err)) {
      fprintf(stderr, "burstsim run: --trace %s\n", err);
      code = 2;
    }
    free(res);
  }
  for (int i = 0; i < nrep; i++) bs_run_report_free(&reps_out[i]);
  free(reps_out);
  bs_scenario_free(&sc);
  if (dev) mod.close(dev);
  finalize(rank, A.timeout);
  return code;
}
