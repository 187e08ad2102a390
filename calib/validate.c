/*
 * validate.c — the spawning, reading, simulating and comparing behind
 * `burstsim validate` (validate.h). Real runs and calibrations are separate
 * mpirun jobs of this very binary, their output kept in a log file of the
 * work directory (its tail becomes the error message when a job fails).
 */
#include "calib/validate.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "base/fileio.h"
#include "sim/sim.h"

#define MAX_ARGS 96

static const char *self_exe(const bs_validate_opts *o, char *buf, size_t len) {
  if (o->exe) return o->exe;
  ssize_t n = readlink("/proc/self/exe", buf, len - 1);
  if (n <= 0) return "burstsim";
  buf[n] = 0;
  return buf;
}

/* The last lines of a log, for error messages. */
static void log_tail(const char *path, char *out, size_t len) {
  FILE *f = fopen(path, "rb");
  out[0] = 0;
  if (!f) return;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  long from = n > (long)len - 1 ? n - (long)len + 1 : 0;
  fseek(f, from, SEEK_SET);
  size_t got = fread(out, 1, len - 1, f);
  out[got] = 0;
  fclose(f);
}

/*
 * A stop signal (SIGINT, SIGTERM, SIGHUP) while a job runs is forwarded to the job's process group
 * (mpirun and the ranks it starts), the job is waited for, and spawn reports the stop. These two
 * are the only way a signal handler reaches the job; they are set and cleared around one wait.
 */
static volatile sig_atomic_t job_pgid, stop_sig;
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define NSTOP ((int)(sizeof stop_signals / sizeof stop_signals[0]))

static void forward_stop(int sig) {
  int saved = errno;
  if (!stop_sig) stop_sig = sig;
  if (job_pgid > 0) kill(-(pid_t)job_pgid, sig);
  errno = saved;
}

int bs_validate_stopped(void) { return stop_sig; }

static const char *stop_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP"; }

