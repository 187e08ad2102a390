/*
 * cmd_args.c — one parse function per subcommand (cmd_args.h): every flag
 * read through the typed readers of args.c, every range checked, cross-flag
 * rules (calib's --primary against --dtype, ...) checked too, and nothing
 * executed, so that a bad command line is rejected before MPI starts or any
 * file is touched.
 */
#include "cmd_args.h"

#include <string.h>

#include "args.h"

/* A --set override: kept in order, at most BS_ARGS_MAX_SETS of them. */
static int add_set(bs_args *a, char **sets, int *nsets) {
  if (*nsets == BS_ARGS_MAX_SETS) return bs_args_fail(a, "--set: at most %d overrides", BS_ARGS_MAX_SETS);
  if (!a->val[0]) return bs_args_fail(a, "--set[%d]: empty (expected section.key=value)", *nsets);
  sets[(*nsets)++] = (char *)a->val;
  return 0;
}

/* The one positional argument (scenario or name): a second one is an error. */
static int one_positional(bs_args *a, const char **slot, const char *what) {
  if (*slot) return bs_args_fail(a, "one %s only ('%s' and '%s')", what, *slot, a->word);
  *slot = a->word;
  return 0;
}

#define FLAG(name, mode) ((m = bs_args_flag(&a, name, mode)) != 0)
#define CHECK(expr)                 \
  do {                              \
    if (m < 0 || (expr)) return -1; \
  } while (0)

/* "exit|stall:RANK:STEP", the runtime's fault injection test hook. */
static int fault_arg(bs_args *a, bs_run_args *o) {
  static const char *const kinds[] = {"exit", "stall", NULL};
  const char *v = a->val;
  size_t k = strcspn(v, ":");
  char kind[8];
  if (k >= sizeof kind || v[k] != ':') return bs_args_fail(a, "--fault: '%s' is not exit|stall:RANK:STEP", v);
  memcpy(kind, v, k);
  kind[k] = '\0';
  int idx = -1;
  for (int i = 0; kinds[i]; i++)
    if (!strcmp(kind, kinds[i])) idx = i;
  if (idx < 0) return bs_args_fail(a, "--fault: '%s' is not exit|stall:RANK:STEP", v);
  const char *rank = v + k + 1, *colon = strchr(rank, ':');
  if (!colon) return bs_args_fail(a, "--fault: '%s' is not exit|stall:RANK:STEP", v);
  char rbuf[24];
  size_t rl = (size_t)(colon - rank);
  if (rl >= sizeof rbuf) return bs_args_fail(a, "--fault: '%s': the rank is out of range", v);
  memcpy(rbuf, rank, rl);
  rbuf[rl] = '\0';
  const char *saved = a->val;
  a->val = rbuf;
  int rc = bs_args_int(a, 0, 1 << 20, &o->fault_rank);
  a->val = colon + 1;
  if (!rc) rc = bs_args_int(a, 0, 1 << 30, &o->fault_step);
  a->val = saved;
  if (rc) return -1;
  o->fault = idx + 1;
  return 0;
}

/* --backend cpu|cuda and --comm mpi|nccl (run and validate): NCCL moves device memory only. */
static const char *const backends[] = {"cpu", "cuda", NULL}, *const comms[] = {"mpi", "nccl", NULL};

static int backend_pair(bs_args *a, int backend, int comm) {
  if (comm == 1 && backend != 1)
    return bs_args_fail(a,
                        "--comm nccl: needs --backend cuda (NCCL moves device memory; the CPU kernels use host "
                        "memory)");
  return 0;
}

