/*
 * extend.h — what the shortcuts that extend two simulated points along a line share (the layer
 * shortcut, layers.c; the micro-batch shortcut, micro.c; the search's walks, walk.c): a byte count
 * extended exactly, and the check that extended times are still times.
 */
#ifndef BS_SIM_EXTEND_H
#define BS_SIM_EXTEND_H

#include <stdint.h>
#include "plans/result.h"

/* *x = a + k (b - a) for a byte count; -1 when it passes int64 (never a wrapped count). */
int sim_extend_count(int64_t a, int64_t b, int64_t k, int64_t *x);

/* 1 when every time of an extended result is in range: the point's exactly (>= 0), a rank's and
 * explain's parts within rounding (1e-9 of the step), waiting for peers within the exposed time. */
int sim_extension_sound(const bs_result *r);

#endif
