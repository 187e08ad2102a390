/*
 * cmd_search.c — `burstsim search SCENARIO.ini`: the best parallel
 * configuration for what the scenario fixes (model, workload, cluster, gpus).
 * The parallel keys the scenario leaves out (or sets to auto) are spread over
 * their legal values, the engine (search/search.h) prunes illegal, out-of-memory
 * and bound-dominated candidates and simulates the rest; this file parses the
 * command line, prints the top K, why the next few lost, the Pareto front of
 * step time against peak memory and the counts, and writes JSON, CSV and a
 * markdown report with a gnuplot plot of the front.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <mpi.h>

#include "base/clock.h"
#include "cmd_args.h"
#include "commands.h"
#include "output.h"
#include "scenario.h"
#include "runtime/digest.h"
#include "runtime/watchdog.h"
#include "search/search.h"

#define LOSERS 5
#define REFUSE_S 3600.0 /* a walk estimated past this is refused unless --force */
#define PROGRESS_EVERY_S 5.0

static void search_usage(FILE *f) {
  fprintf(f,
          "usage: burstsim search SCENARIO.ini [--set section.key=value]... [--top K] [--out F.json]\n"
          "                       [--csv F.csv] [--report DIR] [--profile P] [--quiet] [--dry-run]\n"
          "                       [--top-only] [--force] [--no-cache] [--walk-all] [--timeout S]\n"
          "\n"
          "Finds the fastest parallel configuration for the model, workload, cluster and gpus the\n"
          "scenario fixes. Parallel keys left out or set to auto are searched over every legal value\n"
          "(method, tp, dp, pp, layout, ulysses_degree, ulysses_placement, tp_variant, zero,\n"
          "micro_batch, pp_schedule, cp_pass, ep; workload.recompute at model scope); model.fp8 only when\n"
          "set to auto (FP8 GEMMs change the numerics); parallel.double_ring only when set to search\n"
          "(its auto lets the plan decide); a key given as a list is searched over that list.\n"
          "Illegal points are pruned with the plan's checks, points whose peak memory passes the\n"
          "profile's capacity are never simulated, and the rest run cheapest lower bound (compute\n"
          "alone) first, skipping every point the bound proves cannot enter the top K or the front\n"
          "of step time against peak memory.\n"
          "\n"
          "  --top K        configurations shown and written (default 10)\n"
          "  --out F.json   the top K as results, and the search's counts, front and losers\n"
          "  --csv F.csv    the top K, one row each\n"
          "  --report DIR   DIR/report.md with DIR/front.png (gnuplot) of the Pareto front\n"
          "  --profile P    profile name or JSON file (overrides cluster.profile)\n"
          "  --quiet        no estimate before the search, no progress lines\n"
          "  --dry-run      walk only: the counts, each fitting point's lower bound and peak, no simulation\n"
          "  --top-only     skip by the top K alone (fewer simulations; the front is then the simulated\n"
          "                 points' front, not necessarily the whole space's)\n"
          "  --force        search a space whose walk alone is estimated past an hour (refused\n"
          "                 otherwise, exit 2, with the estimate and the keys that multiply it)\n"
          "  --no-cache     every layer regenerates its attention's ops instead of reading each rank's\n"
          "                 record of the first (slower; the same results: the reference for tests)\n"
          "  --walk-all     walk every candidate before simulating (the reference for tests): by default\n"
          "                 each is probed (its plan's first ops: legality, a lower bound of its peak and\n"
          "                 of its compute) and walked only when the search reaches it\n"
          "  --timeout S    under mpirun -np P: seconds MPI start-up, the check that every rank has the\n"
          "                 same inputs, and the gather may block (default 120), and the most rank 0\n"
          "                 waits for another rank to end its part (default: no bound)\n"
          "\n"
          "Before it starts, the search says (on stderr) how many candidates it holds, which keys\n"
          "multiply them, how much fixing each would cut, and how long walking them should take; a\n"
          "progress line follows (redrawn on a terminal, a line every 5 s otherwise).\n"
          "Under mpirun -np P the candidates are dealt to the ranks (cheapest bound first, round-robin);\n"
          "each prunes with its own results and rank 0 gathers and prints; ranks given different\n"
          "inputs (--set, --profile, flags) are refused (exit 2).\n"
          "Ctrl-C, SIGTERM or SIGHUP end the search: the best found so far is printed and written\n"
          "(--out, --report marked partial) with what was examined and what was not. Exit status: 0 a\n"
          "configuration fits; 1 none fits (or none found before the interruption) or an output could\n"
          "not be written; 2 bad input, an empty space or a space refused as too large; 3 a rank of\n"
          "mpirun did not come within --timeout.\n");
}

static volatile sig_atomic_t stop_flag, stop_signal;
static void on_stop(int sig) {
  stop_signal = sig;
  stop_flag = 1;
}

/* SIGINT, SIGTERM and SIGHUP end the search with what it has (on = 1, the old actions kept in old),
 * or get their old actions back (on = 0). */
static void stop_signals(struct sigaction old[3], int on) {
  static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; i++) sigaction(sigs[i], on ? &sa : &old[i], on ? &old[i] : NULL);
}

/* ---- the progress line: redrawn on a terminal, a line every few seconds otherwise ---- */

typedef struct {
  int tty;
  double every, next; /* off a terminal: the seconds between lines, when the next one is due */
} progress_ctx;

/* Off a terminal, a line every PROGRESS_EVERY_S seconds (BURSTSIM_PROGRESS_S: tests set it lower). */
static double progress_every(void) {
  const char *v = getenv("BURSTSIM_PROGRESS_S");
  double x = v && *v ? strtod(v, NULL) : PROGRESS_EVERY_S;
  return x >= 0 && x <= 86400 ? x : PROGRESS_EVERY_S;
}

static void progress(void *ctx, const bs_search *s, int done, int todo, double best, double el) {
  progress_ctx *p = ctx;
  if (!p->tty) {
    if (el < p->next) return;
    p->next = el + p->every;
  }
  const char *pre = p->tty ? "\r\033[K" : "burstsim search: ", *post = p->tty ? "" : "\n";
  if (isnan(best))
    fprintf(stderr, "%sexamined %d of %d candidates (%.0f %%), %.1f s elapsed%s", pre, done, todo,
            100.0 * done / (todo ? todo : 1), el, post);
  else
    fprintf(stderr, "%s[%d/%d] simulated %d, pruned by bound %d, best step %.4g s, %.1f s elapsed%s", pre, done, todo,
            s->simulated, s->bound, best, el, post);
  fflush(stderr);
}

