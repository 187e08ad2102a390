/*
 * cuda_check_cases.c — bs_cuda_check's correctness cases: each (case, d,
 * dtype, path) runs the forward, the accumulate merge over two key blocks, the
 * backward (D and O variants) and the delta kernel on NaN-poisoned outputs
 * against the float64 reference; then decode and merge. Case shapes cover GQA,
 * causal with offsets, fully masked rows, sliding windows with strides and odd
 * sizes, and every tile variant of the MMA kernels.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tests/cuda/cuda_check.h"

/* ---- one correctness case ----------------------------------------------------- */

typedef struct {
  const char *name;
  int B, Zq, Zkv;
  int64_t Nq, Nk;
  int causal;
  int64_t window, q_pos0, q_stride, k_pos0, k_stride;
} case_def;

static attn_params params_of(const case_def *cd, int d, attn_dtype dt) {
  attn_params p;
  memset(&p, 0, sizeof p);
  p.B = cd->B;
  p.Zq = cd->Zq;
  p.Zkv = cd->Zkv;
  p.Nq = cd->Nq;
  p.Nk = cd->Nk;
  p.d = d;
  p.scale = 1.0f / sqrtf((float)d);
  p.mask.q_pos0 = cd->q_pos0;
  p.mask.q_stride = cd->q_stride;
  p.mask.k_pos0 = cd->k_pos0;
  p.mask.k_stride = cd->k_stride;
  p.mask.causal = cd->causal;
  p.mask.window = cd->window;
  p.dtype = dt;
  return p;
}

/* Copies key rows [j0, j0+n) of every (b, kv head) of x [B,Zkv,Nk,d] (elem bytes es). */
static void *slice_keys(const void *x, const attn_params *p, int64_t j0, int64_t n, size_t es) {
  const size_t row = (size_t)p->d * es;
  char *out = malloc((size_t)p->B * p->Zkv * (size_t)n * row);
  for (int bh = 0; bh < p->B * p->Zkv; bh++)
    memcpy(out + (size_t)bh * n * row, (const char *)x + ((size_t)bh * p->Nk + (size_t)j0) * row, (size_t)n * row);
  return out;
}

typedef struct {
  void *q, *k, *v, *g, *k1, *v1, *k2, *v2;
  float *o, *lse, *delta, *oref, *lseref, *dq, *dk, *dv;
} dev_bufs;

static void free_bufs(dev_bufs *b) {
  void *all[] = {b->q, b->k,   b->v,     b->g,    b->k1,     b->v1, b->k2, b->v2,
                 b->o, b->lse, b->delta, b->oref, b->lseref, b->dq, b->dk, b->dv};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]) (void)cudaFree(all[i]);
  memset(b, 0, sizeof *b);
}

/* One case's host side: inputs rounded to the dtype (values and storage bytes), random initial
 * gradients, the float64 reference of the forward and of the backward (added into the initial
 * gradients), and the reference O, lse and D in fp32 that the backward calls read. */
typedef struct {
  attn_params p;
  size_t nq, nk, rows, es;
  float *q, *k, *v, *g;
  void *qr, *kr, *vr, *gr;
  double *o, *lse, *dq, *dk, *dv;
  float *init_q, *init_k, *init_v;
  float *got, *got_l;
  float *of, *lf, *df;
  void *k1, *v1, *k2, *v2; /* the key blocks of the accumulate check */
  dev_bufs db;
} case_data;

