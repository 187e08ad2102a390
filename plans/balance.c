/*
 * balance.c — the balance layouts for packed documents: the runs of positions each part of a
 * ring holds (bs_runs), and the attention imbalance of any layout over its parts.
 *   doc-zigzag: every document cut in 2 x parts equal pieces, part r holding pieces r and
 *               2 parts - 1 - r of each (Transformer Engine's THD layout under context
 *               parallelism, which pads each document to a multiple of 2 x cp: here the lengths
 *               must be multiples); without documents, the sequence is one document (zigzag);
 *   greedy:     the sequence cut in GREEDY_CHUNKS (8) x parts equal chunks, dealt heaviest first (the
 *               visible pairs of a chunk's queries against every key) to the lightest part that
 *               holds fewer than GREEDY_CHUNKS: longest-processing-time first with equal counts,
 *               so every part holds as many tokens (WLB-LLM and ByteScale balance the same work).
 * Adjacent pieces of a part are merged into one run. Pure computation, no I/O.
 */
#include <stdlib.h>
#include <string.h>
#include "plan_impl.h"

#define GREEDY_CHUNKS 8

void plan_runs_free(bs_runs *u) {
  if (!u) return;
  free(u->first);
  free(u->pos);
  free(u->len);
  free(u);
}

static bs_runs *runs_alloc(int parts, int64_t cap) {
  bs_runs *u = calloc(1, sizeof *u);
  if (!u) return NULL;
  u->parts = parts;
  u->first = calloc((size_t)parts + 1, sizeof *u->first);
  u->pos = calloc((size_t)cap, sizeof *u->pos);
  u->len = calloc((size_t)cap, sizeof *u->len);
  if (!u->first || !u->pos || !u->len) {
    plan_runs_free(u);
    return NULL;
  }
  return u;
}

/* Appends [pos, pos + len) to the runs being built, merged with the last when adjacent. */
static void runs_push(bs_runs *u, int32_t *n, int32_t start, int64_t pos, int64_t len) {
  if (*n > start && u->pos[*n - 1] + u->len[*n - 1] == pos) u->len[*n - 1] += len;
  else {
    u->pos[*n] = pos;
    u->len[(*n)++] = len;
  }
}

static int doc_zigzag(const bs_workload *w, int parts, bs_runs *u, char *err, size_t errlen) {
  int64_t one = w->seq_len;
  const int64_t *end = w->docs > 0 ? w->doc_end : &one;
  int32_t docs = w->docs > 0 ? w->docs : 1, n = 0;
  for (int32_t d = 0; d < docs; d++) {
    int64_t len = end[d] - (d ? end[d - 1] : 0);
    if (len % (2 * (int64_t)parts)) {
      snprintf(err, errlen,
               "parallel.layout: doc-zigzag cuts every document in 2 x %d pieces; document %d has %lld tokens "
               "(Transformer Engine pads each to a multiple of 2 x cp: give such lengths, or use greedy)",
               parts, d + 1, (long long)len);
      return -1;
    }
  }
  for (int r = 0; r < parts; r++) {
    u->first[r] = n;
    for (int32_t d = 0; d < docs; d++) {
      int64_t s = d ? end[d - 1] : 0, c = (end[d] - s) / (2 * parts);
      runs_push(u, &n, u->first[r], s + r * c, c);
    }
    for (int32_t d = 0; d < docs; d++) {
      int64_t s = d ? end[d - 1] : 0, c = (end[d] - s) / (2 * parts);
      runs_push(u, &n, u->first[r], s + (2 * (int64_t)parts - 1 - r) * c, c);
    }
  }
  u->first[parts] = n;
  return 0;
}

/* The runs of a part are listed in increasing position: doc-zigzag lists each document's first
 * pieces, then the second ones; sort them (insertion sort: few runs). */
static void sort_runs(bs_runs *u) {
  for (int r = 0; r < u->parts; r++)
    for (int32_t a = u->first[r] + 1; a < u->first[r + 1]; a++)
      for (int32_t b = a; b > u->first[r] && u->pos[b - 1] > u->pos[b]; b--) {
        int64_t p = u->pos[b], l = u->len[b];
        u->pos[b] = u->pos[b - 1];
        u->len[b] = u->len[b - 1];
        u->pos[b - 1] = p;
        u->len[b - 1] = l;
      }
}

typedef struct {
  double work;
  int32_t idx;
} chunk;

/* Heaviest first, the earlier of equals first. */
static int heavier_first(const void *pa, const void *pb) {
  const chunk *a = pa, *b = pb;
  return a->work > b->work ? -1 : a->work < b->work ? 1 : (a->idx > b->idx) - (a->idx < b->idx);
}

