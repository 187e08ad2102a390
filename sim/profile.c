/*
 * profile.c — reads, checks and writes hardware profiles (format in
 * profile.h) and turns a COMPUTE op's shape into a modelled duration.
 */
#include "profile.h"

#include "base/fileio.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef BURSTSIM_SOURCE_DIR
#define BURSTSIM_SOURCE_DIR "."
#endif

void bs_profile_path(const char *name, char *out, size_t outlen) {
  size_t n = strlen(name);
  if (n > 5 && !strcmp(name + n - 5, ".json")) {
    snprintf(out, outlen, "%s", name);
    return;
  }
  const char *dir = getenv("BURSTSIM_PROFILE_DIR");
  if (dir && *dir) snprintf(out, outlen, "%s/%s.json", dir, name);
  else snprintf(out, outlen, "%s/calib/profiles/%s.json", BURSTSIM_SOURCE_DIR, name);
}

/* A {"value": X, "source": "..."} number; required unless opt. */
static int get_val(const cJSON *obj, const char *key, double *out, int opt, const char *path,
                   const char *where, char *err, size_t errlen) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) {
    if (opt) return 0;
    snprintf(err, errlen, "%s: %s.%s: missing", path, where, key);
    return -1;
  }
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, "value");
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(v, "source");
  if (!cJSON_IsNumber(x) || !cJSON_IsString(s) || !*s->valuestring) {
    snprintf(err, errlen, "%s: %s.%s: needs {\"value\": number, \"source\": \"...\"}", path, where,
             key);
    return -1;
  }
  if (!isfinite(x->valuedouble)) {
    snprintf(err, errlen, "%s: %s.%s: value is not a finite number", path, where, key);
    return -1;
  }
  *out = x->valuedouble;
  return 0;
}

/* 1-based line of byte `at` in text (for JSON syntax errors). */
static int line_of(const char *text, const char *at) {
  int line = 1;
  for (const char *c = text; c < at && *c; c++) line += *c == '\n';
  return line;
}

static const char *kernel_json_name(int k) {
  static const char *n[BS_K_COUNT] = {"attn_fwd", "attn_fwd_unfused", "attn_bwd", "attn_bwd_unfused",
                                      "attn_delta", "attn_merge", "gemm", "elemwise", "copy"};
  return (k >= 0 && k < BS_K_COUNT) ? n[k] : "?";
}

/* A fraction in (0, 1]. */
static int get_fraction(const cJSON *obj, const char *key, double *out, const char *path, const char *where,
                        char *err, size_t errlen) {
  if (get_val(obj, key, out, 0, path, where, err, errlen)) return -1;
  if (!(*out > 0 && *out <= 1)) {
    snprintf(err, errlen, "%s: %s.%s: must be in (0, 1]", path, where, key);
    return -1;
  }
  return 0;
}

/* A whole number in [lo, hi]. */
static int get_count(const cJSON *obj, const char *key, int lo, int hi, int *out, const char *path,
                     const char *where, char *err, size_t errlen) {
  double v;
  if (get_val(obj, key, &v, 0, path, where, err, errlen)) return -1;
  if (!(v >= lo && v <= hi) || v != floor(v)) {
    snprintf(err, errlen, "%s: %s.%s: must be a whole number in [%d, %d]", path, where, key, lo, hi);
    return -1;
  }
  *out = (int)v;
  return 0;
}

/* The "tiled" GEMM model's parameters (format in profile.h). */
static int parse_tiled(const cJSON *kj, bs_kernel_model *m, const char *path, const char *where, char *err,
                       size_t errlen) {
  if (get_fraction(kj, "peak_fraction", &m->peak_fraction, path, where, err, errlen) ||
      get_fraction(kj, "bw_efficiency", &m->bw_efficiency, path, where, err, errlen) ||
      get_count(kj, "tile_m", 1, 65536, &m->tile_m, path, where, err, errlen) ||
      get_count(kj, "tile_n", 1, 65536, &m->tile_n, path, where, err, errlen) ||
      get_count(kj, "sms", 1, 1 << 20, &m->sms, path, where, err, errlen) ||
      get_val(kj, "k_overhead", &m->k_overhead, 0, path, where, err, errlen))
    return -1;
  if (!(m->k_overhead >= 0 && m->k_overhead <= 0x1p40)) {
    snprintf(err, errlen, "%s: %s.k_overhead: must be in [0, 2^40]", path, where);
    return -1;
  }
  return 0;
}

