/*
 * blas_threads.c — the simulator without an OpenBLAS thread pool (sim.h).
 * OpenBLAS, linked for `run`, starts its pool when the program loads and joins
 * it in a fork handler; under a low address-space limit its threads never get
 * their buffers and fork() waits for ever. The simulator calls no BLAS, so a
 * command that forks simulations re-executes itself once with
 * OPENBLAS_NUM_THREADS=1, keeping what the user set for the programs it starts.
 */
#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* OPENBLAS_NUM_THREADS as the user set it ("" = unset), kept across the re-execution. */
#define BLAS_GIVEN "BURSTSIM_OPENBLAS_NUM_THREADS_GIVEN"

/* The arguments this process was started with (/proc/self/cmdline), NULL-terminated; NULL on failure. */
static char **own_arguments(char **text) {
  FILE *f = fopen("/proc/self/cmdline", "rb");
  if (!f) return NULL;
  size_t n = 0, cap = 4096;
  char *t = malloc(cap + 1);
  size_t got;
  while (t && (got = fread(t + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *nt = realloc(t, (cap *= 2) + 1);
      if (!nt) free(t);
      t = nt;
    }
  }
  fclose(f);
  if (!t || n == 0) {
    free(t);
    return NULL;
  }
  t[n] = '\0';
  size_t argc = 0;
  for (size_t i = 0; i < n; i++) argc += t[i] == '\0';
  char **argv = calloc(argc + 2, sizeof *argv);
  if (!argv) {
    free(t);
    return NULL;
  }
  size_t k = 0;
  for (size_t i = 0; i < n && k <= argc; i += strlen(t + i) + 1) argv[k++] = t + i;
  *text = t;
  return argv;
}

void bs_sim_single_blas_thread(void) {
  const char *v = getenv("OPENBLAS_NUM_THREADS");
  if (v && !strcmp(v, "1")) return;
  char *text = NULL;
  char **argv = own_arguments(&text);
  if (!argv) return;
  /* What the user gave, for the programs this one starts (bs_sim_blas_threads_restore). */
  if (setenv(BLAS_GIVEN, v ? v : "", 1) == 0 && setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0) {
    fflush(stdout);
    fflush(stderr);
    execv("/proc/self/exe", argv);
  }
  /* Not possible: go on with the pool as it is (it only matters under a low ulimit -v). */
  if (v) setenv("OPENBLAS_NUM_THREADS", v, 1);
  else unsetenv("OPENBLAS_NUM_THREADS");
  unsetenv(BLAS_GIVEN);
  free(argv);
  free(text);
}

void bs_sim_blas_threads_restore(void) {
  const char *g = getenv(BLAS_GIVEN);
  if (!g) return;
  if (*g) setenv("OPENBLAS_NUM_THREADS", g, 1);
  else unsetenv("OPENBLAS_NUM_THREADS");
  unsetenv(BLAS_GIVEN);
}
