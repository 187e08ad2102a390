/*
 * output.c — results out, in the shapes docs/design.md describes: the result JSON
 * (cJSON), a CSV row per point (RFC 4180), and the human table on stdout. Files
 * are written by base/fileio (temporary file and rename), so a reader never sees half.
 */
#include "output.h"

#include "base/fileio.h"
#include "sim/profile.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The file a profile name or path reads ("" when none). */
static void profile_file(const char *name, char *out, size_t n) {
  out[0] = '\0';
  if (name && *name) bs_profile_path(name, out, n);
}

int bs_output_precheck(const bs_path_role *outs, int nout, const char *scenario_path, const bs_scenario *sc,
                       const char *profile, char *err, size_t errlen) {
  char prof[1024];
  profile_file(profile, prof, sizeof prof);
  const bs_path_role ins[] = {{"the scenario", scenario_path}, {"--profile", prof}};
  if (bs_out_check_all(outs, nout, ins, 2, err, errlen)) return -1;
  for (int i = 0; sc && i < sc->npoints; i++) {
    const bs_cluster *c = &sc->points[i].cluster, *prev = i ? &sc->points[i - 1].cluster : NULL;
    if (prev && !strcmp(c->profile, prev->profile) && !strcmp(c->topology, prev->topology)) continue;
    char pp[1024] = "";
    if (!profile) profile_file(c->profile, pp, sizeof pp);
    size_t tl = strlen(c->topology);
    const char *xml = tl > 4 && !strcmp(c->topology + tl - 4, ".xml") ? c->topology : NULL;
    const bs_path_role pin[] = {{"the profile", pp}, {"the platform", xml}};
    if (bs_out_check_all(outs, nout, pin, 2, err, errlen)) return -1;
  }
  return 0;
}

static void add_config(cJSON *o, const bs_config *c) {
  cJSON_AddStringToObject(o, "method", bs_method_name(c->par.method));
  cJSON_AddNumberToObject(o, "gpus", c->par.gpus);
  cJSON_AddNumberToObject(o, "seq_len", (double)c->work.seq_len);
  cJSON_AddNumberToObject(o, "batch", (double)c->work.batch);
  cJSON_AddStringToObject(o, "phase", bs_phase_name(c->work.phase));
  cJSON_AddStringToObject(o, "scope", bs_scope_name(c->work.scope));
  cJSON_AddBoolToObject(o, "causal", c->work.causal);
  cJSON_AddNumberToObject(o, "window", (double)c->work.window);
  cJSON_AddStringToObject(o, "layout", bs_layout_name(c->par.layout));
  cJSON_AddStringToObject(o, "double_ring", c->par.double_ring == BS_AUTO ? "auto" : c->par.double_ring ? "on" : "off");
  cJSON_AddBoolToObject(o, "lao", c->par.lao);
  cJSON_AddStringToObject(o, "bwd_comm", c->par.bwd_opt ? "optimized" : "plain");
  cJSON_AddNumberToObject(o, "ulysses_degree", c->par.ulysses_degree);
  cJSON_AddStringToObject(o, "tp_variant", c->par.tp_variant == 3 ? "v3" : "v1");
  cJSON_AddNumberToObject(o, "zero", c->par.zero);
  if (c->work.phase == BS_DECODE) cJSON_AddNumberToObject(o, "decode_tokens", (double)c->work.decode_tokens);
  if (c->work.phase == BS_PREFILL && c->work.kv_cache == BS_KV_DROP)
    cJSON_AddStringToObject(o, "kv_cache", bs_kv_cache_name(c->work.kv_cache));
  cJSON *m = cJSON_AddObjectToObject(o, "model");
  cJSON_AddStringToObject(m, "preset", c->model.preset);
  cJSON_AddNumberToObject(m, "hidden", (double)c->model.hidden);
  cJSON_AddNumberToObject(m, "heads", (double)c->model.heads);
  cJSON_AddNumberToObject(m, "kv_heads", (double)c->model.kv_heads);
  cJSON_AddNumberToObject(m, "head_dim", (double)c->model.head_dim);
  cJSON_AddNumberToObject(m, "layers", (double)c->model.layers);
  cJSON_AddStringToObject(m, "dtype", bs_dtype_name(c->model.dtype));
  cJSON_AddStringToObject(o, "topology", c->cluster.topology);
  cJSON_AddStringToObject(o, "profile", c->cluster.profile);
  cJSON_AddStringToObject(o, "coll_algo", bs_coll_algo_name(c->cluster.coll_algo));
}

