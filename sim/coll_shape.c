/*
 * coll_shape.c — NCCL's double binary tree and the alpha-beta times of tree
 * and ring collectives (coll_shape.h). Pure arithmetic: the engine turns the
 * shapes into SimGrid communications, tests check them directly.
 *
 * Tree 0 over node indices 0..nn-1 is the in-order binary tree "by lowest set
 * bit": index i = b·(2k+1) with b its lowest set bit hangs below whichever of
 * i-b, i+b is an odd multiple of 2b, or below i-b when i+b does not exist;
 * index 0 is the root and has the largest power of two below nn as its only
 * child. Its depth is ceil(log2 nn). Tree 1 is tree 0 with the indices
 * mirrored (nn even) or shifted by one (nn odd), so that the leaves of one
 * tree (the odd indices) are the inner vertices of the other.
 */
#include "sim/coll_shape.h"

#include <stdlib.h>

static int tree0_parent(int nn, int i) {
  if (i <= 0 || i >= nn) return -1;
  int b = i & -i;
  int k = (i / b - 1) / 2; /* i = b·(2k+1) */
  int up = (k & 1) ? i - b : i + b;
  if (up >= nn) up = i - b;
  return up;
}

/* Position of node i in tree 1's index space, and back. */
static int to_pos1(int nn, int i) { return nn % 2 == 0 ? nn - 1 - i : (i + 1) % nn; }
static int from_pos1(int nn, int p) { return nn % 2 == 0 ? nn - 1 - p : (p + nn - 1) % nn; }

int bs_dtree_node_parent(int nn, int t, int i) {
  if (nn < 1 || i < 0 || i >= nn) return -1;
  if (t == 0) return tree0_parent(nn, i);
  int p = tree0_parent(nn, to_pos1(nn, i));
  return p < 0 ? -1 : from_pos1(nn, p);
}

int bs_dtree_node_depth(int nn, int t, int i) {
  int d = 0;
  for (int p = bs_dtree_node_parent(nn, t, i); p >= 0; p = bs_dtree_node_parent(nn, t, p)) d++;
  return d;
}

/* Children of node index i in tree 0 (see the top of the file); returns their count. */
static int tree0_children(int nn, int i, int *out) {
  int k = 0;
  if (i == 0) {
    if (nn > 1) {
      int p = 1;
      while (p * 2 < nn) p *= 2;
      out[k++] = p;
    }
    return k;
  }
  int b = i & -i;
  if (b < 2) return 0;
  out[k++] = i - b / 2;
  for (int c = b / 2; c >= 1; c /= 2)
    if (i + c < nn) {
      out[k++] = i + c;
      break;
    }
  return k;
}

int bs_dtree_node_children(int nn, int t, int i, int *out) {
  if (nn < 1 || i < 0 || i >= nn) return 0;
  if (t == 0) return tree0_children(nn, i, out);
  int k = tree0_children(nn, to_pos1(nn, i), out);
  for (int j = 0; j < k; j++) out[j] = from_pos1(nn, out[j]);
  return k;
}

/* The group's nodes: numbered by first appearance, members of each in member order. */
typedef struct {
  int n, nn;
  int *idx, *local; /* per member: node index, place in its node's chain */
  int *start, *ord; /* members of node j: ord[start[j] .. start[j+1]) */
} layout;

/* (node id, member) sorted by node then member; and node runs (where in that
 * order a node's members begin, its first member) sorted by first member. */
typedef struct {
  int node, m;
} member_key;
typedef struct {
  int begin, first;
} node_run;
static int by_node(const void *a, const void *b) {
  const member_key *x = a, *y = b;
  if (x->node != y->node) return x->node < y->node ? -1 : 1;
  return x->m - y->m;
}
static int by_first(const void *a, const void *b) {
  return ((const node_run *)a)->first - ((const node_run *)b)->first;
}

static void layout_free(layout *L) { free(L->idx); }

