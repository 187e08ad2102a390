/*
 * platform.c — topology + profile -> the SimGrid platform (see platform.h).
 * Generated topologies take their link speeds from the profile; a user's XML
 * file keeps its own speeds except on links named with a class prefix.
 */
#include "platform.h"
#include "factors.h"
#include "load.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>

#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cluster.nics_per_node on a generated platform: dgx generators take any divisor of their GPUs per
 * node; the PCIe node has its one NIC; the host and platform files are wired as they are. */
static int resolve_nics(const bs_config *cfg, bs_platform_spec *ps, char *err, size_t errlen) {
  int nics = cfg->cluster.nics_per_node, gpn = ps->topo.gpus_per_node;
  const char *topo = cfg->cluster.topology;
  if (nics <= 0) return 0;
  if (bs_topo_has_rails(topo)) {
    int whole = ps->node_gpus > 0 ? ps->node_gpus : gpn;
    if (nics > whole || whole % nics) {
      snprintf(err, errlen, "cluster.nics_per_node: %d does not divide the %d GPUs per node of %s", nics, whole, topo);
      return -1;
    }
    if (gpn < whole && gpn % (whole / nics)) { /* part of a node: its GPUs' NICs, whole */
      snprintf(err, errlen,
               "parallel.gpus: %d GPUs of a %s node would split the %d GPUs that share a NIC (cluster.nics_per_node = "
               "%d)",
               gpn, topo, whole / nics, nics);
      return -1;
    }
    ps->topo.nics_per_node = nics * gpn / whole;
    return 0;
  }
  if (!strcmp(topo, "a100-pcie-node") && nics == 1) return 0;
  snprintf(err, errlen, "cluster.nics_per_node: %d: only the dgx topologies take it (%s has a fixed NIC wiring)", nics,
           topo);
  return -1;
}

/* 1 when a generated platform of this kind has links of class c. */
static int topo_has_class(const bs_platform_spec *ps, int c) {
  const char *t = ps->topo.name;
  if (ps->shared_host) return c == BS_LINK_SHM;
  if (bs_topo_has_rails(t)) return c == BS_LINK_NVLINK || c == BS_LINK_NIC || c == BS_LINK_FABRIC;
  return c == BS_LINK_PCIE || c == BS_LINK_HOSTBRIDGE || c == BS_LINK_NIC || c == BS_LINK_SOCKET; /* a100-pcie-node */
}

/*
 * A generated platform takes its links' speeds from the profile: a profile that describes links must
 * describe every class the point's messages cross (the host's shared memory; a node's NVLink or
 * PCIe, host bridge and socket links; NICs and the fabric once there are two nodes), or part of the
 * point would run on the generator's placeholder speeds unsaid. A profile with no links at all
 * takes the placeholder speeds for every class (topo.h). 0, or -1 naming the file and the key.
 */
static int profile_has_links(const bs_profile *prof, const bs_platform_spec *ps, const char *topo, char *err,
                             size_t errlen) {
  int any = 0;
  for (int c = 0; c < BS_LINK_CLASS_COUNT; c++) any |= prof->link[c].present;
  for (int c = 0; any && c < BS_LINK_CLASS_COUNT; c++) {
    if (!topo_has_class(ps, c) || prof->link[c].present) continue;
    if ((c == BS_LINK_NIC || c == BS_LINK_FABRIC) && ps->topo.nodes < 2) continue;
    snprintf(err, errlen, "cluster.profile: %s: links.%s: missing, needed by topology %s (%d node(s))", prof->path,
             bs_link_class_name((bs_link_class)c), topo, ps->topo.nodes);
    return -1;
  }
  return 0;
}

/*
 * The what-ifs of cfg->cluster checked against the platform and written into it: a straggler
 * names a rank of the point; a degraded class exists on the platform (a user file: see
 * bs_platform_apply_degrade) and its node too; failed NICs leave the node one. A degrade of every
 * node scales the class's bandwidth (the fold keeps it, as every node has it); one of a single
 * node and failed NICs go to the generator (topo.h). 0 or -1 with a message naming the key.
 */
/* The share of a NIC's line rate NCCL carries: 48 of 50 GB/s on a 400 Gb/s NDR NIC (nccl-tests #267),
 * 24 of 25 on 200 Gb/s HDR (nccl #412, #812), 96 of 100 on 800 Gb/s (the gb300 profile): the shipped
 * profiles' NIC figures, which cluster.nic_gbps at their own line rate gives back. */