/* What the plan decided from the request, when the executor recorded it: the
 * double ring and the ring sizes (inner P x outer M), the all-to-all group. */
static void add_decision(cJSON *o, const bs_decision *d) {
  if (!d->valid) return;
  cJSON *j = cJSON_AddObjectToObject(o, "plan");
  cJSON_AddBoolToObject(j, "double_ring", d->double_ring);
  cJSON_AddNumberToObject(j, "ring_inner", d->ring_inner);
  cJSON_AddNumberToObject(j, "ring_outer", d->ring_outer);
  cJSON_AddNumberToObject(j, "ulysses_degree", d->ulysses_degree);
}

static cJSON *result_json(const bs_result *r) {
  cJSON *o = cJSON_CreateObject();
  add_config(o, &r->cfg);
  add_decision(o, &r->decision);
  if (r->error[0]) cJSON_AddStringToObject(o, "error", r->error);
  cJSON *t = cJSON_AddObjectToObject(o, "time_s");
  cJSON_AddNumberToObject(t, "step", r->time.step);
  cJSON_AddNumberToObject(t, "fwd", r->time.fwd);
  cJSON_AddNumberToObject(t, "bwd", r->time.bwd);
  cJSON_AddNumberToObject(t, "compute", r->time.compute);
  cJSON_AddNumberToObject(t, "comm_exposed", r->time.comm_exposed);
  cJSON *b = cJSON_AddObjectToObject(o, "comm_bytes");
  cJSON_AddNumberToObject(b, "per_rank_max_sent", (double)r->comm.per_rank_max_sent);
  cJSON_AddNumberToObject(b, "total", (double)r->comm.total);
  cJSON_AddNumberToObject(b, "intra_node", (double)r->comm.intra_node);
  cJSON_AddNumberToObject(b, "inter_node", (double)r->comm.inter_node);
  cJSON *m = cJSON_AddObjectToObject(o, "memory");
  cJSON_AddNumberToObject(m, "peak_bytes_max", (double)r->mem.peak_bytes_max);
  cJSON_AddNumberToObject(m, "capacity_bytes", (double)r->mem.capacity_bytes);
  cJSON_AddBoolToObject(m, "oom", r->mem.oom);
  if (r->mem.rss_bytes) cJSON_AddNumberToObject(m, "rss_bytes", (double)r->mem.rss_bytes);
  cJSON *bd = cJSON_AddObjectToObject(m, "breakdown");
  for (int i = 0; i < BS_MEM_CLASS_COUNT; i++)
    cJSON_AddNumberToObject(bd, bs_mem_class_name((bs_mem_class)i), (double)r->mem.breakdown[i]);
  if (!strcmp(r->mode ? r->mode : "", "sim")) {
    cJSON *s = cJSON_AddObjectToObject(o, "sim");
    cJSON_AddNumberToObject(s, "wall_s", r->sim_wall_s);
    cJSON_AddNumberToObject(s, "events", (double)r->sim_events);
    cJSON_AddNumberToObject(s, "actors", r->sim_actors);
    cJSON_AddNumberToObject(s, "rss_bytes", (double)r->sim_rss_bytes);
    cJSON_AddStringToObject(s, "network", r->sim_network);
  }
  if (r->ranks && r->nranks > 0) {
    cJSON *ra = cJSON_AddArrayToObject(o, "ranks");
    for (int i = 0; i < r->nranks; i++) {
      const bs_rank_result *x = &r->ranks[i];
      cJSON *e = cJSON_CreateObject();
      cJSON_AddNumberToObject(e, "rank", x->rank);
      cJSON_AddNumberToObject(e, "step", x->step);
      cJSON_AddNumberToObject(e, "fwd", x->fwd);
      cJSON_AddNumberToObject(e, "bwd", x->bwd);
      cJSON_AddNumberToObject(e, "compute", x->compute);
      cJSON_AddNumberToObject(e, "comm_exposed", x->comm_exposed);
      cJSON_AddNumberToObject(e, "bytes_sent", (double)x->bytes_sent);
      cJSON_AddNumberToObject(e, "bytes_recv", (double)x->bytes_recv);
      cJSON_AddNumberToObject(e, "peak_bytes", (double)x->peak_bytes);
      cJSON_AddItemToArray(ra, e);
    }
  }
  return o;
}