static void case_make(check_ctx *c, const case_def *cd, const attn_params *pp, case_data *cs) {
  memset(cs, 0, sizeof *cs);
  cs->p = *pp;
  const attn_params p = *pp;
  const int d = p.d;
  const attn_dtype dt = p.dtype;
  const size_t nq = (size_t)p.B * p.Zq * (size_t)p.Nq * d, nk = (size_t)p.B * p.Zkv * (size_t)p.Nk * d;
  const size_t rows = (size_t)p.B * p.Zq * (size_t)p.Nq;
  const size_t es = esize(dt);
  cs->nq = nq;
  cs->nk = nk;
  cs->rows = rows;
  cs->es = es;
  uint64_t rng = c->seed ^ (uint64_t)(d * 1000003 + dtype_index(dt) * 7919 + (int)cd->Nq * 31 + (int)cd->Nk);
  cs->q = malloc(nq * 4), cs->k = malloc(nk * 4), cs->v = malloc(nk * 4), cs->g = malloc(nq * 4);
  cs->qr = malloc(nq * es), cs->kr = malloc(nk * es), cs->vr = malloc(nk * es), cs->gr = malloc(nq * es);
  cs->o = malloc(nq * 8), cs->lse = malloc(rows * 8);
  cs->dq = malloc(nq * 8), cs->dk = malloc(nk * 8), cs->dv = malloc(nk * 8);
  cs->init_q = malloc(nq * 4), cs->init_k = malloc(nk * 4), cs->init_v = malloc(nk * 4);
  cs->got = malloc((nq > nk ? nq : nk) * 4), cs->got_l = malloc(rows * 4);
  cs->of = malloc(nq * 4), cs->lf = malloc(rows * 4), cs->df = malloc(rows * 4);
  make_tensor(&rng, dt, nq, cs->q, cs->qr);
  make_tensor(&rng, dt, nk, cs->k, cs->kr);
  make_tensor(&rng, dt, nk, cs->v, cs->vr);
  make_tensor(&rng, dt, nq, cs->g, cs->gr);
  for (size_t i = 0; i < nq; i++) cs->init_q[i] = (float)rng_normal(&rng);
  for (size_t i = 0; i < nk; i++) cs->init_k[i] = (float)rng_normal(&rng);
  for (size_t i = 0; i < nk; i++) cs->init_v[i] = (float)rng_normal(&rng);
  ref_fwd(&p, cs->q, cs->k, cs->v, cs->o, cs->lse);
  for (size_t i = 0; i < nq; i++) cs->dq[i] = cs->init_q[i];
  for (size_t i = 0; i < nk; i++) {
    cs->dk[i] = cs->init_k[i];
    cs->dv[i] = cs->init_v[i];
  }
  ref_bwd(&p, cs->q, cs->k, cs->v, cs->g, cs->o, cs->lse, cs->dq, cs->dk, cs->dv);
  for (size_t i = 0; i < nq; i++) cs->of[i] = (float)cs->o[i];
  for (size_t r = 0; r < rows; r++) {
    cs->lf[r] = (float)cs->lse[r];
    double D = 0.0;
    for (int cc = 0; cc < d; cc++) D += (double)cs->g[r * d + cc] * cs->o[r * d + cc];
    cs->df[r] = (float)D;
  }
}

static void case_free(case_data *cs) {
  free_bufs(&cs->db);
  free(cs->q);
  free(cs->k);
  free(cs->v);
  free(cs->g);
  free(cs->qr);
  free(cs->kr);
  free(cs->vr);
  free(cs->gr);
  free(cs->o);
  free(cs->lse);
  free(cs->dq);
  free(cs->dk);
  free(cs->dv);
  free(cs->init_q);
  free(cs->init_k);
  free(cs->init_v);
  free(cs->got);
  free(cs->got_l);
  free(cs->of);
  free(cs->lf);
  free(cs->df);
  free(cs->k1);
  free(cs->v1);
  free(cs->k2);
  free(cs->v2);
}

