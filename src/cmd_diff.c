/*
 * cmd_diff.c — `burstsim diff A.json B.json [--out F.json]`: two result files (sim --out, search
 * --out) side by side. Points are matched by their settings: the settings that vary among the
 * points of A or among those of B are the sweep's axes, and a point of A pairs with the first
 * unpaired point of B equal to it on every axis (two one-point files always pair). For each pair
 * it prints the settings that differ, then the step and its parts as explain splits it (compute by
 * kernel kind, launches, exposed transfer by link class, waiting for peers, all of the critical
 * rank), the bytes by link class and group and the peak memory: A, B, B - A and the change
 * relative to A. A part that is zero (or absent) in both is left out. Points left unpaired are
 * listed. --out writes the same as JSON (atomically, base/fileio). Exit 2 on a missing or foreign
 * file or when no point pairs.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_args.h"
#include "commands.h"
#include "output.h"
#include "result_fields.h"
#include "result_read.h"

/* The figures compared, in the order printed. ms: a time in seconds, shown in ms. */
typedef struct {
  const char *path, *label;
  int ms;
} figure;

static const figure figures[] = {
  {"time_s.step", "step", 1},
  {"explain.critical.compute.attn_fwd", "compute attn_fwd", 1},
  {"explain.critical.compute.attn_bwd", "compute attn_bwd", 1},
  {"explain.critical.compute.merge", "compute merge", 1},
  {"explain.critical.compute.gemm", "compute gemm", 1},
  {"explain.critical.compute.elemwise", "compute elemwise", 1},
  {"explain.critical.compute.other", "compute other", 1},
  {"explain.critical.launch", "launches", 1},
  {"explain.critical.exposed.nvlink", "exposed nvlink", 1},
  {"explain.critical.exposed.pcie", "exposed pcie", 1},
  {"explain.critical.exposed.shm", "exposed shm", 1},
  {"explain.critical.exposed.network", "exposed network", 1},
  {"explain.critical.exposed.other", "exposed other", 1},
  {"explain.critical.wait_for_peers", "waiting for peers", 1},
  {"comm_bytes.intra_node", "bytes intra-node", 0},
  {"comm_bytes.inter_node", "bytes inter-node", 0},
  {"comm_bytes.by_group.tp", "bytes tp group/rank", 0},
  {"comm_bytes.by_group.cp", "bytes cp group/rank", 0},
  {"comm_bytes.by_group.dp", "bytes dp group/rank", 0},
  {"comm_bytes.by_group.pp", "bytes pp group/rank", 0},
  {"memory.peak_bytes_max", "peak memory", 0},
};
#define NFIGURES (int)(sizeof figures / sizeof figures[0])

static void diff_usage(FILE *f) {
  fprintf(f,
          "usage: burstsim diff A.json B.json [--out F.json]\n"
          "\n"
          "Compares two result files (burstsim sim --out, search --out). Points are paired by\n"
          "their settings: those that vary among the points of either file must be equal (two\n"
          "one-point files always pair). For each pair: the settings that differ, then the step\n"
          "and its parts (explain: compute by kernel kind, launches, exposed transfer by link\n"
          "class, waiting for peers; the critical rank's), bytes by link class and by group,\n"
          "and the peak memory, as A, B, B - A and the change relative to A. Times in ms,\n"
          "bytes in B; a part zero in both is left out. Unpaired points are listed.\n"
          "\n"
          "  --out F.json   the same as JSON (\"-\" = stdout; the table then goes to stderr)\n"
          "\n"
          "Exit 2 when a file is missing or not a result file, or when no point pairs.\n");
}

/* The settings of a point: the result contract's rows that are not figures, less the plan's own
 * decisions and the status. */
static int is_setting(const bs_field *f) {
  return !f->figure && f->kind != BS_FIELD_RANKS && strncmp(f->path, "plan.", 5) && strcmp(f->path, "status") &&
         strcmp(f->path, "error");
}

/* Whether the points of one file differ in a setting. */
static int varies(const cJSON *results, const char *path) {
  char first[256], v[256];
  const cJSON *e = results->child;
  if (!e) return 0;
  bs_result_text(e, path, first, sizeof first);
  for (e = e->next; e; e = e->next) {
    bs_result_text(e, path, v, sizeof v);
    if (strcmp(v, first)) return 1;
  }
  return 0;
}

