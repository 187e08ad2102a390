/*
 * test_output.c — the result JSON keeps the result contract of docs/design.md, CSV has one
 * row per point, and writes are atomic (a failed write leaves nothing behind).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"
#include "src/output.h"

static char dir[256];

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = '\0';
  fclose(f);
  return s;
}

static bs_result sample(int method, int gpus) {
  bs_result r;
  memset(&r, 0, sizeof r);
  bs_config_default(&r.cfg);
  r.cfg.par.method = method;
  r.cfg.par.gpus = gpus;
  r.mode = "sim";
  r.time.step = 1.5;
  r.time.fwd = 0.5;
  r.time.bwd = 1.0;
  r.time.compute = 1.25;
  r.time.comm_exposed = 0.25;
  r.comm.per_rank_max_sent = 123456789012LL;
  r.comm.total = 5;
  r.mem.peak_bytes_max = 3LL << 30;
  r.mem.breakdown[BS_MEM_COMM] = 1 << 20;
  r.sim_events = 42;
  return r;
}

static void test_json_contract(void **st) {
  (void)st;
  bs_result r[2] = {sample(BS_BURST, 32), sample(BS_ULYSSES, 64)};
  char path[512], err[512];
  snprintf(path, sizeof path, "%s/r.json", dir);
  assert_int_equal(bs_output_json(path, "sim", r, 2, err, sizeof err), 0);
  char *text = slurp(path);
  assert_non_null(text);
  cJSON *root = cJSON_Parse(text);
  assert_non_null(root);
  assert_string_equal(cJSON_GetObjectItem(root, "tool")->valuestring, "burstsim");
  assert_string_equal(cJSON_GetObjectItem(root, "mode")->valuestring, "sim");
  cJSON *res = cJSON_GetObjectItem(root, "results");
  assert_int_equal(cJSON_GetArraySize(res), 2);
  cJSON *a = cJSON_GetArrayItem(res, 0), *b = cJSON_GetArrayItem(res, 1);
  assert_string_equal(cJSON_GetObjectItem(a, "method")->valuestring, "burst");
  assert_string_equal(cJSON_GetObjectItem(b, "method")->valuestring, "ulysses");
  assert_int_equal(cJSON_GetObjectItem(b, "gpus")->valueint, 64);
  cJSON *t = cJSON_GetObjectItem(a, "time_s");
  assert_float_equal(cJSON_GetObjectItem(t, "step")->valuedouble, 1.5, 0);
  assert_float_equal(cJSON_GetObjectItem(t, "comm_exposed")->valuedouble, 0.25, 0);
  cJSON *cb = cJSON_GetObjectItem(a, "comm_bytes");
  assert_float_equal(cJSON_GetObjectItem(cb, "per_rank_max_sent")->valuedouble, 123456789012.0, 0);
  cJSON *m = cJSON_GetObjectItem(a, "memory");
  assert_float_equal(cJSON_GetObjectItem(m, "peak_bytes_max")->valuedouble, (double)(3LL << 30), 0);
  assert_true(cJSON_IsFalse(cJSON_GetObjectItem(m, "oom")));
  assert_float_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "breakdown"), "comm")->valuedouble, 1048576.0, 0);
  assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(a, "sim"), "events")->valueint, 42);
  cJSON_Delete(root);
  free(text);
}

/* A real run's result: no "sim" object, the plan's decision, the process RSS and an object per
 * rank, each key in the order of the result contract. */