cJSON *bs_output_json_tree(const char *mode, const bs_result *r, int n) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "tool", "burstsim");
  cJSON_AddStringToObject(root, "version", BURSTSIM_VERSION);
  cJSON_AddStringToObject(root, "mode", mode);
  cJSON *arr = cJSON_AddArrayToObject(root, "results");
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, result_json(&r[i]));
  return root;
}

int bs_output_json_write(const char *path, const cJSON *root, char *err, size_t errlen) {
  char *text = root ? cJSON_Print(root) : NULL;
  if (!text) {
    snprintf(err, errlen, "%s: out of memory while formatting JSON", path);
    return -1;
  }
  size_t len = strlen(text);
  char *withnl = realloc(text, len + 2);
  if (!withnl) {
    free(text);
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  withnl[len] = '\n';
  withnl[len + 1] = '\0';
  int rc = bs_write_file(path, withnl, len + 1, err, errlen);
  free(withnl);
  return rc;
}

int bs_output_json(const char *path, const char *mode, const bs_result *r, int n, char *err, size_t errlen) {
  cJSON *root = bs_output_json_tree(mode, r, n);
  int rc = bs_output_json_write(path, root, err, errlen);
  cJSON_Delete(root);
  return rc;
}

/* A growable string for the CSV. */
typedef struct {
  char *s;
  size_t len, cap;
  int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (w < 0) {
      b->oom = 1;
      return;
    }
    if (b->s && b->len + (size_t)w < b->cap) {
      b->len += (size_t)w;
      return;
    }
    size_t ncap = (b->cap ? b->cap * 2 : 4096) + (size_t)w;
    char *ns = realloc(b->s, ncap);
    if (!ns) {
      b->oom = 1;
      return;
    }
    b->s = ns;
    b->cap = ncap;
  }
}

/* One CSV field per RFC 4180: quoted, with quotes doubled, when it holds a comma, quote, CR or
 * LF (always when `always`). */
static void sb_field(sbuf *b, const char *v, int always) {
  if (!always && !strpbrk(v, ",\"\r\n")) {
    sb_printf(b, "%s", v);
    return;
  }
  sb_printf(b, "\"");
  for (const char *p = v; *p;) {
    size_t n = strcspn(p, "\"");
    sb_printf(b, "%.*s", (int)n, p);
    p += n;
    if (*p == '"') {
      sb_printf(b, "\"\"");
      p++;
    }
  }
  sb_printf(b, "\"");
}

