/*
 * topo.c — the platform generators of topo.h. Each writes one SimGrid zone
 * with Dijkstra routing (cached) whose graph is the physical wiring: GPUs,
 * switches as routers, one link per cable and direction class. Users can read
 * the XML, edit it and hand it back as `topology = FILE.xml`. The table of
 * generators (names, default profiles, wiring) is the one list of their names.
 */
#include "topo.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/vec.h"

static const char *class_names[BS_LINK_CLASS_COUNT] = {"nvlink",     "nic", "fabric", "pcie",
                                                       "hostbridge", "shm", "socket"};

const char *bs_link_class_name(bs_link_class c) { return (c >= 0 && c < BS_LINK_CLASS_COUNT) ? class_names[c] : "?"; }

int bs_link_class_of(const char *link_name) {
  for (int c = 0; c < BS_LINK_CLASS_COUNT; c++) {
    size_t n = strlen(class_names[c]);
    if (!strncmp(link_name, class_names[c], n) && link_name[n] == '-') return c;
  }
  return -1;
}

/*
 * The generators, one row each: name, the profile `topo` prints with and `sim`
 * simulates with when none is named, the wiring, the placeholder speeds a
 * printed file carries (bytes/s per direction: NVLink, NIC, fabric port), the
 * GPUs of one node (nvl72: of one rack, its NVLink domain) and, for the rail
 * fabrics, the nodes under one leaf switch of a rail.
 * X-macro so that the name list of messages is built from the same rows.
 */
typedef enum { GEN_DGX, GEN_PCIE, GEN_HOST } gen_kind;
#define GENERATORS(X, SEP)                                                     \
  X("dgx-a100", "a100-sxm4-80gb", GEN_DGX, 230e9, 24e9, 24e9, 8, 16)           \
  SEP X("a100-pcie-node", "a100-pcie-40gb", GEN_PCIE, 230e9, 75e9, 24e9, 8, 0) \
    SEP X("dgx-h100", "h100-sxm", GEN_DGX, 370e9, 48e9, 48e9, 8, 16)           \
      SEP X("dgx-b200", "b200", GEN_DGX, 721.8e9, 48e9, 48e9, 8, 16)           \
        SEP X("nvl72", "gb200", GEN_DGX, 721.8e9, 48e9, 48e9, 72, 8)           \
          SEP X("host", "host", GEN_HOST, 230e9, 24e9, 24e9, 2, 0)

typedef struct {
  const char *name, *profile;
  gen_kind kind;
  double nvlink_bw, nic_bw, fabric_bw;
  int gpus_per_node, nodes_per_leaf;
} generator;

#define GEN_ROW(name, profile, kind, nvlink, nic, fabric, gpn, npl) \
  { name, profile, kind, nvlink, nic, fabric, gpn, npl }
#define GEN_NAME(name, profile, kind, nvlink, nic, fabric, gpn, npl) name
#define GEN_COMMA ,
#define GEN_LIST_SEP ", "
static const generator generators[] = {GENERATORS(GEN_ROW, GEN_COMMA)};
#define NGEN (sizeof generators / sizeof generators[0])

static const generator *find_gen(const char *name) {
  for (size_t i = 0; i < NGEN; i++)
    if (!strcmp(name, generators[i].name)) return &generators[i];
  return NULL;
}

int bs_topo_is_generator(const char *name) { return find_gen(name) != NULL; }

int bs_topo_has_rails(const char *name) {
  const generator *g = name ? find_gen(name) : NULL;
  return g && g->kind == GEN_DGX;
}

const char *bs_topo_generator_names(void) { return GENERATORS(GEN_NAME, GEN_LIST_SEP); }

const char *bs_topo_default_profile(const char *name) {
  const generator *g = find_gen(name);
  return g ? g->profile : NULL;
}

static void set_link(bs_topo_params *p, bs_link_class c, double bw, double lat) {
  p->link[c].bw_Bps = bw;
  p->link[c].lat_s = lat;
}

