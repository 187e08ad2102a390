/*
 * result_fields.c — the rows of the result contract (see result_fields.h): every setting and
 * figure a point's result carries, in the order of the result JSON, with its CSV column and
 * position and its column in the stdout table. The CSV positions are part of the contract: the
 * scripts under experiments/ read columns by position (error, the 35th, is always quoted and
 * experiments/lib/rows.awk reads it as one quoted field), so a column keeps its position and a
 * new one is appended after the last. A point without figures (refused or failed) keeps its
 * settings and leaves every figure row empty.
 */
#include "result_fields.h"
#include "topologies/topo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flops.h"
#include "profile/profile.h"

/* Names derived from the result. */
static const char *method(const bs_result *r) { return bs_method_name(r->cfg.par.method); }
static const char *phase(const bs_result *r) { return bs_phase_name(r->cfg.work.phase); }
static const char *scope(const bs_result *r) { return bs_scope_name(r->cfg.work.scope); }
static const char *layout(const bs_result *r) { return bs_layout_name(r->cfg.par.layout); }
static const char *dtype(const bs_result *r) { return bs_dtype_name(r->cfg.model.dtype); }
static const char *fp8(const bs_result *r) { return bs_fp8_name(r->cfg.model.fp8); }
static const char *attention_kernel(const bs_result *r) { return bs_attn_kernel_name(r->cfg.model.attention_kernel); }
static const char *attention(const bs_result *r) { return bs_attention_name(r->cfg.model.attention); }
static const char *coll_algo(const bs_result *r) { return bs_coll_algo_name(r->cfg.cluster.coll_algo); }
static const char *bwd_comm(const bs_result *r) { return r->cfg.par.bwd_opt ? "optimized" : "plain"; }
static const char *tp_variant(const bs_result *r) { return r->cfg.par.tp_variant == 3 ? "v3" : "v1"; }
/* cluster.* what-ifs the point applied, "none" for the uniform cluster (no commas: a CSV cell). */
static const char *whatif(const bs_result *r) {
  static _Thread_local char b[160];
  const bs_cluster *k = &r->cfg.cluster;
  size_t n = 0;
  b[0] = '\0';
#define WI(...) n += (size_t)snprintf(b + n, n < sizeof b ? sizeof b - n : 0, __VA_ARGS__)
  if (k->straggler_factor > 0) WI("%sstraggler=%d:%g", n ? " " : "", k->straggler_rank, k->straggler_factor);
  if (k->degrade_factor > 0 && k->degrade_one_nic)
    WI("%sdegrade=%s@%d/%d:%g", n ? " " : "", bs_link_class_name((bs_link_class)k->degrade_class), k->degrade_node,
       k->degrade_nic, k->degrade_factor);
  else if (k->degrade_factor > 0 && k->degrade_one_node)
    WI("%sdegrade=%s@%d:%g", n ? " " : "", bs_link_class_name((bs_link_class)k->degrade_class), k->degrade_node,
       k->degrade_factor);
  else if (k->degrade_factor > 0)
    WI("%sdegrade=%s:%g", n ? " " : "", bs_link_class_name((bs_link_class)k->degrade_class), k->degrade_factor);
  if (k->failed_nics > 0 && k->failed_node < 0) WI("%sfailed_nics=all:%d", n ? " " : "", k->failed_nics);
  else if (k->failed_nics > 0) WI("%sfailed_nics=%d:%d", n ? " " : "", k->failed_node, k->failed_nics);
  if (k->nic_gbps > 0) WI("%snic_gbps=%g", n ? " " : "", k->nic_gbps);
  if (k->oversub > 0) WI("%soversub=%g", n ? " " : "", k->oversub);
  if (k->nodes_per_leaf > 0) WI("%snodes_per_leaf=%d", n ? " " : "", k->nodes_per_leaf);
#undef WI
  return n ? b : "none";
}
static const char *double_ring(const bs_result *r) {
  bs_tristate d = r->cfg.par.double_ring;
  return d == BS_AUTO ? "auto" : d ? "on" : "off";
}

/* When the JSON carries a row. */
static const char *kv_cache(const bs_result *r) { return bs_kv_cache_name(r->cfg.work.kv_cache); }
static const char *cross_entropy(const bs_result *r) { return bs_cross_entropy_name(r->cfg.work.cross_entropy); }
static const char *cp_pass(const bs_result *r) { return bs_cp_pass_name(r->cfg.par.cp_pass); }
static const char *recompute(const bs_result *r) { return bs_recompute_name(r->cfg.work.recompute); }
static int has_plan(const bs_result *r) { return r->decision.valid; }
/* The context-parallel degree follows the GPU count unless the point composes (tp, dp or pp). */
static int composed(const bs_result *r) { return r->decision.valid && r->decision.cp != r->cfg.par.gpus; }
static int has_error(const bs_result *r) { return r->error[0] != '\0'; }
/* Multi-head latent attention, or a v head dimension of its own: the fields that say so. */
static int has_v_dims(const bs_result *r) {
  return r->cfg.model.attention != BS_ATTENTION_MHA || r->cfg.model.v_head_dim > 0;
}
/* With the rank grid: "" for a point refused before a plan was made (as its order). */
static const char *pp_schedule(const bs_result *r) {
  return has_plan(r) ? bs_pp_schedule_name(r->cfg.par.pp_schedule) : "";
}
static int has_rss(const bs_result *r) { return r->mem.rss_bytes != 0; }
/* Packed documents (workload.documents): the value given, and the imbalance they make. */
static int has_docs(const bs_result *r) { return r->cfg.work.docs > 0; }
/* workload.framework other than megatron (whose defaults are the plans' own): the framework and the
 * keys its defaults set, in JSON and as table columns */
