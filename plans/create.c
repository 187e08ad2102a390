/*
 * create.c — making a plan from a request: the common checks, the decision
 * (double ring, ring sizes, all-to-all groups), the method row's checks and,
 * for layer and model scope, the scope row's checks and the attention plan
 * every layer runs. The plan keeps the scope row, which is how the iterator
 * reaches the scope's generator.
 */
#include <stdio.h>
#include <stdlib.h>
#include "plan_impl.h"
#include "workload.h"

static int fail(char *err, size_t errlen, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return -1;
}

/* parallel.cp_pass and workload.cached_tokens: what runs them (burst's and ring's forward, passq.c). */
static int check_pass(const bs_config *c, char *err, size_t errlen) {
  char m[320];
  int ringed = c->par.method == BS_BURST || c->par.method == BS_RING;
  if (c->par.cp_pass != BS_PASS_KV && c->par.cp_pass != BS_PASS_Q)
    return fail(err, errlen, "parallel.cp_pass: unknown value (kv or q)");
  if (c->par.cp_pass == BS_PASS_Q) {
    if (!ringed) {
      snprintf(m, sizeof m,
               "parallel.cp_pass: q needs method burst or ring (%s has no K,V ring whose place the queries "
               "could take)",
               bs_method_name(c->par.method));
      return fail(err, errlen, m);
    }
    if (c->work.phase == BS_TRAIN)
      return fail(err, errlen,
                  "parallel.cp_pass: q runs the forward only (set workload.phase = prefill or decode; training "
                  "passes K,V)");
  }
  int64_t C = c->work.cached_tokens;
  if (C < 0) return fail(err, errlen, "workload.cached_tokens: must not be negative");
  if (C == 0) return 0;
  if (C >= c->work.seq_len) {
    snprintf(m, sizeof m, "workload.cached_tokens: %lld must be below seq_len %lld (at least one new token)",
             (long long)C, (long long)c->work.seq_len);
    return fail(err, errlen, m);
  }
  if (c->work.phase != BS_PREFILL)
    return fail(err, errlen,
                "workload.cached_tokens: a KV cache is read by prefill (set workload.phase = prefill; decode "
                "attends to its cache of seq_len tokens already)");
  if (!ringed) {
    snprintf(m, sizeof m, "workload.cached_tokens: needs method burst or ring, not %s", bs_method_name(c->par.method));
    return fail(err, errlen, m);
  }
  return 0; /* layer and model scope: the projections of the new tokens around the same attention */
}

/*
 * Multi-head latent attention and a v head dimension other than head_dim: what runs them. burst and
 * ring pass K (head_dim) and V (v_head_dim) blocks around their rings, mla's per-head K, V or
 * mla-latent's one shared latent; the other methods are refused, with the reason. Layer and model
 * scope run mla (its down- and up-projections are workload_mla.c's) and refuse mla-latent: the
 * absorbed form folds the K,V up-projection into the query and the output (an inference trick), and
 * a layer built around it is not.
 */
static int check_head_dims(const bs_config *c, char *err, size_t errlen) {
  const bs_model *md = &c->model;
  char m[400];
  if (md->v_head_dim < 0) return fail(err, errlen, "model.v_head_dim: must not be negative (0 = head_dim)");
  int mla = md->attention != BS_ATTENTION_MHA;
  if (md->attention == BS_ATTENTION_MLA_LATENT && c->work.scope != BS_SCOPE_ATTENTION) {
    snprintf(m, sizeof m,
             "workload.scope: model.attention = %s runs at scope attention only (the absorbed form folds the "
             "K,V up-projection into the query and output projections, an inference trick whose layer is not "
             "modelled); use model.attention = mla at scope %s",
             bs_attention_name(md->attention), bs_scope_name(c->work.scope));
    return fail(err, errlen, m);
  }
  int64_t dv = md->v_head_dim > 0 ? md->v_head_dim : md->head_dim;
  if (!mla && dv == md->head_dim) return 0;
  const char *why = NULL;
  switch (c->par.method) {
  case BS_BURST:
  case BS_RING: return 0;
  case BS_ULYSSES:
  case BS_USP:
  case BS_TP:
    why =
      "it splits the heads over its ranks, so each rank would need the whole latent (shared by every head) "
      "and its own up-projection; its all-to-all of per-head K, V with two head dimensions is not built";
    break;
  case BS_RING_LI2021: why = "its explicit score matrix (QK and PV GEMMs) takes one head dimension"; break;
  case BS_TREE: why = "its allreduce of the partial outputs takes one head dimension"; break;
  default: why = "it takes one head dimension"; break;
  }
  snprintf(m, sizeof m,
           "parallel.method: %s does not run %s (v_head_dim %lld, head_dim %lld): %s; use burst or ring, which pass "
           "K and V blocks of their own widths",
           bs_method_name(c->par.method), mla ? bs_attention_name(md->attention) : "a v_head_dim other than head_dim",
           (long long)dv, (long long)md->head_dim, why);
  return fail(err, errlen, m);
}