static int parse_kernel(const cJSON *kj, const char *kname, bs_kernel_model *m, const char *path,
                        char *err, size_t errlen) {
  char where[96];
  snprintf(where, sizeof where, "kernels.%s", kname);
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(kj, "model");
  if (!cJSON_IsString(model)) {
    snprintf(err, errlen, "%s: %s.model: missing (table, roofline, materialised or tiled)", path, where);
    return -1;
  }
  if (!strcmp(model->valuestring, "table")) m->kind = BS_KM_TABLE;
  else if (!strcmp(model->valuestring, "roofline")) m->kind = BS_KM_ROOFLINE;
  else if (!strcmp(model->valuestring, "materialised")) m->kind = BS_KM_MATERIALISED;
  else if (!strcmp(model->valuestring, "tiled") && !strcmp(kname, "gemm")) m->kind = BS_KM_TILED;
  else if (!strcmp(model->valuestring, "tiled")) {
    snprintf(err, errlen, "%s: %s.model: 'tiled' models GEMMs only (kernels.gemm)", path, where);
    return -1;
  } else {
    snprintf(err, errlen, "%s: %s.model: unknown '%s' (table, roofline, materialised, tiled)", path,
             where, model->valuestring);
    return -1;
  }
  if (get_val(kj, "launch_s", &m->launch_s, 0, path, where, err, errlen)) return -1;
  if (m->launch_s < 0) {
    snprintf(err, errlen, "%s: %s.launch_s: must be >= 0", path, where);
    return -1;
  }
  if (m->kind == BS_KM_ROOFLINE || m->kind == BS_KM_MATERIALISED) {
    if (get_val(kj, "efficiency", &m->efficiency, 0, path, where, err, errlen)) return -1;
    if (!(m->efficiency > 0 && m->efficiency <= 1)) {
      snprintf(err, errlen, "%s: %s.efficiency: must be in (0, 1]", path, where);
      return -1;
    }
  }
  if (m->kind == BS_KM_MATERIALISED) {
    if (get_val(kj, "passes", &m->passes, 0, path, where, err, errlen)) return -1;
    if (m->passes < 0) {
      snprintf(err, errlen, "%s: %s.passes: must be >= 0", path, where);
      return -1;
    }
  }
  if (m->kind == BS_KM_TILED) return parse_tiled(kj, m, path, where, err, errlen);
  if (m->kind != BS_KM_TABLE) return 0;
  const cJSON *tables = cJSON_GetObjectItemCaseSensitive(kj, "tables");
  if (!cJSON_IsArray(tables) || cJSON_GetArraySize(tables) < 1 ||
      cJSON_GetArraySize(tables) > BS_PROF_MAX_TABLES) {
    snprintf(err, errlen, "%s: %s.tables: 1 to %d tables needed", path, where, BS_PROF_MAX_TABLES);
    return -1;
  }
  const cJSON *t;
  cJSON_ArrayForEach(t, tables) {
    bs_prof_table *pt = &m->tables[m->ntables];
    int ti = m->ntables++;
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(t, "head_dim");
    const cJSON *mk = cJSON_GetObjectItemCaseSensitive(t, "mask");
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(t, "x");
    const cJSON *y = cJSON_GetObjectItemCaseSensitive(t, "tflops");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(t, "source");
    if (!cJSON_IsNumber(hd) || !cJSON_IsString(mk) || !cJSON_IsArray(x) || !cJSON_IsArray(y) ||
        !cJSON_IsString(src) || !*src->valuestring) {
      snprintf(err, errlen, "%s: %s.tables[%d]: needs head_dim, mask, x, tflops and source", path,
               where, ti);
      return -1;
    }
    if (!(hd->valuedouble >= 1 && hd->valuedouble <= 1024)) {
      snprintf(err, errlen, "%s: %s.tables[%d].head_dim: must be in [1, 1024]", path, where, ti);
      return -1;
    }
    pt->head_dim = hd->valueint;
    if (!strcmp(mk->valuestring, "full")) pt->causal = 0;
    else if (!strcmp(mk->valuestring, "causal")) pt->causal = 1;
    else {
      snprintf(err, errlen, "%s: %s.tables[%d].mask: 'full' or 'causal'", path, where, ti);
      return -1;
    }
    int n = cJSON_GetArraySize(x);
    if (n < 1 || n > BS_PROF_MAX_POINTS || cJSON_GetArraySize(y) != n) {
      snprintf(err, errlen, "%s: %s.tables[%d]: x and tflops need the same 1..%d points", path,
               where, ti, BS_PROF_MAX_POINTS);
      return -1;
    }
    pt->n = n;
    for (int i = 0; i < n; i++) {
      const cJSON *xi = cJSON_GetArrayItem(x, i), *yi = cJSON_GetArrayItem(y, i);
      if (!cJSON_IsNumber(xi) || !cJSON_IsNumber(yi) || !(xi->valuedouble > 0) ||
          !(yi->valuedouble > 0) || !isfinite(xi->valuedouble) || !isfinite(yi->valuedouble) ||
          (i && xi->valuedouble <= pt->x[i - 1])) {
        snprintf(err, errlen, "%s: %s.tables[%d]: point %d: x increasing and positive, tflops > 0",
                 path, where, ti, i);
        return -1;
      }
      pt->x[i] = xi->valuedouble;
      pt->tflops[i] = yi->valuedouble;
    }
  }
  return 0;
}

