/*
 * check_run_vs_sim.c — the runtime and the simulator against each other and
 * against the published volumes, for one scenario point: reads the result JSON of a real
 * run (`mpirun ... burstsim run --out R.json`) and of a simulation of the same
 * point (`burstsim sim --out S.json`) and checks, rank by rank, that
 *   - the bytes each rank sent are equal in both,
 *   - they equal the published volume of the method, written out here from
 *     the point's shapes (independently of plans/),
 *   - the simulated peak memory equals the runtime allocator's peak,
 *   - the run's intra- plus inter-node bytes are its total, which is the simulator's.
 * A composed point (parallel.tp, dp) runs the method over its attention group:
 * the volume is the method's over cp ranks (method tp: tp ranks), for the
 * replica's batch (batch / dp) and the rank's heads (heads / tp).
 * Collective bytes follow the ring convention on both sides (the runtime
 * counts what a ring moves; the simulator must run with coll_algo = ring).
 * At layer and model scope (the result's "scope") the published volumes of
 * attention are only part of what a rank sends (the layer adds tensor- and
 * data-parallel collectives, once per layer and microbatch), so the formula
 * is not checked there: run and simulator must still agree exactly, rank by
 * rank, on bytes and peak. At attention scope the formula stays mandatory.
 *
 * usage: check_run_vs_sim R.json S.json     exit 0 when all agree, 1 otherwise
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char method[32], phase[16], bwd_comm[16], tp_variant[8], dtype[8], coll_algo[8], scope[16], cp_pass[8];
  int64_t G, N, B, Z, Zk, d, hidden, U, tq, es;
  int64_t dv;     /* columns of v, o and dO (multi-head latent attention: fewer than d) */
  int64_t cached; /* prefill: tokens already in the KV cache */
  int64_t ranks;  /* every rank of the point (G: the attention group's) */
  int64_t rep;    /* a context-parallel method under tp over fewer KV heads: each KV head's tp replicas */
} point;

static cJSON *load(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "%s: cannot open\n", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = n > 0 ? malloc((size_t)n + 1) : NULL;
  size_t got = text ? fread(text, 1, (size_t)n, f) : 0;
  fclose(f);
  if (!text || got != (size_t)n) {
    fprintf(stderr, "%s: cannot read\n", path);
    free(text);
    return NULL;
  }
  text[n] = '\0';
  cJSON *root = cJSON_Parse(text);
  free(text);
  if (!root) fprintf(stderr, "%s: not JSON\n", path);
  return root;
}

/* The first result of a result file, checked for the expected mode. */
static cJSON *first_result(cJSON *root, const char *path, const char *mode) {
  cJSON *m = cJSON_GetObjectItem(root, "mode"), *res = cJSON_GetObjectItem(root, "results");
  if (!cJSON_IsString(m) || strcmp(m->valuestring, mode) || cJSON_GetArraySize(res) < 1) {
    fprintf(stderr, "%s: not a result file of mode %s with one result\n", path, mode);
    return NULL;
  }
  cJSON *r = cJSON_GetArrayItem(res, 0);
  cJSON *e = cJSON_GetObjectItem(r, "error");
  if (cJSON_IsString(e) && e->valuestring[0]) {
    fprintf(stderr, "%s: the point failed: %s\n", path, e->valuestring);
    return NULL;
  }
  return r;
}

static int get_str(cJSON *o, const char *key, char *dst, size_t cap) {
  cJSON *v = cJSON_GetObjectItem(o, key);
  if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap) return -1;
  strcpy(dst, v->valuestring);
  return 0;
}
static int get_int(cJSON *o, const char *key, int64_t *dst) {
  cJSON *v = cJSON_GetObjectItem(o, key);
  if (!cJSON_IsNumber(v)) return -1;
  *dst = (int64_t)v->valuedouble;
  return 0;
}