static int greedy(const bs_workload *w, int parts, bs_runs *u, char *err, size_t errlen) {
  int64_t C = (int64_t)GREEDY_CHUNKS * parts, N = w->seq_len;
  if (N % C) {
    snprintf(err, errlen,
             "parallel.layout: greedy cuts the sequence in %d x %d chunks; they do not divide seq_len %lld",
             GREEDY_CHUNKS, parts, (long long)N);
    return -1;
  }
  int64_t c = N / C;
  double *work = malloc((size_t)C * sizeof *work), *load = calloc((size_t)parts, sizeof *load);
  int32_t *order = malloc((size_t)C * sizeof *order), *owner = malloc((size_t)C * sizeof *owner);
  int *count = calloc((size_t)parts, sizeof *count);
  int rc = 0;
  if (!work || !load || !order || !owner || !count) {
    snprintf(err, errlen, "out of memory");
    rc = -1;
  }
  for (int64_t k = 0; !rc && k < C; k++) {
    work[k] = (double)bs_workload_pairs(w, k * c, c, 0, N, 1);
    order[k] = (int32_t)k;
  }
  chunk *sorted = rc ? NULL : malloc((size_t)C * sizeof *sorted);
  if (!rc && !sorted) {
    snprintf(err, errlen, "out of memory");
    rc = -1;
  }
  if (!rc) {
    for (int64_t k = 0; k < C; k++) sorted[k] = (chunk){work[k], (int32_t)k};
    qsort(sorted, (size_t)C, sizeof *sorted, heavier_first);
    for (int64_t k = 0; k < C; k++) order[k] = sorted[k].idx;
  }
  free(sorted);
  for (int64_t a = 0; !rc && a < C; a++) {
    int best = -1;
    for (int r = 0; r < parts; r++)
      if (count[r] < GREEDY_CHUNKS && (best < 0 || load[r] < load[best])) best = r;
    owner[order[a]] = best;
    load[best] += work[order[a]];
    count[best]++;
  }
  int32_t n = 0;
  for (int r = 0; !rc && r < parts; r++) {
    u->first[r] = n;
    for (int64_t k = 0; k < C; k++)
      if (owner[k] == r) runs_push(u, &n, u->first[r], k * c, c);
  }
  u->first[parts] = n;
  free(work);
  free(load);
  free(order);
  free(owner);
  free(count);
  return rc;
}

int plan_runs_make(const bs_workload *w, bs_layout l, int parts, bs_runs **out, char *err, size_t errlen) {
  *out = NULL;
  int64_t cap = l == BS_GREEDY ? (int64_t)GREEDY_CHUNKS * parts : 2 * (int64_t)parts * (w->docs > 0 ? w->docs : 1);
  bs_runs *u = runs_alloc(parts, cap);
  if (!u) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if ((l == BS_GREEDY ? greedy : doc_zigzag)(w, parts, u, err, errlen)) {
    plan_runs_free(u);
    return -1;
  }
  sort_runs(u);
  int32_t n = 0; /* merge the adjacent runs of each part */
  for (int r = 0; r < parts; r++) {
    int32_t a = u->first[r], b = u->first[r + 1];
    u->first[r] = n;
    for (int32_t k = a; k < b; k++) {
      int64_t at = u->pos[k], len = u->len[k];
      runs_push(u, &n, u->first[r], at, len);
    }
  }
  u->first[parts] = n;
  for (int r = 0; r < parts; r++) {
    int32_t nr = u->first[r + 1] - u->first[r];
    if (nr > PLAN_MAX_RUNS) {
      snprintf(err, errlen,
               "parallel.layout: %s gives rank %d %d runs of tokens, more than the %d a shard may hold (fewer "
               "documents, or layout greedy)",
               bs_layout_name(l), r, nr, PLAN_MAX_RUNS);
      plan_runs_free(u);
      return -1;
    }
  }
  for (int32_t k = 0; k < u->first[parts]; k++)
    if (u->len[k] > u->max_len) u->max_len = u->len[k];
  *out = u;
  return 0;
}

double plan_runs_imbalance(const bs_workload *w, const bs_runs *u) {
  double max = 0, sum = 0;
  for (int r = 0; r < u->parts; r++) {
    double x = 0;
    for (int32_t k = u->first[r]; k < u->first[r + 1]; k++)
      x += (double)bs_workload_pairs(w, u->pos[k], u->len[k], 0, w->seq_len, 1);
    sum += x;
    if (x > max) max = x;
  }
  return sum > 0 ? max * u->parts / sum : 1.0;
}
