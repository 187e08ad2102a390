/*
 * test_scenario.c — the scenario parser: good files become the right points,
 * every kind of bad input becomes an error naming FILE:LINE and the key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/scenario.h"

static char dir[256];

static const char *write_file(const char *name, const char *text) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

/* Loads text; expects failure whose message contains every needle. */
static void expect_error(const char *text, char **sets, int nsets, const char *n1, const char *n2) {
  const char *p = write_file("bad.ini", text);
  bs_scenario s;
  char err[1024];
  int rc = bs_scenario_load(p, sets, nsets, &s, err, sizeof err);
  if (rc == 0) fail_msg("accepted bad input:\n%s", text);
  if (n1 && !strstr(err, n1)) fail_msg("error '%s' lacks '%s'", err, n1);
  if (n2 && !strstr(err, n2)) fail_msg("error '%s' lacks '%s'", err, n2);
  assert_null(s.points);
}

static void test_basic(void **st) {
  (void)st;
  const char *p = write_file("ok.ini",
                             "# a comment\n[model]\npreset = llama2-13b\ndtype = fp16\n"
                             "[workload]\nphase = train\nseq_len = 32K, 1M\ncausal = true\nkv_cache = drop\n"
                             "[parallel]\nmethod = burst, ring, ulysses\ngpus = 8\nlayout = zigzag\n"
                             "bwd_comm = plain\ntp_variant = v3\nulysses_placement = ring-first\n"
                             "[cluster]\ntopology = dgx-h100\ncoll_algo = tree\nnics_per_node = 4\n");
  bs_scenario s;
  char err[1024];
  assert_int_equal(bs_scenario_load(p, NULL, 0, &s, err, sizeof err), 0);
  assert_int_equal(s.npoints, 6);
  /* seq_len is earlier in the table than method: method varies fastest */
  assert_int_equal(s.points[0].work.seq_len, 32768);
  assert_int_equal(s.points[0].par.method, BS_BURST);
  assert_int_equal(s.points[1].par.method, BS_RING);
  assert_int_equal(s.points[2].par.method, BS_ULYSSES);
  assert_int_equal(s.points[3].work.seq_len, 1048576);
  for (int i = 0; i < 6; i++) {
    const bs_config *c = &s.points[i];
    assert_int_equal(c->model.heads, 40);
    assert_int_equal(c->model.hidden, 5120);
    assert_int_equal(c->model.dtype, BS_FP16);
    assert_int_equal(c->work.causal, 1);
    assert_int_equal(c->work.kv_cache, BS_KV_DROP);
    assert_int_equal(c->par.layout, BS_ZIGZAG);
    assert_int_equal(c->par.bwd_opt, 0);
    assert_int_equal(c->par.tp_variant, 3);
    assert_string_equal(c->cluster.topology, "dgx-h100");
    assert_int_equal(c->cluster.coll_algo, BS_COLL_ALGO_TREE);
    assert_int_equal(c->par.ulysses_placement, BS_RING_FIRST);
    assert_int_equal(c->cluster.nics_per_node, 4);
  }
  bs_scenario_free(&s);
  /* the defaults: head-first, the topology's own NICs */
  p = write_file("ok-defaults.ini", "[model]\n");
  assert_int_equal(bs_scenario_load(p, NULL, 0, &s, err, sizeof err), 0);
  assert_int_equal(s.points[0].par.ulysses_placement, BS_HEAD_FIRST);
  assert_int_equal(s.points[0].cluster.nics_per_node, 0);
  bs_scenario_free(&s);
}

static void test_preset_then_explicit(void **st) {
  (void)st;
  /* explicit keys override the preset whatever their order in the file */
  const char *p = write_file("ok2.ini", "[model]\nheads = 8\npreset = llama2-70b\nkv_heads = 4\n");
  bs_scenario s;
  char err[1024];
  assert_int_equal(bs_scenario_load(p, NULL, 0, &s, err, sizeof err), 0);
  assert_int_equal(s.npoints, 1);
  assert_int_equal(s.points[0].model.heads, 8);
  assert_int_equal(s.points[0].model.kv_heads, 4);
  assert_int_equal(s.points[0].model.layers, 80);
  bs_scenario_free(&s);
  /* cluster.degrade = nic@NODE/NIC:F names one NIC (issue 35); nic@NODE:F every NIC of the node */
  p = write_file("ok3.ini", "[cluster]\ndegrade = nic@3/1:0.5, nic@3:0.5\n");
  assert_int_equal(bs_scenario_load(p, NULL, 0, &s, err, sizeof err), 0);
  assert_int_equal(s.npoints, 2);
  assert_true(s.points[0].cluster.degrade_one_node && s.points[0].cluster.degrade_node == 3);
  assert_true(s.points[0].cluster.degrade_one_nic && s.points[0].cluster.degrade_nic == 1);
  assert_true(s.points[0].cluster.degrade_factor == 0.5);
  assert_true(s.points[1].cluster.degrade_one_node && !s.points[1].cluster.degrade_one_nic);
  bs_scenario_free(&s);
}