static int read_point(cJSON *r, point *p) {
  memset(p, 0, sizeof *p);
  cJSON *m = cJSON_GetObjectItem(r, "model");
  if (get_str(r, "method", p->method, sizeof p->method) || get_str(r, "phase", p->phase, sizeof p->phase) ||
      get_str(r, "bwd_comm", p->bwd_comm, sizeof p->bwd_comm) ||
      get_str(r, "tp_variant", p->tp_variant, sizeof p->tp_variant) ||
      get_str(r, "coll_algo", p->coll_algo, sizeof p->coll_algo) || get_int(r, "gpus", &p->G) ||
      get_int(r, "seq_len", &p->N) || get_int(r, "batch", &p->B) || get_int(r, "ulysses_degree", &p->U) || !m ||
      get_int(m, "heads", &p->Z) || get_int(m, "kv_heads", &p->Zk) || get_int(m, "head_dim", &p->d) ||
      get_int(m, "hidden", &p->hidden) || get_str(m, "dtype", p->dtype, sizeof p->dtype) ||
      get_str(r, "scope", p->scope, sizeof p->scope))
    return -1;
  if (!strcmp(p->phase, "decode") && get_int(r, "decode_tokens", &p->tq)) return -1;
  if (get_str(r, "cp_pass", p->cp_pass, sizeof p->cp_pass)) strcpy(p->cp_pass, "kv");
  if (get_int(r, "cached_tokens", &p->cached)) p->cached = 0;
  if (get_int(m, "v_head_dim", &p->dv) || p->dv <= 0) p->dv = p->d; /* MLA: v, o, dO of their own width */
  p->es = strcmp(p->dtype, "fp32") ? 2 : 4;
  p->ranks = p->G;
  cJSON *par = cJSON_GetObjectItem(r, "parallel");
  int64_t tp = 1, cp = p->G, dp = 1;
  if (par && (get_int(par, "tp", &tp) || get_int(par, "cp", &cp) || get_int(par, "dp", &dp))) return -1;
  if (tp < 1 || cp < 1 || dp < 1 || p->B % dp) return -1;
  p->B /= dp; /* the replica's sequences */
  if (strcmp(p->method, "tp")) {
    if (p->Z % tp || (p->Zk >= tp ? p->Zk % tp : tp % p->Zk)) return -1;
    p->Z /= tp; /* the rank's heads */
    p->rep = p->Zk < tp ? tp / p->Zk : 1;
    p->Zk = p->Zk >= tp ? p->Zk / tp : 1; /* more tp ranks than KV heads: one, replicated */
    p->G = cp;
  } else {
    p->G = tp;
  }
  return p->G >= 1 && p->N % p->G == 0 ? 0 : -1;
}

/* BurstAttention (arXiv 2403.09347), forward: "K,V ring: 2·B·Z·(N/G)·d elements per step, G−1 steps"
 * (Z the key/value heads); RingAttention forward the same. With MLA's head dimensions (DeepSeek-V2,
 * arXiv 2405.04434) K has d columns and V dv: B·Z·(N/G)·(d + dv) per step. */
static int64_t kv_ring(const point *p, int64_t G, int64_t n) {
  return (G - 1) * p->B * p->Zk * n * (p->d + p->dv) * p->es;
}