int bs_topo_defaults(const char *name, int nodes, bs_topo_params *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  const generator *g = find_gen(name);
  if (!g) {
    snprintf(err, errlen, "unknown topology '%s' (known: %s, or a FILE.xml)", name, bs_topo_generator_names());
    return -1;
  }
  snprintf(p->name, sizeof p->name, "%s", name);
  p->nodes = nodes > 0 ? nodes : 1;
  p->gpus_per_node = g->gpus_per_node;
  p->oversub = 1.0;
  /* Placeholders only (a profile sets the real values when the engine loads
   * the platform); they keep a printed file valid on its own. They are the
   * default profile's figures: see calib/profiles/a100-sxm4-80gb.json, and
   * h100-sxm.json for dgx-h100's NVLink, NIC and fabric, b200.json and gb200.json for dgx-b200's
   * and nvl72's. */
  set_link(p, BS_LINK_NVLINK, g->nvlink_bw, 1.7e-6);
  set_link(p, BS_LINK_NIC, g->nic_bw, 7e-6);
  set_link(p, BS_LINK_FABRIC, g->fabric_bw, 0);
  set_link(p, BS_LINK_PCIE, 24e9, 1.7e-6);
  set_link(p, BS_LINK_HOSTBRIDGE, 24e9, 0);
  set_link(p, BS_LINK_SHM, 8e9, 1e-6);
  set_link(p, BS_LINK_SOCKET, 10e9, 0); /* calib/profiles/a100-pcie-40gb.json */
  if (g->kind == GEN_DGX) {
    /* dgx: a leaf switch of 16 nodes per rail, a design choice of this generator (a parameter),
     * not a published figure: 128 nodes = 8 leaves per rail. nvl72: 8 racks (576 GPUs) per leaf
     * of a rail, the scalable unit of NVIDIA's DGX SuperPOD with GB200 reference architecture,
     * likewise a parameter. */
    p->nodes_per_leaf = g->nodes_per_leaf;
  } else if (g->kind == GEN_PCIE) {
    p->gpus_per_pcie_switch = 4;
    p->sockets_per_node = 2;
  } else {
    p->nodes = 1;
    p->host_cores = 2;
    p->host_speed = 1e9;
  }
  return 0;
}

int bs_topo_check(const bs_topo_params *p, char *err, size_t errlen) {
  const generator *g = find_gen(p->name);
  if (!g) {
    snprintf(err, errlen, "unknown topology '%s'", p->name);
    return -1;
  }
  if (p->nodes < 1 || p->gpus_per_node < 1) {
    snprintf(err, errlen, "topology %s: nodes (%d) and GPUs per node (%d) must be >= 1", p->name, p->nodes,
             p->gpus_per_node);
    return -1;
  }
  if ((long)p->nodes * p->gpus_per_node > 1 << 20) {
    snprintf(err, errlen, "topology %s: %d x %d ranks is more than this generator supports", p->name, p->nodes,
             p->gpus_per_node);
    return -1;
  }
  if (g->kind == GEN_DGX && (p->nodes_per_leaf < 1 || !(p->oversub >= 1.0) || !isfinite(p->oversub))) {
    snprintf(err, errlen,
             "topology %s: nodes_per_leaf (%d) must be >= 1 and oversubscription "
             "(%g) >= 1",
             p->name, p->nodes_per_leaf, p->oversub);
    return -1;
  }
  if (p->nics_per_node && (g->kind != GEN_DGX || p->nics_per_node < 1 || p->nics_per_node > p->gpus_per_node ||
                           p->gpus_per_node % p->nics_per_node)) {
    snprintf(err, errlen, "topology %s: %d NICs per node must divide its %d GPUs (dgx generators only)", p->name,
             p->nics_per_node, p->gpus_per_node);
    return -1;
  }
  if (g->kind == GEN_PCIE && (p->gpus_per_pcie_switch < 1 || p->gpus_per_node % p->gpus_per_pcie_switch)) {
    snprintf(err, errlen, "topology %s: %d GPUs per PCIe switch must divide %d GPUs", p->name, p->gpus_per_pcie_switch,
             p->gpus_per_node);
    return -1;
  }
  if (g->kind == GEN_PCIE &&
      (p->sockets_per_node < 1 || (p->gpus_per_node / p->gpus_per_pcie_switch) % p->sockets_per_node)) {
    snprintf(err, errlen, "topology %s: %d CPU sockets must divide its %d PCIe switches", p->name, p->sockets_per_node,
             p->gpus_per_node / p->gpus_per_pcie_switch);
    return -1;
  }
  if (g->kind == GEN_HOST && (p->nodes != 1 || !(p->host_speed > 0) || !isfinite(p->host_speed))) {
    snprintf(err, errlen, "topology %s: exactly one node and a positive CPU speed", p->name);
    return -1;
  }
  for (int c = 0; c < BS_LINK_CLASS_COUNT; c++)
    if (!(p->link[c].bw_Bps > 0) || !(p->link[c].lat_s >= 0) || !isfinite(p->link[c].bw_Bps) ||
        !isfinite(p->link[c].lat_s)) {
      snprintf(err, errlen, "topology %s: link class %s needs a finite bandwidth > 0 and latency >= 0", p->name,
               class_names[c]);
      return -1;
    }
  return 0;
}

