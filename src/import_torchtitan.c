/*
 * import_torchtitan.c — torchtitan's train config (TOML) to a scenario. torchtitan's mesh is
 * dp_replicate x dp_shard x cp x tp x pp; FSDP2 shards parameters, gradients and optimizer state
 * over dp_shard x cp (ZeRO 3 over dp x cp in the simulator's terms), DDP replicates (ZeRO 0), and
 * both at once (HSDP) is refused, the simulator sharding over the whole dp x cp group. The
 * settings read are documented in torchtitan's config manager (torchtitan/config/job_config.py) and
 * its llama3 train configs; every other setting is named on stderr as ignored, with why.
 */
#include "import_torchtitan.h"

#include <stdlib.h>
#include <string.h>

#include "toml_read.h"

typedef struct {
  const bs_toml *t;
  const bs_import_args *opt;
  bs_import_out *out;
  long layers;
} tt;

/* Sections with no effect on the time or memory of a step. */
static const char *const quiet_sections[] = {
  "job",        "profiling", "metrics",         "optimizer",         "lr_scheduler", "checkpoint",
  "validation", "comm",      "fault_tolerance", "memory_estimation", "experimental", NULL};

/* The keys the rules below read, and keys known to have no effect, with why. */
typedef struct {
  const char *section, *key, *why; /* why NULL: read by a rule */
} tt_key;

static const tt_key keys[] = {
  {"model", "name", NULL},
  {"model", "flavor", NULL},
  {"model", "converters", NULL},
  {"model", "tokenizer_path", "the tokenizer's files"},
  {"model", "hf_assets_path", "the checkpoint's files"},
  {"model", "norm_type", "the norm's implementation (norms are elementwise work at the profile's rates)"},
  {"training", "local_batch_size", NULL},
  {"training", "batch_size", NULL},
  {"training", "global_batch_size", NULL},
  {"training", "seq_len", NULL},
  {"training", "mixed_precision_param", NULL},
  {"training", "mixed_precision_reduce",
   "the gradient reduction's precision: the simulator reduces in the model's dtype (torchtitan's default "
   "float32 moves twice the bytes of bf16 in FSDP's reduce-scatter)"},
  {"training", "compile", "torch.compile's fusions are not modelled: kernels run at the profile's rates"},
  {"training", "max_norm", "gradient clipping: a few elementwise passes"},
  {"training", "steps", "the number of steps: burstsim predicts one"},
  {"training", "warmup_steps", "the learning-rate schedule"},
  {"training", "dataset", "the data"},
  {"training", "dataset_path", "the data"},
  {"training", "seed", "the seed"},
  {"training", "deterministic", "determinism"},
  {"training", "gc_freq", "Python's garbage collector"},
  {"parallelism", "data_parallel_replicate_degree", NULL},
  {"parallelism", "data_parallel_shard_degree", NULL},
  {"parallelism", "tensor_parallel_degree", NULL},
  {"parallelism", "pipeline_parallel_degree", NULL},
  {"parallelism", "context_parallel_degree", NULL},
  {"parallelism", "pipeline_parallel_schedule", NULL},
  {"parallelism", "pipeline_parallel_microbatch_size", NULL},
  {"parallelism", "pipeline_parallel_layers_per_stage", NULL},
  {"parallelism", "context_parallel_rotate_method", NULL},
  {"parallelism", "expert_parallel_degree", NULL},
  {"parallelism", "enable_async_tensor_parallel",
   "async TP overlaps the TP collectives with the GEMMs; the simulator runs them unoverlapped (a slower step)"},
  {"parallelism", "fsdp_reshard_after_forward",
   "FSDP's reshard policy: the simulator gathers the parameters again for the backward (the default)"},
  {"parallelism", "disable_loss_parallel", "the loss's parallelism (one elementwise pass)"},
  {"parallelism", "enable_compiled_autograd", "compiled autograd is not modelled"},
  {"activation_checkpoint", "mode", NULL},
  {"activation_checkpoint", "selective_ac_option", NULL},
  {"float8", "enable_float8_linear", NULL},
  {"float8", "enable_fsdp_float8_all_gather",
   "FP8 all-gather of FSDP's parameters: the simulator gathers them in the model's dtype"},
  {"float8", "precompute_float8_dynamic_scale_for_fsdp", "a scale computed once per step"},
  {"float8", "filter_fqns", "the layers left in bf16 (torchtitan leaves the output layer; so does model.fp8 = all)"},
  {"float8", "recipe_name", "the FP8 scaling recipe"},
  {"compile", "enable", "torch.compile's fusions are not modelled: kernels run at the profile's rates"},
  {"compile", "components", "what torch.compile compiles"},
};

