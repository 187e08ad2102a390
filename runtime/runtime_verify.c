/*
 * runtime_verify.c — the inputs of a real run and the check of its outputs.
 * Inputs are a pure function of the seed and the global (tensor, batch, head,
 * token, column) index, so every rank count sees the same global tensors and
 * rank 0 can rebuild them for the single-rank reference. --verify gathers
 * every rank's outputs to rank 0, compares them with that reference (max error
 * relative to max|ref|) and checks that every element was produced by a rank.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime_impl.h"
#include "watchdog.h"
#include "base/fill.h"

/* ---------------- inputs ---------------- */

/* Value in [-1, 1) of element idx of input tensor `role`. */
static float input_value(uint64_t seed, int role, uint64_t idx) {
  uint64_t h = bs_mix64(seed ^ bs_mix64((uint64_t)role * 0x1000193ull + 7) ^ bs_mix64(idx));
  return (float)bs_unit_signed(h);
}

typedef struct {
  int64_t B, heads, tokens, width; /* global shape of the tensor of a role */
} gshape;

static gshape role_shape(const bs_plan *p, bs_role role) {
  const bs_config *c = bs_plan_config(p);
  attn_params ref = bs_plan_reference_params(p);
  gshape g = {c->work.batch, c->model.heads, ref.Nq, c->model.head_dim};
  if (role == BS_ROLE_K || role == BS_ROLE_V || role == BS_ROLE_DK || role == BS_ROLE_DV) {
    g.heads = c->model.kv_heads;
    g.tokens = ref.Nk;
  }
  if (role == BS_ROLE_V || role == BS_ROLE_DV || role == BS_ROLE_O || role == BS_ROLE_DOUT) g.width = attn_dv(&ref);
  if (role == BS_ROLE_LSE) g.width = 1;
  return g;
}

static int64_t global_index(gshape g, int64_t b, int64_t h, int64_t t, int64_t x) {
  return ((b * g.heads + h) * g.tokens + t) * g.width + x;
}

/* Fills a role buffer (q, k, v, dout) of nb sequences from its shard. */
void rt_fill_input(const bs_plan *p, uint64_t seed, bs_role role, const bs_shard *s, int64_t nb, void *buf, int bf16) {
  gshape g = role_shape(p, role);
  int64_t n = bs_shard_tokens(s);
  for (int64_t b = 0; b < nb; b++)
    for (int64_t h = 0; h < s->heads; h++)
      for (int64_t i = 0; i < n; i++) {
        int64_t t = bs_shard_token(s, i), at = bs_shard_index(s, nb, b, h, i, g.width);
        for (int64_t x = 0; x < g.width; x++) {
          float v = input_value(seed, role, (uint64_t)global_index(g, s->b0 + b, s->head0 + h, t, x));
          if (bf16) ((uint16_t *)buf)[at + x] = attn_f32_to_bf16(v);
          else ((float *)buf)[at + x] = v;
        }
      }
}

/* ---------------- verification ---------------- */

typedef struct {
  int32_t role;
  bs_shard shard;
  int64_t bytes;
} out_meta;

static int is_output(bs_role r) {
  return r == BS_ROLE_O || r == BS_ROLE_LSE || r == BS_ROLE_DQ || r == BS_ROLE_DK || r == BS_ROLE_DV;
}

