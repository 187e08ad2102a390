/*
 * scenario.c — scenario files into bs_config points.
 *
 * inih does the INI syntax; this file knows the keys. Every key may hold a
 * comma-separated list; lists sweep the cross product (the last key of the
 * table below varies fastest). Unknown sections and keys, duplicates, values
 * out of range, NUL bytes and files that cannot be read are errors that name
 * FILE:LINE and the key. Overrides from --set replace the file's value and are
 * reported as "--set[i]" when wrong. The file is read whole first, so a line
 * may be as long as the file (at most MAX_FILE bytes) and inih is handed one
 * whole line per call.
 */
#include "scenario.h"
#include "topologies/topo.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_VALUES 64
#define MAX_POINTS 100000
#define MAX_FILE (16 << 20) /* bytes of a scenario file */
#define SHOWN 48            /* characters of a value quoted in a message */

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
  char where[PATH_MAX + 32]; /* "file:line" or "--set[i]" */
} entry;

/* v for a message: at most SHOWN characters, "..." when cut, so the reason after it survives. */
static const char *clip(const char *v, char buf[SHOWN + 4]) {
  if (strlen(v) <= SHOWN) return v;
  memcpy(buf, v, SHOWN);
  strcpy(buf + SHOWN, "...");
  return buf;
}

/* ---- "did you mean" ------------------------------------------------- */

#define NEAR_MAX 64 /* longest name compared; longer ones get no suggestion */

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

/*
 * The candidate closest to v when it is close: an edit distance of at most 2
 * or a prefix either way; the first of equally close ones; NULL when none is.
 */
typedef struct {
  const char *v, *best;
  int dist;
} nearest;

static void near_init(nearest *nr, const char *v) {
  nr->v = v;
  nr->best = NULL;
  nr->dist = 3;
}

static void near_offer(nearest *nr, const char *cand) {
  int d = edit_distance(nr->v, cand);
  if (d > 2 && is_prefix(nr->v, cand)) d = 2;
  if (d < nr->dist) {
    nr->dist = d;
    nr->best = cand;
  }
}

/* Appends " (did you mean NAME?)" to msg when nr found a close name. */
static void near_append(const nearest *nr, char *msg, size_t n) {
  size_t off = strlen(msg);
  if (nr->best && off < n) snprintf(msg + off, n - off, " (did you mean %s?)", nr->best);
}

/* ---- value parsers -------------------------------------------------- */

static int parse_int64(const char *v, int64_t lo, int64_t hi, int suffixes, int64_t *out, char *why, size_t n) {
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
    snprintf(why, n, "'%s' is not an integer in range", clip(v, cb));
    return -1;
  }
  int64_t mult = 1;
  if (suffixes && (*end == 'K' || *end == 'k')) mult = 1024, end++;
  else if (suffixes && (*end == 'M' || *end == 'm')) mult = 1024 * 1024, end++;
  else if (suffixes && (*end == 'G' || *end == 'g')) mult = 1024LL * 1024 * 1024, end++;
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0') {
    snprintf(why, n, "'%s' is not an integer%s", clip(v, cb), suffixes ? " (suffixes K, M, G allowed)" : "");
    return -1;
  }
  if (x != 0 && (x > INT64_MAX / mult || x < INT64_MIN / mult)) {
    snprintf(why, n, "'%s' overflows a 64-bit integer", clip(v, cb));
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
  char cb[SHOWN + 4];
  snprintf(why, n, "'%s' is not a boolean (true/false, on/off)", clip(v, cb));
  return -1;
}

