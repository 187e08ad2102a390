/*
 * warnings.h — settings a point accepts that have no effect (ZeRO at attention scope, a window
 * that holds the whole sequence, recompute outside training, ...) or that look like a mistake
 * (heads x head_dim not hidden): said once per sweep on stderr and kept in the result JSON's
 * "warnings" array, instead of silence.
 */
#ifndef BURSTSIM_WARNINGS_H
#define BURSTSIM_WARNINGS_H

#include <stddef.h>
#include "plans/config.h"

#define BS_WARNING_LEN 256

/* Calls say(text, ctx) for each warning of c; each text starts with the key at fault. */
void bs_config_warnings(const bs_config *c, void (*say)(const char *text, void *ctx), void *ctx);
/* The same for the keys a sweep may set for some of its points only (pp_chunks, ulysses_degree,
 * tp_variant): said when no point of the n reads the value. */
void bs_sweep_warnings(const bs_config *pts, int n, void (*say)(const char *text, void *ctx), void *ctx);

#endif
