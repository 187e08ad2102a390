/*
 * cmd_export.c — `burstsim export megatron RESULT.json [--point N] [--out F]`: the Megatron-LM
 * launch flags of a simulated or searched point (a result of sim --out or search --out), one flag
 * per line after a WORLD_SIZE=G line: the file `burstsim import megatron` reads, so that import,
 * sim and export go round. The flags come from the table of megatron_flags.c, read the other way;
 * a point Megatron cannot run as simulated (a method without a --cp-comm-type, ZeRO 2, FP8 in the
 * MLP only, a point that is not one training step of the model) is refused with the reason, exit 2.
 * What Megatron would run differently (a double ring, another rank order) is noted on stderr.
 */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "cmd_args.h"
#include "commands.h"
#include "import_torchtitan.h"
#include "megatron_flags.h"
#include "result_read.h"

typedef struct {
  const cJSON *p; /* the point */
  char *s;        /* the flags */
  size_t len, cap;
  int refused;
} exporter;

static void export_usage(FILE *f) {
  fprintf(f,
          "usage: burstsim export megatron|nemo|torchtitan RESULT.json [--point N] [--out F]\n"
          "\n"
          "nemo: the trainer and model keys of a NeMo training config (YAML), as import nemo\n"
          "reads them; refused for ZeRO 2 and 3, usp (use megatron), a vocabulary other than\n"
          "Llama 2's or Llama 3's tokenizer.\n"
          "torchtitan: the train config's settings that fix the step, as TOML ([model],\n"
          "[training], [parallelism], [activation_checkpoint]) to merge into a llama3 config;\n"
          "refused unless the point is a llama3 flavor (8B, 70B, 405B), FSDP or DDP (ZeRO 3 or\n"
          "0) and, with cp > 1, method ring or allgather.\n"
          "megatron:\n"
          "Prints the Megatron-LM launch flags (pretrain_gpt.py) of a point of a result file\n"
          "(burstsim sim --out, search --out): WORLD_SIZE=G, then one flag per line, as burstsim\n"
          "import megatron reads them back. A point Megatron cannot run as simulated is refused\n"
          "with the reason (exit 2): not a model-scope training step, a context-parallel method\n"
          "without a --cp-comm-type (burst, ring-li2021, tree), ZeRO 2, FP8 in the MLP only.\n"
          "\n"
          "  --point N   the point, from 1 in the file's order (default 1)\n"
          "  --out F     where the flags go (default: stdout)\n");
}

static void emit(exporter *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(exporter *x, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(x->s ? x->s + x->len : NULL, x->s ? x->cap - x->len : 0, fmt, ap);
    va_end(ap);
    if (w < 0) return;
    if (x->s && x->len + (size_t)w < x->cap) {
      x->len += (size_t)w;
      return;
    }
    size_t cap = x->cap * 2 + (size_t)w + 256;
    char *s = realloc(x->s, cap);
    if (!s) return;
    x->s = s;
    x->cap = cap;
  }
}