/* ---- text ---------------------------------------------------------------- */

static double tiny0(double x) { return fabs(x) < 1e-9 ? 0 : x; }

/* The configuration of candidate i; double_ring, placement and tp_variant where they were spread. */
static void cfg_label(const bs_search *s, int i, char *b, size_t n) {
  const bs_cand *x = &s->c[i];
  bs_config cfg;
  bs_search_config(s, i, &cfg);
  const bs_config *c = &cfg;
  int size[BS_DIM_COUNT];
  bs_mesh_sizes(&c->par, size);
  int l = snprintf(b, n, "%s tp=%d cp=%d dp=%d pp=%d layout=%s zero=%d recompute=%s micro_batch=",
                   bs_method_name(c->par.method), size[BS_DIM_TP], size[BS_DIM_CP], size[BS_DIM_DP], size[BS_DIM_PP],
                   bs_layout_name(c->par.layout), c->par.zero, bs_recompute_name(c->work.recompute));
  if (l > 0 && (size_t)l < n) {
    if (c->par.micro_batch) l += snprintf(b + l, n - (size_t)l, "%d", c->par.micro_batch);
    else l += snprintf(b + l, n - (size_t)l, "auto");
  }
  if (c->par.method == BS_USP && l > 0 && (size_t)l < n)
    l += snprintf(b + l, n - (size_t)l, " ulysses_degree=%d", c->par.ulysses_degree);
  if (c->par.pp_schedule == BS_PP_INTERLEAVED && l > 0 && (size_t)l < n)
    l += snprintf(b + l, n - (size_t)l, " pp_schedule=interleaved pp_chunks=%d", c->par.pp_chunks);
  if (c->par.cp_pass == BS_PASS_Q && l > 0 && (size_t)l < n) l += snprintf(b + l, n - (size_t)l, " cp_pass=q");
  if (c->model.fp8 != BS_FP8_OFF && l > 0 && (size_t)l < n)
    l += snprintf(b + l, n - (size_t)l, " fp8=%s", bs_fp8_name(c->model.fp8));
  if ((x->spread & BS_SPREAD_DOUBLE_RING) && l > 0 && (size_t)l < n)
    l += snprintf(b + l, n - (size_t)l, " double_ring=%s",
                  c->par.double_ring == BS_ON    ? "on"
                  : c->par.double_ring == BS_OFF ? "off"
                                                 : "auto");
  if ((x->spread & BS_SPREAD_PLACEMENT) && l > 0 && (size_t)l < n)
    l += snprintf(b + l, n - (size_t)l, " placement=%s", bs_placement_name(c->par.ulysses_placement));
  if ((x->spread & BS_SPREAD_TP_VARIANT) && l > 0 && (size_t)l < n)
    l += snprintf(b + l, n - (size_t)l, " tp_variant=v%d", c->par.tp_variant);
  if (c->model.experts > 0 && l > 0 && (size_t)l < n) snprintf(b + l, n - (size_t)l, " ep=%d", c->par.ep);
}

static double gib(int64_t b) { return (double)b / (1024.0 * 1024 * 1024); }

/* The result of a simulated candidate. */
static const bs_result *res_of(const bs_search *s, int i) { return bs_search_result(s, i); }

/* Why candidate i lost to the best: the parts of its step that grew, and its memory. */
static void why_lost(const bs_search *s, int i, int ibest, char *b, size_t n) {
  const bs_result *x = res_of(s, i), *best = res_of(s, ibest);
  const bs_times *t = &x->time, *t0 = &best->time;
  double idle = t->step - t->compute - t->comm_exposed, idle0 = t0->step - t0->compute - t0->comm_exposed;
  snprintf(b, n,
           "+%.1f %% step: compute %+.3g s, exposed communication %+.3g s, bubble and idle %+.3g s; peak memory "
           "%.1f GiB (best %.1f GiB)",
           100 * (t->step / t0->step - 1), tiny0(t->compute - t0->compute), tiny0(t->comm_exposed - t0->comm_exposed),
           tiny0(idle - idle0), gib(x->mem.peak_bytes_max), gib(best->mem.peak_bytes_max));
}

static int illegal_count(const bs_search *s) {
  int n = 0;
  for (int i = 0; i < s->n; i++) n += s->c[i].status == BS_CAND_ILLEGAL;
  return n;
}

static const char *signal_name(int sig) {
  return sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : sig == SIGINT ? "SIGINT (Ctrl-C)" : "a signal";
}

/* What an interrupted search examined and what it did not. */
static void interrupted_line(FILE *f, const bs_search *s) {
  fprintf(f,
          "interrupted by %s: %d of %d candidates examined (%d walked, %d illegal, %d past memory), %d simulated, "
          "%d pruned by bound; %d never examined: what is shown is the best of those examined, not of the space\n",
          signal_name(stop_signal), s->n - s->skipped, s->n, s->walked, illegal_count(s), s->memory, s->simulated,
          s->bound, s->skipped);
}

static void human_s(double t, char *b, size_t n) {
  if (t < 120) snprintf(b, n, "%.0f s", t);
  else if (t < 7200) snprintf(b, n, "%.0f min", t / 60);
  else snprintf(b, n, "%.1f h", t / 3600);
}

/* Before the search (rank 0): the size of the space, the keys that multiply it and what fixing each
 * would cut, and the walk's time estimated from a sample of walks. Returns 1 when the walk alone is
 * estimated past REFUSE_S and --force is not given (said, with the estimate), 0 to go on, -1 on a
 * profile that does not load (said). */