static int layout_build(int n, const int *node, layout *L) {
  L->n = n;
  L->idx = malloc(sizeof(int) * (4 * (size_t)n + 1));
  member_key *p = malloc(sizeof *p * (size_t)n);
  node_run *g = malloc(sizeof *g * (size_t)n);
  if (!L->idx || !p || !g) {
    free(L->idx);
    free(p);
    free(g);
    L->idx = NULL;
    return -1;
  }
  L->local = L->idx + n;
  L->ord = L->idx + 2 * n;
  L->start = L->idx + 3 * n;
  for (int m = 0; m < n; m++) p[m] = (member_key){node[m], m};
  qsort(p, (size_t)n, sizeof *p, by_node);
  int ng = 0;
  for (int i = 0; i < n; i++)
    if (i == 0 || p[i].node != p[i - 1].node) g[ng++] = (node_run){i, p[i].m};
  qsort(g, (size_t)ng, sizeof *g, by_first); /* node indices by first appearance */
  int pos = 0;
  for (int j = 0; j < ng; j++) {
    L->start[j] = pos;
    int id = p[g[j].begin].node;
    for (int i = g[j].begin, k = 0; i < n && p[i].node == id; i++, k++) {
      L->ord[pos++] = p[i].m;
      L->idx[p[i].m] = j;
      L->local[p[i].m] = k;
    }
  }
  L->start[ng] = pos;
  L->nn = ng;
  free(p);
  free(g);
  return 0;
}

static int node_size(const layout *L, int j) { return L->start[j + 1] - L->start[j]; }
static int member_at(const layout *L, int j, int pos) { return L->ord[L->start[j] + pos]; }

static void vertex_of(const layout *L, int t, int me, bs_tree_vertex *v) {
  int ni = L->idx[me], li = L->local[me];
  v->nchild = 0;
  v->parent = -1;
  if (li > 0) v->parent = member_at(L, ni, li - 1);
  else {
    int pn = bs_dtree_node_parent(L->nn, t, ni);
    if (pn >= 0) v->parent = member_at(L, pn, 0);
  }
  if (li + 1 < node_size(L, ni)) v->child[v->nchild++] = member_at(L, ni, li + 1);
  if (li == 0) {
    int ch[2], k = bs_dtree_node_children(L->nn, t, ni, ch);
    for (int j = 0; j < k; j++) v->child[v->nchild++] = member_at(L, ch[j], 0);
  }
}

int bs_dtree_vertex(int n, const int *node, int t, int me, bs_tree_vertex *v) {
  if (n < 1 || !node || (t != 0 && t != 1) || me < 0 || me >= n || !v) return -1;
  layout L;
  if (layout_build(n, node, &L)) return -1;
  vertex_of(&L, t, me, v);
  layout_free(&L);
  return 0;
}

/* What member m sends in both trees: in total, and to other nodes. */
static void member_volume(const layout *L, int m, const int64_t half[2], int64_t *sent, int64_t *inter) {
  *sent = *inter = 0;
  for (int t = 0; t < 2; t++) {
    bs_tree_vertex v;
    vertex_of(L, t, m, &v);
    int nb[BS_TREE_MAX_CHILDREN + 1], k = 0;
    if (v.parent >= 0) nb[k++] = v.parent;
    for (int c = 0; c < v.nchild; c++) nb[k++] = v.child[c];
    for (int j = 0; j < k; j++) {
      *sent += half[t];
      if (L->idx[nb[j]] != L->idx[m]) *inter += half[t];
    }
  }
}

int bs_tree_member_bytes(int n, const int *node, int64_t bytes, int64_t *sent, int64_t *inter) {
  if (n < 1 || !node || !sent || !inter) return -1;
  layout L;
  if (layout_build(n, node, &L)) return -1;
  int64_t half[2] = {bytes / 2, bytes - bytes / 2};
  for (int m = 0; m < n; m++) member_volume(&L, m, half, &sent[m], &inter[m]);
  layout_free(&L);
  return 0;
}

int bs_tree_chunks(int64_t half) {
  if (half <= BS_TREE_CHUNK_BYTES) return 1;
  int64_t c = (half + BS_TREE_CHUNK_BYTES - 1) / BS_TREE_CHUNK_BYTES;
  return c > BS_TREE_MAX_CHUNKS ? BS_TREE_MAX_CHUNKS : (int)c;
}

int64_t bs_tree_chunk_size(int64_t half, int chunks, int c) {
  int64_t s = half / chunks + (c < half % chunks);
  return s < 1 ? 1 : s;
}

double bs_ring_time(int steps, int64_t chunk, double lat, double bw) { return steps * (lat + (double)chunk / bw); }