static void test_json_run_result(void **st) {
  (void)st;
  bs_result r = sample(BS_BURST, 2);
  r.mode = "run";
  r.mem.rss_bytes = 7;
  r.decision = (bs_decision){.valid = 1, .double_ring = 0, .ring_inner = 2, .ring_outer = 1, .ulysses_degree = 1};
  bs_rank_result ranks[2] = {{.rank = 0, .step = 1.5, .bytes_sent = 10}, {.rank = 1, .step = 1.25, .peak_bytes = 9}};
  r.ranks = ranks;
  r.nranks = 2;
  cJSON *root = bs_output_json_tree("run", &r, 1);
  cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "results"), 0);
  const char *keys[] = {"method",          "gpus",          "seq_len",       "batch",          "phase",
                        "scope",           "causal",        "window",        "recompute",      "layout",
                        "double_ring",     "lao",           "bwd_comm",      "ulysses_degree", "ulysses_placement",
                        "tp_variant",      "zero",          "decode_tokens", "kv_cache",       "cross_entropy",
                        "cp_pass",         "cached_tokens", "kv_block",      "max_seq_len",    "padded_tokens",
                        "pad_flops_share", "model",         "topology",      "nics_per_node",  "profile",
                        "coll_algo",       "whatif",        "plan",          "parallel",       "status",
                        "time_s",          "comm_bytes",    "memory",        "throughput",     "ranks"};
  int i = 0;
  for (cJSON *k = a->child; k; k = k->next, i++) {
    assert_true(i < (int)(sizeof keys / sizeof keys[0]));
    assert_string_equal(k->string, keys[i]);
  }
  assert_int_equal(i, (int)(sizeof keys / sizeof keys[0]));
  cJSON *plan = cJSON_GetObjectItem(a, "plan");
  assert_true(cJSON_IsFalse(cJSON_GetObjectItem(plan, "double_ring")));
  assert_int_equal(cJSON_GetObjectItem(plan, "ring_inner")->valueint, 2);
  assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(a, "memory"), "rss_bytes")->valueint, 7);
  assert_string_equal(cJSON_GetObjectItem(a, "tp_variant")->valuestring, "v1");
  assert_string_equal(cJSON_GetObjectItem(a, "double_ring")->valuestring, "auto");
  cJSON *ra = cJSON_GetObjectItem(a, "ranks");
  assert_int_equal(cJSON_GetArraySize(ra), 2);
  cJSON *r1 = cJSON_GetArrayItem(ra, 1);
  assert_int_equal(cJSON_GetObjectItem(r1, "rank")->valueint, 1);
  assert_float_equal(cJSON_GetObjectItem(r1, "step")->valuedouble, 1.25, 0);
  assert_int_equal(cJSON_GetObjectItem(r1, "peak_bytes")->valueint, 9);
  assert_int_equal(cJSON_GetArraySize(r1), 10);
  cJSON_Delete(root);
}

static void test_csv(void **st) {
  (void)st;
  bs_result r[3] = {sample(BS_BURST, 8), sample(BS_RING, 16), sample(BS_TP, 32)};
  char path[512], err[512];
  snprintf(path, sizeof path, "%s/r.csv", dir);
  assert_int_equal(bs_output_csv(path, r, 3, err, sizeof err), 0);
  char *text = slurp(path);
  int lines = 0;
  for (char *p = text; *p; p++) lines += *p == '\n';
  assert_int_equal(lines, 4);
  assert_non_null(strstr(text, "\nring,16,"));
  free(text);
}

static void test_atomic_failure(void **st) {
  (void)st;
  char path[512], err[512];
  snprintf(path, sizeof path, "%s/no-such-dir/r.json", dir);
  bs_result r = sample(BS_BURST, 8);
  assert_int_equal(bs_output_json(path, "sim", &r, 1, err, sizeof err), -1);
  assert_non_null(strstr(err, "no-such-dir/r.json"));
  struct stat sb;
  assert_int_not_equal(stat(path, &sb), 0);
  /* an existing file is replaced whole, never appended to or truncated half-way */
  snprintf(path, sizeof path, "%s/keep.json", dir);
  assert_int_equal(bs_write_file(path, "old", 3, err, sizeof err), 0);
  assert_int_equal(bs_write_file(path, "newer", 5, err, sizeof err), 0);
  char *text = slurp(path);
  assert_string_equal(text, "newer");
  free(text);
}