static int has_framework(const bs_result *r) { return r->cfg.work.framework != BS_FW_MEGATRON; }
static const char *framework(const bs_result *r) { return bs_framework_name(r->cfg.work.framework); }
static const char *framework_defaults(const bs_result *r) {
  /* every subset of BS_FW_KEY_ZERO, _KERNEL, _METHOD, _LAYOUT, indexed by the bits */
  static const char *const names[16] = {"none",
                                        "zero",
                                        "attention_kernel",
                                        "zero+attention_kernel",
                                        "method",
                                        "zero+method",
                                        "attention_kernel+method",
                                        "zero+attention_kernel+method",
                                        "layout",
                                        "zero+layout",
                                        "attention_kernel+layout",
                                        "zero+attention_kernel+layout",
                                        "method+layout",
                                        "zero+method+layout",
                                        "attention_kernel+method+layout",
                                        "zero+attention_kernel+method+layout"};
  return names[r->cfg.work.framework_applied & 15u];
}
static int has_docs_plan(const bs_result *r) { return has_docs(r) && has_plan(r); }
static int has_moe(const bs_result *r) { return r->cfg.model.experts > 0; }
static void cell_ratio(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  snprintf(dst, n, "%.3fx", v.d);
}
static const char *placement(const bs_result *r) { return bs_placement_name(r->cfg.par.ulysses_placement); }

int bs_result_has_figures(const bs_result *r) { return r->error[0] == '\0'; }
const char *bs_result_status(const bs_result *r) {
  return bs_result_has_figures(r) ? "ok" : r->refused ? "refused" : "failed";
}
static const char *status(const bs_result *r) { return bs_result_status(r); }

/* The dense peak FLOP/s of the profile a point ran with (the profile's device.peak_flops, or with
 * fp8 its device.peak_flops_fp8), NaN when it cannot be read or the profile has none; the last few
 * profiles are remembered, so a sweep reads each about once. */
static double profile_peak_of(const bs_result *r, int fp8) {
  enum { SLOTS = 8 };
  static char name[SLOTS][sizeof r->cfg.cluster.profile];
  static double peak[SLOTS][2];
  static int used, next;
  if (!r->cfg.cluster.profile[0]) return NAN;
  for (int i = 0; i < used; i++)
    if (!strcmp(name[i], r->cfg.cluster.profile)) return peak[i][fp8];
  bs_profile *p = calloc(1, sizeof *p);
  char err[512];
  int ok = p && !bs_profile_load(r->cfg.cluster.profile, p, err, sizeof err);
  snprintf(name[next], sizeof name[next], "%s", r->cfg.cluster.profile);
  peak[next][0] = ok ? p->peak_flops : NAN;
  peak[next][1] = ok && p->peak_flops_fp8 > 0 ? p->peak_flops_fp8 : NAN;
  free(p);
  double v = peak[next][fp8];
  next = (next + 1) % SLOTS;
  if (used < SLOTS) used++;
  return v;
}
static double profile_peak(const bs_result *r) { return profile_peak_of(r, 0); }

/* Throughput (src/flops.c states the FLOP convention); NaN without a step time. */
static int gpus_of(const bs_result *r) { return r->cfg.par.gpus > 0 ? r->cfg.par.gpus : 1; }
static double model_flops(const bs_result *r) { return bs_step_model_flops(&r->cfg); }
/* Padding (plans/pad.c): the tokens appended to each sequence, and the share of the step's model
 * FLOPs they take (the step runs them; model_flops, tokens/s and MFU count the user's tokens). */
static double padded_tokens(const bs_result *r) { return (double)bs_seq_pad(&r->cfg); }
static double pad_flops_share(const bs_result *r) {
  bs_config c = r->cfg;
  int64_t pad = bs_seq_pad(&c);
  if (pad <= 0) return 0;
  double real = bs_step_model_flops(&c);
  c.work.seq_len += pad;
  double all = bs_step_model_flops(&c);
  return all > 0 ? 1 - real / all : 0;
}
static int some_pad(const bs_result *r, int n) {
  for (int i = 0; i < n; i++)
    if (bs_seq_pad(&r[i].cfg) > 0) return 1;
  return 0;
}
static double tokens_per_s(const bs_result *r) {
  return r->time.step > 0 ? bs_step_tokens(&r->cfg) / r->time.step : NAN;
}
static double tokens_per_s_per_gpu(const bs_result *r) { return tokens_per_s(r) / gpus_of(r); }
static double model_tflops_per_gpu(const bs_result *r) {
  return r->time.step > 0 ? model_flops(r) / r->time.step / gpus_of(r) / 1e12 : NAN;
}
static double peak_tflops_per_gpu(const bs_result *r) { return profile_peak(r) / 1e12; }
static double mfu(const bs_result *r) { return model_tflops_per_gpu(r) / peak_tflops_per_gpu(r); }
double bs_result_mfu(const bs_result *r) { return mfu(r); }

/* MFU by the precision the GEMMs ran in: the FP8 peak (the profile's device.peak_flops_fp8) when
 * model.fp8 runs any GEMM in FP8, as FP8 training runs report it; else the dense 16-bit peak that
 * throughput.mfu is against. */
