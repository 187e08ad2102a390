/*
 * workload_layer.c — the ops a workload plan emits and the pieces of a layer
 * built from them (workload_impl.h).
 *
 * Ids: buffer and handle ids come from the plan's bit sets (bs_plan_buf_ids,
 * BS_WL_MAX_HANDLES); running out sets the iterator's error. Ops: ALLOC,
 * FREE, GEMM (a forward [m x k] x [k x n], or its two backward GEMMs),
 * ELEMWISE and COLL, pushed on the outer iterator's queue. The pieces of a
 * layer around its attention: RMSNorm, the QKV (MLA: workload_mla.c's), output and MLP projections
 * (model.fp8: in FP8), SwiGLU, the residual adds, their backward, and the
 * tensor-parallel collectives after a row-parallel GEMM (v1: all-reduce) or
 * around the GEMM domain (v3: all-gather before, reduce-scatter after). A MoE
 * layer's block in place of the MLP is workload_moe.c's.
 */
#include "workload_impl.h"

/* ---------- ids and ops ---------- */

int32_t wl_take(uint64_t *bits, int n, bs_plan_iter *it) {
  for (int w = 0; w < n / 64; w++)
    if (~bits[w]) {
      int i = __builtin_ctzll(~bits[w]);
      bits[w] |= (uint64_t)1 << i;
      return w * 64 + i;
    }
  it->err = 1;
  return 0;
}
void wl_give(uint64_t *bits, int32_t i) { bits[i / 64] &= ~((uint64_t)1 << (i % 64)); }

int32_t w_alloc(bs_wl *w, int64_t bytes, bs_mem_class cls) {
  int32_t id = wl_take(w->bufs, w->nbufs, w->it);
  bs_op *op = plan_push(w->it, BS_OP_ALLOC);
  op->u.alloc.buf = id;
  op->u.alloc.bytes = bytes;
  op->u.alloc.cls = cls;
  op->u.alloc.role = BS_ROLE_TMP;
  op->u.alloc.elem = w->p->elem;
  return id;
}

void w_free(bs_wl *w, int32_t *id) {
  if (*id < 0) return;
  wl_give(w->bufs, *id);
  plan_push(w->it, BS_OP_FREE)->u.free.buf = *id;
  *id = -1;
}

static bs_compute *w_gemm(bs_wl *w, int64_t m, int64_t n, int64_t k) {
  bs_compute *c = plan_compute(w->it, BS_K_GEMM);
  c->m = m;
  c->n = n;
  c->k = k;
  c->flops = 2.0 * (double)m * (double)n * (double)k;
  return c;
}

/* A forward GEMM [m x k] x [k x n], or its backward: dX = dY W^T and dW = X^T dY; fp8: all three
 * with FP8 operands (Transformer Engine runs the forward, data-gradient and weight-gradient GEMMs
 * of an FP8 layer in FP8). */
void w_linear8(bs_wl *w, int64_t m, int64_t n, int64_t k, int bwd, int fp8, const char *what) {
  bs_compute *c[2] = {NULL, NULL};
  if (fp8) wk_fp8_casts(w, m, n, k, bwd);
  if (fp8 && !bwd) wl_amax_gemm(w);
  if (!bwd) {
    c[0] = w_gemm(w, m, n, k);
  } else {
    c[0] = w_gemm(w, m, k, n);
    c[1] = w_gemm(w, k, n, m);
  }
  for (int i = 0; i < 2 && c[i]; i++) {
    c[i]->fp8 = fp8;
    c[i]->label = what;
  }
}
void w_linear(bs_wl *w, int64_t m, int64_t n, int64_t k, int bwd, const char *what) {
  w_linear8(w, m, n, k, bwd, 0, what);
}

/* model.fp8: the attention projections (all) and the MLP's GEMMs (ffn, all) in FP8. */
int wl_fp8_proj(const bs_wl *w) { return w->p->cfg.model.fp8 == BS_FP8_ALL; }
int wl_fp8_mlp(const bs_wl *w) { return w->p->cfg.model.fp8 != BS_FP8_OFF; }

void w_ew(bs_wl *w, int64_t elems, double flops_per_elem, const char *what) {
  bs_compute *c = plan_compute(w->it, BS_K_ELEMWISE);
  c->label = what;
  c->ew = BS_EW_GENERIC;
  c->elems = elems;
  c->flops = flops_per_elem * (double)elems;
}