static int check_common(const bs_config *c, char *err, size_t errlen) {
  char m[256];
  if (c->par.method < 0 || c->par.method >= BS_METHOD_COUNT)
    return fail(err, errlen, "parallel.method: unknown method");
  if (c->par.layout < BS_CONTIGUOUS || c->par.layout > BS_GREEDY)
    return fail(err, errlen, "parallel.layout: unknown layout");
  if (c->par.gpus < 1) {
    snprintf(m, sizeof m, "parallel.gpus: %d must be at least 1", c->par.gpus);
    return fail(err, errlen, m);
  }
  if (c->work.seq_len < 1) return fail(err, errlen, "workload.seq_len: must be at least 1");
  if (c->work.batch < 1) return fail(err, errlen, "workload.batch: must be at least 1");
  if (c->work.window < 0) return fail(err, errlen, "workload.window: must not be negative");
  if (c->model.heads < 1) return fail(err, errlen, "model.heads: must be at least 1");
  if (c->model.head_dim < 1) return fail(err, errlen, "model.head_dim: must be at least 1");
  if (c->model.kv_heads < 1 || c->model.heads % c->model.kv_heads != 0) {
    snprintf(m, sizeof m, "model.kv_heads: %lld must be at least 1 and divide heads %lld", (long long)c->model.kv_heads,
             (long long)c->model.heads);
    return fail(err, errlen, m);
  }
  if (c->work.phase < BS_TRAIN || c->work.phase > BS_DECODE) return fail(err, errlen, "workload.phase: unknown phase");
  if (c->work.docs < 0 || c->work.docs > BS_MAX_DOCS ||
      (c->work.docs > 0 && c->work.doc_end[c->work.docs - 1] != c->work.seq_len))
    return fail(err, errlen, "workload.documents: the documents must end at workload.seq_len");
  if (c->work.docs > 0 && (c->work.phase == BS_DECODE || c->work.cached_tokens > 0))
    return fail(err, errlen, "workload.documents: packed documents are for train and prefill without a KV cache");
  const plan_method *pm = plan_method_of(c->par.method);
  if (!pm) return fail(err, errlen, "parallel.method: unknown method");
  if (c->work.phase == BS_DECODE) {
    if (!pm->decode) {
      snprintf(m, sizeof m, "workload.phase: decode needs method tree or ring, not %s", bs_method_name(c->par.method));
      return fail(err, errlen, m);
    }
    if (c->work.decode_tokens < 1) return fail(err, errlen, "workload.decode_tokens: must be at least 1");
  } else if (pm->decode == 2) {
    return fail(err, errlen, "parallel.method: tree is a decode method (set workload.phase = decode)");
  }
  if (bs_config_sizes_check(c, err, errlen)) return -1;
  if (check_head_dims(c, err, errlen)) return -1;
  return check_pass(c, err, errlen);
}

/*
 * The decisions a plan takes from the request: a double ring (inner rings of
 * the ranks of a node, an outer ring over nodes) when asked, or on auto when
 * the ranks span whole nodes; the ring sizes; the all-to-all groups.
 */
