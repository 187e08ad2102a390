/*
 * profile.c — reads, checks and writes hardware profiles (format in
 * profile.h) and turns a COMPUTE op's shape into a modelled duration, and an
 * allocation into the bytes the device's allocator holds for it.
 */
#include "profile/profile.h"
#include "profile/profile_impl.h"

#include "base/fileio.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Profiles are a few kB; anything larger is not one (and is not read into memory whole). */
#define PROFILE_MAX_BYTES (16L << 20)

/*
 * The profile's text, read by bs_read_file: only a regular file (stat first:
 * opening a FIFO would wait for a writer) of at most PROFILE_MAX_BYTES, with
 * messages that say it is the profile that could not be read.
 */
static char *read_profile(const char *path, char *err, size_t errlen) {
  struct stat st;
  int known = stat(path, &st) == 0; /* if not, bs_read_file says why it does not open */
  if (known && !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "%s: cannot read profile: not a regular file", path);
    return NULL;
  }
  if (known && st.st_size > PROFILE_MAX_BYTES) {
    snprintf(err, errlen, "%s: cannot read profile: %ld bytes, more than the %ld a profile may have", path,
             (long)st.st_size, PROFILE_MAX_BYTES);
    return NULL;
  }
  char why[2048];
  char *s = bs_read_file(path, NULL, why, sizeof why);
  if (!s) {
    int e = errno; /* why it did not open, or 0 when it opened and did not read */
    if (e) snprintf(err, errlen, "%s: cannot open profile: %s", path, strerror(e));
    else snprintf(err, errlen, "%s: cannot read profile", path);
  }
  return s;
}

/* A {"value": X, "source": "..."} number; required unless opt. */
static int get_val(const cJSON *obj, const char *key, double *out, int opt, const char *path, const char *where,
                   char *err, size_t errlen) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) {
    if (opt) return 0;
    snprintf(err, errlen, "%s: %s.%s: missing", path, where, key);
    return -1;
  }
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, "value");
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(v, "source");
  if (!cJSON_IsNumber(x) || !cJSON_IsString(s) || !*s->valuestring) {
    snprintf(err, errlen, "%s: %s.%s: needs {\"value\": number, \"source\": \"...\"}", path, where, key);
    return -1;
  }
  if (!isfinite(x->valuedouble)) {
    snprintf(err, errlen, "%s: %s.%s: value is not a finite number", path, where, key);
    return -1;
  }
  *out = x->valuedouble;
  return 0;
}

/*
 * Physical ranges of profile values: anything outside is a typo or a unit slip,
 * and would overflow SimGrid's clock (a bandwidth of 1e-300 B/s) or the int64
 * byte counts. Bandwidths in B/s, latencies and launch times in s, rates in FLOP/s.
 */
#define BW_MIN 1e3  /* 1 kB/s */
#define BW_MAX 1e14 /* 100 TB/s */
#define LAT_MAX 1.0 /* 1 s */
#define FLOPS_MIN 1e6
#define FLOPS_MAX 1e17
#define MEM_MIN 1e6     /* 1 MB */
#define MEM_MAX 0x1p62  /* results hold it as an int64 byte count */
#define FACTOR_MIN 1e-3 /* message-size factors scale a link's bandwidth or latency */
#define FACTOR_MAX 1e3
#define PASSES_MAX 1e3
#define TCP_GAMMA_MAX 0x1p40
#define FRACTION_MIN 1e-4 /* efficiencies and fractions of peak: (0, 1], at least 0.01 % */

/* A value in [lo, hi]; the message names the key and the range. */
static int in_range(double v, double lo, double hi, const char *unit, const char *path, const char *where,
                    const char *key, char *err, size_t errlen) {
  if (v >= lo && v <= hi) return 0;
  snprintf(err, errlen, "%s: %s%s%s: %g is out of range [%g, %g]%s%s", path, where, *where ? "." : "", key, v, lo, hi,
           *unit ? " " : "", unit);
  return -1;
}

/* A required number in [lo, hi]. */
static int get_range(const cJSON *obj, const char *key, double lo, double hi, const char *unit, double *out,
                     const char *path, const char *where, char *err, size_t errlen) {
  if (get_val(obj, key, out, 0, path, where, err, errlen)) return -1;
  return in_range(*out, lo, hi, unit, path, where, key, err, errlen);
}

/* 1-based line of byte `at` in text (for JSON syntax errors). */
static int line_of(const char *text, const char *at) {
  int line = 1;
  for (const char *c = text; c < at && *c; c++) line += *c == '\n';
  return line;
}

static const char *kernel_json_name(int k) {
  static const char *n[BS_K_COUNT] = {"attn_fwd",   "attn_fwd_unfused", "attn_bwd", "attn_bwd_unfused",
                                      "attn_delta", "attn_merge",       "gemm",     "elemwise",
                                      "copy"};
  return (k >= 0 && k < BS_K_COUNT) ? n[k] : "?";
}

