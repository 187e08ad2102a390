/*
 * workload_amax.c — Transformer Engine's FP8 amax reduction in a workload plan (model.fp8 != off,
 * under a framework whose recipe reduces them: bs_framework_amax_reduce).
 *
 * TE's delayed scaling keeps, per FP8 GEMM, 3 forward scaling entries (input, weight, output) and
 * 2 backward ones (output gradient, input gradient): the fp8_meta of a TE module holds num_gemms x 3
 * forward and num_gemms x 2 backward amax entries (transformer_engine/pytorch/module/base.py,
 * init_fp8_meta_tensors). With reduce_amax (DelayedScaling's default) the fp32 amaxes of every FP8
 * tensor of an fp8_autocast region are gathered into one buffer and all-reduced (MAX) over the
 * fp8_group once: at the region's exit for the forward, in the backward of its first module for the
 * backward (FP8GlobalStateManager.reduce_and_update_fp8_tensors, transformer_engine/pytorch/fp8.py),
 * a blocking collective in the compute stream. Megatron-LM runs a microbatch's forward of a model
 * chunk in one region with the amax-reduction group (the tp x cp x dp ranks of a pipeline stage,
 * megatron/core/parallel_state.py get_amax_reduction_group). Here: one all-reduce of 3 x 4 bytes x
 * the FP8 GEMMs of a chunk's forward after its last layer, one of 2 x 4 bytes x the same after its
 * first layer's backward, per microbatch, over the stage's tp x cp x dp ranks (the data-parallel
 * group when the order does not make those ranks one strided group). Training only: inference's FP8
 * is a row-wise quantisation whose scales each rank takes from its own rows (model.fp8, as the
 * serving stacks burstsim models run it: Meta's context-parallel inference, arXiv 2411.01783), no
 * amax crosses ranks.
 */
#include "workload_impl.h"

#define AMAX_BYTES 4 /* an fp32 amax */

/* The tp x cp x dp ranks of rank's stage as one strided group, or -1 when the order interleaves pp. */
static int stage_group(const bs_plan *p, int rank, bs_group *g) {
  const bs_mesh *m = &p->mesh;
  int d[3] = {BS_DIM_TP, BS_DIM_CP, BS_DIM_DP};
  for (int i = 0; i < 3; i++) /* by stride, smallest first */
    for (int j = i + 1; j < 3; j++)
      if (m->stride[d[j]] < m->stride[d[i]]) {
        int t = d[i];
        d[i] = d[j];
        d[j] = t;
      }
  int64_t first = rank, size = 1;
  for (int i = 0; i < 3; i++) {
    first -= (int64_t)bs_mesh_coord(m, rank, d[i]) * m->stride[d[i]];
    if (m->size[d[i]] > 1 && i > 0 && m->stride[d[i]] != m->stride[d[0]] * size) return -1;
    size *= m->size[d[i]];
  }
  *g = (bs_group){(int32_t)first, (int32_t)m->stride[d[0]], (int32_t)size};
  return 0;
}

void wl_amax_init(bs_wl *w, int rank) {
  const bs_config *c = &w->p->cfg;
  w->amax = c->model.fp8 != BS_FP8_OFF && c->work.phase == BS_TRAIN && bs_framework_amax_reduce(c->work.framework);
  if (w->amax && stage_group(w->p, rank, &w->amaxg)) w->amaxg = w->dpg;
  w->n8 = w->n8_fwd = 0;
}

/* An FP8 GEMM of a forward (counted for its amaxes; a recomputed forward in the backward is not). */
void wl_amax_gemm(bs_wl *w) { w->n8++; }

/* The region's amax all-reduce: after a chunk's forward (bwd 0) or its backward (bwd 1). */
void wl_amax_reduce(bs_wl *w, int bwd) {
  if (!w->amax) return;
  if (!bwd) w->n8_fwd = w->n8;
  w->n8 = 0;
  int64_t bytes = (bwd ? 2 : 3) * AMAX_BYTES * w->n8_fwd;
  if (w->amaxg.size <= 1 || bytes == 0) return;
  bs_op *op = plan_push(w->it, BS_OP_COLL);
  op->handle = wl_take(w->hnds, BS_WL_MAX_HANDLES, w->it);
  op->u.coll.kind = BS_COLL_ALLREDUCE;
  op->u.coll.red = BS_RED_MAX;
  op->u.coll.elem = BS_ELEM_F32;
  op->u.coll.group = w->amaxg;
  op->u.coll.send = BS_NOREF;
  op->u.coll.recv = BS_NOREF;
  op->u.coll.bytes = bytes;
  int32_t h = op->handle;
  w_wait(w, &h);
}