/* A growing string. */
typedef struct {
  char *s;
  size_t len, cap;
  int failed;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->cap - b->len;
    int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = 1;
      return;
    }
    if (b->s && (size_t)n < room) {
      b->len += (size_t)n;
      return;
    }
    char *s = bs_vec_grow(b->s, 1, b->len + (size_t)n + 1, &b->cap, 1 << 16);
    if (!s) {
      b->failed = 1;
      return;
    }
    b->s = s;
  }
}

static void sb_link(sbuf *b, const char *id, const bs_link_val *v) {
  /* %.15g keeps the value through the XML round trip; adding 0.0 turns a latency of -0 (which
   * passes every >= 0 check) into 0, so no value is written with a minus sign. */
  sb_printf(b, "    <link id=\"%s\" bandwidth=\"%.15gBps\" latency=\"%.15gs\" sharing_policy=\"SPLITDUPLEX\"/>\n", id,
            v->bw_Bps + 0.0, v->lat_s + 0.0);
}

/* A graph edge: a route between two netpoints through one split-duplex link. */
static void sb_edge(sbuf *b, const char *src, const char *dst, const char *link) {
  sb_printf(b, "    <route src=\"%s\" dst=\"%s\" symmetrical=\"YES\"><link_ctn id=\"%s\" direction=\"UP\"/></route>\n",
            src, dst, link);
}

double bs_topo_uplink_bw(const bs_topo_params *p, int leaf) {
  int K = p->nodes, L = p->nodes_per_leaf, leaves = K / L + (K % L != 0); /* no K + L overflow */
  int ports = leaf == leaves - 1 ? K - leaf * L : L;
  return p->link[BS_LINK_FABRIC].bw_Bps * ports / p->oversub;
}

int bs_topo_nics(const bs_topo_params *p) { return p->nics_per_node > 0 ? p->nics_per_node : p->gpus_per_node; }

int bs_topo_nic_of(const bs_topo_params *p, int i) {
  int g = p->gpus_per_node;
  return g > 0 ? (int)((long)i * bs_topo_nics(p) / g) : i;
}

int bs_topo_nic_of_node(const bs_topo_params *p, int n, int i) {
  int j = bs_topo_nic_of(p, i), live = bs_topo_nics(p) - p->failed_nics;
  if (p->failed_nics > 0 && (n == p->failed_node || p->failed_node < 0) && live > 0 && j >= live) j %= live;
  return j;
}

/* A link's value on node n (a NIC link: NIC j of it, else -1): degraded when the what-if names its
 * class and node, and its NIC when it names one. */
static bs_link_val node_link(const bs_topo_params *p, bs_link_class c, int n, int j) {
  bs_link_val v = p->link[c];
  if (p->degrade_factor > 0 && (int)c == p->degrade_class && n == p->degrade_node &&
      (!p->degrade_one_nic || j == p->degrade_nic))
    v.bw_Bps *= p->degrade_factor;
  return v;
}

/* The link of node n's NIC j: named after its GPU when each GPU has its own. */
static void nic_link_name(const bs_topo_params *p, int n, int j, char *l, size_t len) {
  if (bs_topo_nics(p) == p->gpus_per_node) snprintf(l, len, "nic-n%d-g%d", n, j);
  else snprintf(l, len, "nic-n%d-nic%d", n, j);
}

/*
 * GPUs that share a NIC are two hops apart through it (GPU - leaf - GPU), as
 * they are through the NVSwitch, and SimGrid's Dijkstra counts links: a route
 * of their own pins every such pair, both ways, to NVLink.
 */
static void gen_dgx_shared_nic_routes(sbuf *b, const bs_topo_params *p) {
  int K = p->nodes, g = p->gpus_per_node;
  for (int n = 0; n < K; n++)
    for (int x = 0; x < g; x++)
      for (int y = 0; y < g; y++) {
        if (x == y || bs_topo_nic_of_node(p, n, x) != bs_topo_nic_of_node(p, n, y)) continue;
        sb_printf(b,
                  "    <bypassRoute src=\"gpu%d\" dst=\"gpu%d\"><link_ctn id=\"nvlink-n%d-g%d\" direction=\"UP\"/>"
                  "<link_ctn id=\"nvlink-n%d-g%d\" direction=\"DOWN\"/></bypassRoute>\n",
                  n * g + x, n * g + y, n, x, n, y);
      }
}