static int decide(const bs_config *cfg, int ranks_per_node, bs_decision *d, char *err, size_t errlen) {
  const plan_method *pm = plan_method_of(cfg->par.method);
  int G = cfg->par.gpus, rpn = ranks_per_node > 0 ? ranks_per_node : G;
  int U = pm && pm->a2a == 2 ? cfg->par.ulysses_degree : G;
  memset(d, 0, sizeof *d);
  if (!pm || G < 1) return fail(err, errlen, "parallel.method: unknown method");
  d->ring_inner = d->ring_outer = d->ulysses_degree = 1;
  if (pm->a2a) d->ulysses_degree = U;
  if (pm->ring == 1) d->ring_inner = G;
  if (pm->ring == 2 && U >= 1 && G % U == 0) d->ring_inner = G / U;
  int want = cfg->par.double_ring == BS_ON || (cfg->par.double_ring == BS_AUTO && rpn > 1 && rpn < G && G % rpn == 0);
  /* pass-Q runs a single ring: its all-to-all, not the ring, crosses every node */
  if (want && pm->double_ring && cfg->work.phase != BS_DECODE && cfg->par.cp_pass != BS_PASS_Q) {
    if (G % rpn != 0) {
      char m[256];
      snprintf(m, sizeof m, "parallel.double_ring: ranks_per_node %d does not divide gpus %d", rpn, G);
      return fail(err, errlen, m);
    }
    d->ring_inner = rpn < G ? rpn : G;
    d->ring_outer = G / d->ring_inner;
    d->double_ring = d->ring_outer > 1;
  }
  d->valid = 1;
  return 0;
}

/* The balance layouts (doc-zigzag, greedy) split the K,V ring's sequence into runs (balance.c). */
static int balance_runs(bs_plan *p, char *err, size_t errlen) {
  const bs_config *c = &p->cfg;
  if (c->par.layout != BS_DOC_ZIGZAG && c->par.layout != BS_GREEDY) return 0;
  if ((c->par.method != BS_BURST && c->par.method != BS_RING) || c->par.cp_pass == BS_PASS_Q || p->decode ||
      p->Nc > 0) {
    char m[256];
    snprintf(m, sizeof m,
             "parallel.layout: %s shards run on the K,V ring of burst and ring (pass-KV, train or prefill without a "
             "cache), not %s%s",
             bs_layout_name(c->par.layout), bs_method_name(c->par.method),
             c->par.cp_pass == BS_PASS_Q ? " with cp_pass = q" : (p->decode || p->Nc > 0 ? " with a KV cache" : ""));
    return fail(err, errlen, m);
  }
  if (p->G <= 1) return 0;
  return plan_runs_make(&c->work, c->par.layout, p->G, &p->runs, err, errlen);
}

/* The attention group's config: its ranks, its share of the heads, one microbatch. */
static void inner_config(const bs_config *c, const bs_mesh *m, bs_config *ac) {
  *ac = *c;
  ac->work.scope = BS_SCOPE_ATTENTION;
  ac->par.gpus = m->size[m->att_dim];
  if (m->att_dim == BS_DIM_CP) {
    ac->model.heads /= m->size[BS_DIM_TP];
    ac->model.kv_heads = plan_kv_heads_per_rank(c->model.kv_heads, m->size[BS_DIM_TP]);
  }
  ac->work.batch = m->micro_batch;
  ac->par.tp = ac->par.dp = ac->par.pp = 1;
  ac->par.ep = 1; /* the experts are the layer's (workload_moe.c), not the attention group's */
  ac->par.micro_batch = 0;
  for (int i = 0; i < BS_DIM_COUNT; i++) ac->par.order[i] = (int8_t)i;
}

/* Members of the attention group per node (<= 0: one node), for its double ring. */
static int inner_rpn(const bs_mesh *m, int rpn) {
  int s = m->stride[m->att_dim], A = m->size[m->att_dim];
  if (rpn <= 0) return rpn;
  if (s >= rpn || rpn % s != 0) return 1;
  return rpn / s < A ? rpn / s : A;
}

static int composed(const bs_config *cfg, const bs_mesh *m) { return m->size[m->att_dim] != cfg->par.gpus; }

