/*
 * check_fields.c — check_fields RESULT.json RESULT.csv: reads back what one sweep wrote with
 * --out and --csv and holds it against the table of field descriptions (src/result_fields.h):
 * the table itself is consistent (unique JSON paths, CSV positions 1..n once each, a breakdown
 * row per memory class), every CSV header column is a row of the table at its position, every
 * key of every result object is a row, and for every point the JSON and the CSV carry the same
 * value for each row that has a CSV column (a point whose status is not ok: null and an empty
 * cell for every figure). Exit 0 when all hold; else each failure on stderr.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/result_fields.h"

static int failures;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "check_fields: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  failures++;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *s = NULL;
  size_t len = 0, cap = 0, got;
  do {
    if (len + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 8192;
      char *ns = realloc(s, cap);
      if (!ns) break;
      s = ns;
    }
    got = fread(s + len, 1, cap - len - 1, f);
    len += got;
  } while (got > 0);
  fclose(f);
  if (s) s[len] = '\0';
  return s;
}

/* A CSV (RFC 4180) as records of fields, each field a string owned by the table. */
typedef struct {
  char ***rec; /* rec[r][c] */
  int *nf;     /* fields per record */
  int nrec;
} csv_table;

/* One field from *p on; advances *p past it. NULL on a malformed quote. */
static char *csv_field(const char **p) {
  const char *s = *p;
  size_t cap = strlen(s) + 1, k = 0;
  char *out = malloc(cap);
  if (!out) return NULL;
  if (*s == '"') {
    for (s++;; s++) {
      if (!*s) {
        free(out);
        return NULL;
      }
      if (*s == '"' && s[1] == '"') out[k++] = *s++;
      else if (*s == '"') break;
      else out[k++] = *s;
    }
    s++;
  } else {
    while (*s && *s != ',' && *s != '\n') out[k++] = *s++;
  }
  out[k] = '\0';
  *p = s;
  return out;
}

static void csv_free(csv_table *t) {
  for (int r = 0; r < t->nrec; r++) {
    for (int c = 0; c < t->nf[r]; c++) free(t->rec[r][c]);
    free(t->rec[r]);
  }
  free(t->rec);
  free(t->nf);
}

static int csv_read(const char *text, csv_table *t) {
  memset(t, 0, sizeof *t);
  for (const char *p = text; *p;) {
    t->rec = realloc(t->rec, sizeof *t->rec * (size_t)(t->nrec + 1));
    t->nf = realloc(t->nf, sizeof *t->nf * (size_t)(t->nrec + 1));
    if (!t->rec || !t->nf) return -1;
    char **fields = NULL;
    int n = 0;
    for (;;) {
      char *f = csv_field(&p);
      if (!f) return -1;
      fields = realloc(fields, sizeof *fields * (size_t)(n + 1));
      if (!fields) return -1;
      fields[n++] = f;
      if (*p == ',') {
        p++;
        continue;
      }
      if (*p == '\n') p++;
      else if (*p) return -1; /* text after a closing quote */
      break;
    }
    t->rec[t->nrec] = fields;
    t->nf[t->nrec++] = n;
  }
  return 0;
}

/* The item at a dotted path of o, or NULL. */
static const cJSON *at_path(const cJSON *o, const char *path) {
  char key[128];
  while (o && *path) {
    size_t n = strcspn(path, ".");
    snprintf(key, sizeof key, "%.*s", (int)n, path);
    o = cJSON_GetObjectItemCaseSensitive(o, key);
    path += n + (path[n] == '.');
  }
  return o;
}

static const bs_field *row_of(const bs_field *rows, int n, const char *path) {
  for (int k = 0; k < n; k++)
    if (!strcmp(rows[k].path, path)) return &rows[k];
  return NULL;
}

/* The table alone: paths unique, CSV positions 1..ncol once each with unique names, the
 * breakdown rows named after the memory classes in their order. Returns ncol. */
static int check_table(const bs_field *rows, int n) {
  int ncol = 0;
  for (int k = 0; k < n; k++) {
    if (row_of(rows, n, rows[k].path) != &rows[k]) fail("JSON path %s is described twice", rows[k].path);
    if (rows[k].col > ncol) ncol = rows[k].col;
    if (!rows[k].unit) fail("%s has no unit (\"\" for names and flags)", rows[k].path);
    if (rows[k].col && !rows[k].csv) fail("%s has a CSV position but no column name", rows[k].path);
    if (rows[k].head && !rows[k].cell) fail("%s has a table column but no cell", rows[k].path);
  }
  for (int c = 1; c <= ncol; c++) {
    int seen = 0;
    for (int k = 0; k < n; k++) seen += rows[k].col == c;
    if (seen != 1) fail("CSV position %d is given to %d rows, expected 1", c, seen);
  }
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++)
      if (rows[a].csv && rows[b].csv && !strcmp(rows[a].csv, rows[b].csv))
        fail("CSV column %s is named by %s and %s", rows[a].csv, rows[a].path, rows[b].path);
  for (int c = 0; c < BS_MEM_CLASS_COUNT; c++) {
    char path[96];
    snprintf(path, sizeof path, "memory.breakdown.%s", bs_mem_class_name((bs_mem_class)c));
    const bs_field *f = row_of(rows, n, path);
    const bs_field *first = row_of(rows, n, "memory.breakdown.input");
    if (!f || !first || f - first != c) fail("no row %s at the place of memory class %d", path, c);
  }
  return ncol;
}

