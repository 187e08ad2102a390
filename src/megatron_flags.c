/*
 * megatron_flags.c — the table of Megatron-LM flags (megatron_flags.h) and the reader of a launch's
 * arguments file. Flag names and meanings are those of megatron/training/arguments.py; a flag not
 * in the table is reported by the importer as unknown and ignored.
 */
#include "megatron_flags.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INT(f, k, r) \
  { f, BS_MG_INT, k, NULL, NULL, r, NULL }
#define SWITCH(f, k, on, off, r) \
  { f, BS_MG_SWITCH, k, on, off, r, NULL }
#define RULE(f, r, why) \
  { f, BS_MG_RULE, NULL, NULL, NULL, r, why }
#define IGNORE(f, why) \
  { f, BS_MG_IGNORE, NULL, NULL, NULL, NULL, why }
#define REFUSE(f, why) \
  { f, BS_MG_REFUSE, NULL, NULL, NULL, NULL, why }

static const char NO_STEP[] = "no effect on the step time";

static const bs_mg_flag table[] = {
  /* the model */
  INT("num-layers", "model.layers", "model.layers"),
  INT("hidden-size", "model.hidden", "model.hidden"),
  RULE("ffn-hidden-size", "model.ffn", "model.ffn (with --swiglu; a GeLU MLP of F: 2F/3, the same weights and FLOPs)"),
  INT("num-attention-heads", "model.heads", "model.heads"),
  RULE("group-query-attention", NULL, "with --num-query-groups: model.kv_heads"),
  RULE("num-query-groups", "model.kv_heads", "model.kv_heads (with --group-query-attention)"),
  INT("kv-channels", "model.head_dim", "model.head_dim"),
  RULE("padded-vocab-size", "model.vocab", "model.vocab"),
  RULE("vocab-size", NULL, "model.vocab, padded to a multiple of --make-vocab-size-divisible-by x tp"),
  RULE("make-vocab-size-divisible-by", NULL, "pads --vocab-size (default 128)"),
  RULE("swiglu", NULL, "the simulator's MLP is SwiGLU's (without it, model.ffn = 2F/3)"),
  RULE("untie-embeddings-and-output-weights", NULL,
       "the simulator holds the embedding and the LM head apart (tied, pp 1: they are one matrix)"),
  SWITCH("bf16", "model.dtype", "bf16", NULL, NULL),
  SWITCH("fp16", "model.dtype", "fp16", NULL, NULL),
  RULE("fp8-format", "model.fp8", "model.fp8 = all (Transformer Engine: every linear layer of the blocks)"),
  SWITCH("grad-reduce-in-bf16", "model.main_grads", "bf16", NULL, NULL),
  SWITCH("cross-entropy-loss-fusion", "workload.cross_entropy", "fused", NULL, "cross_entropy"),
  IGNORE("accumulate-allreduce-grads-in-fp32", "--bf16 sets it already: model.main_grads = fp32, the default"),
  /* the work */
  INT("seq-length", "workload.seq_len", "seq_len"),
  INT("global-batch-size", "workload.batch", "batch"),
  INT("micro-batch-size", "parallel.micro_batch", "parallel.micro_batch"),
  SWITCH("recompute-activations", "workload.recompute", "selective", NULL, NULL),
  RULE("recompute-granularity", "workload.recompute", "workload.recompute = full | selective"),
  IGNORE("recompute-method", "the simulator recomputes every layer of a stage (uniform, all layers)"),
  IGNORE("recompute-num-layers", "the simulator recomputes every layer of a stage (uniform, all layers)"),
  /* the parallelism */
  INT("tensor-model-parallel-size", "parallel.tp", "parallel.tp"),
  SWITCH("sequence-parallel", "parallel.tp_variant", "v3", "v1", "tp_variant"),
  INT("pipeline-model-parallel-size", "parallel.pp", "parallel.pp"),
  RULE("num-layers-per-virtual-pipeline-stage", "parallel.pp_chunks",
       "parallel.pp_schedule = interleaved, pp_chunks = layers / (pp x N)"),
  RULE("virtual-pipeline-model-parallel-size", "parallel.pp_chunks",
       "parallel.pp_schedule = interleaved, pp_chunks = V"),
  INT("context-parallel-size", NULL, "parallel.cp"),
  RULE("cp-comm-type", "parallel.method",
       "p2p: ring (zigzag, one ring); a2a: ulysses; a2a+p2p: usp; all_gather: refused"),
  RULE("hierarchical-context-parallel-sizes", "parallel.ulysses_degree", "a2a+p2p: ulysses_degree = the a2a size"),
  SWITCH("use-distributed-optimizer", "parallel.zero", "1", "0", "zero"),
  SWITCH("use-torch-fsdp2", "parallel.zero", "3", NULL, NULL),
  RULE("nnodes", NULL, "the world size: nnodes x nproc-per-node (unless --gpus or WORLD_SIZE)"),
  RULE("nproc-per-node", NULL, "the world size: nnodes x nproc-per-node (unless --gpus or WORLD_SIZE)"),
  /* what the simulator cannot model */
  REFUSE("num-experts", "mixture of experts: the simulator's layers are dense"),
  REFUSE("expert-model-parallel-size", "mixture of experts: the simulator's layers are dense"),
  REFUSE("expert-tensor-parallel-size", "mixture of experts: the simulator's layers are dense"),
  REFUSE("moe-*", "mixture of experts: the simulator's layers are dense"),
  REFUSE("multi-latent-attention", "MLA: the simulator's attention is MHA / GQA"),
  REFUSE("mtp-num-layers", "multi-token prediction layers are not modelled"),
  REFUSE("decoder-first-pipeline-num-layers", "uneven pipeline stages: the simulator splits layers evenly"),
  REFUSE("decoder-last-pipeline-num-layers", "uneven pipeline stages: the simulator splits layers evenly"),
  REFUSE("account-for-embedding-in-pipeline-split", "uneven pipeline stages: the simulator splits layers evenly"),
  REFUSE("account-for-loss-in-pipeline-split", "uneven pipeline stages: the simulator splits layers evenly"),
  REFUSE("encoder-num-layers", "encoder-decoder models: the simulator's are decoder-only"),
  /* no effect on the step */
  IGNORE("lr", NO_STEP),
  IGNORE("lr-*", NO_STEP),
  IGNORE("min-lr", NO_STEP),
  IGNORE("weight-decay*", NO_STEP),
  IGNORE("clip-grad", NO_STEP),
  IGNORE("adam-*", NO_STEP),
  IGNORE("optimizer", "the simulator counts Adam's states (--optimizer adam, the default)"),
  IGNORE("init-method-std", NO_STEP),
  IGNORE("train-iters", "one step is simulated"),
  IGNORE("train-samples", "one step is simulated"),
  IGNORE("eval-*", "one training step is simulated"),
  IGNORE("save*", "checkpoints are not simulated"),
  IGNORE("load", "checkpoints are not simulated"),
  IGNORE("ckpt-*", "checkpoints are not simulated"),
  IGNORE("use-dist-ckpt", "checkpoints are not simulated"),
  IGNORE("data-*", "the data pipeline is not simulated"),
  IGNORE("split", "the data pipeline is not simulated"),
  IGNORE("mock-data", "the data pipeline is not simulated"),
  IGNORE("tokenizer-*", "the tokenizer is not simulated (the vocabulary comes from --padded-vocab-size)"),
  IGNORE("vocab-file", "the tokenizer is not simulated (the vocabulary comes from --padded-vocab-size)"),
  IGNORE("merge-file", "the tokenizer is not simulated (the vocabulary comes from --padded-vocab-size)"),
  IGNORE("log-*", NO_STEP),
  IGNORE("tensorboard-*", NO_STEP),
  IGNORE("wandb-*", NO_STEP),
  IGNORE("seed", NO_STEP),
  IGNORE("exit-*", NO_STEP),
  IGNORE("distributed-backend", "NCCL is what the simulator's collectives model"),
  IGNORE("distributed-timeout-minutes", NO_STEP),
  IGNORE("attention-dropout", "dropout is not modelled (LLaMA layers have none)"),
  IGNORE("hidden-dropout", "dropout is not modelled (LLaMA layers have none)"),
  IGNORE("position-embedding-type", "rotary or learned positions: elementwise work the simulator leaves out"),
  IGNORE("rotary-*", "rotary positions: elementwise work the simulator leaves out"),
  IGNORE("use-rotary-position-embeddings", "rotary positions: elementwise work the simulator leaves out"),
  IGNORE("max-position-embeddings", "a limit, not work"),
  IGNORE("normalization", "the simulator's norms are RMSNorm (LayerNorm: the same elementwise pass)"),
  IGNORE("norm-epsilon", NO_STEP),
  IGNORE("disable-bias-linear", "biases are not modelled"),
  IGNORE("use-flash-attn", "the simulator's attention kernels are FlashAttention-style"),
  IGNORE("attention-backend", "the simulator's attention kernels are FlashAttention-style"),
  IGNORE("transformer-impl", "the kernels' speeds are the profile's"),
  IGNORE("use-mcore-models", NO_STEP),
  IGNORE("overlap-grad-reduce", "the simulator overlaps the gradient reduction with the last backward"),
  IGNORE("overlap-param-gather", "the simulator's ZeRO-1 gathers are not modelled apart"),
  IGNORE("fp8-amax-*", "FP8 scaling details: the GEMMs run at the profile's FP8 rate"),
  IGNORE("fp8-margin", "FP8 scaling details: the GEMMs run at the profile's FP8 rate"),
  IGNORE("fp8-recipe", "FP8 scaling details: the GEMMs run at the profile's FP8 rate"),
  IGNORE("no-*", "a switch of kernel fusion or bookkeeping: the kernels' speeds are the profile's"),
  IGNORE("timing-log-level", NO_STEP),
  IGNORE("manual-gc*", NO_STEP),
};
#define NTABLE (int)(sizeof table / sizeof table[0])