static void gen_dgx(sbuf *b, const bs_topo_params *p) {
  int K = p->nodes, g = p->gpus_per_node, L = p->nodes_per_leaf, nics = bs_topo_nics(p);
  int leaves = K / L + (K % L != 0);
  char a[64], c[64], l[64];
  for (int n = 0; n < K; n++) {
    snprintf(a, sizeof a, "nvsw-n%d", n);
    sb_printf(b, "    <router id=\"%s\"/>\n", a);
    for (int i = 0; i < g; i++) {
      int r = n * g + i;
      sb_printf(b, "    <host id=\"gpu%d\" speed=\"1Gf\"><prop id=\"node\" value=\"%d\"/></host>\n", r, n);
    }
  }
  for (int j = 0; j < nics; j++)
    for (int q = 0; q < leaves; q++) sb_printf(b, "    <router id=\"leaf-r%d-l%d\"/>\n", j, q);
  sb_printf(b, "    <router id=\"core\"/>\n");
  for (int n = 0; n < K; n++)
    for (int i = 0; i < g; i++) {
      bs_link_val nv = node_link(p, BS_LINK_NVLINK, n, -1), nc = node_link(p, BS_LINK_NIC, n, i);
      snprintf(l, sizeof l, "nvlink-n%d-g%d", n, i);
      sb_link(b, l, &nv);
      if (nics == g) {
        nic_link_name(p, n, i, l, sizeof l);
        sb_link(b, l, &nc);
      }
    }
  for (int n = 0; nics != g && n < K; n++)
    for (int j = 0; j < nics; j++) {
      bs_link_val nc = node_link(p, BS_LINK_NIC, n, j);
      nic_link_name(p, n, j, l, sizeof l);
      sb_link(b, l, &nc);
    }
  for (int j = 0; j < nics; j++)
    for (int q = 0; q < leaves; q++) {
      /* One leaf's uplinks to the spine, aggregated into one link: ports x
       * port bandwidth / oversubscription (max-min sharing over parallel
       * links balanced perfectly, as ECMP aims to). */
      bs_link_val up = p->link[BS_LINK_FABRIC];
      up.bw_Bps = bs_topo_uplink_bw(p, q);
      if (p->degrade_factor > 0 && p->degrade_class == BS_LINK_FABRIC && p->degrade_node / L == q)
        up.bw_Bps *= p->degrade_factor;
      snprintf(l, sizeof l, "fabric-r%d-l%d", j, q);
      sb_link(b, l, &up);
    }
  for (int n = 0; n < K; n++) {
    snprintf(a, sizeof a, "nvsw-n%d", n);
    for (int i = 0; i < g; i++) {
      int r = n * g + i, j = bs_topo_nic_of_node(p, n, i);
      snprintf(c, sizeof c, "gpu%d", r);
      snprintf(l, sizeof l, "nvlink-n%d-g%d", n, i);
      sb_edge(b, c, a, l);
      char leaf[64];
      snprintf(leaf, sizeof leaf, "leaf-r%d-l%d", j, n / L);
      nic_link_name(p, n, j, l, sizeof l);
      sb_edge(b, c, leaf, l);
    }
  }
  for (int j = 0; j < nics; j++)
    for (int q = 0; q < leaves; q++) {
      snprintf(a, sizeof a, "leaf-r%d-l%d", j, q);
      snprintf(l, sizeof l, "fabric-r%d-l%d", j, q);
      sb_edge(b, a, "core", l);
    }
  if (nics != g || p->failed_nics > 0) gen_dgx_shared_nic_routes(b, p);
  /* Fold quotient: wrapping same-rail messages go up and down the rail's uplink. */
  char ln[64], lm[64];
  for (int D = p->wrap_offset, n = 0; D > 0 && n < K; n++)
    for (int dl = -D; dl <= D; dl++) {
      int m = n + dl;
      if (dl == 0 || (m >= 0 && m < K)) continue;
      m = ((m % K) + K) % K;
      for (int i = 0; i < g; i++) {
        int j = bs_topo_nic_of(p, i);
        nic_link_name(p, n, j, ln, sizeof ln);
        nic_link_name(p, m, j, lm, sizeof lm);
        sb_printf(b,
                  "    <bypassRoute src=\"gpu%d\" dst=\"gpu%d\"><link_ctn id=\"%s\" direction=\"UP\"/>"
                  "<link_ctn id=\"fabric-r%d-l0\" direction=\"UP\"/><link_ctn id=\"fabric-r%d-l0\" direction=\"DOWN\"/>"
                  "<link_ctn id=\"%s\" direction=\"DOWN\"/></bypassRoute>\n",
                  n * g + i, m * g + i, ln, j, j, lm);
      }
    }
}