/* Index of v in the NULL-terminated names, or -1 with a message listing them. */
static int parse_enum(const char *v, const char *const *names, char *why, size_t n) {
  for (int i = 0; names[i]; i++)
    if (!strcmp(v, names[i])) return i;
  char cb[SHOWN + 4];
  size_t off = (size_t)snprintf(why, n, "'%s' is not one of:", clip(v, cb));
  nearest nr;
  near_init(&nr, v);
  for (int i = 0; names[i]; i++) {
    near_offer(&nr, names[i]);
    if (off < n) off += (size_t)snprintf(why + off, n - off, " %s", names[i]);
  }
  near_append(&nr, why, n);
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

#define INT_SETTER(fn, field, lo, hi, suffix)                       \
  static int fn(bs_config *c, const char *v, char *why, size_t n) { \
    int64_t x;                                                      \
    if (parse_int64(v, lo, hi, suffix, &x, why, n)) return -1;      \
    c->field = x;                                                   \
    return 0;                                                       \
  }
#define ENUM_SETTER(fn, field, type, ...)                           \
  static int fn(bs_config *c, const char *v, char *why, size_t n) { \
    static const char *const names[] = {__VA_ARGS__, NULL};         \
    int i = parse_enum(v, names, why, n);                           \
    if (i < 0) return -1;                                           \
    c->field = (type)i;                                             \
    return 0;                                                       \
  }
#define BOOL_SETTER(fn, field)                                      \
  static int fn(bs_config *c, const char *v, char *why, size_t n) { \
    int b;                                                          \
    if (parse_bool(v, &b, why, n)) return -1;                       \
    c->field = b;                                                   \
    return 0;                                                       \
  }

static const int64_t BIG = (int64_t)1 << 40; /* 1 Ti tokens: beyond any plan */

static int set_preset(bs_config *c, const char *v, char *why, size_t n) {
  if (bs_model_preset(v, &c->model) == 0) return 0;
  char cb[SHOWN + 4];
  size_t off = (size_t)snprintf(why, n, "unknown preset '%s' (", clip(v, cb));
  nearest nr;
  near_init(&nr, v);
  for (int i = 0; bs_model_preset_name(i); i++) {
    near_offer(&nr, bs_model_preset_name(i));
    if (off < n) off += (size_t)snprintf(why + off, n - off, "%s%s", i ? ", " : "", bs_model_preset_name(i));
  }
  if (off < n) snprintf(why + off, n - off, ")");
  near_append(&nr, why, n);
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
ENUM_SETTER(set_fp8, model.fp8, bs_fp8, "off", "ffn", "all")

ENUM_SETTER(set_phase, work.phase, bs_phase, "train", "prefill", "decode")
INT_SETTER(set_seq_len, work.seq_len, 1, BIG, 1)
INT_SETTER(set_batch, work.batch, 1, 1 << 20, 0)
BOOL_SETTER(set_causal, work.causal)
INT_SETTER(set_window, work.window, 0, BIG, 1)
ENUM_SETTER(set_scope, work.scope, bs_scope, "attention", "layer", "model")
INT_SETTER(set_decode_tokens, work.decode_tokens, 1, 1 << 20, 1)
/* off | selective | full; a boolean keeps its old meaning (true = full). */
static int set_recompute(bs_config *c, const char *v, char *why, size_t n) {
  int b;
  if (!strcmp(v, "selective")) return c->work.recompute = BS_RECOMPUTE_SELECTIVE, 0;
  if (!strcmp(v, "full")) return c->work.recompute = BS_RECOMPUTE_FULL, 0;
  if (!parse_bool(v, &b, why, n)) return c->work.recompute = b ? BS_RECOMPUTE_FULL : BS_RECOMPUTE_OFF, 0;
  char cb[SHOWN + 4];
  snprintf(why, n, "'%s' is not off, selective or full (true/on = full, false = off)", clip(v, cb));
  return -1;
}
ENUM_SETTER(set_kv_cache, work.kv_cache, bs_kv_cache, "keep", "drop")
INT_SETTER(set_cached_tokens, work.cached_tokens, 0, BIG, 1)
ENUM_SETTER(set_cp_pass, par.cp_pass, bs_cp_pass, "kv", "q")
static int set_seed(bs_config *c, const char *v, char *why, size_t n) {
  int64_t x;
  if (parse_int64(v, 0, INT64_MAX, 0, &x, why, n)) return -1;
  c->seed = (uint64_t)x;
  return 0;
}

static int set_method(bs_config *c, const char *v, char *why, size_t n) {
  const char *names[BS_METHOD_COUNT + 1];
  for (int m = 0; m < BS_METHOD_COUNT; m++) names[m] = bs_method_name((bs_method)m);
  names[BS_METHOD_COUNT] = NULL;
  int i = parse_enum(v, names, why, n);
  if (i < 0) return -1;
  c->par.method = (bs_method)i;
  return 0;
}
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
ENUM_SETTER(set_ulysses_placement, par.ulysses_placement, bs_placement, "head-first", "ring-first")
INT_SETTER(set_zero, par.zero, 0, 3, 0)
INT_SETTER(set_ranks_per_node, par.ranks_per_node, 1, 1 << 16, 0)
INT_SETTER(set_tp, par.tp, 1, 1 << 20, 0)
INT_SETTER(set_dp, par.dp, 1, 1 << 20, 0)
INT_SETTER(set_pp, par.pp, 1, 1 << 12, 0)
ENUM_SETTER(set_pp_schedule, par.pp_schedule, bs_pp_schedule, "1f1b", "interleaved")
INT_SETTER(set_pp_chunks, par.pp_chunks, 1, 1 << 12, 0)
static int set_micro_batch(bs_config *c, const char *v, char *why, size_t n) {
  int64_t x;
  if (!strcmp(v, "auto")) return c->par.micro_batch = 0, 0;
  if (parse_int64(v, 1, 1 << 20, 0, &x, why, n)) return -1;
  c->par.micro_batch = (int)x;
  return 0;
}
static int set_order(bs_config *c, const char *v, char *why, size_t n) {
  if (!bs_order_parse(v, c->par.order)) return 0;
  char cb[SHOWN + 4];
  snprintf(why, n, "'%s' is not an order of tp, cp, dp and pp, each once, fastest first (e.g. tp-cp-dp-pp)",
           clip(v, cb));
  return -1;
}

static int set_topology(bs_config *c, const char *v, char *why, size_t n) {
  return parse_name(v, c->cluster.topology, sizeof c->cluster.topology, why, n);
}
static int set_profile(bs_config *c, const char *v, char *why, size_t n) {
  return parse_name(v, c->cluster.profile, sizeof c->cluster.profile, why, n);
}
INT_SETTER(set_nodes, cluster.nodes, 0, 1 << 16, 0)
INT_SETTER(set_nics_per_node, cluster.nics_per_node, 1, 1 << 16, 0)
ENUM_SETTER(set_coll_algo, cluster.coll_algo, bs_coll_algo, "ring", "tree", "auto")
BOOL_SETTER(set_trace, trace)

/* ---- what-ifs (sim): values "none" or A:F ------------------------------ */

/* A factor: a finite real in (0, hi]. */
static int parse_factor(const char *v, double hi, double *out, char *why, size_t n) {
  char cb[SHOWN + 4], *end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || *end || errno == ERANGE || !isfinite(x)) {
    snprintf(why, n, "factor '%s' is not a number", clip(v, cb));
    return -1;
  }
  if (!(x > 0) || x > hi) {
    snprintf(why, n, "factor %g must be > 0%s", x, hi < 1e300 ? " and <= 1" : "");
    return -1;
  }
  *out = x;
  return 0;
}

/* "A:F" into its two halves (A copied into a, at most cap - 1 characters); -1 when there is no ':'. */
static int split_colon(const char *v, char *a, size_t cap, const char **f, const char *form, char *why, size_t n) {
  char cb[SHOWN + 4];
  const char *colon = strchr(v, ':');
  if (!colon || (size_t)(colon - v) >= cap || colon == v || !colon[1]) {
    snprintf(why, n, "'%s' is not %s or none", clip(v, cb), form);
    return -1;
  }
  memcpy(a, v, (size_t)(colon - v));
  a[colon - v] = '\0';
  *f = colon + 1;
  return 0;
}

static int set_straggler(bs_config *c, const char *v, char *why, size_t n) {
  if (!strcmp(v, "none")) {
    c->cluster.straggler_rank = 0;
    c->cluster.straggler_factor = 0;
    return 0;
  }
  char a[32];
  const char *f;
  int64_t r;
  double x;
  if (split_colon(v, a, sizeof a, &f, "RANK:FACTOR (17:1.5)", why, n) || parse_int64(a, 0, 1 << 20, 0, &r, why, n) ||
      parse_factor(f, 1e300, &x, why, n))
    return -1;
  c->cluster.straggler_rank = (int)r;
  c->cluster.straggler_factor = x;
  return 0;
}

static int set_degrade(bs_config *c, const char *v, char *why, size_t n) {
  bs_cluster *k = &c->cluster;
  if (!strcmp(v, "none")) {
    k->degrade_factor = 0;
    k->degrade_one_node = 0;
    return 0;
  }
  char a[48];
  const char *f;
  double x;
  if (split_colon(v, a, sizeof a, &f, "CLASS:FACTOR or CLASS@NODE:FACTOR (nic:0.5, nvlink@3:0.5)", why, n)) return -1;
  char *at = strchr(a, '@');
  int64_t node = 0;
  if (at) {
    *at = '\0';
    if (parse_int64(at + 1, 0, 1 << 16, 0, &node, why, n)) return -1;
  }
  const char *classes[BS_LINK_CLASS_COUNT + 1];
  for (int i = 0; i < BS_LINK_CLASS_COUNT; i++) classes[i] = bs_link_class_name((bs_link_class)i);
  classes[BS_LINK_CLASS_COUNT] = NULL;
  int cls = parse_enum(a, classes, why, n);
  if (cls < 0) return -1;
  if (parse_factor(f, 1, &x, why, n)) return -1;
  k->degrade_class = cls;
  k->degrade_one_node = at != NULL;
  k->degrade_node = (int)node;
  k->degrade_factor = x;
  return 0;
}

static int set_failed_nics(bs_config *c, const char *v, char *why, size_t n) {
  if (!strcmp(v, "none")) {
    c->cluster.failed_node = 0;
    c->cluster.failed_nics = 0;
    return 0;
  }
  char a[32];
  const char *f;
  int64_t node = -1, k;
  if (split_colon(v, a, sizeof a, &f, "NODE:NICS or all:NICS (3:1)", why, n) ||
      (strcmp(a, "all") && parse_int64(a, 0, 1 << 16, 0, &node, why, n)) || parse_int64(f, 1, 1 << 16, 0, &k, why, n))
    return -1;
  c->cluster.failed_node = (int)node;
  c->cluster.failed_nics = (int)k;
  return 0;
}
INT_SETTER(set_nodes_per_leaf, cluster.nodes_per_leaf, 1, 1 << 20, 0)
static int set_oversub(bs_config *c, const char *v, char *why, size_t n) {
  char cb[SHOWN + 4], *end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || *end || errno == ERANGE || !isfinite(x) || x < 1 || x > 1e6) {
    snprintf(why, n, "'%s' is not a ratio in [1, 1e6]", clip(v, cb));
    return -1;
  }
  c->cluster.oversub = x;
  return 0;
}

