/*
 * output.h — results out: the result JSON of DESIGN.md, CSV for sweeps and the
 * stdout table. Files are written to a temporary name and renamed, so nothing
 * is ever left half-written.
 */
#ifndef BURSTSIM_OUTPUT_H
#define BURSTSIM_OUTPUT_H

#include <stdio.h>
#include <stddef.h>
#include "plans/result.h"

/* {"tool","version","mode","results":[...]} to path ("-" = stdout). */
int bs_output_json(const char *path, const char *mode, const bs_result *r, int n,
                   char *err, size_t errlen);
int bs_output_csv(const char *path, const bs_result *r, int n, char *err, size_t errlen);
/* The human table: method, GPUs, seq, step, fwd, bwd, exposed %, bytes, peak GiB, OOM. */
void bs_output_table(FILE *f, const bs_result *r, int n);

/* Writes `len` bytes of `data` to path via a temporary file and rename(). */
int bs_write_atomic(const char *path, const char *data, size_t len, char *err, size_t errlen);

#endif