static void test_table(void **st) {
  (void)st;
  bs_result r[2] = {sample(BS_BURST, 8), sample(BS_USP, 16)};
  snprintf(r[1].error, sizeof r[1].error, "parallel.gpus: too many");
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  bs_output_table(f, r, 2);
  fclose(f);
  assert_non_null(strstr(buf, "burst"));
  assert_non_null(strstr(buf, "1.500 s"));
  assert_non_null(strstr(buf, "16.7%"));
  assert_non_null(strstr(buf, "failed: parallel.gpus: too many"));
  free(buf);
}

/* The --explain table: the critical rank and the step, every part some point has in ms and % of the
 * step (a part no point has is left out), "-" and the status for a point without figures. */
static void test_explain_table(void **st) {
  (void)st;
  bs_result r[2] = {sample(BS_BURST, 8), sample(BS_USP, 16)};
  r[0].explain.critical_rank = 5;
  r[0].explain.step = 1.5;
  r[0].explain.critical.compute[BS_XK_ATTN_FWD] = 0.75;
  r[0].explain.critical.launch = 0.375;
  r[0].explain.critical.exposed[BS_XL_NETWORK] = 0.25;
  r[0].explain.critical.wait_for_peers = 0.125;
  r[1].refused = 1;
  snprintf(r[1].error, sizeof r[1].error, "parallel.gpus: too many");
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  bs_output_explain_table(f, r, 2);
  fclose(f);
  fprintf(stderr, "%s", buf);
  assert_non_null(strstr(buf, "where the step goes: the critical rank of each point"));
  assert_non_null(strstr(buf, "rank  step ms       attn fwd         launch        network          peers\n"));
  assert_non_null(strstr(buf, "   5 1500.000 750.000  50.0% 375.000  25.0% 250.000  16.7% 125.000   8.3%\n"));
  assert_non_null(strstr(buf, "refused"));
  assert_null(strstr(buf, "nvlink"));
  assert_null(strstr(buf, "gemm"));
  free(buf);
}

/* A refused and a failed point: the status and reason, no figures (null in JSON, empty in CSV,
 * "-" in the table), their settings still there; a column for each setting that varies, none
 * for one that does not. */
static void test_no_figures(void **st) {
  (void)st;
  bs_result r[3] = {sample(BS_BURST, 8), sample(BS_ULYSSES, 8), sample(BS_RING, 8)};
  r[1].refused = 1;
  snprintf(r[1].error, sizeof r[1].error, "parallel.gpus: ulysses needs gpus <= kv_heads: 8 > 4");
  snprintf(r[2].error, sizeof r[2].error, "the simulation process died of signal 6");
  r[2].cfg.par.zero = 3; /* varies: a column */
  char path[512], err[512];
  snprintf(path, sizeof path, "%s/nf.json", dir);
  assert_int_equal(bs_output_json(path, "sim", r, 3, err, sizeof err), 0);
  char *text = slurp(path);
  cJSON *root = cJSON_Parse(text);
  free(text);
  cJSON *res = cJSON_GetObjectItem(root, "results");
  const char *status[] = {"ok", "refused", "failed"};
  for (int i = 0; i < 3; i++) {
    cJSON *o = cJSON_GetArrayItem(res, i);
    assert_string_equal(cJSON_GetObjectItem(o, "status")->valuestring, status[i]);
    cJSON *step = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "time_s"), "step");
    cJSON *oom = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "memory"), "oom");
    cJSON *tps = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "throughput"), "tokens_per_s");
    assert_true(i == 0 ? cJSON_IsNumber(step) && cJSON_IsBool(oom) && cJSON_IsNumber(tps)
                       : cJSON_IsNull(step) && cJSON_IsNull(oom) && cJSON_IsNull(tps));
    assert_int_equal(cJSON_GetObjectItem(o, "gpus")->valueint, 8); /* settings stay */
    assert_true((cJSON_GetObjectItem(o, "error") != NULL) == (i > 0));
  }
  cJSON_Delete(root);
  snprintf(path, sizeof path, "%s/nf.csv", dir);
  assert_int_equal(bs_output_csv(path, r, 3, err, sizeof err), 0);
  text = slurp(path);
  /* step_s is column 21, oom 32, status 36: count commas up to each */
  for (int i = 1; i <= 3; i++) {
    char *line = text;
    for (int k = 0; k < i; k++) line = strchr(line, '\n') + 1;
    char *c = line;
    for (int k = 0; k < 20; k++) c = strchr(c, ',') + 1;
    assert_true(i == 1 ? *c != ',' : *c == ','); /* step_s empty for refused and failed */
  }
  assert_non_null(strstr(text, ",refused,"));
  assert_non_null(strstr(text, ",failed,"));
  free(text);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  bs_output_table(f, r, 3);
  fclose(f);
  assert_non_null(strstr(buf, " zero "));
  assert_null(strstr(buf, " phase "));  /* train everywhere: no column */
  assert_null(strstr(buf, " layout ")); /* contiguous everywhere */
  assert_non_null(strstr(buf, "refused: parallel.gpus: ulysses needs gpus <= kv_heads: 8 > 4"));
  assert_non_null(strstr(buf, "failed: the simulation process died of signal 6"));
  assert_null(strstr(strstr(buf, "ulysses"), "1.500 s")); /* no figure on the refused line */
  free(buf);
}