int bs_run_args_parse(int argc, char **argv, bs_run_args *o, char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  bs_args a;
  int m;
  bs_args_init(&a, argc, argv, 1, err, errlen);
  while (bs_args_next(&a)) {
    if (!strcmp(a.word, "--help") || !strcmp(a.word, "-h")) {
      o->help = 1;
      return 0;
    }
    if (FLAG("--set", BS_ARG_VALUE | BS_ARG_REPEAT)) CHECK(add_set(&a, o->sets, &o->nsets));
    else if (FLAG("--out", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->out));
    else if (FLAG("--trace", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->trace));
    else if (FLAG("--verify", BS_ARG_SWITCH)) {
      CHECK(0);
      o->verify = 1;
    } else if (FLAG("--overlap-bench", BS_ARG_SWITCH)) {
      CHECK(0);
      o->overlap = 1;
    } else if (FLAG("--reps", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, 1000000, &o->reps));
    else if (FLAG("--tile", BS_ARG_VALUE)) CHECK(bs_args_int64(&a, 1, (int64_t)1 << 30, &o->tile));
    else if (FLAG("--threads", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, BS_ARGS_MAX_THREADS, &o->threads));
    else if (FLAG("--timeout", BS_ARG_VALUE)) CHECK(bs_args_double(&a, 0.001, BS_ARGS_MAX_TIMEOUT, &o->timeout));
    else if (FLAG("--warmup", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 0, 1000, &o->warmup));
    else if (FLAG("--fault", BS_ARG_VALUE)) CHECK(fault_arg(&a, o));
    else if (FLAG("--backend", BS_ARG_VALUE)) CHECK(bs_args_enum(&a, backends, &o->backend));
    else if (FLAG("--comm", BS_ARG_VALUE)) CHECK(bs_args_enum(&a, comms, &o->comm));
    else if (m < 0) return -1;
    else if (bs_args_positional(&a)) {
      if (one_positional(&a, &o->scenario, "scenario file")) return -1;
    } else return bs_args_unknown(&a, NULL);
  }
  if (!o->scenario) return bs_args_fail(&a, "missing SCENARIO.ini");
  if (o->reps && !o->overlap) return bs_args_fail(&a, "--reps: only with --overlap-bench");
  if (backend_pair(&a, o->backend, o->comm)) return -1;
  if (o->backend && o->overlap) return bs_args_fail(&a, "--overlap-bench: the CPU backend only");
  return 0;
}

int bs_sim_args_parse(int argc, char **argv, bs_sim_args *o, char *err, size_t errlen) {
  static const char *const fold[] = {"auto", "on", "off", NULL}, *const layers[] = {"auto", "off", NULL},
                           *const coll[] = {"auto", "steps", "flow", "analytic", NULL},
                           *const engine[] = {"auto", "simgrid", "direct", NULL};
  memset(o, 0, sizeof *o);
  o->max_events = -1;
  bs_args a;
  int m;
  bs_args_init(&a, argc, argv, 1, err, errlen);
  while (bs_args_next(&a)) {
    if (!strcmp(a.word, "--help") || !strcmp(a.word, "-h")) {
      o->help = 1;
      return 0;
    }
    if (FLAG("--set", BS_ARG_VALUE | BS_ARG_REPEAT)) CHECK(add_set(&a, o->sets, &o->nsets));
    else if (FLAG("--profile", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->profile));
    else if (FLAG("--out", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->out));
    else if (FLAG("--csv", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->csv));
    else if (FLAG("--trace", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->trace));
    else if (FLAG("--fold", BS_ARG_VALUE)) CHECK(bs_args_enum(&a, fold, &o->fold));
    else if (FLAG("--layers", BS_ARG_VALUE)) CHECK(bs_args_enum(&a, layers, &o->layers));
    else if (FLAG("--micro-batches", BS_ARG_VALUE)) CHECK(bs_args_enum(&a, layers, &o->micro_batches));
    else if (FLAG("--coll", BS_ARG_VALUE)) CHECK(bs_args_enum(&a, coll, &o->coll));
    else if (FLAG("--engine", BS_ARG_VALUE)) CHECK(bs_args_enum(&a, engine, &o->engine));
    else if (FLAG("--nodes-per-leaf", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, 1 << 20, &o->nodes_per_leaf));
    else if (FLAG("--oversub", BS_ARG_VALUE)) CHECK(bs_args_double(&a, 1, 1e6, &o->oversub));
    else if (FLAG("--timeout", BS_ARG_VALUE)) CHECK(bs_args_double(&a, 0.001, BS_ARGS_MAX_TIMEOUT, &o->timeout));
    else if (FLAG("--max-events", BS_ARG_VALUE)) CHECK(bs_args_double(&a, 0, 1e18, &o->max_events));
    else if (FLAG("--quiet", BS_ARG_SWITCH)) {
      CHECK(0);
      o->quiet = 1;
    } else if (FLAG("--explain", BS_ARG_SWITCH)) {
      CHECK(0);
      o->explain = 1;
    } else if (FLAG("--memory", BS_ARG_SWITCH)) {
      CHECK(0);
      o->memory = 1;
    } else if (FLAG("--no-cache", BS_ARG_SWITCH)) {
      CHECK(0);
      o->no_cache = 1;
    } else if (m < 0) return -1;
    else if (bs_args_positional(&a)) {
      if (one_positional(&a, &o->scenario, "scenario file")) return -1;
    } else return bs_args_unknown(&a, NULL);
  }
  if (!o->scenario) return bs_args_fail(&a, "no scenario file");
  return 0;
}

