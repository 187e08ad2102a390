/*
 * output.c — results out, in the shapes docs/design.md describes: the result JSON
 * (cJSON), a CSV row per point (RFC 4180), and the human table on stdout. All three are
 * driven by one table of field descriptions (result_fields.c): a row's dotted JSON path
 * places it in the result object, its CSV name and position place it on a CSV line
 * (the rule: a column is named by its row, explicitly, and never derived), and its table
 * column, if any, formats its cell. No writer lists fields itself. Files are written by
 * base/fileio (temporary file and rename), so a reader never sees half.
 */
#include "output.h"

#include "base/fileio.h"
#include "result_fields.h"
#include "sim/explain.h"
#include "profile/profile.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The file a profile name or path reads ("" when none). */
static void profile_file(const char *name, char *out, size_t n) {
  out[0] = '\0';
  if (name && *name) bs_profile_path(name, out, n);
}

int bs_output_precheck(const bs_path_role *outs, int nout, const char *scenario_path, const bs_scenario *sc,
                       const char *profile, char *err, size_t errlen) {
  char prof[1024];
  profile_file(profile, prof, sizeof prof);
  const bs_path_role ins[] = {{"the scenario", scenario_path}, {"--profile", prof}};
  if (bs_out_check_all(outs, nout, ins, 2, err, errlen)) return -1;
  for (int i = 0; sc && i < sc->npoints; i++) {
    const bs_cluster *c = &sc->points[i].cluster, *prev = i ? &sc->points[i - 1].cluster : NULL;
    if (prev && !strcmp(c->profile, prev->profile) && !strcmp(c->topology, prev->topology)) continue;
    char pp[1024] = "";
    if (!profile) profile_file(c->profile, pp, sizeof pp);
    size_t tl = strlen(c->topology);
    const char *xml = tl > 4 && !strcmp(c->topology + tl - 4, ".xml") ? c->topology : NULL;
    const bs_path_role pin[] = {{"the profile", pp}, {"the platform", xml}};
    if (bs_out_check_all(outs, nout, pin, 2, err, errlen)) return -1;
  }
  return 0;
}

/* The object a dotted path's leaf goes into, made on first use ("time_s.step": the result's
 * "time_s"); *leaf is the last part. NULL when out of memory. */
static cJSON *parent_of(cJSON *o, const char *path, const char **leaf) {
  const char *dot;
  while (o && (dot = strchr(path, '.'))) {
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)(dot - path), path);
    cJSON *in = cJSON_GetObjectItemCaseSensitive(o, key);
    o = in ? in : cJSON_AddObjectToObject(o, key);
    path = dot + 1;
  }
  *leaf = path;
  return o;
}

static void add_rows(cJSON *o, const bs_field *rows, int nrows, const void *obj, const bs_result *r);

/* "ranks": one object per rank, of bs_rank_fields. */
static void add_ranks(cJSON *o, const char *key, const bs_result *r) {
  int nrows;
  const bs_field *rows = bs_rank_fields(&nrows);
  cJSON *ra = cJSON_AddArrayToObject(o, key);
  for (int i = 0; ra && i < r->nranks; i++) {
    cJSON *e = cJSON_CreateObject();
    add_rows(e, rows, nrows, &r->ranks[i], r);
    cJSON_AddItemToArray(ra, e);
  }
}

/* Every row the result carries, at its path. */
static void add_rows(cJSON *o, const bs_field *rows, int nrows, const void *obj, const bs_result *r) {
  for (int k = 0; k < nrows; k++) {
    const bs_field *f = &rows[k];
    if (f->present && !f->present(r)) continue;
    const char *leaf;
    cJSON *at = parent_of(o, f->path, &leaf);
    if (!at) continue;
    if (f->figure && !bs_result_has_figures(r)) {
      cJSON_AddNullToObject(at, leaf); /* a refused or failed point has no figures */
      continue;
    }
    bs_value v = bs_field_value(f, obj);
    switch (f->kind) {
    case BS_FIELD_CALC:
      if (isfinite(v.d)) cJSON_AddNumberToObject(at, leaf, v.d);
      else cJSON_AddNullToObject(at, leaf);
      break;
    case BS_FIELD_INT:
    case BS_FIELD_I64: cJSON_AddNumberToObject(at, leaf, (double)v.i); break;
    case BS_FIELD_REAL: cJSON_AddNumberToObject(at, leaf, v.d); break;
    case BS_FIELD_BOOL: cJSON_AddBoolToObject(at, leaf, v.i != 0); break;
    case BS_FIELD_CHARS:
    case BS_FIELD_NAME: cJSON_AddStringToObject(at, leaf, v.s); break;
    case BS_FIELD_RANKS: add_ranks(at, leaf, r); break;
    }
  }
}