/* Every key of o (a result object, or one of its nested objects under prefix) is a row. */
static void check_keys(const cJSON *o, const char *prefix, const bs_field *rows, int n, const char *what) {
  for (const cJSON *it = o->child; it; it = it->next) {
    char path[256];
    snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", it->string);
    if (cJSON_IsObject(it)) {
      check_keys(it, path, rows, n, what);
      continue;
    }
    const bs_field *f = row_of(rows, n, path);
    if (!f) {
      fail("%s: JSON key %s is no row of the table", what, path);
      continue;
    }
    if (f->kind == BS_FIELD_RANKS) {
      int nr;
      const bs_field *rr = bs_rank_fields(&nr);
      for (const cJSON *e = it->child; e; e = e->next) check_keys(e, "", rr, nr, what);
    }
  }
}

/* The CSV cell s holds the JSON value j of row f. */
static int same_value(const bs_field *f, const cJSON *j, const char *s) {
  char *end;
  switch (f->kind) {
  case BS_FIELD_INT:
  case BS_FIELD_I64: {
    long long v = strtoll(s, &end, 10);
    return *s && !*end && cJSON_IsNumber(j) && (double)v == j->valuedouble;
  }
  case BS_FIELD_BOOL: return cJSON_IsBool(j) && !strcmp(s, cJSON_IsTrue(j) ? "1" : "0");
  case BS_FIELD_CALC:
    if (cJSON_IsNull(j)) return !*s; /* not defined: null and an empty cell */
    /* fall through */
  case BS_FIELD_REAL: {
    double v = strtod(s, &end), tol = 0.5 * pow(10, 1 - f->digits) * fabs(j->valuedouble);
    return *s && !*end && cJSON_IsNumber(j) && fabs(v - j->valuedouble) <= tol;
  }
  case BS_FIELD_CHARS:
  case BS_FIELD_NAME: return cJSON_IsString(j) && !strcmp(s, j->valuestring);
  case BS_FIELD_RANKS: break;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: check_fields RESULT.json RESULT.csv\n");
    return 2;
  }
  int n, nr;
  const bs_field *rows = bs_result_fields(&n), *rr = bs_rank_fields(&nr);
  int ncol = check_table(rows, n);
  for (int k = 0; k < nr; k++) /* a rank row reads its member alone: no name(), present() or column */
    if (rr[k].kind == BS_FIELD_NAME || rr[k].kind == BS_FIELD_RANKS || rr[k].present || rr[k].col || rr[k].head)
      fail("rank row %s reads more than its member", rr[k].path);
  char *jtext = slurp(argv[1]), *ctext = slurp(argv[2]);
  cJSON *root = jtext ? cJSON_Parse(jtext) : NULL;
  csv_table t;
  if (!root || !ctext || csv_read(ctext, &t) || t.nrec < 1) {
    fprintf(stderr, "check_fields: %s or %s is missing or unreadable\n", argv[1], argv[2]);
    return 1;
  }
  /* the header: every column a row, at its position */
  if (t.nf[0] != ncol) fail("the CSV header has %d columns, the table %d", t.nf[0], ncol);
  for (int c = 0; c < t.nf[0]; c++) {
    const bs_field *f = NULL;
    for (int k = 0; k < n && !f; k++)
      if (rows[k].csv && !strcmp(rows[k].csv, t.rec[0][c])) f = &rows[k];
    if (!f) fail("CSV column %d (%s) is no row of the table", c + 1, t.rec[0][c]);
    else if (f->col != c + 1) fail("CSV column %s is at %d, the table says %d", f->csv, c + 1, f->col);
  }
  const cJSON *res = cJSON_GetObjectItemCaseSensitive(root, "results");
  int points = cJSON_GetArraySize(res);
  if (points < 1 || points != t.nrec - 1) fail("%d results in the JSON, %d points in the CSV", points, t.nrec - 1);
  int compared = 0;
  for (int i = 0; i < points && i + 1 < t.nrec; i++) {
    const cJSON *o = cJSON_GetArrayItem(res, i);
    char what[32];
    snprintf(what, sizeof what, "point %d", i + 1);
    check_keys(o, "", rows, n, what);
    for (int k = 0; k < n; k++) {
      const bs_field *f = &rows[k];
      const cJSON *j = at_path(o, f->path);
      if (!j && !f->present) fail("%s: JSON lacks %s, which every result carries", what, f->path);
      if (!f->col || f->col > t.nf[i + 1]) continue;
      const char *cell = t.rec[i + 1][f->col - 1];
      if (!j) {
        /* a row the JSON leaves out (no error): the CSV cell is empty or zero */
        if (*cell && strcmp(cell, "0")) fail("%s: %s is not in the JSON but the CSV has '%s'", what, f->path, cell);
        continue;
      }
      const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
      int ok = cJSON_IsString(st) && !strcmp(st->valuestring, "ok");
      if (f->figure && !ok) {
        /* a refused or failed point: no figures, null in the JSON and an empty cell */
        if (!cJSON_IsNull(j) || *cell) fail("%s: %s of a point without figures is not null / empty", what, f->path);
        compared++;
        continue;
      }
      char *jv = cJSON_PrintUnformatted(j);
      if (!same_value(f, j, cell)) fail("%s: %s is %s in the JSON, CSV %s says '%s'", what, f->path, jv, f->csv, cell);
      free(jv);
      compared++;
    }
  }
  cJSON_Delete(root);
  csv_free(&t);
  free(jtext);
  free(ctext);
  if (failures) return 1;
  printf("check_fields: %d CSV columns, %d points, %d values the same in JSON and CSV\n", ncol, points, compared);
  return 0;
}
