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

static int fail(char *err, size_t errlen, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return -1;
}

static int check_common(const bs_config *c, char *err, size_t errlen) {
  char m[256];
  if (c->par.method < 0 || c->par.method >= BS_METHOD_COUNT)
    return fail(err, errlen, "parallel.method: unknown method");
  if (c->par.layout < BS_CONTIGUOUS || c->par.layout > BS_STRIPED)
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
  return 0;
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
  if (want && pm->double_ring && cfg->work.phase != BS_DECODE) {
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

int bs_plan_decide(const bs_config *cfg, int ranks_per_node, bs_decision *d) {
  return decide(cfg, ranks_per_node, d, NULL, 0);
}

void bs_plan_decision(const bs_plan *p, bs_decision *d) { decide(&p->cfg, p->rpn, d, NULL, 0); }

int bs_plan_create(const bs_config *cfg, int ranks_per_node, bs_plan **out, char *err, size_t errlen) {
  *out = NULL;
  if (check_common(cfg, err, errlen)) return -1;
  bs_plan *p = calloc(1, sizeof *p);
  if (!p) return fail(err, errlen, "out of memory");
  p->cfg = *cfg;
  p->G = cfg->par.gpus;
  p->B = cfg->work.batch;
  p->Zq = cfg->model.heads;
  p->Zkv = cfg->model.kv_heads;
  p->d = cfg->model.head_dim;
  p->N = cfg->work.seq_len;
  p->decode = cfg->work.phase == BS_DECODE;
  p->bwd = cfg->work.phase == BS_TRAIN;
  p->nq_dec = cfg->work.decode_tokens;
  p->es = bs_dtype_bytes(cfg->model.dtype);
  p->elem = cfg->model.dtype == BS_FP32 ? BS_ELEM_F32 : (cfg->model.dtype == BS_FP16 ? BS_ELEM_F16 : BS_ELEM_BF16);
  p->adt = cfg->model.dtype == BS_FP32 ? ATTN_FP32 : ATTN_BF16;
  bs_decision d;
  if (decide(cfg, ranks_per_node, &d, err, errlen)) {
    free(p);
    return -1;
  }
  p->rpn = ranks_per_node;
  p->P = d.ring_outer > 1 ? d.ring_inner : p->G;
  p->M = d.ring_outer;
  const plan_method *pm = plan_method_of(cfg->par.method);
  if (pm->check(p, err, errlen)) {
    free(p);
    return -1;
  }
  const plan_scope *ps = plan_scope_of(cfg->work.scope);
  if (ps) {
    bs_config ac = *cfg;
    ac.work.scope = BS_SCOPE_ATTENTION;
    if (ps->check(p, err, errlen) || bs_plan_create(&ac, ranks_per_node, &p->attn, err, errlen)) {
      free(p);
      return -1;
    }
    p->attn->in_layer = 1;
    p->scope = ps;
  }
  *out = p;
  return 0;
}

void bs_plan_free(bs_plan *p) {
  if (p) bs_plan_free(p->attn);
  free(p);
}
