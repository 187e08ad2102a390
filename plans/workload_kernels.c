/*
 * workload_kernels.c — the memory-bound kernels of a training or inference step besides attention
 * and the GEMMs, one ELEMWISE op per kernel launch, with the bytes that kernel reads and writes.
 *
 * Which kernels: those Megatron-LM runs with Transformer Engine (TE) for a Llama-style layer
 * (github.com/NVIDIA/Megatron-LM megatron/core/transformer, megatron/core/tensor_parallel;
 * github.com/NVIDIA/TransformerEngine): RMSNorm (TE's rmsnorm forward, and its backward with the
 * kernel that reduces the weight gradient's per-block partial sums), rotary embeddings on q and k
 * (TE's fused RoPE, one kernel per tensor, forward and backward), SwiGLU, the residual adds, the
 * vocabulary-parallel cross-entropy (megatron/core/tensor_parallel/cross_entropy.py, unfused: in
 * fp32), the embedding's dense weight gradient and its addition into the main gradient (the
 * embedding is the one weight without gradient-accumulation fusion), the optimizer step (a fused
 * Adam over the rank's shard, the gradient norm, the copy of the fp32 master weights to the
 * model's, the gradient buffer zeroed for the next step), and with model.fp8 Transformer Engine's
 * casts of a GEMM's operands to FP8.
 *
 * How they are costed: the profile's elementwise roofline, launch_s + bytes / (mem_bw x
 * efficiency), which moves 2 x elems x es bytes; a kernel of B bytes is an op of elems = B / (2 es)
 * (rounded up). One op is one launch, so the launches of a layer are counted as ops. Bytes are
 * those of the tensors each kernel reads and writes once (HBM traffic; a kernel is memory-bound
 * when its FLOPs per byte are far below the device's ridge point, as here).
 */
#include "workload_impl.h"

/* One memory-bound kernel: `bytes` read and written, `flops` of arithmetic, one launch. */
static void w_pass(bs_wl *w, int64_t bytes, double flops, const char *what) {
  bs_compute *c = plan_compute(w->it, BS_K_ELEMWISE);
  c->label = what;
  c->ew = BS_EW_GENERIC;
  c->elems = bytes > 0 ? (bytes + 2 * w->es - 1) / (2 * w->es) : 0;
  c->flops = flops;
}

/* w_pass for the layer's other pieces (workload_mla.c's latent norms and RoPE). */
void wk_pass(bs_wl *w, int64_t bytes, double flops, const char *what) { w_pass(w, bytes, flops, what); }

/* RMSNorm forward over the rank's Tn tokens: reads x, writes y and the fp32 inverse RMS per token
 * (TE rmsnorm_fwd). */
void wk_rmsnorm(bs_wl *w, const char *what) {
  int64_t n = w->Tn * w->H;
  w_pass(w, 2 * n * w->es + 4 * w->Tn, 4.0 * (double)n, what);
}

/* RMSNorm backward: reads dy, x and the inverse RMS, writes dx (TE rmsnorm_bwd), then the kernel that
 * sums the weight gradient's per-block fp32 partials (TE's finalize; its bytes, a few rows of H, are
 * left out: the launch is its cost). */
void wk_rmsnorm_bwd(bs_wl *w, const char *what) {
  int64_t n = w->Tn * w->H;
  w_pass(w, 3 * n * w->es + 4 * w->Tn, 6.0 * (double)n, what);
  w_pass(w, 0, 0, "RMSNorm weight-gradient reduction");
}

/* A residual add (or the gradient add where the residual branch joins): two tensors read, one written. */
void wk_residual(bs_wl *w, const char *what) {
  int64_t n = w->Tn * w->H;
  w_pass(w, 3 * n * w->es, (double)n, what);
}

/* Rotary embeddings on the rank's q and k heads (forward or backward: the same rotation, transposed):
 * TE's fused RoPE, one kernel per tensor, each reading and writing its tensor and reading the fp32
 * angle table of its T positions x d. */