int bs_calib_args_parse(int argc, char **argv, bs_calib_args *o, char *err, size_t errlen) {
  static const char *const backend[] = {"cpu", "cuda", NULL}, *const dtype[] = {"fp32", "bf16", "both", NULL},
                           *const primary[] = {"fp32", "bf16", NULL};
  memset(o, 0, sizeof *o);
  o->primary_bf16 = -1;
  o->fp32 = o->bf16 = 1;
  bs_args a;
  int m, k;
  bs_args_init(&a, argc, argv, 1, err, errlen);
  while (bs_args_next(&a)) {
    if (!strcmp(a.word, "--help") || !strcmp(a.word, "-h")) {
      o->help = 1;
      return 0;
    }
    if (FLAG("--quick", BS_ARG_SWITCH)) {
      CHECK(0);
      o->quick = 1;
    } else if (FLAG("--no-links", BS_ARG_SWITCH)) {
      CHECK(0);
      o->no_links = 1;
    } else if (FLAG("--no-kernels", BS_ARG_SWITCH)) {
      CHECK(0);
      o->no_kernels = 1;
    } else if (FLAG("--out", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->out));
    else if (FLAG("--plots", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->plots));
    else if (FLAG("--backend", BS_ARG_VALUE)) CHECK(bs_args_enum(&a, backend, &o->backend));
    else if (FLAG("--dtype", BS_ARG_VALUE)) {
      CHECK(bs_args_enum(&a, dtype, &k));
      o->fp32 = k != 1;
      o->bf16 = k != 0;
    } else if (FLAG("--primary", BS_ARG_VALUE)) CHECK(bs_args_enum(&a, primary, &o->primary_bf16));
    else if (FLAG("--head-dim", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, 4096, &o->head_dim));
    else if (FLAG("--max-block", BS_ARG_VALUE)) CHECK(bs_args_int64(&a, 1, (int64_t)1 << 30, &o->max_block));
    else if (FLAG("--threads", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, BS_ARGS_MAX_THREADS, &o->threads));
    else if (FLAG("--ranks-per-node", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, 4096, &o->ranks_per_node));
    else if (FLAG("--timeout", BS_ARG_VALUE)) CHECK(bs_args_double(&a, 0.001, BS_ARGS_MAX_TIMEOUT, &o->timeout));
    else if (m < 0) return -1;
    else return bs_args_unknown(&a, bs_args_positional(&a) ? "calib takes no positional argument" : NULL);
  }
  if (!o->out) return bs_args_fail(&a, "--out PROFILE.json is required");
  if (o->no_kernels && o->no_links) return bs_args_fail(&a, "--no-kernels and --no-links leave nothing to measure");
  if (o->primary_bf16 < 0) o->primary_bf16 = o->bf16 && !o->fp32 ? 1 : o->fp32 && !o->bf16 ? 0 : 1;
  if (o->primary_bf16 && !o->bf16) return bs_args_fail(&a, "--primary bf16 needs bf16 among --dtype");
  if (!o->primary_bf16 && !o->fp32) return bs_args_fail(&a, "--primary fp32 needs fp32 among --dtype");
  return 0;
}

