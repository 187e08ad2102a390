/*
 * cmd_import.c — `burstsim import megatron ARGS.txt [--gpus N] [--out S.ini]`: a scenario from the
 * flags of a Megatron-LM pretrain_gpt.py launch (a file as Megatron's example scripts hold them).
 * Every flag goes through the table of megatron_flags.c: mapped flags are printed on stderr as
 * "mapped --flag V -> key = value", ignored ones with the reason, and a flag the simulator cannot
 * model is refused (exit 2, the flag named). The scenario (one model-scope training step, causal)
 * goes to --out, written atomically, or to stdout.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "cmd_args.h"
#include "commands.h"
#include "import_out.h"
#include "megatron_flags.h"
#include "import_nemo.h"
#include "import_torchtitan.h"

typedef struct {
  const bs_mg_args *args;
  const bs_import_args *opt;
  bs_import_out out;
  long layers, hidden, heads, tp, pp, cp, world;
} importer;

static void import_usage(FILE *f) {
  fprintf(f,
          "usage: burstsim import megatron ARGS.txt [--gpus N] [--topology T] [--out S.ini]\n"
          "       burstsim import nemo CONFIG.yaml [--gpus N] [--topology T] [--out S.ini]\n"
          "       burstsim import torchtitan CONFIG.toml --gpus N [--topology T] [--out S.ini]\n"
          "\n"
          "torchtitan: a llama3 train config (TOML): the model flavor, [training] batch and\n"
          "sequence, [parallelism] degrees (FSDP2 over dp_shard x cp is ZeRO 3, DDP is ZeRO 0),\n"
          "the pipeline schedule (1F1B, Interleaved1F1B), [activation_checkpoint], float8; each\n"
          "setting is printed as mapped, ignored (with why) or refused, as for megatron.\n"
          "nemo: a NeMo training config (Hydra YAML: model.*, trainer.devices x num_nodes); its\n"
          "model.* keys are Megatron's arguments by name, translated (each named, with its line)\n"
          "and then mapped by the Megatron table below.\n"
          "megatron:\n"
          "Writes a scenario (model scope, one training step) from the flags of a Megatron-LM\n"
          "pretrain_gpt.py launch: a file holding them as Megatron's example scripts do (bash\n"
          "arrays, backslash continuations, NAME=value lines and $NAME are read; comments and\n"
          "words that are no flag are skipped). Each flag mapped is printed on stderr (flag ->\n"
          "key = value), each flag ignored with why; a flag the simulator cannot model (MoE,\n"
          "uneven pipeline stages, ...) is refused: exit 2.\n"
          "\n"
          "  --gpus N       the world size (else WORLD_SIZE=N in the file, else --nnodes x\n"
          "                --nproc-per-node)\n"
          "  --topology T   cluster.topology of the scenario (else the simulator's default)\n"
          "  --out S.ini    where the scenario goes (default: stdout)\n");
}

/* A line of the log: "mapped", "ignored", "note" (import_out.h). */
static void say(importer *im, const char *what, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(importer *im, const char *what, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bs_import_vsay(&im->out, what, fmt, ap);
  va_end(ap);
}

#define put(im, ...) bs_import_put(&(im)->out, __VA_ARGS__)

/* The last occurrence of a flag, or NULL. */
static const bs_mg_arg *arg(const importer *im, const char *name) {
  for (int i = im->args->n - 1; i >= 0; i--)
    if (!strcmp(im->args->v[i].name, name)) return &im->args->v[i];
  return NULL;
}

static void refuse(importer *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(importer *im, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bs_import_vsay(&im->out, "refused", fmt, ap);
  va_end(ap);
}

/* A flag's positive integer (def when absent, -1 refused when not an integer). */
static long int_of(importer *im, const char *name, long def) {
  const bs_mg_arg *a = arg(im, name);
  if (!a) return def;
  char *end;
  long x = strtol(a->val, &end, 10);
  if (!a->val[0] || *end || x <= 0) {
    refuse(im, "--%s '%s': not a positive integer (line %d)", name, a->val, a->line);
    return -1;
  }
  return x;
}

/* Each flag of the file once: ignored, refused, or left to the mapping below. */
static void sort_flags(importer *im) {
  for (int i = 0; i < im->args->n; i++) {
    const bs_mg_arg *a = &im->args->v[i];
    if (arg(im, a->name) != a) continue; /* the last occurrence counts */
    const bs_mg_flag *f = bs_mg_find(a->name);
    const char *sp = a->val[0] ? " " : "";
    if (!f)
      say(im, "ignored", "--%s%s%s: unknown to this importer (check it has no effect on the step)", a->name, sp,
          a->val);
    else if (f->kind == BS_MG_IGNORE) say(im, "ignored", "--%s%s%s: %s", a->name, sp, a->val, f->why);
    else if (f->kind == BS_MG_REFUSE && strstr(a->name, "parallel-size") && !strcmp(a->val, "1"))
      say(im, "ignored", "--%s 1: no experts", a->name);
    else if (f->kind == BS_MG_REFUSE) refuse(im, "--%s%s%s: cannot be modelled: %s", a->name, sp, a->val, f->why);
  }
}

/* The integer and switch rows of the table: key = value. */
static void map_table(importer *im) {
  int n;
  const bs_mg_flag *t = bs_mg_flags(&n);
  for (int i = 0; i < n; i++) {
    const bs_mg_arg *a = arg(im, t[i].flag);
    if (t[i].kind == BS_MG_INT && a && t[i].key) {
      long x = int_of(im, t[i].flag, 0);
      if (x < 0) continue;
      put(im, t[i].key, "%ld", x);
      say(im, "mapped", "--%s %ld -> %s = %ld", t[i].flag, x, t[i].key, x);
    } else if (t[i].kind == BS_MG_SWITCH && a) {
      put(im, t[i].key, "%s", t[i].on);
      say(im, "mapped", "--%s -> %s = %s", t[i].flag, t[i].key, t[i].on);
    } else if (t[i].kind == BS_MG_SWITCH && t[i].off) {
      put(im, t[i].key, "%s", t[i].off);
      say(im, "mapped", "(no --%s) -> %s = %s", t[i].flag, t[i].key, t[i].off);
    }
  }
}

/* The model's rules: required sizes, GQA, head dimension, MLP width, vocabulary, types. */
static void map_model(importer *im) {
  static const char *const need[] = {"num-layers", "hidden-size", "num-attention-heads", "seq-length", NULL};
  for (int i = 0; need[i]; i++)
    if (!arg(im, need[i])) refuse(im, "--%s: missing (Megatron needs it too)", need[i]);
  im->layers = int_of(im, "num-layers", 0);
  im->hidden = int_of(im, "hidden-size", 0);
  im->heads = int_of(im, "num-attention-heads", 0);
  if (im->layers <= 0 || im->hidden <= 0 || im->heads <= 0) return;
  long groups = int_of(im, "num-query-groups", 0);
  if (arg(im, "group-query-attention") && groups > 0) {
    put(im, "model.kv_heads", "%ld", groups);
    say(im, "mapped", "--group-query-attention --num-query-groups %ld -> model.kv_heads = %ld", groups, groups);
  } else {
    if (groups > 0)
      say(im, "ignored", "--num-query-groups %ld: without --group-query-attention Megatron ignores it", groups);
    put(im, "model.kv_heads", "%ld", im->heads);
    say(im, "mapped", "(no --group-query-attention) -> model.kv_heads = %ld (= heads)", im->heads);
  }
  if (!arg(im, "kv-channels")) {
    put(im, "model.head_dim", "%ld", im->hidden / im->heads);
    say(im, "mapped", "(no --kv-channels) -> model.head_dim = %ld (hidden / heads)", im->hidden / im->heads);
  }
  int swiglu = arg(im, "swiglu") != NULL;
  long ffn = int_of(im, "ffn-hidden-size", 0);
  if (ffn < 0) return;
  if (!ffn) ffn = swiglu ? 4 * im->hidden * 2 / 3 / 64 * 64 : 4 * im->hidden; /* Megatron's defaults */
  long f = swiglu ? ffn : (2 * ffn + 1) / 3;
  put(im, "model.ffn", "%ld", f);
  if (swiglu) say(im, "mapped", "--swiglu --ffn-hidden-size %ld -> model.ffn = %ld", ffn, f);
  else
    say(im, "mapped", "(no --swiglu) GeLU MLP of %ld -> model.ffn = %ld (SwiGLU of 2F/3: the same weights and FLOPs)",
        ffn, f);
  long vocab = int_of(im, "padded-vocab-size", 0), raw = int_of(im, "vocab-size", 0);
  long mult = int_of(im, "make-vocab-size-divisible-by", 128) * int_of(im, "tensor-model-parallel-size", 1);
  if (vocab > 0) say(im, "mapped", "--padded-vocab-size %ld -> model.vocab = %ld", vocab, vocab);
  else if (raw > 0 && mult > 0) {
    vocab = (raw + mult - 1) / mult * mult;
    say(im, "mapped", "--vocab-size %ld -> model.vocab = %ld (padded to a multiple of %ld, as Megatron pads)", raw,
        vocab, mult);
  } else if (!vocab && !raw)
    refuse(im,
           "--padded-vocab-size: missing (Megatron reads the vocabulary from the tokenizer; give "
           "--padded-vocab-size or --vocab-size)");
  if (vocab > 0) put(im, "model.vocab", "%ld", vocab);
  if (arg(im, "untie-embeddings-and-output-weights"))
    say(im, "mapped", "--untie-embeddings-and-output-weights: the simulator holds the embedding and the LM head apart");
  else
    say(im, "note",
        "(no --untie-embeddings-and-output-weights) Megatron ties the embedding and the LM head; the "
        "simulator holds them apart (with pp 1: vocab x hidden / tp more weights than the job)");
  if (!arg(im, "bf16") && !arg(im, "fp16")) {
    put(im, "model.dtype", "fp32");
    say(im, "mapped", "(no --bf16, --fp16) -> model.dtype = fp32");
  }
  const bs_mg_arg *fp8 = arg(im, "fp8-format");
  if (fp8 && (!strcmp(fp8->val, "e4m3") || !strcmp(fp8->val, "hybrid"))) {
    put(im, "model.fp8", "all");
    say(im, "mapped", "--fp8-format %s -> model.fp8 = all (every linear layer of the blocks)", fp8->val);
  } else if (fp8) refuse(im, "--fp8-format '%s': e4m3 or hybrid", fp8->val);
}

/* Recomputation: --recompute-activations (selective) or --recompute-granularity. */
static void map_recompute(importer *im) {
  const bs_mg_arg *g = arg(im, "recompute-granularity");
  if (g && (!strcmp(g->val, "full") || !strcmp(g->val, "selective"))) {
    put(im, "workload.recompute", "%s", g->val);
    say(im, "mapped", "--recompute-granularity %s -> workload.recompute = %s", g->val, g->val);
  } else if (g) refuse(im, "--recompute-granularity '%s': full or selective", g->val);
  else if (!arg(im, "recompute-activations")) {
    put(im, "workload.recompute", "off");
    say(im, "mapped", "(no --recompute-*) -> workload.recompute = off");
  }
}

/* The world size: --gpus, else WORLD_SIZE=N, else --nnodes x --nproc-per-node. */
static void map_world(importer *im) {
  long nodes = int_of(im, "nnodes", 0), per = int_of(im, "nproc-per-node", 0);
  if (im->opt->gpus) {
    im->world = im->opt->gpus;
    say(im, "mapped", "import --gpus %ld -> parallel.gpus = %ld", im->world, im->world);
  } else if (im->args->world > 0) {
    im->world = im->args->world;
    say(im, "mapped", "WORLD_SIZE=%ld -> parallel.gpus = %ld", im->world, im->world);
  } else if (nodes > 0 && per > 0) {
    im->world = nodes * per;
    say(im, "mapped", "--nnodes %ld --nproc-per-node %ld -> parallel.gpus = %ld", nodes, per, im->world);
  } else
    refuse(im,
           "the world size: missing (give import --gpus N, or WORLD_SIZE=N or --nnodes and "
           "--nproc-per-node in the file)");
  if (im->world > 0) put(im, "parallel.gpus", "%ld", im->world);
}

/* Context parallelism: its degree (the rest of the world after tp, dp, pp) and its kind. */
static void map_cp(importer *im) {
  const bs_mg_arg *t = arg(im, "cp-comm-type");
  const char *type = t ? t->val : "p2p";
  if (im->cp <= 1) {
    put(im, "parallel.method", "ring");
    say(im, "mapped", "(context parallel size 1) -> parallel.method = ring (over groups of one rank)");
    if (t) say(im, "ignored", "--cp-comm-type %s: no context parallelism", type);
    return;
  }
  say(im, "mapped", "--context-parallel-size %ld -> parallel.cp = %ld (gpus / (tp x dp x pp))", im->cp, im->cp);
  if (!strcmp(type, "p2p")) {
    put(im, "parallel.method", "ring");
    put(im, "parallel.layout", "zigzag");
    put(im, "parallel.double_ring", "off");
    say(im, "mapped", "--cp-comm-type p2p -> parallel.method = ring, layout = zigzag, double_ring = off");
  } else if (!strcmp(type, "a2a")) {
    put(im, "parallel.method", "ulysses");
    say(im, "mapped", "--cp-comm-type a2a -> parallel.method = ulysses");
  } else if (!strcmp(type, "a2a+p2p")) {
    const bs_mg_arg *h = arg(im, "hierarchical-context-parallel-sizes");
    long a2a = 0, p2p = 0;
    if (!h || sscanf(h->val, "%ld %ld", &a2a, &p2p) != 2 || a2a <= 0 || p2p <= 0 || a2a * p2p != im->cp) {
      refuse(im, "--cp-comm-type a2a+p2p: needs --hierarchical-context-parallel-sizes A2A P2P with A2A x P2P = %ld",
             im->cp);
      return;
    }
    put(im, "parallel.method", "usp");
    put(im, "parallel.ulysses_degree", "%ld", a2a);
    put(im, "parallel.ulysses_placement", "head-first");
    say(im, "mapped",
        "--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes %ld %ld -> parallel.method = usp, "
        "ulysses_degree = %ld, ulysses_placement = head-first",
        a2a, p2p, a2a);
  } else if (!strcmp(type, "all_gather")) {
    put(im, "parallel.method", "allgather");
    put(im, "parallel.layout", "zigzag");
    say(im, "mapped", "--cp-comm-type all_gather -> parallel.method = allgather, layout = zigzag");
  } else refuse(im, "--cp-comm-type '%s': one type for every layer, p2p, a2a, a2a+p2p or all_gather", type);
}

/* The rank grid: dp from the world, the batch, the interleaved pipeline, context parallelism. */
static void map_parallel(importer *im) {
  map_world(im);
  im->tp = int_of(im, "tensor-model-parallel-size", 1);
  im->pp = int_of(im, "pipeline-model-parallel-size", 1);
  im->cp = int_of(im, "context-parallel-size", 1);
  long mbs = int_of(im, "micro-batch-size", 1);
  static const char *const grid_flags[][2] = {{"tensor-model-parallel-size", "parallel.tp"},
                                              {"pipeline-model-parallel-size", "parallel.pp"}};
  for (int i = 0; i < 2; i++)
    if (!arg(im, grid_flags[i][0])) {
      put(im, grid_flags[i][1], "1");
      say(im, "mapped", "(no --%s) -> %s = 1", grid_flags[i][0], grid_flags[i][1]);
    }
  if (im->world <= 0 || im->tp <= 0 || im->pp <= 0 || im->cp <= 0 || mbs <= 0) return;
  long grid = im->tp * im->pp * im->cp;
  if (im->world % grid) {
    refuse(im, "the world size %ld: not a multiple of tp x pp x cp = %ld", im->world, grid);
    return;
  }
  long dp = im->world / grid;
  put(im, "parallel.dp", "%ld", dp);
  say(im, "mapped", "(data parallel) -> parallel.dp = %ld (gpus / (tp x pp x cp))", dp);
  if (!arg(im, "micro-batch-size")) put(im, "parallel.micro_batch", "1");
  long gbs = int_of(im, "global-batch-size", mbs * dp);
  if (!arg(im, "global-batch-size")) {
    put(im, "workload.batch", "%ld", gbs);
    say(im, "mapped", "(no --global-batch-size) -> workload.batch = %ld (micro batch x dp)", gbs);
  }
  if (gbs > 0 && gbs % (mbs * dp))
    refuse(im, "--global-batch-size %ld: not a multiple of micro batch x dp = %ld", gbs, mbs * dp);
  long per = int_of(im, "num-layers-per-virtual-pipeline-stage", 0),
       v = int_of(im, "virtual-pipeline-model-parallel-size", 0);
  if (per > 0 && im->layers > 0 && im->layers % (im->pp * per))
    refuse(im, "--num-layers-per-virtual-pipeline-stage %ld: pp x %ld does not divide %ld layers", per, per,
           im->layers);
  else if (per > 0 && im->layers > 0) v = im->layers / (im->pp * per);
  if (v > 0 && im->pp < 2) refuse(im, "a virtual pipeline needs --pipeline-model-parallel-size 2 or more");
  else if (v > 0) {
    put(im, "parallel.pp_schedule", "interleaved");
    put(im, "parallel.pp_chunks", "%ld", v);
    say(im, "mapped", "--%s %ld -> parallel.pp_schedule = interleaved, pp_chunks = %ld",
        per > 0 ? "num-layers-per-virtual-pipeline-stage" : "virtual-pipeline-model-parallel-size", per > 0 ? per : v,
        v);
  }
  map_cp(im);
}

/* Megatron-LM: the flags of an arguments file (or, for nemo, of a NeMo YAML config translated by
 * import_nemo.c) mapped into out. 0, or -1 with a message in err when the file cannot be read. */
static int import_megatron(const char *text, const bs_import_args *A, bs_import_out *out, char *err, size_t errlen) {
  bs_mg_args args;
  int nemo = !strcmp(A->framework, "nemo");
  if (nemo ? bs_nemo_args(text, &args, out, err, errlen) : bs_mg_args_read(text, &args, err, errlen)) return -1;
  importer im = {.args = &args, .opt = A, .out = *out};
  put(&im, "workload.phase", "train");
  put(&im, "workload.scope", "model");
  put(&im, "workload.causal", "true");
  put(&im, "workload.framework", "megatron");
  say(&im, "mapped", "%s -> workload.framework = megatron (Megatron-LM with Transformer Engine: docs/frameworks.md)",
      nemo ? "NeMo" : "Megatron-LM");
  sort_flags(&im);
  map_table(&im);
  map_model(&im);
  map_recompute(&im);
  map_parallel(&im);
  bs_mg_args_free(&args);
  *out = im.out;
  return 0;
}

int cmd_import(int argc, char **argv) {
  bs_import_args A;
  char err[1200];
  if (bs_import_args_parse(argc, argv, &A, err, sizeof err)) {
    fprintf(stderr, "burstsim import: %s\n", err);
    return 2;
  }
  if (A.help) {
    import_usage(stdout);
    return 0;
  }
  const bs_path_role outs[] = {{"--out", A.out}}, ins[] = {{"the configuration file", A.file}};
  if (A.out && bs_out_check_all(outs, 1, ins, 1, err, sizeof err)) {
    fprintf(stderr, "burstsim import: %s\n", err);
    return 2;
  }
  char *text = bs_read_file(A.file, NULL, err, sizeof err);
  if (!text) {
    fprintf(stderr, "burstsim import: %s\n", err);
    return 2;
  }
  bs_import_out *out = calloc(1, sizeof *out);
  if (!out) {
    free(text);
    fprintf(stderr, "burstsim import: out of memory\n");
    return 1;
  }
  out->log = stderr;
  int megatron = strcmp(A.framework, "torchtitan") != 0; /* nemo: Megatron's flags by name */
  int rc =
    megatron ? import_megatron(text, &A, out, err, sizeof err) : bs_import_torchtitan(text, &A, out, err, sizeof err);
  free(text);
  if (rc) {
    fprintf(stderr, "burstsim import: %s: %s\n", A.file, err);
    free(out);
    return 2;
  }
  if (A.topology) bs_import_put(out, "cluster.topology", "%s", A.topology);
  else
    bs_import_say(
      out, "note",
      "cluster.topology: not in the %s configuration; the simulator's default applies (import --topology T)",
      A.framework);
  if (out->full) bs_import_say(out, "refused", "the scenario: a key or value too long for the importer's table");
  if (out->refused) {
    fprintf(stderr, "burstsim import: %d setting(s) refused (above); no scenario written\n", out->refused);
    free(out);
    return 2;
  }
  char comment[1100];
  snprintf(comment, sizeof comment, "burstsim import %s %s: one training step of the job, model scope", A.framework,
           A.file);
  size_t len;
  char *ini = bs_import_scenario(out, comment, &len);
  rc = ini ? bs_write_file(A.out ? A.out : "-", ini, len, err, sizeof err) : -1;
  if (rc) fprintf(stderr, "burstsim import: %s\n", ini ? err : "out of memory");
  free(ini);
  free(out);
  return rc ? 1 : 0;
}