/* Table order is application order: model.preset must come before the model keys. */
static const key_def keys[] = {
  {"model", "preset", set_preset, "a name of bs_model_preset_name"},
  {"model", "hidden", set_hidden, "model width"},
  {"model", "heads", set_heads, "query heads"},
  {"model", "kv_heads", set_kv_heads, "key/value heads (GQA)"},
  {"model", "head_dim", set_head_dim, "head dimension"},
  {"model", "layers", set_layers, "transformer layers"},
  {"model", "ffn", set_ffn, "MLP inner width"},
  {"model", "vocab", set_vocab, "vocabulary size"},
  {"model", "dtype", set_dtype, "bf16 | fp16 | fp32"},
  {"model", "fp8", set_fp8, "off | ffn | all (layer and model scope: which GEMMs run in FP8)"},
  {"workload", "phase", set_phase, "train | prefill | decode"},
  {"workload", "seq_len", set_seq_len, "tokens (K, M suffixes)"},
  {"workload", "batch", set_batch, "sequences"},
  {"workload", "causal", set_causal, "true | false"},
  {"workload", "window", set_window, "sliding window, 0 = none"},
  {"workload", "scope", set_scope, "attention | layer | model"},
  {"workload", "decode_tokens", set_decode_tokens, "query tokens per decode step"},
  {"workload", "recompute", set_recompute, "off | selective | full (true = full)"},
  {"workload", "kv_cache", set_kv_cache, "keep | drop (prefill: each layer's K, V stay or go after attention)"},
  {"workload", "cached_tokens", set_cached_tokens,
   "prefill: tokens of seq_len already in the KV cache, 0 = none (K, M suffixes)"},
  {"workload", "seed", set_seed, "seed of the inputs of real runs"},
  {"parallel", "method", set_method, "a name of bs_method_name"},
  {"parallel", "gpus", set_gpus, "devices"},
  {"parallel", "layout", set_layout, "contiguous | zigzag | striped"},
  {"parallel", "double_ring", set_double_ring, "auto | on | off"},
  {"parallel", "lao", set_lao, "on | off"},
  {"parallel", "bwd_comm", set_bwd_comm, "optimized | plain"},
  {"parallel", "ulysses_degree", set_ulysses_degree, "ranks per all-to-all group (usp)"},
  {"parallel", "ulysses_placement", set_ulysses_placement,
   "head-first | ring-first (usp: all-to-all or ring inside a node)"},
  {"parallel", "tp_variant", set_tp_variant, "v1 | v3"},
  {"parallel", "zero", set_zero, "0 | 1 | 2 | 3"},
  {"parallel", "ranks_per_node", set_ranks_per_node, "ranks per node in real runs"},
  {"parallel", "tp", set_tp, "tensor-parallel degree (Megatron, sequence parallel with tp_variant v3)"},
  {"parallel", "dp", set_dp, "data-parallel replicas"},
  {"parallel", "pp", set_pp, "pipeline stages (model scope)"},
  {"parallel", "pp_schedule", set_pp_schedule, "1f1b | interleaved"},
  {"parallel", "pp_chunks", set_pp_chunks, "interleaved: model chunks per rank (default 2)"},
  {"parallel", "micro_batch", set_micro_batch, "sequences per microbatch | auto (batch / dp)"},
  {"parallel", "cp_pass", set_cp_pass, "kv | q (burst, ring: K,V or the queries travel the ring)"},
  {"parallel", "order", set_order, "dimensions fastest first over the ranks (tp-cp-dp-pp)"},
  {"cluster", "topology", set_topology, "a generator of bs_topo_generator_names | FILE.xml"},
  {"cluster", "profile", set_profile, "a profile of calib/profiles | FILE.json (default: the topology's)"},
  {"cluster", "nodes", set_nodes, "nodes, 0 = from gpus"},
  {"cluster", "nics_per_node", set_nics_per_node, "NICs per node, dividing its GPUs (dgx; default: one per GPU)"},
  {"cluster", "coll_algo", set_coll_algo, "ring | tree | auto (sim: how an allreduce is shaped)"},
  {"cluster", "nodes_per_leaf", set_nodes_per_leaf,
   "dgx: nodes under one leaf switch (default 16; --nodes-per-leaf wins)"},
  {"cluster", "oversub", set_oversub, "dgx: leaf oversubscription, 1 .. 1e6 (default 1; --oversub wins)"},
  {"cluster", "straggler", set_straggler, "none | RANK:F (sim: that rank's COMPUTE takes F times longer)"},
  {"cluster", "degrade", set_degrade, "none | CLASS:F | CLASS@NODE:F (sim: links of a class at F of their bandwidth)"},
  {"cluster", "failed_nics", set_failed_nics, "none | NODE:K | all:K (sim: K NICs of a node, or of every node, down)"},
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

/* Appends "(did you mean SECTION.KEY?)" to msg for the known key closest to section.key. */
static void suggest_key(const char *section, const char *key, char *msg, size_t n) {
  char typed[2 * NEAR_MAX], known[NKEYS][48];
  snprintf(typed, sizeof typed, "%s.%s", section, key);
  nearest nr;
  near_init(&nr, typed);
  for (int i = 0; i < NKEYS; i++) {
    snprintf(known[i], sizeof known[i], "%s.%s", keys[i].section, keys[i].key);
    near_offer(&nr, known[i]);
  }
  near_append(&nr, msg, n);
}

/* Appends "(did you mean SECTION?)" to msg for the known section closest to s. */
static void suggest_section(const char *s, char *msg, size_t n) {
  nearest nr;
  near_init(&nr, s);
  for (int i = 0; i < NKEYS; i++) near_offer(&nr, keys[i].section);
  near_append(&nr, msg, n);
}

/* ---- parsing state ---------------------------------------------------- */

typedef struct {
  const char *path;
  char *text;       /* the whole file, NUL-terminated */
  const char *next; /* start of the next line to hand to inih */
  int line;         /* lines read so far = line of the last line handed to inih */
  entry entries[sizeof keys / sizeof keys[0]];
  int have[sizeof keys / sizeof keys[0]];
  unsigned char autod[sizeof keys / sizeof keys[0]]; /* given as auto (search_auto) */
  char *err;
  size_t errlen;
  int failed;
  int regular; /* the scenario is a regular file: relative platform paths are next to it */
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
static int entry_fill(entry *e, const key_def *def, const char *value, const char *where, char *err, size_t errlen) {
  entry_clear(e);
  e->def = def;
  snprintf(e->where, sizeof e->where, "%s", where);
  int count = 0;
  for (const char *p = value; *p; p++) count += (*p == ',');
  if (count + 1 > MAX_VALUES) {
    snprintf(err, errlen, "%s: %s.%s: more than %d values in the list", where, def->section, def->key, MAX_VALUES);
    return -1;
  }
  char *buf = strdup(value);
  if (!buf) {
    snprintf(err, errlen, "%s: out of memory", where);
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
      break;
    }
    if (def->set(&scratch, v, why, sizeof why)) {
      snprintf(err, errlen, "%s: %s.%s: %s", where, def->section, def->key, why);
      break;
    }
    e->values[e->nvalues] = strdup(v);
    if (!e->values[e->nvalues]) {
      snprintf(err, errlen, "%s: out of memory", where);
      break;
    }
    e->nvalues++;
    if (!comma) {
      free(buf);
      return 0;
    }
    p = comma + 1;
  }
  free(buf);
  entry_clear(e);
  return -1;
}

/*
 * Reads the whole scenario file. A directory, a read error, a file over
 * MAX_FILE bytes and a NUL byte are errors naming the path (and the line of the
 * NUL); a UTF-8 byte order mark is dropped. *longest is the longest line.
 */
static char *read_scenario(const char *path, size_t *longest, int *regular, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  struct stat sb;
  if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
    snprintf(err, errlen, "%s: is a directory, not a scenario file", path);
    fclose(f);
    return NULL;
  }
  *regular = S_ISREG(sb.st_mode);
  size_t cap = 0, len = 0;
  char *text = NULL;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      size_t ncap = cap ? 2 * cap : 8192;
      if (ncap > (size_t)MAX_FILE + 4096 + 1) ncap = (size_t)MAX_FILE + 4096 + 1;
      char *t = realloc(text, ncap);
      if (!t) {
        snprintf(err, errlen, "%s: out of memory reading the file", path);
        goto fail;
      }
      text = t, cap = ncap;
    }
    errno = 0;
    size_t got = fread(text + len, 1, 4096, f);
    len += got;
    if (len > (size_t)MAX_FILE) {
      snprintf(err, errlen, "%s: larger than %d bytes: not a scenario file", path, MAX_FILE);
      goto fail;
    }
    if (got < 4096) {
      if (ferror(f)) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno ? errno : EIO));
        goto fail;
      }
      break;
    }
  }
  fclose(f);
  text[len] = '\0';
  const char *nul = memchr(text, '\0', len);
  if (nul) {
    int line = 1;
    for (const char *p = text; p < nul; p++) line += (*p == '\n');
    snprintf(err, errlen, "%s:%d: NUL byte in the line (not a text file?)", path, line);
    free(text);
    return NULL;
  }
  if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) memmove(text, text + 3, len - 2);
  *longest = 0;
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
    if (n > *longest) *longest = n;
    p += n;
  }
  return text;
