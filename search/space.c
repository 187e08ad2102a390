/*
 * space.c — what a search is about to do, said before it does it (search.h):
 * which keys multiply the space and by how much fixing each would cut it, and
 * an estimate of the walk's time from a sample of walks spread over the
 * candidates. Nothing here changes a candidate: the sample's walks are thrown
 * away and the search walks every candidate itself.
 */
#include "search/search.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A searched key: its value in a candidate (an int that tells values apart) and its name as a
 * scenario writes it. */
typedef struct {
  const char *key;
  int (*get)(const bs_config *c);
  void (*name)(int v, char *b, size_t n);
} key_get;

static int g_method(const bs_config *c) { return (int)c->par.method; }
static int g_tp(const bs_config *c) { return c->par.tp; }
static int g_dp(const bs_config *c) { return c->par.dp; }
static int g_pp(const bs_config *c) { return c->par.pp; }
static int g_layout(const bs_config *c) { return (int)c->par.layout; }
static int g_ulysses(const bs_config *c) { return c->par.ulysses_degree; }
static int g_zero(const bs_config *c) { return c->par.zero; }
static int g_micro(const bs_config *c) { return c->par.micro_batch; }
static int g_recompute(const bs_config *c) { return c->work.recompute; }
static int g_sched(const bs_config *c) { return (int)c->par.pp_schedule * 1000 + c->par.pp_chunks; }
static int g_pass(const bs_config *c) { return (int)c->par.cp_pass; }
static int g_fp8(const bs_config *c) { return (int)c->model.fp8; }
static int g_dring(const bs_config *c) { return (int)c->par.double_ring; }
static int g_place(const bs_config *c) { return (int)c->par.ulysses_placement; }
static int g_variant(const bs_config *c) { return c->par.tp_variant; }
static int g_ep(const bs_config *c) { return c->par.ep; }

static void n_int(int v, char *b, size_t n) { snprintf(b, n, "%d", v); }
static void n_method(int v, char *b, size_t n) { snprintf(b, n, "%s", bs_method_name((bs_method)v)); }
static void n_layout(int v, char *b, size_t n) { snprintf(b, n, "%s", bs_layout_name((bs_layout)v)); }
static void n_recompute(int v, char *b, size_t n) { snprintf(b, n, "%s", bs_recompute_name(v)); }
static void n_sched(int v, char *b, size_t n) {
  if (v / 1000 == BS_PP_INTERLEAVED) snprintf(b, n, "interleaved (pp_chunks = %d)", v % 1000);
  else snprintf(b, n, "%s", bs_pp_schedule_name((bs_pp_schedule)(v / 1000)));
}
static void n_pass(int v, char *b, size_t n) { snprintf(b, n, "%s", bs_cp_pass_name((bs_cp_pass)v)); }
static void n_fp8(int v, char *b, size_t n) { snprintf(b, n, "%s", bs_fp8_name((bs_fp8)v)); }
static void n_dring(int v, char *b, size_t n) {
  snprintf(b, n, "%s", v == BS_ON ? "on" : v == BS_OFF ? "off" : "auto");
}
static void n_place(int v, char *b, size_t n) { snprintf(b, n, "%s", bs_placement_name((bs_placement)v)); }
static void n_variant(int v, char *b, size_t n) { snprintf(b, n, "v%d", v); }

static const key_get keys[] = {
  {"parallel.method", g_method, n_method},
  {"parallel.tp", g_tp, n_int},
  {"parallel.dp", g_dp, n_int},
  {"parallel.pp", g_pp, n_int},
  {"parallel.layout", g_layout, n_layout},
  {"parallel.ulysses_degree", g_ulysses, n_int},
  {"parallel.zero", g_zero, n_int},
  {"parallel.micro_batch", g_micro, n_int},
  {"workload.recompute", g_recompute, n_recompute},
  {"parallel.pp_schedule", g_sched, n_sched},
  {"parallel.cp_pass", g_pass, n_pass},
  {"model.fp8", g_fp8, n_fp8},
  {"parallel.double_ring", g_dring, n_dring},
  {"parallel.ulysses_placement", g_place, n_place},
  {"parallel.tp_variant", g_variant, n_variant},
  {"parallel.ep", g_ep, n_int},
};
#define NGET ((int)(sizeof keys / sizeof keys[0]))
#define MAXVALS 256
#define ESTIMATE_MAX_S 5.0 /* the sample stops after this many CPU seconds (one walk at least) */