const bs_mg_flag *bs_mg_flags(int *n) {
  *n = NTABLE;
  return table;
}

const bs_mg_flag *bs_mg_find(const char *flag) {
  char f[64];
  snprintf(f, sizeof f, "%s", flag);
  for (char *p = f; *p; p++)
    if (*p == '_') *p = '-';
  for (int i = 0; i < NTABLE; i++) {
    const char *t = table[i].flag;
    size_t n = strlen(t);
    if (n && t[n - 1] == '*' ? !strncmp(f, t, n - 1) : !strcmp(f, t)) return &table[i];
  }
  return NULL;
}

/* ---- the arguments file ------------------------------------------- */

typedef struct {
  char name[64], val[256];
} var;

enum { MAX_VARS = 128, MAX_WORD = 512 };

/* A word with $NAME and ${NAME} replaced by the variables set so far (unknown ones stay). */
static void expand(const char *w, char *out, size_t n, const var *vars, int nvars) {
  size_t o = 0;
  while (*w && o + 1 < n) {
    if (*w == '$' && (w[1] == '{' || isalpha((unsigned char)w[1]) || w[1] == '_')) {
      const char *s = w + 1 + (w[1] == '{');
      size_t k = 0;
      while (isalnum((unsigned char)s[k]) || s[k] == '_') k++;
      int closed = w[1] != '{' || s[k] == '}';
      const char *val = NULL;
      for (int i = 0; i < nvars && closed; i++)
        if (strlen(vars[i].name) == k && !strncmp(vars[i].name, s, k)) val = vars[i].val;
      if (val) {
        o += (size_t)snprintf(out + o, n - o, "%s", val);
        if (o >= n) o = n - 1;
        w = s + k + (w[1] == '{');
        continue;
      }
    }
    out[o++] = *w++;
  }
  out[o] = '\0';
}