static const tt_key *find_key(const char *section, const char *key) {
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (!strcmp(keys[i].section, section) && !strcmp(keys[i].key, key)) return &keys[i];
  return NULL;
}

static const bs_toml_kv *get(const tt *c, const char *section, const char *key) {
  return bs_toml_get(c->t, section, key);
}

/* An integer setting: def when absent; -2 (refused) when not an integer at least lo. */
static long int_of(tt *c, const char *section, const char *key, long def, long lo) {
  const bs_toml_kv *kv = get(c, section, key);
  if (!kv) return def;
  char *end;
  long x = strtol(kv->val, &end, 10);
  if (kv->is_string || end == kv->val || *end || x < lo) {
    bs_import_say(c->out, "refused", "[%s] %s = %s (line %d): an integer of at least %ld", section, key, kv->val,
                  kv->line, lo);
    return -2;
  }
  return x;
}

/* Every setting once: the quiet sections and the no-effect keys are named as ignored. */
static void sort_settings(tt *c) {
  for (int i = 0; i < c->t->n; i++) {
    const bs_toml_kv *kv = &c->t->v[i];
    if (bs_toml_get(c->t, kv->section, kv->key) != kv) continue;
    int quiet = 0;
    for (int s = 0; quiet_sections[s]; s++) quiet |= !strcmp(kv->section, quiet_sections[s]);
    const tt_key *k = find_key(kv->section, kv->key);
    if (quiet)
      bs_import_say(c->out, "ignored", "[%s] %s = %s: no effect on the step's time or memory", kv->section, kv->key,
                    kv->val);
    else if (!k)
      bs_import_say(c->out, "ignored", "[%s] %s = %s (line %d): unknown to this importer (check it has no effect)",
                    kv->section, kv->key, kv->val, kv->line);
    else if (k->why) bs_import_say(c->out, "ignored", "[%s] %s = %s: %s", kv->section, kv->key, kv->val, k->why);
  }
}

const char *bs_torchtitan_flavor(const char *preset) {
  static const char *const map[][2] = {
    {"llama3.1-8b", "8B"}, {"llama3-8b", "8B"}, {"llama3.1-70b", "70B"}, {"llama3.1-405b", "405B"}, {NULL, NULL}};
  for (int i = 0; map[i][0]; i++)
    if (!strcmp(map[i][0], preset)) return map[i][1];
  return NULL;
}

/* The model: torchtitan's llama3 flavors are Llama 3.1's shapes; FP8 linears by converter. */
static void map_model(tt *c) {
  static const char *const flavors[][3] = {
    {"8B", "llama3.1-8b", "32"}, {"70B", "llama3.1-70b", "80"}, {"405B", "llama3.1-405b", "126"}, {NULL, NULL, NULL}};
  const bs_toml_kv *name = get(c, "model", "name"), *flavor = get(c, "model", "flavor");
  if (!name || strcmp(name->val, "llama3")) {
    bs_import_say(c->out, "refused", "[model] name = %s: only torchtitan's llama3 models map to presets",
                  name ? name->val : "(missing)");
    return;
  }
  int f = 0;
  while (flavors[f][0] && (!flavor || strcmp(flavors[f][0], flavor->val))) f++;
  if (!flavors[f][0]) {
    bs_import_say(c->out, "refused", "[model] flavor = %s: 8B, 70B or 405B (Llama 3.1's shapes)",
                  flavor ? flavor->val : "(missing)");
    return;
  }
  bs_import_put(c->out, "model.preset", "%s", flavors[f][1]);
  c->layers = atol(flavors[f][2]);
  bs_import_say(c->out, "mapped", "[model] name = llama3, flavor = %s -> model.preset = %s", flavors[f][0],
                flavors[f][1]);
  const bs_toml_kv *conv = get(c, "model", "converters"), *lin = get(c, "float8", "enable_float8_linear");
  int fp8 = (conv && strstr(conv->val, "float8")) || (lin && !strcmp(lin->val, "true"));
  if (fp8) {
    bs_import_put(c->out, "model.fp8", "all");
    bs_import_say(c->out, "mapped", "%s -> model.fp8 = all (torchtitan's Float8Linear in every block)",
                  conv ? "[model] converters = float8" : "[float8] enable_float8_linear = true");
  } else if (conv && strcmp(conv->val, "[]") && conv->val[0])
    bs_import_say(c->out, "refused", "[model] converters = %s: only float8 is modelled", conv->val);
  const bs_toml_kv *mp = get(c, "training", "mixed_precision_param");
  if (mp && !strcmp(mp->val, "float32")) {
    bs_import_put(c->out, "model.dtype", "fp32");
    bs_import_say(c->out, "mapped", "[training] mixed_precision_param = float32 -> model.dtype = fp32");
  } else if (mp && strcmp(mp->val, "bfloat16"))
    bs_import_say(c->out, "refused", "[training] mixed_precision_param = %s (line %d): bfloat16 or float32", mp->val,
                  mp->line);
}