static int by_cut(const void *x, const void *y) {
  const bs_search_key_spread *a = x, *b = y;
  if (a->cut != b->cut) return a->cut > b->cut ? -1 : 1;
  return strcmp(a->key, b->key);
}

typedef struct {
  int val[MAXVALS], cnt[MAXVALS], nv, over;
} key_count;

int bs_search_spread(const bs_search *s, bs_search_key_spread *out, int max) {
  key_count *kc = calloc(NGET, sizeof *kc);
  bs_config *c = malloc(sizeof *c);
  if (!kc || !c) {
    free(kc);
    free(c);
    return 0;
  }
  for (int i = 0; i < s->n; i++) { /* each configuration rebuilt once, every key counted */
    bs_search_config(s, i, c);
    for (int k = 0; k < NGET; k++) {
      key_count *q = &kc[k];
      int v = keys[k].get(c), j = 0;
      while (j < q->nv && q->val[j] != v) j++;
      if (j == q->nv) {
        if (q->nv == MAXVALS) {
          q->over++;
          continue;
        }
        q->val[q->nv] = v;
        q->cnt[q->nv++] = 0;
      }
      q->cnt[j]++;
    }
  }
  int n = 0;
  for (int k = 0; k < NGET && n < max; k++) {
    const int *val = kc[k].val, *cnt = kc[k].cnt, nv = kc[k].nv, over = kc[k].over;
    if (nv + (over > 0) < 2) continue;
    int common = 0;
    for (int j = 1; j < nv; j++)
      if (cnt[j] > cnt[common]) common = j;
    bs_search_key_spread *o = &out[n++];
    o->key = keys[k].key;
    o->values = nv + (over > 0);
    keys[k].name(val[common], o->common, sizeof o->common);
    o->cut = (double)s->n / cnt[common];
  }
  free(kc);
  free(c);
  qsort(out, (size_t)n, sizeof *out, by_cut);
  return n;
}

/* CPU seconds of this process (the machine may be shared: wall time would count the others). */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int bs_search_estimate(const bs_search *s, const bs_sim_opts *opts, int sample, int walk_mode, double *walk_each_s,
                       int *sampled, char *err, size_t errlen) {
  if (sample < 1) sample = 1;
  if (sample > s->n) sample = s->n;
  bs_config *cfg = malloc(sizeof *cfg);
  if (!cfg) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  bs_search_config(s, 0, cfg);
  const char *name = opts && opts->profile ? opts->profile : cfg->cluster.profile;
  bs_profile *prof = calloc(1, sizeof *prof);
  char why[512];
  if (!prof) {
    snprintf(err, errlen, "out of memory");
    free(cfg);
    return -1;
  }
  if (bs_profile_load(name, prof, why, sizeof why)) {
    snprintf(err, errlen, "%s: %s", opts && opts->profile ? "--profile" : "cluster.profile", why);
    free(prof);
    free(cfg);
    return -1;
  }
  double t0 = cpu_s();
  int j = 0;
  for (; j < sample && (j == 0 || cpu_s() - t0 < ESTIMATE_MAX_S); j++) {
    /* spread evenly: the odometer puts the cheap and the dear prefixes (pp, dp, tp) far apart */
    bs_search_config(s, (int)((double)j * s->n / sample), cfg);
    bs_walk w;
    bs_sim_walk(cfg, opts, prof, walk_mode, &w, why, sizeof why);
  }
  *walk_each_s = (cpu_s() - t0) / j;
  *sampled = j;
  free(prof);
  free(cfg);
  return 0;
}
