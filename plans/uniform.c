/*
 * uniform.c — when every rank of a plan runs the same program up to a shift
 * of ring positions, so that the simulator's fold pre-pass (sim/fold.c) need
 * not generate all G programs of a large ring (G programs of G steps: the
 * quadratic cost of a 16,384-GPU layer) to prove it.
 *
 * The sequence-sharded ring methods (burst, ring: ring_engine.c, ring_seq)
 * at attention scope, over all ranks (not composed), run on a torus of ring
 * positions (a, i), rank a x P + i (P = the inner ring, M = the outer; P = G,
 * M = 1 without a double ring). Every peer they name is ring_rank(a + da,
 * i + di) with (da, di) fixed by the step; every buffer, handle, tag, byte
 * count, allocation and wait depends on the step alone. What depends on the
 * position is each step's attention of the query shard x with the key shard
 * y (plan_emit_attn): the chunk pairs it emits and their visible pairs. Where
 * that is the same for every x != y, every rank's program is rank 0's with
 * peers shifted, COMPUTEs equal in every field but the mask's positions,
 * their buffer offsets and the accumulate flag (the fields a kernel's
 * modelled duration never reads: profile/profile.c):
 *   - no mask (causal off, no window, no documents) and a plain layout
 *     (contiguous, zigzag, striped): every pair of shards is one full block
 *     pair per chunk pair;
 *   - causal zigzag without window or documents: the shard x holds chunks x
 *     and 2G-1-x of length c; against y < x the pairs (x, y) and (2G-1-x, y)
 *     are full and the others masked, against y > x the pairs (2G-1-x, y) and
 *     (2G-1-x, 2G-1-y): two full c x c blocks either way; the diagonal step is
 *     the same shape for every x.
 * Decode, prefill against a cache, pass-Q and the balance layouts (runs of
 * unequal length) are left out. tests/plans (plans.uniform_rings) compares
 * every rank's program with rank 0's on the configurations this admits, and
 * finds a difference on those it refuses where the shortcut would be wrong.
 */
#include "plan_impl.h"

int bs_plan_ring_uniform(const bs_plan *p, int *P, int *M) {
  const bs_config *c = &p->cfg;
  const bs_workload *w = &c->work;
  if (p->scope || p->composed || p->decode || p->Nc > 0 || p->runs || p->G < 2) return 0;
  if (c->par.method != BS_BURST && c->par.method != BS_RING) return 0;
  if (c->par.cp_pass == BS_PASS_Q || w->window != 0 || w->docs != 0) return 0;
  bs_layout l = c->par.layout;
  if (l != BS_CONTIGUOUS && l != BS_ZIGZAG && l != BS_STRIPED) return 0;
  if (w->causal && l != BS_ZIGZAG) return 0;
  if (p->P < 1 || p->M < 1 || (int64_t)p->P * p->M != p->G) return 0;
  *P = p->P;
  *M = p->M;
  return 1;
}
