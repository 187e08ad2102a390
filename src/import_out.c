/*
 * import_out.c — the scenario an importer builds and its log (import_out.h).
 */
#include "import_out.h"

#include <stdlib.h>
#include <string.h>

void bs_import_vsay(bs_import_out *out, const char *what, const char *fmt, va_list ap) {
  fprintf(out->log, "%-8s ", what);
  vfprintf(out->log, fmt, ap);
  fputc('\n', out->log);
  if (!strcmp(what, "refused")) out->refused++;
}

void bs_import_say(bs_import_out *out, const char *what, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bs_import_vsay(out, what, fmt, ap);
  va_end(ap);
}

void bs_import_put(bs_import_out *out, const char *key, const char *fmt, ...) {
  int i = 0;
  while (i < out->nkeys && strcmp(out->key[i], key)) i++;
  if (i == BS_IMPORT_MAX_KEYS || strlen(key) >= sizeof out->key[0]) {
    out->full++;
    return;
  }
  if (i == out->nkeys) snprintf(out->key[out->nkeys++], sizeof out->key[0], "%s", key);
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(out->val[i], sizeof out->val[0], fmt, ap);
  va_end(ap);
  if (w < 0 || (size_t)w >= sizeof out->val[0]) out->full++;
}

const char *bs_import_get(const bs_import_out *out, const char *key) {
  for (int i = 0; i < out->nkeys; i++)
    if (!strcmp(out->key[i], key)) return out->val[i];
  return NULL;
}

char *bs_import_scenario(const bs_import_out *out, const char *comment, size_t *len) {
  static const char *const sections[] = {"model", "workload", "parallel", "cluster", NULL};
  size_t cap = 8192 + strlen(comment), n = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  n += (size_t)snprintf(s + n, cap - n, "; %s\n", comment);
  for (int k = 0; sections[k]; k++) {
    size_t sl = strlen(sections[k]);
    int first = 1;
    for (int i = 0; i < out->nkeys && n < cap; i++) {
      if (strncmp(out->key[i], sections[k], sl) || out->key[i][sl] != '.') continue;
      if (first) n += (size_t)snprintf(s + n, cap - n, "[%s]\n", sections[k]);
      first = 0;
      if (n < cap) n += (size_t)snprintf(s + n, cap - n, "%s = %s\n", out->key[i] + sl + 1, out->val[i]);
    }
  }
  if (n >= cap) {
    free(s);
    return NULL;
  }
  *len = n;
  return s;
}