/* Activation checkpointing: none, full, or op-level selective. */
static void map_recompute(tt *c) {
  const bs_toml_kv *mode = get(c, "activation_checkpoint", "mode"),
                   *sel = get(c, "activation_checkpoint", "selective_ac_option");
  if (!mode) {
    bs_import_say(c->out, "refused",
                  "[activation_checkpoint] mode: missing (none, selective or full; torchtitan's default has "
                  "changed between versions, so give it)");
  } else if (!strcmp(mode->val, "none") || !strcmp(mode->val, "full")) {
    const char *r = mode->val[0] == 'n' ? "off" : "full";
    bs_import_put(c->out, "workload.recompute", "%s", r);
    bs_import_say(c->out, "mapped", "[activation_checkpoint] mode = %s -> workload.recompute = %s", mode->val, r);
  } else if (!strcmp(mode->val, "selective") && (!sel || !strcmp(sel->val, "op"))) {
    bs_import_put(c->out, "workload.recompute", "selective");
    bs_import_say(c->out, "mapped",
                  "[activation_checkpoint] mode = selective, selective_ac_option = op -> workload.recompute = "
                  "selective (note: torch's op-level policy saves the matmuls' outputs; the simulator's selective "
                  "recomputes attention's core, as Megatron does)");
  } else if (!strcmp(mode->val, "selective"))
    bs_import_say(c->out, "refused",
                  "[activation_checkpoint] selective_ac_option = %s (line %d): full recomputation of every N-th "
                  "layer cannot be modelled (op, or mode = full)",
                  sel->val, sel->line);
  else
    bs_import_say(c->out, "refused", "[activation_checkpoint] mode = %s (line %d): none, selective or full", mode->val,
                  mode->line);
}

/* The pipeline: 1F1B or interleaved 1F1B; other schedules are refused. */
static void map_pipeline(tt *c, long pp) {
  const bs_toml_kv *s = get(c, "parallelism", "pipeline_parallel_schedule");
  const char *sched = s ? s->val : "1F1B";
  if (pp <= 1) return;
  if (!strcmp(sched, "1F1B")) {
    bs_import_put(c->out, "parallel.pp_schedule", "1f1b");
    bs_import_say(c->out, "mapped", "[parallelism] pipeline_parallel_schedule = 1F1B -> parallel.pp_schedule = 1f1b");
  } else if (!strcmp(sched, "Interleaved1F1B")) {
    long per = int_of(c, "parallelism", "pipeline_parallel_layers_per_stage", 0, 1), v = 2;
    if (per > 0 && c->layers % (pp * per)) {
      bs_import_say(c->out, "refused", "pipeline_parallel_layers_per_stage = %ld: pp x %ld does not divide %ld layers",
                    per, per, c->layers);
      return;
    }
    if (per > 0) v = c->layers / (pp * per);
    bs_import_put(c->out, "parallel.pp_schedule", "interleaved");
    bs_import_put(c->out, "parallel.pp_chunks", "%ld", v);
    bs_import_say(c->out, "mapped",
                  "[parallelism] pipeline_parallel_schedule = Interleaved1F1B -> parallel.pp_schedule "
                  "= interleaved, pp_chunks = %ld%s",
                  v, per > 0 ? " (layers / (pp x layers per stage))" : " (two stages per rank, torchtitan's default)");
  } else
    bs_import_say(c->out, "refused",
                  "[parallelism] pipeline_parallel_schedule = %s: only 1F1B and Interleaved1F1B are modelled", sched);
}

