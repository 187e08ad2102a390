/*
 * scenario.h — INI scenario files (parsed with inih) into a list of bs_config
 * points: lists in keys sweep the cross product, --set overrides apply first.
 */
#ifndef BURSTSIM_SCENARIO_H
#define BURSTSIM_SCENARIO_H

#include <limits.h>
#include <stddef.h>
#include "plans/config.h"

typedef struct {
  bs_config *points; /* the cross product, in a stable order */
  int npoints;
  char path[PATH_MAX];
  char **where; /* per key of the table: "FILE:LINE" or "--set[i]", or as bs_scenario_where */
  /* per key of the table: given as auto (bs_scenario_auto_keys); then, per key again, given as a
   * list of more than one value (bs_scenario_listed); then, per key, a list with a value twice */
  unsigned char *autos;
} bs_scenario;

/*
 * Loads `path`, applying `nsets` overrides "section.key=value" (from --set).
 * On error returns -1 and writes "FILE:LINE: section.key: what is wrong" into
 * err; nothing is allocated then. A relative cluster.topology FILE.xml or
 * cluster.profile FILE.json given in the file is taken relative to the
 * scenario's directory; one given by --set, relative to the current one.
 */
int bs_scenario_load(const char *path, char **sets, int nsets, bs_scenario *out, char *err, size_t errlen);
void bs_scenario_free(bs_scenario *s);

/*
 * Where "section.key" was given: "FILE:LINE" or "--set[i]"; for a model shape
 * key a preset gave, "FILE:LINE (from model.preset = X)" (the preset's line)
 * or "FILE (from the default model.preset = X)"; else the scenario's path
 * when the key took its default (errors found after loading, such as an
 * unknown topology, name it so). NULL for a name that is not a key.
 */
const char *bs_scenario_where(const bs_scenario *s, const char *section_key);

/*
 * `burstsim search`: a value "auto" of one of these keys ("section.key", the
 * list ending with NULL; "section.key=word": the value word instead, for a key
 * whose auto has a meaning of its own) is taken as not given, so that search
 * spreads the key over its legal values; NULL (the default) turns this off. And whether a key
 * was given (in the file or by --set) rather than taking its default.
 */
void bs_scenario_auto_keys(const char *const *section_keys);
int bs_scenario_given(const bs_scenario *s, const char *section_key);
/* Whether one of those keys was given as auto (its last value, in the file or by --set). */
int bs_scenario_given_auto(const bs_scenario *s, const char *section_key);

/* Whether a key was given a list of more than one value (a sweep over it). */
int bs_scenario_listed(const bs_scenario *s, const char *section_key);
/* Whether a key's list holds one value twice (compared by what the values set). */
int bs_scenario_repeated(const bs_scenario *s, const char *section_key);

/* The i-th key of the table as "section.key" (tests walk every key), or NULL past the end. */
const char *bs_scenario_key(int i, char *buf, size_t n);

#endif
