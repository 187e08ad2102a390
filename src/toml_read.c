/*
 * toml_read.c — a reader of TOML's common subset (toml_read.h). Line-oriented: a header or a
 * key = value per line, except an array, which may run over lines until its bracket closes.
 */
#include "toml_read.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *p; /* the next character */
  int line;
  char *err;
  size_t errlen;
} reader;

static int fail(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(reader *r, const char *fmt, ...) {
  int n = snprintf(r->err, r->errlen, "line %d: ", r->line);
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && (size_t)n < r->errlen) vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

static void skip_blank(reader *r) {
  while (*r->p == ' ' || *r->p == '\t') r->p++;
}

/* Past blanks and a comment to the end of the line; -1 when something else is left on it. */
static int end_of_line(reader *r) {
  skip_blank(r);
  if (*r->p == '#')
    while (*r->p && *r->p != '\n') r->p++;
  if (*r->p == '\r') r->p++;
  if (*r->p && *r->p != '\n') return fail(r, "unexpected '%c' after the value", *r->p);
  if (*r->p == '\n') r->p++, r->line++;
  return 0;
}

/* Appends c to buf[*n], keeping room for the NUL; -1 when full. */
static int append(reader *r, char *buf, size_t cap, size_t *n, char c) {
  if (*n + 1 >= cap) return fail(r, "a value longer than %zu characters", cap - 1);
  buf[(*n)++] = c;
  buf[*n] = '\0';
  return 0;
}

/* A quoted string at r->p (basic "..." with the common escapes, or literal '...'), into buf when
 * buf is not NULL, else appended as written to raw. */
static int string(reader *r, char *buf, size_t cap, size_t *n, int keep_quotes) {
  char q = *r->p++;
  if (q == r->p[0] && q == r->p[1]) return fail(r, "multi-line strings are not read");
  if (keep_quotes && append(r, buf, cap, n, q)) return -1;
  for (;;) {
    char c = *r->p;
    if (!c || c == '\n') return fail(r, "a string without its closing %c", q);
    r->p++;
    if (c == q) break;
    if (c == '\\' && q == '"' && !keep_quotes) {
      char e = *r->p++;
      c = e == 'n' ? '\n' : e == 't' ? '\t' : e == '"' || e == '\\' ? e : 0;
      if (!c) return fail(r, "the escape \\%c is not read", e ? e : ' ');
    } else if (c == '\\' && q == '"' && keep_quotes) {
      if (append(r, buf, cap, n, c)) return -1;
      c = *r->p++;
      if (!c || c == '\n') return fail(r, "a string without its closing %c", q);
    }
    if (append(r, buf, cap, n, c)) return -1;
  }
  return keep_quotes ? append(r, buf, cap, n, q) : 0;
}

/* An array, kept as written with its comments dropped and its lines joined. */
static int array(reader *r, char *buf, size_t cap, size_t *n) {
  int depth = 0;
  for (;;) {
    char c = *r->p;
    if (!c) return fail(r, "an array without its closing ]");
    if (c == '"' || c == '\'') {
      if (string(r, buf, cap, n, 1)) return -1;
      continue;
    }
    if (c == '#') {
      while (*r->p && *r->p != '\n') r->p++;
      continue;
    }
    r->p++;
    if (c == '\n') {
      r->line++;
      c = ' ';
    }
    if (c == '{') return fail(r, "inline tables are not read");
    if (c == '\r' || (c == ' ' && *n && buf[*n - 1] == ' ')) continue;
    if (append(r, buf, cap, n, c)) return -1;
    if (c == '[') depth++;
    if (c == ']' && --depth == 0) return 0;
  }
}

/* A bare key or a quoted one (dotted keys are kept as written: "a.b"). */
static int key(reader *r, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  while (*r->p && *r->p != '=' && *r->p != '\n') {
    char c = *r->p;
    if (c == '"' || c == '\'') {
      if (string(r, buf, cap, &n, 0)) return -1;
      continue;
    }
    r->p++;
    if (c == ' ' || c == '\t') continue;
    if (!isalnum((unsigned char)c) && c != '_' && c != '-' && c != '.') return fail(r, "'%c' in a key", c);
    if (append(r, buf, cap, &n, c)) return -1;
  }
  if (*r->p != '=') return fail(r, "expected key = value");
  if (!n) return fail(r, "a value without a key");
  r->p++;
  return 0;
}

/* The value after '=': a string, an array, or a bare word (number, boolean, date). */
static int value(reader *r, bs_toml_kv *kv) {
  size_t n = 0;
  skip_blank(r);
  kv->val[0] = '\0';
  if (*r->p == '"' || *r->p == '\'') {
    kv->is_string = 1;
    return string(r, kv->val, sizeof kv->val, &n, 0);
  }
  if (*r->p == '[') return array(r, kv->val, sizeof kv->val, &n);
  if (*r->p == '{') return fail(r, "inline tables are not read");
  while (*r->p && *r->p != '\n' && *r->p != '#' && *r->p != '\r') {
    if (append(r, kv->val, sizeof kv->val, &n, *r->p)) return -1;
    r->p++;
  }
  while (n && (kv->val[n - 1] == ' ' || kv->val[n - 1] == '\t')) kv->val[--n] = '\0';
  if (!n) return fail(r, "a key without a value");
  return 0;
}

/* A [section] header. */
static int header(reader *r, char *section, size_t cap) {
  r->p++;
  if (*r->p == '[') return fail(r, "array-of-tables headers ([[...]]) are not read");
  size_t n = 0;
  section[0] = '\0';
  skip_blank(r);
  while (*r->p && *r->p != ']' && *r->p != '\n') {
    char c = *r->p++;
    if (c == ' ' || c == '\t') continue;
    if (!isalnum((unsigned char)c) && c != '_' && c != '-' && c != '.') return fail(r, "'%c' in a section name", c);
    if (append(r, section, cap, &n, c)) return -1;
  }
  if (*r->p != ']' || !n) return fail(r, "a section header without its ]");
  r->p++;
  return 0;
}

int bs_toml_read(const char *text, bs_toml *out, char *err, size_t errlen) {
  reader r = {.p = text, .line = 1, .err = err, .errlen = errlen};
  char section[64] = "";
  int cap = 0;
  out->v = NULL;
  out->n = 0;
  while (*r.p) {
    skip_blank(&r);
    if (*r.p == '#' || *r.p == '\n' || *r.p == '\r' || !*r.p) {
      if (end_of_line(&r)) goto fail;
      continue;
    }
    if (*r.p == '[') {
      if (header(&r, section, sizeof section) || end_of_line(&r)) goto fail;
      continue;
    }
    if (out->n == cap) {
      cap = cap ? 2 * cap : 64;
      bs_toml_kv *v = realloc(out->v, (size_t)cap * sizeof *v);
      if (!v) {
        fail(&r, "out of memory");
        goto fail;
      }
      out->v = v;
    }
    bs_toml_kv *kv = &out->v[out->n];
    memset(kv, 0, sizeof *kv);
    kv->line = r.line;
    snprintf(kv->section, sizeof kv->section, "%s", section);
    if (key(&r, kv->key, sizeof kv->key) || value(&r, kv) || end_of_line(&r)) goto fail;
    out->n++;
  }
  return 0;
fail:
  bs_toml_free(out);
  return -1;
}

void bs_toml_free(bs_toml *t) {
  free(t->v);
  t->v = NULL;
  t->n = 0;
}

const bs_toml_kv *bs_toml_get(const bs_toml *t, const char *section, const char *key) {
  for (int i = t->n - 1; i >= 0; i--)
    if (!strcmp(t->v[i].section, section) && !strcmp(t->v[i].key, key)) return &t->v[i];
  return NULL;
}