void wk_rope(bs_wl *w, int bwd) {
  const bs_plan *p = w->p;
  int64_t qh = p->Zq / w->g, kvh = plan_kv_heads_per_rank(p->Zkv, w->g), d = p->d, tab = w->T * d * 4;
  w_pass(w, 2 * w->T * qh * d * w->es + tab, 3.0 * (double)(w->T * qh * d), bwd ? "RoPE q backward" : "RoPE q");
  w_pass(w, 2 * w->T * kvh * d * w->es + tab, 3.0 * (double)(w->T * kvh * d), bwd ? "RoPE k backward" : "RoPE k");
}

/* SwiGLU over the rank's ffn / tp columns: forward reads gate and up, writes silu(gate) x up; the
 * backward reads the output gradient, gate and up and writes the gradients of gate and up. */
void wk_swiglu(bs_wl *w, int64_t F, int bwd) {
  int64_t n = w->T * (F / w->g);
  if (!bwd) w_pass(w, 3 * n * w->es, 5.0 * (double)n, "SwiGLU");
  else w_pass(w, 5 * n * w->es, 8.0 * (double)n, "SwiGLU backward");
}

/* Kernels of one or a few values per token (the cross-entropy's target masks and gathers). */
static void per_token(bs_wl *w, int n, const char *what) {
  for (int i = 0; i < n; i++) w_pass(w, 8 * w->T, (double)w->T, what);
}

/*
 * Megatron's fused cross-entropy (workload.cross_entropy = fused, megatron/core/fusions/
 * fused_cross_entropy.py): three jit-fused functions forward, the fp32 cast with the maximum (read es,
 * write 4), the subtraction, the target's logit, exp and sum (read and write 4), the division that
 * leaves the softmax (read and write 4): 22 bytes a logit, with 2 kernels of one value per token and
 * under tp two all-reduces (the maximum; the target's logit and the sum together); one backward, the
 * softmax scaled in place and cast (read 4, write 4 and es), after the target's one subtracted.
 */
static void ce_fused(bs_wl *w, int64_t n) {
  w_pass(w, n * (w->es + 4), (double)n, "cross-entropy: fp32 and maximum");
  if (w->tp) w_sync_coll(w, BS_COLL_ALLREDUCE, w->tpg, 4 * w->T);
  per_token(w, 2, "cross-entropy: target logit");
  w_pass(w, 8 * n, 2.0 * (double)n, "cross-entropy: exp and sum");
  if (w->tp) w_sync_coll(w, BS_COLL_ALLREDUCE, w->tpg, 8 * w->T);
  w_pass(w, 8 * n, (double)n, "cross-entropy: softmax and loss");
}

/*
 * Megatron's vocabulary-parallel cross-entropy over the rank's T x v logits (v = vocab / tp), forward:
 * the logits cast to fp32 (read es, write 4 bytes an element), their maximum (read 4), the maximum
 * subtracted (read and write 4), exp (read and write 4), the sum (read 4), the division that leaves
 * the softmax kept for the backward (read and write 4): 38 bytes an element with bf16 logits; 12
 * kernels of one value per token (the target's mask, shift, gather, the loss); under tp three
 * all-reduces of one fp32 value per token (the maximum, the target's logit, the sum).
 */
void wk_cross_entropy(bs_wl *w) {
  int64_t n = w->T * (w->V / w->g);
  if (w->p->cfg.work.cross_entropy == BS_CE_FUSED) {
    ce_fused(w, n);
    return;
  }
  w_pass(w, n * (w->es + 4), 0, "cross-entropy: logits to fp32");
  w_pass(w, 4 * n, (double)n, "cross-entropy: maximum");
  if (w->tp) w_sync_coll(w, BS_COLL_ALLREDUCE, w->tpg, 4 * w->T);
  w_pass(w, 8 * n, (double)n, "cross-entropy: maximum subtracted");
  per_token(w, 7, "cross-entropy: target logit");
  w_pass(w, 8 * n, (double)n, "cross-entropy: exp");
  w_pass(w, 4 * n, (double)n, "cross-entropy: sum");
  if (w->tp) {
    w_sync_coll(w, BS_COLL_ALLREDUCE, w->tpg, 4 * w->T);
    w_sync_coll(w, BS_COLL_ALLREDUCE, w->tpg, 4 * w->T);
  }
  per_token(w, 5, "cross-entropy: loss");
  w_pass(w, 8 * n, (double)n, "cross-entropy: softmax");
}