static void test_set_overrides(void **st) {
  (void)st;
  const char *p = write_file("ok3.ini", "[parallel]\ngpus = 8\n");
  char *sets[] = {"parallel.gpus=16, 32", "workload.seq_len = 2M"};
  bs_scenario s;
  char err[1024];
  assert_int_equal(bs_scenario_load(p, sets, 2, &s, err, sizeof err), 0);
  assert_int_equal(s.npoints, 2);
  assert_int_equal(s.points[0].par.gpus, 16);
  assert_int_equal(s.points[1].par.gpus, 32);
  assert_int_equal(s.points[1].work.seq_len, 2 * 1048576);
  bs_scenario_free(&s);
  char *bad[] = {"parallel.gpus"};
  expect_error("[parallel]\ngpus = 8\n", bad, 1, "--set[0]", "section.key=value");
  char *bad2[] = {"parallel.gpu=3"};
  expect_error("[parallel]\ngpus = 8\n", bad2, 1, "--set[0]", "parallel.gpu: unknown key");
  char *bad3[] = {"parallel.gpus=-3"};
  expect_error("[parallel]\ngpus = 8\n", bad3, 1, "--set[0]: parallel.gpus", "out of range");
}

static void test_huge_sizes(void **st) {
  (void)st;
  const char *p = write_file("huge.ini", "[workload]\nseq_len = 1048576M\n");
  bs_scenario s;
  char err[1024];
  assert_int_equal(bs_scenario_load(p, NULL, 0, &s, err, sizeof err), 0);
  assert_int_equal(s.points[0].work.seq_len, (int64_t)1 << 40);
  bs_scenario_free(&s);
  expect_error("[workload]\nseq_len = 2097152M\n", NULL, 0, ":2: workload.seq_len", "out of range");
  expect_error("[workload]\nseq_len = 99999999999999999999\n", NULL, 0, ":2: workload.seq_len", "integer");
  expect_error("[workload]\nseq_len = 9000000000000000G\n", NULL, 0, ":2: workload.seq_len", "overflow");
}

static void test_bad_inputs(void **st) {
  (void)st;
  expect_error("[model]\nheads = 32\n[parallel]\nmethod = burst\nmethod = ring\n", NULL, 0,
               "bad.ini:5:", "parallel.method: duplicate key (first given at");
  expect_error("[parallel]\ngpuz = 8\n", NULL, 0, "bad.ini:2: parallel.gpuz", "unknown key");
  expect_error("\n\n[paralel]\ngpus = 8\n", NULL, 0, "bad.ini:3:", "unknown section [paralel]");
  expect_error("gpus = 8\n", NULL, 0, "bad.ini:1:", "outside any section");
  expect_error("[parallel]\ngpus = eight\n", NULL, 0, "bad.ini:2: parallel.gpus", "not an integer");
  expect_error("[parallel]\ngpus = 0\n", NULL, 0, "bad.ini:2: parallel.gpus", "out of range");
  expect_error("[parallel]\ngpus = 8,,16\n", NULL, 0, "bad.ini:2: parallel.gpus", "empty value");
  expect_error("[parallel]\ngpus =\n", NULL, 0, "bad.ini:2: parallel.gpus", "empty value");
  expect_error("[parallel]\nmethod = flash\n", NULL, 0, "bad.ini:2: parallel.method", "'flash' is not one of: burst");
  expect_error("[parallel]\nlayout = spiral\n", NULL, 0, "parallel.layout", "zigzag");
  expect_error("[cluster]\ncoll_algo = star\n", NULL, 0, "bad.ini:2: cluster.coll_algo",
               "'star' is not one of: ring tree auto");
  expect_error("[parallel]\nzero = 4\n", NULL, 0, "bad.ini:2: parallel.zero", "out of range");
  expect_error("[parallel]\ntp_variant = v2\n", NULL, 0, "parallel.tp_variant", "v3");
  expect_error("[cluster]\ndegrade = nvlink@1/0:0.5\n", NULL, 0, "bad.ini:2: cluster.degrade",
               "only class nic names one of a node's links");
  expect_error("[cluster]\ndegrade = nic@1/x:0.5\n", NULL, 0, "bad.ini:2: cluster.degrade", "integer");
  expect_error("[workload]\ncausal = maybe\n", NULL, 0, "bad.ini:2: workload.causal", "boolean");
  expect_error("[workload]\nwindow = -1\n", NULL, 0, "workload.window", "out of range");
  /* multi-head latent attention without its latent shapes: named at the key that asked for it */
  expect_error("[model]\nattention = mla\n", NULL, 0, "bad.ini:2: model.attention: mla needs model.kv_lora_rank", NULL);
  expect_error("[model]\npreset = gpt5\n", NULL, 0, "bad.ini:2: model.preset", "unknown preset");
  expect_error("[model]\nheads = 32\nkv_heads = 5\n", NULL, 0, "bad.ini:3: model.kv_heads", "does not divide");
  expect_error("[model]\ndtype = fp8\n", NULL, 0, "model.dtype", "bf16");
  expect_error("[parallel\ngpus = 8\n", NULL, 0, "bad.ini:1:", "syntax");
  expect_error("[parallel]\njust words\n", NULL, 0, "bad.ini:2:", "syntax");
  char longline[600];
  memset(longline, 'x', sizeof longline);
  memcpy(longline, "[cluster]\ntopology = ", 21);
  longline[sizeof longline - 2] = '\n';
  longline[sizeof longline - 1] = '\0';
  expect_error(longline, NULL, 0, "bad.ini:2: cluster.topology", "value longer than 255 characters");
  char many[1024] = "[parallel]\ngpus = 1";
  for (int i = 0; i < 70; i++) strcat(many, ",1");
  strcat(many, "\n");
  expect_error(many, NULL, 0, "parallel.gpus", "more than");
}