#define NIC_LINE_SHARE 0.96

static int resolve_whatifs(const bs_config *cfg, bs_platform_spec *ps, char *err, size_t errlen) {
  const bs_cluster *k = &cfg->cluster;
  int G = cfg->par.gpus, K = ps->generated ? ps->topo.nodes : 0;
  if (k->nic_gbps > 0) { /* before a degrade, which scales what it sets */
    if (!ps->generated || !topo_has_class(ps, BS_LINK_NIC)) {
      snprintf(err, errlen, "cluster.nic_gbps: %g: only a generated topology with NICs takes it (%s)", k->nic_gbps,
               ps->generated ? ps->topo.name : ps->file);
      return -1;
    }
    ps->topo.link[BS_LINK_NIC].bw_Bps = k->nic_gbps * 1e9 / 8 * NIC_LINE_SHARE;
  }
  if (k->straggler_factor > 0 && (k->straggler_rank < 0 || k->straggler_rank >= G)) {
    snprintf(err, errlen, "cluster.straggler: rank %d is not a rank of parallel.gpus = %d (0 .. %d)", k->straggler_rank,
             G, G - 1);
    return -1;
  }
  if (k->degrade_factor > 0) {
    const char *cn = bs_link_class_name((bs_link_class)k->degrade_class);
    if (!(k->degrade_factor <= 1) || k->degrade_class < 0 || k->degrade_class >= BS_LINK_CLASS_COUNT) {
      snprintf(err, errlen, "cluster.degrade: factor %g of class %s must be in (0, 1]", k->degrade_factor, cn);
      return -1;
    }
    if (!ps->generated) {
      if (k->degrade_one_node) {
        snprintf(err, errlen, "cluster.degrade: %s@%d: one node's links only on a generated topology (%s is a file)",
                 cn, k->degrade_node, ps->file);
        return -1;
      }
      return 0; /* applied, and checked, once loaded */
    }
    if (!topo_has_class(ps, k->degrade_class)) {
      snprintf(err, errlen, "cluster.degrade: topology %s has no %s links", ps->topo.name, cn);
      return -1;
    }
    if (k->degrade_one_node && k->degrade_node >= K) {
      snprintf(err, errlen, "cluster.degrade: node %d is not a node of %s with %d node(s) (0 .. %d)", k->degrade_node,
               ps->topo.name, K, K - 1);
      return -1;
    }
    if (k->degrade_one_nic && (!bs_topo_has_rails(ps->topo.name) || k->degrade_nic >= bs_topo_nics(&ps->topo))) {
      if (!bs_topo_has_rails(ps->topo.name))
        snprintf(err, errlen, "cluster.degrade: nic@%d/%d: one NIC only on the dgx topologies (%s)", k->degrade_node,
                 k->degrade_nic, ps->topo.name);
      else
        snprintf(err, errlen, "cluster.degrade: NIC %d is not a NIC of a %s node with %d NICs (0 .. %d)",
                 k->degrade_nic, ps->topo.name, bs_topo_nics(&ps->topo), bs_topo_nics(&ps->topo) - 1);
      return -1;
    }
    if (k->degrade_one_node) {
      ps->topo.degrade_node = k->degrade_node;
      ps->topo.degrade_class = k->degrade_class;
      ps->topo.degrade_factor = k->degrade_factor;
      ps->topo.degrade_one_nic = k->degrade_one_nic;
      ps->topo.degrade_nic = k->degrade_nic;
    } else {
      ps->topo.link[k->degrade_class].bw_Bps *= k->degrade_factor;
    }
  }
  if (k->failed_nics > 0) {
    if (!ps->generated || !bs_topo_has_rails(ps->topo.name)) {
      snprintf(err, errlen, "cluster.failed_nics: %d:%d: only the dgx topologies have NICs to fail over (%s)",
               k->failed_node, k->failed_nics, ps->generated ? ps->topo.name : ps->file);
      return -1;
    }
    if (k->failed_node < -1 || k->failed_node >= K) {
      snprintf(err, errlen, "cluster.failed_nics: node %d is not a node of %s with %d node(s) (0 .. %d)",
               k->failed_node, ps->topo.name, K, K - 1);
      return -1;
    }
    int nics = bs_topo_nics(&ps->topo);
    if (k->failed_nics >= nics) {
      if (k->failed_node < 0)
        snprintf(err, errlen, "cluster.failed_nics: all:%d: %d of the %d NICs of every node down leaves none",
                 k->failed_nics, k->failed_nics, nics);
      else
        snprintf(err, errlen, "cluster.failed_nics: %d of the %d NICs of node %d down leaves none", k->failed_nics,
                 nics, k->failed_node);
      return -1;
    }
    ps->topo.failed_node = k->failed_node;
    ps->topo.failed_nics = k->failed_nics;
  }
  return 0;
}