/* The decision with the mesh m of cfg, for a composed plan that of its attention group. */
/* The ranks that split the sequence and how: the K,V ring's (burst, ring, li2021 contiguous), usp's
 * ring across its groups; ulysses and tp split heads and see every pair. */
static double attn_imbalance(const bs_config *c, const bs_decision *d) {
  bs_method m = c->par.method;
  if (c->work.phase == BS_DECODE || m == BS_ULYSSES || m == BS_TP || m == BS_TREE) return 1.0;
  if (m == BS_USP)
    return bs_attn_imbalance(&c->work, c->par.layout, d->cp / (d->ulysses_degree > 0 ? d->ulysses_degree : 1));
  return bs_attn_imbalance(&c->work, m == BS_RING_LI2021 ? BS_CONTIGUOUS : c->par.layout, d->cp);
}

static int decide_all(const bs_config *cfg, const bs_mesh *m, int ranks_per_node, bs_decision *d) {
  int rc;
  if (composed(cfg, m)) {
    bs_config ac;
    inner_config(cfg, m, &ac);
    rc = decide(&ac, inner_rpn(m, ranks_per_node), d, NULL, 0);
  } else {
    rc = decide(cfg, ranks_per_node, d, NULL, 0);
  }
  d->tp = m->size[BS_DIM_TP];
  d->cp = m->size[BS_DIM_CP];
  d->dp = m->size[BS_DIM_DP];
  d->pp = m->size[BS_DIM_PP];
  d->pp_chunks = cfg->par.pp_schedule == BS_PP_INTERLEAVED && d->pp > 1 ? cfg->par.pp_chunks : 1;
  d->micro_batch = m->micro_batch;
  d->microbatches = m->microbatches;
  bs_order_string(cfg->par.order, d->order, sizeof d->order);
  d->attn_imbalance = attn_imbalance(cfg, d);
  return rc;
}

int bs_plan_decide(const bs_config *cfg, int ranks_per_node, bs_decision *d) {
  bs_mesh m;
  if (bs_mesh_of(cfg, &m, NULL, 0)) {
    memset(d, 0, sizeof *d);
    return -1;
  }
  return decide_all(cfg, &m, ranks_per_node, d);
}

void bs_plan_decision(const bs_plan *p, bs_decision *d) { decide_all(&p->cfg, &p->mesh, p->rpn, d); }

/* What composition asks of a config beyond the method's own checks. */
static int check_composed(const bs_config *c, const bs_mesh *m, char *err, size_t errlen) {
  char msg[320];
  int tp = m->size[BS_DIM_TP];
  if (m->att_dim == BS_DIM_CP && tp > 1 && (c->model.heads % tp != 0 || !plan_kv_split_ok(c->model.kv_heads, tp))) {
    snprintf(msg, sizeof msg,
             "parallel.tp: %d must divide model.heads (%lld) and divide, or be a multiple of, model.kv_heads (%lld)",
             tp, (long long)c->model.heads, (long long)c->model.kv_heads);
    return fail(err, errlen, msg);
  }
  if (c->work.scope == BS_SCOPE_ATTENTION && m->microbatches > 1) {
    snprintf(msg, sizeof msg,
             "parallel.micro_batch: %lld sequences make %lld microbatches per replica; attention scope runs one "
             "(leave micro_batch out, or set workload.scope = layer or model)",
             (long long)m->micro_batch, (long long)m->microbatches);
    return fail(err, errlen, msg);
  }
  if (m->size[BS_DIM_PP] > 1 && c->work.scope != BS_SCOPE_MODEL)
    return fail(err, errlen, "parallel.pp: pipeline stages split a model's layers (set workload.scope = model)");
  return bs_moe_check(c, m, err, errlen);
}

/* workload.kv_block and workload.max_seq_len (before any padding: the user's sequence). */
static int check_kv_alloc(const bs_workload *w, char *err, size_t errlen) {
  char m[256];
  if (w->kv_block < 0) return fail(err, errlen, "workload.kv_block: must not be negative");
  int64_t held = w->seq_len + (w->phase == BS_DECODE ? w->decode_tokens : 0);
  if (w->max_seq_len > 0 && w->max_seq_len < held) {
    snprintf(m, sizeof m, "workload.max_seq_len: %lld is below the %lld tokens a sequence holds (seq_len%s)",
             (long long)w->max_seq_len, (long long)held, w->phase == BS_DECODE ? " + decode_tokens" : "");
    return fail(err, errlen, m);
  }
  return 0;
}

