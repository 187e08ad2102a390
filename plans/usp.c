/*
 * usp.c — USP (Unified Sequence Parallelism, feifeibear/long-context-attention):
 * Ulysses all-to-all inside groups of parallel.ulysses_degree ranks, a ring
 * across the groups. The generator, the checks and the method-table row are
 * ulysses' (ulysses.c defines both rows); this file holds what only USP needs:
 * the ring group of a rank, for reports and tests.
 */
#include "plan_impl.h"

int bs_plan_usp_ring_size(const bs_plan *p) {
  if (p->composed) return bs_plan_usp_ring_size(p->attn);
  if (p->cfg.par.method != BS_USP || p->cfg.par.ulysses_degree < 1) return 1;
  return p->G / p->cfg.par.ulysses_degree;
}