/*
 * The throughput of one point against a hand computation of the model FLOPs from the model's
 * shape (Megatron-LM's convention, src/flops.c): llama2-7b-like, one model-scope train step.
 */
static void test_throughput_hand(void **st) {
  (void)st;
  bs_result r = sample(BS_RING, 8);
  bs_config *c = &r.cfg;
  c->work.scope = BS_SCOPE_MODEL;
  c->work.phase = BS_TRAIN;
  c->work.causal = 1;
  c->work.window = 0;
  c->work.batch = 2;
  c->work.seq_len = 4096;
  c->model.hidden = 4096;
  c->model.heads = 32;
  c->model.kv_heads = 8;
  c->model.head_dim = 128;
  c->model.ffn = 11008;
  c->model.vocab = 32000;
  c->model.layers = 32;
  snprintf(c->cluster.profile, sizeof c->cluster.profile, "no-such-profile");
  r.time.step = 2.0;
  /* by hand: per token and layer, QKV 2*4096*(32+16)*128, output 2*4096*4096, MLP 6*4096*11008;
   * attention 4*32*128 * (4096*4097/2) pairs per sequence; LM head 2*4096*32000 per token */
  double T = 2.0 * 4096, dense = 2.0 * 4096 * 48 * 128 + 2.0 * 4096 * 4096 + 6.0 * 4096 * 11008;
  double attn = 2 * 4.0 * 32 * 128 * (4096.0 * 4097 / 2);
  double fwd = 32 * (T * dense + attn) + T * 2.0 * 4096 * 32000, flops = 3 * fwd;
  char path[512], err[512];
  snprintf(path, sizeof path, "%s/tp.json", dir);
  assert_int_equal(bs_output_json(path, "sim", &r, 1, err, sizeof err), 0);
  char *text = slurp(path);
  cJSON *root = cJSON_Parse(text);
  free(text);
  cJSON *tp = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "results"), 0), "throughput");
  assert_float_equal(cJSON_GetObjectItem(tp, "model_flops")->valuedouble, flops, flops * 1e-12);
  assert_float_equal(cJSON_GetObjectItem(tp, "tokens_per_s")->valuedouble, T / 2.0, 1e-9);
  assert_float_equal(cJSON_GetObjectItem(tp, "tokens_per_s_per_gpu")->valuedouble, T / 2.0 / 8, 1e-9);
  assert_float_equal(cJSON_GetObjectItem(tp, "model_tflops_per_gpu")->valuedouble, flops / 2.0 / 8 / 1e12, 1e-9);
  /* an unknown profile has no peak: no MFU rather than a made-up one */
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(tp, "mfu")));
  cJSON_Delete(root);
  /* with a shipped profile, MFU = model TFLOP/s per GPU / its peak */
  snprintf(c->cluster.profile, sizeof c->cluster.profile, "a100-sxm4-80gb");
  assert_int_equal(bs_output_json(path, "sim", &r, 1, err, sizeof err), 0);
  text = slurp(path);
  root = cJSON_Parse(text);
  free(text);
  tp = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "results"), 0), "throughput");
  double peak = cJSON_GetObjectItem(tp, "peak_tflops_per_gpu")->valuedouble;
  assert_float_equal(peak, 312.0, 1e-9); /* A100 dense BF16, NVIDIA's A100 datasheet */
  assert_float_equal(cJSON_GetObjectItem(tp, "mfu")->valuedouble, flops / 2.0 / 8 / 1e12 / 312.0, 1e-12);
  cJSON_Delete(root);
  /* decode at attention scope: 4 new tokens per sequence after 1000 cached, each sees every cached
   * key (causal: the new ones come after): 4 Zq d x 4 x 1000 per sequence, 4 tokens per sequence */
  c->work.phase = BS_DECODE;
  c->work.scope = BS_SCOPE_ATTENTION;
  c->work.seq_len = 1000;
  c->work.decode_tokens = 4;
  double dflops = 2 * 4.0 * 32 * 128 * 4 * 1000;
  assert_int_equal(bs_output_json(path, "sim", &r, 1, err, sizeof err), 0);
  text = slurp(path);
  root = cJSON_Parse(text);
  free(text);
  tp = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "results"), 0), "throughput");
  assert_float_equal(cJSON_GetObjectItem(tp, "model_flops")->valuedouble, dflops, dflops * 1e-12);
  assert_float_equal(cJSON_GetObjectItem(tp, "tokens_per_s")->valuedouble, 2 * 4 / 2.0, 1e-12);
  cJSON_Delete(root);
}