int bs_validate_args_parse(int argc, char **argv, bs_validate_args *o, char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  o->warmup = 1;
  bs_args a;
  int m;
  bs_args_init(&a, argc, argv, 1, err, errlen);
  while (bs_args_next(&a)) {
    if (!strcmp(a.word, "--help") || !strcmp(a.word, "-h")) {
      o->help = 1;
      return 0;
    }
    if (FLAG("--set", BS_ARG_VALUE | BS_ARG_REPEAT)) {
      /* Each point's run is spawned with these on its command line (calib/validate.c). */
      CHECK(o->nsets == BS_ARGS_VALIDATE_MAX_SETS
              ? bs_args_fail(&a, "--set: at most %d overrides for validate", BS_ARGS_VALIDATE_MAX_SETS)
              : add_set(&a, o->sets, &o->nsets));
    } else if (FLAG("--profile", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->profile));
    else if (FLAG("--out", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->out));
    else if (FLAG("--workdir", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->workdir));
    else if (FLAG("--full-calib", BS_ARG_SWITCH)) {
      CHECK(0);
      o->full_calib = 1;
    } else if (FLAG("--fail-exact", BS_ARG_SWITCH)) {
      CHECK(0);
      o->fail_exact = 1;
    } else if (FLAG("--keep", BS_ARG_SWITCH)) {
      CHECK(0);
      o->keep = 1;
    } else if (FLAG("--np", BS_ARG_VALUE | BS_ARG_REPEAT)) {
      CHECK(0);
      if (o->nnp == BS_ARGS_MAX_NP) return bs_args_fail(&a, "--np: at most %d of them", BS_ARGS_MAX_NP);
      CHECK(bs_args_int(&a, 1, 4096, &o->nps[o->nnp]));
      o->nnp++;
    } else if (FLAG("--warmup", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 0, 100, &o->warmup));
    else if (FLAG("--backend", BS_ARG_VALUE)) CHECK(bs_args_enum(&a, backends, &o->backend));
    else if (FLAG("--comm", BS_ARG_VALUE)) CHECK(bs_args_enum(&a, comms, &o->comm));
    else if (FLAG("--fail-factor", BS_ARG_VALUE)) {
      CHECK(bs_args_double(&a, 0, 1e6, &o->fail_factor));
      if (!(o->fail_factor > 0)) return bs_args_fail(&a, "--fail-factor: '%s' must be positive", a.val);
    } else if (m < 0) return -1;
    else if (bs_args_positional(&a)) {
      if (one_positional(&a, &o->scenario, "scenario file")) return -1;
    } else return bs_args_unknown(&a, NULL);
  }
  if (!o->scenario) return bs_args_fail(&a, "a SCENARIO.ini is required");
  if (backend_pair(&a, o->backend, o->comm)) return -1;
  return 0;
}

int bs_bench_args_parse(int argc, char **argv, bs_bench_args *o, char *err, size_t errlen) {
  static const char *const backend[] = {"cpu", NULL};
  memset(o, 0, sizeof *o);
  bs_args a;
  int m, k;
  bs_args_init(&a, argc, argv, 1, err, errlen);
  if (!bs_args_next(&a)) return bs_args_fail(&a, "expected 'kernels'");
  if (!strcmp(a.word, "--help") || !strcmp(a.word, "-h")) {
    o->help = 1;
    return 0;
  }
  if (strcmp(a.word, "kernels")) return bs_args_fail(&a, "expected 'kernels', got '%s'", a.word);
  while (bs_args_next(&a)) {
    if (!strcmp(a.word, "--help") || !strcmp(a.word, "-h")) {
      o->help = 1;
      return 0;
    }
    if (FLAG("--quick", BS_ARG_SWITCH)) {
      CHECK(0);
      o->quick = 1;
    } else if (FLAG("--json", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->json));
    else if (FLAG("--backend", BS_ARG_VALUE)) {
      if (m > 0 && !strcmp(a.val, "cuda"))
        return bs_args_fail(&a,
                            "--backend cuda: bench times the CPU kernels only; the GPU kernels are timed by "
                            "calib --backend cuda");
      CHECK(bs_args_enum(&a, backend, &k));
    } else if (FLAG("--threads", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, BS_ARGS_MAX_THREADS, &o->threads));
    else if (FLAG("--heads", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, 1024, &o->heads));
    else if (m < 0) return -1;
    else return bs_args_unknown(&a, bs_args_positional(&a) ? "bench kernels takes no other argument" : NULL);
  }
  return 0;
}