/* Handlers for the stop signals not ignored (an ignored one stays ignored); old[] gets the previous. */
static void catch_stops(struct sigaction *old) {
  for (int i = 0; i < NSTOP; i++) {
    sigaction(stop_signals[i], NULL, &old[i]);
    if (!(old[i].sa_flags & SA_SIGINFO) && old[i].sa_handler == SIG_IGN) continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward_stop; /* no SA_RESTART: the wait returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(stop_signals[i], &sa, NULL);
  }
}

/* Waits for the job; after a stop, at most 10 s before its whole group is killed. Returns 0 or -1. */
static int wait_job(pid_t pid, int *st) {
  for (int polls = 0;;) {
    pid_t got = waitpid(pid, st, stop_sig ? WNOHANG : 0);
    if (got == pid) return 0;
    if (got < 0 && errno != EINTR) return -1;
    if (got == 0) {
      if (++polls == 200) kill(-pid, SIGKILL);
      struct timespec ts = {0, 50 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
}

/* Runs argv in a process group of its own with stdout and stderr into logpath; returns the exit status,
 * or -1 (with a stop signal: the job's group was signalled and waited for, err says which signal). */
static int spawn(char *const argv[], const char *logpath, char *err, size_t errlen) {
  struct sigaction old[NSTOP];
  stop_sig = 0;
  catch_stops(old);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errlen, "fork failed: %s", strerror(errno));
    for (int i = 0; i < NSTOP; i++) sigaction(stop_signals[i], &old[i], NULL);
    return -1;
  }
  if (pid == 0) {
    setpgid(0, 0);
    for (int i = 0; i < NSTOP; i++) sigaction(stop_signals[i], &old[i], NULL);
    int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    bs_sim_blas_threads_restore(); /* the runs get the user's BLAS threads, not the sim's one */
    execvp(argv[0], argv);
    fprintf(stderr, "cannot execute %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid); /* also here: the child may not have run yet */
  job_pgid = pid;
  if (stop_sig) kill(-pid, stop_sig); /* arrived before the group was known */
  int st, werr = wait_job(pid, &st) ? errno : 0;
  int sig = stop_sig;
  if (sig) kill(-pid, SIGKILL); /* what mpirun left of its job */
  job_pgid = 0;
  for (int i = 0; i < NSTOP; i++) sigaction(stop_signals[i], &old[i], NULL);
  if (sig) {
    snprintf(err, errlen, "stopped by %s", stop_name(sig));
    return -1;
  }
  if (werr) {
    snprintf(err, errlen, "waitpid failed: %s", strerror(werr));
    return -1;
  }
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* mpirun and its options for this machine: as root --allow-run-as-root; --oversubscribe; no binding. */
static int mpirun_prefix(const bs_validate_opts *o, int G, char **argv, char *npbuf, size_t nplen) {
  int n = 0;
  argv[n++] = (char *)(o->mpirun ? o->mpirun : "mpirun");
  if (geteuid() == 0) argv[n++] = "--allow-run-as-root";
  argv[n++] = "--oversubscribe";
  /* Unbound, a rank's threads may use every core (Open MPI binds to a core with np <= 2). */
  argv[n++] = "--bind-to";
  argv[n++] = "none";
  argv[n++] = "-np";
  snprintf(npbuf, nplen, "%d", G);
  argv[n++] = npbuf;
  return n;
}

static int finish(int rc, const char *what, int G, const char *logpath, char *err, size_t errlen) {
  if (rc == 0) return 0;
  char tail[700];
  log_tail(logpath, tail, sizeof tail);
  if (rc > 0) snprintf(err, errlen, "%s on %d rank(s) failed (exit %d); end of %s:\n%s", what, G, rc, logpath, tail);
  else if (stop_sig)
    snprintf(err, errlen, "stopped by %s: %s on %d rank(s) was passed the signal and has ended (log %s)",
             stop_name(stop_sig), what, G, logpath);
  return -1;
}

int bs_validate_calibrate(const bs_validate_opts *o, int G, const char *dtype, int head_dim, int64_t max_block,
                          const char *profile_out, char *err, size_t errlen) {
  char *argv[MAX_ARGS], np[16], exe[1024], logpath[1200], hd[24], mb[24];
  int n = mpirun_prefix(o, G, argv, np, sizeof np);
  argv[n++] = (char *)self_exe(o, exe, sizeof exe);
  argv[n++] = "calib";
  if (!o->full_calib) argv[n++] = "--quick";
  if (o->backend) {
    argv[n++] = "--backend";
    argv[n++] = (char *)o->backend;
  }
  argv[n++] = "--dtype";
  argv[n++] = (char *)dtype;
  if (head_dim > 0) {
    snprintf(hd, sizeof hd, "%d", head_dim);
    argv[n++] = "--head-dim";
    argv[n++] = hd;
  }
  if (max_block > 0) {
    snprintf(mb, sizeof mb, "%lld", (long long)max_block);
    argv[n++] = "--max-block";
    argv[n++] = mb;
  }
  argv[n++] = "--out";
  argv[n++] = (char *)profile_out;
  argv[n] = NULL;
  snprintf(logpath, sizeof logpath, "%s/calib-g%d.log", o->workdir, G);
  if (o->log)
    fprintf(o->log, "validate: calibrating on %d rank(s)%s (log %s)\n", G, o->full_calib ? "" : ", quick", logpath);
  return finish(spawn(argv, logpath, err, errlen), "burstsim calib", G, logpath, err, errlen);
}

int bs_validate_run(const bs_validate_opts *o, int G, const char *scenario, char **sets, int nsets,
                    const char *results_out, char *err, size_t errlen) {
  char *argv[MAX_ARGS], np[16], exe[1024], logpath[1200], gset[64], warm[16];
  if (nsets > MAX_ARGS / 2 - 16) {
    snprintf(err, errlen, "validate: too many --set options (%d)", nsets);
    return -1;
  }
  int n = mpirun_prefix(o, G, argv, np, sizeof np);
  argv[n++] = (char *)self_exe(o, exe, sizeof exe);
  argv[n++] = "run";
  argv[n++] = (char *)scenario;
  if (o->backend) {
    argv[n++] = "--backend";
    argv[n++] = (char *)o->backend;
  }
  if (o->comm) {
    argv[n++] = "--comm";
    argv[n++] = (char *)o->comm;
  }
  for (int i = 0; i < nsets; i++) {
    argv[n++] = "--set";
    argv[n++] = sets[i];
  }
  snprintf(gset, sizeof gset, "parallel.gpus=%d", G);
  argv[n++] = "--set";
  argv[n++] = gset;
  if (o->warmup > 0) {
    snprintf(warm, sizeof warm, "%d", o->warmup);
    argv[n++] = "--warmup";
    argv[n++] = warm;
  }
  argv[n++] = "--out";
  argv[n++] = (char *)results_out;
  argv[n] = NULL;
  /* The log sits beside the results: RESULTS.json -> RESULTS.log. */
  size_t rl = strlen(results_out);
  snprintf(logpath, sizeof logpath, "%.*s.log", (int)(rl > 5 && !strcmp(results_out + rl - 5, ".json") ? rl - 5 : rl),
           results_out);
  if (o->log) fprintf(o->log, "validate: running the points with %d rank(s) (log %s)\n", G, logpath);
  return finish(spawn(argv, logpath, err, errlen), "burstsim run", G, logpath, err, errlen);
}

/* ------------------------------------------------------------ reading */

static double num(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

static const char *str(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : "";
}

static int lookup(const char *name, const char *(*fn)(int), int count) {
  for (int i = 0; i < count; i++)
    if (!strcmp(fn(i), name)) return i;
  return -1;
}

static const char *method_name_i(int i) { return bs_method_name((bs_method)i); }
static const char *layout_name_i(int i) { return bs_layout_name((bs_layout)i); }
static const char *phase_name_i(int i) { return bs_phase_name((bs_phase)i); }

int bs_validate_read_results(const char *path, bs_result **out, int *n, char *err, size_t errlen) {
  *out = NULL;
  *n = 0;
  char *text = bs_read_file(path, NULL, err, errlen);
  if (!text) return -1;
  cJSON *root = cJSON_Parse(text);
  free(text);
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "results");
  if (!cJSON_IsArray(rs)) {
    cJSON_Delete(root);
    snprintf(err, errlen, "%s: no \"results\" list", path);
    return -1;
  }
  int cnt = cJSON_GetArraySize(rs);
  bs_result *r = calloc(cnt > 0 ? (size_t)cnt : 1, sizeof *r);
  if (!r) {
    cJSON_Delete(root);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, rs) {
    bs_result *x = &r[i++];
    bs_config_default(&x->cfg);
    x->mode = "run";
    x->cfg.par.method = (bs_method)lookup(str(e, "method"), method_name_i, BS_METHOD_COUNT);
    x->cfg.par.gpus = (int)num(e, "gpus");
    x->cfg.work.seq_len = (int64_t)num(e, "seq_len");
    x->cfg.work.causal = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "causal"));
    x->cfg.par.layout = (bs_layout)lookup(str(e, "layout"), layout_name_i, 3);
    x->cfg.work.phase = (bs_phase)lookup(str(e, "phase"), phase_name_i, 3);
    x->cfg.par.lao = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "lao"));
    x->cfg.par.bwd_opt = !strcmp(str(e, "bwd_comm"), "optimized");
    const char *er = str(e, "error");
    snprintf(x->error, sizeof x->error, "%s", er);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "time_s");
    x->time.step = num(t, "step");
    x->time.fwd = num(t, "fwd");
    x->time.bwd = num(t, "bwd");
    x->time.compute = num(t, "compute");
    x->time.comm_exposed = num(t, "comm_exposed");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "comm_bytes");
    x->comm.per_rank_max_sent = (int64_t)num(b, "per_rank_max_sent");
    x->comm.total = (int64_t)num(b, "total");
    x->comm.intra_node = (int64_t)num(b, "intra_node");
    x->comm.inter_node = (int64_t)num(b, "inter_node");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "memory");
    x->mem.peak_bytes_max = (int64_t)num(m, "peak_bytes_max");
    x->mem.capacity_bytes = (int64_t)num(m, "capacity_bytes");
    x->mem.rss_bytes = (int64_t)num(m, "rss_bytes");
    x->mem.oom = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "oom"));
  }
  cJSON_Delete(root);
  *out = r;
  *n = cnt;
  return 0;
}