/* RFC 4180 parser for the test: the fields of every record of text. */
typedef struct {
  char f[128][512];
  int n;
} csv_row;

static int csv_parse(const char *text, csv_row *rows, int maxrows) {
  int nr = 0;
  const char *p = text;
  while (*p && nr < maxrows) {
    csv_row *r = &rows[nr++];
    r->n = 0;
    for (;;) {
      if (r->n == (int)(sizeof r->f / sizeof r->f[0])) return -1; /* more columns than this parser holds */
      char *out = r->f[r->n];
      size_t k = 0;
      if (*p == '"') {
        p++;
        for (;;) {
          if (!*p) return -1; /* unterminated quote */
          if (*p == '"' && p[1] == '"') {
            if (k < 511) out[k++] = '"';
            p += 2;
            continue;
          }
          if (*p == '"') {
            p++;
            break;
          }
          if (k < 511) out[k++] = *p;
          p++;
        }
        if (*p != ',' && *p != '\n' && *p) return -1; /* text after a closing quote */
      } else {
        while (*p && *p != ',' && *p != '\n') {
          if (*p == '"' || *p == '\r') return -1; /* a bare quote or CR must have been quoted */
          if (k < 511) out[k++] = *p;
          p++;
        }
      }
      out[k] = '\0';
      r->n++;
      if (*p == ',') {
        p++;
        continue;
      }
      if (*p == '\n') p++;
      break;
    }
  }
  return nr;
}