fail:
  free(text);
  fclose(f);
  return NULL;
}

/*
 * A section line: its name must be known and nothing but a comment may follow
 * the ']' (inih ignores the rest). Rewrites the line to "[name]" so inih sees
 * the trimmed name. Returns -1 with the error set.
 */
static int check_section(parse_state *st, char *str) {
  char *t = trim(str);
  if (*t != '[') return 0;
  char *close = strchr(t, ']');
  if (!close) return 0; /* inih reports the syntax error */
  char *rest = trim(close + 1);
  if (*rest && *rest != ';' && *rest != '#') {
    char cb[SHOWN + 4];
    snprintf(st->err, st->errlen, "%s:%d: text after the section header: '%s'", st->path, st->line, clip(rest, cb));
    return -1;
  }
  *close = '\0';
  char *name = trim(t + 1);
  if (!known_section(name)) {
    char cb[SHOWN + 4];
    snprintf(st->err, st->errlen, "%s:%d: unknown section [%s] (model, workload, parallel, cluster, output)", st->path,
             st->line, clip(name, cb));
    suggest_section(name, st->err, st->errlen);
    return -1;
  }
  memmove(str + 1, name, strlen(name) + 1);
  str[0] = '[';
  strcat(str, "]\n");
  return 0;
}

/* inih reader: one whole line per call (num exceeds the longest line), counted; sections checked here. */
static char *reader(char *str, int num, void *stream) {
  parse_state *st = stream;
  if (st->failed || !*st->next) return NULL;
  const char *nl = strchr(st->next, '\n');
  size_t len = nl ? (size_t)(nl - st->next) + 1 : strlen(st->next);
  st->line++;
  if (len + 3 > (size_t)num) { /* cannot happen: the buffer is sized to the longest line */
    snprintf(st->err, st->errlen, "%s:%d: line longer than %d characters", st->path, st->line, num - 3);
    st->failed = 1;
    return NULL;
  }
  memcpy(str, st->next, len);
  str[len] = '\0';
  st->next += len;
  if (check_section(st, str)) {
    st->failed = 1;
    return NULL;
  }
  return str;
}