int bs_validate_same_point(const bs_config *cfg, const bs_result *m) {
  const bs_config *c = &m->cfg;
  return c->par.method == cfg->par.method && c->par.gpus == cfg->par.gpus && c->work.seq_len == cfg->work.seq_len &&
         c->work.causal == cfg->work.causal && c->par.layout == cfg->par.layout && c->work.phase == cfg->work.phase &&
         c->par.lao == cfg->par.lao && c->par.bwd_opt == cfg->par.bwd_opt;
}

/* ------------------------------------------------------------- predict */

int bs_validate_predict(const bs_config *cfg, const char *profile, bs_result *out, char *err, size_t errlen) {
  bs_config c = *cfg;
  snprintf(c.cluster.topology, sizeof c.cluster.topology, "host");
  snprintf(c.cluster.profile, sizeof c.cluster.profile, "%s", profile);
  c.cluster.nodes = 0;
  /* The runtime counts collective bytes as the ring algorithms send them (Open MPI picks
   * its own shapes and reports none): predict with rings so bytes compare exactly. */
  c.cluster.coll_algo = BS_COLL_ALGO_RING;
  bs_sim_opts so;
  bs_sim_opts_default(&so);
  so.profile = profile;
  memset(out, 0, sizeof *out);
  return bs_sim_run(&c, &so, out, err, errlen);
}

static double pct(double pred, double meas) {
  if (meas == 0) return pred == 0 ? 0.0 : NAN;
  return 100.0 * (pred - meas) / meas;
}

void bs_validate_compare(const bs_result *m, const bs_result *p, bs_validate_error *e) {
  e->step = pct(p->time.step, m->time.step);
  e->fwd = pct(p->time.fwd, m->time.fwd);
  e->bwd = pct(p->time.bwd, m->time.bwd);
  e->comm_exposed = pct(p->time.comm_exposed, m->time.comm_exposed);
  e->peak = pct((double)p->mem.peak_bytes_max, (double)m->mem.peak_bytes_max);
  e->bytes = pct((double)p->comm.total, (double)m->comm.total);
  e->bytes_exact = p->comm.total == m->comm.total && p->comm.per_rank_max_sent == m->comm.per_rank_max_sent;
}