static int same_on_axes(const cJSON *a, const cJSON *b, const int *axis) {
  int nrows;
  const bs_field *rows = bs_result_fields(&nrows);
  char va[256], vb[256];
  for (int k = 0; k < nrows; k++) {
    if (!axis[k]) continue;
    bs_result_text(a, rows[k].path, va, sizeof va);
    bs_result_text(b, rows[k].path, vb, sizeof vb);
    if (strcmp(va, vb)) return 0;
  }
  return 1;
}

/* A point's name in messages: "A[2]" and its method, GPUs and sequence length. */
static void point_name(char *dst, size_t n, const char *file, int i, const cJSON *p) {
  char m[64], g[32], s[32];
  bs_result_text(p, "method", m, sizeof m);
  bs_result_text(p, "gpus", g, sizeof g);
  bs_result_text(p, "seq_len", s, sizeof s);
  snprintf(dst, n, "%s[%d] (%s, %s GPUs, seq %s)", file, i + 1, m, g, s);
}

/* A number, or null when not known. */
static void add_number(cJSON *o, const char *key, int known, double v) {
  if (known) cJSON_AddNumberToObject(o, key, v);
  else cJSON_AddNullToObject(o, key);
}

/* One pair: its differing settings and figures, to the table and the JSON. */
static void diff_pair(FILE *tf, cJSON *jpairs, const cJSON *a, int ia, const cJSON *b, int ib) {
  int nrows;
  const bs_field *rows = bs_result_fields(&nrows);
  char name[160];
  point_name(name, sizeof name, "A", ia, a);
  fprintf(tf, "%s vs B[%d]\n", name, ib + 1);
  cJSON *jp = cJSON_CreateObject();
  cJSON_AddItemToArray(jpairs, jp);
  cJSON_AddNumberToObject(jp, "a", ia + 1);
  cJSON_AddNumberToObject(jp, "b", ib + 1);
  cJSON *js = cJSON_AddObjectToObject(jp, "settings");
  int nset = 0;
  char va[256], vb[256];
  for (int k = 0; k < nrows; k++) {
    if (!is_setting(&rows[k])) continue;
    bs_result_text(a, rows[k].path, va, sizeof va);
    bs_result_text(b, rows[k].path, vb, sizeof vb);
    if (!strcmp(va, vb)) continue;
    fprintf(tf, "  setting %s: %s -> %s\n", rows[k].path, va, vb);
    nset++;
    cJSON *o = cJSON_AddObjectToObject(js, rows[k].path);
    cJSON_AddStringToObject(o, "a", va);
    cJSON_AddStringToObject(o, "b", vb);
  }
  if (!nset) fprintf(tf, "  settings: the same\n");
  fprintf(tf, "  %-22s %18s %18s %18s %9s\n", "figure", "A", "B", "B - A", "change");
  cJSON *jf = cJSON_AddObjectToObject(jp, "figures");
  for (int k = 0; k < NFIGURES; k++) {
    const figure *f = &figures[k];
    double x = 0, y = 0;
    int hx = bs_result_number(a, f->path, &x), hy = bs_result_number(b, f->path, &y);
    if ((!hx || x == 0) && (!hy || y == 0)) continue;
    double s = f->ms ? 1e3 : 1;
    char label[40], cx[32] = "-", cy[32] = "-", cd[32] = "-", cr[16] = "-";
    snprintf(label, sizeof label, "%s (%s)", f->label, f->ms ? "ms" : "B");
    if (hx) snprintf(cx, sizeof cx, "%.*f", f->ms ? 4 : 0, x * s);
    if (hy) snprintf(cy, sizeof cy, "%.*f", f->ms ? 4 : 0, y * s);
    if (hx && hy) snprintf(cd, sizeof cd, "%+.*f", f->ms ? 4 : 0, (y - x) * s);
    if (hx && hy && x != 0) snprintf(cr, sizeof cr, "%+.1f%%", 100.0 * (y - x) / x);
    fprintf(tf, "  %-22s %18s %18s %18s %9s\n", label, cx, cy, cd, cr);
    cJSON *o = cJSON_AddObjectToObject(jf, f->path);
    cJSON_AddStringToObject(o, "unit", f->ms ? "s" : "B");
    add_number(o, "a", hx, x);
    add_number(o, "b", hy, y);
    add_number(o, "delta", hx && hy, y - x);
    add_number(o, "relative", hx && hy && x != 0, x != 0 ? (y - x) / x : 0);
  }
  fprintf(tf, "\n");
}