/* Inputs, the reference O, lse and D, and room for the outputs on the device. */
static int case_upload(case_data *cs) {
  dev_bufs *db = &cs->db;
  const size_t nq = cs->nq, nk = cs->nk, rows = cs->rows, es = cs->es;
  if (upload(&db->q, cs->qr, nq * es) || upload(&db->k, cs->kr, nk * es) || upload(&db->v, cs->vr, nk * es) ||
      upload(&db->g, cs->gr, nq * es))
    return -1;
  if (cudaMalloc((void **)&db->o, nq * 4) || cudaMalloc((void **)&db->lse, rows * 4) ||
      cudaMalloc((void **)&db->dq, nq * 4) || cudaMalloc((void **)&db->dk, nk * 4) ||
      cudaMalloc((void **)&db->dv, nk * 4)) {
    fprintf(stderr, "bs_cuda_check: cudaMalloc failed\n");
    return -1;
  }
  if (upload((void **)&db->oref, cs->of, nq * 4) || upload((void **)&db->lseref, cs->lf, rows * 4) ||
      upload((void **)&db->delta, cs->df, rows * 4))
    return -1;
  return 0;
}

/* Downloads O and lse and compares them with the reference (check names "<tag> O", "<tag> lse"). */
static int compare_fwd(check_ctx *c, case_data *cs, const char *o_name, const char *lse_name) {
  double rel;
  if (download_f(cs->got, cs->db.o, cs->nq) || download_f(cs->got_l, cs->db.lse, cs->rows)) return -1;
  compare(c, o_name, cs->got, cs->o, cs->nq, bound_for(cs->p.dtype), &rel);
  note_worst(c, cs->p.dtype, 0, rel);
  compare(c, lse_name, cs->got_l, cs->lse, cs->rows, bound_for(cs->p.dtype), &rel);
  note_worst(c, cs->p.dtype, 0, rel);
  return 0;
}

/* Forward, overwriting NaN-poisoned outputs. */
static int check_fwd(check_ctx *c, case_data *cs, const attn_params *pf, attn_cuda_path path) {
  dev_bufs *db = &cs->db;
  if (cudaMemset(db->o, 0xff, cs->nq * 4) || cudaMemset(db->lse, 0xff, cs->rows * 4)) return -1;
  int e = attn_cuda_fwd_path(pf, path, db->q, db->k, db->v, db->o, db->lse, 0, 0);
  if (e) return call_failed(c, "fwd", e) ? -1 : 0;
  return compare_fwd(c, cs, "fwd O", "fwd lse");
}

/* Accumulate: keys in two blocks, the second merged into the first. */
static int check_accumulate(check_ctx *c, case_data *cs, const attn_params *pf, attn_cuda_path path) {
  const attn_params *p = &cs->p;
  dev_bufs *db = &cs->db;
  const size_t es = cs->es;
  const int64_t n1 = p->Nk / 3 + 1, n2 = p->Nk - n1;
  attn_params p1 = *pf, p2 = *pf;
  p1.Nk = n1;
  p2.Nk = n2;
  p2.mask.k_pos0 = p->mask.k_pos0 + n1 * p->mask.k_stride;
  cs->k1 = slice_keys(cs->kr, p, 0, n1, es);
  cs->v1 = slice_keys(cs->vr, p, 0, n1, es);
  cs->k2 = slice_keys(cs->kr, p, n1, n2, es);
  cs->v2 = slice_keys(cs->vr, p, n1, n2, es);
  const size_t b1 = (size_t)p->B * p->Zkv * (size_t)n1 * p->d * es, b2 = (size_t)p->B * p->Zkv * (size_t)n2 * p->d * es;
  if (upload(&db->k1, cs->k1, b1) || upload(&db->v1, cs->v1, b1) || upload(&db->k2, cs->k2, b2) ||
      upload(&db->v2, cs->v2, b2))
    return -1;
  if (cudaMemset(db->o, 0xff, cs->nq * 4) || cudaMemset(db->lse, 0xff, cs->rows * 4)) return -1;
  int e = attn_cuda_fwd_path(&p1, path, db->q, db->k1, db->v1, db->o, db->lse, 0, 0);
  if (!e) e = attn_cuda_fwd_path(&p2, path, db->q, db->k2, db->v2, db->o, db->lse, 1, 0);
  if (e) return call_failed(c, "acc", e) ? -1 : 0;
  return compare_fwd(c, cs, "acc O", "acc lse");
}