static int is_path_key(const key_def *def, const char **suffix) {
  if (strcmp(def->section, "cluster")) return 0;
  if (!strcmp(def->key, "topology")) return *suffix = ".xml", 1;
  if (!strcmp(def->key, "profile")) return *suffix = ".json", 1;
  return 0;
}

/*
 * A file's cluster.topology = X.xml or cluster.profile = X.json with a
 * relative path names a file next to the scenario: prefix the scenario's
 * directory (nothing when the scenario is in the current directory, or is a
 * pipe such as /dev/fd/N from a shell's process substitution).
 */
static int resolve_paths(parse_state *st, entry *e, const char *where) {
  const char *suffix;
  if (!is_path_key(e->def, &suffix)) return 0;
  const char *slash = strrchr(st->path, '/');
  if (!slash || !st->regular) return 0;
  int dirlen = (int)(slash - st->path) + 1;
  for (int i = 0; i < e->nvalues; i++) {
    const char *v = e->values[i];
    size_t n = strlen(v), sl = strlen(suffix);
    if (v[0] == '/' || n <= sl || strcmp(v + n - sl, suffix)) continue;
    size_t total = (size_t)dirlen + n + 1;
    char *r = malloc(total);
    if (!r) {
      snprintf(st->err, st->errlen, "%s: out of memory", where);
      return -1;
    }
    snprintf(r, total, "%.*s%s", dirlen, st->path, v);
    bs_config scratch;
    bs_config_default(&scratch);
    char why[256];
    if (e->def->set(&scratch, r, why, sizeof why)) {
      snprintf(st->err, st->errlen, "%s: %s.%s: %s relative to the scenario's directory: %s", where, e->def->section,
               e->def->key, v, why);
      free(r);
      return -1;
    }
    free(e->values[i]);
    e->values[i] = r;
  }
  return 0;
}