static int announce(const bs_search *s, const bs_sim_opts *opts, const bs_search_args *A) {
  bs_search_key_spread sp[16];
  int sample = 16;
  double each = 0;
  char err[1024], t[32];
  int mode = (A->dry_run ? BS_WALK_CORNERS : BS_WALK_STAGES) | BS_WALK_STOP_OOM; /* as the search walks */
  if (bs_search_estimate(s, opts, sample, mode, &each, &sample, err, sizeof err)) {
    fprintf(stderr, "burstsim search: %s\n", err);
    return -1;
  }
  double walk = each * s->n;
  int refuse = walk > REFUSE_S && !A->force;
  if (A->quiet && !refuse) return 0;
  int nk = bs_search_spread(s, sp, 16); /* said only: --quiet skips rebuilding every configuration */
  human_s(walk, t, sizeof t);
  fprintf(stderr, "burstsim search: %d candidates", s->n);
  for (int i = 0; i < nk; i++) {
    const char *k = strchr(sp[i].key, '.') + 1;
    fprintf(stderr, "%s%s x%d", i ? ", " : " (", k, sp[i].values);
  }
  fprintf(stderr, "%s; walking them (legality, memory, bound) takes about %s of CPU (%.3g ms each over %d sampled)%s\n",
          nk ? ")" : "", t, each * 1e3, sample, A->dry_run ? "" : ", then the simulations");
  for (int i = 0; i < nk && i < 3; i++)
    if (sp[i].cut >= 1.5) fprintf(stderr, "  fix %s = %s to cut it %.3gx\n", sp[i].key, sp[i].common, sp[i].cut);
  if (refuse)
    fprintf(stderr,
            "burstsim search: refused: walking the space alone would take about %s (more than %.0f min); fix keys "
            "as above, or give --force to search it anyway\n",
            t, REFUSE_S / 60);
  return refuse;
}

static void print_summary(FILE *f, const bs_search *s, const int *rank, int nr, const int *front, int nf, int K) {
  int k = nr < K ? nr : K;
  for (int i = 0; i < k; i++) {
    char l[256];
    cfg_label(s, rank[i], l, sizeof l);
    fprintf(f, "#%d  %s\n", i + 1, l);
  }
  if (nr > K) {
    fprintf(f, "\nwhy the next ones lost (against #1):\n");
    for (int i = K; i < nr && i < K + LOSERS; i++) {
      char l[256], w[320];
      cfg_label(s, rank[i], l, sizeof l);
      why_lost(s, rank[i], rank[0], w, sizeof w);
      fprintf(f, "#%d  %s\n     %s\n", i + 1, l, w);
    }
  }
  fprintf(f, "\nPareto front (step time against peak memory):\n");
  for (int i = 0; i < nf; i++) {
    char l[256];
    cfg_label(s, front[i], l, sizeof l);
    fprintf(f, "  %10.4g s  %7.2f GiB  %s\n", res_of(s, front[i])->time.step,
            gib(res_of(s, front[i])->mem.peak_bytes_max), l);
  }
  fprintf(f,
          "\ncandidates %d: illegal %d, legal %d (pruned by memory %d, pruned by bound %d, simulated %d, failed %d%s)"
          "; a brute force would simulate %d; %.1f s\n",
          s->n, illegal_count(s), s->legal, s->memory, s->bound, s->simulated, s->failed,
          s->interrupted ? ", interrupted" : "", s->legal - s->memory + s->memory_by_sim, s->wall_s);
  if (s->memory_by_sim)
    fprintf(f, "%d of the simulated passed the capacity on a rank the walk of the grid's corners did not see\n",
            s->memory_by_sim);
  if (s->not_walked)
    fprintf(f,
            "walked %d; %d of the legal never walked, settled by their probe (%d past memory; the others by bound, "
            "neither known to fit nor not)\n",
            s->walked, s->not_walked, s->memory_by_probe);
  if (s->probe_violations)
    fprintf(f, "warning: %d walks found less than their probe's lower bounds (a bug: please report)\n",
            s->probe_violations);
  if (s->interrupted) interrupted_line(f, s);
  for (int i = 0; i < s->nreasons; i++) fprintf(f, "  illegal x%d: %s\n", s->reasons[i].count, s->reasons[i].example);
  if (s->other_reasons) fprintf(f, "  illegal x%d: other reasons\n", s->other_reasons);
  for (int i = 0, shown = 0; i < s->n && shown < 5; i++)
    if (s->c[i].status == BS_CAND_FAILED) {
      char l[256];
      cfg_label(s, i, l, sizeof l);
      fprintf(f, "  failed: %s: %s\n", l, bs_search_why(s, i));
      shown++;
    }
  if (s->bound_violations)
    fprintf(f, "warning: %d simulated steps fell below their lower bound (a bug: please report)\n",
            s->bound_violations);
}

/* --dry-run: the counts and the cheapest bounds, nothing simulated. */
static void dry_run_report(const bs_search *s) {
  int n = 0;
  for (int i = 0; i < s->n; i++) n += s->c[i].status == BS_CAND_PENDING;
  printf("candidates %d: illegal %d, legal %d (pruned by memory %d, to simulate at most %d)\n", s->n, illegal_count(s),
         s->legal, s->memory, n);
  for (int i = 0; i < s->nreasons; i++) printf("  illegal x%d: %s\n", s->reasons[i].count, s->reasons[i].example);
  printf("lower bound (s)  peak GiB (grid corners)  configuration\n");
  for (int i = 0; i < s->n; i++) {
    const bs_cand *c = &s->c[i];
    if (c->status != BS_CAND_PENDING) continue;
    char l[256];
    cfg_label(s, i, l, sizeof l);
    printf("%14.4g  %22.2f  %s\n", c->bound, gib(c->peak_bytes), l);
  }
}

/* ---- files --------------------------------------------------------------- */

static cJSON *cand_json(const bs_search *s, int i) {
  cJSON *o = cJSON_CreateObject();
  char l[256];
  cfg_label(s, i, l, sizeof l);
  cJSON_AddStringToObject(o, "config", l);
  cJSON_AddNumberToObject(o, "step_s", res_of(s, i)->time.step);
  cJSON_AddNumberToObject(o, "peak_bytes", (double)res_of(s, i)->mem.peak_bytes_max);
  cJSON_AddNumberToObject(o, "bound_s", s->c[i].bound);
  return o;
}