/* Error messages and names holding commas, quotes, CR and LF come back field for field. */
static void test_csv_rfc4180(void **st) {
  (void)st;
  bs_result r[2] = {sample(BS_BURST, 8), sample(BS_RING, 16)};
  const char *msg = "profile \"x,y\": line 1\nline 2\r\nend, \"quoted\"";
  snprintf(r[1].error, sizeof r[1].error, "%s", msg);
  snprintf(r[1].cfg.cluster.profile, sizeof r[1].cfg.cluster.profile, "my,\"odd\" profile.json");
  snprintf(r[0].cfg.cluster.topology, sizeof r[0].cfg.cluster.topology, "a\nb.xml");
  char path[512], err[512];
  snprintf(path, sizeof path, "%s/q.csv", dir);
  assert_int_equal(bs_output_csv(path, r, 2, err, sizeof err), 0);
  char *text = slurp(path);
  assert_non_null(text);
  static csv_row rows[4];
  assert_int_equal(csv_parse(text, rows, 4), 3);
  int ncol = rows[0].n;
  int topo = -1, prof = -1, ecol = -1;
  for (int i = 0; i < ncol; i++) {
    if (!strcmp(rows[0].f[i], "topology")) topo = i;
    if (!strcmp(rows[0].f[i], "profile")) prof = i;
    if (!strcmp(rows[0].f[i], "error")) ecol = i;
  }
  assert_int_equal(ecol, 34); /* the 35th column, where the experiments' scripts read it */
  assert_true(topo >= 0 && prof >= 0);
  assert_int_equal(rows[1].n, ncol);
  assert_int_equal(rows[2].n, ncol);
  assert_string_equal(rows[2].f[ecol], msg);
  assert_string_equal(rows[2].f[prof], "my,\"odd\" profile.json");
  assert_string_equal(rows[1].f[topo], "a\nb.xml");
  assert_string_equal(rows[1].f[ecol], "");
  int wcol = -1;
  for (int i = 0; i < ncol; i++)
    if (!strcmp(rows[0].f[i], "whatif")) wcol = i;
  assert_int_equal(wcol, 67); /* CSV column 68 */
  assert_string_equal(rows[2].f[wcol], "none");
  assert_string_equal(rows[2].f[0], "ring");
  free(text);
}

/* Every figure keeps its unit at any magnitude; nothing is cut. */
static void test_table_magnitudes(void **st) {
  (void)st;
  bs_result r[2] = {sample(BS_BURST, 8), sample(BS_RING, 8)};
  r[0].time.step = 1.6e301;
  r[0].time.fwd = 1.6e301;
  r[0].time.bwd = 2.5e-12;
  r[0].time.comm_exposed = 0;
  r[0].comm.intra_node = INT64_MAX;
  r[0].mem.peak_bytes_max = INT64_MAX;
  r[1].time.step = 1234567.0;
  r[1].time.fwd = 5e-8;
  r[1].time.bwd = 0;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  bs_output_table(f, r, 2);
  fclose(f);
  assert_non_null(strstr(buf, "1.6e+301 s"));
  assert_non_null(strstr(buf, "2.5e-06 us"));
  assert_non_null(strstr(buf, "1.23e+06 s"));
  assert_non_null(strstr(buf, "0.05 us"));
  assert_non_null(strstr(buf, "0.0 us"));
  assert_non_null(strstr(buf, "EiB"));      /* INT64_MAX / 8 bytes per rank */
  assert_non_null(strstr(buf, "8.59e+09")); /* peak GiB of INT64_MAX bytes */
  /* every data line ends with its last column, not cut half-way */
  int lines = 0;
  for (char *p = buf; *p; p++) lines += *p == '\n';
  assert_int_equal(lines, 3);
  free(buf);
}

int main(int argc, char **argv) {
  snprintf(dir, sizeof dir, "/tmp/bs_output_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_json_contract), cmocka_unit_test(test_json_run_result),
    cmocka_unit_test(test_csv),           cmocka_unit_test(test_atomic_failure),
    cmocka_unit_test(test_table),         cmocka_unit_test(test_explain_table),
    cmocka_unit_test(test_csv_rfc4180),   cmocka_unit_test(test_table_magnitudes),
    cmocka_unit_test(test_no_figures),    cmocka_unit_test(test_throughput_hand),
  };
  int rc = BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return rc;
}