/*
 * Every key of the table: a wrong-type value, an out-of-range (or unknown)
 * value, a missing (empty) value and a duplicate, each an error naming
 * FILE:LINE and the key. Keys without an out-of-range notion (booleans) use a
 * second wrong-type value. test_every_key_has_cases fails when a key is added
 * to the parser without a row here.
 */
typedef struct {
  const char *key;   /* section.key */
  const char *wrong; /* wrong type */
  const char *range; /* out of range or not among the names */
} key_case;

static const key_case key_cases[] = {
  {"model.preset", "7", "gpt5"},
  {"model.hidden", "wide", "0"},
  {"model.heads", "4.5", "16385"},
  {"model.kv_heads", "two", "-1"},
  {"model.head_dim", "128x", "1025"},
  {"model.layers", "true", "4097"},
  {"model.ffn", "1e4", "4194305"},
  {"model.vocab", "32k0", "16777217"},
  {"model.dtype", "16", "fp8"},
  {"model.fp8", "1", "mlp"},
  {"model.attention_kernel", "2", "flash"},
  {"model.main_grads", "4", "fp16"},
  {"model.master_weights", "0", "bf16"},
  {"model.attention", "1", "gqa"},
  {"model.v_head_dim", "128x", "1025"},
  {"model.kv_lora_rank", "wide", "0"},
  {"model.qk_nope_head_dim", "1.5", "1025"},
  {"model.qk_rope_head_dim", "x", "-1"},
  {"model.experts", "eight", "65537"},
  {"model.top_k", "two", "0"},
  {"model.moe_ffn", "wide", "0"},
  {"model.shared_experts", "one", "-1"},
  {"model.capacity_factor", "full", "0"},
  {"model.routing_skew", "skewed", "1.5"},
  {"workload.phase", "1", "finetune"},
  {"workload.seq_len", "long", "2097152M"},
  {"workload.batch", "1.5", "1048577"},
  {"workload.causal", "2", "maybe"},
  {"workload.window", "none", "-1"},
  {"workload.scope", "0", "block"},
  {"workload.decode_tokens", "x", "0"},
  {"workload.recompute", "3", "partial"},
  {"workload.kv_cache", "1", "discard"},
  {"workload.cross_entropy", "1", "fast"},
  {"workload.cached_tokens", "some", "-1"},
  {"workload.documents", "fixed:1K/x", "uniform:9/2"},
  {"workload.seed", "0x10", "-1"},
  {"workload.fragmentation", "much", "0.95"},
  {"workload.kv_block", "16.5", "1048577"},
  {"workload.max_seq_len", "long", "-1"},
  {"workload.framework", "1", "megatron-lm"},
  {"parallel.method", "1", "flash"},
  {"parallel.gpus", "eight", "0"},
  {"parallel.layout", "2", "spiral"},
  {"parallel.double_ring", "1", "twice"},
  {"parallel.lao", "2", "sometimes"},
  {"parallel.bwd_comm", "1", "fast"},
  {"parallel.ulysses_degree", "all", "0"},
  {"parallel.ulysses_placement", "1", "sideways"},
  {"parallel.tp_variant", "1", "v2"},
  {"parallel.zero", "one", "4"},
  {"parallel.ranks_per_node", "8.0", "65537"},
  {"parallel.tp", "two", "0"},
  {"parallel.dp", "2.5", "0"},
  {"parallel.pp", "x", "4097"},
  {"parallel.pp_schedule", "1", "zero-bubble"},
  {"parallel.pp_chunks", "two", "0"},
  {"parallel.micro_batch", "half", "0"},
  {"parallel.order", "tp-tp-dp-pp", "cp-tp-dp"},
  {"parallel.cp_pass", "1", "o"},
  {"parallel.ep", "all", "0"},
  {"cluster.topology", NULL, NULL}, /* names: only empty and too long; unknown names fail at run */
  {"cluster.profile", NULL, NULL},
  {"cluster.nodes", "many", "-1"},
  {"cluster.nics_per_node", "two", "0"},
  {"cluster.coll_algo", "1", "star"},
  {"cluster.nodes_per_leaf", "two", "0"},
  {"cluster.nic_gbps", "fast", "0.5"},
  {"cluster.oversub", "0.5", "fast"},
  {"cluster.straggler", "17:0", "17"},
  {"cluster.degrade", "nic:1.5", "nvme:0.5"},
  {"cluster.failed_nics", "3:0", "3"},
  {"output.trace", "2", "verbose"},
};
#define NKEY_CASES (sizeof key_cases / sizeof key_cases[0])