/*
 * A PCIe server as built: sockets_per_node CPU sockets, each the root complex of its share of
 * the PCIe switches (switch w on socket w * S / W) and of the node's NICs (one NIC link per
 * socket); the sockets joined pairwise by one inter-socket link (UPI / xGMI). GPUs under one
 * switch meet at the switch (pcie, pcie), under two switches of a socket at its root (pcie,
 * hostbridge, hostbridge, pcie), on two sockets through the inter-socket link as well: NCCL
 * does not use peer-to-peer across sockets and stages the data in host memory, and the socket
 * link's figure is the rate that path reaches. Dijkstra counts hops: the socket link (one hop)
 * is shorter than the way out through one NIC and back through the other (two).
 */
static void gen_pcie(sbuf *b, const bs_topo_params *p) {
  int K = p->nodes, g = p->gpus_per_node, s = p->gpus_per_pcie_switch, S = p->sockets_per_node, W = g / s;
  char a[64], c[64], l[64];
  sb_printf(b, "    <router id=\"switch\"/>\n");
  for (int n = 0; n < K; n++) {
    for (int k = 0; k < S; k++) sb_printf(b, "    <router id=\"root-n%d-c%d\"/>\n", n, k);
    for (int w = 0; w < W; w++) sb_printf(b, "    <router id=\"pciesw-n%d-s%d\"/>\n", n, w);
    for (int i = 0; i < g; i++)
      sb_printf(b, "    <host id=\"gpu%d\" speed=\"1Gf\"><prop id=\"node\" value=\"%d\"/></host>\n", n * g + i, n);
  }
  for (int n = 0; n < K; n++) {
    bs_link_val pc = node_link(p, BS_LINK_PCIE, n, -1), hb = node_link(p, BS_LINK_HOSTBRIDGE, n, -1),
                nc = node_link(p, BS_LINK_NIC, n, -1), so = node_link(p, BS_LINK_SOCKET, n, -1);
    for (int i = 0; i < g; i++) {
      snprintf(l, sizeof l, "pcie-n%d-g%d", n, i);
      sb_link(b, l, &pc);
    }
    for (int w = 0; w < W; w++) {
      snprintf(l, sizeof l, "hostbridge-n%d-s%d", n, w);
      sb_link(b, l, &hb);
    }
    for (int k = 0; k < S; k++) {
      snprintf(l, sizeof l, "nic-n%d-c%d", n, k);
      sb_link(b, l, &nc);
      for (int k2 = k + 1; k2 < S; k2++) {
        snprintf(l, sizeof l, "socket-n%d-c%d-c%d", n, k, k2);
        sb_link(b, l, &so);
      }
    }
  }
  for (int n = 0; n < K; n++) {
    for (int i = 0; i < g; i++) {
      snprintf(a, sizeof a, "gpu%d", n * g + i);
      char sw[64];
      snprintf(sw, sizeof sw, "pciesw-n%d-s%d", n, i / s);
      snprintf(l, sizeof l, "pcie-n%d-g%d", n, i);
      sb_edge(b, a, sw, l);
    }
    for (int w = 0; w < W; w++) {
      snprintf(a, sizeof a, "pciesw-n%d-s%d", n, w);
      snprintf(c, sizeof c, "root-n%d-c%d", n, w * S / W);
      snprintf(l, sizeof l, "hostbridge-n%d-s%d", n, w);
      sb_edge(b, a, c, l);
    }
    for (int k = 0; k < S; k++) {
      snprintf(c, sizeof c, "root-n%d-c%d", n, k);
      snprintf(l, sizeof l, "nic-n%d-c%d", n, k);
      sb_edge(b, c, "switch", l);
      for (int k2 = k + 1; k2 < S; k2++) {
        snprintf(a, sizeof a, "root-n%d-c%d", n, k2);
        snprintf(l, sizeof l, "socket-n%d-c%d-c%d", n, k, k2);
        sb_edge(b, c, a, l);
      }
    }
  }
}