static int runs_fp8(const bs_result *r) { return r->cfg.model.fp8 != BS_FP8_OFF; }
static const char *gemm_precision(const bs_result *r) { return runs_fp8(r) ? "fp8" : "bf16"; }
static double peak_tflops_gemm(const bs_result *r) { return profile_peak_of(r, runs_fp8(r)) / 1e12; }
static double mfu_gemm_peak(const bs_result *r) { return model_tflops_per_gpu(r) / peak_tflops_gemm(r); }
/* The table labels both MFU columns when a point of the sweep runs FP8 GEMMs. */
static int some_fp8(const bs_result *r, int n) {
  for (int i = 0; i < n; i++)
    if (runs_fp8(&r[i])) return 1;
  return 0;
}
static const char *mfu_head(const bs_result *r, int n) { return some_fp8(r, n) ? "MFU bf16" : "MFU"; }
static void cell_pct(const bs_result *r, bs_value v, char *dst, size_t n);
static void cell_pct_fp8(const bs_result *r, bs_value v, char *dst, size_t n) {
  if (!runs_fp8(r)) snprintf(dst, n, "-");
  else cell_pct(r, v, dst, n);
}
/* Capacity less the peak (negative: out of memory); NaN when the capacity is not known. */
static int is_sim(const bs_result *r) { return !strcmp(r->mode ? r->mode : "", "sim"); }
/* sim: the caching allocator's reserve beyond the peak (workload.fragmentation; real runs measure) */
static double reserve_bytes(const bs_result *r) {
  return is_sim(r) ? (double)bs_reserve_bytes(&r->cfg, r->mem.peak_bytes_max) : 0;
}
static double reserved_bytes(const bs_result *r) { return (double)r->mem.peak_bytes_max + reserve_bytes(r); }
static double headroom_bytes(const bs_result *r) {
  return r->mem.capacity_bytes > 0 ? (double)r->mem.capacity_bytes - reserved_bytes(r) : NAN;
}
static int has_ranks(const bs_result *r) { return r->ranks && r->nranks > 0; }

/* Table cells. Figures keep their unit at any magnitude: beyond the fixed-point range they switch
 * to exponent form ("1.6e+301 s") rather than growing past the buffer and losing the unit. */
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

static void cell_text(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  snprintf(dst, n, "%s", v.s);
}
/* A real as %g (capacity_factor, routing_skew), "-" for 0 (none, uniform). */
static void cell_real(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  if (v.d == 0) snprintf(dst, n, "-");
  else snprintf(dst, n, "%g", v.d);
}
static void cell_int(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  snprintf(dst, n, "%lld", (long long)v.i);
}
/* Tokens as 64K or 1M when they are whole multiples. */
static void cell_tokens(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  if (v.i % (1024 * 1024) == 0) snprintf(dst, n, "%lldM", (long long)(v.i >> 20));
  else if (v.i % 1024 == 0) snprintf(dst, n, "%lldK", (long long)(v.i >> 10));
  else snprintf(dst, n, "%lld", (long long)v.i);
}
static void cell_pad(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  if (v.d > 0) snprintf(dst, n, "%.0f", v.d);
  else snprintf(dst, n, "-");
}
static void cell_time(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  human_time(dst, n, v.d);
}
/*
 * The table's fwd, bwd, exposed and peers are the critical rank's: the rank that finished last (the
 * lowest of a tie), the one whose step the table shows, as explain names it (sim/explain.c), else
 * found the same way in the per-rank figures. The JSON and CSV keep time_s.fwd, .bwd, .comm_exposed
 * and .wait_for_peers as the most of any rank. No per-rank figures: the row's own value.
 */
static const bs_rank_result *critical_of(const bs_result *r) {
  if (!r->ranks || r->nranks <= 0) return NULL;
  int c = r->explain.critical_rank;
  if (c >= 0 && c < r->nranks && r->ranks[c].rank == c) return &r->ranks[c];
  c = 0;
  for (int i = 1; i < r->nranks; i++)
    if (r->ranks[i].step > r->ranks[c].step) c = i;
  return &r->ranks[c];
}
static void cell_critical_fwd(const bs_result *r, bs_value v, char *dst, size_t n) {
  const bs_rank_result *c = critical_of(r);
  human_time(dst, n, c ? c->fwd : v.d);
}
static void cell_critical_bwd(const bs_result *r, bs_value v, char *dst, size_t n) {
  const bs_rank_result *c = critical_of(r);
  human_time(dst, n, c ? c->bwd : v.d);
}
static void cell_pct_of_step(const bs_result *r, bs_value v, char *dst, size_t n);
static void cell_critical_exposed(const bs_result *r, bs_value v, char *dst, size_t n) {
  const bs_rank_result *c = critical_of(r);
  if (c) v.d = c->comm_exposed;
  cell_pct_of_step(r, v, dst, n);
}
static void cell_critical_peers(const bs_result *r, bs_value v, char *dst, size_t n) {
  const bs_rank_result *c = critical_of(r);
  if (c) v.d = c->wait_for_peers;
  cell_pct_of_step(r, v, dst, n);
}
/* A time as a share of the step. */
static void cell_pct_of_step(const bs_result *r, bs_value v, char *dst, size_t n) {
  snprintf(dst, n, "%.1f%%", r->time.step > 0 ? 100.0 * v.d / r->time.step : 0);
}
/* Bytes per GPU of the point. */
static void cell_bytes_per_gpu(const bs_result *r, bs_value v, char *dst, size_t n) {
  int g = r->cfg.par.gpus > 0 ? r->cfg.par.gpus : 1;
  human_bytes(dst, n, (double)v.i / g);
}
static void cell_gib(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  double gib = (double)v.i / (1024.0 * 1024 * 1024);
  snprintf(dst, n, gib < 1e6 ? "%.2f" : "%.3g", gib);
}
static void cell_oom(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  snprintf(dst, n, "%s", v.i ? "OOM" : "");
}
static void cell_onoff(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  snprintf(dst, n, "%s", v.i ? "on" : "off");
}
/* A CALC figure: "-" when not defined. */
static void cell_real_gib(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  double gib = v.d / (1024.0 * 1024 * 1024);
  if (isnan(v.d)) snprintf(dst, n, "-");
  else snprintf(dst, n, fabs(gib) < 1e6 ? "%.2f" : "%.3g", gib);
}
static void cell_rate(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  if (isnan(v.d)) snprintf(dst, n, "-");
  else if (v.d >= 1e6 || v.d < 100) snprintf(dst, n, "%.3g", v.d);
  else snprintf(dst, n, "%.0f", v.d);
}
static void cell_pct(const bs_result *r, bs_value v, char *dst, size_t n) {
  (void)r;
  if (isnan(v.d)) snprintf(dst, n, "-");
  else snprintf(dst, n, "%.1f%%", 100.0 * v.d);
}