int bs_topo_args_parse(int argc, char **argv, bs_topo_args *o, char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  o->nodes = 1;
  bs_args a;
  int m;
  bs_args_init(&a, argc, argv, 1, err, errlen);
  while (bs_args_next(&a)) {
    if (!strcmp(a.word, "--help") || !strcmp(a.word, "-h")) {
      o->help = 1;
      return 0;
    }
    if (FLAG("--nodes", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, 1 << 20, &o->nodes));
    else if (FLAG("--nodes-per-leaf", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, 1 << 20, &o->nodes_per_leaf));
    else if (FLAG("--gpus", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, 1 << 20, &o->gpus));
    else if (FLAG("--oversub", BS_ARG_VALUE)) CHECK(bs_args_double(&a, 1, 1e6, &o->oversub));
    else if (FLAG("--profile", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->profile));
    else if (m < 0) return -1;
    else if (bs_args_positional(&a)) {
      if (one_positional(&a, &o->name, "topology name")) return -1;
    } else return bs_args_unknown(&a, NULL);
  }
  if (!o->name) return bs_args_fail(&a, "no topology name");
  if (o->gpus && strcmp(o->name, "host"))
    return bs_args_fail(&a, "--gpus: for the host topology only, not %s", o->name);
  return 0;
}

/* search words its errors its own way: "--out needs a value", a count for --top, an option given a
 * value it does not take is unknown. */
static int search_flag_error(bs_args *a) {
  if (strchr(a->word, '=')) return bs_args_unknown(a, NULL);
  return bs_args_fail(a, "%s needs a value", a->flag);
}

int bs_search_args_parse(int argc, char **argv, bs_search_args *o, char *err, size_t errlen) {
  const int sw = BS_ARG_SWITCH | BS_ARG_REPEAT, val = BS_ARG_VALUE | BS_ARG_REPEAT; /* the last one given wins */
  memset(o, 0, sizeof *o);
  o->top = 10;
  bs_args a;
  int m;
  bs_args_init(&a, argc, argv, 1, err, errlen);
  while (bs_args_next(&a)) {
    if (!strcmp(a.word, "--help") || !strcmp(a.word, "-h")) {
      o->help = 1;
      return 0;
    }
    int *on = NULL;
    const char **path = NULL;
    if (FLAG("--quiet", sw)) on = &o->quiet;
    else if (FLAG("--dry-run", sw)) on = &o->dry_run;
    else if (FLAG("--top-only", sw)) on = &o->top_only;
    else if (FLAG("--force", sw)) on = &o->force;
    else if (FLAG("--no-cache", sw)) on = &o->no_cache;
    else if (FLAG("--walk-all", sw)) on = &o->walk_all;
    else if (FLAG("--out", val)) path = &o->out;
    else if (FLAG("--csv", val)) path = &o->csv;
    else if (FLAG("--report", val)) path = &o->report;
    else if (FLAG("--profile", val)) path = &o->profile;
    else if (FLAG("--top", val) || FLAG("--set", val) || FLAG("--timeout", val)) {
    } else if (bs_args_positional(&a)) {
      if (one_positional(&a, &o->scenario, "scenario")) return -1;
      continue;
    } else return bs_args_unknown(&a, NULL);
    if (m < 0) return search_flag_error(&a);
    if (on) *on = 1;
    else if (path) *path = a.val;
    else if (!strcmp(a.flag, "--top")) {
      if (bs_args_int(&a, 1, BS_ARGS_SEARCH_MAX_TOP, &o->top))
        return bs_args_fail(&a, "--top: '%s' is not a count from 1 to %d", a.val, BS_ARGS_SEARCH_MAX_TOP);
    } else if (!strcmp(a.flag, "--timeout")) {
      if (bs_args_double(&a, 0.001, BS_ARGS_MAX_TIMEOUT, &o->timeout)) return -1;
    } else {
      if (o->nsets == BS_ARGS_SEARCH_MAX_SETS) return bs_args_fail(&a, "--set: more than %d", BS_ARGS_SEARCH_MAX_SETS);
      o->sets[o->nsets++] = (char *)a.val;
    }
  }
  if (!o->scenario) return bs_args_fail(&a, "no scenario given");
  return 0;
}

