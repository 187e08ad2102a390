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

/*
 * How the rows are cut into items. Per-head mode: item (b, hq, query tile),
 * local row r is query row i0 + r of head (b, hq). Group mode (GQA decode):
 * item (b, hkv) holds the Nq rows of every query head of the group, local row
 * r = g * Nq + i, so the kv head streams through the cache once for all.
 */
typedef struct {
  int grouped;
  int64_t nqt, rows_max;
} fwd_plan;

static size_t out_row(const attn_params *p, const fwd_plan *fp, int64_t rest, int64_t r, int64_t i0) {
  if (fp->grouped) {
    int64_t group = p->Zq / p->Zkv, b = rest / p->Zkv, hkv = rest % p->Zkv;
    int64_t g = r / p->Nq, i = r % p->Nq;
    return (size_t)(((b * p->Zq + hkv * group + g) * p->Nq) + i);
  }
  return (size_t)((rest / fp->nqt) * p->Nq + i0 + r);
}

int attn_fwd(const attn_params *p, const void *q, const void *k, const void *v, float *o, float *lse, int accumulate) {
  const void *bufs[] = {q, k, v, o, lse};
  int err = attn_check_bufs(p, 5, bufs);
  if (err) return err;
  const attn_variant *var = attn_pick_variant_for(p);
  attn_tiles t = effective_tiles(p, var->fwd);
  const int d = attn_dv(p), nt = attn_threads(p);
  const int64_t group = p->Zq / p->Zkv;
  fwd_plan fp;
  fp.grouped = var->fwd_group_block && group > 1 && p->Nq * group <= var->group_rows && p->tile_q == 0;
  fp.nqt = fp.grouped ? 1 : (p->Nq + t.tq - 1) / t.tq;
  fp.rows_max = fp.grouped ? p->Nq * group : t.tq;
  const int64_t nkt = (p->Nk + t.tk - 1) / t.tk;
  const int64_t items = fp.grouped ? (int64_t)p->B * p->Zkv : (int64_t)p->B * p->Zq * fp.nqt;

  /* Decode: split keys so that there are a few items per thread. */
  int64_t nsplit = 1;
  if (items < 2 * (int64_t)nt && nkt > 1) {
    nsplit = (4 * (int64_t)nt + items - 1) / items;
    if (nsplit > nkt) nsplit = nkt;
  }
  const int64_t chunk = (nkt + nsplit - 1) / nsplit; /* key tiles per split */
  nsplit = (nkt + chunk - 1) / chunk;
  const int64_t total = items * nsplit;
  const size_t R = (size_t)fp.rows_max;

  size_t ws = var->fwd_ws_floats(p, t);
  size_t per_thread = ws + R * d + R;
  size_t part_rows = nsplit > 1 ? (size_t)total * R : 0;
  float *mem = malloc(((size_t)nt * per_thread + part_rows * (d + 1)) * sizeof(float) + 64);
  if (!mem) return ATTN_ENOMEM;
  float *part_o = mem + (size_t)nt * per_thread;
  float *part_l = part_o + part_rows * d;

#pragma omp parallel num_threads(nt)
  {
    float *my = mem + (size_t)omp_get_thread_num() * per_thread;
    float *my_o = my + ws, *my_l = my_o + R * d;
#pragma omp for schedule(dynamic, 1)
    for (int64_t w = 0; w < total; w++) {
      int64_t ks = w % nsplit, rest = w / nsplit;
      int64_t i0 = 0, ni = fp.rows_max;
      if (!fp.grouped) {
        i0 = (rest % fp.nqt) * t.tq;
        ni = p->Nq - i0 < t.tq ? p->Nq - i0 : t.tq;
      }
      int64_t j0 = ks * chunk * t.tk, j1 = (ks + 1) * chunk * t.tk;
      if (j1 > p->Nk) j1 = p->Nk;
      float *dst_o = nsplit > 1 ? part_o + (size_t)w * R * d : my_o;
      float *dst_l = nsplit > 1 ? part_l + (size_t)w * R : my_l;
      int64_t mrows = fp.grouped ? p->Nq : ni; /* the positions the rows take */
      if (attn_mask_tile_class(&p->mask, i0, mrows, j0, j1 - j0) == ATTN_TILE_NONE) {
        memset(dst_o, 0, (size_t)ni * d * sizeof(float));
        for (int64_t i = 0; i < ni; i++) dst_l[i] = -INFINITY;
      } else if (fp.grouped) {
        var->fwd_group_block(p, t, q, k, v, (int)(rest / p->Zkv), (int)(rest % p->Zkv), j0, j1 - j0, dst_o, dst_l, my);
      } else {
        int64_t bh = rest / fp.nqt;
        var->fwd_block(p, t, q, k, v, (int)(bh / p->Zq), (int)(bh % p->Zq), i0, ni, j0, j1 - j0, dst_o, dst_l, my);
      }
      if (nsplit == 1)
        for (int64_t i = 0; i < ni; i++) {
          size_t row = out_row(p, &fp, rest, i, i0);
          store_row(d, o + row * d, lse + row, dst_o + i * d, dst_l[i], accumulate);
        }
    }
    if (nsplit > 1) {
      /* Merge the key splits of each item in split order. */
#pragma omp for schedule(static)
      for (int64_t it = 0; it < items; it++) {
        int64_t i0 = 0, ni = fp.rows_max;
        if (!fp.grouped) {
          i0 = (it % fp.nqt) * t.tq;
          ni = p->Nq - i0 < t.tq ? p->Nq - i0 : t.tq;
        }
        for (int64_t i = 0; i < ni; i++) {
          float l = -INFINITY;
          memset(my_o, 0, (size_t)d * sizeof(float));
          for (int64_t ks = 0; ks < nsplit; ks++) {
            size_t w = (size_t)(it * nsplit + ks);
            attn_merge_row(d, my_o, &l, part_o + (w * R + i) * d, part_l[w * R + i]);
          }
          size_t row = out_row(p, &fp, it, i, i0);
          store_row(d, o + row * d, lse + row, my_o, l, accumulate);
        }
      }
    }
  }
  free(mem);
  return ATTN_OK;
}