/* NAME=value (a shell assignment): 1 with the name's length in *k. */
static int is_assignment(const char *w, size_t *k) {
  size_t i = 0;
  if (!isalpha((unsigned char)w[0]) && w[0] != '_') return 0;
  while (isalnum((unsigned char)w[i]) || w[i] == '_') i++;
  *k = i;
  return w[i] == '=';
}

/* A word that ends a flag's values: another flag, a bracket, an assignment, a program. */
static int ends_values(const char *w) {
  static const char *const programs[] = {"torchrun", "python", "python3", "export", "srun", "bash", "deepspeed", NULL};
  size_t k, n = strlen(w);
  if (w[0] == '-' && (w[1] == '-' || isalpha((unsigned char)w[1]))) return 1;
  if (!strcmp(w, ")") || !strcmp(w, "(") || w[0] == '$' || is_assignment(w, &k)) return 1;
  if (n > 3 && !strcmp(w + n - 3, ".py")) return 1;
  for (int i = 0; programs[i]; i++)
    if (!strcmp(w, programs[i])) return 1;
  return 0;
}

/* The words of the text with their lines: comments, quotes and continuations removed. */
static int split_words(const char *text, char ***words, int **lines, int *n) {
  int cap = 256, line = 1;
  *words = malloc((size_t)cap * sizeof **words);
  *lines = malloc((size_t)cap * sizeof **lines);
  *n = 0;
  if (!*words || !*lines) return -1;
  const char *p = text;
  while (*p) {
    if (*p == '\\' && p[1] == '\n') p++;
    if (*p == '\n') line++;
    if (isspace((unsigned char)*p) || *p == '"' || *p == '\'' || *p == '\\') {
      p++;
      continue;
    }
    if (*p == '#') {
      while (*p && *p != '\n') p++;
      continue;
    }
    size_t k = 0;
    char w[MAX_WORD];
    while (p[k] && !isspace((unsigned char)p[k]) && p[k] != '"' && p[k] != '\'' && !(p[k] == '\\' && p[k + 1] == '\n'))
      k++;
    snprintf(w, sizeof w, "%.*s", (int)(k < MAX_WORD - 1 ? k : MAX_WORD - 1), p);
    p += k;
    if (*n == cap) {
      cap *= 2;
      char **nw = realloc(*words, (size_t)cap * sizeof **words);
      int *nl = nw ? realloc(*lines, (size_t)cap * sizeof **lines) : NULL;
      if (nw) *words = nw;
      if (!nl) return -1;
      *lines = nl;
    }
    if (!((*words)[*n] = strdup(w))) return -1;
    (*lines)[(*n)++] = line;
  }
  return 0;
}