/* Context parallelism: torch's context_parallel over load-balanced (head-tail) shards, K and V
 * all-gathered (rotate method allgather, torch's default) or passed round a ring (alltoall). */
static void map_cp(tt *c, long cp) {
  if (cp <= 1) {
    bs_import_put(c->out, "parallel.method", "ring");
    bs_import_say(c->out, "mapped", "(context_parallel_degree 1) -> parallel.method = ring (over groups of one rank)");
    return;
  }
  const bs_toml_kv *rot = get(c, "parallelism", "context_parallel_rotate_method");
  const char *how = rot ? rot->val : "allgather";
  if (!strcmp(how, "alltoall")) {
    bs_import_put(c->out, "parallel.method", "ring");
    bs_import_put(c->out, "parallel.layout", "zigzag");
    bs_import_put(c->out, "parallel.double_ring", "off");
    bs_import_say(c->out, "mapped",
                  "[parallelism] context_parallel_degree = %ld, rotate_method = alltoall -> parallel.method = ring, "
                  "layout = zigzag (torch's load balancer), double_ring = off",
                  cp);
  } else if (!strcmp(how, "allgather")) {
    bs_import_put(c->out, "parallel.method", "allgather");
    bs_import_put(c->out, "parallel.layout", "zigzag");
    bs_import_say(c->out, "mapped",
                  "[parallelism] context_parallel_degree = %ld, rotate_method = allgather%s -> parallel.method = "
                  "allgather, layout = zigzag (torch's load balancer)",
                  cp, rot ? "" : " (the default)");
  } else {
    bs_import_put(c->out, "parallel.method", "ring");
    bs_import_say(c->out, "refused", "[parallelism] context_parallel_rotate_method = %s: allgather or alltoall", how);
  }
}

