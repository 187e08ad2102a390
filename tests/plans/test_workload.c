/*
 * test_workload.c — layer and model scope against hand formulas: the GEMM
 * FLOPs of a layer, Megatron TP v1 against v3 collective bytes, ZeRO stages'
 * collective bytes and persistent memory (2Ψ, 2Ψ, 12Ψ and their shards, as
 * in the ZeRO paper), recompute, inference without gradients, prefill with
 * and without the KV cache. Every rank's
 * program is walked on its own: ids in range, ALLOC/FREE paired, handles
 * waited (the simulator tests check that ranks match each other).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "plans/plan.h"
#include "plan_toy.h"
#include "plans/workload.h"

typedef struct {
  double gemm_flops, attn_flops, ew_elems;
  int64_t ew_bytes[3];              /* bytes of the ELEMWISE ops (2 elems es, bf16): layer, optimizer, FP8 casts */
  int ew_ops[3];                    /* their launches (one op each) */
  double gemm_fp8_flops;            /* of GEMMs in FP8 (model.fp8) */
  int64_t coll_sent[BS_COLL_COUNT]; /* bs_coll_bytes_sent per kind */
  int ncoll[BS_COLL_COUNT];
  int64_t first_allocs[5]; /* the persistent weights, grads, Adam states */
  bs_mem_class first_cls[5];
  int64_t peak;
  int64_t cls_allocated[BS_MEM_CLASS_COUNT];
  int64_t coll_by_size[17]; /* bytes sent in collectives, by group size (composed: one size per group kind) */
  int64_t p2p_sent, p2p_recv;
  int nsend, nrecv;
  int64_t sent_to[16], recv_from[16];  /* point-to-point bytes by peer (ranks < 16) */
  int64_t act_at_bwd;                  /* live ACTIVATIONS bytes when the first backward begins */
  int32_t recv_tag[64], recv_peer[64]; /* the first 64 point-to-point receives, in program order */
  int seen_bwd;
} rank_walk;

/* The optimizer step's kernels (plans/workload_kernels.c). */
static int is_optimizer(const char *label) {
  return !strcmp(label, "gradient norm") || !strcmp(label, "Adam step") ||
         !strcmp(label, "master weights to the model's") || !strcmp(label, "gradient buffer zeroed");
}

static void walk_rank(const bs_plan *p, int rank, rank_walk *w) {
  memset(w, 0, sizeof *w);
  bs_plan_iter *it = bs_plan_iter_new(p, rank);
  assert_non_null(it);
  static int64_t size[BS_WL_MAX_BUFS];
  static char live[BS_WL_MAX_BUFS], hlive[BS_WL_MAX_HANDLES];
  static bs_mem_class cls[BS_WL_MAX_BUFS];
  memset(live, 0, sizeof live);
  memset(hlive, 0, sizeof hlive);
  int64_t cur = 0;
  int nalloc = 0;
  bs_op op;
  while (bs_plan_next(it, &op)) {
    switch (op.kind) {
    case BS_OP_ALLOC: {
      int b = op.u.alloc.buf;
      assert_true(b >= 0 && b < BS_WL_MAX_BUFS && !live[b]);
      live[b] = 1;
      size[b] = op.u.alloc.bytes;
      cls[b] = op.u.alloc.cls;
      cur += size[b];
      if (cur > w->peak) w->peak = cur;
      w->cls_allocated[op.u.alloc.cls] += op.u.alloc.bytes;
      if (nalloc < 5) {
        w->first_allocs[nalloc] = op.u.alloc.bytes;
        w->first_cls[nalloc] = op.u.alloc.cls;
      }
      nalloc++;
      break;
    }
    case BS_OP_FREE:
      assert_true(op.u.free.buf >= 0 && op.u.free.buf < BS_WL_MAX_BUFS && live[op.u.free.buf]);
      live[op.u.free.buf] = 0;
      cur -= size[op.u.free.buf];
      break;
    case BS_OP_COMPUTE:
      if (op.u.compute.kernel == BS_K_GEMM) {
        assert_true(op.u.compute.flops == 2.0 * op.u.compute.m * op.u.compute.n * op.u.compute.k);
        w->gemm_flops += op.u.compute.flops;
        if (op.u.compute.fp8) w->gemm_fp8_flops += op.u.compute.flops;
      } else if (op.u.compute.kernel == BS_K_ELEMWISE) {
        w->ew_elems += (double)op.u.compute.elems;
        const char *l = op.u.compute.label ? op.u.compute.label : "";
        int part = strstr(l, "FP8") ? 2 : is_optimizer(l) ? 1 : 0;
        if (op.u.compute.ew == BS_EW_GENERIC) { /* not the attention plan's own (merges, zeroed sums) */
          w->ew_bytes[part] += 4 * op.u.compute.elems;
          w->ew_ops[part]++;
        }
      } else if (op.u.compute.kernel <= BS_K_ATTN_BWD_UNFUSED) {
        w->attn_flops += op.u.compute.flops;
      }
      for (int j = 0; j < BS_OP_IN; j++)
        if (op.u.compute.in[j].buf >= 0) assert_true(live[op.u.compute.in[j].buf]);
      break;
    case BS_OP_SEND:
    case BS_OP_RECV:
    case BS_OP_COLL:
      assert_true(op.handle >= 0 && op.handle < BS_WL_MAX_HANDLES && !hlive[op.handle]);
      hlive[op.handle] = 1;
      if (op.kind == BS_OP_COLL) {
        int64_t b = bs_coll_bytes_sent(op.u.coll.kind, op.u.coll.bytes, op.u.coll.group.size);
        w->coll_sent[op.u.coll.kind] += b;
        w->ncoll[op.u.coll.kind]++;
        if (op.u.coll.group.size <= 16) w->coll_by_size[op.u.coll.group.size] += b;
      } else if (op.kind == BS_OP_SEND) {
        w->p2p_sent += op.u.p2p.bytes;
        w->nsend++;
        if (op.u.p2p.peer >= 0 && op.u.p2p.peer < 16) w->sent_to[op.u.p2p.peer] += op.u.p2p.bytes;
      } else {
        w->p2p_recv += op.u.p2p.bytes;
        if (w->nrecv < 64) {
          w->recv_tag[w->nrecv] = op.u.p2p.tag;
          w->recv_peer[w->nrecv] = op.u.p2p.peer;
        }
        w->nrecv++;
        if (op.u.p2p.peer >= 0 && op.u.p2p.peer < 16) w->recv_from[op.u.p2p.peer] += op.u.p2p.bytes;
      }
      break;
    case BS_OP_WAIT:
      for (int j = 0; j < op.u.wait.n; j++) {
        assert_true(hlive[op.u.wait.handles[j]]);
        hlive[op.u.wait.handles[j]] = 0;
      }
      break;
    case BS_OP_PHASE:
      if (op.u.phase.begin && op.u.phase.fwd_bwd == 1 && !w->seen_bwd) {
        w->seen_bwd = 1;
        for (int b = 0; b < BS_WL_MAX_BUFS; b++)
          if (live[b] && cls[b] == BS_MEM_ACTIVATIONS) w->act_at_bwd += size[b];
      }
      break;
    default: break;
    }
  }
  assert_int_equal(bs_plan_iter_error(it), 0);
  bs_plan_iter_free(it);
  for (int b = 0; b < BS_WL_MAX_BUFS; b++)
    if (live[b])
      fail_msg("rank %d: buffer %d (%lld B, class %s) never freed", rank, b, (long long)size[b],
               bs_mem_class_name(cls[b]));
  for (int h = 0; h < BS_WL_MAX_HANDLES; h++) assert_int_equal(hlive[h], 0);
}