static void gen_host(sbuf *b, const bs_topo_params *p) {
  sb_printf(b,
            "    <host id=\"cpu\" speed=\"%.17gf\" core=\"1\">\n"
            "      <prop id=\"node\" value=\"0\"/><prop id=\"cores\" value=\"%d\"/>\n"
            "    </host>\n",
            p->host_speed, p->host_cores);
  bs_link_val shm = node_link(p, BS_LINK_SHM, 0, -1);
  sb_link(b, "shm-cpu", &shm);
  sb_printf(b, "    <route src=\"cpu\" dst=\"cpu\"><link_ctn id=\"shm-cpu\" direction=\"UP\"/></route>\n");
}

char *bs_topo_xml(const bs_topo_params *p, char *err, size_t errlen) {
  if (bs_topo_check(p, err, errlen)) return NULL;
  sbuf b = {0};
  gen_kind kind = find_gen(p->name)->kind; /* checked above */
  int host = kind == GEN_HOST;
  sb_printf(&b, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n");
  sb_printf(&b, "<!-- burstsim topology %s: %d node(s) x %d GPU(s)", p->name, p->nodes, p->gpus_per_node);
  if (p->nodes_per_leaf) sb_printf(&b, ", %d nodes per leaf, oversubscription %g", p->nodes_per_leaf, p->oversub);
  if (kind == GEN_PCIE)
    sb_printf(&b, ", %d CPU sockets per node (one NIC link each), %d GPUs per PCIe switch", p->sockets_per_node,
              p->gpus_per_pcie_switch);
  if (kind == GEN_DGX && bs_topo_nics(p) != p->gpus_per_node)
    sb_printf(&b, ", %d NICs per node (GPU i uses NIC i * %d / %d)", bs_topo_nics(p), bs_topo_nics(p),
              p->gpus_per_node);
  sb_printf(&b,
            ".\n     %s Links named CLASS-... take bandwidth and latency\n"
            "     from the profile when simulated (classes: nvlink nic fabric pcie hostbridge shm socket);\n"
            "     the values written here are those of the profile given to the generator. -->\n",
            host ? "Every rank runs on host cpu." : "Rank r runs on host gpu<r>.");
  sb_printf(&b, "<platform version=\"4.1\">\n  <zone id=\"%s\" routing=\"%s\">\n", p->name,
            host ? "Full" : "DijkstraCache");
  if (kind == GEN_DGX) gen_dgx(&b, p);
  else if (kind == GEN_PCIE) gen_pcie(&b, p);
  else gen_host(&b, p);
  sb_printf(&b, "  </zone>\n</platform>\n");
  if (b.failed) {
    free(b.s);
    snprintf(err, errlen, "topology %s: out of memory writing the XML", p->name);
    return NULL;
  }
  return b.s;
}

int bs_topo_fold_quotient(const bs_topo_params *p, int max_node_offset) {
  if (!bs_topo_has_rails(p->name)) return 0;
  int K = p->nodes, L = p->nodes_per_leaf, D = max_node_offset;
  if (L < 2 || L >= K || K % L || D < 1 || D >= L / 2 + L % 2) return 0; /* 2D >= L, no overflow */
  return L;
}

int bs_topo_fold_nodes(const bs_topo_params *p, int max_node_offset) {
  return bs_topo_fold_nodes_from(p, max_node_offset, 0);
}

int bs_topo_fold_nodes_from(const bs_topo_params *p, int max_node_offset, int min_nodes) {
  const generator *g = find_gen(p->name);
  if (!g || g->kind == GEN_HOST) return 0;
  int K = p->nodes, D = max_node_offset < 0 ? 0 : max_node_offset;
  /* Leaves matter only when a rail has more than one (dgx generators). */
  int leafy = g->kind == GEN_DGX && p->nodes_per_leaf < K;
  int L = leafy ? p->nodes_per_leaf : 1;
  for (int m = 2; (long)m * L < K; m++) {
    int M = m * L;
    if (K % M || M < min_nodes) continue;
    if (M <= 2L * D) continue;            /* +D and -D must stay distinct peers */
    if (leafy && m < D / L + 2) continue; /* a flow crosses at most D/L+1 leaves */
    return M;
  }
  return 0;
}
