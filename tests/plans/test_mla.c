/*
 * test_mla.c — multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 §2.1; DeepSeek-V3,
 * arXiv 2412.19437) at plan level: one attention layer of DeepSeek-V3's shapes on a toy ring,
 * its bytes per ring step and its FLOPs worked out by hand below, for the per-head K, V (mla) and
 * for the shared latent (mla-latent), and the refusals (methods, scopes, missing shapes).
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

/* Methods that split the heads, li2021's explicit scores, tree's allreduce and the layer and model
 * scopes (MoE) are refused with the reason. */
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
  c = toy(BS_RING, BS_ATTENTION_MLA, BS_TRAIN);
  c.work.scope = BS_SCOPE_LAYER;
  refused(&c, "mixture-of-experts");
  c.work.scope = BS_SCOPE_MODEL;
  refused(&c, "workload.scope");
  /* a plain model with a narrower v runs on burst and ring alone too */
  bs_config_default(&c);
  c.model.v_head_dim = 64;
  c.par.method = BS_ULYSSES;
  refused(&c, "v_head_dim");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_toy_bytes),
    cmocka_unit_test(test_toy_flops),
    cmocka_unit_test(test_presets),
    cmocka_unit_test(test_refused),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
