/*
 * test_mla.c — multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 §2.1; DeepSeek-V3,
 * arXiv 2412.19437) at plan level: one attention layer of DeepSeek-V3's shapes on a toy ring,
 * its bytes per ring step and its FLOPs worked out by hand below, for the per-head K, V (mla) and
 * for the shared latent (mla-latent), one MLA layer's projection FLOPs and parameters at layer
 * scope, and the refusals (methods, mla-latent's scopes, missing shapes).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "plans/plan.h"
#include "plans/workload.h"
#include "plan_walk.h"

/* DeepSeek-V3's attention (128 heads; q, k 128 + 64 = 192 columns; v 128; latent 512 + 64), bf16,
 * 1024 tokens without a causal mask on a ring of 4 ranks: 256 tokens per rank. */
static bs_config toy(bs_method m, bs_attention att, bs_phase ph) {
  bs_config c;
  bs_config_default(&c);
  assert_int_equal(bs_model_preset("deepseek-v3", &c.model), 0);
  c.model.attention = att;
  char err[256];
  assert_int_equal(bs_model_resolve_attention(&c.model, err, sizeof err), 0);
  c.model.dtype = BS_BF16;
  c.work.phase = ph;
  c.work.batch = 1;
  c.work.seq_len = 1024;
  c.work.causal = 0;
  c.par.method = m;
  c.par.gpus = 4;
  c.par.layout = BS_CONTIGUOUS;
  c.par.double_ring = BS_OFF;
  c.par.ranks_per_node = 4;
  c.par.bwd_opt = 1;
  return c;
}

static void walk(const bs_config *c, walk_result *w) {
  bs_plan *p = NULL;
  char err[400] = "";
  int rc = bs_plan_create(c, c->par.gpus, &p, err, sizeof err);
  if (rc) fprintf(stderr, "plan_create: %s\n", err);
  assert_int_equal(rc, 0);
  rc = plan_walk(p, w);
  if (rc) fprintf(stderr, "walk: %s\n", w->err);
  assert_int_equal(rc, 0);
  bs_plan_free(p);
}

/*
 * Bytes each rank sends, by hand (2 bytes per bf16 element, 4 per fp32):
 *  mla, one forward ring step: K 128 heads x 256 tokens x 192 x 2 = 12,582,912
 *                              V 128 x 256 x 128 x 2               =  8,388,608
 *    3 steps (G - 1): 3 x 20,971,520 = 62,914,560
 *  mla-latent, one step: K (the latent and its RoPE key, one head) 256 x 576 x 2 = 294,912
 *                        V (the latent again) 256 x 512 x 2 = 262,144
 *    3 steps: 3 x 557,056 = 1,671,168 (37.6 times fewer)
 *  ring, training: the forward, then K, V again 3 times and dK, dV (fp32) 4 times (back to the owner):
 *    62,914,560 + 4 x (128 x 256 x 192 x 4 + 128 x 256 x 128 x 4) = 62,914,560 + 4 x 41,943,040
 *    = 230,686,720, and 293,601,280 with the forward
 *  burst, training (ring D): Q 12,582,912, dO (v's width) 8,388,608, D and lse 128 x 256 x 4 = 131,072
 *    each, 3 times: 3 x 21,233,664 = 63,700,992; dQ (fp32, 192) 25,165,824 4 times = 100,663,296;
 *    with the forward 62,914,560 + 164,364,288 = 227,278,848
 */
static void test_toy_bytes(void **st) {
  (void)st;
  walk_result w;
  bs_config c = toy(BS_RING, BS_ATTENTION_MLA, BS_PREFILL);
  walk(&c, &w);
  for (int r = 0; r < 4; r++) assert_int_equal(w.sent[r], 62914560);
  c = toy(BS_BURST, BS_ATTENTION_MLA, BS_PREFILL);
  walk(&c, &w);
  for (int r = 0; r < 4; r++) assert_int_equal(w.sent[r], 62914560);
  c = toy(BS_RING, BS_ATTENTION_MLA_LATENT, BS_PREFILL);
  walk(&c, &w);
  for (int r = 0; r < 4; r++) assert_int_equal(w.sent[r], 1671168);
  c = toy(BS_RING, BS_ATTENTION_MLA, BS_TRAIN);
  walk(&c, &w);
  for (int r = 0; r < 4; r++) assert_int_equal(w.sent[r], 293601280);
  c = toy(BS_BURST, BS_ATTENTION_MLA, BS_TRAIN);
  walk(&c, &w);
  for (int r = 0; r < 4; r++) assert_int_equal(w.sent[r], 227278848);
}