/* A fraction in (0, 1]. */
static int get_fraction(const cJSON *obj, const char *key, double *out, const char *path, const char *where, char *err,
                        size_t errlen) {
  if (get_val(obj, key, out, 0, path, where, err, errlen)) return -1;
  if (!(*out > 0 && *out <= 1)) {
    snprintf(err, errlen, "%s: %s.%s: must be in (0, 1]", path, where, key);
    return -1;
  }
  return in_range(*out, FRACTION_MIN, 1, "", path, where, key, err, errlen);
}

/* A whole number in [lo, hi]. */
static int get_count(const cJSON *obj, const char *key, int lo, int hi, int *out, const char *path, const char *where,
                     char *err, size_t errlen) {
  double v;
  if (get_val(obj, key, &v, 0, path, where, err, errlen)) return -1;
  if (!(v >= lo && v <= hi) || v != floor(v)) {
    snprintf(err, errlen, "%s: %s.%s: must be a whole number in [%d, %d]", path, where, key, lo, hi);
    return -1;
  }
  *out = (int)v;
  return 0;
}

/* An optional whole number of bytes in [0, hi]; absent leaves *out at 0. */
static int get_opt_bytes(const cJSON *obj, const char *key, double hi, int64_t *out, const char *path,
                         const char *where, char *err, size_t errlen) {
  double v = 0;
  if (!cJSON_GetObjectItemCaseSensitive(obj, key)) return 0;
  if (get_val(obj, key, &v, 0, path, where, err, errlen)) return -1;
  if (!(v >= 0 && v <= hi) || v != floor(v)) {
    snprintf(err, errlen, "%s: %s.%s: %g must be a whole number of bytes in [0, %.17g]", path, where, key, v, hi);
    return -1;
  }
  *out = (int64_t)v;
  return 0;
}

#define ROUND_MAX 0x1p30 /* an allocation granule of more than 1 GiB is a unit slip */

/* The optional "collectives" section (format in profile.h): a per-call base cost, absent = 0, and
 * the library whose allreduce algorithms run, absent = NCCL's. */
static const char *const allreduce_lib_name[BS_ALLREDUCE_LIB_COUNT] = {"nccl", "open-mpi-libnbc"};

const char *bs_allreduce_lib_name(bs_allreduce_lib l) {
  return l >= 0 && l < BS_ALLREDUCE_LIB_COUNT ? allreduce_lib_name[l] : "?";
}

static int parse_allreduce_lib(const cJSON *cj, bs_profile *p, const char *path, char *err, size_t errlen) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(cj, "allreduce");
  const cJSON *v = cJSON_IsObject(a) ? cJSON_GetObjectItemCaseSensitive(a, "value") : NULL;
  if (!cJSON_IsString(v)) {
    snprintf(err, errlen,
             "%s: collectives.allreduce: must be {\"value\": \"nccl\" | \"open-mpi-libnbc\", \"source\": ...}", path);
    return -1;
  }
  for (int l = 0; l < BS_ALLREDUCE_LIB_COUNT; l++)
    if (!strcmp(v->valuestring, allreduce_lib_name[l])) {
      p->allreduce_lib = (bs_allreduce_lib)l;
      return 0;
    }
  snprintf(err, errlen, "%s: collectives.allreduce: unknown '%.40s' (nccl, open-mpi-libnbc)", path, v->valuestring);
  return -1;
}

static int parse_collectives(const cJSON *cj, bs_profile *p, const char *path, char *err, size_t errlen) {
  if (!cJSON_IsObject(cj)) {
    snprintf(err, errlen, "%s: collectives: must be an object {\"base_s\": {\"value\": s, \"source\": \"...\"}}", path);
    return -1;
  }
  const cJSON *k;
  cJSON_ArrayForEach(k, cj) {
    if (strcmp(k->string, "base_s") && strcmp(k->string, "allreduce")) {
      snprintf(err, errlen, "%s: collectives.%s: unknown key (base_s, allreduce)", path, k->string);
      return -1;
    }
  }
  if (cJSON_GetObjectItemCaseSensitive(cj, "allreduce") && parse_allreduce_lib(cj, p, path, err, errlen)) return -1;
  if (!cJSON_GetObjectItemCaseSensitive(cj, "base_s")) return 0;
  return get_range(cj, "base_s", 0, LAT_MAX, "s", &p->coll_base_s, path, "collectives", err, errlen);
}

/* The optional "p2p" section (format in profile.h): per route ("intra_node", "inter_node") a
 * per-send base cost and a bandwidth fraction; absent = 0 and 1 (no effect). */
static const char *const p2p_route_name[2] = {"intra_node", "inter_node"};

