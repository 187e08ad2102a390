/*
 * watchdog.c — see watchdog.h. The thread only reads the armed deadline under
 * a mutex and, on expiry, writes one line and calls _exit: it never calls MPI
 * (the ranks run MPI_THREAD_FUNNELED), and _exit with a non-zero status is
 * what makes mpirun end the other ranks.
 */
#include "watchdog.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int started, armed, wd_rank;
static double deadline, wd_timeout;
static char wd_who[32], wd_phase[96], wd_waiting[128];

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *watch(void *arg) {
  (void)arg;
  for (;;) {
    struct timespec nap = {0, 50 * 1000 * 1000};
    nanosleep(&nap, NULL);
    pthread_mutex_lock(&mu);
    if (armed && mono_s() > deadline) {
      fprintf(stderr,
              "%s: rank %d: %s did not complete within %.1f s%s%s%s: a rank died or stalled; aborting the job\n",
              wd_who, wd_rank, wd_phase, wd_timeout, wd_waiting[0] ? " (waiting for " : "", wd_waiting,
              wd_waiting[0] ? ")" : "");
      fflush(stderr);
      _exit(BS_WATCHDOG_EXIT);
    }
    pthread_mutex_unlock(&mu);
  }
  return NULL;
}

int bs_launcher_rank(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    char *end;
    long r = v ? strtol(v, &end, 10) : -1;
    if (v && *v && !*end && r >= 0 && r < 1 << 30) return (int)r;
  }
  return 0;
}

int bs_watchdog_arm(const char *who, int rank, const char *phase, double timeout_s) {
  pthread_mutex_lock(&mu);
  if (!started) {
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    started = pthread_create(&th, &at, watch, NULL) == 0;
    pthread_attr_destroy(&at);
    if (!started) {
      pthread_mutex_unlock(&mu);
      return -1;
    }
  }
  snprintf(wd_who, sizeof wd_who, "%s", who);
  snprintf(wd_phase, sizeof wd_phase, "%s", phase);
  wd_waiting[0] = '\0';
  wd_rank = rank >= 0 ? rank : bs_launcher_rank();
  wd_timeout = timeout_s > 0 ? timeout_s : BS_WATCHDOG_DEFAULT_S;
  deadline = mono_s() + wd_timeout;
  armed = 1;
  pthread_mutex_unlock(&mu);
  return 0;
}

void bs_watchdog_waiting(const char *fmt, ...) {
  pthread_mutex_lock(&mu);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(wd_waiting, sizeof wd_waiting, fmt, ap);
  va_end(ap);
  pthread_mutex_unlock(&mu);
}

void bs_watchdog_feed(void) {
  pthread_mutex_lock(&mu);
  if (armed) deadline = mono_s() + wd_timeout;
  pthread_mutex_unlock(&mu);
}

void bs_watchdog_disarm(void) {
  pthread_mutex_lock(&mu);
  armed = 0;
  pthread_mutex_unlock(&mu);
}

void bs_test_stall(int rank, const char *phase) {
  const char *v = getenv("BURSTSIM_TEST_STALL");
  if (!v) return;
  char *end;
  long r = strtol(v, &end, 10);
  if (end == v || *end != ':' || r != rank || strcmp(end + 1, phase)) return;
  bs_watchdog_disarm();
  fprintf(stderr, "burstsim: rank %d: BURSTSIM_TEST_STALL: stopping in phase %s\n", rank, phase);
  fflush(stderr);
  for (;;) pause();
}

#define ARRIVE_TAG 32001

int bs_arrive(MPI_Comm comm, const char *phase, double timeout_s, int unbounded, char *err, size_t errlen) {
  int rank, size, token = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size == 1) return 0;
  if (rank != 0) return MPI_Send(&token, 1, MPI_INT, 0, ARRIVE_TAG, comm) == MPI_SUCCESS ? 0 : -1;
  int *tok = calloc((size_t)size, sizeof *tok);
  MPI_Request *req = calloc((size_t)size, sizeof *req);
  if (!tok || !req) {
    free(tok);
    free(req);
    snprintf(err, errlen, "%s: out of memory", phase);
    return -1;
  }
  req[0] = MPI_REQUEST_NULL;
  for (int r = 1; r < size; r++) MPI_Irecv(&tok[r], 1, MPI_INT, r, ARRIVE_TAG, comm, &req[r]);
  double limit = timeout_s > 0 ? timeout_s : BS_WATCHDOG_DEFAULT_S, t0 = mono_s();
  int done = 0;
  while (!done) {
    MPI_Testall(size, req, &done, MPI_STATUSES_IGNORE);
    if (done) break;
    if (!unbounded && mono_s() - t0 > limit) break;
    struct timespec nap = {0, 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  int rc = 0;
  if (!done) {
    char list[96] = "";
    int missing = 0;
    for (int r = 1; r < size; r++) {
      int got = 0;
      if (req[r] != MPI_REQUEST_NULL) MPI_Test(&req[r], &got, MPI_STATUS_IGNORE);
      if (req[r] == MPI_REQUEST_NULL || got) continue;
      size_t l = strlen(list);
      if (missing < 8) snprintf(list + l, sizeof list - l, "%s%d", missing ? ", " : "", r);
      else if (missing == 8) snprintf(list + l, sizeof list - l, ", ...");
      missing++;
    }
    snprintf(err, errlen, "rank%s %s did not reach %s within %.1f s", missing > 1 ? "s" : "", list, phase, limit);
    rc = -1;
  }
  free(tok);
  free(req);
  return rc;
}