/* GEMM FLOPs of one layer's forward for T tokens and tensor-parallel degree g. */
static double layer_fwd_gemm(const bs_config *c, double T, double g) {
  double H = c->model.hidden, F = c->model.ffn, qkv = (c->model.heads + 2.0 * c->model.kv_heads) * c->model.head_dim;
  double o = (double)c->model.heads * c->model.head_dim;
  return 2 * T * H * qkv / g + 2 * T * o * H / g + 2 * T * H * 2 * F / g + 2 * T * F * H / g;
}

static void test_layer_flops(void **st) {
  (void)st;
  bs_method ms[] = {BS_BURST, BS_RING, BS_ULYSSES, BS_USP, BS_TP};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
    for (int ph = BS_TRAIN; ph <= BS_PREFILL; ph++) {
      bs_config c = plan_toy(ms[i], 4, BS_SCOPE_LAYER, (bs_phase)ph);
      c.par.ulysses_degree = 2;
      bs_plan *p = toy_plan_make(&c);
      rank_walk w;
      walk_rank(p, 1, &w);
      double T = ms[i] == BS_TP ? 256 : 64, g = ms[i] == BS_TP ? 4 : 1;
      double want = layer_fwd_gemm(&c, T, g) * (ph == BS_TRAIN ? 3 : 1); /* backward GEMMs: 2x */
      assert_true(w.gemm_flops == want);
      /* the attention inside is the method's own plan, unchanged */
      bs_config ac = c;
      ac.work.scope = BS_SCOPE_ATTENTION;
      bs_plan *pa = toy_plan_make(&ac);
      rank_walk wa;
      bs_plan_iter *it = bs_plan_iter_new(pa, 1);
      double af = 0;
      bs_op op;
      while (bs_plan_next(it, &op))
        if (op.kind == BS_OP_COMPUTE && op.u.compute.kernel <= BS_K_ATTN_BWD_UNFUSED) af += op.u.compute.flops;
      bs_plan_iter_free(it);
      (void)wa;
      assert_true(w.attn_flops == af);
      bs_plan_free(pa);
      bs_plan_free(p);
    }
  }
}

static void test_model_flops_recompute(void **st) {
  (void)st;
  for (int rc = 0; rc <= 1; rc++) {
    bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, BS_TRAIN);
    c.work.recompute = rc;
    bs_plan *p = toy_plan_make(&c);
    rank_walk w;
    walk_rank(p, 2, &w);
    double T = 64, head = 2 * T * c.model.hidden * c.model.vocab;
    double want = c.model.layers * layer_fwd_gemm(&c, T, 1) * (rc ? 4 : 3) + 3 * head;
    assert_true(w.gemm_flops == want);
    bs_plan_free(p);
  }
}