static void key_error(const char *key, const char *value, int duplicate, const char *why) {
  char section[32], name[32], text[9000];
  const char *dot = strchr(key, '.');
  snprintf(section, sizeof section, "%.*s", (int)(dot - key), key);
  snprintf(name, sizeof name, "%s", dot + 1);
  int n = snprintf(text, sizeof text, "; a comment\n[%s]\n%s = %s\n", section, name, value);
  if (duplicate) snprintf(text + n, sizeof text - (size_t)n, "%s = %s\n", name, value);
  char where[64];
  snprintf(where, sizeof where, "bad.ini:%d: %s", duplicate ? 4 : 3, key);
  expect_error(text, NULL, 0, where, why);
}

static void test_every_key(void **st) {
  (void)st;
  for (size_t i = 0; i < NKEY_CASES; i++) {
    const key_case *c = &key_cases[i];
    if (c->wrong) key_error(c->key, c->wrong, 0, NULL);
    if (c->range) key_error(c->key, c->range, 0, NULL);
    key_error(c->key, "", 0, "empty value");
    key_error(c->key, " , 1", 0, "empty value");
    /* a valid value given twice */
    const char *ok = !strcmp(c->key, "model.preset")                 ? "llama2-7b"
                     : !strcmp(c->key, "model.dtype")                ? "fp16"
                     : !strcmp(c->key, "model.fp8")                  ? "ffn"
                     : !strcmp(c->key, "model.attention_kernel")     ? "fa3"
                     : !strcmp(c->key, "model.main_grads")           ? "bf16"
                     : !strcmp(c->key, "model.master_weights")       ? "none"
                     : !strcmp(c->key, "model.attention")            ? "mla"
                     : !strcmp(c->key, "workload.phase")             ? "train"
                     : !strcmp(c->key, "workload.scope")             ? "layer"
                     : !strcmp(c->key, "parallel.method")            ? "ring"
                     : !strcmp(c->key, "parallel.layout")            ? "zigzag"
                     : !strcmp(c->key, "parallel.double_ring")       ? "on"
                     : !strcmp(c->key, "parallel.bwd_comm")          ? "plain"
                     : !strcmp(c->key, "parallel.tp_variant")        ? "v3"
                     : !strcmp(c->key, "parallel.ulysses_placement") ? "ring-first"
                     : !strcmp(c->key, "parallel.order")             ? "cp-tp-dp-pp"
                     : !strcmp(c->key, "cluster.topology")           ? "host"
                     : !strcmp(c->key, "cluster.profile")            ? "host"
                     : !strcmp(c->key, "cluster.coll_algo")          ? "tree"
                     : !strcmp(c->key, "workload.kv_cache")          ? "drop"
                     : !strcmp(c->key, "workload.cross_entropy")     ? "fused"
                     : !strcmp(c->key, "workload.fragmentation")     ? "0.2"
                     : !strcmp(c->key, "workload.framework")         ? "torchtitan"
                     : !strcmp(c->key, "cluster.straggler")          ? "3:1.5"
                     : !strcmp(c->key, "cluster.degrade")            ? "nic:0.5"
                     : !strcmp(c->key, "cluster.failed_nics")        ? "0:1"
                     : !strcmp(c->key, "parallel.cp_pass")           ? "q"
                     : !strcmp(c->key, "parallel.pp_schedule")       ? "interleaved"
                     : !strcmp(c->key, "workload.documents")         ? "none"
                     : !strcmp(c->key, "model.routing_skew")         ? "0.5"
                     : (!strcmp(c->key, "workload.causal") || !strcmp(c->key, "workload.recompute") ||
                        !strcmp(c->key, "parallel.lao") || !strcmp(c->key, "output.trace"))
                       ? "on"
                       : "2";
    key_error(c->key, ok, 1, "duplicate key (first given at");
    /* the same through --set names the override */
    char set[64];
    snprintf(set, sizeof set, "%s=%s", c->key, c->range ? c->range : "");
    char *sets[] = {set};
    char needle[64];
    snprintf(needle, sizeof needle, "--set[0]: %s", c->key);
    expect_error("[model]\n", sets, 1, needle, NULL);
  }
  /* names longer than the field (only --set can hold one: file lines stop before) */
  static const char *const names[] = {"cluster.topology", "cluster.profile"};
  for (int i = 0; i < 2; i++) {
    char set[1200];
    int n = snprintf(set, sizeof set, "%s=", names[i]);
    memset(set + n, 'x', sizeof set - (size_t)n - 1);
    set[sizeof set - 1] = '\0';
    char *sets[] = {set};
    expect_error("[model]\n", sets, 1, names[i], "value longer than");
  }
}

