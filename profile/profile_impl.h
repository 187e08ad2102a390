/*
 * profile_impl.h — what the files of profile/ share and nobody else reads: one kernel model's parser
 * (profile.c) and the attention_kernels section's (profile_attention.c).
 */
#ifndef BURSTSIM_PROFILE_IMPL_H
#define BURSTSIM_PROFILE_IMPL_H

#include <stddef.h>

#include "profile/profile.h"

struct cJSON;

/* Reads one kernel model (profile.h's format) at kernels.KNAME (attention_kernels.KNAME when KNAME holds
 * a dot) into m: 0, or -1 with "PATH: where: what" in err. */
int bs_profile_parse_kernel(const struct cJSON *kj, const char *kname, bs_kernel_model *m, const char *path, char *err,
                            size_t errlen);

/* Reads the optional "attention_kernels" section into p (kernels must be read first): 0, or -1. */
int bs_profile_parse_attention_kernels(const struct cJSON *aj, bs_profile *p, const char *path, char *err,
                                       size_t errlen);

#endif