int bs_platform_apply_degrade(const bs_config *cfg, const char *file, char *err, size_t errlen) {
  const bs_cluster *k = &cfg->cluster;
  if (!(k->degrade_factor > 0)) return 0;
  size_t n = sg_link_count();
  sg_link_t *links = sg_link_list();
  int hit = 0;
  for (size_t i = 0; i < n; i++)
    if (bs_link_class_of(sg_link_get_name(links[i])) == k->degrade_class) {
      sg_link_set_bandwidth(links[i], sg_link_get_bandwidth(links[i]) * k->degrade_factor);
      hit++;
    }
  free(links);
  if (!hit) {
    snprintf(err, errlen, "cluster.degrade: %s has no link named %s-... (link classes: topologies/topo.h)", file,
             bs_link_class_name((bs_link_class)k->degrade_class));
    return -1;
  }
  return 0;
}

int bs_platform_resolve(const bs_config *cfg, const bs_sim_opts *opts, const bs_profile *prof, bs_platform_spec *ps,
                        char *err, size_t errlen) {
  memset(ps, 0, sizeof *ps);
  const char *topo = cfg->cluster.topology;
  int G = cfg->par.gpus;
  if (G < 1) {
    snprintf(err, errlen, "parallel.gpus: %d must be >= 1", G);
    return -1;
  }
  if (!bs_topo_is_generator(topo)) {
    if (bs_platform_check_name(topo, err, errlen)) return -1;
    if (cfg->cluster.nics_per_node > 0) {
      snprintf(err, errlen, "cluster.nics_per_node: %d: the platform file %s says which NIC each GPU uses",
               cfg->cluster.nics_per_node, topo);
      return -1;
    }
    snprintf(ps->file, sizeof ps->file, "%s", topo);
    ps->ranks_per_node = cfg->par.ranks_per_node > 0 ? cfg->par.ranks_per_node : 1;
    return resolve_whatifs(cfg, ps, err, errlen);
  }
  ps->generated = 1;
  if (bs_topo_defaults(topo, 1, &ps->topo, err, errlen)) return -1;
  bs_profile_apply_topo(prof, &ps->topo);
  if (!strcmp(topo, "host")) {
    if (prof->host_speed <= 0) {
      snprintf(err, errlen, "cluster.profile: %s has no \"host\" section, needed by topology host", prof->name);
      return -1;
    }
    ps->topo.nodes = 1;
    ps->topo.gpus_per_node = G;
    ps->ranks_per_node = G;
    ps->shared_host = 1;
  } else {
    int gpn = ps->topo.gpus_per_node;
    ps->node_gpus = gpn;
    if (G < gpn && bs_topo_has_rails(topo)) {
      /* part of one node (4 GPUs of a DGX): the node's first G GPUs, each with its own NVLink and NIC
       * links as in the whole node; the others stay idle and are left out */
      gpn = ps->topo.gpus_per_node = G;
    }
    if (G % gpn) {
      snprintf(err, errlen, "parallel.gpus: %d is not a multiple of the %d GPUs per node of %s", G, gpn, topo);
      return -1;
    }
    int nodes = G / gpn;
    if (cfg->cluster.nodes > 0 && cfg->cluster.nodes != nodes) {
      snprintf(err, errlen, "cluster.nodes: %d nodes of %d GPUs do not make parallel.gpus = %d", cfg->cluster.nodes,
               gpn, G);
      return -1;
    }
    ps->topo.nodes = nodes;
    ps->ranks_per_node = gpn;
    /* The flags (opts) win over the scenario keys. */
    int npl = opts->nodes_per_leaf > 0 ? opts->nodes_per_leaf : cfg->cluster.nodes_per_leaf;
    double over = opts->oversub > 0 ? opts->oversub : cfg->cluster.oversub;
    if (npl > 0) ps->topo.nodes_per_leaf = npl;
    if (over > 0) ps->topo.oversub = over;
  }
  if (profile_has_links(prof, ps, topo, err, errlen)) return -1;
  if (resolve_nics(cfg, ps, err, errlen) || resolve_whatifs(cfg, ps, err, errlen)) return -1;
  return bs_topo_check(&ps->topo, err, errlen);
}

