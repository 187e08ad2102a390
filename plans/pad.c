/*
 * pad.c — the tokens a framework pads a sequence with so that it splits evenly over the ranks
 * that share it, where burstsim's plans would otherwise refuse the point (2^20 tokens on 24
 * ranks). Megatron-LM pads to a multiple of the divisor its layout needs (get_padding in
 * megatron/core/models/multimodal/context_parallel.py: 2 x cp with context parallelism,
 * tp x cp x 2 with sequence parallelism as well, tp with sequence parallelism alone), at the end
 * of the sequence, the pad tokens masked out of the loss (cu_seqlens_padded); they are computed
 * as any token. Here: the divisor of the plan's own split (the attention group's A ranks, 2A for
 * zigzag, 8A chunks for greedy; x tp when tp v3 splits a rank's tokens again; method tp: gpus
 * under v3, none under v1), and no padding where the tokens are not a fresh sequence (decode, a
 * cached prefix, packed documents, whose lengths the user gives).
 */
#include "plan_impl.h"

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int64_t bs_seq_divisor(const bs_config *c) {
  bs_mesh m;
  if (bs_mesh_of(c, &m, NULL, 0)) return 1;
  if (c->par.method == BS_TP) return c->par.tp_variant == 3 ? c->par.gpus : 1;
  int64_t A = m.size[m.att_dim], tp = m.size[BS_DIM_TP];
  int64_t parts = c->par.layout == BS_ZIGZAG || c->par.layout == BS_DOC_ZIGZAG ? 2 * A
                  : c->par.layout == BS_GREEDY                                 ? 8 * A
                                                                               : A;
  if (m.att_dim == BS_DIM_CP && tp > 1 && c->par.tp_variant == 3 && c->work.scope != BS_SCOPE_ATTENTION)
    parts = parts / gcd64(parts, A * tp) * (A * tp); /* lcm: each rank's N / A tokens split over tp */
  return parts;
}

int64_t bs_seq_pad(const bs_config *c) {
  if (c->work.phase == BS_DECODE || c->work.cached_tokens > 0 || c->work.docs > 0 || c->work.seq_len < 1) return 0;
  int64_t d = bs_seq_divisor(c), r = d > 1 ? c->work.seq_len % d : 0;
  return r ? d - r : 0;
}