/* `burstsim search`: keys whose value "auto" means "search every legal value" (bs_scenario_auto_keys). */
static const char *const *search_autos;

void bs_scenario_auto_keys(const char *const *section_keys) { search_autos = section_keys; }

/* A value "auto" of a key search spreads: the key is taken as not given. */
static int search_auto(parse_state *st, int k, const char *value) {
  if (!search_autos) return 0;
  char v[16];
  snprintf(v, sizeof v, "%s", value);
  trim(v);
  for (int i = 0; search_autos[i]; i++) {
    const char *dot = strchr(search_autos[i], '.'), *eq = strchr(search_autos[i], '=');
    size_t sl = dot ? (size_t)(dot - search_autos[i]) : 0, kl = dot && eq ? (size_t)(eq - dot - 1) : SIZE_MAX;
    if (strcmp(v, eq ? eq + 1 : "auto")) continue; /* "section.key=word": word, not auto, asks for the search */
    if (dot && strlen(keys[k].section) == sl && !strncmp(search_autos[i], keys[k].section, sl) &&
        (eq ? strlen(keys[k].key) == kl && !strncmp(dot + 1, keys[k].key, kl) : !strcmp(dot + 1, keys[k].key))) {
      entry_clear(&st->entries[k]);
      st->have[k] = 0;
      st->autod[k] = 1;
      return 1;
    }
  }
  return 0;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
  parse_state *st = user;
  if (st->failed) return 0;
  char where[PATH_MAX + 32], cb[SHOWN + 4];
  snprintf(where, sizeof where, "%s:%d", st->path, st->line);
  if (!*section) {
    snprintf(st->err, st->errlen, "%s: key '%s' outside any section", where, clip(name, cb));
    st->failed = 1;
    return 0;
  }
  int k = find_key(section, name);
  if (k < 0) {
    snprintf(st->err, st->errlen, "%s: %s.%s: unknown key", where, section, clip(name, cb));
    suggest_key(section, name, st->err, st->errlen);
    st->failed = 1;
    return 0;
  }
  if (search_auto(st, k, value)) return 1;
  if (st->have[k]) {
    snprintf(st->err, st->errlen, "%s: %s.%s: duplicate key (first given at %s)", where, section, name,
             st->entries[k].where);
    st->failed = 1;
    return 0;
  }
  if (entry_fill(&st->entries[k], &keys[k], value, where, st->err, st->errlen) ||
      resolve_paths(st, &st->entries[k], where)) {
    st->failed = 1;
    return 0;
  }
  st->have[k] = 1;
  st->autod[k] = 0;
  return 1;
}