/*
 * FLOPs each rank computes, by hand: it holds 256 queries, each sees all 1024 keys: 262,144 pairs
 * per head. Forward 2 (QK^T over 192) + 2 (PV over 128) per pair and column:
 *    2 x 128 x (192 + 128) x 262,144 = 21,474,836,480
 *  mla-latent: 2 x 128 x (576 + 512) x 262,144 = 73,014,444,032
 *  ring, training: backward 2 x 128 x (3 x 192 + 2 x 128) x 262,144 = 55,834,574,848 (S, dQ, dK
 *    over 192; dP, dV over 128) and D = rowsum(dO O): 2 x 128 x 256 x 128 = 8,388,608; with the
 *    forward 77,317,799,936
 */
static void test_toy_flops(void **st) {
  (void)st;
  walk_result w;
  bs_config c = toy(BS_RING, BS_ATTENTION_MLA, BS_PREFILL);
  walk(&c, &w);
  for (int r = 0; r < 4; r++) assert_true(w.flops[r] == 21474836480.0);
  c = toy(BS_RING, BS_ATTENTION_MLA_LATENT, BS_PREFILL);
  walk(&c, &w);
  for (int r = 0; r < 4; r++) assert_true(w.flops[r] == 73014444032.0);
  c = toy(BS_RING, BS_ATTENTION_MLA, BS_TRAIN);
  walk(&c, &w);
  for (int r = 0; r < 4; r++) assert_true(w.flops[r] == 77317799936.0);
}

/* FLOPs of one rank's GEMMs whose label starts with "MLA" or is the output projection's (the
 * iterator runs to its end without error). */
static double proj_flops(const bs_config *c, int rank) {
  bs_plan *p = NULL;
  char err[400] = "";
  int rc = bs_plan_create(c, c->par.gpus, &p, err, sizeof err);
  if (rc) fprintf(stderr, "plan_create: %s\n", err);
  assert_int_equal(rc, 0);
  double f = 0;
  bs_plan_iter *it = bs_plan_iter_new(p, rank);
  assert_non_null(it);
  bs_op op;
  while (bs_plan_next(it, &op)) {
    const char *l = op.kind == BS_OP_COMPUTE && op.u.compute.kernel == BS_K_GEMM ? op.u.compute.label : NULL;
    if (l && (!strncmp(l, "MLA", 3) || !strncmp(l, "output projection", 17))) f += op.u.compute.flops;
  }
  assert_int_equal(bs_plan_iter_error(it), 0);
  bs_plan_iter_free(it);
  bs_plan_free(p);
  return f;
}

/*
 * One MLA layer's projections (DeepSeek-V2 §2.1) by hand, DeepSeek-V3's shapes (hidden 7168, 128
 * heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, qk_rope 64, v 128), 2 x m x n x k per GEMM
 * and token:
 *   query down 7168 -> 1536:            2 x 7168 x 1536       =  22,020,096
 *   query up 1536 -> 128 x 192:         2 x 1536 x 24,576     =  75,497,472
 *   KV down 7168 -> 512 + 64:           2 x 7168 x 576        =   8,257,536
 *   KV up 512 -> 128 x (128 + 128):     2 x 512 x 32,768      =  33,554,432
 *   output 128 x 128 -> 7168:           2 x 16,384 x 7168     = 234,881,024
 *   per token 374,210,560; a ring rank's 256 tokens: 95,797,903,360 forward; training adds the two
 *   backward GEMMs of each: 3 x 95,797,903,360 = 287,393,710,080
 * Parameters: qkv 7168 x 1536 + 1536 x 24,576 + 7168 x 576 + 512 x 32,768 = 69,664,768; o 16,384 x
 * 7168 = 117,440,512 (187.1M attention parameters a layer); norms 2 x 7168 + 1536 + 512 = 16,384.
 * DeepSeek-V2-Lite (hidden 2048, 16 heads, no query compression) under tp 2, 8 heads a rank:
 *   qkv 2048 x 8 x 192 + 2048 x 576 (replicated) + 512 x 8 x 256 = 3,145,728 + 1,179,648 + 1,048,576
 *   = 5,373,952; o 8 x 128 x 2048 = 2,097,152; per token forward 2 x (5,373,952 + 2,097,152)
 *   = 14,942,208, on the 512 tokens of a rank (1024 tokens over cp 2; tp 2 splits the heads)
 */
