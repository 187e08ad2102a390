/*
 * profile_build.h — the profile of a calibration as a value: a cJSON tree in
 * the format of profile/profile.h (plus "machine", "date", "calibration", "fits",
 * "links_fit", "profile_check" and the raw "measurements", which the loader
 * ignores) that the caller may extend and then writes once.
 */
#ifndef BURSTSIM_CALIB_PROFILE_BUILD_H
#define BURSTSIM_CALIB_PROFILE_BUILD_H

#include <stddef.h>
#include "calib/calib.h"
#include "profile/profile.h"

/*
 * Fits d and returns the profile named `name` as a tree (free it with
 * cJSON_Delete); *p receives the same profile as the simulator's struct.
 * Returns NULL with a message when nothing could be fitted or memory ran out.
 */
struct cJSON *bs_calib_profile_json(const bs_calib_data *d, const bs_calib_opts *o, const char *name, bs_profile *p,
                                    char *err, size_t errlen);

/* The simulator's time (bs_profile_kernel_time) for the shape of measurement k under profile p. */
double bs_calib_model_time(const bs_profile *p, const bs_calib_kpoint *k);

#endif
