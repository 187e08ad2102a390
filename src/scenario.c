/*
 * scenario.c — scenario files into bs_config points.
 *
 * inih does the INI syntax; this file knows the keys. Every key may hold a
 * comma-separated list; lists sweep the cross product (the last key of the
 * table below varies fastest). Unknown sections and keys, duplicates, values
 * out of range and lines too long are errors that name FILE:LINE and the key.
 * Overrides from --set replace the file's value and are reported as
 * "--set[i]" when wrong.
 */
#include "scenario.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VALUES 64
#define MAX_POINTS 100000
#define MAX_LINE 4096

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
  char where[600]; /* "file:line" or "--set[i]" */
} entry;

/* ---- value parsers -------------------------------------------------- */

static int parse_int64(const char *v, int64_t lo, int64_t hi, int suffixes, int64_t *out, char *why,
                       size_t n) {
  errno = 0;
  char *end = NULL;
  while (isspace((unsigned char)*v)) v++;
  if (*v == '\0') {
    snprintf(why, n, "empty value");
    return -1;
  }
  long long x = strtoll(v, &end, 10);
  if (end == v || errno == ERANGE) {
    snprintf(why, n, "'%s' is not an integer in range", v);
    return -1;
  }
  int64_t mult = 1;
  if (suffixes && (*end == 'K' || *end == 'k')) mult = 1024, end++;
  else if (suffixes && (*end == 'M' || *end == 'm')) mult = 1024 * 1024, end++;
  else if (suffixes && (*end == 'G' || *end == 'g')) mult = 1024LL * 1024 * 1024, end++;
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0') {
    snprintf(why, n, "'%s' is not an integer%s", v, suffixes ? " (suffixes K, M, G allowed)" : "");
    return -1;
  }
  if (x != 0 && (x > INT64_MAX / mult || x < INT64_MIN / mult)) {
    snprintf(why, n, "'%s' overflows a 64-bit integer", v);
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

static int parse_bool(const char *v, int *out, char *why, size_t n) {
  static const char *yes[] = {"true", "on", "yes", "1"}, *no[] = {"false", "off", "no", "0"};
  for (int i = 0; i < 4; i++) {
    if (!strcasecmp(v, yes[i])) return *out = 1, 0;
    if (!strcasecmp(v, no[i])) return *out = 0, 0;
  }
  snprintf(why, n, "'%s' is not a boolean (true/false, on/off)", v);
  return -1;
}

/* Index of v in the NULL-terminated names, or -1 with a message listing them. */
static int parse_enum(const char *v, const char *const *names, char *why, size_t n) {
  for (int i = 0; names[i]; i++)
    if (!strcmp(v, names[i])) return i;
  size_t off = (size_t)snprintf(why, n, "'%s' is not one of:", v);
  for (int i = 0; names[i] && off < n; i++) off += (size_t)snprintf(why + off, n - off, " %s", names[i]);
  return -1;
}

static int parse_name(const char *v, char *dst, size_t cap, char *why, size_t n) {
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

/* ---- setters, one per key ------------------------------------------- */

#define INT_SETTER(fn, field, lo, hi, suffix)                          \
  static int fn(bs_config *c, const char *v, char *why, size_t n) {    \
    int64_t x;                                                         \
    if (parse_int64(v, lo, hi, suffix, &x, why, n)) return -1;         \
    c->field = x;                                                      \
    return 0;                                                          \
  }
#define ENUM_SETTER(fn, field, type, ...)                              \
  static int fn(bs_config *c, const char *v, char *why, size_t n) {    \
    static const char *const names[] = {__VA_ARGS__, NULL};            \
    int i = parse_enum(v, names, why, n);                              \
    if (i < 0) return -1;                                              \
    c->field = (type)i;                                                \
    return 0;                                                          \
  }
#define BOOL_SETTER(fn, field)                                         \
  static int fn(bs_config *c, const char *v, char *why, size_t n) {    \
    int b;                                                             \
    if (parse_bool(v, &b, why, n)) return -1;                          \
    c->field = b;                                                      \
    return 0;                                                          \
  }

static const int64_t BIG = (int64_t)1 << 40; /* 1 Ti tokens: beyond any plan */

static int set_preset(bs_config *c, const char *v, char *why, size_t n) {
  if (bs_model_preset(v, &c->model) == 0) return 0;
  snprintf(why, n, "unknown preset '%s' (llama2-7b, llama2-13b, llama2-70b, llama3.1-8b)", v);
  return -1;
}
INT_SETTER(set_hidden, model.hidden, 1, 1 << 20, 0)
INT_SETTER(set_heads, model.heads, 1, 1 << 14, 0)
INT_SETTER(set_kv_heads, model.kv_heads, 1, 1 << 14, 0)
INT_SETTER(set_head_dim, model.head_dim, 1, 1024, 0)
INT_SETTER(set_layers, model.layers, 1, 1 << 12, 0)
INT_SETTER(set_ffn, model.ffn, 1, 1 << 22, 0)
INT_SETTER(set_vocab, model.vocab, 1, 1 << 24, 0)
ENUM_SETTER(set_dtype, model.dtype, bs_dtype, "bf16", "fp16", "fp32")

ENUM_SETTER(set_phase, work.phase, bs_phase, "train", "prefill", "decode")
INT_SETTER(set_seq_len, work.seq_len, 1, BIG, 1)
INT_SETTER(set_batch, work.batch, 1, 1 << 20, 0)
BOOL_SETTER(set_causal, work.causal)
INT_SETTER(set_window, work.window, 0, BIG, 1)
ENUM_SETTER(set_scope, work.scope, bs_scope, "attention", "layer", "model")
INT_SETTER(set_decode_tokens, work.decode_tokens, 1, 1 << 20, 1)
BOOL_SETTER(set_recompute, work.recompute)
static int set_seed(bs_config *c, const char *v, char *why, size_t n) {
  int64_t x;
  if (parse_int64(v, 0, INT64_MAX, 0, &x, why, n)) return -1;
  c->seed = (uint64_t)x;
  return 0;
}

ENUM_SETTER(set_method, par.method, bs_method, "burst", "ring", "ring-li2021", "ulysses", "usp", "tp",
            "tree")
INT_SETTER(set_gpus, par.gpus, 1, 1 << 20, 0)
ENUM_SETTER(set_layout, par.layout, bs_layout, "contiguous", "zigzag", "striped")
static int set_double_ring(bs_config *c, const char *v, char *why, size_t n) {
  static const char *const names[] = {"auto", "off", "on", NULL};
  int i = parse_enum(v, names, why, n);
  if (i < 0) return -1;
  c->par.double_ring = i == 0 ? BS_AUTO : i == 1 ? BS_OFF : BS_ON;
  return 0;
}
BOOL_SETTER(set_lao, par.lao)
static int set_bwd_comm(bs_config *c, const char *v, char *why, size_t n) {
  static const char *const names[] = {"plain", "optimized", NULL};
  int i = parse_enum(v, names, why, n);
  if (i < 0) return -1;
  c->par.bwd_opt = i;
  return 0;
}
INT_SETTER(set_ulysses_degree, par.ulysses_degree, 1, 1 << 20, 0)
static int set_tp_variant(bs_config *c, const char *v, char *why, size_t n) {
  static const char *const names[] = {"v1", "v3", NULL};
  int i = parse_enum(v, names, why, n);
  if (i < 0) return -1;
  c->par.tp_variant = i == 0 ? 1 : 3;
  return 0;
}
INT_SETTER(set_zero, par.zero, 0, 3, 0)
INT_SETTER(set_ranks_per_node, par.ranks_per_node, 1, 1 << 16, 0)

static int set_topology(bs_config *c, const char *v, char *why, size_t n) {
  return parse_name(v, c->cluster.topology, sizeof c->cluster.topology, why, n);
}
static int set_profile(bs_config *c, const char *v, char *why, size_t n) {
  return parse_name(v, c->cluster.profile, sizeof c->cluster.profile, why, n);
}
INT_SETTER(set_nodes, cluster.nodes, 0, 1 << 16, 0)
ENUM_SETTER(set_coll_algo, cluster.coll_algo, bs_coll_algo, "ring", "tree", "auto")
BOOL_SETTER(set_trace, trace)

/* Table order is application order: model.preset must come before the model keys. */
static const key_def keys[] = {
  {"model", "preset", set_preset, "llama2-7b | llama2-13b | llama2-70b | llama3.1-8b"},
  {"model", "hidden", set_hidden, "model width"},
  {"model", "heads", set_heads, "query heads"},
  {"model", "kv_heads", set_kv_heads, "key/value heads (GQA)"},
  {"model", "head_dim", set_head_dim, "head dimension"},
  {"model", "layers", set_layers, "transformer layers"},
  {"model", "ffn", set_ffn, "MLP inner width"},
  {"model", "vocab", set_vocab, "vocabulary size"},
  {"model", "dtype", set_dtype, "bf16 | fp16 | fp32"},
  {"workload", "phase", set_phase, "train | prefill | decode"},
  {"workload", "seq_len", set_seq_len, "tokens (K, M suffixes)"},
  {"workload", "batch", set_batch, "sequences"},
  {"workload", "causal", set_causal, "true | false"},
  {"workload", "window", set_window, "sliding window, 0 = none"},
  {"workload", "scope", set_scope, "attention | layer | model"},
  {"workload", "decode_tokens", set_decode_tokens, "query tokens per decode step"},
  {"workload", "recompute", set_recompute, "activation recomputation"},
  {"workload", "seed", set_seed, "seed of the inputs of real runs"},
  {"parallel", "method", set_method, "burst | ring | ring-li2021 | ulysses | usp | tp | tree"},
  {"parallel", "gpus", set_gpus, "devices"},
  {"parallel", "layout", set_layout, "contiguous | zigzag | striped"},
  {"parallel", "double_ring", set_double_ring, "auto | on | off"},
  {"parallel", "lao", set_lao, "on | off"},
  {"parallel", "bwd_comm", set_bwd_comm, "optimized | plain"},
  {"parallel", "ulysses_degree", set_ulysses_degree, "ranks per all-to-all group (usp)"},
  {"parallel", "tp_variant", set_tp_variant, "v1 | v3"},
  {"parallel", "zero", set_zero, "0 | 1 | 2 | 3"},
  {"parallel", "ranks_per_node", set_ranks_per_node, "ranks per node in real runs"},
  {"cluster", "topology", set_topology, "dgx-a100 | a100-pcie-node | dgx-h100 | host | FILE.xml"},
  {"cluster", "profile", set_profile, "a100-sxm4-80gb | a100-pcie-40gb | h100-sxm | h200 | host | FILE.json"},
  {"cluster", "nodes", set_nodes, "nodes, 0 = from gpus"},
  {"cluster", "coll_algo", set_coll_algo, "ring | tree | auto (sim: how an allreduce is shaped)"},
  {"output", "trace", set_trace, "on | off"},
};
#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

static int find_key(const char *section, const char *key) {
  for (int i = 0; i < NKEYS; i++)
    if (!strcmp(keys[i].section, section) && !strcmp(keys[i].key, key)) return i;
  return -1;
}
static int known_section(const char *s) {
  for (int i = 0; i < NKEYS; i++)
    if (!strcmp(keys[i].section, s)) return 1;
  return 0;
}

/* ---- parsing state ---------------------------------------------------- */

typedef struct {
  const char *path;
  FILE *f;
  int line;             /* lines read so far = line of the last line handed to inih */
  entry entries[sizeof keys / sizeof keys[0]];
  int have[sizeof keys / sizeof keys[0]];
  char *err;
  size_t errlen;
  int failed;
} parse_state;

static void entry_clear(entry *e) {
  for (int i = 0; i < e->nvalues; i++) free(e->values[i]);
  e->nvalues = 0;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
  return s;
}

/* Splits a comma list into e->values; checks each value with the key's setter. */
static int entry_fill(entry *e, const key_def *def, const char *value, const char *where, char *err,
                      size_t errlen) {
  char buf[MAX_LINE];
  if (strlen(value) >= sizeof buf) {
    snprintf(err, errlen, "%s: %s.%s: value too long", where, def->section, def->key);
    return -1;
  }
  strcpy(buf, value);
  entry_clear(e);
  e->def = def;
  snprintf(e->where, sizeof e->where, "%s", where);
  int count = 0;
  for (char *p = buf; *p; p++) count += (*p == ',');
  if (count + 1 > MAX_VALUES) {
    snprintf(err, errlen, "%s: %s.%s: more than %d values in the list", where, def->section, def->key,
             MAX_VALUES);
    return -1;
  }
  /* Walk by hand (strtok would drop empty fields; "a,,b" is an error). */
  char *p = buf;
  for (;;) {
    char *comma = strchr(p, ',');
    if (comma) *comma = '\0';
    char *v = trim(p);
    char why[256] = "";
    bs_config scratch;
    bs_config_default(&scratch);
    if (*v == '\0') {
      snprintf(err, errlen, "%s: %s.%s: empty value in the list", where, def->section, def->key);
      entry_clear(e);
      return -1;
    }
    if (def->set(&scratch, v, why, sizeof why)) {
      snprintf(err, errlen, "%s: %s.%s: %s", where, def->section, def->key, why);
      entry_clear(e);
      return -1;
    }
    e->values[e->nvalues] = strdup(v);
    if (!e->values[e->nvalues]) {
      snprintf(err, errlen, "%s: out of memory", where);
      entry_clear(e);
      return -1;
    }
    e->nvalues++;
    if (!comma) break;
    p = comma + 1;
  }
  return 0;
}

/* inih reader: one line per call, counted, with long lines and unknown sections caught here. */
static char *reader(char *str, int num, void *stream) {
  parse_state *st = stream;
  if (st->failed) return NULL;
  char line[MAX_LINE + 2];
  if (!fgets(line, sizeof line, st->f)) return NULL;
  st->line++;
  size_t len = strlen(line);
  if (len == sizeof line - 1 && line[len - 1] != '\n') {
    snprintf(st->err, st->errlen, "%s:%d: line longer than %d characters", st->path, st->line, MAX_LINE);
    st->failed = 1;
    return NULL;
  }
  if ((int)len >= num) {
    snprintf(st->err, st->errlen, "%s:%d: line longer than %d characters", st->path, st->line, num - 3);
    st->failed = 1;
    return NULL;
  }
  char copy[MAX_LINE + 2];
  strcpy(copy, line);
  char *t = trim(copy);
  if (*t == '[') {
    char *close = strchr(t, ']');
    if (close) {
      *close = '\0';
      char *name = trim(t + 1);
      if (!known_section(name)) {
        snprintf(st->err, st->errlen, "%s:%d: unknown section [%s] (model, workload, parallel, cluster, output)",
                 st->path, st->line, name);
        st->failed = 1;
        return NULL;
      }
    }
  }
  memcpy(str, line, len + 1);
  return str;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
  parse_state *st = user;
  if (st->failed) return 0;
  char where[600];
  snprintf(where, sizeof where, "%s:%d", st->path, st->line);
  if (!*section) {
    snprintf(st->err, st->errlen, "%s: key '%s' outside any section", where, name);
    st->failed = 1;
    return 0;
  }
  int k = find_key(section, name);
  if (k < 0) {
    snprintf(st->err, st->errlen, "%s: %s.%s: unknown key", where, section, name);
    st->failed = 1;
    return 0;
  }
  if (st->have[k]) {
    snprintf(st->err, st->errlen, "%s: %s.%s: duplicate key (first given at %s)", where, section, name,
             st->entries[k].where);
    st->failed = 1;
    return 0;
  }
  if (entry_fill(&st->entries[k], &keys[k], value, where, st->err, st->errlen)) {
    st->failed = 1;
    return 0;
  }
  st->have[k] = 1;
  return 1;
}

static int apply_set(parse_state *st, const char *set, int idx) {
  char where[64];
  snprintf(where, sizeof where, "--set[%d]", idx);
  const char *eq = strchr(set, '=');
  const char *dot = strchr(set, '.');
  if (!eq || !dot || dot > eq) {
    snprintf(st->err, st->errlen, "%s: '%s' is not section.key=value", where, set);
    return -1;
  }
  char section[64], key[64];
  size_t sl = (size_t)(dot - set), kl = (size_t)(eq - dot - 1);
  if (sl == 0 || sl >= sizeof section || kl == 0 || kl >= sizeof key) {
    snprintf(st->err, st->errlen, "%s: '%s' is not section.key=value", where, set);
    return -1;
  }
  memcpy(section, set, sl);
  section[sl] = '\0';
  memcpy(key, dot + 1, kl);
  key[kl] = '\0';
  char *sec = trim(section), *name = trim(key);
  int k = find_key(sec, name);
  if (k < 0) {
    snprintf(st->err, st->errlen, "%s: %s.%s: unknown key", where, sec, name);
    return -1;
  }
  char value[MAX_LINE];
  snprintf(value, sizeof value, "%s", eq + 1);
  if (entry_fill(&st->entries[k], &keys[k], trim(value), where, st->err, st->errlen)) return -1;
  st->have[k] = 1;
  return 0;
}

/* Checks across keys of one point; names the key at fault. */
static int check_point(const parse_state *st, const bs_config *c, char *err, size_t errlen) {
  const bs_model *m = &c->model;
  if (m->heads % m->kv_heads != 0) {
    int k = find_key("model", "kv_heads");
    snprintf(err, errlen, "%s: model.kv_heads: %lld does not divide heads %lld",
             st->have[k] ? st->entries[k].where : st->path, (long long)m->kv_heads, (long long)m->heads);
    return -1;
  }
  return 0;
}

static void state_free(parse_state *st) {
  for (int i = 0; i < NKEYS; i++) entry_clear(&st->entries[i]);
}

int bs_scenario_load(const char *path, char **sets, int nsets, bs_scenario *out, char *err,
                     size_t errlen) {
  memset(out, 0, sizeof *out);
  parse_state *st = calloc(1, sizeof *st);
  if (!st) {
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  st->path = path;
  st->err = err;
  st->errlen = errlen;
  err[0] = '\0';
  st->f = fopen(path, "r");
  if (!st->f) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    free(st);
    return -1;
  }
  ini_allow_multiline = false;    /* an indented line is its own key, never a continuation */
  ini_stop_on_first_error = true; /* report the first fault, not a consequence of it */
  int rc = ini_parse_stream(reader, st, handler, st);
  fclose(st->f);
  if (!st->failed && rc > 0) {
    snprintf(err, errlen, "%s:%d: syntax error (expected [section] or key = value)", path, rc);
    st->failed = 1;
  } else if (!st->failed && rc < 0) {
    snprintf(err, errlen, "%s: cannot parse (error %d)", path, rc);
    st->failed = 1;
  }
  for (int i = 0; !st->failed && i < nsets; i++)
    if (apply_set(st, sets[i], i)) st->failed = 1;
  if (st->failed) {
    state_free(st);
    free(st);
    return -1;
  }

  /* Cross product: count, then enumerate with a mixed-radix counter. */
  int64_t npoints = 1;
  for (int k = 0; k < NKEYS; k++) {
    if (!st->have[k]) continue;
    npoints *= st->entries[k].nvalues;
    if (npoints > MAX_POINTS) {
      snprintf(err, errlen, "%s: the sweep has more than %d points", path, MAX_POINTS);
      state_free(st);
      free(st);
      return -1;
    }
  }
  bs_config *pts = calloc((size_t)npoints, sizeof *pts);
  if (!pts) {
    snprintf(err, errlen, "%s: out of memory for %lld points", path, (long long)npoints);
    state_free(st);
    free(st);
    return -1;
  }
  int idx[sizeof keys / sizeof keys[0]] = {0};
  for (int64_t p = 0; p < npoints; p++) {
    bs_config *c = &pts[p];
    bs_config_default(c);
    for (int k = 0; k < NKEYS; k++) {
      if (!st->have[k]) continue;
      char why[256];
      if (keys[k].set(c, st->entries[k].values[idx[k]], why, sizeof why)) { /* checked at fill */
        snprintf(err, errlen, "%s: %s.%s: %s", st->entries[k].where, keys[k].section, keys[k].key, why);
        free(pts);
        state_free(st);
        free(st);
        return -1;
      }
    }
    if (check_point(st, c, err, errlen)) {
      free(pts);
      state_free(st);
      free(st);
      return -1;
    }
    for (int k = NKEYS - 1; k >= 0; k--) { /* last key varies fastest */
      if (!st->have[k]) continue;
      if (++idx[k] < st->entries[k].nvalues) break;
      idx[k] = 0;
    }
  }
  out->where = calloc(NKEYS, sizeof *out->where);
  for (int k = 0; out->where && k < NKEYS; k++)
    if (st->have[k] && !(out->where[k] = strdup(st->entries[k].where))) {
      for (int j = 0; j < k; j++) free(out->where[j]);
      free(out->where);
      out->where = NULL;
    }
  if (!out->where) {
    snprintf(err, errlen, "%s: out of memory", path);
    free(pts);
    state_free(st);
    free(st);
    return -1;
  }
  out->points = pts;
  out->npoints = (int)npoints;
  snprintf(out->path, sizeof out->path, "%s", path);
  state_free(st);
  free(st);
  return 0;
}

void bs_scenario_free(bs_scenario *s) {
  for (int k = 0; s->where && k < NKEYS; k++) free(s->where[k]);
  free(s->where);
  s->where = NULL;
  free(s->points);
  s->points = NULL;
  s->npoints = 0;
}

const char *bs_scenario_where(const bs_scenario *s, const char *section_key) {
  const char *dot = strchr(section_key, '.');
  if (!dot) return NULL;
  for (int k = 0; k < NKEYS; k++) {
    size_t sl = strlen(keys[k].section);
    if ((size_t)(dot - section_key) == sl && !strncmp(section_key, keys[k].section, sl) &&
        !strcmp(dot + 1, keys[k].key))
      return s->where && s->where[k] ? s->where[k] : s->path;
  }
  return NULL;
}

const char *bs_scenario_key(int i, char *buf, size_t n) {
  if (i < 0 || i >= NKEYS) return NULL;
  snprintf(buf, n, "%s.%s", keys[i].section, keys[i].key);
  return buf;
}