static void test_layer_toy(void **st) {
  (void)st;
  bs_config c = toy(BS_RING, BS_ATTENTION_MLA, BS_PREFILL);
  c.work.scope = BS_SCOPE_LAYER;
  c.model.experts = 0; /* the projections alone: a dense MLP (256 experts on 4 ranks are refused) */
  for (int r = 0; r < 4; r++) assert_true(proj_flops(&c, r) == 95797903360.0);
  c.work.phase = BS_TRAIN;
  assert_true(proj_flops(&c, 0) == 287393710080.0);
  /* with the MoE block, the most local experts a rank may hold (64 / ep 4 = 16), in FP8: the same */
  c.model.experts = 64;
  c.par.ep = 4;
  c.model.fp8 = BS_FP8_ALL;
  assert_true(proj_flops(&c, 0) == 287393710080.0);
  c.model.experts = 0;
  c.par.ep = 1;
  c.model.fp8 = BS_FP8_OFF;
  bs_param_count pc;
  bs_param_count_of(&c, &pc);
  assert_int_equal(pc.qkv, 69664768);
  assert_int_equal(pc.o, 117440512);
  assert_int_equal(pc.norms, 16384);
  /* V2-Lite, tp 2 x cp 2 (ring of 2): 512 tokens a cp rank */
  assert_int_equal(bs_model_preset("deepseek-v2-lite", &c.model), 0);
  c.work.phase = BS_PREFILL;
  c.par.tp = 2;
  c.model.experts = 0;
  bs_param_count_of(&c, &pc);
  assert_int_equal(pc.qkv, 5373952);
  assert_int_equal(pc.o, 2097152);
  for (int r = 0; r < 4; r++) assert_true(proj_flops(&c, r) == 512.0 * 14942208);
}

/*
 * DeepSeek-V3 whole (model scope, one rank), every layer MoE (the stated approximation), by hand:
 *   a layer's dense set: qkv 69,664,768 + o 117,440,512 + the shared expert's gate, up 2 x 7168 x 2048
 *   = 29,360,128 and down 14,680,064 + norms 16,384 + router 7168 x 256 = 1,835,008 = 232,996,864;
 *   its experts 256 x 3 x 7168 x 2048 = 11,274,289,152; 61 layers: 701,944,446,976; embedding and
 *   head 2 x 129,280 x 7168 = 1,853,358,080; final norm 7168: 703,797,812,224.
 * The released model: 671B (DeepSeek-V3 report §4.2); its 3 dense layers (MLP 3 x 7168 x 18432 =
 * 396,361,728 each in place of 11,320,164,352) make the 32.8B difference: 703.8 - 32.8 = 671.0B.
 */
static void test_model_params(void **st) {
  (void)st;
  bs_config c = toy(BS_RING, BS_ATTENTION_MLA, BS_TRAIN);
  c.work.scope = BS_SCOPE_MODEL;
  c.par.gpus = 1;
  bs_param_count pc;
  bs_param_count_of(&c, &pc);
  assert_int_equal(pc.layer, 232996864);
  assert_int_equal(pc.experts, 11274289152);
  assert_int_equal(pc.total, 703797812224);
}

