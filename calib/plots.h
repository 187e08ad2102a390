/*
 * plots.h — what a calibration measured against what its profile predicts,
 * as gnuplot data, a script and (when gnuplot runs) PNGs.
 */
#ifndef BURSTSIM_CALIB_PLOTS_H
#define BURSTSIM_CALIB_PLOTS_H

#include <stddef.h>
#include "calib/calib.h"
#include "profile/profile.h"

/* Writes dir/plots.gp, dir/kernel_*.dat and dir/links.dat, then runs gnuplot there (a failure of gnuplot
 * is logged, not an error). Returns 0, or -1 with a message. */
int bs_calib_write_plots(const bs_calib_data *d, const bs_profile *p, const bs_calib_opts *o, const char *dir,
                         char *err, size_t errlen);

#endif
