/*
 * args.c — the flag readers of args.h. Numbers go through strtol / strtoll /
 * strtod with the whole word checked, so "12abc", "", " 5" and out-of-range
 * values are errors rather than silently truncated or defaulted.
 */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bs_args_init(bs_args *a, int argc, char **argv, int first, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
  a->argc = argc;
  a->argv = argv;
  a->i = first - 1;
  a->err = err;
  a->errlen = errlen;
  if (err && errlen) err[0] = '\0';
}

int bs_args_next(bs_args *a) {
  a->i++;
  a->flag = a->val = NULL;
  if (a->i >= a->argc || !a->argv[a->i]) return 0;
  a->word = a->argv[a->i];
  return 1;
}

int bs_args_fail(bs_args *a, const char *fmt, ...) {
  if (a->err && a->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->err, a->errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* Once-only flags: an error the second time. */
static int note_seen(bs_args *a, const char *flag) {
  for (int k = 0; k < a->nseen; k++)
    if (!strcmp(a->seen[k], flag)) return bs_args_fail(a, "%s: given twice (once only)", flag);
  if (a->nseen < BS_ARGS_MAX_SEEN) a->seen[a->nseen++] = flag;
  return 0;
}

int bs_args_flag(bs_args *a, const char *flag, int mode) {
  const char *w = a->word;
  size_t n = strlen(flag);
  if (strncmp(w, flag, n) || (w[n] != '\0' && w[n] != '=')) return 0;
  a->flag = flag;
  if (!(mode & BS_ARG_REPEAT) && note_seen(a, flag)) return -1;
  if (!(mode & BS_ARG_VALUE)) {
    if (w[n] == '=') return bs_args_fail(a, "%s: takes no value (got '%s')", flag, w + n + 1);
    return 1;
  }
  if (w[n] == '=') {
    a->val = w + n + 1;
    return 1;
  }
  if (a->i + 1 >= a->argc || !a->argv[a->i + 1]) return bs_args_fail(a, "%s: needs a value", flag);
  a->val = a->argv[++a->i];
  return 1;
}

int bs_args_positional(const bs_args *a) { return a->word[0] != '-' || !strcmp(a->word, "-"); }

int bs_args_unknown(bs_args *a, const char *what) {
  if (what) return bs_args_fail(a, "'%s': %s", a->word, what);
  return bs_args_fail(a, "unknown option '%s'", a->word);
}

int bs_args_int64(bs_args *a, int64_t lo, int64_t hi, int64_t *out) {
  const char *v = a->val ? a->val : "";
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (!*v || *end || v[0] == ' ' || v[0] == '\t') return bs_args_fail(a, "%s: '%s' is not an integer", a->flag, v);
  if (errno == ERANGE || x < lo || x > hi)
    return bs_args_fail(a, "%s: '%s' is out of range (%lld .. %lld)", a->flag, v, (long long)lo, (long long)hi);
  *out = (int64_t)x;
  return 0;
}

int bs_args_int(bs_args *a, long lo, long hi, int *out) {
  int64_t x = 0;
  if (bs_args_int64(a, lo, hi, &x)) return -1;
  *out = (int)x;
  return 0;
}

int bs_args_double(bs_args *a, double lo, double hi, double *out) {
  const char *v = a->val ? a->val : "";
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (!*v || *end || v[0] == ' ' || v[0] == '\t' || isnan(x))
    return bs_args_fail(a, "%s: '%s' is not a number", a->flag, v);
  if (!isfinite(x) || x < lo || x > hi)
    return bs_args_fail(a, "%s: '%s' is out of range (%g .. %g)", a->flag, v, lo, hi);
  *out = x;
  return 0;
}

int bs_args_enum(bs_args *a, const char *const *names, int *out) {
  const char *v = a->val ? a->val : "";
  char list[256] = "";
  for (int k = 0; names[k]; k++) {
    if (!strcmp(v, names[k])) {
      *out = k;
      return 0;
    }
    size_t l = strlen(list);
    snprintf(list + l, sizeof list - l, "%s%s", k ? ", " : "", names[k]);
  }
  return bs_args_fail(a, "%s: '%s' is not one of %s", a->flag, v, list);
}

int bs_args_path(bs_args *a, const char **out) {
  const char *v = a->val ? a->val : "";
  if (!*v) return bs_args_fail(a, "%s: empty value", a->flag);
  if (strlen(v) > 4095) return bs_args_fail(a, "%s: longer than 4095 bytes", a->flag);
  *out = v;
  return 0;
}