int bs_diff_args_parse(int argc, char **argv, bs_diff_args *o, char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  bs_args a;
  int m;
  bs_args_init(&a, argc, argv, 1, err, errlen);
  while (bs_args_next(&a)) {
    if (!strcmp(a.word, "--help") || !strcmp(a.word, "-h")) {
      o->help = 1;
      return 0;
    }
    if (FLAG("--out", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->out));
    else if (m < 0) return -1;
    else if (bs_args_positional(&a)) {
      if (!o->a) o->a = a.word;
      else if (!o->b) o->b = a.word;
      else return bs_args_unknown(&a, "a third result file (diff takes two)");
    } else return bs_args_unknown(&a, NULL);
  }
  if (!o->b) return bs_args_fail(&a, "two result files are needed (A.json B.json)");
  return 0;
}

int bs_import_args_parse(int argc, char **argv, bs_import_args *o, char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  bs_args a;
  int m;
  bs_args_init(&a, argc, argv, 1, err, errlen);
  while (bs_args_next(&a)) {
    if (!strcmp(a.word, "--help") || !strcmp(a.word, "-h")) {
      o->help = 1;
      return 0;
    }
    if (FLAG("--out", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->out));
    else if (FLAG("--gpus", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, 1 << 20, &o->gpus));
    else if (FLAG("--topology", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->topology));
    else if (m < 0) return -1;
    else if (bs_args_positional(&a)) {
      if (!o->framework) o->framework = a.word;
      else if (!o->file) o->file = a.word;
      else return bs_args_unknown(&a, "a second arguments file");
    } else return bs_args_unknown(&a, NULL);
  }
  if (!o->framework) return bs_args_fail(&a, "no framework (megatron, nemo or torchtitan)");
  if (strcmp(o->framework, "megatron") && strcmp(o->framework, "torchtitan") && strcmp(o->framework, "nemo"))
    return bs_args_fail(&a, "'%s': megatron, nemo or torchtitan", o->framework);
  if (!o->file)
    return bs_args_fail(&a,
                        "no configuration file (megatron: the flags of a pretrain_gpt.py launch; torchtitan: "
                        "a train config .toml)");
  return 0;
}

int bs_export_args_parse(int argc, char **argv, bs_export_args *o, char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  o->point = 1;
  bs_args a;
  int m;
  bs_args_init(&a, argc, argv, 1, err, errlen);
  while (bs_args_next(&a)) {
    if (!strcmp(a.word, "--help") || !strcmp(a.word, "-h")) {
      o->help = 1;
      return 0;
    }
    if (FLAG("--out", BS_ARG_VALUE)) CHECK(bs_args_path(&a, &o->out));
    else if (FLAG("--point", BS_ARG_VALUE)) CHECK(bs_args_int(&a, 1, 1 << 30, &o->point));
    else if (m < 0) return -1;
    else if (bs_args_positional(&a)) {
      if (!o->framework) o->framework = a.word;
      else if (!o->file) o->file = a.word;
      else return bs_args_unknown(&a, "a second result file");
    } else return bs_args_unknown(&a, NULL);
  }
  if (!o->framework) return bs_args_fail(&a, "no framework (megatron, nemo or torchtitan)");
  if (strcmp(o->framework, "megatron") && strcmp(o->framework, "torchtitan") && strcmp(o->framework, "nemo"))
    return bs_args_fail(&a, "'%s': megatron, nemo or torchtitan", o->framework);
  if (!o->file) return bs_args_fail(&a, "no result file (burstsim sim --out or search --out)");
  return 0;
}