/* Its backward: the target's one subtracted (5 kernels of one value per token), the softmax scaled by
 * the loss gradient (read and write 4), the gradient cast back to the logits' type (read 4, write es). */
void wk_cross_entropy_bwd(bs_wl *w) {
  int64_t n = w->T * (w->V / w->g);
  if (w->p->cfg.work.cross_entropy == BS_CE_FUSED) {
    per_token(w, 1, "cross-entropy backward: target");
    w_pass(w, n * (8 + w->es), (double)n, "cross-entropy backward");
    return;
  }
  per_token(w, 5, "cross-entropy backward: target");
  w_pass(w, 8 * n, (double)n, "cross-entropy backward: scale");
  w_pass(w, n * (4 + w->es), 0, "cross-entropy backward: to the logits' type");
}

/* The embedding's weight gradient (PyTorch's dense embedding backward: a zeroed vocab / tp x H table,
 * the token indices sorted, the T rows of the output gradient added into it), then added into the fp32
 * (model.main_grads) main gradient, every microbatch (Megatron's gradient hook: the embedding is not a
 * linear layer, so no gradient-accumulation fusion). */
void wk_embedding_bwd(bs_wl *w) {
  int64_t table = (w->V / w->g) * w->H, rows = w->T * w->H;
  w_pass(w, table * w->es, 0, "embedding gradient: zeroed");
  w_pass(w, 16 * w->T, 0, "embedding gradient: indices sorted");
  w_pass(w, 3 * rows * w->es, (double)rows, "embedding gradient: rows added");
  w_pass(w, table * (2 * w->gb + w->es), (double)table, "embedding gradient: into the main gradient");
}

/*
 * The optimizer step over n parameters of the rank (its shard with ZeRO): the gradient's norm (read
 * once), a fused Adam (reads the main gradient, reads and writes m and v, and the fp32 master weight
 * with model.master_weights = fp32, else the weight itself), then the master weights copied to the
 * model's (read 4, write es); and the gradient buffer of `gbuf` bytes zeroed for the next step
 * (Megatron zeroes it at every step's start).
 */
void wk_optimizer(bs_wl *w, int64_t n, int64_t gbuf) {
  int master = w->nopt == 3;
  w_pass(w, n * w->gb, 2.0 * (double)n, "gradient norm");
  w_pass(w, n * (w->gb + 8 * w->nopt + (master ? 0 : 2 * w->es)), 12.0 * (double)n, "Adam step");
  if (master) w_pass(w, n * (4 + w->es), 0, "master weights to the model's");
  w_pass(w, gbuf, 0, "gradient buffer zeroed");
}

/*
 * FP8 as Transformer Engine runs a linear layer: before the forward GEMM the input [m x k] is cast to
 * FP8 and transposed for the weight gradient (read es, write 1 + 1 bytes an element), and once a step
 * (the first microbatch; TE keeps the FP8 weight for the others) the weight [k x n] likewise; before
 * the backward GEMMs the output gradient [m x n] is. Inference (weights held in FP8): the input is
 * quantised, without the transpose (read es, write 1).
 */
void wk_fp8_casts(bs_wl *w, int64_t m, int64_t n, int64_t k, int bwd) {
  if (!w->train) {
    w_pass(w, m * k * (w->es + 1), (double)(m * k), "FP8 quantise");
    return;
  }
  if (bwd) {
    w_pass(w, m * n * (w->es + 2), (double)(m * n), "FP8 cast-transpose: output gradient");
    return;
  }
  w_pass(w, m * k * (w->es + 2), (double)(m * k), "FP8 cast-transpose: input");
  if (w->mb == 0) w_pass(w, k * n * (w->es + 2), (double)(k * n), "FP8 cast-transpose: weight");
}
