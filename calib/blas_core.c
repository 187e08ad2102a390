/*
 * blas_core.c — the core OpenBLAS picked (openblas_get_corename) against the CPU's own vector
 * units (__builtin_cpu_supports): a core without AVX2 kernels on an AVX2 or AVX-512 CPU makes
 * every timed GEMM several times too slow, silently. Said, never corrected (the user's
 * OPENBLAS_CORETYPE decides).
 */
#include "blas_core.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

int bs_blas_core_weak(char *msg, size_t n) {
#if defined(__x86_64__) || defined(__i386__)
  /* OpenBLAS's x86 cores with AVX2 (or wider) GEMM kernels */
  static const char *const wide[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", NULL};
  const char *core = openblas_get_corename();
  if (!core) return 0;
  for (int i = 0; wide[i]; i++)
    if (!strcasecmp(core, wide[i])) return 0;
  __builtin_cpu_init();
  int avx512 = __builtin_cpu_supports("avx512f") != 0, avx2 = __builtin_cpu_supports("avx2") != 0;
  if (!avx512 && !avx2) return 0;
  snprintf(msg, n,
           "OpenBLAS runs its %s kernels on a CPU with %s: GEMMs run several times below the CPU's peak "
           "(timed figures too low); set OPENBLAS_CORETYPE=%s",
           core, avx512 ? "AVX-512" : "AVX2", avx512 ? "SKYLAKEX" : "HASWELL");
  return 1;
#else
  (void)msg;
  (void)n;
  return 0;
#endif
}

void bs_blas_core_warn(const char *cmd) {
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  if (!rank) rank = getenv("PMI_RANK");
  if (rank && atoi(rank) != 0) return;
  char msg[320];
  if (bs_blas_core_weak(msg, sizeof msg)) fprintf(stderr, "burstsim %s: warning: %s\n", cmd, msg);
}