/*
 * Selective recompute against Korthikanti et al. 2022 (arXiv 2205.05198), section 4. The paper
 * keeps sbh(34 + 5as/h) bytes per layer (s tokens, b sequences, h hidden, a heads; fp16, GPT with
 * dropout), sbh/t (34 + 5as/h) with tensor and sequence parallelism over t, and selective recompute
 * drops the 5as/h term (scores, softmax, its dropout) and recomputes the attention core, 4bs^2h
 * FLOPs per layer (QK^T and attention over V, no causal mask). Here (LLaMA layer: RMSNorm, SwiGLU,
 * no dropout; FlashAttention: no score tensor) a rank with s tokens of b = 1 keeps, in bytes:
 *   es (4sh + 3sF)          layer input, norm1 out, residual, norm2 out, gate + up, SwiGLU out
 *   es s (a + 2 a_kv) d     Q, K, V                 (the paper's 4sbh + 2sbh)
 *   4 s a d                 O in fp32 (the output projection's input)
 *   4 a s                   lse in fp32             (what replaces the paper's 5as^2b)
 * (with a = a_kv, F = 8h/3 and es = 2 the first three make the paper's 34 sbh). Selective keeps
 * all but lse; full keeps the layer input (es s h); the recomputed FLOPs are the attention
 * forward over the rank's s queries and all N keys: 4 s N a d (4 b N^2 h / G), and full also
 * recomputes the forward GEMMs. Under tp v3 every term is divided by t (s = N, heads a / t).
 */
static void recompute_case(bs_method m, int G, int64_t s, int64_t t) {
  bs_config c = plan_toy(m, G, BS_SCOPE_LAYER, BS_TRAIN);
  c.par.tp_variant = 3;
  int64_t h = c.model.hidden, F = c.model.ffn, a = c.model.heads, akv = c.model.kv_heads, d = c.model.head_dim;
  int64_t N = c.work.seq_len, es = 2;
  int64_t rest = es * (4 * s * h + 3 * s * F) / t, qkv = es * s * (a + 2 * akv) * d / t, o = 4 * s * a * d / t;
  int64_t lse = 4 * a * s / t;
  double core_fwd = 4.0 * (double)s * (double)N * (double)(a * d) / (double)t;
  rank_walk w[3];
  int modes[3] = {BS_RECOMPUTE_OFF, BS_RECOMPUTE_SELECTIVE, BS_RECOMPUTE_FULL};
  for (int i = 0; i < 3; i++) {
    c.work.recompute = modes[i];
    bs_plan *p = toy_plan_make(&c);
    walk_rank(p, 1, &w[i]);
    bs_plan_free(p);
    assert_true(w[i].seen_bwd);
  }
  assert_int_equal(w[0].act_at_bwd, rest + qkv + o + lse);
  assert_int_equal(w[1].act_at_bwd, rest + qkv + o);
  assert_int_equal(w[2].act_at_bwd, es * s * h / t);
  /* selective: the attention core's forward once more, no GEMM again; full: the whole forward */
  assert_true(w[1].attn_flops - w[0].attn_flops == core_fwd);
  assert_true(w[1].gemm_flops == w[0].gemm_flops);
  assert_true(w[2].attn_flops - w[0].attn_flops == core_fwd);
  assert_true(w[2].gemm_flops == w[0].gemm_flops * 4 / 3);
}

static void test_recompute_selective(void **st) {
  (void)st;
  recompute_case(BS_BURST, 4, 64, 1); /* sequence parallel: 256 / 4 tokens a rank */
  recompute_case(BS_TP, 4, 256, 4);   /* Megatron tp + sequence parallelism over t = 4 */
  /* the old boolean: true is full */
  bs_config d;
  bs_config_default(&d);
  assert_int_equal(d.work.recompute, BS_RECOMPUTE_OFF);
  assert_int_equal(BS_RECOMPUTE_FULL, 1);
  assert_string_equal(bs_recompute_name(BS_RECOMPUTE_SELECTIVE), "selective");
}

/* Per-rank TP bytes: S = B N H es; all-reduce 2(G-1)/G S, all-gather (G-1) S/G, reduce-scatter (G-1)/G S. */
static void test_tp_v1_v3(void **st) {
  (void)st;
  int G = 4;
  for (int ph = BS_TRAIN; ph <= BS_PREFILL; ph++) {
    int64_t sent[4] = {0};
    for (int v = 1; v <= 3; v += 2) {
      bs_config c = plan_toy(BS_TP, G, BS_SCOPE_LAYER, (bs_phase)ph);
      c.par.tp_variant = v;
      bs_plan *p = toy_plan_make(&c);
      rank_walk w;
      walk_rank(p, 0, &w);
      int64_t S = c.work.batch * c.work.seq_len * c.model.hidden * 2;
      int64_t ar = 2 * (G - 1) * (S / G), ag = (G - 1) * (S / G), rs = (G - 1) * (S / G);
      if (v == 1) {
        int n = ph == BS_TRAIN ? 4 : 2; /* one after each row-parallel GEMM, and their mirrors */
        assert_int_equal(w.ncoll[BS_COLL_ALLREDUCE], n);
        assert_int_equal(w.coll_sent[BS_COLL_ALLREDUCE], n * ar);
        assert_int_equal(w.ncoll[BS_COLL_ALLGATHER] + w.ncoll[BS_COLL_REDUCE_SCATTER], 0);
      } else {
        /* forward: gather before each column-parallel GEMM, scatter after each row-parallel one;
         * backward: gather dY, gather the input again for dW, scatter dX */
        int nag = ph == BS_TRAIN ? 6 : 2, nrs = ph == BS_TRAIN ? 4 : 2;
        assert_int_equal(w.ncoll[BS_COLL_ALLGATHER], nag);
        assert_int_equal(w.ncoll[BS_COLL_REDUCE_SCATTER], nrs);
        assert_int_equal(w.coll_sent[BS_COLL_ALLGATHER], nag * ag);
        assert_int_equal(w.coll_sent[BS_COLL_REDUCE_SCATTER], nrs * rs);
        assert_int_equal(w.ncoll[BS_COLL_ALLREDUCE], 0);
      }
      int64_t tot = 0;
      for (int k = 0; k < BS_COLL_COUNT; k++) tot += w.coll_sent[k];
      sent[v] = tot;
      bs_plan_free(p);
    }
    /* forward only, v3 moves what v1 moves (an all-reduce is a reduce-scatter and an all-gather) */
    if (ph == BS_PREFILL) assert_int_equal(sent[1], sent[3]);
    else assert_int_equal(sent[3] * 8, sent[1] * 10);
  }
}

