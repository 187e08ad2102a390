/*
 * scenario_docs.c — workload.documents: the packed documents of a point, from the key's value into
 * the document ends the plans and kernels mask with (bs_workload.doc_end). Three forms:
 *   fixed:L1/L2/...   the lengths in order (K, M suffixes); they must sum to workload.seq_len
 *   uniform:MIN/MAX   lengths drawn uniformly from [MIN, MAX] with workload.seed until seq_len is
 *                     full, the last one cut to what is left
 *   hist:FILE         a histogram, one "LENGTH WEIGHT" line per bin (# starts a comment), drawn
 *                     with those weights as uniform draws are; a relative FILE is next to the scenario
 * The same value and seed give the same documents on every machine (splitmix64, base/fill.h).
 * The syntax is checked when the key is read (scn_docs_check), the lengths once the point has its
 * seq_len and seed (scn_docs_resolve); every error says what is wrong, a histogram's with its line.
 */
#include "scenario_impl.h"
#include "base/fileio.h"
#include "base/fill.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BINS 256

typedef struct {
  int64_t len[MAX_BINS];
  double weight[MAX_BINS];
  int n;
} hist;

/* Parses "A/B/..." into lengths; -1 with why on a bad piece or too many. */
static int parse_lengths(const char *list, int64_t *out, int cap, int *n, char *why, size_t wn) {
  *n = 0;
  const char *p = list;
  while (1) {
    const char *slash = strchr(p, '/');
    size_t len = slash ? (size_t)(slash - p) : strlen(p);
    char piece[64];
    if (len == 0 || len >= sizeof piece) {
      snprintf(why, wn, "'%.40s' holds an empty or overlong length (lengths are separated by '/')", list);
      return -1;
    }
    if (*n >= cap) {
      snprintf(why, wn, "more than %d lengths", cap);
      return -1;
    }
    memcpy(piece, p, len);
    piece[len] = '\0';
    char w[160];
    if (scn_parse_int64(piece, 1, (int64_t)1 << 40, 1, &out[*n], w, sizeof w)) {
      snprintf(why, wn, "length %d: %s", *n + 1, w);
      return -1;
    }
    (*n)++;
    if (!slash) return 0;
    p = slash + 1;
  }
}

int scn_docs_check(const char *v, char *why, size_t n) {
  int64_t l[BS_MAX_DOCS];
  int k;
  if (!strcmp(v, "none")) return 0;
  if (!strncmp(v, "fixed:", 6)) return parse_lengths(v + 6, l, BS_MAX_DOCS, &k, why, n);
  if (!strncmp(v, "uniform:", 8)) {
    if (parse_lengths(v + 8, l, 2, &k, why, n)) return -1;
    if (k != 2 || l[0] > l[1]) {
      snprintf(why, n, "uniform takes MIN/MAX with MIN <= MAX (e.g. uniform:512/8K)");
      return -1;
    }
    return 0;
  }
  if (!strncmp(v, "hist:", 5) && v[5]) return 0;
  char cb[SHOWN + 4];
  snprintf(why, n, "'%s' is not none, fixed:L1/L2/..., uniform:MIN/MAX or hist:FILE", scn_clip(v, cb));
  return -1;
}

/* Reads a histogram file: "LENGTH WEIGHT" lines; -1 with "FILE:LINE: ..." in why. */
static int read_hist(const char *path, hist *h, char *why, size_t n) {
  char e[256];
  size_t len;
  char *text = bs_read_file(path, &len, e, sizeof e);
  if (!text) {
    snprintf(why, n, "%s", e);
    return -1;
  }
  h->n = 0;
  int line = 0, rc = 0;
  double total = 0;
  for (char *s = text; s && *s && !rc; line++) {
    char *nl = strchr(s, '\n');
    if (nl) *nl = '\0';
    char *hash = strchr(s, '#');
    if (hash) *hash = '\0';
    char a[64], b[64], extra[8];
    int got = sscanf(s, "%63s %63s %7s", a, b, extra);
    if (got == 2) {
      char w[160];
      char *end;
      double wt = strtod(b, &end);
      if (h->n >= MAX_BINS) {
        snprintf(why, n, "%s:%d: more than %d bins", path, line + 1, MAX_BINS);
        rc = -1;
      } else if (scn_parse_int64(a, 1, (int64_t)1 << 40, 1, &h->len[h->n], w, sizeof w)) {
        snprintf(why, n, "%s:%d: length: %s", path, line + 1, w);
        rc = -1;
      } else if (*end || !(wt >= 0) || wt > 1e300) {
        snprintf(why, n, "%s:%d: weight '%.40s' is not a number >= 0", path, line + 1, b);
        rc = -1;
      } else {
        h->weight[h->n++] = wt;
        total += wt;
      }
    } else if (got != EOF && got != -1) {
      snprintf(why, n, "%s:%d: expected 'LENGTH WEIGHT'", path, line + 1);
      rc = -1;
    }
    s = nl ? nl + 1 : NULL;
  }
  free(text);
  if (!rc && !(total > 0)) {
    snprintf(why, n, "%s: no bin with a weight above 0", path);
    rc = -1;
  }
  return rc;
}

