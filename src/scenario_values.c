/*
 * scenario_values.c — the value parsers the keys of a scenario file share
 * (integers with K, M, G suffixes, booleans, one of a list of names, a name
 * that fits its field), a value clipped for a message, and the nearest known
 * name to one mistyped (edit distance, prefix, or a minor version left out).
 */
#include "scenario_impl.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* v for a message: at most SHOWN characters, "..." when cut, so the reason after it survives. */
const char *scn_clip(const char *v, char buf[SHOWN + 4]) {
  if (strlen(v) <= SHOWN) return v;
  memcpy(buf, v, SHOWN);
  strcpy(buf + SHOWN, "...");
  return buf;
}

/* ---- "did you mean" ------------------------------------------------- */

/* Levenshtein distance of a and b (insert, delete, substitute one character). */
static int edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > NEAR_MAX || lb > NEAR_MAX) return NEAR_MAX + 1;
  int row[NEAR_MAX + 1];
  for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j];
      int best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

/* Whether one of a, b starts with the other (and the shorter is not empty). */
static int is_prefix(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  size_t m = la < lb ? la : lb;
  return m > 0 && strncmp(a, b, m) == 0;
}

void scn_near_init(nearest *nr, const char *v) {
  nr->v = v;
  nr->best = NULL;
  nr->dist = 3;
  nr->best_extends = 0;
}

/* Whether cand is v with a minor version added after a version number ("llama3-70b" and
 * "llama3.1-70b", "qwen2-72b" and "qwen2.5-72b"): the same model named short. */
static int minor_version_added(const char *v, const char *cand) {
  size_t p = 0;
  while (v[p] && v[p] == cand[p]) p++;
  if (p == 0 || !isdigit((unsigned char)v[p - 1]) || cand[p] != '.' || !isdigit((unsigned char)cand[p + 1])) return 0;
  size_t q = p + 1;
  while (isdigit((unsigned char)cand[q])) q++;
  return strcmp(cand + q, v + p) == 0;
}

/* The closest name wins; a name that only adds a minor version counts as one edit, and it or a
 * name that v begins wins a tie (llama3-70b: llama3.1-70b, not llama2-70b, a neighbour version one
 * substitution away; llama2-70: llama2-70b, not llama2-7b). */
void scn_near_offer(nearest *nr, const char *cand) {
  int d = edit_distance(nr->v, cand), minor = minor_version_added(nr->v, cand);
  int extends = minor || (strlen(nr->v) < strlen(cand) && is_prefix(nr->v, cand));
  if (d > 2 && is_prefix(nr->v, cand)) d = 2;
  if (minor) d = 1;
  if (d < nr->dist || (extends && d == nr->dist && !nr->best_extends)) {
    nr->dist = d;
    nr->best = cand;
    nr->best_extends = extends;
  }
}

/* Appends " (did you mean NAME?)" to msg when nr found a close name. */
void scn_near_append(const nearest *nr, char *msg, size_t n) {
  size_t off = strlen(msg);
  if (nr->best && off < n) snprintf(msg + off, n - off, " (did you mean %s?)", nr->best);
}

/* ---- value parsers -------------------------------------------------- */

int scn_parse_int64(const char *v, int64_t lo, int64_t hi, int suffixes, int64_t *out, char *why, size_t n) {
  errno = 0;
  char *end = NULL;
  while (isspace((unsigned char)*v)) v++;
  if (*v == '\0') {
    snprintf(why, n, "empty value");
    return -1;
  }
  char cb[SHOWN + 4];
  long long x = strtoll(v, &end, 10);
  if (end == v || errno == ERANGE) {
    snprintf(why, n, "'%s' is not an integer in range", scn_clip(v, cb));
    return -1;
  }
  int64_t mult = 1;
  if (suffixes && (*end == 'K' || *end == 'k')) mult = 1024, end++;
  else if (suffixes && (*end == 'M' || *end == 'm')) mult = 1024 * 1024, end++;
  else if (suffixes && (*end == 'G' || *end == 'g')) mult = 1024LL * 1024 * 1024, end++;
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0') {
    snprintf(why, n, "'%s' is not an integer%s", scn_clip(v, cb), suffixes ? " (suffixes K, M, G allowed)" : "");
    return -1;
  }
  if (x != 0 && (x > INT64_MAX / mult || x < INT64_MIN / mult)) {
    snprintf(why, n, "'%s' overflows a 64-bit integer", scn_clip(v, cb));
    return -1;
  }
  int64_t r = (int64_t)x * mult;
  if (r < lo || r > hi) {
    snprintf(why, n, "%lld is out of range [%lld, %lld]", (long long)r, (long long)lo, (long long)hi);
    return -1;
  }
  *out = r;
  return 0;
}

int scn_parse_bool(const char *v, int *out, char *why, size_t n) {
  static const char *yes[] = {"true", "on", "yes", "1"}, *no[] = {"false", "off", "no", "0"};
  for (int i = 0; i < 4; i++) {
    if (!strcasecmp(v, yes[i])) return *out = 1, 0;
    if (!strcasecmp(v, no[i])) return *out = 0, 0;
  }
  char cb[SHOWN + 4];
  snprintf(why, n, "'%s' is not a boolean (true/false, on/off)", scn_clip(v, cb));
  return -1;
}

/* Index of v in the NULL-terminated names, or -1 with a message listing them. */
int scn_parse_enum(const char *v, const char *const *names, char *why, size_t n) {
  for (int i = 0; names[i]; i++)
    if (!strcmp(v, names[i])) return i;
  char cb[SHOWN + 4];
  size_t off = (size_t)snprintf(why, n, "'%s' is not one of:", scn_clip(v, cb));
  nearest nr;
  scn_near_init(&nr, v);
  for (int i = 0; names[i]; i++) {
    scn_near_offer(&nr, names[i]);
    if (off < n) off += (size_t)snprintf(why + off, n - off, " %s", names[i]);
  }
  scn_near_append(&nr, why, n);
  return -1;
}

int scn_parse_name(const char *v, char *dst, size_t cap, char *why, size_t n) {
  if (*v == '\0') {
    snprintf(why, n, "empty value");
    return -1;
  }
  if (strlen(v) >= cap) {
    snprintf(why, n, "value longer than %zu characters", cap - 1);
    return -1;
  }
  strcpy(dst, v);
  return 0;
}