/* A row's JSON path, unit, kind and member; a NAME row's JSON path, unit and name(). */
#define AT(p, u, k, member) .path = p, .unit = u, .kind = k, .off = offsetof(bs_result, member)
#define NAMED(p, fn) .path = p, .unit = "", .kind = BS_FIELD_NAME, .name = fn
#define CSV(c, column) .col = c, .csv = column
#define TABLE(h, w, fn) .head = h, .width = w, .cell = fn
#define CALC(p, u, fn) .path = p, .unit = u, .kind = BS_FIELD_CALC, .calc = fn
/* A setting's table column, shown when it varies over the sweep. */
#define VARY(h, fn) .head = h, .width = -1, .cell = fn, .vary = 1

/* A part of explain: a sim figure in seconds, at nine digits in the CSV. */
#define XPART(p, member) .figure = 1, AT(p, "s", BS_FIELD_REAL, explain.member), .present = is_sim, .digits = 9

static const bs_field result_rows[] = {
  /* the resolved request */
  {NAMED("method", method), CSV(1, "method"), TABLE("method", -12, cell_text), .key = 1},
  {AT("gpus", "GPUs", BS_FIELD_INT, cfg.par.gpus), CSV(2, "gpus"), TABLE("gpus", 6, cell_int), .key = 1},
  {AT("seq_len", "tokens", BS_FIELD_I64, cfg.work.seq_len), CSV(3, "seq_len"), TABLE("seq", 9, cell_tokens), .key = 1},
  {AT("batch", "sequences", BS_FIELD_I64, cfg.work.batch), CSV(4, "batch"), VARY("batch", cell_int)},
  {NAMED("phase", phase), CSV(5, "phase"), VARY("phase", cell_text)},
  {NAMED("scope", scope), CSV(6, "scope"), VARY("scope", cell_text)},
  {AT("causal", "", BS_FIELD_BOOL, cfg.work.causal), CSV(7, "causal"), VARY("causal", cell_onoff)},
  {AT("window", "tokens", BS_FIELD_I64, cfg.work.window), CSV(42, "window"), VARY("window", cell_int)},
  {NAMED("recompute", recompute), CSV(43, "recompute"), VARY("recompute", cell_text)},
  {AT("documents", "", BS_FIELD_CHARS, cfg.work.documents), .present = has_docs, VARY("documents", cell_text)},
  {AT("documents_count", "documents", BS_FIELD_INT, cfg.work.docs), .present = has_docs},
  {NAMED("layout", layout), CSV(8, "layout"), VARY("layout", cell_text)},
  {NAMED("double_ring", double_ring), CSV(9, "double_ring"), VARY("double_ring", cell_text)},
  {AT("lao", "", BS_FIELD_BOOL, cfg.par.lao), CSV(10, "lao"), VARY("lao", cell_onoff)},
  {NAMED("bwd_comm", bwd_comm), CSV(11, "bwd_comm"), VARY("bwd_comm", cell_text)},
  {AT("ulysses_degree", "GPUs", BS_FIELD_INT, cfg.par.ulysses_degree), CSV(12, "ulysses_degree"),
   VARY("ulysses_degree", cell_int)},
  {NAMED("ulysses_placement", placement), CSV(48, "ulysses_placement"), VARY("placement", cell_text)},
  {NAMED("tp_variant", tp_variant), CSV(13, "tp_variant"), VARY("tpv", cell_text)},
  {AT("zero", "stage", BS_FIELD_INT, cfg.par.zero), CSV(14, "zero"), VARY("zero", cell_int)},
  {AT("decode_tokens", "tokens", BS_FIELD_I64, cfg.work.decode_tokens), CSV(44, "decode_tokens"),
   VARY("decode_tokens", cell_int)},
  {NAMED("kv_cache", kv_cache), CSV(45, "kv_cache"), VARY("kv_cache", cell_text)},
  {NAMED("cross_entropy", cross_entropy), VARY("ce", cell_text)},
  {NAMED("workload.framework", framework), .present = has_framework, TABLE("framework", -1, cell_text), .vary = 2,
   .news = has_framework},
  {NAMED("workload.framework_defaults", framework_defaults), .present = has_framework,
   TABLE("fw_defaults", -1, cell_text), .vary = 2, .news = has_framework},
  /* pass-KV or pass-Q, prefill against a KV cache (JSON and the table; no CSV column yet) */
  {NAMED("cp_pass", cp_pass), CSV(71, "cp_pass"), VARY("cp_pass", cell_text)},
  {AT("cached_tokens", "tokens", BS_FIELD_I64, cfg.work.cached_tokens), CSV(72, "cached_tokens"),
   VARY("cached", cell_int)},
  /* the KV cache's allocation: paged blocks, or a contiguous reservation (0: the tokens held) */
  {AT("kv_block", "tokens", BS_FIELD_I64, cfg.work.kv_block), VARY("kv_block", cell_int)},
  {AT("max_seq_len", "tokens", BS_FIELD_I64, cfg.work.max_seq_len), VARY("max_seq_len", cell_int)},
  /* padding to a multiple of the ranks' split (plans/pad.c): the table's column when a point pads */
  {CALC("padded_tokens", "tokens", padded_tokens), CSV(96, "padded_tokens"), .digits = 17, TABLE("pad", 6, cell_pad),
   .shown = some_pad},
  {CALC("pad_flops_share", "", pad_flops_share), CSV(97, "pad_flops_share"), .digits = 6},
  {AT("model.preset", "", BS_FIELD_CHARS, cfg.model.preset), CSV(37, "preset"), VARY("preset", cell_text)},
  {AT("model.hidden", "elements", BS_FIELD_I64, cfg.model.hidden), CSV(38, "hidden"), VARY("hidden", cell_int)},
  {AT("model.heads", "heads", BS_FIELD_I64, cfg.model.heads), CSV(16, "heads"), VARY("heads", cell_int)},
  {AT("model.kv_heads", "heads", BS_FIELD_I64, cfg.model.kv_heads), CSV(17, "kv_heads"), VARY("kv_heads", cell_int)},
  {AT("model.head_dim", "elements", BS_FIELD_I64, cfg.model.head_dim), CSV(18, "head_dim"), VARY("head_dim", cell_int)},
  /* multi-head latent attention: mha, mla or mla-latent, and v's columns (0 = head_dim) */
  {NAMED("model.attention", attention), .present = has_v_dims, VARY("attention", cell_text)},
  {AT("model.v_head_dim", "elements", BS_FIELD_I64, cfg.model.v_head_dim), .present = has_v_dims,
   VARY("v_head_dim", cell_int)},
  {AT("model.layers", "layers", BS_FIELD_I64, cfg.model.layers), CSV(39, "layers"), VARY("layers", cell_int)},
  {AT("model.ffn", "elements", BS_FIELD_I64, cfg.model.ffn), CSV(40, "ffn"), VARY("ffn", cell_int)},
  {AT("model.vocab", "tokens", BS_FIELD_I64, cfg.model.vocab), CSV(41, "vocab"), VARY("vocab", cell_int)},
  {NAMED("model.dtype", dtype), CSV(15, "dtype"), VARY("dtype", cell_text)},
  {NAMED("model.fp8", fp8), CSV(73, "fp8"), VARY("fp8", cell_text)},
  {NAMED("model.attention_kernel", attention_kernel), CSV(92, "attention_kernel"), VARY("attn", cell_text)},
  /* mixture-of-experts (JSON and the table when some point has experts) */
  {AT("model.experts", "experts", BS_FIELD_I64, cfg.model.experts), .present = has_moe, VARY("experts", cell_int)},
  {AT("model.top_k", "experts", BS_FIELD_I64, cfg.model.top_k), .present = has_moe, VARY("top_k", cell_int)},
  {AT("model.moe_ffn", "elements", BS_FIELD_I64, cfg.model.moe_ffn), .present = has_moe},
  {AT("model.shared_experts", "experts", BS_FIELD_I64, cfg.model.shared_experts), .present = has_moe},
  {AT("model.capacity_factor", "", BS_FIELD_REAL, cfg.model.capacity_factor), .present = has_moe,
   VARY("capacity", cell_real)},
  {AT("model.routing_skew", "", BS_FIELD_REAL, cfg.model.routing_skew), .present = has_moe, VARY("skew", cell_real)},
  {AT("topology", "", BS_FIELD_CHARS, cfg.cluster.topology), CSV(19, "topology"), VARY("topology", cell_text)},
  {AT("nics_per_node", "NICs", BS_FIELD_INT, cfg.cluster.nics_per_node), CSV(47, "nics_per_node"),
   VARY("nics", cell_int)},
  {AT("profile", "", BS_FIELD_CHARS, cfg.cluster.profile), CSV(20, "profile"), VARY("profile", cell_text)},
  {NAMED("coll_algo", coll_algo), CSV(46, "coll_algo"), VARY("coll_algo", cell_text)},
  {NAMED("whatif", whatif), CSV(68, "whatif"), VARY("whatif", cell_text)},
  /* what the plan decided */
  {AT("plan.double_ring", "", BS_FIELD_BOOL, decision.double_ring), .present = has_plan, CSV(49, "plan_double_ring")},
  {AT("plan.ring_inner", "GPUs", BS_FIELD_INT, decision.ring_inner), .present = has_plan, CSV(50, "plan_ring_inner")},
  {AT("plan.ring_outer", "rings", BS_FIELD_INT, decision.ring_outer), .present = has_plan, CSV(51, "plan_ring_outer")},
  {AT("plan.ulysses_degree", "GPUs", BS_FIELD_INT, decision.ulysses_degree), .present = has_plan,
   CSV(52, "plan_ulysses_degree")},
  /* the rank grid it ran on (composed parallelism; cp: the attention group's ranks) */
  {AT("parallel.tp", "GPUs", BS_FIELD_INT, decision.tp), .present = has_plan, CSV(60, "tp"), VARY("tp", cell_int)},
  {AT("parallel.cp", "GPUs", BS_FIELD_INT, decision.cp), .present = has_plan, CSV(61, "cp"), VARY("cp", cell_int),
   .news = composed},
  {AT("parallel.dp", "replicas", BS_FIELD_INT, decision.dp), .present = has_plan, CSV(62, "dp"), VARY("dp", cell_int)},
  {AT("parallel.pp", "stages", BS_FIELD_INT, decision.pp), .present = has_plan, CSV(63, "pp"), VARY("pp", cell_int)},
  {NAMED("parallel.pp_schedule", pp_schedule), .present = has_plan, CSV(69, "pp_schedule"),
   VARY("schedule", cell_text)},
  {AT("parallel.pp_chunks", "chunks", BS_FIELD_INT, decision.pp_chunks), .present = has_plan, CSV(70, "pp_chunks"),
   VARY("chunks", cell_int)},
  {AT("parallel.micro_batch", "sequences", BS_FIELD_I64, decision.micro_batch), .present = has_plan,
   CSV(64, "micro_batch"), VARY("mbs", cell_int)},
  {AT("parallel.microbatches", "microbatches", BS_FIELD_I64, decision.microbatches), .present = has_plan,
   CSV(65, "microbatches")},
  {AT("parallel.order", "", BS_FIELD_CHARS, decision.order), .present = has_plan, CSV(66, "order"),
   VARY("order", cell_text)},
  /* mixture-of-experts: the expert-parallel degree */
  {AT("parallel.ep", "GPUs", BS_FIELD_INT, cfg.par.ep), .present = has_moe, VARY("ep", cell_int)},
  /* ok, refused (the method or platform cannot run the point) or failed; a point that is not ok
   * has its reason in error and no figures (null in JSON, empty in CSV, "-" in the table) */
  {NAMED("status", status), CSV(36, "status")},
  {AT("error", "", BS_FIELD_CHARS, error), .present = has_error, CSV(35, "error"), .quote = 1},
  /* the figures */
  {.figure = 1,
   AT("time_s.step", "s", BS_FIELD_REAL, time.step),
   CSV(21, "step_s"),
   .digits = 9,
   TABLE("step", 11, cell_time)},
  /* packed documents: the largest rank's attention work (visible pairs) over the mean; its
   * column is shown when some point packs documents */
  {AT("attn_imbalance", "", BS_FIELD_REAL, decision.attn_imbalance), .present = has_docs_plan, .digits = 6,
   TABLE("imbal", 7, cell_ratio), .vary = 2, .news = has_docs},
  {.figure = 1,
   AT("time_s.fwd", "s", BS_FIELD_REAL, time.fwd),
   CSV(22, "fwd_s"),
   .digits = 9,
   TABLE("fwd", 11, cell_critical_fwd)},
  {.figure = 1,
   AT("time_s.bwd", "s", BS_FIELD_REAL, time.bwd),
   CSV(23, "bwd_s"),
   .digits = 9,
   TABLE("bwd", 11, cell_critical_bwd)},
  {.figure = 1, AT("time_s.compute", "s", BS_FIELD_REAL, time.compute), CSV(24, "compute_s"), .digits = 9},
  {.figure = 1,
   AT("time_s.comm_exposed", "s", BS_FIELD_REAL, time.comm_exposed),
   CSV(25, "comm_exposed_s"),
   .digits = 9,
   TABLE("exposed", 8, cell_critical_exposed)},
  {.figure = 1,
   AT("time_s.wait_for_peers", "s", BS_FIELD_REAL, time.wait_for_peers),
   .present = is_sim,
   CSV(67, "wait_for_peers_s"),
   .digits = 9,
   TABLE("peers", 6, cell_critical_peers)},
  {.figure = 1,
   AT("comm_bytes.per_rank_max_sent", "B", BS_FIELD_I64, comm.per_rank_max_sent),
   CSV(26, "bytes_per_rank_max")},
  {.figure = 1, AT("comm_bytes.total", "B", BS_FIELD_I64, comm.total), CSV(27, "bytes_total")},
  /* sim: per rank (max) by the group the traffic belongs to, at the plan's volume (collectives as rings) */
  {.figure = 1,
   AT("comm_bytes.by_group.tp", "B", BS_FIELD_I64, comm.by_group[BS_DIM_TP]),
   .present = is_sim,
   CSV(74, "bytes_tp")},
  {.figure = 1,
   AT("comm_bytes.by_group.cp", "B", BS_FIELD_I64, comm.by_group[BS_DIM_CP]),
   .present = is_sim,
   CSV(75, "bytes_cp")},
  {.figure = 1,
   AT("comm_bytes.by_group.dp", "B", BS_FIELD_I64, comm.by_group[BS_DIM_DP]),
   .present = is_sim,
   CSV(76, "bytes_dp")},
  {.figure = 1,
   AT("comm_bytes.by_group.pp", "B", BS_FIELD_I64, comm.by_group[BS_DIM_PP]),
   .present = is_sim,
   CSV(77, "bytes_pp")},
  {.figure = 1,
   AT("comm_bytes.intra_node", "B", BS_FIELD_I64, comm.intra_node),
   CSV(28, "bytes_intra_node"),
   TABLE("intra/rank", 11, cell_bytes_per_gpu)},
  {.figure = 1,
   AT("comm_bytes.inter_node", "B", BS_FIELD_I64, comm.inter_node),
   CSV(29, "bytes_inter_node"),
   TABLE("inter/rank", 11, cell_bytes_per_gpu)},
  {.figure = 1,
   AT("memory.peak_bytes_max", "B", BS_FIELD_I64, mem.peak_bytes_max),
   CSV(30, "peak_bytes_max"),
   TABLE("peak GiB", 9, cell_gib)},
  {.figure = 1,
   AT("memory.capacity_bytes", "B", BS_FIELD_I64, mem.capacity_bytes),
   CSV(31, "capacity_bytes"),
   TABLE("cap GiB", 8, cell_gib)},
  {.figure = 1,
   CALC("memory.headroom_bytes", "B", headroom_bytes),
   CSV(59, "headroom_bytes"),
   .digits = 17,
   TABLE("free GiB", 8, cell_real_gib)},
  {.figure = 1, AT("memory.oom", "", BS_FIELD_BOOL, mem.oom), CSV(32, "oom"), TABLE("oom", 4, cell_oom)},
  {.figure = 1, AT("memory.rss_bytes", "B", BS_FIELD_I64, mem.rss_bytes), .present = has_rss},
  /* per step, over all GPUs unless per_gpu (src/flops.c: Megatron-LM's model-FLOPs convention) */
  {.figure = 1, CALC("throughput.model_flops", "FLOP", model_flops), CSV(53, "model_flops"), .digits = 9},
  {.figure = 1, CALC("throughput.tokens_per_s", "tokens/s", tokens_per_s), CSV(54, "tokens_per_s"), .digits = 9},
  {.figure = 1,
   CALC("throughput.tokens_per_s_per_gpu", "tokens/s", tokens_per_s_per_gpu),
   CSV(55, "tokens_per_s_per_gpu"),
   .digits = 9,
   TABLE("tok/s/GPU", 9, cell_rate)},
  {.figure = 1,
   CALC("throughput.model_tflops_per_gpu", "TFLOP/s", model_tflops_per_gpu),
   CSV(56, "model_tflops_per_gpu"),
   .digits = 9},
  {.figure = 1,
   CALC("throughput.peak_tflops_per_gpu", "TFLOP/s", peak_tflops_per_gpu),
   CSV(57, "peak_tflops_per_gpu"),
   .digits = 9},
  {.figure = 1,
   CALC("throughput.mfu", "", mfu),
   CSV(58, "mfu"),
   .digits = 6,
   TABLE("MFU", 6, cell_pct),
   .header = mfu_head},
  {NAMED("throughput.gemm_precision", gemm_precision), CSV(93, "gemm_precision")},
  {.figure = 1,
   CALC("throughput.peak_tflops_per_gpu_gemm", "TFLOP/s", peak_tflops_gemm),
   CSV(94, "peak_tflops_per_gpu_gemm"),
   .digits = 9},
  {.figure = 1,
   CALC("throughput.mfu_gemm_peak", "", mfu_gemm_peak),
   CSV(95, "mfu_gemm_peak"),
   .digits = 6,
   TABLE("MFU fp8", 7, cell_pct_fp8),
   .shown = some_fp8},
  /* the breakdown at the peak, one key per bs_mem_class in its order (bs_mem_class_name) */
  {.figure = 1, AT("memory.breakdown.input", "B", BS_FIELD_I64, mem.breakdown[BS_MEM_INPUT])},
  {.figure = 1, AT("memory.breakdown.output", "B", BS_FIELD_I64, mem.breakdown[BS_MEM_OUTPUT])},
  {.figure = 1, AT("memory.breakdown.comm", "B", BS_FIELD_I64, mem.breakdown[BS_MEM_COMM])},
  {.figure = 1, AT("memory.breakdown.scores", "B", BS_FIELD_I64, mem.breakdown[BS_MEM_SCORES])},
  {.figure = 1, AT("memory.breakdown.workspace", "B", BS_FIELD_I64, mem.breakdown[BS_MEM_WORKSPACE])},
  {.figure = 1, AT("memory.breakdown.weights", "B", BS_FIELD_I64, mem.breakdown[BS_MEM_WEIGHTS])},
  {.figure = 1, AT("memory.breakdown.grads", "B", BS_FIELD_I64, mem.breakdown[BS_MEM_GRADS])},
  {.figure = 1, AT("memory.breakdown.optimizer", "B", BS_FIELD_I64, mem.breakdown[BS_MEM_OPTIMIZER])},
  {.figure = 1, AT("memory.breakdown.activations", "B", BS_FIELD_I64, mem.breakdown[BS_MEM_ACTIVATIONS])},
  {.figure = 1, AT("memory.breakdown.logits", "B", BS_FIELD_I64, mem.breakdown[BS_MEM_LOGITS])},
  {.figure = 1, AT("memory.breakdown.kv_cache", "B", BS_FIELD_I64, mem.breakdown[BS_MEM_KV_CACHE])},
  /* sim: beyond the classes, what the caching allocator reserves on top of the peak */
  {.figure = 1, CALC("memory.breakdown.reserve", "B", reserve_bytes), .present = is_sim, .digits = 17},
  {.figure = 1, CALC("memory.reserved_bytes", "B", reserved_bytes), .present = is_sim, .digits = 17},
  /* sim: where the step goes (sim/explain.h): the critical rank's parts (they add up to time_s.step)
   * and the mean over ranks; the CSV has the critical rank's */
  {.figure = 1,
   AT("explain.critical_rank", "", BS_FIELD_INT, explain.critical_rank),
   .present = is_sim,
   CSV(78, "explain_rank")},
  {.figure = 1, AT("explain.ranks", "ranks", BS_FIELD_INT, explain.ranks), .present = is_sim},
  {XPART("explain.critical.compute.attn_fwd", critical.compute[BS_XK_ATTN_FWD]), CSV(79, "explain_attn_fwd_s")},
  {XPART("explain.critical.compute.attn_bwd", critical.compute[BS_XK_ATTN_BWD]), CSV(80, "explain_attn_bwd_s")},
  {XPART("explain.critical.compute.merge", critical.compute[BS_XK_MERGE]), CSV(81, "explain_merge_s")},
  {XPART("explain.critical.compute.gemm", critical.compute[BS_XK_GEMM]), CSV(82, "explain_gemm_s")},
  {XPART("explain.critical.compute.elemwise", critical.compute[BS_XK_ELEMWISE]), CSV(83, "explain_elemwise_s")},
  {XPART("explain.critical.compute.other", critical.compute[BS_XK_OTHER]), CSV(84, "explain_other_compute_s")},
  {XPART("explain.critical.launch", critical.launch), CSV(85, "explain_launch_s")},
  {XPART("explain.critical.exposed.nvlink", critical.exposed[BS_XL_NVLINK]), CSV(86, "explain_nvlink_s")},
  {XPART("explain.critical.exposed.pcie", critical.exposed[BS_XL_PCIE]), CSV(87, "explain_pcie_s")},
  {XPART("explain.critical.exposed.shm", critical.exposed[BS_XL_SHM]), CSV(88, "explain_shm_s")},
  {XPART("explain.critical.exposed.network", critical.exposed[BS_XL_NETWORK]), CSV(89, "explain_network_s")},
  {XPART("explain.critical.exposed.other", critical.exposed[BS_XL_OTHER]), CSV(90, "explain_other_link_s")},
  {XPART("explain.critical.wait_for_peers", critical.wait_for_peers), CSV(91, "explain_wait_for_peers_s")},
  {XPART("explain.mean.compute.attn_fwd", mean.compute[BS_XK_ATTN_FWD])},
  {XPART("explain.mean.compute.attn_bwd", mean.compute[BS_XK_ATTN_BWD])},
  {XPART("explain.mean.compute.merge", mean.compute[BS_XK_MERGE])},
  {XPART("explain.mean.compute.gemm", mean.compute[BS_XK_GEMM])},
  {XPART("explain.mean.compute.elemwise", mean.compute[BS_XK_ELEMWISE])},
  {XPART("explain.mean.compute.other", mean.compute[BS_XK_OTHER])},
  {XPART("explain.mean.launch", mean.launch)},
  {XPART("explain.mean.exposed.nvlink", mean.exposed[BS_XL_NVLINK])},
  {XPART("explain.mean.exposed.pcie", mean.exposed[BS_XL_PCIE])},
  {XPART("explain.mean.exposed.shm", mean.exposed[BS_XL_SHM])},
  {XPART("explain.mean.exposed.network", mean.exposed[BS_XL_NETWORK])},
  {XPART("explain.mean.exposed.other", mean.exposed[BS_XL_OTHER])},
  {XPART("explain.mean.wait_for_peers", mean.wait_for_peers)},
  /* the simulator's own figures */
  {.figure = 1,
   AT("sim.wall_s", "s", BS_FIELD_REAL, sim_wall_s),
   .present = is_sim,
   CSV(33, "sim_wall_s"),
   .digits = 6},
  {.figure = 1, AT("sim.events", "events", BS_FIELD_I64, sim_events), .present = is_sim, CSV(34, "sim_events")},
  {.figure = 1, AT("sim.actors", "actors", BS_FIELD_INT, sim_actors), .present = is_sim},
  {.figure = 1, AT("sim.rss_bytes", "B", BS_FIELD_I64, sim_rss_bytes), .present = is_sim},
  {.figure = 1, AT("sim.network", "", BS_FIELD_CHARS, sim_network), .present = is_sim},
  /* every rank's figures */
  {.path = "ranks", .unit = "", .kind = BS_FIELD_RANKS, .present = has_ranks},
};
_Static_assert(BS_MEM_CLASS_COUNT == 11, "memory.breakdown has one row per memory class");
_Static_assert(BS_XK_COUNT == 6 && BS_XL_COUNT == 5, "explain has one row per kernel kind and link class");