static cJSON *result_json(const bs_result *r) {
  int nrows;
  const bs_field *rows = bs_result_fields(&nrows);
  cJSON *o = cJSON_CreateObject();
  if (o) add_rows(o, rows, nrows, r, r);
  return o;
}

cJSON *bs_output_json_tree(const char *mode, const bs_result *r, int n) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "tool", "burstsim");
  cJSON_AddStringToObject(root, "version", BURSTSIM_VERSION);
  cJSON_AddStringToObject(root, "mode", mode);
  cJSON *arr = cJSON_AddArrayToObject(root, "results");
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, result_json(&r[i]));
  return root;
}

int bs_output_json_write(const char *path, const cJSON *root, char *err, size_t errlen) {
  char *text = root ? cJSON_Print(root) : NULL;
  if (!text) {
    snprintf(err, errlen, "%s: out of memory while formatting JSON", path);
    return -1;
  }
  size_t len = strlen(text);
  char *withnl = realloc(text, len + 2);
  if (!withnl) {
    free(text);
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  withnl[len] = '\n';
  withnl[len + 1] = '\0';
  int rc = bs_write_file(path, withnl, len + 1, err, errlen);
  free(withnl);
  return rc;
}

int bs_output_json(const char *path, const char *mode, const bs_result *r, int n, char *err, size_t errlen) {
  cJSON *root = bs_output_json_tree(mode, r, n);
  int rc = bs_output_json_write(path, root, err, errlen);
  cJSON_Delete(root);
  return rc;
}

/* A growable string for the CSV. */
typedef struct {
  char *s;
  size_t len, cap;
  int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (w < 0) {
      b->oom = 1;
      return;
    }
    if (b->s && b->len + (size_t)w < b->cap) {
      b->len += (size_t)w;
      return;
    }
    size_t ncap = (b->cap ? b->cap * 2 : 4096) + (size_t)w;
    char *ns = realloc(b->s, ncap);
    if (!ns) {
      b->oom = 1;
      return;
    }
    b->s = ns;
    b->cap = ncap;
  }
}

/* One CSV field per RFC 4180: quoted, with quotes doubled, when it holds a comma, quote, CR or
 * LF (always when `always`). */
static void sb_field(sbuf *b, const char *v, int always) {
  if (!always && !strpbrk(v, ",\"\r\n")) {
    sb_printf(b, "%s", v);
    return;
  }
  sb_printf(b, "\"");
  for (const char *p = v; *p;) {
    size_t n = strcspn(p, "\"");
    sb_printf(b, "%.*s", (int)n, p);
    p += n;
    if (*p == '"') {
      sb_printf(b, "\"\"");
      p++;
    }
  }
  sb_printf(b, "\"");
}

/* The rows with a CSV column, in column order (positions 1..n, checked by tests/cli). */
static int csv_columns(const bs_field **cols, int max) {
  int nrows, n = 0;
  const bs_field *rows = bs_result_fields(&nrows);
  for (int k = 0; k < nrows; k++)
    if (rows[k].col > 0 && rows[k].col <= max) {
      cols[rows[k].col - 1] = &rows[k];
      if (rows[k].col > n) n = rows[k].col;
    }
  return n;
}

/* A cell: empty for a figure of a point without figures, a number the point does not carry (the
 * plan of a point refused before one was made), or a figure that is not defined; text is always
 * written (error: "" when none). */