static int write_json(const char *path, const bs_search *s, const bs_result *top, int k, const int *rank, int nr,
                      const int *front, int nf, int K, char *err, size_t n) {
  cJSON *root = bs_output_json_tree("search", top, k);
  if (!root) {
    snprintf(err, n, "out of memory");
    return -1;
  }
  cJSON *o = cJSON_AddObjectToObject(root, "search");
  cJSON_AddNumberToObject(o, "candidates", s->n);
  cJSON_AddNumberToObject(o, "illegal", illegal_count(s));
  cJSON_AddNumberToObject(o, "legal", s->legal);
  cJSON_AddNumberToObject(o, "pruned_memory", s->memory);
  cJSON_AddNumberToObject(o, "pruned_bound", s->bound);
  cJSON_AddNumberToObject(o, "memory_found_by_simulation", s->memory_by_sim);
  cJSON_AddNumberToObject(o, "simulated", s->simulated);
  cJSON_AddNumberToObject(o, "failed", s->failed);
  cJSON_AddNumberToObject(o, "not_examined", s->skipped);
  cJSON_AddBoolToObject(o, "interrupted", s->interrupted);
  cJSON_AddBoolToObject(o, "partial", s->interrupted); /* the best of those examined, not of the space */
  cJSON_AddNumberToObject(o, "walked", s->walked);
  cJSON_AddNumberToObject(o, "refined", s->refined); /* walked a second time, over the grid's corners */
  cJSON_AddNumberToObject(o, "not_walked", s->not_walked);
  cJSON_AddNumberToObject(o, "memory_found_by_probe", s->memory_by_probe);
  cJSON_AddNumberToObject(o, "probe_violations", s->probe_violations);
  cJSON_AddNumberToObject(o, "brute_force_simulations", s->legal - s->memory + s->memory_by_sim);
  cJSON_AddNumberToObject(o, "wall_s", s->wall_s);
  cJSON_AddNumberToObject(o, "walk_s", s->walk_s);
  cJSON *r = cJSON_AddArrayToObject(o, "illegal_reasons");
  for (int i = 0; i < s->nreasons; i++) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "reason", s->reasons[i].reason);
    cJSON_AddStringToObject(x, "example", s->reasons[i].example);
    cJSON_AddNumberToObject(x, "count", s->reasons[i].count);
    cJSON_AddItemToArray(r, x);
  }
  cJSON *l = cJSON_AddArrayToObject(o, "losers");
  for (int i = K; i < nr && i < K + LOSERS; i++) {
    cJSON *x = cand_json(s, rank[i]);
    char w[320];
    why_lost(s, rank[i], rank[0], w, sizeof w);
    cJSON_AddStringToObject(x, "why", w);
    cJSON_AddNumberToObject(x, "compute_s", res_of(s, rank[i])->time.compute);
    cJSON_AddNumberToObject(x, "comm_exposed_s", res_of(s, rank[i])->time.comm_exposed);
    cJSON_AddItemToArray(l, x);
  }
  cJSON *fr = cJSON_AddArrayToObject(o, "front");
  for (int i = 0; i < nf; i++) cJSON_AddItemToArray(fr, cand_json(s, front[i]));
  int rc = bs_output_json_write(path, root, err, n);
  cJSON_Delete(root);
  return rc;
}

/* A point of the plot: peak GiB, step, and a short label (method, tp, cp, pp, recompute). */
static void dat_row(FILE *f, const bs_search *s, int i) {
  int size[BS_DIM_COUNT];
  bs_config c;
  bs_search_config(s, i, &c);
  bs_mesh_sizes(&c.par, size);
  fprintf(f, "%.4f %.6g \"%s tp%d cp%d pp%d%s\"\n", gib(res_of(s, i)->mem.peak_bytes_max), res_of(s, i)->time.step,
          bs_method_name(c.par.method), size[BS_DIM_TP], size[BS_DIM_CP], size[BS_DIM_PP],
          c.work.recompute == BS_RECOMPUTE_FULL ? " rc"
          : c.work.recompute                    ? " sel"
                                                : "");
}

/* The files --report writes into its directory, each checked as an output before any work. */
static const char *const report_files[] = {"front.dat", "front.gp", "front.png", "report.md"};
#define NREPORT (sizeof report_files / sizeof report_files[0])

/* --report DIR before any work: a directory that can be written (or made), and, when it exists, each
 * of its files a writable output that is no input and no other output (--out, --csv). paths gets the
 * file names (NREPORT of them; empty when DIR does not exist yet: nothing in it can be an input).
 * 0, or -1 with "--report ...: why" in err. */
static int report_precheck(const char *dir, char paths[][4096], char *err, size_t n) {
  char why[1024];
  if (bs_out_check_dir(dir, why, sizeof why)) {
    snprintf(err, n, "--report %.900s", why);
    return -1;
  }
  struct stat st;
  int exists = stat(dir, &st) == 0;
  for (size_t i = 0; i < NREPORT; i++) {
    paths[i][0] = '\0';
    if (exists) snprintf(paths[i], 4096, "%.3900s/%s", dir, report_files[i]);
  }
  return 0;
}

/* DIR/NAME opened through base/fileio (written whole or not at all). */
static bs_outfile *report_open(const char *dir, const char *name, char *err, size_t n) {
  char p[4096], why[1024];
  snprintf(p, sizeof p, "%.3900s/%s", dir, name);
  bs_outfile *o = bs_out_open(p, why, sizeof why);
  if (!o) snprintf(err, n, "--report %.900s", why);
  return o;
}
static int report_commit(bs_outfile *o, char *err, size_t n) {
  char why[1024];
  if (!bs_out_commit(o, why, sizeof why)) return 0;
  snprintf(err, n, "--report %.900s", why);
  return -1;
}

/* DIR/front.gp, and DIR/front.png drawn from it by gnuplot when there is a front; a front.png that
 * gnuplot did not draw (it failed, or left an empty file) is removed. 1 when plotted, 0 when not,
 * -1 on a write error. */
static int write_plot(const char *dir, const bs_search *s, int nf, char *err, size_t n) {
  bs_outfile *o = report_open(dir, "front.gp", err, n);
  if (!o) return -1;
  FILE *f = bs_out_stream(o);
  double cap = s->n ? gib(s->capacity_bytes) : 0;
  fprintf(f,
          "# The Pareto front of step time against peak memory (burstsim search). gnuplot front.gp\n"
          "set terminal pngcairo size 900,560 noenhanced\n"
          "set output 'front.png'\n"
          "set grid\n"
          "set title 'step time against peak memory per GPU (every simulated candidate; the front joined)'\n"
          "set xlabel 'peak memory per GPU (GiB)'\n"
          "set ylabel 'step time (s)'\n"
          "set logscale y\n"
          "set key outside right top\n"
          "plot 'front.dat' index 1 u 1:2 w p pt 7 ps 0.6 lc rgb '#9090b0' t 'simulated', \\\n"
          "     'front.dat' index 0 u 1:2 w lp pt 7 lc rgb '#c03030' t 'Pareto front', \\\n"
          "     'front.dat' index 0 u 1:2:3 w labels offset 1,0.6 left notitle\n");
  fprintf(f, "# every point fits the capacity less the reserve: %.2f GiB\n", cap);
  if (report_commit(o, err, n)) return -1;
  char cmd[8400], png[4096];
  snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot front.gp 2>/dev/null", dir);
  snprintf(png, sizeof png, "%.3900s/front.png", dir);
  int plotted = nf > 0 && !strchr(dir, '\'') && system(cmd) == 0;
  struct stat st;
  if (plotted && (stat(png, &st) || st.st_size == 0)) plotted = 0;
  if (!plotted) unlink(png);
  return plotted;
}