/* Rank 0: the single-rank reference on whole tensors. refs[role] in fp32. */
static int reference(const bs_plan *p, uint64_t seed, int bf16, int threads, float *refs[BS_ROLE_DV + 1], char *err,
                     size_t errlen) {
  attn_params a = bs_plan_reference_params(p);
  a.threads = threads;
  int train = bs_plan_has_bwd(p);
  void *in[BS_ROLE_DV + 1] = {0};
  const bs_role inputs[] = {BS_ROLE_Q, BS_ROLE_K, BS_ROLE_V, BS_ROLE_DOUT};
  for (int j = 0; j < 4; j++) {
    gshape g = role_shape(p, inputs[j]);
    bs_shard s = {BS_CONTIGUOUS, 0, 1, g.tokens, 0, (int32_t)g.heads, 0, 0, NULL};
    in[inputs[j]] = malloc((size_t)(g.B * g.heads * g.tokens * g.width) * (bf16 ? 2 : 4));
    if (!in[inputs[j]]) {
      snprintf(err, errlen, "reference: out of memory");
      return -1;
    }
    rt_fill_input(p, seed, inputs[j], &s, g.B, in[inputs[j]], bf16);
  }
  const bs_role outs[] = {BS_ROLE_O, BS_ROLE_LSE, BS_ROLE_DQ, BS_ROLE_DK, BS_ROLE_DV};
  for (int j = 0; j < 5; j++) {
    gshape g = role_shape(p, outs[j]);
    refs[outs[j]] = calloc((size_t)(g.B * g.heads * g.tokens * g.width), sizeof(float));
  }
  int rc = attn_fwd(&a, in[BS_ROLE_Q], in[BS_ROLE_K], in[BS_ROLE_V], refs[BS_ROLE_O], refs[BS_ROLE_LSE], 0);
  if (!rc && train) {
    gshape g = role_shape(p, BS_ROLE_LSE);
    float *delta = malloc((size_t)(g.B * g.heads * g.tokens) * sizeof(float));
    rc = attn_delta(&a, refs[BS_ROLE_O], in[BS_ROLE_DOUT], delta);
    if (!rc)
      rc = attn_bwd(&a, in[BS_ROLE_Q], in[BS_ROLE_K], in[BS_ROLE_V], NULL, in[BS_ROLE_DOUT], refs[BS_ROLE_LSE], delta,
                    refs[BS_ROLE_DQ], refs[BS_ROLE_DK], refs[BS_ROLE_DV]);
    free(delta);
  }
  for (int j = 0; j < 4; j++) free(in[inputs[j]]);
  if (rc) {
    snprintf(err, errlen, "reference: %s", attn_strerror(rc));
    return -1;
  }
  return 0;
}

/* Compares one received output buffer; updates the max error and the coverage map. */
static void compare(const bs_plan *p, const out_meta *m, const float *got, const float *ref, unsigned char *cover,
                    double *maxerr) {
  gshape g = role_shape(p, (bs_role)m->role);
  int64_t n = bs_shard_tokens(&m->shard), nb = bs_plan_local_batch(p);
  for (int64_t b = 0; b < nb; b++)
    for (int64_t h = 0; h < m->shard.heads; h++)
      for (int64_t i = 0; i < n; i++) {
        int64_t t = bs_shard_token(&m->shard, i), li = bs_shard_index(&m->shard, nb, b, h, i, g.width);
        for (int64_t x = 0; x < g.width; x++) {
          int64_t gi = global_index(g, m->shard.b0 + b, m->shard.head0 + h, t, x);
          double e;
          if (isinf(ref[gi]) || isinf(got[li + x])) e = (ref[gi] == got[li + x]) ? 0 : INFINITY;
          else e = fabs((double)got[li + x] - (double)ref[gi]);
          if (!(e <= *maxerr)) *maxerr = isnan(e) ? INFINITY : e;
          cover[gi] = 1;
        }
      }
}

static int verify_gather(rt *t, bs_run_report *out, char *err, size_t errlen);

/* Buffer b readable on the host: itself, or on a GPU a copy (give it back with host_done). */
static void *host_view(rt *t, int b) {
  if (!t->dev) return t->buf[b].ptr;
  void *h = malloc((size_t)(t->buf[b].bytes > 0 ? t->buf[b].bytes : 1));
  if (h && t->dev->download(t->dev->self, h, t->buf[b].ptr, (size_t)t->buf[b].bytes)) {
    free(h);
    h = NULL;
  }
  if (!h) fprintf(stderr, "burstsim run: rank %d: cannot copy an output to the host for --verify\n", t->rank);
  return h;
}

static void host_done(rt *t, void *h) {
  if (t->dev) free(h);
}

int rt_verify(rt *t, bs_run_report *out, char *err, size_t errlen) {
  bs_test_stall(t->rank, "verify");
  if (bs_arrive(t->world, "the verify gather", t->timeout, 0, err, errlen)) return BS_RUN_EFATAL;
  /* Other ranks wait here while rank 0 computes the single-rank reference: --timeout covers it too. */
  bs_watchdog_arm("burstsim run", t->rank, "the verify gather", t->timeout);
  if (t->rank != 0) bs_watchdog_waiting("rank 0 to take the outputs");
  int rc = verify_gather(t, out, err, errlen);
  bs_watchdog_disarm();
  return rc;
}

