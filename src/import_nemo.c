/*
 * import_nemo.c — a NeMo YAML config to Megatron-LM flags (import_nemo.h). libyaml parses; each
 * scalar is kept with its dotted path and line, then translated by the rules below: model.* to the
 * flag of the same name, trainer.* to the world size and precision, the sections that do not
 * change a step (run, exp_manager, hydra, model.data, model.tokenizer, model.optim but its name)
 * named as ignored.
 */
#include "import_nemo.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

typedef struct {
  char path[192];
  char val[256];
  int line;
} kv;

typedef struct {
  kv *v;
  int n, cap;
} kvs;

static int push(kvs *t, const char *path, const char *val, int line) {
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 128;
    kv *v = realloc(t->v, (size_t)cap * sizeof *v);
    if (!v) return -1;
    t->v = v;
    t->cap = cap;
  }
  kv *e = &t->v[t->n++];
  snprintf(e->path, sizeof e->path, "%s", path);
  snprintf(e->val, sizeof e->val, "%s", val);
  e->line = line;
  return strlen(path) >= sizeof e->path || strlen(val) >= sizeof e->val ? -2 : 0;
}

/* One open mapping or sequence of the document. */
typedef struct {
  int seq;        /* a sequence (its items are not read) */
  int expect_key; /* a mapping: the next scalar is a key */
  char name[64];  /* the key this node is the value of ("" for the root) */
  char key[64];   /* a mapping: the key whose value comes next */
} frame;

enum { MAX_DEPTH = 16 };

/* The dotted path of the open mappings, then key. */
static void path_of(const frame *st, int depth, const char *key, char *out, size_t n) {
  size_t l = 0;
  out[0] = '\0';
  for (int i = 0; i <= depth; i++)
    if (st[i].name[0]) l += (size_t)snprintf(out + l, l < n ? n - l : 0, "%s%s", l ? "." : "", st[i].name);
  if (key && l < n) snprintf(out + l, n - l, "%s%s", l ? "." : "", key);
}

/* Opens a node as the value of the current key (or the document's root). */
static int open_node(frame *st, int *depth, int seq, int line, char *err, size_t errlen) {
  if (*depth + 1 >= MAX_DEPTH)
    return snprintf(err, errlen, "line %d: nested deeper than %d levels", line, MAX_DEPTH), -1;
  frame *up = *depth >= 0 ? &st[*depth] : NULL;
  frame *f = &st[++*depth];
  memset(f, 0, sizeof *f);
  f->seq = seq;
  f->expect_key = 1;
  if (up && !up->seq) snprintf(f->name, sizeof f->name, "%s", up->key);
  return 0;
}

/* A node's value is complete: its mapping waits for the next key. */
static void value_done(frame *st, int depth) {
  if (depth >= 0 && !st[depth].seq) st[depth].expect_key = 1;
}

static int in_seq(const frame *st, int depth) {
  for (int i = 0; i <= depth; i++)
    if (st[i].seq) return 1;
  return 0;
}

/* The scalars of the document with their dotted paths; a sequence is kept as "[list]". */
static int read_yaml(const char *text, kvs *t, char *err, size_t errlen) {
  yaml_parser_t p;
  yaml_event_t ev;
  if (!yaml_parser_initialize(&p)) return snprintf(err, errlen, "out of memory"), -1;
  yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
  frame st[MAX_DEPTH];
  int depth = -1, rc = 0, done = 0;
  while (!done && !rc) {
    if (!yaml_parser_parse(&p, &ev)) {
      snprintf(err, errlen, "line %lu: %s", (unsigned long)p.problem_mark.line + 1, p.problem ? p.problem : "not YAML");
      rc = -1;
      break;
    }
    int line = (int)ev.start_mark.line + 1;
    char path[192];
    switch (ev.type) {
    case YAML_STREAM_END_EVENT: done = 1; break;
    case YAML_SEQUENCE_START_EVENT:
      if (depth >= 0 && !in_seq(st, depth)) {
        path_of(st, depth, st[depth].key, path, sizeof path);
        if (push(t, path, "[list]", line) == -1) rc = -1;
      }
      /* fall through */
    case YAML_MAPPING_START_EVENT:
      if (!rc) rc = open_node(st, &depth, ev.type == YAML_SEQUENCE_START_EVENT, line, err, errlen);
      break;
    case YAML_MAPPING_END_EVENT:
    case YAML_SEQUENCE_END_EVENT:
      if (depth >= 0) depth--;
      value_done(st, depth);
      break;
    case YAML_SCALAR_EVENT:
    case YAML_ALIAS_EVENT: {
      if (depth < 0 || in_seq(st, depth)) break;
      const char *s = ev.type == YAML_SCALAR_EVENT ? (const char *)ev.data.scalar.value : "*alias";
      frame *f = &st[depth];
      if (f->expect_key) {
        snprintf(f->key, sizeof f->key, "%s", s);
        f->expect_key = 0;
        break;
      }
      path_of(st, depth, f->key, path, sizeof path);
      int r = push(t, path, s, line);
      if (r == -2) snprintf(err, errlen, "line %d: %s: a key or value longer than the importer's table", line, path);
      else if (r) snprintf(err, errlen, "out of memory");
      if (r) rc = -1;
      value_done(st, depth);
      break;
    }
    default: break;
    }
    yaml_event_delete(&ev);
  }
  yaml_parser_delete(&p);
  return rc;
}

