/*
 * scenario.c — scenario files into bs_config points: the sweep.
 *
 * Every key may hold a comma-separated list; lists sweep the cross product
 * (the last key of the table, scenario_keys.c, varies fastest), at most
 * MAX_POINTS points. Each point starts from the defaults, takes the values of
 * the keys given in table order, a topology's own profile when it names none,
 * and is checked across keys, blaming a key the user gave and saying where the
 * other value came from. The file itself is read by scenario_read.c; the
 * places where each key was given are kept for later messages
 * (bs_scenario_where).
 */
#include "scenario_impl.h"
#include "topologies/topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model shape keys a preset sets (all model keys but preset, dtype, fp8, attention_kernel and the
 * precisions training holds: main_grads, master_weights). */
static int from_preset(int k) {
  return !strcmp(scn_keys[k].section, "model") && strcmp(scn_keys[k].key, "preset") &&
         strcmp(scn_keys[k].key, "dtype") && strcmp(scn_keys[k].key, "fp8") &&
         strcmp(scn_keys[k].key, "attention_kernel") && strcmp(scn_keys[k].key, "main_grads") &&
         strcmp(scn_keys[k].key, "master_weights");
}

/*
 * Where a model shape value of point c came from, for a message: "model.heads
 * at FILE:3", "model.preset = llama2-70b at FILE:2" or "the default
 * model.preset = llama2-7b".
 */
static void origin(const parse_state *st, const bs_config *c, const char *key, char *buf, size_t n) {
  int k = scn_find_key("model", key), p = scn_find_key("model", "preset");
  if (st->have[k]) snprintf(buf, n, "model.%s at %s", key, st->entries[k].where);
  else if (st->have[p]) snprintf(buf, n, "model.preset = %s at %s", c->model.preset, st->entries[p].where);
  else snprintf(buf, n, "the default model.preset = %s", c->model.preset);
}

/* Checks across keys of one point; blames a key the user gave and says where the other value came from. */
static int check_point(const parse_state *st, const bs_config *c, char *err, size_t errlen) {
  const bs_model *m = &c->model;
  if (m->heads % m->kv_heads != 0) {
    int kv = scn_find_key("model", "kv_heads"), h = scn_find_key("model", "heads"), p = scn_find_key("model", "preset");
    char o[sizeof st->entries[0].where + sizeof m->preset + 64]; /* origin()'s longest message fits */
    if (st->have[kv] || !st->have[h]) {
      origin(st, c, "heads", o, sizeof o);
      snprintf(err, errlen, "%s: model.kv_heads: %lld does not divide heads %lld (%s)",
               st->have[kv]  ? st->entries[kv].where
               : st->have[p] ? st->entries[p].where
                             : st->path,
               (long long)m->kv_heads, (long long)m->heads, o);
    } else {
      origin(st, c, "kv_heads", o, sizeof o);
      snprintf(err, errlen, "%s: model.heads: %lld is not a multiple of kv_heads %lld (%s; set model.kv_heads)",
               st->entries[h].where, (long long)m->heads, (long long)m->kv_heads, o);
    }
    return -1;
  }
  char msg[512];
  if (bs_config_sizes_check(c, msg, sizeof msg)) { /* named at the first of its keys the user gave */
    static const char *const keys[][2] = {{"workload", "seq_len"}, {"workload", "batch"},
                                          {"model", "heads"},      {"model", "head_dim"},
                                          {"model", "preset"},     {"workload", "decode_tokens"}};
    const char *where = st->path;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && where == st->path; i++) {
      int k = scn_find_key(keys[i][0], keys[i][1]);
      if (k >= 0 && st->have[k]) where = st->entries[k].where;
    }
    snprintf(err, errlen, "%s: %s", where, msg);
    return -1;
  }
  return 0;
}

/* A point that names no profile takes its topology's (bs_topo_default_profile):
 * sim and topo then agree; a FILE.xml keeps the default profile. */
static void topology_profile(const parse_state *st, bs_config *c) {
  const char *profile = bs_topo_default_profile(c->cluster.topology);
  if (!st->have[scn_find_key("cluster", "profile")] && profile)
    snprintf(c->cluster.profile, sizeof c->cluster.profile, "%s", profile);
}

static char *default_where(const parse_state *st, int k) {
  int p = scn_find_key("model", "preset");
  size_t n = strlen(st->path) + sizeof st->entries[p].where + 64;
  char *w = malloc(n);
  if (!w) return NULL;
  if (!from_preset(k)) snprintf(w, n, "%s", st->path);
  else if (st->have[p] && st->entries[p].nvalues == 1)
    snprintf(w, n, "%s (from model.preset = %s)", st->entries[p].where, st->entries[p].values[0]);
  else if (st->have[p]) snprintf(w, n, "%s (from model.preset)", st->entries[p].where);
  else {
    bs_config d;
    bs_config_default(&d);
    snprintf(w, n, "%s (from the default model.preset = %s)", st->path, d.model.preset);
  }
  return w;
}