/* Backward, D variant then O variant, adding into random initial gradients. */
static int check_bwd(check_ctx *c, case_data *cs, const attn_params *pb, attn_cuda_path path) {
  dev_bufs *db = &cs->db;
  const size_t nq = cs->nq, nk = cs->nk;
  const double bound = bound_for(cs->p.dtype);
  double rel;
  for (int variant = 0; variant < 2; variant++) {
    if (cudaMemcpy(db->dq, cs->init_q, nq * 4, cudaMemcpyHostToDevice) ||
        cudaMemcpy(db->dk, cs->init_k, nk * 4, cudaMemcpyHostToDevice) ||
        cudaMemcpy(db->dv, cs->init_v, nk * 4, cudaMemcpyHostToDevice))
      return -1;
    int e = variant == 0 ? attn_cuda_bwd_path(pb, path, db->q, db->k, db->v, NULL, db->g, db->lseref, db->delta, db->dq,
                                              db->dk, db->dv, 0)
                         : attn_cuda_bwd_path(pb, path, db->q, db->k, db->v, db->oref, db->g, db->lseref, NULL, db->dq,
                                              db->dk, db->dv, 0);
    if (e) {
      if (call_failed(c, variant ? "bwdO" : "bwdD", e)) return -1;
      continue;
    }
    const char *nm[2][3] = {{"bwdD dq", "bwdD dk", "bwdD dv"}, {"bwdO dq", "bwdO dk", "bwdO dv"}};
    if (download_f(cs->got, db->dq, nq)) return -1;
    compare(c, nm[variant][0], cs->got, cs->dq, nq, bound, &rel);
    note_worst(c, cs->p.dtype, 1, rel);
    if (download_f(cs->got, db->dk, nk)) return -1;
    compare(c, nm[variant][1], cs->got, cs->dk, nk, bound, &rel);
    note_worst(c, cs->p.dtype, 1, rel);
    if (download_f(cs->got, db->dv, nk)) return -1;
    compare(c, nm[variant][2], cs->got, cs->dv, nk, bound, &rel);
    note_worst(c, cs->p.dtype, 1, rel);
  }
  return 0;
}

/* The delta kernel alone. */
static int check_delta(check_ctx *c, case_data *cs, const attn_params *pb) {
  const size_t rows = cs->rows;
  double *dref = malloc(rows * 8);
  for (size_t r = 0; r < rows; r++) dref[r] = cs->df[r];
  if (cudaMemset(cs->db.lse, 0xff, rows * 4) || attn_cuda_delta(pb, cs->db.oref, cs->db.g, cs->db.lse, 0) ||
      download_f(cs->got_l, cs->db.lse, rows)) {
    free(dref);
    return -1;
  }
  compare(c, "delta", cs->got_l, dref, rows, 1e-5, NULL); /* fp32 sums of exact products */
  free(dref);
  return 0;
}

/*
 * Runs every check of one (case, d, dtype, path). Returns -1 on a CUDA error,
 * else 0 (check results are counted in c).
 */