static int parse_link(const cJSON *lj, const char *cname, bs_prof_link *l, const char *path,
                      char *err, size_t errlen) {
  char where[64];
  snprintf(where, sizeof where, "links.%s", cname);
  if (get_val(lj, "bandwidth_Bps", &l->bw_Bps, 0, path, where, err, errlen) ||
      get_val(lj, "latency_s", &l->lat_s, 0, path, where, err, errlen))
    return -1;
  if (!(l->bw_Bps > 0) || !(l->lat_s >= 0)) {
    snprintf(err, errlen, "%s: %s: bandwidth must be > 0 and latency >= 0", path, where);
    return -1;
  }
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(lj, "factors");
  l->nfactors = 0;
  if (f) {
    if (!cJSON_IsArray(f) || cJSON_GetArraySize(f) > BS_PROF_MAX_FACTORS) {
      snprintf(err, errlen, "%s: %s.factors: an array of at most %d pieces", path, where,
               BS_PROF_MAX_FACTORS);
      return -1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, f) {
      const cJSON *mb = cJSON_GetObjectItemCaseSensitive(e, "min_bytes");
      const cJSON *bw = cJSON_GetObjectItemCaseSensitive(e, "bandwidth");
      const cJSON *lt = cJSON_GetObjectItemCaseSensitive(e, "latency");
      if (!cJSON_IsNumber(mb) || !cJSON_IsNumber(bw) || !cJSON_IsNumber(lt) ||
          !isfinite(mb->valuedouble) || !isfinite(bw->valuedouble) || !isfinite(lt->valuedouble) ||
          !(mb->valuedouble >= 0) || !(bw->valuedouble > 0) || !(lt->valuedouble >= 0) ||
          (l->nfactors && mb->valuedouble <= l->factors[l->nfactors - 1].min_bytes)) {
        snprintf(err, errlen, "%s: %s.factors[%d]: finite numbers, min_bytes >= 0 and increasing, "
                 "bandwidth > 0, latency >= 0",
                 path, where, l->nfactors);
        return -1;
      }
      l->factors[l->nfactors++] = (bs_prof_factor){mb->valuedouble, bw->valuedouble, lt->valuedouble};
    }
  }
  const cJSON *src = cJSON_GetObjectItemCaseSensitive(lj, "source");
  if (l->nfactors && (!cJSON_IsString(src) || !*src->valuestring)) {
    snprintf(err, errlen, "%s: %s: factors need a \"source\"", path, where);
    return -1;
  }
  l->present = 1;
  return 0;
}