static void refuse(exporter *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(exporter *x, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "burstsim export: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  x->refused++;
}

static long num(const exporter *x, const char *path) {
  double v = 0;
  return bs_result_number(x->p, path, &v) ? (long)v : 0;
}

static int is(const exporter *x, const char *path, const char *want) {
  char v[128];
  bs_result_text(x->p, path, v, sizeof v);
  return !strcmp(v, want);
}

/* Context parallelism: --cp-comm-type from the method. */
static void export_cp(exporter *x) {
  long cp = num(x, "parallel.cp");
  char method[32];
  bs_result_text(x->p, "method", method, sizeof method);
  if (cp <= 1) return;
  if (!strcmp(method, "ring")) {
    emit(x, "--cp-comm-type p2p\n");
    if (!is(x, "layout", "zigzag"))
      fprintf(stderr, "note: the point's layout is not zigzag; Megatron's p2p ring is load-balanced (zigzag)\n");
    if (is(x, "plan.double_ring", "true"))
      fprintf(stderr, "note: the point ran a double ring; Megatron's p2p is one ring\n");
  } else if (!strcmp(method, "ulysses")) emit(x, "--cp-comm-type a2a\n");
  else if (!strcmp(method, "allgather")) emit(x, "--cp-comm-type all_gather\n");
  else if (!strcmp(method, "usp")) {
    long a2a = num(x, "ulysses_degree");
    if (a2a < 1 || cp % a2a) refuse(x, "usp with ulysses_degree %ld does not divide cp %ld", a2a, cp);
    else emit(x, "--cp-comm-type a2a+p2p\n--hierarchical-context-parallel-sizes %ld %ld\n", a2a, cp / a2a);
    if (!is(x, "ulysses_placement", "head-first"))
      fprintf(stderr, "note: Megatron's a2a+p2p groups the a2a ranks first (head-first placement)\n");
  } else
    refuse(
      x,
      "method %s: Megatron has no --cp-comm-type for it (ring: p2p, ulysses: a2a, usp: a2a+p2p, allgather: all_gather)",
      method);
}

/* A row of the table the importer maps by its own rule, read back. */
static void export_rule(exporter *x, const char *flag) {
  if (!strcmp(flag, "ffn-hidden-size")) emit(x, "--swiglu\n--ffn-hidden-size %ld\n", num(x, "model.ffn"));
  else if (!strcmp(flag, "num-query-groups") && num(x, "model.kv_heads") < num(x, "model.heads"))
    emit(x, "--group-query-attention\n--num-query-groups %ld\n", num(x, "model.kv_heads"));
  else if (!strcmp(flag, "padded-vocab-size")) emit(x, "--padded-vocab-size %ld\n", num(x, "model.vocab"));
  else if (!strcmp(flag, "untie-embeddings-and-output-weights")) emit(x, "--untie-embeddings-and-output-weights\n");
  else if (!strcmp(flag, "fp8-format") && is(x, "model.fp8", "all")) emit(x, "--fp8-format hybrid\n");
  else if (!strcmp(flag, "fp8-format") && is(x, "model.fp8", "ffn"))
    refuse(x, "model.fp8 = ffn: Megatron has no flag for FP8 in the MLP only");
  else if (!strcmp(flag, "recompute-granularity") && !is(x, "recompute", "off")) {
    char r[32];
    bs_result_text(x->p, "recompute", r, sizeof r);
    emit(x, "--recompute-granularity %s\n", r);
  } else if (!strcmp(flag, "num-layers-per-virtual-pipeline-stage") && is(x, "parallel.pp_schedule", "interleaved")) {
    long pp = num(x, "parallel.pp"), v = num(x, "parallel.pp_chunks");
    if (pp > 0 && v > 1) emit(x, "--num-layers-per-virtual-pipeline-stage %ld\n", num(x, "model.layers") / (pp * v));
  } else if (!strcmp(flag, "cp-comm-type")) export_cp(x);
}

/* Mixture-of-experts (Megatron-Core's MoE flags, the all-to-all dispatcher); the router's skew is
 * the data's, not the launch's. */
static void export_moe(exporter *x) {
  long e = num(x, "model.experts"), f = num(x, "model.moe_ffn"), shared = num(x, "model.shared_experts");
  double cf = 0;
  if (e <= 0) return;
  emit(x, "--num-experts %ld\n--moe-router-topk %ld\n--moe-ffn-hidden-size %ld\n--expert-model-parallel-size %ld\n", e,
       num(x, "model.top_k"), f, num(x, "parallel.ep"));
  emit(x, "--moe-token-dispatcher-type alltoall\n");
  if (shared > 0) emit(x, "--moe-shared-expert-intermediate-size %ld\n", shared * f);
  if (bs_result_number(x->p, "model.capacity_factor", &cf) && cf > 0)
    emit(x, "--moe-expert-capacity-factor %g\n--moe-pad-expert-input-to-capacity\n", cf);
  if (!is(x, "model.routing_skew", "0"))
    fprintf(stderr, "note: the point's router is skewed (model.routing_skew); Megatron's follows the data\n");
}

/* The flags of the point, in the table's order. */
static void export_point(exporter *x) {
  if (!is(x, "scope", "model") || !is(x, "phase", "train"))
    refuse(x,
           "the point is not one training step of the whole model (phase train, scope model): it has no "
           "Megatron launch");
  if (is(x, "zero", "2")) refuse(x, "parallel.zero = 2: Megatron shards the optimizer (ZeRO 1) or everything (FSDP)");
  if (!is(x, "parallel.order", "tp-cp-dp-pp"))
    fprintf(stderr, "note: the point's rank order is not Megatron's default (tp-cp-dp-pp)\n");
  emit(x, "WORLD_SIZE=%ld\n", num(x, "gpus"));
  int n;
  const bs_mg_flag *t = bs_mg_flags(&n);
  for (int i = 0; i < n; i++) {
    const bs_mg_flag *f = &t[i];
    if (f->kind == BS_MG_INT && f->result) emit(x, "--%s %ld\n", f->flag, num(x, f->result));
    else if (f->kind == BS_MG_SWITCH && f->result && is(x, f->result, f->on)) emit(x, "--%s\n", f->flag);
    else if (f->kind == BS_MG_SWITCH && !strcmp(f->key, "model.dtype") && is(x, "model.dtype", f->on))
      emit(x, "--%s\n", f->flag);
    else if (f->kind == BS_MG_SWITCH && !strcmp(f->key, "parallel.zero") && is(x, "zero", f->on))
      emit(x, "--%s\n", f->flag);
    else if (f->kind == BS_MG_RULE) export_rule(x, f->flag);
  }
  export_moe(x);
}

/* torchtitan: the train config's settings that fix the step, as a TOML fragment. */
static void export_torchtitan(exporter *x) {
  char preset[64], method[32], recompute[32];
  bs_result_text(x->p, "model.preset", preset, sizeof preset);
  bs_result_text(x->p, "method", method, sizeof method);
  bs_result_text(x->p, "recompute", recompute, sizeof recompute);
  const char *flavor = bs_torchtitan_flavor(preset);
  long gpus = num(x, "gpus"), tp = num(x, "parallel.tp"), pp = num(x, "parallel.pp"), cp = num(x, "parallel.cp"),
       dp = num(x, "parallel.dp"), zero = num(x, "zero"), batch = num(x, "batch"), mb = num(x, "parallel.micro_batch");
  if (!is(x, "scope", "model") || !is(x, "phase", "train"))
    refuse(x, "the point is not one training step of the whole model (phase train, scope model)");
  if (num(x, "model.experts") > 0) refuse(x, "model.experts: export torchtitan writes dense llama3 models");
  if (!flavor)
    refuse(x,
           "model.preset '%s': torchtitan's llama3 flavors are 8B, 70B and 405B (presets llama3.1-8b, "
           "llama3.1-70b, llama3.1-405b)",
           preset);
  if (cp > 1 && strcmp(method, "ring") && strcmp(method, "allgather"))
    refuse(x,
           "method %s: torchtitan's context parallelism all-gathers K, V (method allgather) or passes them round a "
           "ring (ring)",
           method);
  if (zero == 1 || zero == 2) refuse(x, "parallel.zero = %ld: torchtitan runs FSDP (ZeRO 3) or DDP (ZeRO 0)", zero);
  if (zero == 0 && cp > 1) refuse(x, "parallel.zero = 0 with cp %ld: torchtitan shards over dp x cp (FSDP)", cp);
  if (dp < 1 || batch % dp) refuse(x, "workload.batch %ld: not a multiple of dp %ld", batch, dp);
  if (x->refused) return;
  if (tp > 1 && !is(x, "tp_variant", "v3"))
    fprintf(stderr, "note: torchtitan's tensor parallelism is sequence-parallel (tp_variant v3); the point ran %s\n",
            "v1");
  if (is(x, "plan.double_ring", "true")) fprintf(stderr, "note: the point ran a double ring; torch's CP is one ring\n");
  emit(x, "# NGPU x nodes = %ld\n[model]\nname = \"llama3\"\nflavor = \"%s\"\n", gpus, flavor);
  if (is(x, "model.fp8", "all")) emit(x, "converters = [\"float8\"]\n");
  else if (!is(x, "model.fp8", "off")) refuse(x, "model.fp8 = ffn: torchtitan's float8 converter takes every linear");
  long local = batch / dp;
  emit(x, "\n[training]\nlocal_batch_size = %ld\nseq_len = %ld\n", pp > 1 ? local : mb, num(x, "seq_len"));
  if (pp <= 1 && mb != local) emit(x, "global_batch_size = %ld\n", batch);
  if (is(x, "model.dtype", "fp32")) emit(x, "mixed_precision_param = \"float32\"\n");
  emit(x, "\n[parallelism]\ndata_parallel_replicate_degree = %ld\ndata_parallel_shard_degree = %ld\n", zero ? 1 : dp,
       zero ? dp : 1);
  emit(x, "tensor_parallel_degree = %ld\npipeline_parallel_degree = %ld\ncontext_parallel_degree = %ld\n", tp, pp, cp);
  if (pp > 1 && is(x, "parallel.pp_schedule", "interleaved"))
    emit(x, "pipeline_parallel_schedule = \"Interleaved1F1B\"\npipeline_parallel_layers_per_stage = %ld\n",
         num(x, "model.layers") / (pp * num(x, "parallel.pp_chunks")));
  else if (pp > 1) emit(x, "pipeline_parallel_schedule = \"1F1B\"\n");
  if (pp > 1) emit(x, "pipeline_parallel_microbatch_size = %ld\n", mb);
  if (cp > 1)
    emit(x, "context_parallel_rotate_method = \"%s\"\n", is(x, "method", "allgather") ? "allgather" : "alltoall");
  const char *mode = !strcmp(recompute, "off") ? "none" : recompute;
  emit(x, "\n[activation_checkpoint]\nmode = \"%s\"\n", mode);
  if (!strcmp(mode, "selective")) emit(x, "selective_ac_option = \"op\"\n");
}

/* NeMo: the trainer and model keys of a training config (Hydra YAML), the names NeMo gives
 * Megatron's arguments; `import nemo` reads them back. */
static void export_nemo(exporter *x) {
  char method[32], recompute[32];
  bs_result_text(x->p, "method", method, sizeof method);
  bs_result_text(x->p, "recompute", recompute, sizeof recompute);
  long gpus = num(x, "gpus"), tp = num(x, "parallel.tp"), pp = num(x, "parallel.pp"), cp = num(x, "parallel.cp"),
       zero = num(x, "zero"), heads = num(x, "model.heads"), kv = num(x, "model.kv_heads"),
       vocab = num(x, "model.vocab");
  if (!is(x, "scope", "model") || !is(x, "phase", "train"))
    refuse(x, "the point is not one training step of the whole model (phase train, scope model)");
  if (num(x, "model.experts") > 0)
    refuse(x, "model.experts: export nemo writes dense models (export megatron has MoE)");
  if (zero == 2 || zero == 3)
    refuse(x, "parallel.zero = %ld: NeMo's Megatron models shard the optimizer (distributed_fused_adam, ZeRO 1)", zero);
  const char *comm = !strcmp(method, "ring") ? "p2p" : !strcmp(method, "ulysses") ? "a2a" : NULL;
  if (cp > 1 && !comm)
    refuse(x, "method %s: export nemo writes p2p (ring) and a2a (ulysses) context parallelism; %s", method,
           !strcmp(method, "usp") ? "for usp (a2a+p2p) use export megatron" : "NeMo has no cp_comm_type for it");
  if (is(x, "model.fp8", "ffn")) refuse(x, "model.fp8 = ffn: NeMo's fp8 takes every linear layer");
  const char *tok = vocab == 128256 ? "meta-llama/Meta-Llama-3-8B" : vocab == 32000 ? "meta-llama/Llama-2-7b-hf" : NULL;
  if (!tok)
    refuse(x,
           "model.vocab %ld: NeMo reads the vocabulary from its tokenizer (Llama 2's 32000 or Llama 3's "
           "128256 are written as one)",
           vocab);
  if (x->refused) return;
  long devices = gpus % 8 == 0 ? 8 : gpus, nodes = gpus / devices;
  const char *prec = is(x, "model.dtype", "fp16") ? "16" : is(x, "model.dtype", "fp32") ? "32" : "bf16";
  emit(x, "trainer:\n  num_nodes: %ld\n  devices: %ld\n  precision: %s\nmodel:\n", nodes, devices, prec);
  emit(x, "  micro_batch_size: %ld\n  global_batch_size: %ld\n", num(x, "parallel.micro_batch"), num(x, "batch"));
  emit(x, "  tensor_model_parallel_size: %ld\n  pipeline_model_parallel_size: %ld\n", tp, pp);
  if (pp > 1 && is(x, "parallel.pp_schedule", "interleaved"))
    emit(x, "  virtual_pipeline_model_parallel_size: %ld\n", num(x, "parallel.pp_chunks"));
  else emit(x, "  virtual_pipeline_model_parallel_size: null\n");
  emit(x, "  context_parallel_size: %ld\n", cp);
  if (cp > 1) emit(x, "  cp_comm_type: %s\n", comm);
  emit(x, "  encoder_seq_length: %ld\n  num_layers: %ld\n  hidden_size: %ld\n  ffn_hidden_size: %ld\n",
       num(x, "seq_len"), num(x, "model.layers"), num(x, "model.hidden"), num(x, "model.ffn"));
  emit(x, "  num_attention_heads: %ld\n", heads);
  if (kv < heads) emit(x, "  num_query_groups: %ld\n", kv);
  else emit(x, "  num_query_groups: null\n");
  emit(x, "  kv_channels: %ld\n  activation: fast-swiglu\n  share_embeddings_and_output_weights: false\n",
       num(x, "model.head_dim"));
  emit(x, "  sequence_parallel: %s\n", tp > 1 && is(x, "tp_variant", "v3") ? "true" : "false");
  emit(x, "  activations_checkpoint_granularity: %s\n", strcmp(recompute, "off") ? recompute : "null");
  emit(x, "  fp8: %s\n  fp8_hybrid: %s\n", is(x, "model.fp8", "all") ? "true" : "false",
       is(x, "model.fp8", "all") ? "true" : "false");
  emit(x, "  tokenizer:\n    library: huggingface\n    type: %s  # a vocabulary of %ld tokens\n", tok, vocab);
  emit(x, "  optim:\n    name: %s\n", zero == 1 ? "distributed_fused_adam" : "fused_adam");
  if (!is(x, "parallel.order", "tp-cp-dp-pp"))
    fprintf(stderr, "note: the point's rank order is not Megatron's default (tp-cp-dp-pp)\n");
  if (is(x, "plan.double_ring", "true")) fprintf(stderr, "note: the point ran a double ring; NeMo's p2p is one ring\n");
}

int cmd_export(int argc, char **argv) {
  bs_export_args A;
  char err[1200];
  if (bs_export_args_parse(argc, argv, &A, err, sizeof err)) {
    fprintf(stderr, "burstsim export: %s\n", err);
    return 2;
  }
  if (A.help) {
    export_usage(stdout);
    return 0;
  }
  const bs_path_role outs[] = {{"--out", A.out}}, ins[] = {{"the result file", A.file}};
  if (A.out && bs_out_check_all(outs, 1, ins, 1, err, sizeof err)) {
    fprintf(stderr, "burstsim export: %s\n", err);
    return 2;
  }
  cJSON *results;
  int n;
  cJSON *doc = bs_result_file_load(A.file, &results, &n, err, sizeof err);
  if (!doc) {
    fprintf(stderr, "burstsim export: %s\n", err);
    return 2;
  }
  if (A.point > n) {
    fprintf(stderr, "burstsim export: --point %d: %s has %d point(s)\n", A.point, A.file, n);
    cJSON_Delete(doc);
    return 2;
  }
  exporter x = {.p = cJSON_GetArrayItem(results, A.point - 1)};
  char status[32], why[256];
  bs_result_text(x.p, "status", status, sizeof status);
  bs_result_text(x.p, "error", why, sizeof why);
  if (strcmp(status, "ok")) refuse(&x, "point %d was not simulated (%s: %s)", A.point, status, why);
  char m[32], g[32], s[32];
  bs_result_text(x.p, "method", m, sizeof m);
  bs_result_text(x.p, "gpus", g, sizeof g);
  bs_result_text(x.p, "seq_len", s, sizeof s);
  emit(&x, "# burstsim export %s %s --point %d: %s, %s GPUs, seq %s\n", A.framework, A.file, A.point, m, g, s);
  if (!x.refused && !strcmp(A.framework, "torchtitan")) export_torchtitan(&x);
  else if (!x.refused && !strcmp(A.framework, "nemo")) export_nemo(&x);
  else if (!x.refused) export_point(&x);
  cJSON_Delete(doc);
  int rc = x.refused ? 2 : !x.s ? 1 : 0;
  if (!rc && bs_write_file(A.out ? A.out : "-", x.s, x.len, err, sizeof err)) {
    fprintf(stderr, "burstsim export: %s\n", err);
    rc = 1;
  } else if (rc == 1) fprintf(stderr, "burstsim export: out of memory\n");
  free(x.s);
  return rc;
}