static int parse_p2p(const cJSON *pj, bs_profile *p, const char *path, char *err, size_t errlen) {
  if (!cJSON_IsObject(pj)) {
    snprintf(err, errlen, "%s: p2p: must be an object {\"intra_node\": {...}, \"inter_node\": {...}}", path);
    return -1;
  }
  const cJSON *r;
  cJSON_ArrayForEach(r, pj) {
    int w = !strcmp(r->string, "intra_node") ? 0 : !strcmp(r->string, "inter_node") ? 1 : -1;
    if (w < 0) {
      snprintf(err, errlen, "%s: p2p.%s: unknown key (intra_node, inter_node)", path, r->string);
      return -1;
    }
    char where[32];
    snprintf(where, sizeof where, "p2p.%s", p2p_route_name[w]);
    if (!cJSON_IsObject(r)) {
      snprintf(err, errlen, "%s: %s: must be an object {\"base_s\": {...}, \"efficiency\": {...}}", path, where);
      return -1;
    }
    const cJSON *k;
    cJSON_ArrayForEach(k, r) {
      if (strcmp(k->string, "base_s") && strcmp(k->string, "efficiency")) {
        snprintf(err, errlen, "%s: %s.%s: unknown key (base_s, efficiency)", path, where, k->string);
        return -1;
      }
    }
    if (cJSON_GetObjectItemCaseSensitive(r, "base_s") &&
        get_range(r, "base_s", 0, LAT_MAX, "s", &p->p2p_base_s[w], path, where, err, errlen))
      return -1;
    if (cJSON_GetObjectItemCaseSensitive(r, "efficiency") &&
        get_range(r, "efficiency", FACTOR_MIN, 1, "", &p->p2p_efficiency[w], path, where, err, errlen))
      return -1;
  }
  return 0;
}

/* The framework's memory terms (format in profile.h); each absent key leaves its term out. */
static int parse_memory_terms(const cJSON *dev, bs_profile *p, const char *path, char *err, size_t errlen) {
  if (get_opt_bytes(dev, "reserved_bytes", floor(p->memory_bytes) - 1, &p->reserved_bytes, path, "device", err,
                    errlen) ||
      get_opt_bytes(dev, "alloc_round_bytes", ROUND_MAX, &p->alloc_round_bytes, path, "device", err, errlen) ||
      get_opt_bytes(dev, "alloc_small_bytes", ROUND_MAX, &p->alloc_small_bytes, path, "device", err, errlen) ||
      get_opt_bytes(dev, "alloc_small_round_bytes", ROUND_MAX, &p->alloc_small_round_bytes, path, "device", err,
                    errlen))
    return -1;
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
  if (cJSON_GetObjectItemCaseSensitive(kj, "min_tile") &&
      get_count(kj, "min_tile", 1, 65536, &m->min_tile, path, where, err, errlen))
    return -1;
  m->peak_fraction_fp8 = m->peak_fraction; /* absent: FP8 GEMMs reach BF16's fraction of their own peak */
  if (cJSON_GetObjectItemCaseSensitive(kj, "peak_fraction_fp8") &&
      get_fraction(kj, "peak_fraction_fp8", &m->peak_fraction_fp8, path, where, err, errlen))
    return -1;
  return 0;
}

/* The optional split-KV decode bound of attn_fwd (format in profile.h): both keys or neither. */
static int parse_decode_bound(const cJSON *kj, bs_kernel_model *m, const char *path, const char *where, char *err,
                              size_t errlen) {
  int has_eff = cJSON_GetObjectItemCaseSensitive(kj, "decode_bw_efficiency") != NULL;
  int has_n = cJSON_GetObjectItemCaseSensitive(kj, "decode_launches") != NULL;
  if (!has_eff && !has_n) return 0;
  if (has_eff != has_n) {
    snprintf(err, errlen, "%s: %s: decode_bw_efficiency and decode_launches go together", path, where);
    return -1;
  }
  return get_fraction(kj, "decode_bw_efficiency", &m->decode_bw_efficiency, path, where, err, errlen) ||
             get_count(kj, "decode_launches", 1, 64, &m->decode_launches, path, where, err, errlen)
           ? -1
           : 0;
}