static int run_case(check_ctx *c, const case_def *cd, int d, attn_dtype dt, attn_cuda_path path, const int tiles[4]) {
  attn_params p = params_of(cd, d, dt);
  /* Forward calls use pf's tiles, backward calls pb's (tiles: fwd q, k, bwd q, k). */
  attn_params pf = p, pb = p;
  if (tiles) {
    pf.tile_q = tiles[0];
    pf.tile_k = tiles[1];
    pb.tile_q = tiles[2];
    pb.tile_k = tiles[3];
  }
  attn_cuda_launch Lf, Lb;
  char msg[160];
  if (attn_cuda_plan(&pf, path, 0, 1, &Lf, msg, sizeof msg) || attn_cuda_plan(&pb, path, 1, 1, &Lb, msg, sizeof msg)) {
    say(c, "  %-20s d=%-3d %s %-6s: not eligible (%s), skipped\n", cd->name, d, dtype_name(dt),
        attn_cuda_path_name(path), msg);
    return 0;
  }
  say(c, "  %-20s d=%-3d %s %-6s (fwd tiles %dx%d, bwd tiles %dx%d)\n", cd->name, d, dtype_name(dt),
      attn_cuda_path_name(Lf.path), Lf.tile_q, Lf.tile_k, Lb.tile_q, Lb.tile_k);
  case_data cs;
  case_make(c, cd, &p, &cs);
  int rc = 0;
  if (case_upload(&cs) || check_fwd(c, &cs, &pf, path) || (p.Nk >= 2 && check_accumulate(c, &cs, &pf, path)) ||
      check_bwd(c, &cs, &pb, path) || check_delta(c, &cs, &pb))
    rc = -1;
  case_free(&cs);
  return rc;
}

/* Decode: Nq <= 8 rows against a long key block, in two halves (accumulate). */
static int run_decode(check_ctx *c, int d, attn_dtype dt, int64_t Nq, int causal, int64_t window) {
  case_def cd = {"decode", 2, 8, 2, Nq, 3001, causal, window, 2990, 1, 0, 1};
  attn_params p = params_of(&cd, d, dt);
  say(c, "  decode Nq=%lld Nk=%lld d=%d %s causal=%d window=%lld\n", (long long)Nq, (long long)p.Nk, d, dtype_name(dt),
      causal, (long long)window);
  const size_t nq = (size_t)p.B * p.Zq * (size_t)p.Nq * d, nk = (size_t)p.B * p.Zkv * (size_t)p.Nk * d;
  const size_t rows = (size_t)p.B * p.Zq * (size_t)p.Nq, es = esize(dt);
  uint64_t rng = c->seed ^ (0xdec0de00ull + (uint64_t)(d + Nq * 7 + causal * 131 + window));
  float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4);
  void *qr = malloc(nq * es), *kr = malloc(nk * es), *vr = malloc(nk * es);
  double *o = malloc(nq * 8), *lse = malloc(rows * 8);
  float *got = malloc(nq * 4), *got_l = malloc(rows * 4);
  make_tensor(&rng, dt, nq, q, qr);
  make_tensor(&rng, dt, nk, k, kr);
  make_tensor(&rng, dt, nk, v, vr);
  ref_fwd(&p, q, k, v, o, lse);
  const int64_t n1 = 1234, n2 = p.Nk - n1;
  attn_params p1 = p, p2 = p;
  p1.Nk = n1;
  p2.Nk = n2;
  p2.mask.k_pos0 = p.mask.k_pos0 + n1;
  void *k1 = slice_keys(kr, &p, 0, n1, es), *v1 = slice_keys(vr, &p, 0, n1, es);
  void *k2 = slice_keys(kr, &p, n1, n2, es), *v2 = slice_keys(vr, &p, n1, n2, es);
  void *dq = NULL, *dk1 = NULL, *dv1 = NULL, *dk2 = NULL, *dv2 = NULL;
  float *dout = NULL, *dl = NULL;
  int rc = 0;
  const size_t b1 = (size_t)p.B * p.Zkv * (size_t)n1 * d * es, b2 = (size_t)p.B * p.Zkv * (size_t)n2 * d * es;
  if (upload(&dq, qr, nq * es) || upload(&dk1, k1, b1) || upload(&dv1, v1, b1) || upload(&dk2, k2, b2) ||
      upload(&dv2, v2, b2) || cudaMalloc((void **)&dout, nq * 4) || cudaMalloc((void **)&dl, rows * 4) ||
      cudaMemset(dout, 0xff, nq * 4) || cudaMemset(dl, 0xff, rows * 4) ||
      attn_cuda_decode(&p1, dq, dk1, dv1, dout, dl, 0, 0, NULL, 0) ||
      attn_cuda_decode(&p2, dq, dk2, dv2, dout, dl, 1, 7, NULL, 0) || download_f(got, dout, nq) ||
      download_f(got_l, dl, rows)) {
    rc = -1;
  } else {
    double rel;
    compare(c, "dec O", got, o, nq, bound_for(dt), &rel);
    note_worst(c, dt, 0, rel);
    compare(c, "dec lse", got_l, lse, rows, bound_for(dt), &rel);
    note_worst(c, dt, 0, rel);
  }
  void *all[] = {dq, dk1, dv1, dk2, dv2, dout, dl};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]) (void)cudaFree(all[i]);
  free(q);
  free(k);
  free(v);
  free(qr);
  free(kr);
  free(vr);
  free(o);
  free(lse);
  free(got);
  free(got_l);
  free(k1);
  free(v1);
  free(k2);
  free(v2);
  return rc;
}