/* ZeRO stages over the data-parallel group D (here all 4 ranks, sequence parallel), with main
 * gradients of g bytes (4: fp32, Megatron's default; 2: model.main_grads = bf16) reduced in their
 * precision: collective bytes per rank (D-1)/D x (2 gΨ) for stage 0 (all-reduce), (D-1)/D x (gΨ +
 * 2Ψ) for stages 1-2 (reduce-scatter, all-gather of the bf16 weights), (D-1)/D x (gΨ + 2 x 2Ψ) for
 * stage 3 (two weight gathers); weights, gradients, Adam states 2Ψ, gΨ, 12Ψ unsharded (8Ψ without
 * master weights), divided by D from stage 3, 2, 1. */
static void test_zero(void **st) {
  (void)st;
  int64_t D = 4;
  for (int mg = 0; mg < 3; mg++)
    for (int scope = BS_SCOPE_LAYER; scope <= BS_SCOPE_MODEL; scope++)
      for (int z = 0; z <= 3; z++) {
        bs_config c = plan_toy(BS_BURST, (int)D, (bs_scope)scope, BS_TRAIN);
        c.par.zero = z;
        c.model.main_grads = mg == 1 ? BS_GRADS_BF16 : BS_GRADS_FP32;
        c.model.master_weights = mg == 2 ? BS_MASTER_NONE : BS_MASTER_FP32;
        int64_t g = mg == 1 ? 2 : 4, nopt = mg == 2 ? 2 : 3;
        bs_plan *p = toy_plan_make(&c);
        bs_param_count pc;
        bs_param_count_of(&c, &pc);
        int64_t H = 64, psi_layer = H * 12 * 16 + 64 * 64 + 2 * H * 128 + 128 * H + 2 * H;
        int64_t psi = scope == BS_SCOPE_MODEL ? 2 * psi_layer + 2 * 256 * H + H : psi_layer;
        assert_int_equal(pc.total, psi);
        assert_int_equal(pc.shard_total * D, psi);
        rank_walk w;
        walk_rank(p, 3, &w);
        int64_t tot = 0;
        for (int k = 0; k < BS_COLL_COUNT; k++) tot += w.coll_sent[k];
        int64_t vol = (D - 1) * (z == 0 ? 2 * g * psi / D : z < 3 ? (g + 2) * psi / D : (g + 4) * psi / D);
        assert_int_equal(tot, vol);
        assert_int_equal(w.ncoll[BS_COLL_ALLREDUCE] > 0, z == 0);
        assert_int_equal(w.first_cls[0], BS_MEM_WEIGHTS);
        assert_int_equal(w.first_allocs[0], z >= 3 ? 2 * psi / D : 2 * psi);
        if (w.first_allocs[1] != (z >= 2 ? g * psi / D : g * psi))
          print_error("scope %d zero %d grads %lld psi %lld\n", scope, z, (long long)w.first_allocs[1], (long long)psi);
        assert_int_equal(w.first_cls[1], BS_MEM_GRADS);
        assert_int_equal(w.first_allocs[1], z >= 2 ? g * psi / D : g * psi);
        for (int j = 2; j < 2 + nopt; j++) {
          assert_int_equal(w.first_cls[j], BS_MEM_OPTIMIZER);
          assert_int_equal(w.first_allocs[j], z >= 1 ? 4 * psi / D : 4 * psi);
        }
        assert_int_equal(w.cls_allocated[BS_MEM_OPTIMIZER], (z >= 1 ? 4 * nopt * psi / D : 4 * nopt * psi));
        bs_plan_free(p);
      }
}

/* Parameters a rank holds of one layer (tensor-parallel degree g: norms are not sharded). */
static int64_t layer_params(const bs_config *c, int64_t g) {
  int64_t H = c->model.hidden, F = c->model.ffn, d = c->model.head_dim;
  return H * (c->model.heads + 2 * c->model.kv_heads) * d / g + c->model.heads * d * H / g + 3 * H * F / g + 2 * H;
}

/*
 * Composed tp 2 x cp 2 x dp 2 (tp fastest): every rank holds half of each GEMM's weights; the
 * tensor-parallel all-reduces (v1: two per layer and pass, the embedding's and the head's) run
 * over groups of 2 on the tokens of the rank's context share; the gradients of ZeRO-1 (reduce-
 * scatter, then all-gather of the updated weights) over the dp x cp group of 4.
 */
