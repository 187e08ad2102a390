/*
 * scenario_impl.h — private to src/scenario*.c: the key table's types, the
 * parsing state and the functions the scenario files share (scenario.c: the
 * sweep, scenario_read.c: the file, scenario_keys.c: the keys,
 * scenario_values.c: the value parsers).
 */
#ifndef BURSTSIM_SCENARIO_IMPL_H
#define BURSTSIM_SCENARIO_IMPL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include "scenario.h"

#define MAX_VALUES 64
#define MAX_POINTS 100000
#define MAX_FILE (16 << 20) /* bytes of a scenario file */
#define SHOWN 48            /* characters of a value quoted in a message */

typedef int (*setter)(bs_config *c, const char *v, char *why, size_t n);

typedef struct {
  const char *section, *key;
  setter set;
  const char *help;
} key_def;

typedef struct {
  const key_def *def;
  char *values[MAX_VALUES];
  int nvalues;
  char where[PATH_MAX + 32]; /* "file:line" or "--set[i]" */
} entry;

/* The keys of the table (scenario_keys.c checks the count). */
#define SCN_NKEYS 73
extern const key_def scn_keys[SCN_NKEYS];

/* ---- parsing state ---------------------------------------------------- */

typedef struct {
  const char *path;
  char *text;       /* the whole file, NUL-terminated */
  const char *next; /* start of the next line to hand to inih */
  int line;         /* lines read so far = line of the last line handed to inih */
  entry entries[SCN_NKEYS];
  int have[SCN_NKEYS];
  unsigned char autod[SCN_NKEYS]; /* given as auto (search_auto) */
  char *err;
  size_t errlen;
  int failed;
  int regular; /* the scenario is a regular file: relative platform paths are next to it */
} parse_state;

/* scenario_values.c */
#define NEAR_MAX 64 /* longest name compared; longer ones get no suggestion */

/*
 * The candidate closest to v when it is close: an edit distance of at most 2
 * or a prefix either way, or v with a minor version added (one edit); of
 * equally close ones, the first that extends v (a minor version added, or v
 * its prefix), else the first; NULL when none is.
 */
typedef struct {
  const char *v, *best;
  int dist;
  int best_extends; /* best extends v: a minor version added, or v its prefix */
} nearest;

const char *scn_clip(const char *v, char buf[SHOWN + 4]);
void scn_near_init(nearest *nr, const char *v);
void scn_near_offer(nearest *nr, const char *cand);
void scn_near_append(const nearest *nr, char *msg, size_t n);
int scn_parse_int64(const char *v, int64_t lo, int64_t hi, int suffixes, int64_t *out, char *why, size_t n);
int scn_parse_bool(const char *v, int *out, char *why, size_t n);
int scn_parse_enum(const char *v, const char *const *names, char *why, size_t n);
int scn_parse_name(const char *v, char *dst, size_t cap, char *why, size_t n);

/* scenario_keys.c */
int scn_find_key(const char *section, const char *key);
int scn_known_section(const char *s);
void scn_suggest_key(const char *section, const char *key, char *msg, size_t n);
void scn_suggest_section(const char *s, char *msg, size_t n);

/* scenario_docs.c: workload.documents' syntax (at the key), then its documents (at the point,
 * with seq_len and seed known; a relative histogram file is next to a regular scenario file). */
int scn_docs_check(const char *v, char *why, size_t n);
int scn_docs_resolve(bs_config *c, const char *scenario_path, int regular, char *why, size_t n);

/* scenario_read.c */
char *scn_read_scenario(const char *path, size_t *longest, int *regular, char *err, size_t errlen);
int scn_apply_set(parse_state *st, const char *set, int idx);
void scn_state_free(parse_state *st);
int scn_parse_lines(parse_state *st, size_t size);

#endif