/* "network": SimGrid's model name, cross traffic 0/1, TCP-gamma >= 0; each optional. */
static int parse_network(const cJSON *net, bs_profile *p, const char *path, char *err, size_t errlen) {
  static const char *const models[] = {"CM02", "LV08", "SMPI", "IB", "Constant"};
  if (!cJSON_IsObject(net)) {
    snprintf(err, errlen, "%s: network: must be an object", path);
    return -1;
  }
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(net, "model");
  const cJSON *ct = cJSON_GetObjectItemCaseSensitive(net, "crosstraffic");
  const cJSON *tg = cJSON_GetObjectItemCaseSensitive(net, "tcp_gamma");
  if (m) {
    int known = 0;
    for (size_t i = 0; cJSON_IsString(m) && i < sizeof models / sizeof models[0]; i++)
      known |= !strcmp(m->valuestring, models[i]);
    if (!known) {
      snprintf(err, errlen, "%s: network.model: must be one of CM02, LV08, SMPI, IB, Constant", path);
      return -1;
    }
    snprintf(p->net_model, sizeof p->net_model, "%s", m->valuestring);
  }
  if (ct) {
    if (!cJSON_IsNumber(ct) || (ct->valuedouble != 0 && ct->valuedouble != 1)) {
      snprintf(err, errlen, "%s: network.crosstraffic: must be 0 or 1", path);
      return -1;
    }
    p->crosstraffic = ct->valuedouble != 0;
  }
  if (tg) {
    if (!cJSON_IsNumber(tg) || !isfinite(tg->valuedouble) || tg->valuedouble < 0) {
      snprintf(err, errlen, "%s: network.tcp_gamma: must be a finite number >= 0", path);
      return -1;
    }
    p->tcp_gamma = tg->valuedouble;
  }
  return 0;
}