char *bs_platform_xml(const bs_platform_spec *ps, int nodes, int per_node, int wrap, char *err, size_t errlen) {
  if (!ps->generated) {
    snprintf(err, errlen, "internal: XML requested for a user platform file");
    return NULL;
  }
  bs_topo_params tp = ps->topo;
  tp.nodes = nodes;
  /* A fold keeps the GPUs of a NIC together (fold.c folds a node by whole NICs). */
  if (tp.nics_per_node > 0) {
    int k = ps->topo.gpus_per_node / tp.nics_per_node;
    if (per_node % k) {
      snprintf(err, errlen, "internal: %d GPUs per node split the GPUs of a NIC (%d)", per_node, k);
      return NULL;
    }
    tp.nics_per_node = per_node / k;
  }
  tp.gpus_per_node = per_node;
  tp.wrap_offset = wrap;
  return bs_topo_xml(&tp, err, errlen);
}

int bs_platform_apply_profile(const bs_profile *prof, int generated, int *factors) {
  *factors = 0;
  size_t n = sg_link_count();
  sg_link_t *links = sg_link_list();
  int set = 0;
  for (size_t i = 0; i < n; i++) {
    int c = bs_link_class_of(sg_link_get_name(links[i]));
    if (c < 0 || !prof->link[c].present) continue;
    const bs_prof_link *l = &prof->link[c];
    if (!generated) {
      sg_link_set_bandwidth(links[i], l->bw_Bps);
      sg_link_set_latency(links[i], l->lat_s);
    }
    set++;
  }
  free(links);
  /* Message-size factors: SimGrid callbacks, only when a profile has some. */
  bs_factor_table t;
  memset(&t, 0, sizeof t);
  int any = 0;
  for (int c = 0; c < BS_LINK_CLASS_COUNT; c++) {
    const bs_prof_link *l = &prof->link[c];
    for (int k = 0; k < l->nfactors && k < BS_FACTOR_PIECES; k++) {
      t.cls[c].min_bytes[k] = l->factors[k].min_bytes;
      t.cls[c].bw[k] = l->factors[k].bandwidth;
      t.cls[c].lat[k] = l->factors[k].latency;
      t.cls[c].n = k + 1;
      if (l->factors[k].bandwidth != 1.0 || l->factors[k].latency != 1.0) any = 1;
    }
  }
  if (any && bs_sim_install_factors(&t)) return -1;
  *factors = any;
  return set;
}

int bs_platform_route(const bs_platform_spec *ps, int a, int b, double *lat, double *bw) {
  const bs_topo_params *t = &ps->topo;
  if (!ps->generated || ps->shared_host || !bs_topo_has_rails(t->name) || a == b || a < 0 || b < 0) return -1;
  int g = t->gpus_per_node, K = t->nodes, L = t->nodes_per_leaf;
  if (g < 1 || K < 1 || L < 1 || a >= K * g || b >= K * g) return -1;
  int na = a / g, nb = b / g;
  if (na == nb) {
    *lat = 2 * t->link[BS_LINK_NVLINK].lat_s;
    *bw = t->link[BS_LINK_NVLINK].bw_Bps;
    return 0;
  }
  *lat = 2 * t->link[BS_LINK_NIC].lat_s;
  /* The route's own bandwidth, as SimGrid reports it (coll.c checks that the two agree): GPUs that
   * share a NIC share it in the simulation, not in this figure. */
  *bw = t->link[BS_LINK_NIC].bw_Bps;
  int la = na / L, lb = nb / L;
  if (a % g == b % g && la == lb) return 0;
  /* Through the core: both leaves' uplinks. */
  for (int q = 0; q < 2; q++) {
    double up = bs_topo_uplink_bw(t, q ? lb : la);
    if (up < *bw) *bw = up;
  }
  *lat += 2 * t->link[BS_LINK_FABRIC].lat_s;
  return 0;
}