int bs_profile_parse_kernel(const cJSON *kj, const char *kname, bs_kernel_model *m, const char *path, char *err,
                            size_t errlen) {
  char where[96];
  snprintf(where, sizeof where, "%s.%s", strchr(kname, '.') ? "attention_kernels" : "kernels", kname);
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
    snprintf(err, errlen, "%s: %s.model: unknown '%s' (table, roofline, materialised, tiled)", path, where,
             model->valuestring);
    return -1;
  }
  if (get_range(kj, "launch_s", 0, LAT_MAX, "s", &m->launch_s, path, where, err, errlen)) return -1;
  if (m->kind == BS_KM_ROOFLINE || m->kind == BS_KM_MATERIALISED) {
    if (get_fraction(kj, "efficiency", &m->efficiency, path, where, err, errlen)) return -1;
  }
  if (m->kind == BS_KM_MATERIALISED) {
    if (get_range(kj, "passes", 0, PASSES_MAX, "", &m->passes, path, where, err, errlen)) return -1;
  }
  if (m->kind == BS_KM_TILED) return parse_tiled(kj, m, path, where, err, errlen);
  if (m->kind != BS_KM_TABLE) return 0;
  if (parse_decode_bound(kj, m, path, where, err, errlen)) return -1;
  const cJSON *tables = cJSON_GetObjectItemCaseSensitive(kj, "tables");
  if (!cJSON_IsArray(tables) || cJSON_GetArraySize(tables) < 1 || cJSON_GetArraySize(tables) > BS_PROF_MAX_TABLES) {
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
    if (!cJSON_IsNumber(hd) || !cJSON_IsString(mk) || !cJSON_IsArray(x) || !cJSON_IsArray(y) || !cJSON_IsString(src) ||
        !*src->valuestring) {
      snprintf(err, errlen, "%s: %s.tables[%d]: needs head_dim, mask, x, tflops and source", path, where, ti);
      return -1;
    }
    if (!(hd->valuedouble >= 1 && hd->valuedouble <= 1024) || hd->valuedouble != floor(hd->valuedouble)) {
      snprintf(err, errlen, "%s: %s.tables[%d].head_dim: must be a whole number in [1, 1024]", path, where, ti);
      return -1;
    }
    pt->head_dim = hd->valueint;
    if (!strcmp(mk->valuestring, "full")) pt->causal = 0;
    else if (!strcmp(mk->valuestring, "causal")) pt->causal = 1;
    else if (!strcmp(mk->valuestring, "decode")) pt->decode = 1;
    else {
      snprintf(err, errlen, "%s: %s.tables[%d].mask: 'full', 'causal' or 'decode'", path, where, ti);
      return -1;
    }
    int n = cJSON_GetArraySize(x);
    if (n < 1 || n > BS_PROF_MAX_POINTS || cJSON_GetArraySize(y) != n) {
      snprintf(err, errlen, "%s: %s.tables[%d]: x and tflops need the same 1..%d points", path, where, ti,
               BS_PROF_MAX_POINTS);
      return -1;
    }
    pt->n = n;
    for (int i = 0; i < n; i++) {
      const cJSON *xi = cJSON_GetArrayItem(x, i), *yi = cJSON_GetArrayItem(y, i);
      if (!cJSON_IsNumber(xi) || !cJSON_IsNumber(yi) || !(xi->valuedouble > 0) || !(yi->valuedouble > 0) ||
          !isfinite(xi->valuedouble) || !isfinite(yi->valuedouble) || (i && xi->valuedouble <= pt->x[i - 1])) {
        snprintf(err, errlen, "%s: %s.tables[%d]: point %d: x increasing and positive, tflops > 0", path, where, ti, i);
        return -1;
      }
      char key[48];
      snprintf(key, sizeof key, "tables[%d].tflops[%d]", ti, i);
      if (in_range(yi->valuedouble, FLOPS_MIN / 1e12, FLOPS_MAX / 1e12, "TFLOP/s", path, where, key, err, errlen))
        return -1;
      snprintf(key, sizeof key, "tables[%d].x[%d]", ti, i);
      if (in_range(xi->valuedouble, 1, 0x1p50, "tokens", path, where, key, err, errlen)) return -1;
      pt->x[i] = xi->valuedouble;
      pt->tflops[i] = yi->valuedouble;
    }
  }
  return 0;
}