static void test_composed_groups(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_BURST, 8, BS_SCOPE_MODEL, BS_TRAIN);
  c.par.tp = 2;
  c.par.dp = 2;
  c.work.batch = 2;
  c.par.zero = 1;
  bs_plan *p = toy_plan_make(&c);
  int64_t H = 64, V = 256, L = 2, es = 2, N = 256, cp = 2, tp = 2, D = 4;
  int64_t psi = L * layer_params(&c, tp) + 2 * V * H / tp + H;
  bs_param_count pc;
  bs_param_count_of(&c, &pc);
  assert_int_equal(pc.total, psi);
  assert_int_equal(pc.dp, D);
  for (int r = 0; r < 8; r++) {
    rank_walk w;
    walk_rank(p, r, &w);
    assert_int_equal(w.first_allocs[0], 2 * psi);
    int64_t T = 1 * N / cp, ar = T * H * es; /* one microbatch of one sequence, the rank's tokens */
    /* and the vocabulary-parallel cross-entropy's three all-reduces of one fp32 value a token */
    assert_int_equal(w.coll_by_size[2], (4 * L + 2) * (2 * (tp - 1) * (ar / tp)) + 3 * (2 * (tp - 1) * (4 * T / tp)));
    int64_t shards =
      L * bs_zero_shard(layer_params(&c, tp), D) + bs_zero_shard(V * H / tp, D) + bs_zero_shard(V * H / tp + H, D);
    /* ZeRO-1 over the 4: the fp32 main gradients reduce-scattered (4 bytes), the bf16 weights gathered */
    assert_int_equal(w.coll_by_size[4], (D - 1) * shards * (4 + es));
  }
  bs_plan_free(p);
}

/*
 * Pipeline: 2 stages x cp 2, one layer each, 4 microbatches. The first stage holds the embedding,
 * the last the final norm and the head; each forward sends the stage's activations (tokens of the
 * rank x hidden) to the next stage and each backward their gradient back.
 */
static void test_pipeline_stages(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, BS_TRAIN);
  c.par.pp = 2;
  c.work.batch = 4;
  bs_plan *p = toy_plan_make(&c);
  int64_t H = 64, V = 256, es = 2, m = 4, T = 256 / 2;
  int64_t layer = layer_params(&c, 1);
  for (int r = 0; r < 4; r++) {
    int stage = r / 2; /* order tp-cp-dp-pp: pp slowest */
    bs_param_count pc;
    bs_param_count_stage(&c, stage, &pc);
    assert_int_equal(pc.total, layer + (stage == 0 ? V * H : V * H + H));
    rank_walk w;
    walk_rank(p, r, &w);
    assert_int_equal(w.first_allocs[0], 2 * pc.total);
    int other = stage == 0 ? r + 2 : r - 2; /* the same context index on the other stage */
    assert_int_equal(w.sent_to[other], m * T * H * es);
    assert_int_equal(w.recv_from[other], m * T * H * es);
  }
  bs_plan_free(p);
}

/*
 * Interleaved 1F1B (Narayanan et al. 2021, section 2.2.2): pp = 4 ranks (cp = 1, so rank = stage)
 * of v chunks; chunk c of rank s is stage c x 4 + s of the 4v, layers / (4v) layers each. Every rank
 * still holds layers / 4 layers (the first the embedding, the last the final norm and head), so its
 * weights are those of 1F1B. Messages of T x H x es bytes, per microbatch: a forward from rank s
 * to s + 1 for every chunk, from the last rank to the first for chunks 0 .. v - 2; the backward
 * mirrors them.
 */
static void test_pipeline_interleaved(void **st) {
  (void)st;
  int64_t H = 64, V = 256, es = 2, T = 256;
  int cases[][3] = {{4, 2, 4}, {4, 2, 8}, {4, 4, 8}, {2, 2, 4}, {2, 4, 2}, {4, 2, 12}}; /* pp, chunks, microbatches */
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    int pp = cases[k][0], v = cases[k][1], m = cases[k][2];
    print_message("pp %d chunks %d microbatches %d\n", pp, v, m);
    bs_config c = plan_toy(BS_BURST, pp, BS_SCOPE_MODEL, BS_TRAIN);
    c.model.layers = 16;
    c.par.pp = pp;
    c.par.pp_schedule = BS_PP_INTERLEAVED;
    c.par.pp_chunks = v;
    c.work.batch = m;
    bs_plan *p = toy_plan_make(&c);
    int64_t layer = layer_params(&c, 1), msg = T * H * es;
    for (int r = 0; r < pp; r++) {
      bs_param_count pc;
      bs_param_count_stage(&c, r, &pc);
      int64_t want = 16 / pp * layer + (r == 0 ? V * H : 0) + (r == pp - 1 ? V * H + H : 0);
      assert_int_equal(pc.total, want);
      rank_walk w;
      walk_rank(p, r, &w); /* ids in range, ALLOC/FREE paired, every handle waited */
      assert_int_equal(w.first_allocs[0], 2 * want);
      int next = (r + 1) % pp, prev = (r + pp - 1) % pp;
      int64_t to_next = (r < pp - 1 ? v : v - 1) * m * msg, to_prev = (r > 0 ? v : v - 1) * m * msg;
      if (pp == 2) {
        assert_int_equal(w.sent_to[next], to_next + to_prev);
        assert_int_equal(w.recv_from[next], to_next + to_prev);
      } else {
        assert_int_equal(w.sent_to[next], to_next);
        assert_int_equal(w.sent_to[prev], to_prev);
        assert_int_equal(w.recv_from[prev], (r > 0 ? v : v - 1) * m * msg);
        assert_int_equal(w.recv_from[next], (r < pp - 1 ? v : v - 1) * m * msg);
      }
      assert_int_equal(w.nsend, (to_next + to_prev) / msg);
    }
    bs_plan_free(p);
  }
  /*
   * The order on rank 0 of pp 4, v 2, m 8, derived by hand from Megatron's schedule: 2 x 3 + 4 = 10
   * warm-up forwards (chunk 0 of microbatches 0-3, chunk 1 of 0-3, chunk 0 of 4-5), 6 forward /
   * backward pairs, 10 backwards. Chunk 1's forwards receive from rank 3 (tag = microbatch), the
   * backwards from rank 1 (1024 + microbatch): chunk 1 of 0-3, chunk 0 of 0-3, chunk 1 of 4-7, chunk 0
   * of 4-7.
   */
  {
    bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, BS_TRAIN);
    c.model.layers = 8;
    c.par.pp = 4;
    c.par.pp_schedule = BS_PP_INTERLEAVED;
    c.work.batch = 8;
    bs_plan *p = toy_plan_make(&c);
    rank_walk w;
    walk_rank(p, 0, &w);
    const int32_t want[] = {0, 1,    2,    3,    1024, 1025, 4,    1026, 5,    1027, 6,    1024,
                            7, 1025, 1026, 1027, 1028, 1029, 1030, 1031, 1028, 1029, 1030, 1031};
    assert_int_equal(w.nrecv, sizeof want / sizeof want[0]);
    for (int i = 0; i < w.nrecv; i++) {
      if (w.recv_tag[i] != want[i]) fail_msg("receive %d: tag %d, want %d", i, w.recv_tag[i], want[i]);
      assert_int_equal(w.recv_peer[i], want[i] < 1024 ? 3 : 1);
    }
    bs_plan_free(p);
  }
  /* the default: 1F1B, and 2 chunks when interleaved */
  bs_config d;
  bs_config_default(&d);
  assert_int_equal(d.par.pp_schedule, BS_PP_1F1B);
  assert_int_equal(d.par.pp_chunks, 2);
}