static void csv_cell(sbuf *b, const bs_field *f, const bs_result *r) {
  int text = f->kind == BS_FIELD_CHARS || f->kind == BS_FIELD_NAME;
  if ((f->figure && !bs_result_has_figures(r)) || (!text && f->present && !f->present(r))) return;
  bs_value v = bs_field_value(f, r);
  switch (f->kind) {
  case BS_FIELD_CALC:
    if (isfinite(v.d)) sb_printf(b, "%.*g", f->digits, v.d);
    break;
  case BS_FIELD_INT:
  case BS_FIELD_I64:
  case BS_FIELD_BOOL: sb_printf(b, "%lld", (long long)v.i); break;
  case BS_FIELD_REAL: sb_printf(b, "%.*g", f->digits, v.d); break;
  case BS_FIELD_CHARS:
  case BS_FIELD_NAME: sb_field(b, v.s, f->quote); break;
  case BS_FIELD_RANKS: break;
  }
}

int bs_output_csv(const char *path, const bs_result *r, int n, char *err, size_t errlen) {
  const bs_field *cols[128] = {0};
  int ncol = csv_columns(cols, 128);
  sbuf b = {0};
  for (int c = 0; c < ncol; c++) sb_printf(&b, "%s%s", c ? "," : "", cols[c] ? cols[c]->csv : "");
  sb_printf(&b, "\n");
  for (int i = 0; i < n; i++) {
    for (int c = 0; c < ncol; c++) {
      if (c) sb_printf(&b, ",");
      if (cols[c]) csv_cell(&b, cols[c], &r[i]);
    }
    sb_printf(&b, "\n");
  }
  if (b.oom) {
    free(b.s);
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  int rc = bs_write_file(path, b.s, b.len, err, errlen);
  free(b.s);
  return rc;
}

FILE *bs_output_table_stream(const char *const *outs, int n) {
  for (int i = 0; i < n; i++)
    if (outs[i] && !strcmp(outs[i], "-")) return stderr;
  return stdout;
}

/* A table cell: "-" for a figure of a point without figures. */
static void table_cell(const bs_field *f, const bs_result *x, char *cell, size_t n) {
  if ((f->figure && !bs_result_has_figures(x)) || (f->present && !f->present(x))) snprintf(cell, n, "-");
  else f->cell(x, bs_field_value(f, x), cell, n);
}

/* A setting's column is shown when the points that have it differ in it (and, for a row with a
 * news predicate, some point makes it news). */
static int varies(const bs_field *f, const bs_result *r, int n) {
  char a[64], b[64];
  int seen = 0, news = !f->news;
  for (int i = 0; i < n && !news; i++) news = f->news(&r[i]);
  if (!news || f->vary == 2) return news;
  for (int i = 0; i < n; i++) {
    if (f->present && !f->present(&r[i])) continue;
    table_cell(f, &r[i], seen ? b : a, 64);
    if (seen++ && strcmp(a, b)) return 1;
  }
  return 0;
}

/* A column's header over the sweep's points: the row's own, or what its header() says. */
static const char *head_of(const bs_field *f, const bs_result *r, int n) {
  return f->header ? f->header(r, n) : f->head;
}

/* The table's columns are the rows with a header, in row order: the key columns (method, GPUs,
 * sequence) always, every setting that varies over the points, the figures. A column is as wide
 * as its widest cell. A point without figures shows "-" for each and then why: "refused: ..."
 * or "failed: ...". */
void bs_output_table(FILE *f, const bs_result *r, int n) {
  int nrows;
  const bs_field *rows = bs_result_fields(&nrows);
  int *width = calloc((size_t)nrows, sizeof *width);
  if (!width) return;
  for (int k = 0; k < nrows; k++) {
    if (!rows[k].head || (rows[k].vary && !varies(&rows[k], r, n)) || (rows[k].shown && !rows[k].shown(r, n))) continue;
    int w = abs(rows[k].width), h = (int)strlen(head_of(&rows[k], r, n));
    if (h > w) w = h;
    for (int i = 0; i < n; i++) {
      char cell[64];
      table_cell(&rows[k], &r[i], cell, sizeof cell);
      if ((int)strlen(cell) > w) w = (int)strlen(cell);
    }
    width[k] = rows[k].width < 0 ? -w : w;
  }
  const char *sep = "";
  for (int k = 0; k < nrows; k++) {
    if (!width[k]) continue;
    fprintf(f, "%s%*s", sep, width[k], head_of(&rows[k], r, n));
    sep = " ";
  }
  fprintf(f, "\n");
  for (int i = 0; i < n; i++) {
    const bs_result *x = &r[i];
    sep = "";
    for (int k = 0; k < nrows; k++) {
      if (!width[k]) continue;
      char cell[64];
      table_cell(&rows[k], x, cell, sizeof cell);
      fprintf(f, "%s%*s", sep, width[k], cell);
      sep = " ";
    }
    if (!bs_result_has_figures(x)) fprintf(f, "  %s: %s", bs_result_status(x), x->error);
    fprintf(f, "\n");
  }
  free(width);
}

/* The parts of explain in table order: compute by kind, launch, exposed by link class, peers. */
#define XPARTS (BS_XK_COUNT + 1 + BS_XL_COUNT + 1)
static const char *xpart_head(int i) {
  static const char *const h[XPARTS] = {"attn fwd", "attn bwd", "merge", "gemm",    "elemwise",   "other", "launch",
                                        "nvlink",   "pcie",     "shm",   "network", "other link", "peers"};
  return h[i];
}
static double xpart(const bs_explain_parts *x, int i) {
  if (i < BS_XK_COUNT) return x->compute[i];
  if (i == BS_XK_COUNT) return x->launch;
  if (i < XPARTS - 1) return x->exposed[i - BS_XK_COUNT - 1];
  return x->wait_for_peers;
}

/* One cell of the explain table: column c < 0 a setting row (-1 - row index), XPARTS the step, 
 * XPARTS + 1 the critical rank, else a part in ms and % of the step. */
static void explain_cell(const bs_field *rows, int c, const bs_result *x, char *cell, size_t n) {
  const bs_explain *e = &x->explain;
  if (c < 0) table_cell(&rows[-1 - c], x, cell, n);
  else if (!bs_result_has_figures(x) || e->critical_rank < 0) snprintf(cell, n, "-");
  else if (c == XPARTS) snprintf(cell, n, "%.3f", e->step * 1e3);
  else if (c == XPARTS + 1) snprintf(cell, n, "%d", e->critical_rank);
  else {
    double v = xpart(&e->critical, c);
    snprintf(cell, n, "%.3f %5.1f%%", v * 1e3, e->step > 0 ? 100.0 * v / e->step : 0);
  }
}

/* The two parts tables (--explain, --memory): one cell or head of column c, c < 0 a result field. */
typedef void (*part_cell_fn)(const bs_field *rows, int c, const bs_result *x, char *cell, size_t n);
typedef const char *(*part_head_fn)(const bs_field *rows, int c);

/* The point's identity as the sim table shows it: the key columns and the settings that vary. */
static int identity_columns(const bs_field *rows, int nrows, const bs_result *r, int n, int *col) {
  int ncol = 0;
  for (int k = 0; k < nrows; k++)
    if (rows[k].head && !rows[k].figure && (!rows[k].vary || varies(&rows[k], r, n)) &&
        (!rows[k].shown || rows[k].shown(r, n)))
      col[ncol++] = -1 - k;
  return ncol;
}

/* The title, the heads and one row per point, each column as wide as its widest cell. */
static void print_parts_table(FILE *f, const char *title, const bs_field *rows, const int *col, int ncol,
                              const bs_result *r, int n, part_head_fn head, part_cell_fn cell_of) {
  int *width = calloc((size_t)ncol + 1, sizeof *width);
  if (!width) return;
  for (int j = 0; j < ncol; j++) {
    int c = col[j], w = (int)strlen(head(rows, c));
    for (int i = 0; i < n; i++) {
      char cell[64];
      cell_of(rows, c, &r[i], cell, sizeof cell);
      if ((int)strlen(cell) > w) w = (int)strlen(cell);
    }
    width[j] = c < 0 && rows[-1 - c].width < 0 ? -w : w;
  }
  fprintf(f, "%s\n", title);
  for (int j = 0; j < ncol; j++) fprintf(f, "%s%*s", j ? " " : "", width[j], head(rows, col[j]));
  fprintf(f, "\n");
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < ncol; j++) {
      char cell[64];
      cell_of(rows, col[j], &r[i], cell, sizeof cell);
      fprintf(f, "%s%*s", j ? " " : "", width[j], cell);
    }
    if (!bs_result_has_figures(&r[i])) fprintf(f, "  %s", bs_result_status(&r[i]));
    fprintf(f, "\n");
  }
  free(width);
}