static int parse_link(const cJSON *lj, const char *cname, bs_prof_link *l, const char *path, char *err, size_t errlen) {
  char where[64];
  snprintf(where, sizeof where, "links.%s", cname);
  if (get_range(lj, "bandwidth_Bps", BW_MIN, BW_MAX, "B/s", &l->bw_Bps, path, where, err, errlen) ||
      get_range(lj, "latency_s", 0, LAT_MAX, "s", &l->lat_s, path, where, err, errlen))
    return -1;
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(lj, "factors");
  l->nfactors = 0;
  if (f) {
    if (!cJSON_IsArray(f) || cJSON_GetArraySize(f) > BS_PROF_MAX_FACTORS) {
      snprintf(err, errlen, "%s: %s.factors: an array of at most %d pieces", path, where, BS_PROF_MAX_FACTORS);
      return -1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, f) {
      const cJSON *mb = cJSON_GetObjectItemCaseSensitive(e, "min_bytes");
      const cJSON *bw = cJSON_GetObjectItemCaseSensitive(e, "bandwidth");
      const cJSON *lt = cJSON_GetObjectItemCaseSensitive(e, "latency");
      if (!cJSON_IsNumber(mb) || !cJSON_IsNumber(bw) || !cJSON_IsNumber(lt) || !isfinite(mb->valuedouble) ||
          !isfinite(bw->valuedouble) || !isfinite(lt->valuedouble) || !(mb->valuedouble >= 0) ||
          !(bw->valuedouble > 0) || !(lt->valuedouble >= 0) ||
          (l->nfactors && mb->valuedouble <= l->factors[l->nfactors - 1].min_bytes)) {
        snprintf(err, errlen,
                 "%s: %s.factors[%d]: finite numbers, min_bytes >= 0 and increasing, "
                 "bandwidth > 0, latency >= 0",
                 path, where, l->nfactors);
        return -1;
      }
      char key[40];
      snprintf(key, sizeof key, "factors[%d].min_bytes", l->nfactors);
      if (in_range(mb->valuedouble, 0, MEM_MAX, "bytes", path, where, key, err, errlen)) return -1;
      snprintf(key, sizeof key, "factors[%d].bandwidth", l->nfactors);
      if (in_range(bw->valuedouble, FACTOR_MIN, FACTOR_MAX, "", path, where, key, err, errlen) ||
          in_range(l->bw_Bps * bw->valuedouble, BW_MIN, BW_MAX, "B/s (bandwidth_Bps * factor)", path, where, key, err,
                   errlen))
        return -1;
      snprintf(key, sizeof key, "factors[%d].latency", l->nfactors);
      if (in_range(lt->valuedouble, 0, FACTOR_MAX, "", path, where, key, err, errlen) ||
          in_range(l->lat_s * lt->valuedouble, 0, LAT_MAX, "s (latency_s * factor)", path, where, key, err, errlen))
        return -1;
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
    if (in_range(tg->valuedouble, 0, TCP_GAMMA_MAX, "bytes", path, "network", "tcp_gamma", err, errlen)) return -1;
    p->tcp_gamma = tg->valuedouble;
  }
  return 0;
}

/*
 * Duplicate keys: cJSON keeps both members of {"a": 1, "a": 2} and lookups see
 * the first, so a second value would be silently ignored. This walks the text
 * cJSON has accepted (strings, brackets and colons only) and fails on the
 * first key seen twice in one object, naming its line and JSON path.
 */
typedef struct {
  const char *s;
  size_t n;
} json_key;

typedef struct {
  int object;       /* 1: {...}, 0: [...] */
  size_t first_key; /* keys[first_key..] belong to this object */
  json_key cur;     /* object: the member being read; array: none */
  int index;        /* array: the element being read */
} json_frame;

/* The path of the members open at depth < d ("kernels.attn_fwd.tables[0]"). */
static void json_path(const json_frame *f, int d, char *out, size_t outlen) {
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < d && len < outlen; i++) {
    if (f[i].object && f[i].cur.s)
      len += (size_t)snprintf(out + len, outlen - len, "%s%.*s", len ? "." : "", (int)f[i].cur.n, f[i].cur.s);
    else if (!f[i].object) len += (size_t)snprintf(out + len, outlen - len, "[%d]", f[i].index);
  }
}

static int check_duplicate_keys(const char *text, const char *path, char *err, size_t errlen) {
  json_frame *st = NULL;
  json_key *keys = NULL;
  int depth = 0, cap = 0, rc = 0;
  size_t nkeys = 0, kcap = 0;
  for (const char *c = text; *c && !rc; c++) {
    if (*c == '{' || *c == '[') {
      if (depth == cap) {
        json_frame *ns = realloc(st, sizeof *st * (size_t)(cap = cap ? 2 * cap : 16));
        if (!ns) goto oom;
        st = ns;
      }
      st[depth++] = (json_frame){*c == '{', nkeys, {NULL, 0}, 0};
    } else if ((*c == '}' || *c == ']') && depth > 0) {
      nkeys = st[--depth].first_key;
    } else if (*c == ',' && depth > 0 && !st[depth - 1].object) {
      st[depth - 1].index++;
    } else if (*c == '"') {
      const char *s = ++c;
      while (*c && *c != '"') c += (*c == '\\' && c[1]) ? 2 : 1;
      if (!*c) break;
      json_key k = {s, (size_t)(c - s)};
      const char *after = c + 1;
      while (*after == ' ' || *after == '\t' || *after == '\n' || *after == '\r') after++;
      if (*after != ':' || depth == 0 || !st[depth - 1].object) continue;
      json_frame *f = &st[depth - 1];
      for (size_t i = f->first_key; i < nkeys; i++)
        if (keys[i].n == k.n && !memcmp(keys[i].s, k.s, k.n)) {
          char where[256];
          json_path(st, depth - 1, where, sizeof where);
          snprintf(err, errlen, "%s:%d: %s%s%.*s: given twice (a key may appear once per object)", path,
                   line_of(text, s), where, where[0] ? "." : "", (int)k.n, k.s);
          rc = -1;
          break;
        }
      if (nkeys == kcap) {
        json_key *nk = realloc(keys, sizeof *keys * (kcap = kcap ? 2 * kcap : 64));
        if (!nk) goto oom;
        keys = nk;
      }
      keys[nkeys++] = k;
      f->cur = k;
    }
  }
  free(st);
  free(keys);
  return rc;
oom:
  free(st);
  free(keys);
  snprintf(err, errlen, "%s: out of memory", path);
  return -1;
}