/* Bad interleaved settings: an error naming the key. */
static void interleaved_refused(int pp, int v, int64_t layers, int64_t batch, bs_phase ph, const char *want) {
  bs_config c = plan_toy(BS_BURST, pp, BS_SCOPE_MODEL, ph);
  c.model.layers = layers;
  c.par.pp = pp;
  c.par.pp_schedule = BS_PP_INTERLEAVED;
  c.par.pp_chunks = v;
  c.work.batch = batch;
  bs_plan *q = NULL;
  char err[320] = "";
  assert_int_equal(bs_plan_create(&c, pp, &q, err, sizeof err), -1);
  if (!strstr(err, want)) fail_msg("error '%s' lacks '%s'", err, want);
}

static void test_pipeline_interleaved_refused(void **st) {
  (void)st;
  interleaved_refused(2, 0, 8, 4, BS_TRAIN, "parallel.pp_chunks: 0 model chunks per rank; at least 1");
  interleaved_refused(2, 3, 8, 4, BS_TRAIN,
                      "parallel.pp_chunks: pp = 2 stages x 3 chunks do not split model.layers (8)");
  interleaved_refused(4, 2, 8, 6, BS_TRAIN, "parallel.pp_schedule: interleaved needs the microbatches per replica (6");
  interleaved_refused(1, 2, 8, 4, BS_TRAIN, "parallel.pp_schedule: interleaved needs pipeline stages");
  interleaved_refused(2, 2, 8, 1, BS_PREFILL, "parallel.pp_schedule: interleaved is a training schedule");
}

/*
 * model.fp8: ffn runs the MLP's GEMMs in FP8 (forward, data and weight gradient: 3 x its forward
 * FLOPs in training), all the attention projections too; the LM head never. Inference holds the
 * FP8 GEMMs' weights in one byte; training keeps them in the storage type.
 */
static void test_fp8_gemms(void **st) {
  (void)st;
  for (int f = BS_FP8_OFF; f <= BS_FP8_ALL; f++)
    for (int ph = BS_TRAIN; ph <= BS_PREFILL; ph++) {
      bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, (bs_phase)ph);
      c.model.fp8 = (bs_fp8)f;
      bs_plan *p = toy_plan_make(&c);
      rank_walk w;
      walk_rank(p, 1, &w);
      double T = 256 / 4, H = 64, F = 128, L = 2, passes = ph == BS_TRAIN ? 3 : 1;
      double qkv = (4 + 2 * 4) * 16, o = 4 * 16;
      double mlp = 2 * T * H * 2 * F + 2 * T * F * H, proj = 2 * T * H * qkv + 2 * T * o * H;
      double want = f == BS_FP8_OFF ? 0 : passes * L * (mlp + (f == BS_FP8_ALL ? proj : 0));
      assert_true(w.gemm_fp8_flops == want);
      int64_t psi = 2 * layer_params(&c, 1) + 2 * 256 * 64 + 64;
      int64_t f8 = f == BS_FP8_OFF ? 0 : 2 * (3 * 64 * 128 + (f == BS_FP8_ALL ? (int64_t)(64 * qkv + o * 64) : 0));
      assert_int_equal(w.first_allocs[0], ph == BS_TRAIN ? 2 * psi : 2 * (psi - f8) + f8);
      bs_plan_free(p);
    }
}

/*
 * The memory-bound kernels of one training layer, by hand (bf16, es = 2; T = 256 / 4 = 64 tokens a
 * rank, H = 64, 4 q and 4 kv heads of d = 16, F = 128; bytes read + written):
 *   forward   RMSNorm 2 T H es + 4 T = 16640 (x2), RoPE q and k 2 T 4 d es + T d 4 = 20480 (x2),
 *             residual add 3 T H es = 24576 (x2), SwiGLU 3 T F es = 49152: 172544 B in 7 launches;
 *   backward  SwiGLU 5 T F es = 81920, RMSNorm 3 T H es + 4 T = 24832 and its weight-gradient
 *             reduction (a launch, 0 B) (x2), residual gradient add 24576 (x2), RoPE 40960:
 *             221696 B in 9 launches;
 *   optimizer over the layer's 41088 parameters (fp32 main grads and master weights): norm 4,
 *             Adam 4 + 3 x 8, master copy 4 + 2, zeroed gradient buffer 4: 42 B each, 4 launches.
 * With a profile's elementwise roofline (launch_s, mem_bw x efficiency) the layer's elementwise time
 * is then 16 launch_s + 394240 B / bandwidth, e.g. 16 x 3 us + 394240 / 3.35e12 s = 48.118 us.
 */
