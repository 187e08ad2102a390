/*
 * result_read.c — a result file read back (result_read.h): the whole file through base/fileio,
 * parsed by cJSON, checked to be burstsim's ({"tool": "burstsim", "results": [{...}, ...]}), and
 * values read by the dotted paths the result contract names them by (result_fields.c).
 */
#include "result_read.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"

cJSON *bs_result_file_load(const char *path, cJSON **results, int *n, char *err, size_t errlen) {
  char *text = bs_read_file(path, NULL, err, errlen);
  if (!text) return NULL;
  cJSON *root = cJSON_Parse(text);
  free(text);
  if (!root) {
    snprintf(err, errlen, "%s: not a result file (not JSON)", path);
    return NULL;
  }
  const cJSON *tool = cJSON_GetObjectItemCaseSensitive(root, "tool");
  cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "results");
  if (!cJSON_IsString(tool) || strcmp(tool->valuestring, "burstsim") || !cJSON_IsArray(arr)) {
    snprintf(err, errlen,
             "%s: not a result file (no \"tool\": \"burstsim\" with a \"results\" array; "
             "write one with burstsim sim --out or search --out)",
             path);
    cJSON_Delete(root);
    return NULL;
  }
  int k = 0;
  for (const cJSON *e = arr->child; e; e = e->next, k++)
    if (!cJSON_IsObject(e) || !cJSON_GetObjectItemCaseSensitive(e, "method")) {
      snprintf(err, errlen, "%s: not a result file (results[%d] is not a point's result)", path, k);
      cJSON_Delete(root);
      return NULL;
    }
  *results = arr;
  *n = k;
  return root;
}

const cJSON *bs_result_item(const cJSON *o, const char *path) {
  const char *dot;
  while (o && (dot = strchr(path, '.'))) {
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)(dot - path), path);
    o = cJSON_GetObjectItemCaseSensitive(o, key);
    path = dot + 1;
  }
  return o ? cJSON_GetObjectItemCaseSensitive(o, path) : NULL;
}

void bs_result_text(const cJSON *o, const char *path, char *dst, size_t n) {
  const cJSON *it = bs_result_item(o, path);
  if (cJSON_IsString(it)) snprintf(dst, n, "%s", it->valuestring);
  else if (cJSON_IsBool(it)) snprintf(dst, n, "%s", cJSON_IsTrue(it) ? "true" : "false");
  else if (cJSON_IsNumber(it) && it->valuedouble == floor(it->valuedouble) && fabs(it->valuedouble) < 9e15)
    snprintf(dst, n, "%.0f", it->valuedouble);
  else if (cJSON_IsNumber(it)) snprintf(dst, n, "%.17g", it->valuedouble);
  else snprintf(dst, n, "%s", "");
}

int bs_result_number(const cJSON *o, const char *path, double *v) {
  const cJSON *it = bs_result_item(o, path);
  if (!cJSON_IsNumber(it)) return 0;
  *v = it->valuedouble;
  return 1;
}
