/*
 * isolate.c — every point in a forked child (bs_sim_run_source), because
 * SimGrid can be initialised only once per process. The child simulates
 * (engine.c) and writes the result through a pipe; it dies with its parent
 * (PR_SET_PDEATHSIG), its stderr is captured so that SimGrid's CRITICAL line
 * becomes the point's error instead of a backtrace, and an allocation it
 * cannot make ends it with an exit code the parent reports as "out of memory"
 * (with the ulimit -v in force). The parent meanwhile holds SIGINT, SIGTERM
 * and SIGHUP, to kill and reap the child before it ends by the signal, and
 * says every BURSTSIM_LIVENESS_S seconds (30 by default) that a long point is
 * still running. BURSTSIM_TEST_CRASH=LABEL (a test hook) makes the child of the
 * point so labelled ("point 2/4") abort, the failure a crashed simulation is.
 */
#include "sim/point.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sim/load.h"

int sim_write_all(int fd, const void *p, size_t n) {
  const char *s = p;
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

int sim_read_all(int fd, void *p, size_t n) {
  char *s = p;
  while (n) {
    ssize_t r = read(fd, s, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    s += r;
    n -= (size_t)r;
  }
  return 0;
}

int sim_child_start(sim_child *ch, char *err, size_t errlen) {
  int fds[2];
  ch->fork_errno = 0;
  if (pipe(fds)) {
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    ch->fork_errno = errno;
    close(fds[0]);
    close(fds[1]);
    snprintf(err, errlen, "fork: %s", strerror(ch->fork_errno));
    return -1;
  }
  if (pid == 0) {
    /* Dies with the parent, however it ends; the check closes the race with a parent gone before prctl. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) _exit(CHILD_ORPHANED);
    close(fds[0]);
    ch->pid = 0;
    ch->fd = fds[1];
    return 1;
  }
  close(fds[1]);
  ch->pid = pid;
  ch->fd = fds[0];
  return 0;
}

int sim_child_reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

/* In the child: an allocation SimGrid (C++) could not make ends the child with CHILD_OUT_OF_MEMORY. */
static void child_out_of_memory(void) { _exit(CHILD_OUT_OF_MEMORY); }

/*
 * The child's stderr goes to a temporary file: when SimGrid aborts (xbt_die: a
 * platform it cannot route, a stack it cannot allocate) its CRITICAL line
 * becomes the point's error instead of a backtrace; anything else the child
 * wrote is copied to stderr as it was.
 */
static int child_said(FILE *cap, char *said, size_t saidlen) {
  char line[512];
  if (!cap || fseek(cap, 0, SEEK_SET)) return 0;
  while (fgets(line, sizeof line, cap)) {
    const char *c = strstr(line, "/CRITICAL] ");
    if (!c) continue;
    c += strlen("/CRITICAL] ");
    size_t n = strcspn(c, "\n");
    snprintf(said, saidlen, "%.*s", (int)n, c);
    return 1;
  }
  return 0;
}

static void child_replay(FILE *cap) {
  char buf[4096];
  size_t n;
  if (!cap || fseek(cap, 0, SEEK_SET)) return;
  while ((n = fread(buf, 1, sizeof buf, cap)) > 0) fwrite(buf, 1, n, stderr);
  fflush(stderr);
}

/* "; the address-space limit (ulimit -v) is N MiB" when one is set, else "". */
static const char *as_limit_note(void) {
  static char note[96];
  struct rlimit rl;
  note[0] = '\0';
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    snprintf(note, sizeof note, " (the address-space limit, ulimit -v, is %llu MiB)",
             (unsigned long long)(rl.rlim_cur >> 20));
  return note;
}

/* "the CPU time limit (ulimit -t N) was reached" when a CPU limit is set and sig is how the kernel
 * enforces it (SIGXCPU at the soft limit, SIGKILL at the hard one), else "". */
static const char *cpu_limit_note(int sig) {
  static char note[96];
  struct rlimit rl;
  note[0] = '\0';
  if ((sig == SIGXCPU || sig == SIGKILL) && getrlimit(RLIMIT_CPU, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    snprintf(note, sizeof note, "the CPU time limit (ulimit -t %llu) was reached", (unsigned long long)rl.rlim_cur);
  return note;
}

/*
 * The parent while its child simulates: SIGINT, SIGTERM and SIGHUP (unless
 * ignored) are held, so that the parent first kills and reaps the child, then
 * ends by the signal as it would have; a line every BURSTSIM_LIVENESS_S seconds
 * (30 by default; tests set it lower) says the point is still running (on a
 * terminal, rewritten in place; none without a label: --quiet).
 */
static volatile sig_atomic_t watch_signal;
static void watch_on_signal(int sig) { watch_signal = sig; }

static const int watch_sigs[3] = {SIGINT, SIGTERM, SIGHUP};

typedef struct {
  pid_t child;
  struct sigaction old[3];
  int installed[3];
  sigset_t oldmask;
} child_watch;

static void watch_begin(child_watch *w, pid_t child) {
  memset(w, 0, sizeof *w);
  w->child = child;
  watch_signal = 0;
  sigset_t block;
  sigemptyset(&block);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = watch_on_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; i++) {
    if (sigaction(watch_sigs[i], NULL, &w->old[i]) || w->old[i].sa_handler == SIG_IGN) continue;
    if (sigaction(watch_sigs[i], &sa, NULL) == 0) {
      w->installed[i] = 1;
      sigaddset(&block, watch_sigs[i]);
    }
  }
  sigprocmask(SIG_BLOCK, &block, &w->oldmask);
}

/* Waits until fd has data or the child ended; returns 0, or the signal that asked this process to stop. */
static int watch_until_readable(child_watch *w, int fd, const char *label) {
  const char *iv = getenv("BURSTSIM_LIVENESS_S");
  long every = iv && *iv ? strtol(iv, NULL, 10) : 30;
  if (every < 1 || every > 86400) every = 30;
  int live = label != NULL, tty = isatty(2);
  double t0 = sim_wall_now(), next = t0 + (double)every;
  for (;;) {
    if (watch_signal) return watch_signal;
    struct pollfd p = {fd, POLLIN, 0};
    double left = next - sim_wall_now();
    struct timespec ts = {0, 0};
    if (left > 0) {
      ts.tv_sec = (time_t)left;
      ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
    }
    int n = ppoll(&p, 1, live ? &ts : NULL, &w->oldmask);
    if (n > 0) return 0;
    if (n < 0 && errno != EINTR) return 0; /* the reads that follow report it */
    if (n == 0 && live) {                  /* on a terminal, in place of the progress line */
      fprintf(stderr, tty ? "\r[%s] still running (%.0f s)   " : "burstsim sim: %s still running (%.0f s)\n", label,
              sim_wall_now() - t0);
      fflush(stderr);
      next += (double)every;
    }
  }
}

/* Puts the signal dispositions and mask back; a signal held meanwhile is delivered now. */
static void watch_end(child_watch *w) {
  for (int i = 0; i < 3; i++)
    if (w->installed[i]) sigaction(watch_sigs[i], &w->old[i], NULL);
  int sig = watch_signal;
  sigprocmask(SIG_SETMASK, &w->oldmask, NULL);
  if (sig) raise(sig);
}

/* What the child sends back: rc, its message, the result, the per-rank results, the links. */
typedef struct {
  int rc;
  char err[512];
  bs_result r;
  int nr;
  bs_rank_result *ranks;
  int nlinks;
  bs_link_stat *links;
} answer;

/* In the child: simulates and writes the answer; never returns. */
__attribute__((noreturn)) static void child_simulate(const bs_config *cfg, const bs_sim_opts *opts,
                                                     const bs_sim_source *source, int want_links, FILE *cap, int fd) {
  if (cap) dup2(fileno(cap), 2);
  const char *crash = getenv("BURSTSIM_TEST_CRASH");
  if (crash && opts->label && !strcmp(crash, opts->label)) abort(); /* test hook: a crashed simulation */
  bs_sim_on_out_of_memory(child_out_of_memory);
  bs_result r;
  char e[512] = "";
  bs_link_stat *links = NULL;
  int nlinks = 0;
  int rc = sim_point(cfg, opts, source, &r, want_links ? &links : NULL, &nlinks, e, sizeof e);
  int ok = sim_write_all(fd, &rc, sizeof rc) == 0 && sim_write_all(fd, e, sizeof e) == 0 &&
           sim_write_all(fd, &r, sizeof r) == 0;
  int nr = rc == 0 ? r.nranks : 0;
  ok = ok && sim_write_all(fd, &nr, sizeof nr) == 0 &&
       (!nr || sim_write_all(fd, r.ranks, sizeof *r.ranks * (size_t)nr) == 0) &&
       sim_write_all(fd, &nlinks, sizeof nlinks) == 0 &&
       (!nlinks || sim_write_all(fd, links, sizeof *links * (size_t)nlinks) == 0);
  close(fd);
  _exit(ok ? 0 : 3); /* no atexit: SimGrid's teardown is not needed */
}

/* In the parent: the child's answer, whole; 0, or -1 (what was read is freed). */
static int read_answer(int fd, answer *a) {
  memset(a, 0, sizeof *a);
  a->rc = -1;
  int ok = sim_read_all(fd, &a->rc, sizeof a->rc) == 0 && sim_read_all(fd, a->err, sizeof a->err) == 0 &&
           sim_read_all(fd, &a->r, sizeof a->r) == 0 && sim_read_all(fd, &a->nr, sizeof a->nr) == 0;
  if (ok && a->nr > 0) {
    a->ranks = malloc(sizeof *a->ranks * (size_t)a->nr);
    ok = a->ranks && sim_read_all(fd, a->ranks, sizeof *a->ranks * (size_t)a->nr) == 0;
  }
  if (ok) ok = sim_read_all(fd, &a->nlinks, sizeof a->nlinks) == 0;
  if (ok && a->nlinks > 0) {
    a->links = malloc(sizeof *a->links * (size_t)a->nlinks);
    ok = a->links && sim_read_all(fd, a->links, sizeof *a->links * (size_t)a->nlinks) == 0;
  }
  if (ok) return 0;
  free(a->ranks);
  free(a->links);
  a->ranks = NULL;
  a->links = NULL;
  return -1;
}

/* Why a child gave no answer: a signal to this process, out of memory, SimGrid's own words,
 * or how the child ended. */
static void lost_child_error(int sig, int status, FILE *cap, char *err, size_t errlen) {
  char said[256];
  int has_said = child_said(cap, said, sizeof said);
  int oom = (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_OUT_OF_MEMORY) ||
            (has_said && (strstr(said, "alloc") || strstr(said, "Memory") || strstr(said, "memory")));
  if (!has_said) child_replay(cap); /* its own words, whatever they were */
  if (sig) snprintf(err, errlen, "stopped by signal %d before the simulation ended", sig);
  else if (oom)
    snprintf(err, errlen, "out of memory: the simulation process could not allocate%s%s%s",
             has_said ? " (SimGrid: " : "", has_said ? said : "", has_said ? ")" : "");
  else if (has_said) snprintf(err, errlen, "SimGrid stopped the simulation: %s", said);
  else if (WIFSIGNALED(status) && cpu_limit_note(WTERMSIG(status))[0])
    snprintf(err, errlen, "the simulation process died of signal %d: %s", WTERMSIG(status),
             cpu_limit_note(WTERMSIG(status)));
  else if (WIFSIGNALED(status) && as_limit_note()[0])
    snprintf(err, errlen, "the simulation process died of signal %d, most likely out of memory", WTERMSIG(status));
  else if (WIFSIGNALED(status))
    snprintf(err, errlen,
             "the simulation process died of signal %d (SimGrid aborted; see its "
             "message above)",
             WTERMSIG(status));
  else
    snprintf(err, errlen, "the simulation process ended (status %d) without a result",
             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  if (oom || (WIFSIGNALED(status) && !cpu_limit_note(WTERMSIG(status))[0] && as_limit_note()[0])) {
    size_t n = strlen(err);
    snprintf(err + n, errlen > n ? errlen - n : 0, "%s", as_limit_note());
  }
}

/* The point in this process (opts->in_process): SimGrid starts here, once. */
static int run_in_process(const bs_config *cfg, const bs_sim_opts *opts, const bs_sim_source *source, bs_result *out,
                          bs_link_stat **links_out, int *nlinks_out, char *err, size_t errlen) {
  bs_link_stat *links = NULL;
  int nlinks = 0;
  int rc = sim_point(cfg, opts, source, out, links_out ? &links : NULL, &nlinks, err, errlen);
  sim_record_profile(out, opts);
  if (links_out) {
    *links_out = links;
    *nlinks_out = nlinks;
  }
  return rc;
}

int bs_sim_run_source(const bs_config *cfg, const bs_sim_opts *opts_in, const bs_sim_source *source, bs_result *out,
                      bs_link_stat **links_out, int *nlinks_out, char *err, size_t errlen) {
  bs_sim_opts opts;
  if (opts_in) opts = *opts_in;
  else bs_sim_opts_default(&opts);
  if (links_out) *links_out = NULL;
  if (nlinks_out) *nlinks_out = 0;
  if (opts.in_process) return run_in_process(cfg, &opts, source, out, links_out, nlinks_out, err, errlen);
  FILE *cap = tmpfile(); /* the child's stderr (NULL: not captured) */
  sim_child ch;
  int started = sim_child_start(&ch, err, errlen);
  if (started < 0) { /* the result names its point, as a child lost later does */
    if (cap) fclose(cap);
    int e = ch.fork_errno;
    if (e == ENOMEM || e == EAGAIN)
      snprintf(err, errlen, "out of memory: cannot fork the simulation process: %s%s", strerror(e), as_limit_note());
    memset(out, 0, sizeof *out);
    out->cfg = *cfg;
    out->mode = "sim";
    snprintf(out->error, sizeof out->error, "%s", err);
    sim_record_profile(out, &opts);
    return -1;
  }
  if (started == 1) child_simulate(cfg, &opts, source, links_out != NULL, cap, ch.fd);
  child_watch w;
  watch_begin(&w, ch.pid);
  int sig = watch_until_readable(&w, ch.fd, opts.label);
  answer a;
  memset(&a, 0, sizeof a);
  int ok = !sig && read_answer(ch.fd, &a) == 0;
  close(ch.fd);
  if (sig) kill(ch.pid, SIGKILL);
  int status = sim_child_reap(ch.pid);
  watch_end(&w); /* a signal that came meanwhile now ends this process as it would have */
  if (!ok) {
    memset(out, 0, sizeof *out);
    out->cfg = *cfg;
    out->mode = "sim";
    lost_child_error(sig, status, cap, err, errlen);
    if (cap) fclose(cap);
    snprintf(out->error, sizeof out->error, "%s", err);
    sim_record_profile(out, &opts);
    return -1;
  }
  if (cap) {
    child_replay(cap);
    fclose(cap);
  }
  *out = a.r;
  sim_record_profile(out, &opts);
  out->mode = "sim";
  out->ranks = a.ranks;
  out->nranks = a.ranks ? a.nr : 0;
  if (a.rc) snprintf(err, errlen, "%s", a.err);
  if (links_out) {
    *links_out = a.links;
    *nlinks_out = a.nlinks;
  } else {
    free(a.links);
  }
  return a.rc;
}