/* Merge of two partial (O, lse), some rows -inf on either side. */
static int run_merge(check_ctx *c) {
  const int64_t rows = 1000;
  const int d = 72;
  uint64_t rng = c->seed ^ 0x6d65726765ull;
  const size_t n = (size_t)rows * d;
  float *o1 = malloc(n * 4), *o2 = malloc(n * 4), *l1 = malloc(rows * 4), *l2 = malloc(rows * 4);
  double *ro = malloc(n * 8), *rl = malloc(rows * 8);
  float *got = malloc(n * 4), *got_l = malloc(rows * 4);
  for (size_t i = 0; i < n; i++) {
    o1[i] = (float)rng_normal(&rng);
    o2[i] = (float)rng_normal(&rng);
  }
  for (int64_t r = 0; r < rows; r++) {
    l1[r] = (float)(3.0 * rng_normal(&rng));
    l2[r] = (float)(3.0 * rng_normal(&rng));
    if (r % 10 == 3) l1[r] = -INFINITY;
    if (r % 10 == 7) l2[r] = -INFINITY;
    if (r % 50 == 11) l1[r] = l2[r] = -INFINITY;
    if (l1[r] == -INFINITY)
      for (int cc = 0; cc < d; cc++) o1[r * d + cc] = 0.0f;
    if (l2[r] == -INFINITY)
      for (int cc = 0; cc < d; cc++) o2[r * d + cc] = 0.0f;
    double a = l1[r], b = l2[r];
    if (b == -INFINITY) {
      rl[r] = a;
      for (int cc = 0; cc < d; cc++) ro[r * d + cc] = o1[r * d + cc];
    } else if (a == -INFINITY) {
      rl[r] = b;
      for (int cc = 0; cc < d; cc++) ro[r * d + cc] = o2[r * d + cc];
    } else {
      double m = a > b ? a : b, wa = exp(a - m), wb = exp(b - m);
      rl[r] = m + log(wa + wb);
      for (int cc = 0; cc < d; cc++) ro[r * d + cc] = (wa * o1[r * d + cc] + wb * o2[r * d + cc]) / (wa + wb);
    }
  }
  float *d1 = NULL, *d2 = NULL, *e1 = NULL, *e2 = NULL;
  int rc = 0;
  say(c, "  merge rows=%lld d=%d\n", (long long)rows, d);
  if (upload((void **)&d1, o1, n * 4) || upload((void **)&d2, o2, n * 4) || upload((void **)&e1, l1, rows * 4) ||
      upload((void **)&e2, l2, rows * 4) || attn_cuda_merge(rows, d, d1, e1, d2, e2, 0) || download_f(got, d1, n) ||
      download_f(got_l, e1, rows)) {
    rc = -1;
  } else {
    compare(c, "merge O", got, ro, n, 1e-5, NULL);
    compare(c, "mergelse", got_l, rl, (size_t)rows, 1e-5, NULL);
  }
  void *all[] = {d1, d2, e1, e2};
  for (size_t i = 0; i < 4; i++)
    if (all[i]) (void)cudaFree(all[i]);
  free(o1);
  free(o2);
  free(l1);
  free(l2);
  free(ro);
  free(rl);
  free(got);
  free(got_l);
  return rc;
}

