/*
 * attn_fwd.c — the forward driver: cuts the work into (batch, head, query
 * tile, key split) items, runs them on OpenMP threads through the block kernel
 * of the variant in use, and writes or merges the results into (O, lse).
 *
 * Few query rows against many keys (decode) leave too few items to keep every
 * core busy, so the keys are then split into chunks whose partial (O, lse) are
 * merged by lse afterwards, in a fixed order (Flash-Decoding). Every item's
 * result depends only on its inputs, so the output is deterministic for a
 * given thread count (which fixes the split).
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include "kernels/cpu/attn_internal.h"

static attn_tiles effective_tiles(const attn_params *p, attn_tiles t) {
  if (p->tile_q > 0) t.tq = p->tile_q;
  if (p->tile_k > 0) t.tk = p->tile_k;
  if (t.tq > p->Nq) t.tq = (int)p->Nq;
  return t;
}

/* Writes one finished partial row into the caller's (o, lse). */
static void store_row(int d, float *o, float *lse, const float *orow, float lrow, int accumulate) {
  if (accumulate) {
    attn_merge_row(d, o, lse, orow, lrow);
  } else {
    memcpy(o, orow, (size_t)d * sizeof(float));
    *lse = lrow;
  }
}

int attn_fwd(const attn_params *p, const void *q, const void *k, const void *v, float *o,
             float *lse, int accumulate) {
  const void *bufs[] = {q, k, v, o, lse};
  int err = attn_check_bufs(p, 5, bufs);
  if (err) return err;
  const attn_variant *var = attn_pick_variant();
  attn_tiles t = effective_tiles(p, var->fwd);
  const int d = p->d, nt = attn_threads(p);
  const int64_t nqt = (p->Nq + t.tq - 1) / t.tq;
  const int64_t nkt = (p->Nk + t.tk - 1) / t.tk;
  const int64_t items = (int64_t)p->B * p->Zq * nqt;

  /* Decode: split keys so that there are a few items per thread. */
  int64_t nsplit = 1;
  if (items < 2 * (int64_t)nt && nkt > 1) {
    nsplit = (4 * (int64_t)nt + items - 1) / items;
    if (nsplit > nkt) nsplit = nkt;
  }
  const int64_t chunk = (nkt + nsplit - 1) / nsplit; /* key tiles per split */
  nsplit = (nkt + chunk - 1) / chunk;
  const int64_t total = items * nsplit;

  size_t ws = var->fwd_ws_floats(p, t);
  size_t per_thread = ws + (size_t)t.tq * d + (size_t)t.tq;
  size_t part_rows = nsplit > 1 ? (size_t)total * t.tq : 0;
  float *mem = malloc(((size_t)nt * per_thread + part_rows * (d + 1)) * sizeof(float) + 64);
  if (!mem) return ATTN_ENOMEM;
  float *part_o = mem + (size_t)nt * per_thread;
  float *part_l = part_o + part_rows * d;

#pragma omp parallel num_threads(nt)
  {
    float *my = mem + (size_t)omp_get_thread_num() * per_thread;
    float *my_o = my + ws, *my_l = my_o + (size_t)t.tq * d;
#pragma omp for schedule(dynamic, 1)
    for (int64_t w = 0; w < total; w++) {
      int64_t ks = w % nsplit, rest = w / nsplit;
      int64_t qt = rest % nqt, bh = rest / nqt;
      int hq = (int)(bh % p->Zq), b = (int)(bh / p->Zq);
      int64_t i0 = qt * t.tq, ni = p->Nq - i0 < t.tq ? p->Nq - i0 : t.tq;
      int64_t j0 = ks * chunk * t.tk, j1 = (ks + 1) * chunk * t.tk;
      if (j1 > p->Nk) j1 = p->Nk;
      float *dst_o = nsplit > 1 ? part_o + (size_t)w * t.tq * d : my_o;
      float *dst_l = nsplit > 1 ? part_l + (size_t)w * t.tq : my_l;
      if (attn_tile_class(&p->mask, i0, ni, j0, j1 - j0) == TILE_NONE) {
        memset(dst_o, 0, (size_t)ni * d * sizeof(float));
        for (int64_t i = 0; i < ni; i++) dst_l[i] = -INFINITY;
      } else {
        var->fwd_block(p, t, q, k, v, b, hq, i0, ni, j0, j1 - j0, dst_o, dst_l, my);
      }
      if (nsplit == 1) {
        size_t row0 = (size_t)bh * p->Nq + i0;
        for (int64_t i = 0; i < ni; i++)
          store_row(d, o + (row0 + i) * d, lse + row0 + i, dst_o + i * d, dst_l[i], accumulate);
      }
    }
    if (nsplit > 1) {
      /* Merge the key splits of each query tile in split order. */
#pragma omp for schedule(static)
      for (int64_t it = 0; it < items; it++) {
        int64_t qt = it % nqt, bh = it / nqt;
        int64_t i0 = qt * t.tq, ni = p->Nq - i0 < t.tq ? p->Nq - i0 : t.tq;
        for (int64_t i = 0; i < ni; i++) {
          float l = -INFINITY;
          memset(my_o, 0, (size_t)d * sizeof(float));
          for (int64_t ks = 0; ks < nsplit; ks++) {
            size_t w = (size_t)(it * nsplit + ks);
            attn_merge_row(d, my_o, &l, part_o + (w * t.tq + i) * d, part_l[w * t.tq + i]);
          }
          size_t row = (size_t)bh * p->Nq + i0 + i;
          store_row(d, o + row * d, lse + row, my_o, l, accumulate);
        }
      }
    }
  }
  free(mem);
  return ATTN_OK;
}