int bs_plan_create(const bs_config *cfg, int ranks_per_node, bs_plan **out, char *err, size_t errlen) {
  *out = NULL;
  if (check_kv_alloc(&cfg->work, err, errlen)) return -1;
  int64_t pad = bs_seq_pad(cfg);
  if (pad > 0 && cfg->work.seq_len <= INT64_MAX - pad) { /* the plan of the padded sequence (pad.c) */
    bs_config padded = *cfg;
    padded.work.seq_len += pad;
    return bs_plan_create(&padded, ranks_per_node, out, err, errlen);
  }
  if (check_common(cfg, err, errlen)) return -1;
  bs_mesh mesh;
  if (bs_mesh_of(cfg, &mesh, err, errlen) || check_composed(cfg, &mesh, err, errlen)) return -1;
  bs_plan *p = calloc(1, sizeof *p);
  if (!p) return fail(err, errlen, "out of memory");
  p->cfg = *cfg;
  p->G = cfg->par.gpus;
  p->B = cfg->work.batch;
  p->Zq = cfg->model.heads;
  p->Zkv = cfg->model.kv_heads;
  p->d = cfg->model.head_dim;
  p->dv = cfg->model.v_head_dim > 0 ? cfg->model.v_head_dim : cfg->model.head_dim;
  p->N = cfg->work.seq_len;
  p->decode = cfg->work.phase == BS_DECODE;
  p->bwd = cfg->work.phase == BS_TRAIN;
  p->nq_dec = cfg->work.decode_tokens;
  p->Nc = cfg->work.cached_tokens;
  p->es = bs_dtype_bytes(cfg->model.dtype);
  p->elem = cfg->model.dtype == BS_FP32 ? BS_ELEM_F32 : (cfg->model.dtype == BS_FP16 ? BS_ELEM_F16 : BS_ELEM_BF16);
  p->adt = cfg->model.dtype == BS_FP32 ? ATTN_FP32 : ATTN_BF16;
  p->mesh = mesh;
  p->composed = composed(cfg, &mesh);
  p->rpn = ranks_per_node;
  bs_config ac;
  inner_config(cfg, &mesh, &ac);
  const plan_scope *ps = plan_scope_of(cfg->work.scope);
  if (p->composed) {
    /* the attention group's plan makes the method's decisions and checks */
    if (bs_plan_create(&ac, inner_rpn(&mesh, ranks_per_node), &p->attn, err, errlen) ||
        (ps && ps->check(p, err, errlen))) {
      bs_plan_free(p);
      return -1;
    }
    p->P = p->attn->P;
    p->M = p->attn->M;
    if (ps) p->attn->in_layer = 1;
    p->scope = ps ? ps : &plan_scope_compose;
    if (ps) p->share = plan_op_share_new(p->attn->G);
    *out = p;
    return 0;
  }
  bs_decision d;
  if (decide(cfg, ranks_per_node, &d, err, errlen)) {
    free(p);
    return -1;
  }
  p->P = d.ring_outer > 1 ? d.ring_inner : p->G;
  p->M = d.ring_outer;
  const plan_method *pm = plan_method_of(cfg->par.method);
  if (pm->check(p, err, errlen) || balance_runs(p, err, errlen)) {
    bs_plan_free(p);
    return -1;
  }
  if (ps) {
    if (ps->check(p, err, errlen) || bs_plan_create(&ac, ranks_per_node, &p->attn, err, errlen)) {
      bs_plan_free(p);
      return -1;
    }
    p->attn->in_layer = 1;
    p->scope = ps;
    p->share = plan_op_share_new(p->attn->G);
  }
  *out = p;
  return 0;
}

void bs_plan_free(bs_plan *p) {
  if (p) {
    plan_op_share_free(p->share);
    bs_plan_free(p->attn);
    plan_runs_free(p->runs);
  }
  free(p);
}