int32_t w_coll(bs_wl *w, bs_coll_kind kind, bs_group g, int64_t bytes) {
  bs_op *op = plan_push(w->it, BS_OP_COLL);
  op->handle = wl_take(w->hnds, BS_WL_MAX_HANDLES, w->it);
  op->u.coll.kind = kind;
  op->u.coll.red = BS_RED_SUM;
  op->u.coll.elem = w->p->elem;
  op->u.coll.group = g;
  op->u.coll.send = BS_NOREF;
  op->u.coll.recv = BS_NOREF;
  op->u.coll.bytes = bytes;
  return op->handle;
}

void w_wait(bs_wl *w, int32_t *h) {
  if (*h < 0) return;
  bs_op *op = plan_push(w->it, BS_OP_WAIT);
  op->u.wait.n = 1;
  op->u.wait.handles[0] = *h;
  wl_give(w->hnds, *h);
  *h = -1;
}

void w_sync_coll(bs_wl *w, bs_coll_kind kind, bs_group g, int64_t bytes) {
  if (g.size <= 1) return;
  int32_t h = w_coll(w, kind, g, bytes);
  w_wait(w, &h);
}

/* ---------- pieces of a layer ---------- */

/* Tensor-parallel collectives: v1 after a row-parallel GEMM (all-reduce), v3
 * all-gather into the GEMM domain / reduce-scatter out of it. */
void wl_tp_reduce(bs_wl *w) {
  if (!w->tp) return;
  int64_t full = w->T * w->H * w->es;
  w_sync_coll(w, w->v3 ? BS_COLL_REDUCE_SCATTER : BS_COLL_ALLREDUCE, w->tpg, full);
}
int32_t wl_tp_gather(bs_wl *w) {
  if (!w->tp || !w->v3) return -1;
  int32_t b = w_alloc(w, w->T * w->H * w->es, BS_MEM_COMM);
  w_sync_coll(w, BS_COLL_ALLGATHER, w->tpg, w->Tn * w->H * w->es);
  return b;
}

/* Bytes per element of a GEMM's input kept for its backward. Transformer Engine's FP8 modules keep
 * the FP8 cast of the input (1 byte: the transpose the weight-gradient GEMM reads, or the cast itself
 * under sequence parallelism, gathered again), not the 16-bit tensor: _Linear.forward saves
 * inputmat_t or inputmat after fp8_cast_transpose_fused, and `save_original_input` (default False)
 * "always saves the original input tensor rather than the cast tensor" when set
 * (github.com/NVIDIA/TransformerEngine, transformer_engine/pytorch/module/linear.py; LayerNormLinear
 * and LayerNormMLP keep their norm output and the activation's output as the FP8 casts their GEMMs
 * read, and the first MLP GEMM's output, which the activation's backward reads, in 16 bits). */
int64_t wl_gemm_in_bytes(const bs_wl *w, int fp8) { return fp8 ? 1 : w->es; }

/* Bytes of one layer's non-attention activations kept for the backward. */
int64_t wl_saved_bytes(const bs_wl *w) {
  int64_t Tg = w->v3 ? w->Tn : w->T; /* v3 keeps the sharded norm outputs and gathers again */
  int64_t eq = wl_gemm_in_bytes(w, wl_fp8_proj(w)), em = wl_gemm_in_bytes(w, wl_fp8_mlp(w));
  int64_t e2 = w->moe ? w->es : em; /* MoE: norm2's output feeds the 16-bit router; the experts keep their FP8 input */
  /* layer input and residual after attention (the norms' inputs), norm1 output (the QKV GEMM's
   * input), norm2 output (gate and up's), gate and up (SwiGLU's input), SwiGLU output (down's) (MoE:
   * the block's own, workload_moe.c); FP8 attention projections: the output projection's FP8 copy
   * of the attention output O, beside the 16-bit O the attention keeps for its own backward */
  int64_t mlp = w->moe ? wl_moe_saved_bytes(w) : w->T * (w->F / w->g) * (2 * w->es + em);
  int64_t o8 = wl_fp8_proj(w) ? w->T * (w->pc.o / w->H) : 0;
  return 2 * w->Tn * w->H * w->es + Tg * w->H * (eq + e2) + mlp + o8 + (w->mla ? wl_mla_saved_bytes(w) : 0);
}

/* Forward of the layer up to attention: norm, (gather), QKV projection comes at the hook. */
void wl_layer_pre(bs_wl *w) { wk_rmsnorm(w, "RMSNorm"); }