/* Appends a flag (name without "--", '-' spelling) to out. */
static int flag(bs_mg_args *out, int *cap, const char *name, const char *val, int line) {
  if (out->n == *cap) {
    *cap = *cap ? 2 * *cap : 64;
    bs_mg_arg *v = realloc(out->v, (size_t)*cap * sizeof *v);
    if (!v) return -1;
    out->v = v;
  }
  bs_mg_arg *a = &out->v[out->n++];
  snprintf(a->name, sizeof a->name, "%s", name);
  snprintf(a->val, sizeof a->val, "%s", val);
  for (char *c = a->name; *c; c++)
    if (*c == '_') *c = '-';
  a->line = line;
  return 0;
}

static int is_null(const char *v) { return !*v || !strcmp(v, "null") || !strcmp(v, "~") || !strcasecmp(v, "none"); }
static int is_true(const char *v) { return !strcasecmp(v, "true") || !strcasecmp(v, "yes"); }
static int is_false(const char *v) { return !strcasecmp(v, "false") || !strcasecmp(v, "no"); }

static const kv *find(const kvs *t, const char *path) {
  for (int i = t->n - 1; i >= 0; i--)
    if (!strcmp(t->v[i].path, path)) return &t->v[i];
  return NULL;
}

/* Sections and keys with no effect on a step, said once each. */
static int quiet(const char *path) {
  static const char *const pre[] = {"defaults",
                                    "hydra.",
                                    "run.",
                                    "exp_manager.",
                                    "model.data.",
                                    "model.tokenizer.",
                                    "model.optim.",
                                    "model.nsys_profile.",
                                    "model.ub_tp_comm_overlap_cfg.",
                                    NULL};
  for (int i = 0; pre[i]; i++)
    if (!strncmp(path, pre[i], strlen(pre[i])) || !strcmp(path, pre[i])) return 1;
  return 0;
}

/* The Llama tokenizers' vocabularies, documented with the models (NeMo reads them from the tokenizer). */
static long tokenizer_vocab(const kvs *t) {
  const kv *ty = find(t, "model.tokenizer.type");
  if (!ty) return 0;
  if (strcasestr(ty->val, "llama-3") || strcasestr(ty->val, "llama3")) return 128256;
  if (strcasestr(ty->val, "llama-2") || strcasestr(ty->val, "llama2")) return 32000;
  return 0;
}