/* One draw: a length from [lo, hi] (h NULL) or from the histogram's bins. */
static int64_t draw(uint64_t *s, const hist *h, int64_t lo, int64_t hi) {
  double u = (bs_unit_signed(bs_splitmix64(s)) + 1.0) / 2.0; /* [0, 1) */
  if (!h) {
    int64_t x = lo + (int64_t)(u * (double)(hi - lo + 1));
    return x > hi ? hi : x;
  }
  double total = 0, acc = 0;
  for (int i = 0; i < h->n; i++) total += h->weight[i];
  for (int i = 0; i < h->n; i++) {
    acc += h->weight[i];
    if (u * total < acc) return h->len[i];
  }
  for (int i = h->n - 1; i >= 0; i--)
    if (h->weight[i] > 0) return h->len[i];
  return h->len[0];
}

/* The lengths drawn until seq_len is full, the last cut to fit. */
static int fill_drawn(bs_workload *w, uint64_t seed, const hist *h, int64_t lo, int64_t hi, char *why, size_t n) {
  uint64_t s = bs_mix64(seed ^ 0x646f63756d656e74ull); /* "document" */
  int64_t at = 0;
  w->docs = 0;
  while (at < w->seq_len) {
    if (w->docs >= BS_MAX_DOCS) {
      snprintf(why, n, "more than %d documents fill seq_len %lld: draw longer documents", BS_MAX_DOCS,
               (long long)w->seq_len);
      return -1;
    }
    int64_t x = draw(&s, h, lo, hi);
    at = x >= w->seq_len - at ? w->seq_len : at + x;
    w->doc_end[w->docs++] = at;
  }
  return 0;
}

int scn_docs_resolve(bs_config *c, const char *scenario_path, int regular, char *why, size_t n) {
  bs_workload *w = &c->work;
  const char *v = w->documents;
  w->docs = 0;
  if (!v[0] || !strcmp(v, "none")) return 0;
  if (w->phase == BS_DECODE || w->cached_tokens > 0) {
    snprintf(why, n, "packed documents are for train and prefill %s",
             w->phase == BS_DECODE ? "(workload.phase is decode)" : "without a KV cache (workload.cached_tokens)");
    return -1;
  }
  int64_t l[BS_MAX_DOCS];
  int k = 0;
  if (!strncmp(v, "fixed:", 6)) {
    if (parse_lengths(v + 6, l, BS_MAX_DOCS, &k, why, n)) return -1;
    int64_t at = 0;
    for (int i = 0; i < k; i++) w->doc_end[i] = at += l[i];
    if (at != w->seq_len) {
      snprintf(why, n, "the %d lengths sum to %lld, not workload.seq_len %lld", k, (long long)at,
               (long long)w->seq_len);
      return -1;
    }
    w->docs = k;
    return 0;
  }
  if (!strncmp(v, "uniform:", 8)) {
    if (parse_lengths(v + 8, l, 2, &k, why, n)) return -1;
    return fill_drawn(w, c->seed, NULL, l[0], l[1], why, n);
  }
  const char *file = v + 5;
  char path[PATH_MAX + 128];
  const char *slash = strrchr(scenario_path, '/');
  if (file[0] != '/' && slash && regular)
    snprintf(path, sizeof path, "%.*s%s", (int)(slash - scenario_path) + 1, scenario_path, file);
  else snprintf(path, sizeof path, "%s", file);
  hist *h = malloc(sizeof *h);
  if (!h) {
    snprintf(why, n, "out of memory");
    return -1;
  }
  int rc = read_hist(path, h, why, n);
  if (!rc) rc = fill_drawn(w, c->seed, h, 0, 0, why, n);
  free(h);
  return rc;
}