static const char *explain_head(const bs_field *rows, int c) {
  return c < 0 ? rows[-1 - c].head : c == XPARTS ? "step ms" : c == XPARTS + 1 ? "rank" : xpart_head(c);
}

void bs_output_explain_table(FILE *f, const bs_result *r, int n) {
  int nrows;
  const bs_field *rows = bs_result_fields(&nrows);
  int *col = calloc((size_t)nrows + XPARTS + 2, sizeof *col);
  if (!col) return;
  int ncol = identity_columns(rows, nrows, r, n, col);
  col[ncol++] = XPARTS + 1;
  col[ncol++] = XPARTS;
  for (int p = 0; p < XPARTS; p++) { /* a part no point has is left out */
    int some = 0;
    for (int i = 0; i < n && !some; i++) some = bs_result_has_figures(&r[i]) && xpart(&r[i].explain.critical, p) != 0;
    if (some) col[ncol++] = p;
  }
  print_parts_table(f,
                    "where the step goes: the critical rank of each point (the one that finished last), each part in "
                    "ms and % of its step",
                    rows, col, ncol, r, n, explain_head, explain_cell);
  free(col);
}

/* The parts of the memory table in the order a framework's memory is told: what persists (weights,
 * gradients, optimizer state), what a step keeps (activations, the KV cache, logits), transients,
 * the attention scope's own buffers; then the allocator's reserve, the peak, the reserved total,
 * the capacity. */
