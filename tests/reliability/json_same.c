/*
 * json_same.c — the determinism tests' comparer: json_same A B [KEY]... reads
 * two result JSON files, removes every member named KEY at any depth (the
 * wall-clock and process-memory fields), prints both back with cJSON and
 * compares the texts byte for byte. Numbers are printed with round-trip
 * precision, so two texts are equal exactly when every kept value is. Exit 0
 * when equal, 1 with the first difference shown, 2 on bad input.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *load(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "json_same: %s: cannot open\n", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "json_same: %s: cannot read\n", path);
    free(s);
    fclose(f);
    return NULL;
  }
  fclose(f);
  s[n] = '\0';
  cJSON *j = cJSON_Parse(s);
  free(s);
  if (!j) fprintf(stderr, "json_same: %s: not valid JSON\n", path);
  return j;
}

static void drop(cJSON *j, const char *key) {
  if (cJSON_IsObject(j)) cJSON_DeleteItemFromObjectCaseSensitive(j, key);
  cJSON *c;
  cJSON_ArrayForEach(c, j) drop(c, key);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: json_same A.json B.json [KEY_TO_DROP]...\n");
    return 2;
  }
  cJSON *a = load(argv[1]), *b = load(argv[2]);
  if (!a || !b) {
    cJSON_Delete(a);
    cJSON_Delete(b);
    return 2;
  }
  for (int i = 3; i < argc; i++) {
    drop(a, argv[i]);
    drop(b, argv[i]);
  }
  char *ta = cJSON_Print(a), *tb = cJSON_Print(b);
  int rc = 2;
  if (ta && tb) {
    size_t i = 0;
    while (ta[i] && ta[i] == tb[i]) i++;
    rc = ta[i] != tb[i];
    if (rc) {
      size_t from = i > 200 ? i - 200 : 0;
      fprintf(stderr, "json_same: %s and %s differ at byte %zu:\n--- %s\n%.300s\n--- %s\n%.300s\n", argv[1], argv[2], i,
              argv[1], ta + from, argv[2], tb + from);
    } else {
      printf("json_same: %s and %s are the same (%zu bytes compared)\n", argv[1], argv[2], strlen(ta));
    }
  }
  free(ta);
  free(tb);
  cJSON_Delete(a);
  cJSON_Delete(b);
  return rc;
}