/* Whether a key's list holds one value twice, by what the values set (64K and 65536 are one). */
static int repeated_value(const entry *e, const key_def *def) {
  bs_config a, b;
  char why[256];
  for (int i = 0; i < e->nvalues; i++)
    for (int j = i + 1; j < e->nvalues; j++) {
      bs_config_default(&a);
      bs_config_default(&b);
      if (!def->set(&a, e->values[i], why, sizeof why) && !def->set(&b, e->values[j], why, sizeof why) &&
          !memcmp(&a, &b, sizeof a))
        return 1;
    }
  return 0;
}

int bs_scenario_load(const char *path, char **sets, int nsets, bs_scenario *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  err[0] = '\0';
  if (strlen(path) >= sizeof out->path) {
    snprintf(err, errlen, "%.64s...: path longer than %zu characters", path, sizeof out->path - 1);
    return -1;
  }
  parse_state *st = calloc(1, sizeof *st);
  if (!st) {
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  st->path = path;
  st->err = err;
  st->errlen = errlen;
  size_t longest = 0;
  st->text = scn_read_scenario(path, &longest, &st->regular, err, errlen);
  if (!st->text) {
    free(st);
    return -1;
  }
  st->next = st->text;
  int rc = scn_parse_lines(st, longest + 3);
  if (!st->failed && rc > 0) {
    snprintf(err, errlen, "%s:%d: syntax error (expected [section] or key = value)", path, rc);
    st->failed = 1;
  } else if (!st->failed && rc < 0) {
    snprintf(err, errlen, "%s: cannot parse (%s)", path, rc == -2 ? "out of memory" : "inih error");
    st->failed = 1;
  }
  for (int i = 0; !st->failed && i < nsets; i++)
    if (scn_apply_set(st, sets[i], i)) st->failed = 1;
  if (st->failed) {
    scn_state_free(st);
    free(st);
    return -1;
  }

  /* Cross product: count, then enumerate with a mixed-radix counter. */
  int64_t npoints = 1;
  for (int k = 0; k < SCN_NKEYS; k++) {
    if (!st->have[k]) continue;
    npoints *= st->entries[k].nvalues;
    if (npoints > MAX_POINTS) {
      snprintf(err, errlen, "%s: %s.%s: its %d values make the sweep more than %d points", st->entries[k].where,
               scn_keys[k].section, scn_keys[k].key, st->entries[k].nvalues, MAX_POINTS);
      scn_state_free(st);
      free(st);
      return -1;
    }
  }
  bs_config *pts = calloc((size_t)npoints, sizeof *pts);
  if (!pts) {
    snprintf(err, errlen, "%s: out of memory for %lld points", path, (long long)npoints);
    scn_state_free(st);
    free(st);
    return -1;
  }
  int idx[SCN_NKEYS] = {0};
  for (int64_t p = 0; p < npoints; p++) {
    bs_config *c = &pts[p];
    bs_config_default(c);
    for (int k = 0; k < SCN_NKEYS; k++) {
      if (!st->have[k]) continue;
      char why[256];
      if (scn_keys[k].set(c, st->entries[k].values[idx[k]], why, sizeof why)) { /* checked at fill */
        snprintf(err, errlen, "%s: %s.%s: %s", st->entries[k].where, scn_keys[k].section, scn_keys[k].key, why);
        free(pts);
        scn_state_free(st);
        free(st);
        return -1;
      }
    }
    /* given, or auto: the search's to choose */
    int zk = scn_find_key("parallel", "zero"), mk = scn_find_key("parallel", "method"),
        lk = scn_find_key("parallel", "layout");
    bs_framework_defaults(c, (st->have[zk] || st->autod[zk] ? BS_FW_KEY_ZERO : 0u) |
                               (st->have[mk] || st->autod[mk] ? BS_FW_KEY_METHOD : 0u) |
                               (st->have[lk] || st->autod[lk] ? BS_FW_KEY_LAYOUT : 0u));
    topology_profile(st, c);
    char dw[512];
    if (bs_model_resolve_attention(&c->model, dw, sizeof dw)) {
      int k = scn_find_key("model", "attention");
      snprintf(err, errlen, "%s: %s", st->have[k] ? st->entries[k].where : st->path, dw);
      free(pts);
      scn_state_free(st);
      free(st);
      return -1;
    }
    if (scn_docs_resolve(c, st->path, st->regular, dw, sizeof dw)) {
      int k = scn_find_key("workload", "documents");
      snprintf(err, errlen, "%s: workload.documents: %s", st->have[k] ? st->entries[k].where : st->path, dw);
      free(pts);
      scn_state_free(st);
      free(st);
      return -1;
    }
    if (check_point(st, c, err, errlen)) {
      free(pts);
      scn_state_free(st);
      free(st);
      return -1;
    }
    for (int k = SCN_NKEYS - 1; k >= 0; k--) { /* last key varies fastest */
      if (!st->have[k]) continue;
      if (++idx[k] < st->entries[k].nvalues) break;
      idx[k] = 0;
    }
  }
  out->where = calloc(SCN_NKEYS, sizeof *out->where);
  out->autos = malloc(3 * SCN_NKEYS);
  if (!out->autos) {
    free(out->where);
    out->where = NULL;
  } else {
    memcpy(out->autos, st->autod, SCN_NKEYS);
    for (int k = 0; k < SCN_NKEYS; k++) {
      out->autos[SCN_NKEYS + k] = st->have[k] && st->entries[k].nvalues > 1;
      out->autos[2 * SCN_NKEYS + k] = st->have[k] && repeated_value(&st->entries[k], &scn_keys[k]);
    }
  }
  for (int k = 0; out->where && k < SCN_NKEYS; k++)
    if (!(out->where[k] = st->have[k] ? strdup(st->entries[k].where) : default_where(st, k))) {
      for (int j = 0; j < k; j++) free(out->where[j]);
      free(out->where);
      out->where = NULL;
    }
  if (!out->where) {
    free(out->autos);
    out->autos = NULL;
    snprintf(err, errlen, "%s: out of memory", path);
    free(pts);
    scn_state_free(st);
    free(st);
    return -1;
  }
  out->points = pts;
  out->npoints = (int)npoints;
  snprintf(out->path, sizeof out->path, "%s", path);
  scn_state_free(st);
  free(st);
  return 0;
}

void bs_scenario_free(bs_scenario *s) {
  for (int k = 0; s->where && k < SCN_NKEYS; k++) free(s->where[k]);
  free(s->where);
  s->where = NULL;
  free(s->autos);
  s->autos = NULL;
  free(s->points);
  s->points = NULL;
  s->npoints = 0;
}

const char *bs_scenario_where(const bs_scenario *s, const char *section_key) {
  const char *dot = strchr(section_key, '.');
  if (!dot) return NULL;
  for (int k = 0; k < SCN_NKEYS; k++) {
    size_t sl = strlen(scn_keys[k].section);
    if ((size_t)(dot - section_key) == sl && !strncmp(section_key, scn_keys[k].section, sl) &&
        !strcmp(dot + 1, scn_keys[k].key))
      return s->where && s->where[k] ? s->where[k] : s->path;
  }
  return NULL;
}

int bs_scenario_given(const bs_scenario *s, const char *section_key) {
  const char *w = bs_scenario_where(s, section_key);
  return w && strcmp(w, s->path) != 0;
}

int bs_scenario_given_auto(const bs_scenario *s, const char *section_key) {
  const char *dot = strchr(section_key, '.');
  for (int k = 0; dot && s->autos && k < SCN_NKEYS; k++) {
    size_t sl = strlen(scn_keys[k].section);
    if ((size_t)(dot - section_key) == sl && !strncmp(section_key, scn_keys[k].section, sl) &&
        !strcmp(dot + 1, scn_keys[k].key))
      return s->autos[k];
  }
  return 0;
}

/* Block `block` of the autos array (0 auto, 1 listed, 2 repeated) for a key; 0 for no key. */
static int key_flag(const bs_scenario *s, const char *section_key, int block) {
  const char *dot = strchr(section_key, '.');
  for (int k = 0; dot && s->autos && k < SCN_NKEYS; k++) {
    size_t sl = strlen(scn_keys[k].section);
    if ((size_t)(dot - section_key) == sl && !strncmp(section_key, scn_keys[k].section, sl) &&
        !strcmp(dot + 1, scn_keys[k].key))
      return s->autos[block * SCN_NKEYS + k];
  }
  return 0;
}
int bs_scenario_listed(const bs_scenario *s, const char *section_key) { return key_flag(s, section_key, 1); }
int bs_scenario_repeated(const bs_scenario *s, const char *section_key) { return key_flag(s, section_key, 2); }

const char *bs_scenario_key(int i, char *buf, size_t n) {
  if (i < 0 || i >= SCN_NKEYS) return NULL;
  snprintf(buf, n, "%s.%s", scn_keys[i].section, scn_keys[i].key);
  return buf;
}
