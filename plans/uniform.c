/*
 * uniform.c — when ranks of a plan run the same program up to a renaming of
 * their peers, so that the simulator's fold pre-pass (sim/fold.c) need not
 * generate all G programs to prove it: a shift of ring positions for a large
 * ring (G programs of G steps: the quadratic cost of a 16,384-GPU layer), a
 * shift of the data-parallel coordinate for composed plans (bs_plan_
 * replicas_uniform, at the end: a whole-model step's replicas).
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

/*
 * Data-parallel replicas. A composed plan (tp x cp x dp x pp, plans/mesh.c) gives a rank its
 * place through the mesh alone, and the dp coordinate enters its program in two ways only:
 *   - its batch offset (plan_map_of: b0 = dp x B / dp), which only ALLOC's shard records
 *     (which sequences a buffer holds), never a size, a kernel shape or a count: B % dp == 0
 *     is checked, so every replica holds as many sequences;
 *   - the ranks it talks to: attention peers (compose.c: base + stride x local, base keeping
 *     the dp coordinate), pipeline neighbours (workload.c: rank -/+ the pp stride), and the
 *     groups of its collectives: tp (plan_mesh_group: its own dp coordinate), the gradients'
 *     dp x cp (plan_grad_group: every dp coordinate, first = the member with cp = dp = 0),
 *     the FP8 amax region (workload_amax.c: tp x cp x dp of the stage, or the gradients'
 *     group), ZeRO's gathers and reductions (workload_zero.c: the gradients' group, shards of
 *     bs_zero_shard(n, dp x cp) on every member alike), the replicated K, V heads' sums (a
 *     part of the tp group).
 * So the program of a rank with dp coordinate d is that of the rank with the same other
 * coordinates and dp 0 with every peer p replaced by phi_d(p) (p's dp coordinate plus d, mod
 * dp) and every collective's group by the image of its members under phi_d, written as plans
 * write groups (first = the lowest member, the same stride and size): a tp group is moved,
 * the gradients' and the stage's groups are their own image (each rank keeps its position in
 * them through phi_d, so the ring a collective runs is the same ring). Every other field of
 * every op (kinds, handles, buffers, bytes, tags, waits, every COMPUTE field) is equal.
 * Refused: expert parallelism (parallel.ep > 1), whose groups are consecutive members of the
 * gradients' group, so that a rank's experts (and, with model.routing_skew or a remainder,
 * its expert GEMMs) follow its position there, a mix of dp and cp coordinates. Stragglers are
 * the simulator's (a compute factor per rank, which the pre-pass compares itself).
 * tests/plans (plans.uniform_replicas) compares every rank's program with its dp-0 image's
 * on the configurations this admits, and finds the difference expert parallelism makes.
 */
int bs_plan_replicas_uniform(const bs_plan *p, int *stride, int *size) {
  const bs_mesh *m = &p->mesh;
  int dp = m->size[BS_DIM_DP];
  if (!p->composed || dp < 2 || p->G < 2) return 0;
  if (p->cfg.model.experts > 0 && p->cfg.par.ep > 1) return 0;
  if ((int64_t)m->stride[BS_DIM_DP] * dp > p->G) return 0;
  *stride = m->stride[BS_DIM_DP];
  *size = dp;
  return 1;
}