/* Bytes a rank sends for the point per the published volumes; -1 when this checker has no formula. */
static int64_t anchors_bytes(const point *p) {
  int64_t G = p->G, n = p->N / G, B = p->B, Z = p->Z, Zk = p->Zk, d = p->d, dv = p->dv, es = p->es;
  int train = !strcmp(p->phase, "train"), decode = !strcmp(p->phase, "decode");
  if (G == 1) return 0;
  if (!strcmp(p->cp_pass, "q") && (!strcmp(p->method, "burst") || !strcmp(p->method, "ring")) && !train) {
    /* Pass-Q (Meta's context-parallel inference, arXiv 2411.01783 §3.3): "the query embeddings are passed
     * around the ring" — each rank's T/G new query tokens (all query heads) move G−1 times — then "an All2All
     * exchanges the partial attention outputs and softmax statistics": the G−1 partial O (fp32 here) and lse
     * blocks that belong to the other ranks. T: the tokens that are not in the KV cache (decode: its queries). */
    int64_t T = decode ? p->tq : p->N - p->cached, nq = T / G;
    return (G - 1) * (B * Z * nq * d * es + B * Z * nq * dv * 4 + B * Z * nq * 4);
  }
  if (!strcmp(p->method, "burst") && !decode) {
    /* Backward: "Q, dQ, dO ring plus D and lse (fp32, B·Z·N/G each) per step; ... dQ returns to its owner":
     * Q, dO, D (or O in fp32, plain backward: "rings O instead of D"), lse move G−1 times, dQ (fp32) G times. */
    int64_t q = B * Z * n * d * es, rows = B * Z * n * 4, o = B * Z * n * dv * 4, dq = B * Z * n * d * 4;
    int64_t dout = B * Z * n * dv * es; /* dO and O have v's columns */
    int plain = !strcmp(p->bwd_comm, "plain");
    return kv_ring(p, G, n) + (train ? (G - 1) * (q + dout + (plain ? o : rows) + rows) + G * dq : 0);
  }
  if (!strcmp(p->method, "ring")) {
    /* Decode: "the KV shards travel the ring: 2·B·(N/p)·d per step", one transfer fewer than steps. */
    if (decode) return kv_ring(p, G, n);
    /* Backward: "K,V ring again plus dK,dV ring (ring-flash-attention sends dK,dV in fp32)";
     * dK, dV return to their owner (G hops). */
    int64_t kv = B * Zk * n * (d + dv) * es, dkv = B * Zk * n * (d + dv) * 4; /* K and V, dK and dV */
    return kv_ring(p, G, n) + (train ? (G - 1) * kv + G * dkv : 0);
  }
  if (!strcmp(p->method, "ulysses") || !strcmp(p->method, "usp")) {
    /* DeepSpeed-Ulysses: "all-to-all Q,K,V (scatter heads, gather sequence), local attention, all-to-all O",
     * backward its mirror (dO in; dQ, dK, dV out); an all-to-all of U ranks keeps 1/U of its buffer.
     * O and the gradients travel in fp32. USP: the same within groups of U, a K,V ring across G/U.
     * Fewer KV heads than U: each is repeated U/Zk times before the all-to-all (verl's Ulysses, repeat_kv by
     * sp_size // kv_heads), so K, V, dK, dV move as U heads, and the ring passes one head. */
    int64_t U = !strcmp(p->method, "usp") ? p->U : G, Zs = Zk < U ? U : Zk;
    int64_t fwd = B * Z * n * d * es + 2 * B * Zs * n * d * es + B * Z * n * d * 4;
    int64_t bwd = B * Z * n * d * es + B * Z * n * d * 4 + 2 * B * Zs * n * d * 4;
    int64_t a2a = (U - 1) * ((fwd + (train ? bwd : 0)) / U);
    int64_t R = G / U, kv = B * Zs * n * d; /* one ring block: Zs/U heads of U·n tokens */
    int64_t ring = R > 1 ? (R - 1) * 2 * kv * es + (train ? (R - 1) * 2 * kv * es + R * 2 * kv * 4 : 0) : 0;
    return a2a + ring;
  }
  if (!strcmp(p->method, "tp")) {
    /* Megatron TP V1: an all-reduce of B·N·H per attention block and pass, moving 2(G−1)/G of it;
     * V3: "all-gather + reduce-scatter instead of all-reduce". */
    int64_t full = B * p->N * p->hidden * es, passes = train ? 2 : 1;
    /* V1 one all-reduce; V3 an all-gather of full/G per rank plus a reduce-scatter of full: the same volume. */
    int64_t one = 2 * (G - 1) * (full / G);
    /* more ranks than KV heads: each KV head on rep = G / Zk ranks, whose partial dK, dV (B·N·d fp32
     * each, the rank's one head) are all-reduced over them in the backward: 2(rep−1)/rep of each. */
    int64_t rep = p->Zk < G ? G / p->Zk : 1, dkv = B * p->N * d * 4;
    return passes * one + (train && rep > 1 ? 2 * (2 * (rep - 1) * (dkv / rep)) : 0);
  }
  if (!strcmp(p->method, "allgather")) {
    /* Llama 3 (arXiv 2407.21783 §3.3.2): "all-gather the K and V tensors" of the CP group, then local
     * attention; Transformer Engine's KV all-gather gathers them again in the backward and
     * reduce-scatters dK, dV (fp32 here, as ring's): an all-gather of G blocks moves G−1 of them, a
     * reduce-scatter (G−1)/G of its buffer. */
    int64_t kv = B * Zk * n * (d + dv) * es, dkv = B * Zk * n * (d + dv) * 4;
    return (G - 1) * kv + (train ? (G - 1) * kv + (G - 1) * dkv : 0);
  }
  if (!strcmp(p->method, "tree") && decode) {
    /* Tree Attention: Allreduce(max lse), Allreduce(sum numerators), Allreduce(sum denominators):
     * 2(p−1)/p·(B·d + 2·B·n_h) elements per query token (d the model width), fp32. */
    int64_t rows = B * Z * p->tq;
    return 2 * (G - 1) * ((rows * 4) / G + (rows * d * 4) / G + (rows * 4) / G);
  }
  return -1;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: check_run_vs_sim RUN.json SIM.json\n");
    return 2;
  }
  cJSON *rroot = load(argv[1]), *sroot = load(argv[2]);
  int fails = 0;
  cJSON *run = rroot ? first_result(rroot, argv[1], "run") : NULL;
  cJSON *sim = sroot ? first_result(sroot, argv[2], "sim") : NULL;
  point p;
  if (!run || !sim || read_point(run, &p)) {
    if (run && sim) fprintf(stderr, "%s: the point's configuration is incomplete\n", argv[1]);
    cJSON_Delete(rroot);
    cJSON_Delete(sroot);
    return 1;
  }
  point ps;
  if (read_point(sim, &ps) || strcmp(ps.method, p.method) || ps.G != p.G || ps.N != p.N || ps.B != p.B ||
      strcmp(ps.scope, p.scope)) {
    fprintf(stderr, "%s and %s are not the same point\n", argv[1], argv[2]);
    fails++;
  }
  if (strcmp(ps.coll_algo, "ring")) {
    fprintf(stderr, "%s: coll_algo %s; the runtime counts collective bytes as a ring\n", argv[2], ps.coll_algo);
    fails++;
  }
  /* the published volumes are attention's: checked at attention scope, where they are the whole */
  int attention = !strcmp(p.scope, "attention");
  int64_t want = attention ? anchors_bytes(&p) : -1;
  /* tp over fewer KV heads, a context-parallel method, training: the rep tp replicas of the rank's KV
   * head all-reduce their partial dK, dV (B·(N/G)·d and B·(N/G)·dv fp32) after the backward, a ring
   * moving 2(rep−1)/rep of each */
  if (want >= 0 && p.rep > 1 && !strcmp(p.phase, "train")) {
    int64_t n = p.N / p.G, dk = p.B * n * p.d * 4, dv = p.B * n * p.dv * 4;
    want += 2 * (p.rep - 1) * (dk / p.rep) + 2 * (p.rep - 1) * (dv / p.rep);
  }
  if (attention && want < 0) {
    fprintf(stderr, "no published formula for %s %s here\n", p.method, p.phase);
    fails++;
  }
  /* every byte a run counts is inside a node or across nodes, collectives included (the ring sends
   * to the next rank of the group), and the totals agree with the simulator's */
  int64_t rt[4] = {-1, -1, -1, -1}, st = -2;
  cJSON *rc = cJSON_GetObjectItem(run, "comm_bytes"), *sc = cJSON_GetObjectItem(sim, "comm_bytes");
  if (!rc || !sc || get_int(rc, "total", &rt[0]) || get_int(rc, "intra_node", &rt[1]) ||
      get_int(rc, "inter_node", &rt[2]) || get_int(sc, "total", &st) || rt[1] + rt[2] != rt[0] || rt[0] != st) {
    fprintf(stderr, "comm_bytes: run total %lld (intra %lld + inter %lld), sim total %lld\n", (long long)rt[0],
            (long long)rt[1], (long long)rt[2], (long long)st);
    fails++;
  }
  cJSON *rr = cJSON_GetObjectItem(run, "ranks"), *sr = cJSON_GetObjectItem(sim, "ranks");
  if (cJSON_GetArraySize(rr) != p.ranks || cJSON_GetArraySize(sr) != p.ranks) {
    fprintf(stderr, "ranks: run has %d, sim has %d, the point %lld\n", cJSON_GetArraySize(rr), cJSON_GetArraySize(sr),
            (long long)p.ranks);
    fails++;
  } else {
    for (int i = 0; i < p.ranks; i++) {
      int64_t rb, sb, rp, sp, rk, sk;
      cJSON *a = cJSON_GetArrayItem(rr, i), *b = cJSON_GetArrayItem(sr, i);
      if (get_int(a, "rank", &rk) || get_int(b, "rank", &sk) || get_int(a, "bytes_sent", &rb) ||
          get_int(b, "bytes_sent", &sb) || get_int(a, "peak_bytes", &rp) || get_int(b, "peak_bytes", &sp) || rk != i ||
          sk != i) {
        fprintf(stderr, "ranks[%d]: rank, bytes_sent or peak_bytes missing\n", i);
        fails++;
        continue;
      }
      int ok = rb == sb && (!attention || sb == want) && rp == sp && rp > 0;
      char f[40];
      if (attention) snprintf(f, sizeof f, "%lld", (long long)want);
      else snprintf(f, sizeof f, "(none at %s scope)", p.scope);
      printf("%s %s %s G=%lld rank %d: sent run %lld sim %lld formula %s; peak run %lld sim %lld  %s\n", p.method,
             p.phase, p.scope, (long long)p.G, i, (long long)rb, (long long)sb, f, (long long)rp, (long long)sp,
             ok ? "ok" : "MISMATCH");
      fails += !ok;
    }
  }
  cJSON_Delete(rroot);
  cJSON_Delete(sroot);
  return fails ? 1 : 0;
}