/* The mesh: world, degrees, ZeRO stage, batch and micro-batch. */
static void map_parallel(tt *c) {
  long rep = int_of(c, "parallelism", "data_parallel_replicate_degree", 1, 1),
       shard = int_of(c, "parallelism", "data_parallel_shard_degree", -1, -1),
       tp = int_of(c, "parallelism", "tensor_parallel_degree", 1, 1),
       pp = int_of(c, "parallelism", "pipeline_parallel_degree", 1, 1),
       cp = int_of(c, "parallelism", "context_parallel_degree", 1, 1),
       ep = int_of(c, "parallelism", "expert_parallel_degree", 1, 1);
  if (rep < 0 || shard < -1 || shard == 0 || tp < 0 || pp < 0 || cp < 0 || ep < 0) {
    if (shard == 0) bs_import_say(c->out, "refused", "[parallelism] data_parallel_shard_degree = 0: -1 or positive");
    return;
  }
  if (ep > 1) bs_import_say(c->out, "refused", "[parallelism] expert_parallel_degree = %ld: no experts in llama3", ep);
  long world = c->opt->gpus, fixed = rep * tp * pp * cp;
  if (!world && shard > 0) world = fixed * shard;
  if (!world) {
    bs_import_say(c->out, "refused",
                  "the world size: give import --gpus N (torchtitan takes it from the launcher: NGPU x nodes)");
    return;
  }
  if (shard == -1) {
    if (world % fixed) {
      bs_import_say(c->out, "refused", "the world size %ld: not a multiple of replicate x tp x pp x cp = %ld", world,
                    fixed);
      return;
    }
    shard = world / fixed;
  } else if (fixed * shard != world) {
    bs_import_say(c->out, "refused", "the degrees multiply to %ld GPUs, not the world size %ld", fixed * shard, world);
    return;
  }
  if (rep > 1 && shard > 1) {
    bs_import_say(c->out, "refused",
                  "HSDP (replicate %ld x shard %ld): the simulator shards over the whole dp x cp group, not "
                  "within replicas",
                  rep, shard);
    return;
  }
  long dp = rep * shard, zero = (shard > 1 || cp > 1) ? 3 : 0;
  if (zero && pp > 1) {
    bs_import_say(c->out, "refused",
                  "FSDP2 (shard %ld x cp %ld) with %ld pipeline stages: the simulator models ZeRO 3 without pipeline "
                  "stages only",
                  shard, cp, pp);
    return;
  }
  bs_import_put(c->out, "parallel.gpus", "%ld", world);
  bs_import_put(c->out, "parallel.tp", "%ld", tp);
  if (tp > 1) bs_import_put(c->out, "parallel.tp_variant", "v3");
  bs_import_put(c->out, "parallel.pp", "%ld", pp);
  bs_import_put(c->out, "parallel.dp", "%ld", dp);
  bs_import_put(c->out, "parallel.zero", "%ld", zero);
  bs_import_say(
    c->out, "mapped",
    "world %ld, replicate %ld x shard %ld x cp %ld x tp %ld x pp %ld -> parallel.gpus = %ld, dp = %ld, tp = "
    "%ld%s, pp = %ld, cp = %ld (gpus / (tp x dp x pp))",
    world, rep, shard, cp, tp, pp, world, dp, tp,
    tp > 1 ? " (tp_variant = v3: torchtitan's TP is sequence-parallel)" : "", pp, cp);
  bs_import_say(c->out, "mapped", "%s -> parallel.zero = %ld", zero ? "FSDP2 (over dp_shard x cp)" : "DDP (replicas)",
                zero);
  map_pipeline(c, pp);
  map_cp(c, cp);
  long local = int_of(c, "training", get(c, "training", "local_batch_size") ? "local_batch_size" : "batch_size", 0, 1);
  long global = int_of(c, "training", "global_batch_size", -1, -1);
  if (local == 0) bs_import_say(c->out, "refused", "[training] local_batch_size: missing");
  if (local <= 0 || global < -1 || global == 0) return;
  if (global < 0) global = local * dp;
  if (global % (local * dp)) {
    bs_import_say(c->out, "refused", "[training] global_batch_size = %ld: not a multiple of local batch x dp = %ld",
                  global, local * dp);
    return;
  }
  long mb = pp > 1 ? int_of(c, "parallelism", "pipeline_parallel_microbatch_size", 1, 1) : local;
  if (mb <= 0) return;
  if (local % mb) {
    bs_import_say(c->out, "refused", "pipeline_parallel_microbatch_size = %ld: does not divide the local batch %ld", mb,
                  local);
    return;
  }
  bs_import_put(c->out, "workload.batch", "%ld", global);
  bs_import_put(c->out, "parallel.micro_batch", "%ld", mb);
  bs_import_say(c->out, "mapped",
                "[training] local_batch_size = %ld (per data-parallel rank) -> workload.batch = %ld, "
                "parallel.micro_batch = %ld%s",
                local, global, mb, pp > 1 ? " (pipeline_parallel_microbatch_size)" : "");
}

int bs_import_torchtitan(const char *text, const bs_import_args *opt, bs_import_out *out, char *err, size_t errlen) {
  bs_toml t;
  if (bs_toml_read(text, &t, err, errlen)) return -1;
  tt c = {.t = &t, .opt = opt, .out = out};
  bs_import_put(out, "workload.phase", "train");
  bs_import_put(out, "workload.scope", "model");
  bs_import_put(out, "workload.causal", "true");
  bs_import_put(out, "workload.framework", "torchtitan");
  bs_import_say(out, "mapped",
                "torchtitan -> workload.framework = torchtitan (FSDP2, PyTorch SDPA: docs/frameworks.md)");
  sort_settings(&c);
  map_model(&c);
  const bs_toml_kv *seq = get(&c, "training", "seq_len");
  long s = int_of(&c, "training", "seq_len", 0, 1);
  if (!seq) bs_import_say(out, "refused", "[training] seq_len: missing");
  else if (s > 0) {
    bs_import_put(out, "workload.seq_len", "%ld", s);
    bs_import_say(out, "mapped", "[training] seq_len = %ld -> workload.seq_len = %ld", s, s);
  }
  map_recompute(&c);
  if (c.layers) map_parallel(&c);
  bs_toml_free(&t);
  return 0;
}