/* DIR/front.dat, DIR/front.gp, DIR/front.png (when gnuplot runs) and DIR/report.md. */
static int write_report(const char *dir, const char *scenario, const bs_search *s, const int *rank, int nr,
                        const int *front, int nf, int K, char *err, size_t n) {
  if (mkdir(dir, 0777) && errno != EEXIST) {
    snprintf(err, n, "--report %.900s: %s", dir, strerror(errno));
    return -1;
  }
  bs_outfile *o = report_open(dir, "front.dat", err, n);
  if (!o) return -1;
  FILE *f = bs_out_stream(o);
  fprintf(f, "# peak_GiB step_s label (the Pareto front); then every simulated point\n");
  for (int i = 0; i < nf; i++) dat_row(f, s, front[i]);
  fprintf(f, "\n\n");
  for (int i = 0; i < nr; i++) dat_row(f, s, rank[i]);
  if (report_commit(o, err, n)) return -1;
  int plotted = write_plot(dir, s, nf, err, n);
  if (plotted < 0) return -1;
  double cap = s->n ? gib(s->capacity_bytes) : 0;
  if (!(o = report_open(dir, "report.md", err, n))) return -1;
  f = bs_out_stream(o);
  bs_config cfg0;
  bs_search_config(s, 0, &cfg0);
  const bs_config *c0 = &cfg0;
  fprintf(f, "# burstsim search: %s\n\n", scenario);
  fprintf(f, "%s %s, %lld tokens x %lld, %s scope, %d GPUs of %s (profile %s).\n\n", c0->model.preset,
          bs_phase_name(c0->work.phase), (long long)c0->work.seq_len, (long long)c0->work.batch,
          bs_scope_name(c0->work.scope), c0->par.gpus, c0->cluster.topology, c0->cluster.profile);
  if (s->interrupted)
    fprintf(f,
            "**Partial: interrupted by %s.** %d of %d candidates examined (%d walked), %d simulated, %d pruned by "
            "bound; %d were never examined: what follows is the best of those that were, not of the space.\n\n",
            signal_name(stop_signal), s->n - s->skipped, s->n, s->walked, s->simulated, s->bound, s->skipped);
  fprintf(f, "## Top %d\n\n| # | configuration | step (s) | compute (s) | exposed comm (s) | peak (GiB) |\n", K);
  fprintf(f, "|---|---|---|---|---|---|\n");
  for (int i = 0; i < nr && i < K; i++) {
    const bs_result *x = res_of(s, rank[i]);
    char l[256];
    cfg_label(s, rank[i], l, sizeof l);
    fprintf(f, "| %d | %s | %.4g | %.4g | %.4g | %.2f |\n", i + 1, l, x->time.step, x->time.compute,
            x->time.comm_exposed, gib(x->mem.peak_bytes_max));
  }
  if (nr > K) {
    fprintf(f, "\n## Why the next ones lost (against #1)\n\n");
    for (int i = K; i < nr && i < K + LOSERS; i++) {
      char l[256], w[320];
      cfg_label(s, rank[i], l, sizeof l);
      why_lost(s, rank[i], rank[0], w, sizeof w);
      fprintf(f, "- #%d %s: %s\n", i + 1, l, w);
    }
  }
  fprintf(f, "\n## Pareto front of step time against peak memory\n\n");
  if (plotted) fprintf(f, "![front](front.png)\n\n");
  else if (!nf) fprintf(f, "(no simulated configuration fits: nothing to plot)\n\n");
  else fprintf(f, "(gnuplot did not run: `gnuplot front.gp` in this directory draws front.png)\n\n");
  fprintf(f, "| step (s) | peak (GiB) | configuration |\n|---|---|---|\n");
  for (int i = 0; i < nf; i++) {
    char l[256];
    cfg_label(s, front[i], l, sizeof l);
    fprintf(f, "| %.4g | %.2f | %s |\n", res_of(s, front[i])->time.step, gib(res_of(s, front[i])->mem.peak_bytes_max),
            l);
  }
  fprintf(f,
          "\n## Counts\n\n%d candidates: %d illegal, %d legal; %d pruned by memory (capacity %.2f GiB), %d "
          "pruned by bound, %d simulated, %d failed%s; a brute force would simulate %d. %.1f s (walks %.1f s, "
          "simulations %.1f s).\n",
          s->n, illegal_count(s), s->legal, s->memory, cap, s->bound, s->simulated, s->failed,
          s->interrupted ? ", interrupted" : "", s->legal - s->memory + s->memory_by_sim, s->wall_s, s->walk_s,
          s->wall_s - s->walk_s);
  if (s->skipped) fprintf(f, "\nInterrupted: %d candidates not examined.\n", s->skipped);
  for (int i = 0; i < s->nreasons; i++) fprintf(f, "\n- illegal x%d: %s", s->reasons[i].count, s->reasons[i].example);
  fprintf(f, "\n");
  return report_commit(o, err, n);
}

/* Every output (--out, --csv, each file of --report) before any work, creating nothing: writable,
 * none an input or another output. 0, or -1 with "FLAG PATH: why" in err. */
static int check_outputs(const bs_search_args *A, const bs_scenario *sc, char *err, size_t n) {
  char rpaths[NREPORT][4096];
  if (A->report && report_precheck(A->report, rpaths, err, n)) return -1;
  bs_path_role outs[2 + NREPORT] = {{"--out", A->out}, {"--csv", A->csv}};
  for (size_t i = 0; i < NREPORT; i++)
    outs[2 + i] = (bs_path_role){"--report", A->report && *rpaths[i] ? rpaths[i] : NULL};
  return bs_output_precheck(outs, 2 + NREPORT, A->scenario, sc, A->profile, err, n);
}

