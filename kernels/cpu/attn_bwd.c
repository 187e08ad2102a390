/*
 * attn_bwd.c — the backward driver (FlashAttention-2 order: the outer loop
 * runs over key tiles, so dK and dV of a tile are finished in registers/cache
 * and written once; dQ is accumulated).
 *
 * Two ways to use the threads, both deterministic for a fixed thread count:
 *  - enough kv heads: each item is one whole kv head; its dQ rows belong to
 *    it alone, so items add straight into the caller's dq;
 *  - few kv heads: items are key tiles, dealt round-robin; each thread adds
 *    dQ into its own zeroed copy, and the copies are summed into dq in thread
 *    order afterwards (extra memory: threads x |dq|, still O(N d)).
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include "kernels/cpu/attn_internal.h"

int attn_bwd(const attn_params *p, const void *q, const void *k, const void *v, const float *o, const void *dout,
             const float *lse, const float *delta, float *dq, float *dk, float *dv) {
  const void *bufs[] = {q, k, v, dout, lse, dq, dk, dv};
  int err = attn_check_bufs(p, 8, bufs);
  if (err) return err;
  if (!delta && !o) return ATTN_ENULL;
  const attn_variant *var = attn_pick_variant_for(p);
  attn_tiles t = var->bwd;
  if (p->tile_q > 0) t.tq = p->tile_q;
  if (p->tile_k > 0) t.tk = p->tile_k;
  const int nt = attn_threads(p);
  const int64_t rows = (int64_t)p->B * p->Zq * p->Nq;
  const int64_t heads = (int64_t)p->B * p->Zkv;
  const int64_t nkt = (p->Nk + t.tk - 1) / t.tk;
  const int by_head = nt == 1 || (heads >= nt && (heads % nt == 0 || heads >= 4 * (int64_t)nt));
  const size_t dq_elems = (size_t)rows * p->d;

  size_t ws = var->bwd_ws_floats(p, t);
  size_t extra = by_head ? 0 : (size_t)nt * dq_elems;
  size_t own_delta = delta ? 0 : (size_t)rows;
  float *mem = malloc(((size_t)nt * ws + extra + own_delta) * sizeof(float) + 64);
  if (!mem) return ATTN_ENOMEM;
  float *dq_parts = mem + (size_t)nt * ws;
  float *dl = dq_parts + extra;
  if (!delta) {
    err = attn_delta(p, o, dout, dl);
    if (err) {
      free(mem);
      return err;
    }
    delta = dl;
  }

  if (by_head) {
#pragma omp parallel num_threads(nt)
    {
      float *my = mem + (size_t)omp_get_thread_num() * ws;
#pragma omp for schedule(dynamic, 1)
      for (int64_t h = 0; h < heads; h++)
        var->bwd_block(p, t, q, k, v, dout, lse, delta, (int)(h / p->Zkv), (int)(h % p->Zkv), 0, p->Nk, dq, dk, dv, my);
    }
  } else {
#pragma omp parallel num_threads(nt)
    {
      int me = omp_get_thread_num();
      float *my = mem + (size_t)me * ws;
      float *my_dq = dq_parts + (size_t)me * dq_elems;
      /* Zero every copy, even if the runtime gave fewer threads than asked. */
#pragma omp for schedule(static)
      for (int th = 0; th < nt; th++) memset(dq_parts + (size_t)th * dq_elems, 0, dq_elems * sizeof(float));
#pragma omp for schedule(static, 1)
      for (int64_t w = 0; w < heads * nkt; w++) {
        int64_t h = w / nkt, kt = w % nkt;
        int64_t j0 = kt * t.tk, nj = p->Nk - j0 < t.tk ? p->Nk - j0 : t.tk;
        var->bwd_block(p, t, q, k, v, dout, lse, delta, (int)(h / p->Zkv), (int)(h % p->Zkv), j0, nj, my_dq, dk, dv,
                       my);
      }
#pragma omp for schedule(static)
      for (size_t e = 0; e < dq_elems; e++) {
        float s = dq[e];
        for (int th = 0; th < nt; th++) s += dq_parts[(size_t)th * dq_elems + e];
        dq[e] = s;
      }
    }
  }
  free(mem);
  return ATTN_OK;
}
