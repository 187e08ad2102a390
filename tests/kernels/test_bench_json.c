/*
 * test_bench_json.c — checks the JSON written by `burstsim bench kernels
 * --quick --json FILE`: a list of rows, every row with the documented keys and
 * types, every kernel present, and numbers that agree with each other
 * (gflops = FLOP / seconds, peak_fraction = gflops / peak_gflops).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static const char *json_path;

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

static double num(const cJSON *row, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);
  if (!cJSON_IsNumber(v)) fail_msg("row lacks numeric key '%s'", key);
  return v->valuedouble;
}

/* Parses the file once; the teardown frees it even when a check fails. */
static int setup(void **state) {
  char *text = slurp(json_path);
  if (!text) {
    fprintf(stderr, "cannot read %s\n", json_path);
    return -1;
  }
  *state = cJSON_Parse(text);
  free(text);
  if (!*state) fprintf(stderr, "%s is not valid JSON\n", json_path);
  return *state ? 0 : -1;
}

static int teardown(void **state) {
  cJSON_Delete(*state);
  return 0;
}

static void test_rows(void **state) {
  cJSON *root = *state;
  assert_true(cJSON_IsArray(root));
  int n = cJSON_GetArraySize(root);
  assert_true(n >= 4);
  static const char *const kernels[] = {"fwd", "bwd", "unfused_fwd", "sgemm"};
  int seen[4] = {0, 0, 0, 0};
  const cJSON *row;
  cJSON_ArrayForEach(row, root) {
    assert_true(cJSON_IsObject(row));
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(row, "kernel");
    assert_true(cJSON_IsString(k));
    int which = -1;
    for (int i = 0; i < 4; i++)
      if (!strcmp(k->valuestring, kernels[i])) which = i;
    if (which < 0) fail_msg("unknown kernel '%s'", k->valuestring);
    seen[which]++;
    const cJSON *causal = cJSON_GetObjectItemCaseSensitive(row, "causal");
    assert_true(cJSON_IsBool(causal));
    double nn = num(row, "n"), d = num(row, "d"), Z = num(row, "Z"), B = num(row, "B");
    double s = num(row, "seconds"), g = num(row, "gflops"), pk = num(row, "peak_gflops");
    double pf = num(row, "peak_fraction"), rss = num(row, "rss_bytes");
    assert_true(nn >= 1 && d >= 1 && Z >= 1 && B >= 1);
    assert_true(s > 0 && g > 0 && pk > 0 && pf > 0);
    assert_true(rss >= -1);
    double flop = 4.0 * B * Z * nn * nn * d;
    if (which == 3) flop = 2.0 * B * Z * nn * nn * d;
    if (which != 3 && cJSON_IsTrue(causal)) flop *= 0.5;
    if (which == 1) flop *= 2.5;
    if (fabs(flop / s / 1e9 - g) > 1e-6 * g) fail_msg("gflops %g disagrees with FLOP/seconds %g", g, flop / s / 1e9);
    if (fabs(g / pk - pf) > 1e-9 * (pf > 1 ? pf : 1)) fail_msg("peak_fraction %g != gflops/peak %g", pf, g / pk);
  }
  for (int i = 0; i < 4; i++)
    if (!seen[i]) fail_msg("no row for kernel '%s'", kernels[i]);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_bench_json FILE.json\n");
    return 2;
  }
  json_path = argv[1];
  const struct CMUnitTest tests[] = {cmocka_unit_test_setup_teardown(test_rows, setup, teardown)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