/* Launched by mpirun with more than one rank? (Open MPI's environment, or PMI's.) */
static int launched_by_mpirun(void) {
  const char *n = getenv("OMPI_COMM_WORLD_SIZE");
  if (!n) n = getenv("PMI_SIZE");
  return n && atoi(n) > 1;
}

/* What one rank decided about a candidate it owned, sent to rank 0. */
typedef struct {
  int idx, status, sim_oom;
  char why[256];
  bs_result res; /* without its per-rank figures */
} part_rec;

/* Has this rank decided candidate c (its own, walked and reached), so that rank 0 must hear of it? Its
 * branch and bound's walks may find one past memory or refused (those every rank walks or probes
 * alike are decided alike everywhere). */
static int decided(const bs_cand *c) {
  return c->status == BS_CAND_SIMULATED || c->status == BS_CAND_BOUND || c->status == BS_CAND_FAILED ||
         (c->flags & BS_CAND_SIM_OOM) || (c->status == BS_CAND_SKIPPED && (c->flags & BS_CAND_WALKED)) ||
         ((c->status == BS_CAND_MEMORY || c->status == BS_CAND_ILLEGAL) && (c->flags & BS_CAND_REACHED));
}

/* Under mpirun: rank 0 takes in what every other rank decided about its candidates. 0 or -1. */
static int merge_parts(bs_search *s, int rank, int size) {
  if (rank != 0) {
    int n = 0;
    for (int i = 0; i < s->n; i++) n += decided(&s->c[i]);
    if (MPI_Send(&n, 1, MPI_INT, 0, 1, MPI_COMM_WORLD) != MPI_SUCCESS) return -1;
    part_rec *r = calloc(1, sizeof *r);
    if (!r) return -1;
    for (int i = 0; i < s->n; i++) {
      const bs_cand *c = &s->c[i];
      if (!decided(c)) continue;
      memset(r, 0, sizeof *r);
      r->idx = i;
      r->status = (int)c->status;
      r->sim_oom = (c->flags & BS_CAND_SIM_OOM) != 0;
      snprintf(r->why, sizeof r->why, "%s", bs_search_why(s, i));
      if (bs_search_result(s, i)) r->res = *bs_search_result(s, i);
      r->res.ranks = NULL;
      r->res.nranks = 0;
      r->res.mode = NULL;
      if (MPI_Send(r, (int)sizeof *r, MPI_BYTE, 0, 2, MPI_COMM_WORLD) != MPI_SUCCESS) return free(r), -1;
    }
    free(r);
    return 0;
  }
  part_rec *r = malloc(sizeof *r);
  if (!r) return -1;
  for (int src = 1; src < size; src++) {
    int n = 0;
    if (MPI_Recv(&n, 1, MPI_INT, src, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) return free(r), -1;
    for (int k = 0; k < n; k++) {
      if (MPI_Recv(r, (int)sizeof *r, MPI_BYTE, src, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
          r->idx < 0 || r->idx >= s->n)
        return free(r), -1;
      r->why[sizeof r->why - 1] = '\0';
      r->res.mode = "sim";
      if (bs_search_settle(s, r->idx, (bs_cand_status)r->status, r->sim_oom, r->why, &r->res)) return free(r), -1;
    }
  }
  free(r);
  bs_search_recount(s);
  if (s->skipped) s->interrupted = 1;
  return 0;
}

/* MPI_Finalize, bounded: a rank that never reaches it must not hang the others. */
static void search_finalize(int rank, double timeout) {
  bs_test_stall(rank, "finalize");
  bs_watchdog_arm("burstsim search", rank, "MPI shutdown (MPI_Finalize)", timeout);
  MPI_Finalize();
  bs_watchdog_disarm();
}

/* Under mpirun: MPI started (bounded by the watchdog) and every rank holding the same inputs: the
 * resolved points and every option that changes what a rank computes. 0, or the exit code. */
static int mpi_start(const bs_search_args *A, const bs_scenario *sc, const bs_search_autos *au, int *rank, int *size) {
  char err[1024];
  setenv("OMPI_MCA_mpi_warn_on_fork", "0", 0); /* the forked simulations never touch MPI */
  bs_watchdog_arm("burstsim search", -1, "MPI start-up (MPI_Init)", A->timeout);
  bs_test_stall(bs_launcher_rank(), "init");
  if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
    fprintf(stderr, "burstsim search: MPI_Init failed\n");
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  bs_watchdog_arm("burstsim search", *rank, "start-up (comparing the inputs of the ranks)", A->timeout);
  struct {
    char profile[512];
    int top, dry_run, top_only, force, walk_all;
    bs_search_autos au;
  } same;
  memset(&same, 0, sizeof same);
  snprintf(same.profile, sizeof same.profile, "%s", A->profile ? A->profile : "");
  same.top = A->top, same.dry_run = A->dry_run, same.top_only = A->top_only, same.force = A->force;
  same.walk_all = A->walk_all;
  same.au = *au;
  if (bs_points_same(MPI_COMM_WORLD, sc->points, sc->npoints, err, sizeof err) ||
      bs_bytes_same(MPI_COMM_WORLD, &same, sizeof same,
                    "set of search options (--profile, --top, --top-only, "
                    "--dry-run, --force, --walk-all, or the keys searched)",
                    err, sizeof err)) {
    if (*rank == 0) fprintf(stderr, "burstsim search: %s: %s\n", A->scenario, err);
    search_finalize(*rank, A->timeout);
    return 2;
  }
  bs_watchdog_disarm();
  return 0;
}

/* Under mpirun: every rank reports (rank 0 names one that does not come within --timeout, and the
 * job ends with exit 3), then rank 0 takes in the others' parts, bounded by the watchdog. */
static void gather_parts(bs_search *s, const bs_search_args *A, int rank, int size) {
  char err[1024];
  bs_test_stall(rank, "gather");
  if (bs_arrive(MPI_COMM_WORLD, "the gather of the candidates", A->timeout, A->timeout <= 0, err, sizeof err)) {
    fprintf(stderr, "burstsim search: rank %d: %s\n", rank, err);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, BS_WATCHDOG_EXIT);
  }
  bs_test_stall(rank, "gathering");
  bs_watchdog_arm("burstsim search", rank, "the gather of the candidates", A->timeout);
  if (rank != 0) bs_watchdog_waiting("rank 0");
  if (merge_parts(s, rank, size)) {
    fprintf(stderr, "burstsim search: rank %d: gathering the candidates failed\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  bs_watchdog_disarm();
}

/* The keys search spreads: over every legal value when left out or set to auto, or only when set
 * to auto (opt_in: a key that changes the numerics, not only the parallel split); `word`: the value
 * that asks for the search when auto has a meaning of its own (implies opt_in); `unless`: a key
 * that, given, fixes this one too; `every`: what the field takes then (1, or BS_SEARCH_EVERY for the
 * keys that also take a list's mask). */
static const struct {
  const char *key;
  size_t field; /* in bs_search_autos */
  int opt_in;
  const char *word, *unless;
  int every;
} searched[] = {
  {"parallel.method", offsetof(bs_search_autos, method), 0, NULL, NULL, 1},
  {"parallel.tp", offsetof(bs_search_autos, tp), 0, NULL, NULL, 1},
  {"parallel.dp", offsetof(bs_search_autos, dp), 0, NULL, NULL, 1},
  {"parallel.pp", offsetof(bs_search_autos, pp), 0, NULL, NULL, 1},
  {"parallel.layout", offsetof(bs_search_autos, layout), 0, NULL, NULL, 1},
  {"parallel.zero", offsetof(bs_search_autos, zero), 0, NULL, NULL, 1},
  {"parallel.micro_batch", offsetof(bs_search_autos, micro_batch), 0, NULL, NULL, 1},
  {"workload.recompute", offsetof(bs_search_autos, recompute), 0, NULL, NULL, 1},
  {"parallel.ulysses_degree", offsetof(bs_search_autos, ulysses_degree), 0, NULL, NULL, 1},
  {"parallel.pp_schedule", offsetof(bs_search_autos, pp_schedule), 0, NULL, "parallel.pp_chunks", 1},
  {"parallel.cp_pass", offsetof(bs_search_autos, cp_pass), 0, NULL, NULL, 1},
  {"model.fp8", offsetof(bs_search_autos, fp8), 1, NULL, NULL, 1},
  /* double_ring = auto lets the plan decide (a double ring when the ring spans whole nodes): left
   * out or auto it keeps that meaning, and `search` (or a list) asks for on and off */
  {"parallel.double_ring", offsetof(bs_search_autos, double_ring), 1, "search", NULL, BS_SEARCH_EVERY},
  {"parallel.ulysses_placement", offsetof(bs_search_autos, placement), 0, NULL, NULL, BS_SEARCH_EVERY},
  {"parallel.tp_variant", offsetof(bs_search_autos, tp_variant), 0, NULL, NULL, BS_SEARCH_EVERY},
  {"parallel.ep", offsetof(bs_search_autos, ep), 0, NULL, NULL, 1},
};
#define NSEARCHED (sizeof searched / sizeof searched[0])

/* What a search holds fixed and ranks over: a list in the model, the workload, the cluster or
 * parallel.gpus (outside the searched keys) would rank different workloads against each other.
 * 0, or -1 with the first such key named in err. */
static int fixed_keys_single(const bs_scenario *sc, char *err, size_t n) {
  char key[128];
  for (int i = 0; bs_scenario_key(i, key, sizeof key); i++) {
    int fixed = !strncmp(key, "model.", 6) || !strncmp(key, "workload.", 9) || !strncmp(key, "cluster.", 8) ||
                !strcmp(key, "parallel.gpus");
    for (size_t j = 0; fixed && j < NSEARCHED; j++) fixed = strcmp(key, searched[j].key) != 0;
    if (fixed && bs_scenario_listed(sc, key)) {
      snprintf(err, n,
               "%s: a list of values (at %s): search ranks configurations of one workload on one cluster; "
               "run one search per value (or `burstsim sim` for the sweep)",
               key, bs_scenario_where(sc, key));
      return -1;
    }
  }
  return 0;
}

/* Which keys the scenario leaves to the search. */
static void searched_autos(const bs_scenario *sc, bs_search_autos *au) {
  memset(au, 0, sizeof *au);
  for (size_t i = 0; i < NSEARCHED; i++) {
    int on = searched[i].opt_in ? bs_scenario_given_auto(sc, searched[i].key) : !bs_scenario_given(sc, searched[i].key);
    if (searched[i].unless && bs_scenario_given(sc, searched[i].unless)) on = 0;
    *(int *)((char *)au + searched[i].field) = on ? searched[i].every : 0;
  }
}

/* A list of double_ring, ulysses_placement or tp_variant values, which the scenario made into a cross
 * product of points, goes to the search instead: the points keep the list's first value, and the key
 * is spread over the list's values (a mask) where it changes the plan, so that it multiplies only
 * the candidates it makes different. */
static int list_value(const bs_config *c, int key) {
  return key == 0 ? c->par.double_ring + 1 : key == 1 ? (int)c->par.ulysses_placement : c->par.tp_variant;
}
static void lists_to_search(bs_scenario *sc, bs_search_autos *au) {
  int *field[3] = {&au->double_ring, &au->placement, &au->tp_variant};
  for (int key = 0; key < 3; key++) {
    int mask = 0, first = list_value(&sc->points[0], key);
    for (int i = 0; i < sc->npoints; i++) mask |= BS_SEARCH_BIT(list_value(&sc->points[i], key));
    if (mask == BS_SEARCH_BIT(first)) continue; /* one value: given, kept */
    *field[key] = mask;
    int n = 0;
    for (int i = 0; i < sc->npoints; i++)
      if (list_value(&sc->points[i], key) == first) sc->points[n++] = sc->points[i];
    sc->npoints = n;
  }
}

/*
 * Each walk allocates a candidate's replay state and frees it (on the 405B space of 2304 GPUs, every
 * rank's tables: blocks of tens of megabytes). glibc serves such blocks with mmap: fresh pages the
 * kernel clears at first touch and unmaps at free, so every walk paid page faults again (60 s of that
 * search: 6.2 M minor faults, 17 of 47 CPU seconds in the kernel, 573 candidates walked). Taking every
 * block from the heap and keeping freed memory there (mallopt(3): no mmap, no trimming) lets the next
 * walk reuse the same pages (35 K faults, 0.1 s in the kernel, 3,692 walked). Peak RSS stays the
 * largest walk's.
 */
static void keep_heap(void) {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

int cmd_search(int argc, char **argv) {
  bs_search_args A;
  char err[1024];
  if (bs_search_args_parse(argc, argv, &A, err, sizeof err)) {
    fprintf(stderr, "burstsim search: %s\n", err);
    search_usage(stderr);
    return 2;
  }
  if (A.help) {
    search_usage(stdout);
    return 0;
  }
  bs_sim_single_blas_thread();
  keep_heap();
  bs_scenario sc;
  const char *auto_keys[NSEARCHED + 1];
  char worded[NSEARCHED][64];
  for (size_t i = 0; i < NSEARCHED; i++) {
    auto_keys[i] = searched[i].key;
    if (searched[i].word) {
      snprintf(worded[i], sizeof worded[i], "%s=%s", searched[i].key, searched[i].word);
      auto_keys[i] = worded[i];
    }
  }
  auto_keys[NSEARCHED] = NULL;
  bs_scenario_auto_keys(auto_keys);
  int lrc = bs_scenario_load(A.scenario, A.sets, A.nsets, &sc, err, sizeof err);
  bs_scenario_auto_keys(NULL);
  if (lrc) {
    const char *dr = strstr(err, "parallel.double_ring: '");
    fprintf(stderr, "burstsim search: %s%s\n", err, dr ? " search (on and off searched)" : "");
    return 2;
  }
  if (fixed_keys_single(&sc, err, sizeof err)) {
    fprintf(stderr, "burstsim search: %s\n", err);
    bs_scenario_free(&sc);
    return 2;
  }
  bs_search_autos au;
  searched_autos(&sc, &au);
  lists_to_search(&sc, &au);
  bs_sim_opts opts;
  bs_sim_opts_default(&opts);
  opts.profile = A.profile;
  opts.no_op_cache = A.no_cache;
  if (bs_sim_check_profile(&sc.points[0], &opts, err, sizeof err) ||
      bs_sim_check_topology(&sc.points[0], err, sizeof err)) {
    fprintf(stderr, "burstsim search: %s\n", err);
    bs_scenario_free(&sc);
    return 2;
  }
  if (check_outputs(&A, &sc, err, sizeof err)) {
    fprintf(stderr, "burstsim search: %s\n", err);
    bs_scenario_free(&sc);
    return 2;
  }
  bs_search s;
  if (bs_search_expand(sc.points, sc.npoints, &au, &s, err, sizeof err)) {
    fprintf(stderr, "burstsim search: %s: %s\n", A.scenario, err);
    bs_scenario_free(&sc);
    return 2;
  }
  int mpi_rank = 0, mpi_size = 1;
  if (launched_by_mpirun()) {
    int code = mpi_start(&A, &sc, &au, &mpi_rank, &mpi_size);
    if (code) {
      bs_search_free(&s);
      bs_scenario_free(&sc);
      return code;
    }
  }
  struct sigaction old[3]; /* a stop signal from here on (the estimate included) ends the search */
  stop_signals(old, 1);
  int refuse = mpi_rank == 0 ? announce(&s, &opts, &A) : 0;
  if (mpi_size > 1) MPI_Bcast(&refuse, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (refuse) {
    stop_signals(old, 0);
    if (mpi_size > 1) search_finalize(mpi_rank, A.timeout);
    bs_search_free(&s);
    bs_scenario_free(&sc);
    return 2;
  }
  double every = progress_every();
  progress_ctx pc = {isatty(2), every, every};
  int show = !A.quiet && mpi_rank == 0;
  bs_search_opts so = {A.top, mpi_rank, mpi_size,  &opts,      &stop_flag, show ? progress : NULL,
                       &pc,   0,        A.dry_run, A.top_only, 0,          A.walk_all};
  int rc = bs_search_run(&s, &so, err, sizeof err);
  if (!rc && mpi_size > 1) gather_parts(&s, &A, mpi_rank, mpi_size);
  if (mpi_size > 1) search_finalize(mpi_rank, A.timeout);
  if (mpi_rank != 0) {
    bs_search_free(&s);
    bs_scenario_free(&sc);
    return rc ? 2 : 0;
  }
  stop_signals(old, 0);
  if (show && pc.tty) fprintf(stderr, "\r\033[K");
  if (rc) {
    fprintf(stderr, "burstsim search: %s\n", err);
    bs_search_free(&s);
    bs_scenario_free(&sc);
    return 2;
  }
  if (s.legal == 0 && !s.interrupted) {
    fprintf(stderr, "burstsim search: %s: no legal configuration in the space (%d candidates)\n", A.scenario, s.n);
    for (int i = 0; i < s.nreasons; i++) fprintf(stderr, "  x%d: %s\n", s.reasons[i].count, s.reasons[i].example);
    bs_search_free(&s);
    bs_scenario_free(&sc);
    return 2;
  }
  if (A.dry_run) {
    dry_run_report(&s);
    bs_search_free(&s);
    bs_scenario_free(&sc);
    return 0;
  }
  int nr = 0, nf = 0, *rank = bs_search_ranking(&s, &nr), *front = bs_search_front(&s, &nf);
  int k = nr < A.top ? nr : A.top;
  bs_result *top = calloc((size_t)k + 1, sizeof *top);
  for (int i = 0; top && i < k; i++) top[i] = *bs_search_result(&s, rank[i]); /* shallow: s owns them */
  const char *touts[] = {A.out, A.csv, A.report};
  FILE *tf = bs_output_table_stream(touts, 3);
  if (top && k) bs_output_table(tf, top, k);
  print_summary(tf, &s, rank, nr, front, nf, A.top);
  rc = nr ? 0 : 1;
  if (!nr && s.interrupted) {
    fprintf(stderr, "burstsim search: no configuration found before the interruption (not: none fits)\n");
    fprintf(stderr, "burstsim search: ");
    interrupted_line(stderr, &s);
  } else if (!nr)
    fprintf(stderr, "burstsim search: no configuration fits (%d legal, %d past memory)\n", s.legal, s.memory);
  if (A.out && write_json(A.out, &s, top, k, rank, nr, front, nf, A.top, err, sizeof err)) {
    fprintf(stderr, "burstsim search: --out %s\n", err);
    rc = 1;
  }
  if (A.csv && bs_output_csv(A.csv, top, k, err, sizeof err)) {
    fprintf(stderr, "burstsim search: --csv %s\n", err);
    rc = 1;
  }
  if (A.report && write_report(A.report, A.scenario, &s, rank, nr, front, nf, A.top, err, sizeof err)) {
    fprintf(stderr, "burstsim search: %s\n", err);
    rc = 1;
  }
  free(top);
  free(rank);
  free(front);
  bs_search_free(&s);
  bs_scenario_free(&sc);
  return rc;
}