static void test_layer_kernels(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
  bs_plan *p = toy_plan_make(&c);
  rank_walk w;
  walk_rank(p, 1, &w);
  assert_int_equal(w.ew_bytes[0], 172544 + 221696);
  assert_int_equal(w.ew_ops[0], 7 + 9);
  assert_int_equal(layer_params(&c, 1), 41088);
  assert_int_equal(w.ew_bytes[1], 42 * 41088);
  assert_int_equal(w.ew_ops[1], 4);
  assert_int_equal(w.ew_ops[2], 0);
  bs_plan_free(p);
  /* inference: the forward's kernels only, no optimizer */
  c.work.phase = BS_PREFILL;
  p = toy_plan_make(&c);
  walk_rank(p, 1, &w);
  assert_int_equal(w.ew_bytes[0], 172544);
  assert_int_equal(w.ew_ops[0], 7);
  assert_int_equal(w.ew_ops[1], 0);
  bs_plan_free(p);
}

/*
 * The head's kernels at model scope (one rank of 4, T = 64 tokens, vocab 256, no tp): Megatron's
 * cross-entropy moves (es + 4) + 4 + 8 + 8 + 4 + 8 = 38 bytes a logit forward and 8 + (4 + es) = 14
 * backward, in 6 + 2 launches, plus 12 + 5 kernels of 8 bytes a token; the embedding's gradient
 * zeroes its 256 x 64 table (es a value), sorts the indices (16 bytes a token), adds the T rows (3 T H
 * es) and adds the table into the fp32 main gradient (4 + 4 + es). Against the same model without
 * the head's and embedding's kernels (layer scope twice is not comparable), the difference of two
 * vocabularies isolates them: every vocabulary-sized term scales, the rest cancels.
 */
static int64_t model_ew_bytes(int64_t vocab, bs_cross_entropy ce) {
  bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, BS_TRAIN);
  c.model.vocab = vocab;
  c.work.cross_entropy = ce;
  bs_plan *p = toy_plan_make(&c);
  rank_walk w;
  walk_rank(p, 0, &w);
  bs_plan_free(p);
  return w.ew_bytes[0];
}

static void test_head_kernels(void **st) {
  (void)st;
  int64_t T = 64, H = 64, dv = 256, es = 2;
  /* per extra vocabulary entry: the cross-entropy's 38 + 14 bytes per token, the embedding's zeroed
   * row (H es) and its main-gradient add (H (4 + 4 + es)) */
  int64_t want = dv * (T * 52 + H * es + H * (8 + es));
  assert_int_equal(model_ew_bytes(512, BS_CE_UNFUSED) - model_ew_bytes(256, BS_CE_UNFUSED), want);
  /* workload.cross_entropy = fused: (es + 4) + 8 + 8 = 22 bytes a logit forward, 8 + es = 10 backward */
  want = dv * (T * 32 + H * es + H * (8 + es));
  assert_int_equal(model_ew_bytes(512, BS_CE_FUSED) - model_ew_bytes(256, BS_CE_FUSED), want);
}

/*
 * FP8 as Transformer Engine runs it, one training layer with model.fp8 = ffn (T = 64, H = 64, F =
 * 128): the input of gate/up [64 x 64] and of down [64 x 128] cast and transposed (es + 2 bytes an
 * element), their weights [64 x 256] and [128 x 64] once a step (first microbatch), the output
 * gradients [64 x 256] and [64 x 64] in the backward: 4 x (4096 + 16384 + 8192 + 8192 + 16384 + 4096)
 * = 229376 B in 6 launches. Inference quantises the two inputs without the transpose (es + 1):
 * 3 x (4096 + 8192) = 36864 B in 2. model.fp8 = all adds the QKV and output projections.
 */
static void test_fp8_casts(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_BURST, 4, BS_SCOPE_LAYER, BS_TRAIN);
  c.model.fp8 = BS_FP8_FFN;
  bs_plan *p = toy_plan_make(&c);
  rank_walk w;
  walk_rank(p, 1, &w);
  assert_int_equal(w.ew_bytes[2], 229376);
  assert_int_equal(w.ew_ops[2], 6);
  bs_plan_free(p);
  c.work.phase = BS_PREFILL;
  p = toy_plan_make(&c);
  walk_rank(p, 1, &w);
  assert_int_equal(w.ew_bytes[2], 36864);
  assert_int_equal(w.ew_ops[2], 2);
  bs_plan_free(p);
  /* all: + QKV (input 64 x 64, weight 64 x 192, gradient 64 x 192) and output (64 x 64, 64 x 64,
   * 64 x 64) projections */
  c.work.phase = BS_TRAIN;
  c.model.fp8 = BS_FP8_ALL;
  p = toy_plan_make(&c);
  walk_rank(p, 1, &w);
  assert_int_equal(w.ew_bytes[2], 229376 + 4 * (4096 + 12288 + 12288 + 4096 + 4096 + 4096));
  assert_int_equal(w.ew_ops[2], 12);
  bs_plan_free(p);
}