static void free_words(char **words, int *lines, int n) {
  for (int i = 0; words && i < n; i++) free(words[i]);
  free(words);
  free(lines);
}

/* An assignment NAME=value remembered (an array's "NAME=(" is not); WORLD_SIZE read. */
static void assign(const char *w, size_t k, var *vars, int *nvars, bs_mg_args *out) {
  const char *v = w + k + 1;
  if (*v == '(') return;
  if (*nvars < MAX_VARS) {
    snprintf(vars[*nvars].name, sizeof vars[*nvars].name, "%.*s", (int)k, w);
    snprintf(vars[*nvars].val, sizeof vars[*nvars].val, "%s", v);
    (*nvars)++;
  }
  char *end;
  long x = strtol(v, &end, 10);
  if (k == 10 && !strncmp(w, "WORLD_SIZE", 10) && *v && !*end && x > 0) out->world = x;
}

/* Appends v (after sep) to a's value; a value that does not fit is an error naming the flag, never cut. */
static int put_val(bs_mg_arg *a, const char *sep, const char *v, char *err, size_t errlen) {
  size_t l = strlen(a->val);
  int w = snprintf(a->val + l, sizeof a->val - l, "%s%s", sep, v);
  if (w < 0 || (size_t)w >= sizeof a->val - l) {
    snprintf(err, errlen, "line %d: --%s: a value longer than %zu characters", a->line, a->name, sizeof a->val - 1);
    return -1;
  }
  return 0;
}

int bs_mg_args_read(const char *text, bs_mg_args *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  char **words = NULL;
  int *lines = NULL, n = 0, nvars = 0;
  var *vars = calloc(MAX_VARS, sizeof *vars);
  if (!vars || split_words(text, &words, &lines, &n) || !(out->v = calloc((size_t)n + 1, sizeof *out->v))) {
    free_words(words, lines, n);
    free(vars);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  char w[MAX_WORD];
  size_t k;
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    expand(words[i], w, sizeof w, vars, nvars);
    if (is_assignment(w, &k)) assign(w, k, vars, &nvars, out);
    if (strncmp(w, "--", 2) || !w[2]) continue;
    bs_mg_arg *a = &out->v[out->n++];
    char *eq = strchr(w, '=');
    if (eq) *eq = '\0';
    snprintf(a->name, sizeof a->name, "%.63s", w + 2);
    for (char *p = a->name; *p; p++)
      if (*p == '_') *p = '-';
    a->line = lines[i];
    if (eq) rc = put_val(a, "", eq + 1, err, errlen);
    while (!eq && !rc && i + 1 < n) {
      char v[MAX_WORD];
      expand(words[i + 1], v, sizeof v, vars, nvars);
      if (ends_values(v)) break;
      rc = put_val(a, a->val[0] ? " " : "", v, err, errlen);
      i++;
    }
  }
  free_words(words, lines, n);
  free(vars);
  if (rc) bs_mg_args_free(out);
  return rc;
}

void bs_mg_args_free(bs_mg_args *a) {
  free(a->v);
  a->v = NULL;
  a->n = 0;
}