int bs_profile_load(const char *name_or_path, bs_profile *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  bs_profile_path(name_or_path, p->path, sizeof p->path);
  const char *path = p->path;
  size_t nl = strlen(name_or_path);
  if ((nl <= 5 || strcmp(name_or_path + nl - 5, ".json")) && access(path, F_OK)) {
    snprintf(err, errlen, "unknown profile '%s' (no %s; known: the names in calib/profiles, or a "
             "FILE.json)", name_or_path, path);
    return -1;
  }
  char *text = bs_read_file(path, NULL, err, errlen);
  if (!text) return -1;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
  int rc = -1;
  if (!root) {
    /* the error pointer lies inside text: report before freeing it */
    const char *at = end ? end : cJSON_GetErrorPtr();
    if (at) snprintf(err, errlen, "%s:%d: not valid JSON (near '%.20s')", path, line_of(text, at), at);
    else snprintf(err, errlen, "%s: not valid JSON", path);
    free(text);
    goto out;
  }
  free(text);
  if (!cJSON_IsObject(root)) {
    snprintf(err, errlen, "%s: not a JSON object", path);
    goto out;
  }
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
  if (!cJSON_IsNumber(fmt) || fmt->valueint != 1) {
    snprintf(err, errlen, "%s: format: must be 1", path);
    goto out;
  }
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
  snprintf(p->name, sizeof p->name, "%s", cJSON_IsString(name) ? name->valuestring : name_or_path);
  const cJSON *dev = cJSON_GetObjectItemCaseSensitive(root, "device");
  if (!cJSON_IsObject(dev)) {
    snprintf(err, errlen, "%s: device: missing", path);
    goto out;
  }
  if (get_val(dev, "memory_bytes", &p->memory_bytes, 0, path, "device", err, errlen) ||
      get_val(dev, "peak_flops", &p->peak_flops, 0, path, "device", err, errlen) ||
      get_val(dev, "mem_bw_Bps", &p->mem_bw_Bps, 0, path, "device", err, errlen))
    goto out;
  if (!(p->memory_bytes > 0 && p->peak_flops > 0 && p->mem_bw_Bps > 0)) {
    snprintf(err, errlen, "%s: device: memory_bytes, peak_flops and mem_bw_Bps must be > 0", path);
    goto out;
  }
  if (!(p->memory_bytes < 0x1p62)) { /* results hold it as an int64 byte count */
    snprintf(err, errlen, "%s: device.memory_bytes: %g is more than 2^62 bytes", path, p->memory_bytes);
    goto out;
  }
  const cJSON *ks = cJSON_GetObjectItemCaseSensitive(root, "kernels");
  if (!cJSON_IsObject(ks)) {
    snprintf(err, errlen, "%s: kernels: missing", path);
    goto out;
  }
  const cJSON *kj;
  cJSON_ArrayForEach(kj, ks) {
    int k = -1;
    for (int i = 0; i < BS_K_COUNT; i++)
      if (!strcmp(kj->string, kernel_json_name(i))) k = i;
    if (k < 0) {
      snprintf(err, errlen, "%s: kernels.%s: unknown kernel", path, kj->string);
      goto out;
    }
    if (p->kernel[k].kind != BS_KM_NONE) {
      snprintf(err, errlen, "%s: kernels.%s: given twice", path, kj->string);
      goto out;
    }
    if (parse_kernel(kj, kj->string, &p->kernel[k], path, err, errlen)) goto out;
  }
  const cJSON *ls = cJSON_GetObjectItemCaseSensitive(root, "links");
  if (!cJSON_IsObject(ls)) {
    snprintf(err, errlen, "%s: links: missing", path);
    goto out;
  }
  const cJSON *lj;
  cJSON_ArrayForEach(lj, ls) {
    int c = -1;
    for (int i = 0; i < BS_LINK_CLASS_COUNT; i++)
      if (!strcmp(lj->string, bs_link_class_name(i))) c = i;
    if (c < 0) {
      snprintf(err, errlen, "%s: links.%s: unknown link class", path, lj->string);
      goto out;
    }
    if (p->link[c].present) {
      snprintf(err, errlen, "%s: links.%s: given twice", path, lj->string);
      goto out;
    }
    if (parse_link(lj, lj->string, &p->link[c], path, err, errlen)) goto out;
  }
  snprintf(p->net_model, sizeof p->net_model, "CM02");
  const cJSON *net = cJSON_GetObjectItemCaseSensitive(root, "network");
  if (net && parse_network(net, p, path, err, errlen)) goto out;
  const cJSON *host = cJSON_GetObjectItemCaseSensitive(root, "host");
  if (host) {
    double cores = 0;
    if (get_val(host, "speed_flops", &p->host_speed, 0, path, "host", err, errlen) ||
        get_val(host, "cores", &cores, 0, path, "host", err, errlen))
      goto out;
    if (!(p->host_speed > 0) || !(cores >= 1 && cores <= 1 << 20)) {
      snprintf(err, errlen, "%s: host: speed_flops > 0 and cores >= 1 needed", path);
      goto out;
    }
    p->host_cores = (int)cores;
  }
  rc = 0;
out:
  cJSON_Delete(root);
  return rc;
}

static cJSON *val(double v, const char *source) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "value", v);
  cJSON_AddStringToObject(o, "source", source);
  return o;
}