double bs_tree_allreduce_time(int n, const int *node, int64_t bytes, const bs_coll_links *l) {
  if (n < 2) return 0;
  layout L;
  if (layout_build(n, node, &L)) return -1;
  int64_t half[2] = {bytes / 2, bytes - bytes / 2};
  /* Latency: the deepest path of either tree, up and down. */
  double path = 0;
  int hops = 0;
  for (int t = 0; t < 2; t++)
    for (int j = 0; j < L.nn; j++) {
      int dn = bs_dtree_node_depth(L.nn, t, j), dc = node_size(&L, j) - 1;
      double p = dn * l->lat_inter + dc * l->lat_intra;
      if (p > path) path = p;
      if (dn + dc > hops) hops = dn + dc;
    }
  /* Bandwidth: every member sends each tree's half to its parent and to each child;
   * its intra-node and inter-node links work in parallel. */
  double busiest = 0;
  for (int m = 0; m < n; m++) {
    int64_t sent, out;
    member_volume(&L, m, half, &sent, &out);
    double intra = (double)(sent - out), inter = (double)out;
    double tm = intra > 0 ? intra / l->bw_intra : 0;
    if (inter > 0 && inter / l->bw_inter > tm) tm = inter / l->bw_inter;
    if (tm > busiest) busiest = tm;
  }
  double bw_min = L.nn > 1 && l->bw_inter < l->bw_intra ? l->bw_inter : l->bw_intra;
  if (L.nn == n) bw_min = l->bw_inter;
  int64_t chunk = bs_tree_chunk_size(half[1], bs_tree_chunks(half[1]), 0);
  layout_free(&L);
  /* Pipeline fill: the first chunk crosses every hop of the path, up and down. */
  return 2 * path + busiest + 2.0 * hops * (double)chunk / bw_min;
}

/* Where channel ch enters (*e) and leaves (*x) node j, local indices: see coll_shape.h. */
static void chan_ends(int P, int nn, int ch, int j, int *e, int *x) {
  int lo = (ch + P - 1) % P, hi = (ch + 1) % P;
  if (nn % 2 && P >= 3 && j == 0) {
    *e = hi, *x = lo;
  } else if (nn % 2 && P >= 3 && j == nn - 1) {
    *e = ch, *x = hi;
  } else if (j % 2 == 0) {
    *e = ch, *x = lo;
  } else {
    *e = lo, *x = ch;
  }
}

/* The walk through a node: e, then the other indices upwards from e (x left out), then x. */
static int walk_pos(int P, int e, int x, int i) {
  if (i == e) return 0;
  if (i == x) return P - 1;
  int k = (i - e + P) % P, kx = (x - e + P) % P;
  return k > kx ? k - 1 : k;
}
static int walk_at(int P, int e, int x, int t) {
  if (t == 0) return e;
  if (t == P - 1) return x;
  int kx = (x - e + P) % P, k = t >= kx ? t + 1 : t;
  return (e + k) % P;
}

int bs_ring_channel_peer(int P, int nn, int ch, int me, int dir) {
  if (P < 1 || nn < 1 || ch < 0 || ch >= P || me < 0 || me >= P * nn || dir == 0) return -1;
  int j = me / P, i = me % P, e, x;
  chan_ends(P, nn, ch, j, &e, &x);
  if (P == 1) e = x = 0;
  int t = walk_pos(P, e, x, i);
  if (dir > 0) {
    if (t < P - 1) return j * P + walk_at(P, e, x, t + 1);
    int nj = (j + 1) % nn, ne, nx;
    chan_ends(P, nn, ch, nj, &ne, &nx);
    return nj * P + (P == 1 ? 0 : ne);
  }
  if (t > 0) return j * P + walk_at(P, e, x, t - 1);
  int pj = (j + nn - 1) % nn, pe, px;
  chan_ends(P, nn, ch, pj, &pe, &px);
  return pj * P + (P == 1 ? 0 : px);
}

int bs_nbc_allreduce_binomial(int n, int64_t bytes) { return n < 4 || bytes < 65536; }

int bs_binomial_rounds(int n) {
  int r = 0;
  while (r < 30 && (1 << r) < n) r++;
  return r;
}

int bs_binomial_reduce_step(int n, int me, int r, int *peer) {
  if (r < 1 || r > 30 || me < 0 || me >= n) return 0;
  int half = 1 << (r - 1);
  if (me % (2 * half) == 0) {
    if (me + half >= n) return 0;
    *peer = me + half;
    return 1;
  }
  if ((me & -me) != half) return 0; /* me leaves in the round of its lowest set bit */
  *peer = me - half;
  return -1;
}

int bs_binomial_bcast_parent(int me) {
  if (me <= 0) return -1;
  int top = 1;
  while (top <= me / 2) top *= 2;
  return me - top;
}

int bs_binomial_bcast_children(int n, int me, int *out) {
  int k = 0;
  for (int r = 0; r < 31 && (1 << r) < n; r++)
    if (me + (1 << r) < n && (me == 0 || me < (1 << r))) out[k++] = me + (1 << r);
  return k;
}