static int apply_set(parse_state *st, const char *set, int idx) {
  char where[64], cb[SHOWN + 4];
  snprintf(where, sizeof where, "--set[%d]", idx);
  const char *eq = strchr(set, '=');
  const char *dot = strchr(set, '.');
  if (!eq || !dot || dot > eq || dot == set || eq == dot + 1) {
    snprintf(st->err, st->errlen, "%s: '%s' is not section.key=value", where, clip(set, cb));
    return -1;
  }
  char section[64], key[64];
  size_t sl = (size_t)(dot - set), kl = (size_t)(eq - dot - 1);
  if (sl >= sizeof section || kl >= sizeof key) {
    snprintf(st->err, st->errlen, "%s: '%.*s': unknown key", where, SHOWN, set);
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
    suggest_key(sec, name, st->err, st->errlen);
    return -1;
  }
  if (search_auto(st, k, eq + 1)) return 0;
  if (entry_fill(&st->entries[k], &keys[k], eq + 1, where, st->err, st->errlen)) return -1;
  st->have[k] = 1;
  st->autod[k] = 0;
  return 0;
}

/* The model shape keys a preset sets (all model keys but preset, dtype and fp8). */
static int from_preset(int k) {
  return !strcmp(keys[k].section, "model") && strcmp(keys[k].key, "preset") && strcmp(keys[k].key, "dtype") &&
         strcmp(keys[k].key, "fp8");
}

/*
 * Where a model shape value of point c came from, for a message: "model.heads
 * at FILE:3", "model.preset = llama2-70b at FILE:2" or "the default
 * model.preset = llama2-7b".
 */