/* The preset's shapes and what resolving mla-latent makes of them. */
static void test_presets(void **st) {
  (void)st;
  bs_model m;
  memset(&m, 0, sizeof m);
  assert_int_equal(bs_model_preset("deepseek-v3", &m), 0);
  assert_int_equal(m.attention, BS_ATTENTION_MLA);
  assert_int_equal(m.heads, 128);
  assert_int_equal(m.head_dim, 192);
  assert_int_equal(m.v_head_dim, 128);
  assert_int_equal(m.kv_lora_rank + m.qk_rope_head_dim, 576);
  assert_int_equal(m.layers, 61);
  assert_int_equal(m.experts, 256); /* DeepSeek-V3's config.json */
  assert_int_equal(m.top_k, 8);
  assert_int_equal(m.moe_ffn, 2048);
  assert_int_equal(m.shared_experts, 1);
  char err[256];
  m.attention = BS_ATTENTION_MLA_LATENT;
  assert_int_equal(bs_model_resolve_attention(&m, err, sizeof err), 0);
  assert_int_equal(m.kv_heads, 1);
  assert_int_equal(m.head_dim, 576);
  assert_int_equal(m.v_head_dim, 512);
  assert_int_equal(bs_model_preset("deepseek-v2-lite", &m), 0);
  assert_int_equal(m.heads, 16);
  assert_int_equal(m.q_lora_rank, 0);
  assert_int_equal(m.layers, 27);
  assert_int_equal(m.experts, 64); /* DeepSeek-V2-Lite's config.json */
  assert_int_equal(m.top_k, 6);
  assert_int_equal(m.moe_ffn, 1408);
  assert_int_equal(m.shared_experts, 2);
  assert_int_equal(bs_model_preset("llama2-7b", &m), 0);
  assert_int_equal(m.attention, BS_ATTENTION_MHA);
  m.attention = BS_ATTENTION_MLA; /* no latent shapes */
  assert_int_equal(bs_model_resolve_attention(&m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.kv_lora_rank"));
}

static void refused(const bs_config *c, const char *want) {
  bs_plan *p = NULL;
  char err[400] = "";
  assert_int_equal(bs_plan_create(c, c->par.gpus, &p, err, sizeof err), -1);
  if (!strstr(err, want)) fprintf(stderr, "error '%s' lacks '%s'\n", err, want);
  assert_non_null(strstr(err, want));
}

/* Methods that split the heads, li2021's explicit scores, tree's allreduce and mla-latent (the
 * absorbed form) at layer and model scope are refused with the reason. */
static void test_refused(void **st) {
  (void)st;
  const bs_method m[] = {BS_ULYSSES, BS_USP, BS_TP, BS_RING_LI2021};
  const char *why[] = {"splits the heads", "splits the heads", "splits the heads", "explicit score matrix"};
  for (int i = 0; i < 4; i++) {
    bs_config c = toy(m[i], BS_ATTENTION_MLA, BS_PREFILL);
    c.par.ulysses_degree = 2;
    refused(&c, why[i]);
    refused(&c, "parallel.method");
  }
  bs_config c = toy(BS_TREE, BS_ATTENTION_MLA_LATENT, BS_DECODE);
  refused(&c, "allreduce");
  c = toy(BS_RING, BS_ATTENTION_MLA_LATENT, BS_PREFILL);
  c.work.scope = BS_SCOPE_LAYER;
  refused(&c, "inference trick");
  c.work.scope = BS_SCOPE_MODEL;
  refused(&c, "use model.attention = mla at scope model");
  c = toy(BS_RING, BS_ATTENTION_MLA, BS_TRAIN); /* 256 experts over ep 4: 64 a rank */
  c.work.scope = BS_SCOPE_LAYER;
  c.par.ep = 4;
  refused(&c, "parallel.ep: 4 leaves 64 experts on a rank; at most 16 a rank are modelled");
  /* a plain model with a narrower v runs on burst and ring alone too */
  bs_config_default(&c);
  c.model.v_head_dim = 64;
  c.par.method = BS_ULYSSES;
  refused(&c, "v_head_dim");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_toy_bytes), cmocka_unit_test(test_toy_flops), cmocka_unit_test(test_presets),
    cmocka_unit_test(test_refused),   cmocka_unit_test(test_layer_toy), cmocka_unit_test(test_model_params),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