cJSON *bs_profile_to_json(const bs_profile *p, const char *source) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "format", 1);
  cJSON_AddStringToObject(root, "name", p->name);
  cJSON *dev = cJSON_AddObjectToObject(root, "device");
  cJSON_AddItemToObject(dev, "memory_bytes", val(p->memory_bytes, source));
  cJSON_AddItemToObject(dev, "peak_flops", val(p->peak_flops, source));
  cJSON_AddItemToObject(dev, "mem_bw_Bps", val(p->mem_bw_Bps, source));
  cJSON *ks = cJSON_AddObjectToObject(root, "kernels");
  for (int k = 0; k < BS_K_COUNT; k++) {
    const bs_kernel_model *m = &p->kernel[k];
    if (m->kind == BS_KM_NONE) continue;
    cJSON *kj = cJSON_AddObjectToObject(ks, kernel_json_name(k));
    static const char *kn[] = {"none", "table", "roofline", "materialised", "tiled"};
    cJSON_AddStringToObject(kj, "model", kn[m->kind]);
    cJSON_AddItemToObject(kj, "launch_s", val(m->launch_s, source));
    if (m->kind == BS_KM_ROOFLINE || m->kind == BS_KM_MATERIALISED)
      cJSON_AddItemToObject(kj, "efficiency", val(m->efficiency, source));
    if (m->kind == BS_KM_MATERIALISED) cJSON_AddItemToObject(kj, "passes", val(m->passes, source));
    if (m->kind == BS_KM_TILED) {
      cJSON_AddItemToObject(kj, "peak_fraction", val(m->peak_fraction, source));
      cJSON_AddItemToObject(kj, "bw_efficiency", val(m->bw_efficiency, source));
      cJSON_AddItemToObject(kj, "tile_m", val(m->tile_m, source));
      cJSON_AddItemToObject(kj, "tile_n", val(m->tile_n, source));
      cJSON_AddItemToObject(kj, "sms", val(m->sms, source));
      cJSON_AddItemToObject(kj, "k_overhead", val(m->k_overhead, source));
    }
    if (m->kind != BS_KM_TABLE) continue;
    cJSON *ts = cJSON_AddArrayToObject(kj, "tables");
    for (int t = 0; t < m->ntables; t++) {
      const bs_prof_table *pt = &m->tables[t];
      cJSON *tj = cJSON_CreateObject();
      cJSON_AddNumberToObject(tj, "head_dim", pt->head_dim);
      cJSON_AddStringToObject(tj, "mask", pt->causal ? "causal" : "full");
      cJSON_AddItemToObject(tj, "x", cJSON_CreateDoubleArray(pt->x, pt->n));
      cJSON_AddItemToObject(tj, "tflops", cJSON_CreateDoubleArray(pt->tflops, pt->n));
      cJSON_AddStringToObject(tj, "source", source);
      cJSON_AddItemToArray(ts, tj);
    }
  }
  cJSON *ls = cJSON_AddObjectToObject(root, "links");
  for (int c = 0; c < BS_LINK_CLASS_COUNT; c++) {
    const bs_prof_link *l = &p->link[c];
    if (!l->present) continue;
    cJSON *lj = cJSON_AddObjectToObject(ls, bs_link_class_name(c));
    cJSON_AddItemToObject(lj, "bandwidth_Bps", val(l->bw_Bps, source));
    cJSON_AddItemToObject(lj, "latency_s", val(l->lat_s, source));
    if (l->nfactors) {
      cJSON *fs = cJSON_AddArrayToObject(lj, "factors");
      for (int i = 0; i < l->nfactors; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddNumberToObject(f, "min_bytes", l->factors[i].min_bytes);
        cJSON_AddNumberToObject(f, "bandwidth", l->factors[i].bandwidth);
        cJSON_AddNumberToObject(f, "latency", l->factors[i].latency);
        cJSON_AddItemToArray(fs, f);
      }
      cJSON_AddStringToObject(lj, "source", source);
    }
  }
  cJSON *net = cJSON_AddObjectToObject(root, "network");
  cJSON_AddStringToObject(net, "model", p->net_model);
  cJSON_AddNumberToObject(net, "crosstraffic", p->crosstraffic);
  cJSON_AddNumberToObject(net, "tcp_gamma", p->tcp_gamma);
  if (p->host_speed > 0) {
    cJSON *h = cJSON_AddObjectToObject(root, "host");
    cJSON_AddItemToObject(h, "speed_flops", val(p->host_speed, source));
    cJSON_AddItemToObject(h, "cores", val(p->host_cores, source));
  }
  return root;
}

