/*
 * scenario.h — INI scenario files (parsed with inih) into a list of bs_config
 * points: lists in keys sweep the cross product, --set overrides apply first.
 */
#ifndef BURSTSIM_SCENARIO_H
#define BURSTSIM_SCENARIO_H

#include <stddef.h>
#include "plans/config.h"

typedef struct {
  bs_config *points;   /* the cross product, in a stable order */
  int npoints;
  char path[512];
} bs_scenario;

/*
 * Loads `path`, applying `nsets` overrides "section.key=value" (from --set).
 * On error returns -1 and writes "FILE:LINE: section.key: what is wrong" into
 * err; nothing is allocated then.
 */
int bs_scenario_load(const char *path, char **sets, int nsets, bs_scenario *out,
                     char *err, size_t errlen);
void bs_scenario_free(bs_scenario *s);

#endif