int bs_output_csv(const char *path, const bs_result *r, int n, char *err, size_t errlen) {
  sbuf b = {0};
  sb_printf(&b,
            "method,gpus,seq_len,batch,phase,scope,causal,layout,double_ring,lao,bwd_comm,ulysses_degree,"
            "tp_variant,zero,dtype,heads,kv_heads,head_dim,topology,profile,step_s,fwd_s,bwd_s,compute_s,"
            "comm_exposed_s,bytes_per_rank_max,bytes_total,bytes_intra_node,bytes_inter_node,"
            "peak_bytes_max,capacity_bytes,oom,sim_wall_s,sim_events,error\n");
  for (int i = 0; i < n; i++) {
    const bs_result *x = &r[i];
    const bs_config *c = &x->cfg;
    sb_printf(&b, "%s,%d,%lld,%lld,%s,%s,%d,%s,%s,%d,%s,%d,v%d,%d,%s,%lld,%lld,%lld,", bs_method_name(c->par.method),
              c->par.gpus, (long long)c->work.seq_len, (long long)c->work.batch, bs_phase_name(c->work.phase),
              bs_scope_name(c->work.scope), c->work.causal, bs_layout_name(c->par.layout),
              c->par.double_ring == BS_AUTO ? "auto"
              : c->par.double_ring          ? "on"
                                            : "off",
              c->par.lao, c->par.bwd_opt ? "optimized" : "plain", c->par.ulysses_degree, c->par.tp_variant, c->par.zero,
              bs_dtype_name(c->model.dtype), (long long)c->model.heads, (long long)c->model.kv_heads,
              (long long)c->model.head_dim);
    sb_field(&b, c->cluster.topology, 0);
    sb_printf(&b, ",");
    sb_field(&b, c->cluster.profile, 0);
    sb_printf(&b, ",%.9g,%.9g,%.9g,%.9g,%.9g,%lld,%lld,%lld,%lld,%lld,%lld,%d,%.6g,%lld,", x->time.step, x->time.fwd,
              x->time.bwd, x->time.compute, x->time.comm_exposed, (long long)x->comm.per_rank_max_sent,
              (long long)x->comm.total, (long long)x->comm.intra_node, (long long)x->comm.inter_node,
              (long long)x->mem.peak_bytes_max, (long long)x->mem.capacity_bytes, x->mem.oom, x->sim_wall_s,
              (long long)x->sim_events);
    sb_field(&b, x->error, 1);
    sb_printf(&b, "\n");
  }
  if (b.oom) {
    free(b.s);
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  int rc = bs_write_file(path, b.s, b.len, err, errlen);
  free(b.s);
  return rc;
}

/* Figures keep their unit at any magnitude: beyond the fixed-point range they switch to
 * exponent form ("1.6e+301 s") rather than growing past the buffer and losing the unit. */
static void human_bytes(char *dst, size_t n, double v) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int i = 0;
  while (v >= 1024 && i < 6) v /= 1024, i++;
  if (!isfinite(v) || v >= 1e6) snprintf(dst, n, "%.3g %s", v, u[i]);
  else snprintf(dst, n, i ? "%.2f %s" : "%.0f %s", v, u[i]);
}

static void human_time(char *dst, size_t n, double s) {
  if (!isfinite(s) || s < 0 || s >= 1e6) snprintf(dst, n, "%.3g s", s);
  else if (s >= 1) snprintf(dst, n, "%.3f s", s);
  else if (s >= 1e-3) snprintf(dst, n, "%.3f ms", s * 1e3);
  else if (s >= 1e-7 || s == 0) snprintf(dst, n, "%.1f us", s * 1e6);
  else snprintf(dst, n, "%.3g us", s * 1e6);
}

void bs_output_table(FILE *f, const bs_result *r, int n) {
  fprintf(f, "%-12s %6s %9s %11s %11s %11s %8s %11s %11s %9s %4s\n", "method", "gpus", "seq", "step", "fwd", "bwd",
          "exposed", "intra/rank", "inter/rank", "peak GiB", "oom");
  for (int i = 0; i < n; i++) {
    const bs_result *x = &r[i];
    const bs_config *c = &x->cfg;
    char seq[32];
    if (c->work.seq_len % (1024 * 1024) == 0) snprintf(seq, sizeof seq, "%lldM", (long long)(c->work.seq_len >> 20));
    else if (c->work.seq_len % 1024 == 0) snprintf(seq, sizeof seq, "%lldK", (long long)(c->work.seq_len >> 10));
    else snprintf(seq, sizeof seq, "%lld", (long long)c->work.seq_len);
    if (x->error[0]) {
      fprintf(f, "%-12s %6d %9s  error: %s\n", bs_method_name(c->par.method), c->par.gpus, seq, x->error);
      continue;
    }
    char st[48], fw[48], bw[48], in[48], out[48], peak[48];
    human_time(st, sizeof st, x->time.step);
    human_time(fw, sizeof fw, x->time.fwd);
    human_time(bw, sizeof bw, x->time.bwd);
    int g = c->par.gpus > 0 ? c->par.gpus : 1;
    human_bytes(in, sizeof in, (double)x->comm.intra_node / g);
    human_bytes(out, sizeof out, (double)x->comm.inter_node / g);
    double exposed = x->time.step > 0 ? 100.0 * x->time.comm_exposed / x->time.step : 0;
    double gib = (double)x->mem.peak_bytes_max / (1024.0 * 1024 * 1024);
    snprintf(peak, sizeof peak, gib < 1e6 ? "%.2f" : "%.3g", gib);
    fprintf(f, "%-12s %6d %9s %11s %11s %11s %7.1f%% %11s %11s %9s %4s\n", bs_method_name(c->par.method), c->par.gpus,
            seq, st, fw, bw, exposed, in, out, peak, x->mem.oom ? "OOM" : "");
  }
}