int bs_profile_load(const char *name_or_path, bs_profile *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  bs_profile_path(name_or_path, p->path, sizeof p->path);
  const char *path = p->path;
  size_t nl = strlen(name_or_path);
  if ((nl <= 5 || strcmp(name_or_path + nl - 5, ".json")) && access(path, F_OK)) {
    snprintf(err, errlen,
             "unknown profile '%s' (no %s; known: the names in calib/profiles, or a "
             "FILE.json)",
             name_or_path, path);
    return -1;
  }
  char *text = read_profile(path, err, errlen);
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
  int dup = check_duplicate_keys(text, path, err, errlen);
  free(text);
  if (dup) goto out;
  if (!cJSON_IsObject(root)) {
    snprintf(err, errlen, "%s: not a JSON object", path);
    goto out;
  }
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
  if (!cJSON_IsNumber(fmt) || fmt->valuedouble != 1) { /* valueint would take 1.5 for 1 */
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
  if (!(p->memory_bytes < MEM_MAX)) { /* results hold it as an int64 byte count */
    snprintf(err, errlen, "%s: device.memory_bytes: %g is more than 2^62 bytes", path, p->memory_bytes);
    goto out;
  }
  if (in_range(p->memory_bytes, MEM_MIN, MEM_MAX, "bytes", path, "device", "memory_bytes", err, errlen) ||
      in_range(p->peak_flops, FLOPS_MIN, FLOPS_MAX, "FLOP/s", path, "device", "peak_flops", err, errlen) ||
      in_range(p->mem_bw_Bps, BW_MIN, BW_MAX, "B/s", path, "device", "mem_bw_Bps", err, errlen))
    goto out;
  if (parse_memory_terms(dev, p, path, err, errlen)) goto out;
  if (cJSON_GetObjectItemCaseSensitive(dev, "peak_flops_fp8") &&
      (get_val(dev, "peak_flops_fp8", &p->peak_flops_fp8, 0, path, "device", err, errlen) ||
       in_range(p->peak_flops_fp8, FLOPS_MIN, FLOPS_MAX, "FLOP/s", path, "device", "peak_flops_fp8", err, errlen)))
    goto out;
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
    if (bs_profile_parse_kernel(kj, kj->string, &p->kernel[k], path, err, errlen)) goto out;
  }
  const cJSON *ak = cJSON_GetObjectItemCaseSensitive(root, "attention_kernels");
  if (ak && bs_profile_parse_attention_kernels(ak, p, path, err, errlen)) goto out;
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
  const cJSON *colls = cJSON_GetObjectItemCaseSensitive(root, "collectives");
  if (colls && parse_collectives(colls, p, path, err, errlen)) goto out;
  p->p2p_efficiency[0] = p->p2p_efficiency[1] = 1;
  const cJSON *p2p = cJSON_GetObjectItemCaseSensitive(root, "p2p");
  if (p2p && parse_p2p(p2p, p, path, err, errlen)) goto out;
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
    if (in_range(p->host_speed, FLOPS_MIN, FLOPS_MAX, "FLOP/s", path, "host", "speed_flops", err, errlen)) goto out;
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
  if (p->peak_flops_fp8 > 0) cJSON_AddItemToObject(dev, "peak_flops_fp8", val(p->peak_flops_fp8, source));
  if (p->reserved_bytes) cJSON_AddItemToObject(dev, "reserved_bytes", val((double)p->reserved_bytes, source));
  if (p->alloc_round_bytes) cJSON_AddItemToObject(dev, "alloc_round_bytes", val((double)p->alloc_round_bytes, source));
  if (p->alloc_small_bytes) cJSON_AddItemToObject(dev, "alloc_small_bytes", val((double)p->alloc_small_bytes, source));
  if (p->alloc_small_round_bytes)
    cJSON_AddItemToObject(dev, "alloc_small_round_bytes", val((double)p->alloc_small_round_bytes, source));
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
      if (m->min_tile) cJSON_AddItemToObject(kj, "min_tile", val(m->min_tile, source));
      if (m->peak_fraction_fp8 > 0 && m->peak_fraction_fp8 != m->peak_fraction)
        cJSON_AddItemToObject(kj, "peak_fraction_fp8", val(m->peak_fraction_fp8, source));
    }
    if (m->kind != BS_KM_TABLE) continue;
    if (m->decode_launches) {
      cJSON_AddItemToObject(kj, "decode_bw_efficiency", val(m->decode_bw_efficiency, source));
      cJSON_AddItemToObject(kj, "decode_launches", val(m->decode_launches, source));
    }
    cJSON *ts = cJSON_AddArrayToObject(kj, "tables");
    for (int t = 0; t < m->ntables; t++) {
      const bs_prof_table *pt = &m->tables[t];
      cJSON *tj = cJSON_CreateObject();
      cJSON_AddNumberToObject(tj, "head_dim", pt->head_dim);
      cJSON_AddStringToObject(tj, "mask", pt->decode ? "decode" : pt->causal ? "causal" : "full");
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
  if (p->coll_base_s > 0 || p->allreduce_lib != BS_ALLREDUCE_NCCL) {
    cJSON *cj = cJSON_AddObjectToObject(root, "collectives");
    if (p->coll_base_s > 0) cJSON_AddItemToObject(cj, "base_s", val(p->coll_base_s, source));
    if (p->allreduce_lib != BS_ALLREDUCE_NCCL) {
      cJSON *a = cJSON_AddObjectToObject(cj, "allreduce");
      cJSON_AddStringToObject(a, "value", bs_allreduce_lib_name(p->allreduce_lib));
      cJSON_AddStringToObject(a, "source", source);
    }
  }
  cJSON *pj = NULL;
  for (int w = 0; w < 2; w++) {
    int has_base = p->p2p_base_s[w] > 0, has_eff = p->p2p_efficiency[w] > 0 && p->p2p_efficiency[w] < 1;
    if (!has_base && !has_eff) continue;
    if (!pj) pj = cJSON_AddObjectToObject(root, "p2p");
    cJSON *rj = cJSON_AddObjectToObject(pj, p2p_route_name[w]);
    if (has_base) cJSON_AddItemToObject(rj, "base_s", val(p->p2p_base_s[w], source));
    if (has_eff) cJSON_AddItemToObject(rj, "efficiency", val(p->p2p_efficiency[w], source));
  }
  if (p->host_speed > 0) {
    cJSON *h = cJSON_AddObjectToObject(root, "host");
    cJSON_AddItemToObject(h, "speed_flops", val(p->host_speed, source));
    cJSON_AddItemToObject(h, "cores", val(p->host_cores, source));
  }
  return root;
}