/* Unpaired points, to the table and the JSON. */
static void list_unpaired(FILE *tf, cJSON *root, const char *key, const char *file, const cJSON *results,
                          const int *paired) {
  cJSON *arr = cJSON_AddArrayToObject(root, key);
  int i = 0;
  char name[160];
  for (const cJSON *e = results->child; e; e = e->next, i++) {
    if (paired[i]) continue;
    point_name(name, sizeof name, file, i, e);
    fprintf(tf, "unpaired: %s\n", name);
    cJSON_AddItemToArray(arr, cJSON_CreateNumber(i + 1));
  }
}

/* Pairs the points and writes the table and JSON; the number of pairs, or -1 out of memory. */
static int diff_files(FILE *tf, cJSON *root, const cJSON *ra, int na, const cJSON *rb, int nb) {
  int nrows;
  const bs_field *rows = bs_result_fields(&nrows);
  int *axis = calloc((size_t)nrows, sizeof *axis), *pa = calloc((size_t)na + 1, sizeof *pa),
      *pb = calloc((size_t)nb + 1, sizeof *pb);
  if (!axis || !pa || !pb) {
    free(axis), free(pa), free(pb);
    return -1;
  }
  for (int k = 0; k < nrows; k++)
    axis[k] = is_setting(&rows[k]) && (varies(ra, rows[k].path) || varies(rb, rows[k].path));
  cJSON *jpairs = cJSON_AddArrayToObject(root, "pairs");
  int npairs = 0, i = 0;
  for (const cJSON *a = ra->child; a; a = a->next, i++) {
    int j = 0;
    for (const cJSON *b = rb->child; b; b = b->next, j++) {
      if (pb[j] || !same_on_axes(a, b, axis)) continue;
      pa[i] = pb[j] = 1;
      diff_pair(tf, jpairs, a, i, b, j);
      npairs++;
      break;
    }
  }
  list_unpaired(tf, root, "unpaired_a", "A", ra, pa);
  list_unpaired(tf, root, "unpaired_b", "B", rb, pb);
  if (!npairs) {
    fprintf(stderr,
            "burstsim diff: no point of A pairs with a point of B; they must agree on the settings "
            "that vary in either file:");
    for (int k = 0; k < nrows; k++)
      if (axis[k]) fprintf(stderr, " %s", rows[k].path);
    fprintf(stderr, "\n");
  }
  free(axis), free(pa), free(pb);
  return npairs;
}

int cmd_diff(int argc, char **argv) {
  bs_diff_args A;
  char err[1200];
  if (bs_diff_args_parse(argc, argv, &A, err, sizeof err)) {
    fprintf(stderr, "burstsim diff: %s\n", err);
    return 2;
  }
  if (A.help) {
    diff_usage(stdout);
    return 0;
  }
  const bs_path_role outs[] = {{"--out", A.out}}, ins[] = {{"A", A.a}, {"B", A.b}};
  if (A.out && bs_out_check_all(outs, 1, ins, 2, err, sizeof err)) {
    fprintf(stderr, "burstsim diff: %s\n", err);
    return 2;
  }
  cJSON *ra, *rb;
  int na, nb;
  cJSON *da = bs_result_file_load(A.a, &ra, &na, err, sizeof err);
  cJSON *db = da ? bs_result_file_load(A.b, &rb, &nb, err, sizeof err) : NULL;
  if (!da || !db) {
    fprintf(stderr, "burstsim diff: %s\n", err);
    cJSON_Delete(da);
    return 2;
  }
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "tool", "burstsim");
  cJSON_AddStringToObject(root, "version", BURSTSIM_VERSION);
  cJSON_AddStringToObject(root, "mode", "diff");
  cJSON_AddStringToObject(root, "a", A.a);
  cJSON_AddStringToObject(root, "b", A.b);
  const char *outs_s[] = {A.out};
  int npairs = diff_files(bs_output_table_stream(outs_s, 1), root, ra, na, rb, nb);
  int rc = npairs < 0 ? 1 : npairs == 0 ? 2 : 0;
  if (npairs < 0) fprintf(stderr, "burstsim diff: out of memory\n");
  if (!rc && A.out && bs_output_json_write(A.out, root, err, sizeof err)) {
    fprintf(stderr, "burstsim diff: %s\n", err);
    rc = 1;
  }
  cJSON_Delete(root);
  cJSON_Delete(da);
  cJSON_Delete(db);
  return rc;
}
