/*
 * workload_zero.c — gradient reduction, ZeRO and the optimizer step of a
 * workload plan.
 *
 * Gradients are reduced over the data-parallel group (dp x cp, the ranks
 * holding the same weights), one set per layer, asynchronously, each waited
 * after the next set's backward; over microbatches they accumulate and are
 * reduced in the last one's backward. ZeRO (Rajbhandari et al. 2020): stage 0
 * all-reduces gradients; 1 and 2 reduce-scatter them to the owner of the
 * optimizer shard and all-gather the updated weights after the step (stage 1
 * keeps the full gradient buffer, 2 a bucket per set, reduced every
 * microbatch); 3 also shards the weights and all-gathers each set before its
 * use in the forward and in the backward, one set ahead.
 */
#include "workload_impl.h"

/* ---------- ZeRO-3 weight gathers ---------- */

/* ZeRO-3: weight sets in the order the program uses them, gathered one ahead. */
static int zero3_uses_mb(const bs_wl *w) { return (int)((w->model ? w->L + 2 : w->L) * (w->train ? 2 : 1)); }

static int64_t zero3_set(const bs_wl *w, int u) {
  int64_t L = w->L, n = w->model ? L + 2 : L;
  u %= zero3_uses_mb(w); /* every microbatch uses the sets again */
  int64_t k = u < n ? u : u - n, first = u < n ? w->pc.embed : w->pc.head + w->pc.final_norm;
  int64_t last = u < n ? w->pc.head + w->pc.final_norm : w->pc.embed;
  if (!w->model) return w->pc.layer;
  return k == 0 ? first : k == n - 1 ? last : w->pc.layer;
}
static int zero3_uses(const bs_wl *w) { return zero3_uses_mb(w) * (int)w->nmb; }

static void zero3_issue(bs_wl *w, int u) {
  int slot = u % 2;
  int64_t set = zero3_set(w, u), sh = bs_zero_shard(set, w->pc.dp);
  w->zb[slot] = w_alloc(w, sh * w->pc.dp * w->es, BS_MEM_WEIGHTS);
  w->zh[slot] = w_coll(w, BS_COLL_ALLGATHER, w->dpg, sh * w->es);
}

/* Before a weight set is used: its gather is waited, the next one posted. */
void wl_zero3_acquire(bs_wl *w) {
  if (w->zero < 3 || w->pc.dp <= 1) return;
  int u = w->zuse;
  if (u == 0) zero3_issue(w, 0);
  w_wait(w, &w->zh[u % 2]);
  if (u + 1 < zero3_uses(w)) zero3_issue(w, u + 1);
}

void wl_zero3_release(bs_wl *w) {
  if (w->zero < 3 || w->pc.dp <= 1) return;
  w_free(w, &w->zb[w->zuse % 2]);
  w->zuse++;
}

/* ---------- gradients ---------- */

/* Gradient reduction of one parameter set over the data-parallel group:
 * posted now, waited after the next set's backward. */
void wl_grad_reduce(bs_wl *w, int64_t set, int32_t *bucket) {
  w_wait(w, &w->gh);
  w_free(w, &w->gbuck);
  w->gbuck = *bucket;
  *bucket = -1;
  /* gradients accumulate over the microbatches and are reduced in the last one's backward; stages 2
   * and 3 keep no full gradient, so they reduce every microbatch's */
  if (w->pc.dp <= 1 || (w->zero < 2 && w->mb + 1 < w->nmb)) return;
  int64_t sh = bs_zero_shard(set, w->pc.dp);
  if (w->zero == 0) w->gh = w_coll(w, BS_COLL_ALLREDUCE, w->dpg, sh * w->pc.dp * w->gb);
  else w->gh = w_coll(w, BS_COLL_REDUCE_SCATTER, w->dpg, sh * w->pc.dp * w->gb);
  if (w->grad_sync) w_wait(w, &w->gh); /* not overlapped with the backward (plans/framework.c) */
}

/* Stage 2 and 3 keep only the shard: each set's gradients live in a bucket until reduced. */
void wl_grad_bucket(bs_wl *w, int64_t set, int32_t *bucket) {
  if (w->zero >= 2 && w->pc.dp > 1) *bucket = w_alloc(w, bs_zero_shard(set, w->pc.dp) * w->pc.dp * w->gb, BS_MEM_GRADS);
}

/* tp over more ranks than KV heads (each KV head replicated on rep = g / kv_heads consecutive tp
 * ranks, tp.c): the replicas' Wk, Wv weight gradients are partial sums (each from its own query
 * heads' dK, dV) and the parameter's gradient is their sum. Once a step, after the data-parallel
 * reduction, one coalesced all-reduce over the rep ranks of the rank's replicated K and V projections
 * (2 x hidden x head_dim parameters a layer, the main gradient's bytes): Megatron-LM does the same for
 * the tp-replicated sequence-parallel norm weights (megatron/core/distributed/finalize_model_grads.py,
 * _allreduce_layernorm_grads, after finish_grad_sync). ZeRO 2 and 3 keep the dp shard only: its part. */
void wl_kv_replica_reduce(bs_wl *w) {
  const bs_plan *p = w->it->p;
  if (!w->train || w->mla || p->Zkv >= w->g) return;
  int32_t rep = (int32_t)(w->g / p->Zkv), t = (w->it->rank - w->tpg.first) / w->tpg.stride;
  bs_group g = {w->tpg.first + t / rep * rep * w->tpg.stride, w->tpg.stride, rep};
  int64_t n = (w->model ? w->L * w->v : 1) * 2 * w->H * p->d;
  if (w->zero >= 2 && w->pc.dp > 1) n = bs_zero_shard(n, w->pc.dp);
  w_sync_coll(w, BS_COLL_ALLREDUCE, g, n * w->gb);
}

/* ---------- the optimizer step ---------- */

void wl_stage_opt(bs_wl *w) {
  w_wait(w, &w->gh);
  w_free(w, &w->gbuck);
  int64_t n = w->zero >= 1 && w->pc.dp > 1 ? w->pc.shard_total : w->pc.total;
  wk_optimizer(w, n, (w->zero >= 2 && w->pc.dp > 1 ? w->pc.shard_total : w->pc.total) * w->gb);
  if ((w->zero == 1 || w->zero == 2) && w->pc.dp > 1) {
    if (w->model) {
      for (int64_t l = 0; l < w->L * w->v; l++)
        w_sync_coll(w, BS_COLL_ALLGATHER, w->dpg, bs_zero_shard(w->pc.layer, w->pc.dp) * w->es);
      wl_moe_opt_gather(w, w->L * w->v);
      if (w->has_embed) w_sync_coll(w, BS_COLL_ALLGATHER, w->dpg, bs_zero_shard(w->pc.embed, w->pc.dp) * w->es);
      if (w->has_head) w_sync_coll(w, BS_COLL_ALLGATHER, w->dpg, bs_zero_shard(head_set(w), w->pc.dp) * w->es);
    } else {
      w_sync_coll(w, BS_COLL_ALLGATHER, w->dpg, bs_zero_shard(w->pc.layer, w->pc.dp) * w->es);
      wl_moe_opt_gather(w, 1);
    }
  }
}