static void test_every_key_has_cases(void **st) {
  (void)st;
  char buf[64];
  int n = 0;
  for (int i = 0; bs_scenario_key(i, buf, sizeof buf); i++, n++) {
    int found = 0;
    for (size_t j = 0; j < NKEY_CASES; j++) found |= !strcmp(buf, key_cases[j].key);
    if (!found) fail_msg("scenario key %s has no row in the bad-input table", buf);
  }
  assert_int_equal(n, (int)NKEY_CASES);
}

static void test_where(void **st) {
  (void)st;
  const char *p = write_file("where.ini", "[parallel]\ngpus = 8\n[cluster]\ntopology = torus\n");
  char *sets[] = {"cluster.profile=nosuch"};
  bs_scenario s;
  char err[1024];
  assert_int_equal(bs_scenario_load(p, sets, 1, &s, err, sizeof err), 0);
  char want[600];
  snprintf(want, sizeof want, "%s:4", p);
  assert_string_equal(bs_scenario_where(&s, "cluster.topology"), want);
  assert_string_equal(bs_scenario_where(&s, "cluster.profile"), "--set[0]");
  snprintf(want, sizeof want, "%s (from the default model.preset = llama2-7b)", p);
  assert_string_equal(bs_scenario_where(&s, "model.heads"), want);
  assert_string_equal(bs_scenario_where(&s, "workload.seq_len"), p);
  assert_null(bs_scenario_where(&s, "cluster.torus"));
  bs_scenario_free(&s);
}

static void test_missing_file(void **st) {
  (void)st;
  bs_scenario s;
  char err[1024];
  char path[600];
  snprintf(path, sizeof path, "%s/none.ini", dir);
  assert_int_equal(bs_scenario_load(path, NULL, 0, &s, err, sizeof err), -1);
  assert_non_null(strstr(err, "none.ini: cannot open"));
}

/* Bytes as a file (the text may hold NUL). */
static const char *write_bytes(const char *name, const char *bytes, size_t n) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(bytes, 1, n, f), n);
  fclose(f);
  return path;
}

static void expect_load_error(const char *path, const char *n1, const char *n2) {
  bs_scenario s;
  char err[1024];
  if (bs_scenario_load(path, NULL, 0, &s, err, sizeof err) == 0) fail_msg("accepted %s", path);
  if (n1 && !strstr(err, n1)) fail_msg("error '%s' lacks '%s'", err, n1);
  if (n2 && !strstr(err, n2)) fail_msg("error '%s' lacks '%s'", err, n2);
  assert_null(s.points);
}