int run_correctness(check_ctx *c, int quick, int which) {
  const case_def cases[] = {
    /* name                B  Zq Zkv  Nq   Nk  causal win  q0  qs  k0  ks */
    {"full_gqa", 2, 4, 2, 193, 257, 0, 0, 0, 1, 0, 1},
    {"causal_diag", 1, 4, 4, 256, 256, 1, 0, 0, 1, 0, 1},
    {"causal_offset_gqa", 2, 4, 1, 150, 300, 1, 0, 100, 1, 0, 1},
    {"causal_masked_rows", 1, 2, 2, 130, 200, 1, 0, 0, 1, 64, 1},
    {"window_striped", 1, 4, 2, 177, 211, 1, 37, 5, 3, 0, 2},
    {"window_bidir", 2, 2, 2, 160, 160, 0, 50, 0, 1, 30, 1},
    {"tiny", 1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 1},
    {"odd_causal", 1, 3, 1, 17, 33, 1, 0, 20, 1, 0, 1},
  };
  const int ncases = quick ? 4 : (int)(sizeof cases / sizeof cases[0]);
  const int dims[] = {64, 128};
  struct {
    attn_dtype dt;
    attn_cuda_path path;
  } runs[] = {{ATTN_BF16, ATTN_CUDA_MMA},
              {ATTN_CUDA_FP16, ATTN_CUDA_MMA},
              {ATTN_BF16, ATTN_CUDA_SIMPLE},
              {ATTN_FP32, ATTN_CUDA_SIMPLE}};
  const int nruns = quick ? 2 : 4;
  const int do_mma = which != 1, do_simple = which != 2;
  for (int ci = 0; ci < ncases; ci++)
    for (int di = 0; di < 2; di++)
      for (int ri = 0; ri < nruns; ri++) {
        if (runs[ri].path == ATTN_CUDA_MMA ? !do_mma : !do_simple) continue;
        if (run_case(c, &cases[ci], dims[di], runs[ri].dt, runs[ri].path, NULL)) return -1;
      }
  /* Head dimensions the MMA path is not built for: AUTO takes the simple path. */
  if (do_simple && run_case(c, &cases[0], 80, ATTN_BF16, ATTN_CUDA_AUTO, NULL)) return -1;
  if (do_simple && !quick && run_case(c, &cases[4], 96, ATTN_CUDA_FP16, ATTN_CUDA_AUTO, NULL)) return -1;
  if (!do_mma) goto rest;
  /* Every tile variant of the MMA kernels, on masked cases, both d. */
  {
    const int tv[4][4] = {{64, 32, 32, 64}, {64, 64, 64, 64}, {128, 32, 32, 128}, {128, 64, 64, 128}};
    for (int ti = 0; ti < (quick ? 1 : 4); ti++)
      for (int di = 0; di < 2; di++) {
        if (run_case(c, &cases[2], dims[di], ATTN_BF16, ATTN_CUDA_MMA, tv[ti])) return -1;
        if (!quick && run_case(c, &cases[4], dims[di], ATTN_CUDA_FP16, ATTN_CUDA_MMA, tv[ti])) return -1;
      }
  }
rest:
  if (!do_simple) return 0;
  if (run_decode(c, 128, ATTN_BF16, 1, 1, 0)) return -1;
  if (run_decode(c, 64, ATTN_CUDA_FP16, 3, 1, 0)) return -1;
  if (!quick) {
    if (run_decode(c, 128, ATTN_FP32, 8, 0, 0)) return -1;
    if (run_decode(c, 128, ATTN_BF16, 4, 1, 700)) return -1;
  }
  if (run_merge(c)) return -1;
  return 0;
}
