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
  char **where;        /* per key of the table: "FILE:LINE" or "--set[i]" where given, else NULL */
} bs_scenario;

/*
 * Loads `path`, applying `nsets` overrides "section.key=value" (from --set).
 * On error returns -1 and writes "FILE:LINE: section.key: what is wrong" into
 * err; nothing is allocated then.
 */
int bs_scenario_load(const char *path, char **sets, int nsets, bs_scenario *out,
                     char *err, size_t errlen);
void bs_scenario_free(bs_scenario *s);

/*
 * Where "section.key" was given: "FILE:LINE" or "--set[i]", or the scenario's
 * path when the key took its default (errors found after loading, such as an
 * unknown topology, name it so). NULL for a name that is not a key.
 */
const char *bs_scenario_where(const bs_scenario *s, const char *section_key);

/* The i-th key of the table as "section.key" (tests walk every key), or NULL past the end. */
const char *bs_scenario_key(int i, char *buf, size_t n);

#endif