int bs_profile_save(const bs_profile *p, const char *path, const char *source, char *err,
                    size_t errlen) {
  cJSON *root = bs_profile_to_json(p, source);
  char *text = root ? cJSON_Print(root) : NULL;
  cJSON_Delete(root);
  size_t n = text ? strlen(text) : 0;
  char *withnl = text ? realloc(text, n + 2) : NULL;
  if (!withnl) {
    free(text);
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  withnl[n] = '\n';
  withnl[n + 1] = '\0';
  int rc = bs_write_file(path, withnl, n + 1, err, errlen);
  free(withnl);
  return rc;
}

/* Useful TFLOP/s of a table at x: linear in log2(x), clamped at the ends. */
static double table_rate(const bs_prof_table *t, double x) {
  if (x <= t->x[0]) return t->tflops[0];
  if (x >= t->x[t->n - 1]) return t->tflops[t->n - 1];
  int i = 1;
  while (t->x[i] < x) i++;
  double a = log2(t->x[i - 1]), b = log2(t->x[i]), u = (log2(x) - a) / (b - a);
  return t->tflops[i - 1] + u * (t->tflops[i] - t->tflops[i - 1]);
}

static const bs_prof_table *pick_table(const bs_kernel_model *m, int d, int causal) {
  const bs_prof_table *best = NULL;
  int bestdist = 1 << 30;
  for (int pass = 0; pass < 2 && !best; pass++)
    for (int i = 0; i < m->ntables; i++) {
      const bs_prof_table *t = &m->tables[i];
      if (pass == 0 && t->causal != causal) continue;
      int dist = abs(t->head_dim - d);
      if (dist < bestdist) {
        bestdist = dist;
        best = t;
      }
    }
  return best;
}

/* Bytes a memory-bound kernel moves, from its shape. */
static double kernel_bytes(const bs_compute *c, int eb) {
  const attn_params *a = &c->a;
  double rows = (double)a->B * a->Zq * a->Nq, d = a->d;
  switch (c->kernel) {
  case BS_K_ATTN_MERGE: /* read o2, lse2, o, lse; write o, lse (fp32) */
    return rows * (3 * d + 3) * 4;
  case BS_K_ATTN_DELTA: /* read o (fp32) and dout; write delta (fp32) */
    return rows * (d * 4 + d * eb + 4);
  case BS_K_GEMM:
    return ((double)c->m * c->k + (double)c->k * c->n + (double)c->m * c->n) * eb;
  case BS_K_ELEMWISE: /* elems elements read and written */
    return 2.0 * (double)c->elems * eb;
  case BS_K_COPY: /* elems bytes read and written */
    return 2.0 * (double)c->elems;
  default:
    return 0;
  }
}

/* Independent GEMMs in one op (one per head in the materialised plans): flops / (2 m n k), at least 1. */
static double gemm_batch(const bs_compute *c, double flops) {
  double mnk = 2.0 * (double)c->m * (double)c->n * (double)c->k;
  if (!(mnk > 0) || !(flops > mnk)) return 1;
  return floor(flops / mnk + 0.5);
}

/*
 * Tile and wave quantization of an m x n output (batch of them) on `sms`
 * units: useful tile area over the area the waves hold, m n batch / (waves
 * sms tm tn), for the better of the two tile orientations.
 */
static double tiled_quant(const bs_kernel_model *km, double m, double n, double batch) {
  double best = 0;
  for (int o = 0; o < 2; o++) {
    double tm = o ? km->tile_n : km->tile_m, tn = o ? km->tile_m : km->tile_n;
    double tiles = batch * ceil(m / tm) * ceil(n / tn), waves = ceil(tiles / km->sms);
    double q = m * n * batch / (waves * km->sms * tm * tn);
    if (q > best) best = q;
  }
  return best;
}

/* The tiled GEMM model (format in profile.h). */
static double tiled_time(const bs_profile *p, const bs_kernel_model *km, const bs_compute *c, int eb,
                         double flops) {
  double m = c->m > 0 ? (double)c->m : 1, n = c->n > 0 ? (double)c->n : 1, k = c->k > 0 ? (double)c->k : 1;
  double batch = gemm_batch(c, flops);
  double bytes = batch * (m * k + k * n + m * n) * eb;
  double q = tiled_quant(km, m, n, batch) * k / (k + km->k_overhead);
  double tb = bytes / (p->mem_bw_Bps * km->bw_efficiency);
  double tf = flops / (p->peak_flops * km->peak_fraction * q);
  return km->launch_s + (tb > tf ? tb : tf);
}

/* FLOPs of an attention block with every key visible. */
static double attn_full_flops(const bs_compute *c) {
  const attn_params *a = &c->a;
  double f = 4.0 * a->B * a->Zq * (double)a->Nq * (double)a->Nk * a->d;
  return (c->kernel == BS_K_ATTN_BWD || c->kernel == BS_K_ATTN_BWD_UNFUSED) ? 2.5 * f : f;
}

double bs_profile_kernel_time(const bs_profile *p, const bs_compute *c, bs_dtype dt, char *err,
                              size_t errlen) {
  if (c->kernel < 0 || c->kernel >= BS_K_COUNT) {
    snprintf(err, errlen, "COMPUTE with an unknown kernel %d", (int)c->kernel);
    return -1;
  }
  const bs_kernel_model *m = &p->kernel[c->kernel];
  int eb = bs_dtype_bytes(dt);
  double flops = c->flops > 0 ? c->flops : 0;
  switch (m->kind) {
  case BS_KM_TABLE: {
    if (flops == 0) return m->launch_s;
    double full = attn_full_flops(c);
    int partial = full > 0 && flops < full * (1 - 1e-9);
    const bs_prof_table *t = pick_table(m, c->a.d, partial);
    double x = sqrt((double)(c->a.Nq > 0 ? c->a.Nq : 1) * (double)(c->a.Nk > 0 ? c->a.Nk : 1));
    return m->launch_s + flops / (table_rate(t, x) * 1e12);
  }
  case BS_KM_ROOFLINE: {
    double tb = kernel_bytes(c, eb) / (p->mem_bw_Bps * m->efficiency);
    double tf = flops / (p->peak_flops * m->efficiency);
    return m->launch_s + (tb > tf ? tb : tf);
  }
  case BS_KM_TILED:
    return tiled_time(p, m, c, eb, flops);
  case BS_KM_MATERIALISED: {
    const attn_params *a = &c->a;
    double scores = (double)a->B * a->Zq * (double)a->Nq * (double)a->Nk * 4;
    return m->launch_s + flops / (p->peak_flops * m->efficiency) + m->passes * scores / p->mem_bw_Bps;
  }
  default:
    snprintf(err, errlen, "profile %s has no model for kernel %s", p->name, kernel_json_name(c->kernel));
    return -1;
  }
}

void bs_profile_apply_topo(const bs_profile *p, bs_topo_params *t) {
  for (int c = 0; c < BS_LINK_CLASS_COUNT; c++)
    if (p->link[c].present) {
      t->link[c].bw_Bps = p->link[c].bw_Bps;
      t->link[c].lat_s = p->link[c].lat_s;
    }
  if (p->host_speed > 0) {
    t->host_speed = p->host_speed;
    t->host_cores = p->host_cores;
  }
}