static const int mem_order[BS_MEM_CLASS_COUNT] = {BS_MEM_WEIGHTS,  BS_MEM_GRADS,  BS_MEM_OPTIMIZER, BS_MEM_ACTIVATIONS,
                                                  BS_MEM_KV_CACHE, BS_MEM_LOGITS, BS_MEM_WORKSPACE, BS_MEM_COMM,
                                                  BS_MEM_INPUT,    BS_MEM_OUTPUT, BS_MEM_SCORES};
#define MPARTS (BS_MEM_CLASS_COUNT + 4)
static double mpart(const bs_result *x, int i) {
  int64_t reserve = bs_reserve_bytes(&x->cfg, x->mem.peak_bytes_max);
  if (i < BS_MEM_CLASS_COUNT) return (double)x->mem.breakdown[mem_order[i]];
  if (i == BS_MEM_CLASS_COUNT) return (double)reserve;
  if (i == BS_MEM_CLASS_COUNT + 1) return (double)x->mem.peak_bytes_max;
  if (i == BS_MEM_CLASS_COUNT + 2) return (double)x->mem.peak_bytes_max + (double)reserve;
  return (double)x->mem.capacity_bytes;
}
static const char *mpart_head(int i) {
  static const char *const tail[4] = {"reserve", "peak", "reserved", "cap"};
  return i < BS_MEM_CLASS_COUNT ? bs_mem_class_name((bs_mem_class)mem_order[i]) : tail[i - BS_MEM_CLASS_COUNT];
}
static void memory_cell(const bs_field *rows, int c, const bs_result *x, char *cell, size_t n) {
  if (c < 0) table_cell(&rows[-1 - c], x, cell, n);
  else if (!bs_result_has_figures(x)) snprintf(cell, n, "-");
  else snprintf(cell, n, "%.2f", mpart(x, c) / 1073741824.0);
}

static const char *memory_head(const bs_field *rows, int c) { return c < 0 ? rows[-1 - c].head : mpart_head(c); }

void bs_output_memory_table(FILE *f, const bs_result *r, int n) {
  int nrows;
  const bs_field *rows = bs_result_fields(&nrows);
  int *col = calloc((size_t)nrows + MPARTS, sizeof *col);
  if (!col) return;
  int ncol = identity_columns(rows, nrows, r, n, col);
  for (int p = 0; p < MPARTS; p++) { /* a class no point holds is left out; the reserve and the totals always shown */
    int some = p >= BS_MEM_CLASS_COUNT;
    for (int i = 0; i < n && !some; i++) some = bs_result_has_figures(&r[i]) && mpart(&r[i], p) != 0;
    if (some) col[ncol++] = p;
  }
  print_parts_table(f, "memory at the peak: the rank with the largest peak of each point, each term in GiB per GPU",
                    rows, col, ncol, r, n, memory_head, memory_cell);
  free(col);
}
