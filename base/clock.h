/*
 * clock.h — the monotonic clock every measuring floor reads (calibration, the
 * runtime, the communicators' deadlines): seconds as a double, never going
 * back when the wall clock is set.
 */
#ifndef BURSTSIM_BASE_CLOCK_H
#define BURSTSIM_BASE_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double bs_now_s(void);

#endif