int bs_profile_save(const bs_profile *p, const char *path, const char *source, char *err, size_t errlen) {
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

static const bs_prof_table *pick_table(const bs_kernel_model *m, int d, int causal, int decode) {
  const bs_prof_table *best = NULL;
  int bestdist = 1 << 30;
  for (int pass = decode ? -1 : 0; pass < 2 && !best; pass++)
    for (int i = 0; i < m->ntables; i++) {
      const bs_prof_table *t = &m->tables[i];
      if (pass == -1 ? !t->decode : t->decode) continue; /* decode tables first for decode, never for blocks */
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
  double rows = (double)a->B * a->Zq * a->Nq, d = attn_dv(a); /* o and dout: v's columns */
  switch (c->kernel) {
  case BS_K_ATTN_MERGE: /* read o2, lse2, o, lse; write o, lse (fp32) */ return rows * (3 * d + 3) * 4;
  case BS_K_ATTN_DELTA: /* read o (fp32) and dout; write delta (fp32) */ return rows * (d * 4 + d * eb + 4);
  case BS_K_GEMM: return ((double)c->m * c->k + (double)c->k * c->n + (double)c->m * c->n) * eb;
  case BS_K_ELEMWISE: /* elems elements read and written */ return 2.0 * (double)c->elems * eb;
  case BS_K_COPY: /* elems bytes read and written */ return 2.0 * (double)c->elems;
  default: return 0;
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
  double tmin = km->tile_m < km->tile_n ? km->tile_m : km->tile_n, small = m < n ? m : n, big = m < n ? n : m;
  if (km->min_tile > 0 && small < tmin) { /* few rows (decode): the MMA's narrow tile along them */
    double ts = ceil(small / km->min_tile) * km->min_tile, tb = km->tile_m + km->tile_n - tmin;
    double tiles = batch * ceil(big / tb), waves = ceil(tiles / km->sms);
    double q = m * n * batch / (waves * km->sms * ts * tb);
    if (q > best) best = q;
  }
  return best;
}

/* The tiled GEMM model (format in profile.h). */
static double tiled_time(const bs_profile *p, const bs_kernel_model *km, const bs_compute *c, int eb, double flops) {
  double m = c->m > 0 ? (double)c->m : 1, n = c->n > 0 ? (double)c->n : 1, k = c->k > 0 ? (double)c->k : 1;
  double peak = p->peak_flops * km->peak_fraction;
  if (c->fp8) { /* FP8 operands: one byte each, the FP8 peak at its own fraction (the output stays in the
                 * storage type) */
    peak = p->peak_flops_fp8 * (km->peak_fraction_fp8 > 0 ? km->peak_fraction_fp8 : km->peak_fraction);
    eb = 1;
  }
  double batch = gemm_batch(c, flops);
  double bytes = batch * (m * k + k * n + m * n) * eb;
  double q = tiled_quant(km, m, n, batch) * k / (k + km->k_overhead);
  double tb = bytes / (p->mem_bw_Bps * km->bw_efficiency);
  double tf = flops / (peak * q);
  return km->launch_s + (tb > tf ? tb : tf);
}

/* Query rows of one tile of FlashAttention-2's split-KV forward (flash_fwd_launch_template.h,
 * run_mha_fwd_splitkv_dispatch: kBlockM = 64 for every head dimension): a call of at most this many
 * rows is one tile per head, so it splits the keys and combines the splits in a second kernel. */
#define SPLITKV_MAX_ROWS 64

/* FLOPs of an attention block with every key visible: 2 (d + dv) per pair forward (QK^T over d, PV
 * over v's dv columns), 2 (3 d + 2 dv) backward (4 d and 10 d when dv = d). */
static double attn_full_flops(const bs_compute *c) {
  const attn_params *a = &c->a;
  double pairs = (double)a->B * a->Zq * (double)a->Nq * (double)a->Nk, d = a->d, dv = attn_dv(a);
  return (c->kernel == BS_K_ATTN_BWD || c->kernel == BS_K_ATTN_BWD_UNFUSED) ? 2.0 * (3.0 * d + 2.0 * dv) * pairs
                                                                            : 2.0 * (d + dv) * pairs;
}

double bs_profile_kernel_time(const bs_profile *p, const bs_compute *c, bs_dtype dt, char *err, size_t errlen) {
  if (c->kernel < 0 || c->kernel >= BS_K_COUNT) {
    snprintf(err, errlen, "COMPUTE with an unknown kernel %d", (int)c->kernel);
    return -1;
  }
  const bs_kernel_model *m = &p->kernel[c->kernel];
  int eb = bs_dtype_bytes(dt);
  if (c->fp8 && !(p->peak_flops_fp8 > 0 && m->kind == BS_KM_TILED)) {
    snprintf(err, errlen,
             "model.fp8: profile %s has no FP8 GEMMs (device.peak_flops_fp8 and a tiled gemm model are needed)",
             p->name);
    return -1;
  }
  double flops = c->flops > 0 ? c->flops : 0;
  switch (m->kind) {
  case BS_KM_TABLE: {
    if (flops == 0) return m->launch_s;
    double full = attn_full_flops(c);
    int partial = full > 0 && flops < full * (1 - 1e-9);
    const bs_prof_table *t = pick_table(m, c->a.d, partial, c->a.Nq == 1);
    double x = sqrt((double)(c->a.Nq > 0 ? c->a.Nq : 1) * (double)(c->a.Nk > 0 ? c->a.Nk : 1));
    double tt = m->launch_s + flops / (table_rate(t, x) * 1e12);
    if (!(m->decode_bw_efficiency > 0)) return tt;
    const attn_params *a = &c->a; /* a call reads K and V once (and Q, O): the memory bound */
    double bytes = (double)a->B * (a->Zkv * (double)a->Nk + a->Zq * (double)a->Nq) * (a->d + attn_dv(a)) * eb;
    int launches = a->Nq <= SPLITKV_MAX_ROWS ? m->decode_launches : 1;
    double tm = launches * m->launch_s + bytes / (p->mem_bw_Bps * m->decode_bw_efficiency);
    return tm > tt ? tm : tt;
  }
  case BS_KM_ROOFLINE: {
    double tb = kernel_bytes(c, eb) / (p->mem_bw_Bps * m->efficiency);
    double tf = flops / (p->peak_flops * m->efficiency);
    return m->launch_s + (tb > tf ? tb : tf);
  }
  case BS_KM_TILED: return tiled_time(p, m, c, eb, flops);
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

int64_t bs_profile_alloc_bytes(const bs_profile *p, int64_t bytes) {
  if (bytes <= 0) return bytes;
  int64_t g = bytes <= p->alloc_small_bytes ? p->alloc_small_round_bytes : p->alloc_round_bytes;
  if (g <= 1) return bytes;
  return (bytes + g - 1) / g * g; /* bytes < 2^62 and g <= 2^30: no overflow */
}

int64_t bs_profile_capacity_bytes(const bs_profile *p) { return (int64_t)p->memory_bytes - p->reserved_bytes; }

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