#define RANK(p, u, k, member) .path = p, .unit = u, .kind = k, .off = offsetof(bs_rank_result, member)
static const bs_field rank_rows[] = {
  {RANK("rank", "", BS_FIELD_INT, rank)},
  {RANK("step", "s", BS_FIELD_REAL, step)},
  {RANK("fwd", "s", BS_FIELD_REAL, fwd)},
  {RANK("bwd", "s", BS_FIELD_REAL, bwd)},
  {RANK("compute", "s", BS_FIELD_REAL, compute)},
  {RANK("comm_exposed", "s", BS_FIELD_REAL, comm_exposed)},
  {RANK("bytes_sent", "B", BS_FIELD_I64, bytes_sent)},
  {RANK("bytes_recv", "B", BS_FIELD_I64, bytes_recv)},
  {RANK("peak_bytes", "B", BS_FIELD_I64, peak_bytes)},
  {RANK("wait_for_peers", "s", BS_FIELD_REAL, wait_for_peers)},
};

const bs_field *bs_result_fields(int *n) {
  *n = (int)(sizeof result_rows / sizeof result_rows[0]);
  return result_rows;
}

const bs_field *bs_rank_fields(int *n) {
  *n = (int)(sizeof rank_rows / sizeof rank_rows[0]);
  return rank_rows;
}

bs_value bs_field_value(const bs_field *f, const void *obj) {
  if (f->kind == BS_FIELD_CALC) return (bs_value){.kind = f->kind, .d = f->calc(obj)};
  const char *p = (const char *)obj + f->off;
  bs_value v = {.kind = f->kind};
  switch (f->kind) {
  case BS_FIELD_INT:
  case BS_FIELD_BOOL: {
    int x;
    memcpy(&x, p, sizeof x);
    v.i = x;
    break;
  }
  case BS_FIELD_I64: memcpy(&v.i, p, sizeof v.i); break;
  case BS_FIELD_REAL: memcpy(&v.d, p, sizeof v.d); break;
  case BS_FIELD_CHARS: v.s = p; break;
  case BS_FIELD_NAME: v.s = f->name(obj); break;
  case BS_FIELD_RANKS:
  case BS_FIELD_CALC: break;
  }
  return v;
}