static void origin(const parse_state *st, const bs_config *c, const char *key, char *buf, size_t n) {
  int k = find_key("model", key), p = find_key("model", "preset");
  if (st->have[k]) snprintf(buf, n, "model.%s at %s", key, st->entries[k].where);
  else if (st->have[p]) snprintf(buf, n, "model.preset = %s at %s", c->model.preset, st->entries[p].where);
  else snprintf(buf, n, "the default model.preset = %s", c->model.preset);
}

/* Checks across keys of one point; blames a key the user gave and says where the other value came from. */
static int check_point(const parse_state *st, const bs_config *c, char *err, size_t errlen) {
  const bs_model *m = &c->model;
  if (m->heads % m->kv_heads != 0) {
    int kv = find_key("model", "kv_heads"), h = find_key("model", "heads"), p = find_key("model", "preset");
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
  return 0;
}

/* A point that names no profile takes its topology's (bs_topo_default_profile):
 * sim and topo then agree; a FILE.xml keeps the default profile. */
static void topology_profile(const parse_state *st, bs_config *c) {
  const char *profile = bs_topo_default_profile(c->cluster.topology);
  if (!st->have[find_key("cluster", "profile")] && profile)
    snprintf(c->cluster.profile, sizeof c->cluster.profile, "%s", profile);
}

static void state_free(parse_state *st) {
  for (int i = 0; i < NKEYS; i++) entry_clear(&st->entries[i]);
  free(st->text);
}

/* inih with a heap line buffer of `size` bytes; the library's settings are restored after. */
static int parse_lines(parse_state *st, size_t size) {
  bool stack = ini_use_stack, realloc_ok = ini_allow_realloc, multi = ini_allow_multiline,
       stop = ini_stop_on_first_error;
  int max_line = ini_max_line, initial = ini_initial_alloc;
  ini_use_stack = false; /* a buffer as long as the longest line, from the heap */
  ini_allow_realloc = false;
  ini_initial_alloc = ini_max_line = (int)size;
  ini_allow_multiline = false;    /* an indented line is its own key, never a continuation */
  ini_stop_on_first_error = true; /* report the first fault, not a consequence of it */
  int rc = ini_parse_stream(reader, st, handler, st);
  ini_use_stack = stack, ini_allow_realloc = realloc_ok, ini_allow_multiline = multi;
  ini_stop_on_first_error = stop, ini_max_line = max_line, ini_initial_alloc = initial;
  return rc;
}

/* "FILE (model.preset = X at FILE:L)" style places for model keys a preset or the default gave. */
static char *default_where(const parse_state *st, int k) {
  int p = find_key("model", "preset");
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
  st->text = read_scenario(path, &longest, &st->regular, err, errlen);
  if (!st->text) {
    free(st);
    return -1;
  }
  st->next = st->text;
  int rc = parse_lines(st, longest + 3);
  if (!st->failed && rc > 0) {
    snprintf(err, errlen, "%s:%d: syntax error (expected [section] or key = value)", path, rc);
    st->failed = 1;
  } else if (!st->failed && rc < 0) {
    snprintf(err, errlen, "%s: cannot parse (%s)", path, rc == -2 ? "out of memory" : "inih error");
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
      snprintf(err, errlen, "%s: %s.%s: its %d values make the sweep more than %d points", st->entries[k].where,
               keys[k].section, keys[k].key, st->entries[k].nvalues, MAX_POINTS);
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
    topology_profile(st, c);
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
  out->autos = malloc(NKEYS);
  if (!out->autos) {
    free(out->where);
    out->where = NULL;
  } else memcpy(out->autos, st->autod, NKEYS);
  for (int k = 0; out->where && k < NKEYS; k++)
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
  free(s->autos);
  s->autos = NULL;
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

int bs_scenario_given(const bs_scenario *s, const char *section_key) {
  const char *w = bs_scenario_where(s, section_key);
  return w && strcmp(w, s->path) != 0;
}

int bs_scenario_given_auto(const bs_scenario *s, const char *section_key) {
  const char *dot = strchr(section_key, '.');
  for (int k = 0; dot && s->autos && k < NKEYS; k++) {
    size_t sl = strlen(keys[k].section);
    if ((size_t)(dot - section_key) == sl && !strncmp(section_key, keys[k].section, sl) &&
        !strcmp(dot + 1, keys[k].key))
      return s->autos[k];
  }
  return 0;
}

const char *bs_scenario_key(int i, char *buf, size_t n) {
  if (i < 0 || i >= NKEYS) return NULL;
  snprintf(buf, n, "%s.%s", keys[i].section, keys[i].key);
  return buf;
}