/* Inference: no gradients or optimizer; decode's GEMMs see only the new tokens. */
static void test_inference(void **st) {
  (void)st;
  bs_config c = plan_toy(BS_TREE, 4, BS_SCOPE_MODEL, BS_DECODE);
  c.work.decode_tokens = 2;
  bs_plan *p = toy_plan_make(&c);
  rank_walk w;
  walk_rank(p, 0, &w);
  assert_int_equal(w.cls_allocated[BS_MEM_GRADS] + w.cls_allocated[BS_MEM_OPTIMIZER], 0);
  double T = 2, head = 2 * T * c.model.hidden * c.model.vocab;
  assert_true(w.gemm_flops == c.model.layers * layer_fwd_gemm(&c, T, 1) + head);
  /* the KV cache of every layer is held at the end, in its own class: L x 2 x (N/G) x kv_heads x d x es */
  int64_t kv = c.model.layers * 2 * (c.work.seq_len / 4) * c.model.kv_heads * c.model.head_dim * 2;
  assert_true(w.peak >= kv + 2 * 0);
  assert_int_equal(w.cls_allocated[BS_MEM_KV_CACHE], kv);
  bs_plan_free(p);
  /* recompute is a training option */
  c = plan_toy(BS_BURST, 4, BS_SCOPE_MODEL, BS_PREFILL);
  c.work.recompute = 1;
  bs_plan *q = NULL;
  char err[256] = "";
  assert_int_equal(bs_plan_create(&c, 4, &q, err, sizeof err), -1);
  assert_non_null(strstr(err, "workload.recompute"));
}

/*
 * Prefill with and without the KV cache, on the toy model with 3 layers over 4 ranks. A layer's
 * K and V on one rank: 2 x T x kv_heads x head_dim x 2 B with T = 256 / 4 = 64 tokens for burst
 * (sequence-sharded) and, for tp, 2 x 256 x (4 / 4) x 16 x 2 B: 16384 B both. Burst and tp need
 * more memory after a layer's attention (its MLP, then the head's logits) than inside it, so both
 * peaks fall after the last attention: keep holds all 3 layers' K, V there, drop none:
 * peak(keep) - peak(drop) = 3 x 16384 B. Ulysses peaks inside attention (the all-to-all copies),
 * where the current layer's K, V are live either way: (3 - 1) x 16384 B. With 1 layer ulysses
 * shows no difference, burst the one layer's K, V. Only prefill drops: elsewhere drop is an error.
 */
static int64_t prefill_peak(bs_method m, int layers, bs_kv_cache kv) {
  bs_config c = plan_toy(m, 4, BS_SCOPE_MODEL, BS_PREFILL);
  c.model.layers = layers;
  c.work.kv_cache = kv;
  bs_plan *p = toy_plan_make(&c);
  rank_walk w;
  walk_rank(p, 0, &w); /* also checks that every buffer is freed once */
  bs_plan_free(p);
  return w.peak;
}

static void test_kv_cache(void **st) {
  (void)st;
  const int64_t kv = 2 * 64 * 4 * 16 * 2;
  assert_int_equal(kv, 16384);
  assert_int_equal(prefill_peak(BS_BURST, 3, BS_KV_KEEP) - prefill_peak(BS_BURST, 3, BS_KV_DROP), 3 * kv);
  assert_int_equal(prefill_peak(BS_TP, 3, BS_KV_KEEP) - prefill_peak(BS_TP, 3, BS_KV_DROP), 3 * kv);
  assert_int_equal(prefill_peak(BS_ULYSSES, 3, BS_KV_KEEP) - prefill_peak(BS_ULYSSES, 3, BS_KV_DROP), 2 * kv);
  assert_int_equal(prefill_peak(BS_ULYSSES, 1, BS_KV_KEEP), prefill_peak(BS_ULYSSES, 1, BS_KV_DROP));
  assert_int_equal(prefill_peak(BS_BURST, 1, BS_KV_KEEP) - prefill_peak(BS_BURST, 1, BS_KV_DROP), kv);
  /* keep is what a plan without the key does (the default) */
  bs_config d;
  bs_config_default(&d);
  assert_int_equal(d.work.kv_cache, BS_KV_KEEP);
  for (int ph = BS_TRAIN; ph <= BS_DECODE; ph += BS_DECODE - BS_TRAIN) {
    bs_config c = plan_toy(ph == BS_DECODE ? BS_TREE : BS_BURST, 4, BS_SCOPE_LAYER, (bs_phase)ph);
    c.work.kv_cache = BS_KV_DROP;
    bs_plan *q = NULL;
    char err[256] = "";
    assert_int_equal(bs_plan_create(&c, 4, &q, err, sizeof err), -1);
    char want[96];
    snprintf(want, sizeof want, "workload.kv_cache: drop needs phase prefill, not %s", bs_phase_name((bs_phase)ph));
    if (!strstr(err, want)) fail_msg("error '%s' lacks '%s'", err, want);
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_layer_flops),
    cmocka_unit_test(test_model_flops_recompute),
    cmocka_unit_test(test_tp_v1_v3),
    cmocka_unit_test(test_zero),
    cmocka_unit_test(test_inference),
    cmocka_unit_test(test_kv_cache),
    cmocka_unit_test(test_composed_groups),
    cmocka_unit_test(test_pipeline_stages),
    cmocka_unit_test(test_fp8_gemms),
    cmocka_unit_test(test_recompute_selective),
    cmocka_unit_test(test_pipeline_interleaved),
    cmocka_unit_test(test_pipeline_interleaved_refused),
    cmocka_unit_test(test_layer_kernels),
    cmocka_unit_test(test_head_kernels),
    cmocka_unit_test(test_fp8_casts),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
