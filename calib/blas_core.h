/*
 * blas_core.h — whether OpenBLAS runs kernels narrower than the CPU offers. Debian's OpenBLAS
 * 0.3.21 names some AVX-512 Xeons "Prescott" and then runs sgemm about 7x below the FMA peak;
 * every command that times a GEMM (calib, run, validate, bench) says so, with the fix.
 */
#ifndef BURSTSIM_BLAS_CORE_H
#define BURSTSIM_BLAS_CORE_H

#include <stddef.h>

/* 1 with "OpenBLAS runs its X kernels on a CPU with Y: ...; set OPENBLAS_CORETYPE=Z" in msg when
 * the core OpenBLAS chose lacks the AVX2 kernels and the CPU has AVX2 or AVX-512; else 0. */
int bs_blas_core_weak(char *msg, size_t n);

/* The same said on stderr as "burstsim CMD: warning: ..." (under mpirun, by rank 0 alone). */
void bs_blas_core_warn(const char *cmd);

#endif