static int translate(const kvs *t, bs_mg_args *out, bs_import_out *log) {
  int cap = 0;
  long devices = 0, nodes = 0;
#define FLAG(name, val, line)                        \
  do {                                               \
    if (flag(out, &cap, name, val, line)) return -1; \
  } while (0)
  for (int i = 0; i < t->n; i++) {
    const kv *e = &t->v[i];
    if (find(t, e->path) != e) continue;
    const char *p = e->path, *v = e->val, *m = !strncmp(p, "model.", 6) ? p + 6 : NULL;
    if (!strcmp(p, "model.optim.name") && !strcmp(v, "distributed_fused_adam")) {
      FLAG("use-distributed-optimizer", "", e->line);
      bs_import_say(log, "nemo", "%s: %s (line %d) -> --use-distributed-optimizer", p, v, e->line);
    } else if (!strcmp(p, "model.tokenizer.type") && tokenizer_vocab(t)) continue; /* said with the vocabulary */
    else if (quiet(p)) bs_import_say(log, "ignored", "%s: %s: no effect on the step's time or memory", p, v);
    else if (!strcmp(p, "trainer.devices") || !strcmp(p, "trainer.num_nodes")) {
      *(p[8] == 'd' ? &devices : &nodes) = atol(v);
      bs_import_say(log, "nemo", "%s: %s (line %d) -> the world size", p, v, e->line);
    } else if (!strcmp(p, "trainer.precision")) {
      const char *f = !strncmp(v, "bf16", 4) ? "bf16" : !strncmp(v, "16", 2) ? "fp16" : NULL;
      if (f) FLAG(f, "", e->line);
      bs_import_say(log, "nemo", "%s: %s (line %d) -> %s%s", p, v, e->line, f ? "--" : "no --bf16 or --fp16 (fp32)",
                    f ? f : "");
    } else if (!strncmp(p, "trainer.", 8)) bs_import_say(log, "ignored", "%s: %s: no effect on the step", p, v);
    else if (!m) bs_import_say(log, "ignored", "%s: %s (line %d): outside model and trainer", p, v, e->line);
    else if (strchr(m, '.') || !strcmp(v, "[list]"))
      bs_import_say(log, "ignored", "%s: %s (line %d): unknown to this importer", p, v, e->line);
    else if (!strcmp(m, "encoder_seq_length") && !is_null(v)) {
      FLAG("seq-length", v, e->line);
      bs_import_say(log, "nemo", "%s: %s (line %d) -> --seq-length %s", p, v, e->line, v);
    } else if (!strcmp(m, "num_moe_experts") && !is_null(v)) {
      FLAG("num-experts", v, e->line);
      bs_import_say(log, "nemo", "%s: %s (line %d) -> --num-experts %s", p, v, e->line, v);
    } else if (!strcmp(m, "activation")) {
      int swiglu = strstr(v, "swiglu") != NULL;
      if (swiglu) FLAG("swiglu", "", e->line);
      bs_import_say(log, "nemo", "%s: %s (line %d) -> %s", p, v, e->line, swiglu ? "--swiglu" : "no --swiglu");
    } else if (!strcmp(m, "activations_checkpoint_granularity") && !is_null(v)) {
      FLAG("recompute-granularity", v, e->line);
      bs_import_say(log, "nemo", "%s: %s (line %d) -> --recompute-granularity %s", p, v, e->line, v);
    } else if (!strcmp(m, "share_embeddings_and_output_weights")) {
      if (is_false(v)) FLAG("untie-embeddings-and-output-weights", "", e->line);
      bs_import_say(log, "nemo", "%s: %s (line %d) -> %s", p, v, e->line,
                    is_false(v) ? "--untie-embeddings-and-output-weights" : "tied (no flag)");
    } else if (!strcmp(m, "fp8") && is_true(v)) {
      const kv *h = find(t, "model.fp8_hybrid"), *e4 = find(t, "model.fp8_e4m3");
      const char *fmt = h && is_true(h->val) ? "hybrid" : e4 && is_true(e4->val) ? "e4m3" : "hybrid";
      FLAG("fp8-format", fmt, e->line);
      bs_import_say(log, "nemo", "%s: %s (line %d) -> --fp8-format %s", p, v, e->line, fmt);
    } else if (!strcmp(m, "fp8") || !strcmp(m, "fp8_hybrid") || !strcmp(m, "fp8_e4m3"))
      bs_import_say(log, "nemo", "%s: %s (line %d) -> read with model.fp8", p, v, e->line);
    else if (!strcmp(m, "num_query_groups") && !is_null(v)) {
      FLAG("group-query-attention", "", e->line);
      FLAG("num-query-groups", v, e->line);
      bs_import_say(log, "nemo", "%s: %s (line %d) -> --group-query-attention --num-query-groups %s", p, v, e->line, v);
    } else if (is_null(v) || is_false(v)) bs_import_say(log, "nemo", "%s: %s (line %d) -> no flag", p, v, e->line);
    else if (is_true(v)) {
      FLAG(m, "", e->line);
      bs_import_say(log, "nemo", "%s: %s (line %d) -> --%s", p, v, e->line, out->v[out->n - 1].name);
    } else {
      FLAG(m, v, e->line);
      bs_import_say(log, "nemo", "%s: %s (line %d) -> --%s %s", p, v, e->line, out->v[out->n - 1].name, v);
    }
  }
  if (devices > 0 && nodes > 0) out->world = devices * nodes;
  long vocab = tokenizer_vocab(t);
  if (vocab && !find(t, "model.padded_vocab_size")) {
    char b[32];
    snprintf(b, sizeof b, "%ld", vocab);
    FLAG("padded-vocab-size", b, find(t, "model.tokenizer.type")->line);
    bs_import_say(log, "nemo", "model.tokenizer.type: %s -> --padded-vocab-size %ld (the tokenizer's vocabulary)",
                  find(t, "model.tokenizer.type")->val, vocab);
  }
#undef FLAG
  return 0;
}

int bs_nemo_args(const char *text, bs_mg_args *out, bs_import_out *log, char *err, size_t errlen) {
  kvs t = {0};
  memset(out, 0, sizeof *out);
  if (read_yaml(text, &t, err, errlen)) {
    free(t.v);
    return -1;
  }
  if (!find(&t, "model.num_layers")) {
    snprintf(err, errlen, "no model.num_layers: not a NeMo GPT training config (model: and trainer: sections)");
    free(t.v);
    return -1;
  }
  int rc = translate(&t, out, log);
  free(t.v);
  if (rc) {
    bs_mg_args_free(out);
    snprintf(err, errlen, "out of memory");
  }
  return rc;
}