/* A directory or a file that fails to read is an error naming it, never an empty (default) scenario. */
static void test_unreadable_scenario(void **st) {
  (void)st;
  char sub[600];
  snprintf(sub, sizeof sub, "%s/a-directory.ini", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  expect_load_error(sub, "a-directory.ini: is a directory", NULL);
  /* a read error after a successful open (EIO at offset 0 of the process's own memory) */
  if (access("/proc/self/mem", R_OK) == 0) expect_load_error("/proc/self/mem", "/proc/self/mem: cannot read", NULL);
}

/* Lines of any length up to the file limit: a 30-value list, a long comment, a long bad value. */
static void test_long_lines(void **st) {
  (void)st;
  char text[8192] = "; ";
  memset(text + 2, 'c', 5000);
  strcpy(text + 5002, "\n[workload]\nseq_len = ");
  for (int i = 1; i <= 30; i++) {
    char v[32];
    snprintf(v, sizeof v, "%s%d", i > 1 ? ",   " : "", 1024 * i);
    strcat(text, v);
  }
  strcat(text, "\n");
  assert_true(strlen(text) > 5000 + 200);
  const char *p = write_file("long.ini", text);
  bs_scenario s;
  char err[1024];
  assert_int_equal(bs_scenario_load(p, NULL, 0, &s, err, sizeof err), 0);
  assert_int_equal(s.npoints, 30);
  assert_int_equal(s.points[29].work.seq_len, 30 * 1024);
  bs_scenario_free(&s);
  /* a long wrong value: the message keeps its reason (the value is shortened) */
  static char big[20000];
  int n = snprintf(big, sizeof big, "[parallel]\ngpus = ");
  memset(big + n, '7', 10000);
  strcpy(big + n + 10000, "x\n");
  expect_error(big, NULL, 0, "bad.ini:2: parallel.gpus: '777", "...' is not an integer");
  /* a long key */
  n = snprintf(big, sizeof big, "[parallel]\n");
  memset(big + n, 'k', 5000);
  strcpy(big + n + 5000, " = 1\n");
  expect_error(big, NULL, 0, "bad.ini:2: parallel.kkk", "...: unknown key");
}

/* --set values are never cut: a value after 4,095 characters of padding, and a long list. */
static void test_set_long_values(void **st) {
  (void)st;
  static char set1[6000], set2[9000];
  int n = snprintf(set1, sizeof set1, "workload.seq_len=");
  memset(set1 + n, ' ', 4090);
  strcpy(set1 + n + 4090, "65536");
  n = snprintf(set2, sizeof set2, "parallel.gpus=");
  for (int i = 0; i < 64; i++) {
    memset(set2 + n, ' ', 100);
    n += 100;
    n += snprintf(set2 + n, sizeof set2 - (size_t)n, "%d%s", i + 1, i < 63 ? "," : "");
  }
  const char *p = write_file("set.ini", "[model]\n");
  char *sets[] = {set1, set2};
  bs_scenario s;
  char err[1024];
  assert_int_equal(bs_scenario_load(p, sets, 2, &s, err, sizeof err), 0);
  assert_int_equal(s.npoints, 64);
  assert_int_equal(s.points[0].work.seq_len, 65536);
  assert_int_equal(s.points[63].par.gpus, 64);
  bs_scenario_free(&s);
  /* still too many values, or a long unknown key: errors naming --set[i] */
  strcat(set2, ",65");
  char *sets2[] = {set1, set2};
  expect_error("[model]\n", sets2, 2, "--set[1]: parallel.gpus", "more than 64 values");
  static char set3[300];
  n = snprintf(set3, sizeof set3, "parallel.");
  memset(set3 + n, 'k', 200);
  strcpy(set3 + n + 200, "=1");
  char *sets3[] = {set3};
  expect_error("[model]\n", sets3, 1, "--set[0]: 'parallel.kkk", "unknown key");
}

/* NUL bytes, byte order marks, CRLF and section headers with extra text. */
static void test_bytes_and_sections(void **st) {
  (void)st;
  static const char nul[] = "[parallel]\ngpus = 8\n; x\0y\nmethod = ring\n";
  expect_load_error(write_bytes("nul.ini", nul, sizeof nul - 1), "nul.ini:3: NUL byte", NULL);
  static const char nul2[] = "[parallel]\ngpus = 8\0 16\n";
  expect_load_error(write_bytes("nul2.ini", nul2, sizeof nul2 - 1), "nul2.ini:2: NUL byte", NULL);
  bs_scenario s;
  char err[1024];
  const char *p = write_file("bom.ini", "\xEF\xBB\xBF[parallel]\r\ngpus = 16\r\nmethod = ring ; a comment\r\n");
  assert_int_equal(bs_scenario_load(p, NULL, 0, &s, err, sizeof err), 0);
  assert_int_equal(s.points[0].par.gpus, 16);
  assert_int_equal(s.points[0].par.method, BS_RING);
  bs_scenario_free(&s);
  expect_error("\xEF\xBB\xBF[paralel]\ngpus = 8\n", NULL, 0, "bad.ini:1:", "unknown section [paralel]");
  p = write_file("spaced.ini", "  [ parallel ]  ; comment\ngpus = 16\n[parallel]\nmethod = ring\n");
  assert_int_equal(bs_scenario_load(p, NULL, 0, &s, err, sizeof err), 0);
  assert_int_equal(s.points[0].par.gpus, 16);
  assert_int_equal(s.points[0].par.method, BS_RING);
  bs_scenario_free(&s);
  expect_error("[parallel] gpus = 16\n", NULL, 0, "bad.ini:1:", "text after the section header: 'gpus = 16'");
  expect_error("[model]\n[]\ngpus = 16\n", NULL, 0, "bad.ini:2:", "unknown section []");
  expect_error("[parallel]\ngpus = 8 # hash is no inline comment\n", NULL, 0, "bad.ini:2: parallel.gpus",
               "not an integer");
  expect_error("[parallel]\ngpus = 8,\n", NULL, 0, "bad.ini:2: parallel.gpus", "empty value");
  expect_error("[workload]\nseq_len = 32KB\n", NULL, 0, "bad.ini:2: workload.seq_len", "not an integer");
}

/* A check on a value a preset gave names the preset's line and the user's key, never blames a key not given. */
static void test_preset_blame(void **st) {
  (void)st;
  expect_error("[model]\npreset = llama2-70b\nheads = 12\n", NULL, 0,
               "bad.ini:3: model.heads: 12 is not a multiple of kv_heads 8", "model.preset = llama2-70b at ");
  expect_error("[model]\npreset = llama2-70b\nheads = 12\n", NULL, 0, "bad.ini:2;", "set model.kv_heads");
  expect_error("[model]\npreset = llama2-70b\nkv_heads = 5\n", NULL, 0,
               "bad.ini:3: model.kv_heads: 5 does not divide heads 64", "(model.preset = llama2-70b at ");
  expect_error("[model]\nheads = 12\n", NULL, 0, "bad.ini:2: model.heads: 12 is not a multiple of kv_heads 32",
               "the default model.preset = llama2-7b");
  expect_error("[model]\nheads = 12\nkv_heads = 5\n", NULL, 0, "bad.ini:3: model.kv_heads: 5 does not divide heads 12",
               "(model.heads at ");
  char *sets[] = {"model.heads=12"};
  expect_error("[model]\npreset = llama2-70b\n", sets, 1, "--set[0]: model.heads: 12 is not a multiple",
               "model.preset = llama2-70b at ");
  /* where a preset's key came from, for errors found after loading */
  const char *p = write_file("preset.ini", "; c\n[model]\npreset = llama2-70b\n");
  bs_scenario s;
  char err[1024], want[700];
  assert_int_equal(bs_scenario_load(p, NULL, 0, &s, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s:3 (from model.preset = llama2-70b)", p);
  assert_string_equal(bs_scenario_where(&s, "model.kv_heads"), want);
  assert_string_equal(bs_scenario_where(&s, "model.dtype"), p);
  bs_scenario_free(&s);
}

/* A relative platform or profile file in a scenario is next to the scenario; from --set, in the current directory. */
static void test_relative_paths(void **st) {
  (void)st;
  char sub[600], path[700], want[800];
  snprintf(sub, sizeof sub, "%s/scenarios", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  snprintf(path, sizeof path, "%s/rel.ini", sub);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("[cluster]\ntopology = plat.xml, dgx-h100, /abs/p.xml, up/p.xml\nprofile = mine.json\n", f);
  fclose(f);
  bs_scenario s;
  char err[1024];
  assert_int_equal(bs_scenario_load(path, NULL, 0, &s, err, sizeof err), 0);
  assert_int_equal(s.npoints, 4);
  snprintf(want, sizeof want, "%s/plat.xml", sub);
  assert_string_equal(s.points[0].cluster.topology, want);
  assert_string_equal(s.points[1].cluster.topology, "dgx-h100");
  assert_string_equal(s.points[2].cluster.topology, "/abs/p.xml");
  snprintf(want, sizeof want, "%s/up/p.xml", sub);
  assert_string_equal(s.points[3].cluster.topology, want);
  snprintf(want, sizeof want, "%s/mine.json", sub);
  assert_string_equal(s.points[0].cluster.profile, want);
  bs_scenario_free(&s);
  char *sets[] = {"cluster.topology=plat.xml"};
  assert_int_equal(bs_scenario_load(path, sets, 1, &s, err, sizeof err), 0);
  assert_string_equal(s.points[0].cluster.topology, "plat.xml");
  bs_scenario_free(&s);
  /* a scenario in the current directory keeps the name as written */
  char cwd[600];
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(sub), 0);
  assert_int_equal(bs_scenario_load("rel.ini", NULL, 0, &s, err, sizeof err), 0);
  assert_int_equal(chdir(cwd), 0);
  assert_string_equal(s.points[0].cluster.topology, "plat.xml");
  bs_scenario_free(&s);
  /* a pipe (process substitution's /dev/fd/N) has no directory of its own: the current one */
  char fifo[700];
  snprintf(fifo, sizeof fifo, "%s/pipe.ini", sub);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    FILE *w = fopen(fifo, "w");
    if (w) fputs("[cluster]\ntopology = plat.xml\n", w);
    _exit(w && fclose(w) == 0 ? 0 : 1);
  }
  assert_int_equal(bs_scenario_load(fifo, NULL, 0, &s, err, sizeof err), 0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_string_equal(s.points[0].cluster.topology, "plat.xml");
  bs_scenario_free(&s);
  /* the joined path must still fit the field */
  char name[300];
  memset(name, 'n', 250);
  strcpy(name + 250, ".xml");
  char text[400];
  snprintf(text, sizeof text, "[cluster]\ntopology = %s\n", name);
  f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  expect_load_error(path, "rel.ini:2: cluster.topology", "relative to the scenario's directory");
}

static void test_sweep_limit(void **st) {
  (void)st;
  expect_error(
    "[workload]\nseq_len=1,2,3,4,5,6,7,8,9,10,11\nbatch=1,2,3,4,5,6,7,8,9,10\n"
    "[parallel]\ngpus=1,2,3,4,5,6,7,8,9,10\nulysses_degree=1,2,3,4,5,6,7,8,9,10\n"
    "ranks_per_node=1,2,3,4,5,6,7,8,9,10\n",
    NULL, 0, "more than 100000 points", NULL);
}

/* Typos get the closest known name (edit distance at most 2, or a prefix)
 * after the message; names far from every known one get none. */
static void test_did_you_mean(void **st) {
  (void)st;
  expect_error("[parallel]\nmethd = burst\n", NULL, 0, "bad.ini:2: parallel.methd: unknown key",
               "(did you mean parallel.method?)");
  char gpu[] = "parallel.gpu=8", *bad[] = {gpu};
  expect_error("[parallel]\ngpus = 8\n", bad, 1, "--set[0]: parallel.gpu: unknown key (did you mean parallel.gpus?)",
               NULL);
  expect_error("[workload]\nseq = 8K\n", NULL, 0, "workload.seq: unknown key (did you mean workload.seq_len?)", NULL);
  expect_error("[paralel]\ngpus = 8\n", NULL, 0, "unknown section [paralel]", "(did you mean parallel?)");
  expect_error("[parallel]\nmethod = ulyses\n", NULL, 0, "'ulyses' is not one of:", "(did you mean ulysses?)");
  expect_error("[parallel]\nlayout = zigzg\n", NULL, 0, "'zigzg' is not one of:", "(did you mean zigzag?)");
  expect_error("[workload]\nphase = pre\n", NULL, 0, "'pre' is not one of:", "(did you mean prefill?)");
  expect_error("[model]\npreset = llama3.1-7b\n", NULL, 0, "unknown preset 'llama3.1-7b' (",
               "qwen2.5-72b, deepseek-v3, deepseek-v2-lite, mixtral-8x7b) (did you mean llama3.1-8b?)");
  expect_error("[model]\npreset = mistral\n", NULL, 0, "(did you mean mistral-7b?)", NULL);
  /* a version given short is the longer name, not a neighbour version (llama2-70b, qwen2-72b) */
  expect_error("[model]\npreset = llama3-70b\n", NULL, 0, "(did you mean llama3.1-70b?)", NULL);
  expect_error("[model]\npreset = llama3-405b\n", NULL, 0, "(did you mean llama3.1-405b?)", NULL);
  expect_error("[model]\npreset = qwen2-72b\n", NULL, 0, "(did you mean qwen2.5-72b?)", NULL);
  expect_error("[model]\npreset = llama2-70\n", NULL, 0, "(did you mean llama2-70b?)", NULL);
  char err[512];
  bs_scenario s;
  assert_int_not_equal(
    bs_scenario_load(write_file("far.ini", "[parallel]\nmethod = flash\n"), NULL, 0, &s, err, sizeof err), 0);
  assert_null(strstr(err, "did you mean"));
  assert_int_not_equal(
    bs_scenario_load(write_file("far.ini", "[parallel]\nbandwidth = 1\n"), NULL, 0, &s, err, sizeof err), 0);
  assert_null(strstr(err, "did you mean"));
}

/* The names come from their tables: every method and preset parses, and the
 * messages list them all; a point without a profile takes its topology's. */
static void test_name_tables(void **st) {
  (void)st;
  expect_error("[parallel]\nmethod = flash\n", NULL, 0,
               "'flash' is not one of: burst ring ring-li2021 ulysses usp tp tree", NULL);
  expect_error("[model]\npreset = gpt5\n", NULL, 0,
               "unknown preset 'gpt5' (llama2-7b, llama2-13b, llama2-70b, llama3.1-8b, llama3-8b, llama3.1-70b, "
               "llama3.1-405b, mistral-7b, qwen2.5-72b, deepseek-v3, deepseek-v2-lite, mixtral-8x7b)",
               NULL);
  char text[256], err[512];
  bs_scenario s;
  for (int m = 0; m < BS_METHOD_COUNT; m++) {
    snprintf(text, sizeof text, "[parallel]\nmethod = %s\n", bs_method_name((bs_method)m));
    assert_int_equal(bs_scenario_load(write_file("m.ini", text), NULL, 0, &s, err, sizeof err), 0);
    assert_int_equal(s.points[0].par.method, m);
    bs_scenario_free(&s);
  }
  for (int i = 0; bs_model_preset_name(i); i++) {
    snprintf(text, sizeof text, "[model]\npreset = %s\n", bs_model_preset_name(i));
    assert_int_equal(bs_scenario_load(write_file("p.ini", text), NULL, 0, &s, err, sizeof err), 0);
    assert_string_equal(s.points[0].model.preset, bs_model_preset_name(i));
    bs_scenario_free(&s);
  }
  const char *p = write_file("t.ini", "[cluster]\ntopology = dgx-a100, dgx-h100, a100-pcie-node, host, mine.xml\n");
  assert_int_equal(bs_scenario_load(p, NULL, 0, &s, err, sizeof err), 0);
  assert_int_equal(s.npoints, 5);
  const char *want[] = {"a100-sxm4-80gb", "h100-sxm", "a100-pcie-40gb", "host", "a100-sxm4-80gb"};
  for (int i = 0; i < 5; i++) assert_string_equal(s.points[i].cluster.profile, want[i]);
  bs_scenario_free(&s);
  char *set[] = {"cluster.profile=h200"};
  assert_int_equal(bs_scenario_load(p, set, 1, &s, err, sizeof err), 0);
  for (int i = 0; i < 5; i++) assert_string_equal(s.points[i].cluster.profile, "h200");
  bs_scenario_free(&s);
}

int main(int argc, char **argv) {
  snprintf(dir, sizeof dir, "/tmp/bs_scenario_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_basic),
    cmocka_unit_test(test_preset_then_explicit),
    cmocka_unit_test(test_set_overrides),
    cmocka_unit_test(test_huge_sizes),
    cmocka_unit_test(test_bad_inputs),
    cmocka_unit_test(test_missing_file),
    cmocka_unit_test(test_sweep_limit),
    cmocka_unit_test(test_every_key),
    cmocka_unit_test(test_every_key_has_cases),
    cmocka_unit_test(test_where),
    cmocka_unit_test(test_unreadable_scenario),
    cmocka_unit_test(test_long_lines),
    cmocka_unit_test(test_set_long_values),
    cmocka_unit_test(test_bytes_and_sections),
    cmocka_unit_test(test_preset_blame),
    cmocka_unit_test(test_relative_paths),
    cmocka_unit_test(test_name_tables),
    cmocka_unit_test(test_did_you_mean),
  };
  int rc = BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return rc;
}