void wl_layer_qkv(bs_wl *w) {
  if (w->mla) {
    wl_mla_qkv(w);
    return;
  }
  int32_t gb = wl_tp_gather(w);
  w_linear8(w, w->T, w->qkvw / w->g, w->H, 0, wl_fp8_proj(w), "QKV projection");
  w_free(w, &gb);
  wk_rope(w, 0);
}

/* The dense SwiGLU MLP of inner width F from the second norm's output: its output buffer, reduced
 * over tp (the caller adds the residual and frees it). */
int32_t wl_mlp_fwd(bs_wl *w, int64_t F) {
  int32_t gb = wl_tp_gather(w);
  int32_t gu = w_alloc(w, w->T * 3 * F / w->g * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, 2 * F / w->g, w->H, 0, wl_fp8_mlp(w), "MLP gate and up");
  w_free(w, &gb);
  wk_swiglu(w, F, 0); /* silu(gate) * up */
  int32_t t = w_alloc(w, w->T * w->H * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, w->H, F / w->g, 0, wl_fp8_mlp(w), "MLP down");
  w_free(w, &gu);
  wl_tp_reduce(w);
  return t;
}

/* After attention: output projection, residual, norm, MLP (or the MoE block), residual. */
void wl_layer_post(bs_wl *w) {
  int32_t t = w_alloc(w, w->T * w->H * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, w->H, w->p->Zq * w->p->dv / w->g, 0, wl_fp8_proj(w), "output projection");
  wl_tp_reduce(w);
  wk_residual(w, "residual add");
  w_free(w, &t);
  wk_rmsnorm(w, "RMSNorm");
  if (w->moe) {
    t = w_alloc(w, w->Tn * w->H * w->es, BS_MEM_WORKSPACE);
    wl_moe_fwd(w);
  } else {
    t = wl_mlp_fwd(w, w->F);
  }
  wk_residual(w, "residual add");
  w_free(w, &t);
}

/* Backward of the dense SwiGLU MLP of inner width F, reduced over tp: the buffer of its input's
 * gradient (the caller runs the norm's backward and frees it). */
int32_t wl_mlp_bwd(bs_wl *w, int64_t F) {
  int64_t f = F / w->g;
  int32_t gy = wl_tp_gather(w); /* v3: grad of the reduce-scatter */
  int32_t gx = wl_tp_gather(w); /* v3: norm2 output gathered again for dW */
  int32_t da = w_alloc(w, w->T * f * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, w->H, f, 1, wl_fp8_mlp(w), "MLP down backward");
  w_free(w, &gy);
  int32_t dgu = w_alloc(w, w->T * 2 * f * w->es, BS_MEM_WORKSPACE);
  wk_swiglu(w, F, 1);
  w_free(w, &da);
  int32_t dn = w_alloc(w, w->T * w->H * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, 2 * f, w->H, 1, wl_fp8_mlp(w), "MLP gate and up backward");
  w_free(w, &gx);
  w_free(w, &dgu);
  wl_tp_reduce(w);
  return dn;
}

/* Backward of the MLP half (or the MoE block) and the second norm. */
void wl_layer_mlp_bwd(bs_wl *w) {
  int32_t dn;
  if (w->moe) {
    dn = w_alloc(w, w->Tn * w->H * w->es, BS_MEM_WORKSPACE);
    wl_moe_bwd(w);
  } else {
    dn = wl_mlp_bwd(w, w->F);
  }
  wk_rmsnorm_bwd(w, "RMSNorm backward");
  wk_residual(w, "residual gradient add");
  w_free(w, &dn);
}

/* Backward of the output projection (at the attention backward's hook: dO). */
void wl_layer_o_bwd(bs_wl *w) {
  int32_t gy = wl_tp_gather(w);
  w_linear8(w, w->T, w->H, w->p->Zq * w->p->dv / w->g, 1, wl_fp8_proj(w), "output projection backward");
  w_free(w, &gy);
}

/* Backward of the QKV projection and the first norm. */
void wl_layer_qkv_bwd(bs_wl *w) {
  if (w->mla) {
    wl_mla_qkv_bwd(w);
    return;
  }
  wk_rope(w, 1);
  int32_t gx = wl_tp_gather(w); /* v3: norm1 output gathered again for dW */
  int32_t dn = w_alloc(w, w->T * w->H * w->es, BS_MEM_WORKSPACE);
  w_linear8(w, w->T, w->qkvw / w->g, w->H, 1, wl_fp8_proj(w), "QKV projection backward");
  w_free(w, &gx);
  wl_tp_reduce(w);
  wk_rmsnorm_bwd(w, "RMSNorm backward");
  wk_residual(w, "residual gradient add");
  w_free(w, &dn);
}