static int verify_gather(rt *t, bs_run_report *out, char *err, size_t errlen) {
  const bs_plan *p = t->plan;
  int n_local = 0;
  for (int b = 0; b < RT_MAX_BUFS; b++)
    if (t->buf[b].ptr && is_output(t->buf[b].role)) n_local++;
  int *counts = t->rank == 0 ? calloc((size_t)t->G, sizeof(int)) : NULL;
  MPI_Gather(&n_local, 1, MPI_INT, counts, 1, MPI_INT, 0, t->world);
  if (t->rank != 0) {
    for (int b = 0; b < RT_MAX_BUFS; b++)
      if (t->buf[b].ptr && is_output(t->buf[b].role)) {
        out_meta m = {t->buf[b].role, t->buf[b].shard, t->buf[b].bytes};
        void *h = host_view(t, b);
        if (!h) m.role = -1; /* rank 0 skips it; its elements then count as produced by no rank */
        MPI_Send(&m, (int)sizeof m, MPI_BYTE, 0, 900, t->world);
        MPI_Send(h ? h : t->buf[b].ptr, h ? (int)m.bytes : 0, MPI_BYTE, 0, 901, t->world);
        host_done(t, h);
      }
    return BS_RUN_OK;
  }
  float *refs[BS_ROLE_DV + 1] = {0};
  unsigned char *cover[BS_ROLE_DV + 1] = {0};
  int rc = reference(p, t->cfg->seed, t->bf16, t->threads, refs, err, errlen);
  double maxerr[BS_ROLE_DV + 1] = {0};
  for (int r = 0; r <= BS_ROLE_DV; r++) {
    out->verify_err[r] = -1;
    if (is_output((bs_role)r) && refs[r]) {
      gshape g = role_shape(p, (bs_role)r);
      cover[r] = calloc((size_t)(g.B * g.heads * g.tokens * g.width), 1);
    }
  }
  for (int src = 0; src < t->G; src++)
    for (int j = 0; j < counts[src]; j++) {
      out_meta m;
      float *data;
      if (src == 0) {
        int seen = -1, b;
        for (b = 0; b < RT_MAX_BUFS; b++)
          if (t->buf[b].ptr && is_output(t->buf[b].role) && ++seen == j) break;
        m = (out_meta){t->buf[b].role, t->buf[b].shard, t->buf[b].bytes};
        data = host_view(t, b);
        if (!data) m.role = -1;
      } else {
        bs_watchdog_waiting("rank %d's outputs", src);
        MPI_Recv(&m, (int)sizeof m, MPI_BYTE, src, 900, t->world, MPI_STATUS_IGNORE);
        if (m.shard.runs) m.shard.runs = bs_plan_runs(p); /* the sender's pointer: this process's copy */
        data = malloc((size_t)m.bytes);
        MPI_Recv(data, m.role < 0 ? 0 : (int)m.bytes, MPI_BYTE, src, 901, t->world, MPI_STATUS_IGNORE);
      }
      if (rc == 0 && m.role >= 0 && m.role <= BS_ROLE_DV && refs[m.role])
        compare(p, &m, data, refs[m.role], cover[m.role], &maxerr[m.role]);
      if (src != 0) free(data);
      else host_done(t, data);
    }
  if (rc == 0) {
    out->verified = 1;
    out->verify_tol = t->bf16 ? 1e-2 : 1e-5;
    int train = bs_plan_has_bwd(p);
    for (int r = BS_ROLE_O; r <= BS_ROLE_DV; r++) {
      if (!train && r >= BS_ROLE_DQ) continue;
      gshape g = role_shape(p, (bs_role)r);
      int64_t total = g.B * g.heads * g.tokens * g.width, missing = 0;
      double scale = 0;
      for (int64_t i = 0; i < total; i++) {
        missing += !cover[r][i];
        if (isfinite(refs[r][i]) && fabs(refs[r][i]) > scale) scale = fabs(refs[r][i]);
      }
      out->verify_err[r] = scale > 0 ? maxerr[r] / scale : maxerr[r];
      if (missing) {
        snprintf(err, errlen, "verify: %lld elements of %s were produced by no rank", (long long)missing,
                 bs_role_name((bs_role)r));
        out->verified = 0;
        out->verify_err[r] = INFINITY;
      } else if (!(out->verify_err[r] < out->verify_tol)) {
        if (out->verified)
          snprintf(err, errlen,
                   "verify: %s differs from the single-rank reference: max error %.3g of max|ref| (bound %.0e)",
                   bs_role_name((bs_role)r), out->verify_err[r], out->verify_tol);
        out->verified = 0;
      }
    }
    if (!out->verified) rc = BS_RUN_EVERIFY;
  }
  for (int r = 0; r <= BS_ROLE_DV; r++) {
    free(refs[r]);
    free(cover[r]);
  }
  free(counts);
  return rc < 0 ? BS_RUN_EFATAL : rc;
}