int bs_platform_hosts(int n, int rpn_fallback, void **hosts, int *node, char *err, size_t errlen) {
  size_t nh = sg_host_count();
  sg_host_t only = NULL;
  if (nh == 1) {
    sg_host_t *all = sg_host_list();
    only = all[0];
    free(all);
  }
  char name[32];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "gpu%d", i);
    sg_host_t h = sg_host_by_name(name);
    if (!h) h = only;
    if (!h) {
      snprintf(err, errlen, "platform: no host '%s' for rank %d (ranks run on hosts gpu0..gpu%d)", name, i, n - 1);
      return -1;
    }
    hosts[i] = h;
    const char *nv = sg_host_get_property_value(h, "node");
    char *end = NULL;
    long v = nv ? strtol(nv, &end, 10) : 0;
    if (nv && (end == nv || *end || v < 0 || v > INT32_MAX)) {
      snprintf(err, errlen, "platform: host '%s': property node='%s' is not a whole number >= 0", sg_host_get_name(h),
               nv);
      return -1;
    }
    node[i] = nv ? (int)v : (rpn_fallback > 0 ? i / rpn_fallback : i);
  }
  return 0;
}

int bs_platform_check_name(const char *topo, char *err, size_t errlen) {
  if (bs_topo_is_generator(topo)) return 0;
  size_t n = strlen(topo);
  if (n < 5 || strcmp(topo + n - 4, ".xml")) {
    snprintf(err, errlen, "cluster.topology: unknown '%s' (known: %s, or a FILE.xml)", topo, bs_topo_generator_names());
    return -1;
  }
  return bs_platform_check_file(topo, err, errlen);
}

int bs_platform_check_file(const char *file, char *err, size_t errlen) {
  struct stat st;
  if (stat(file, &st)) {
    snprintf(err, errlen, "cluster.topology: %s: cannot read the platform file: %s", file, strerror(errno));
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "cluster.topology: %s: not a regular file (a platform XML file is needed)", file);
    return -1;
  }
  return bs_platform_check_attrs(file, err, errlen);
}

/* Link speeds SimGrid can time: below 1 kB/s a transfer's end overflows its clock. */
#define LINK_BW_MIN 1e3
#define LINK_LAT_MAX 1.0
#define ROUTE_CHECK_ALL 1024
#define HOST_SPEED_MIN 1e6

int bs_platform_check_loaded(const char *file, void *const *hosts, int n, char *err, size_t errlen) {
  size_t nl = sg_link_count();
  sg_link_t *links = sg_link_list();
  int rc = 0;
  for (size_t i = 0; i < nl && !rc; i++) {
    double bw = sg_link_get_bandwidth(links[i]), lat = sg_link_get_latency(links[i]);
    if (!(bw >= LINK_BW_MIN) || !isfinite(bw)) {
      snprintf(err, errlen, "cluster.topology: %s: link '%s': bandwidth %g B/s is out of range (at least %g B/s)", file,
               sg_link_get_name(links[i]), bw, LINK_BW_MIN);
      rc = -1;
    } else if (!(lat >= 0 && lat <= LINK_LAT_MAX)) {
      snprintf(err, errlen, "cluster.topology: %s: link '%s': latency %g s is out of range [0, %g] s", file,
               sg_link_get_name(links[i]), lat, LINK_LAT_MAX);
      rc = -1;
    }
  }
  free(links);
  for (int a = 0; a < n && !rc; a++) {
    double sp = sg_host_get_speed(hosts[a]);
    if (!(sp >= HOST_SPEED_MIN) || !isfinite(sp)) {
      snprintf(err, errlen, "cluster.topology: %s: host '%s': speed %g flop/s is out of range (at least %g)", file,
               sg_host_get_name(hosts[a]), sp, HOST_SPEED_MIN);
      rc = -1;
    }
  }
  /* Every pair up to ROUTE_CHECK_ALL hosts; beyond, each host to and from the first and its neighbours. */
  for (int a = 0; a < n && !rc; a++)
    for (int b = 0; b < n && !rc; b++)
      if ((n <= ROUTE_CHECK_ALL || a == 0 || b == 0 || b == a + 1 || a == b + 1) && hosts[a] != hosts[b] &&
          !bs_sim_route_exists(hosts[a], hosts[b])) {
        snprintf(err, errlen, "cluster.topology: %s: no route from %s to %s (ranks %d and %d)", file,
                 sg_host_get_name(hosts[a]), sg_host_get_name(hosts[b]), a, b);
        rc = -1;
      }
  return rc;
}
