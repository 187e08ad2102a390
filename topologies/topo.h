/*
 * topo.h — platform generators: the cluster shapes the simulator knows
 * (dgx-a100, a100-pcie-node, dgx-h100, dgx-b200, nvl72, host) written as SimGrid XML that a
 * user can read and edit, and the conventions a user's own XML must follow.
 * nvl72 is a rail fabric like the dgx generators whose "node" is a GB200/GB300 NVL72 rack: its
 * 72 GPUs (18 compute trays of 4) on one NVLink switch domain, one NIC per GPU.
 *
 * Conventions (generated and user files alike):
 *   - rank r runs on host "gpu<r>"; a host may say which node it belongs to
 *     with <prop id="node" value="K"/> (bytes are then split intra/inter node);
 *     a platform with a single host (the "host" topology) runs every rank on it.
 *   - a link whose name starts with a link class name and '-' ("nvlink-n0-g3",
 *     "nic-...", "fabric-...", "pcie-...", "hostbridge-...", "shm-...", "socket-...") gets
 *     its bandwidth and latency from the profile when the simulator loads it;
 *     other links keep what the file says.
 * Speeds written here are only defaults: the profile decides.
 */
#ifndef BURSTSIM_TOPO_H
#define BURSTSIM_TOPO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  BS_LINK_NVLINK = 0, /* GPU <-> NVSwitch, per GPU, per direction */
  BS_LINK_NIC,        /* GPU (or node) <-> first network switch, per NIC */
  BS_LINK_FABRIC,     /* one switch port of the inter-node fabric (leaf uplinks) */
  BS_LINK_PCIE,       /* GPU <-> PCIe switch */
  BS_LINK_HOSTBRIDGE, /* PCIe switch <-> CPU root complex */
  BS_LINK_SHM,        /* shared memory between ranks of one host */
  BS_LINK_SOCKET,     /* CPU socket <-> CPU socket (UPI / xGMI), as GPU traffic staged in host memory sees it */
  BS_LINK_CLASS_COUNT
} bs_link_class;

const char *bs_link_class_name(bs_link_class c);
/* The class of a link name by its prefix ("nvlink-..."), or -1. */
int bs_link_class_of(const char *link_name);

typedef struct {
  double bw_Bps; /* bytes per second, per direction */
  double lat_s;  /* seconds */
} bs_link_val;

typedef struct {
  char name[32];            /* generator: dgx-a100, a100-pcie-node, dgx-h100, dgx-b200, nvl72, host */
  int nodes;                /* >= 1 (nvl72: racks) */
  int gpus_per_node;        /* ranks per node (nvl72: 72 per rack; host: ranks on the host) */
  int nodes_per_leaf;       /* dgx: nodes under one leaf switch of a rail; >= nodes = single leaf */
  double oversub;           /* dgx: leaf downlink / uplink bandwidth ratio, >= 1 */
  int nics_per_node;        /* dgx: NICs (rails) per node, dividing gpus_per_node; 0 = one per GPU */
  int gpus_per_pcie_switch; /* a100-pcie-node */
  int sockets_per_node;     /* a100-pcie-node: CPU sockets, the PCIe switches split evenly between them */
  int host_cores;           /* host: cores of the CPU (informative) */
  double host_speed;        /* host: flop/s of the whole CPU (the exec rate the engine uses) */
  bs_link_val link[BS_LINK_CLASS_COUNT];
  int wrap_offset; /* dgx fold quotient (see bs_topo_fold_quotient): 0 = none */
  /* What-ifs of one node (all zero: none). Links of class degrade_class on node degrade_node
   * (fabric: the uplinks of that node's leaf, every rail; nic with degrade_one_nic: its NIC
   * degrade_nic alone, dgx) at degrade_factor of their bandwidth;
   * the last failed_nics NICs of node failed_node (-1: of every node) down (dgx), their GPUs
   * moved to the others. */
  int degrade_node, degrade_class;
  int degrade_one_nic, degrade_nic;
  double degrade_factor;
  int failed_node, failed_nics;
} bs_topo_params;

/* 1 if name is one of the generators. */
int bs_topo_is_generator(const char *name);
/*
 * 1 if the generator `name` wires each node as one switched NVLink domain (every GPU its own port
 * of the node's NVSwitch) with rail-optimised NICs on a leaf-spine fabric (GPU i of every node on
 * rail i): the dgx generators and nvl72. The fold's index shifts, the rail channels of ring
 * collectives, the route model and the NIC what-ifs rely on this wiring. 0 for the others and for
 * a name that is no generator (a FILE.xml).
 */
int bs_topo_has_rails(const char *name);
/* Comma-separated generator names, for messages and --help. */
const char *bs_topo_generator_names(void);
/* The profile a generator is simulated and printed with when none is named
 * (dgx-h100: h100-sxm), or NULL for a name that is no generator (a FILE.xml). */
const char *bs_topo_default_profile(const char *name);

/*
 * Defaults for a generator with `nodes` nodes (host: `nodes` is ignored and
 * gpus_per_node is the number of ranks). Link values are placeholders that a
 * profile overrides. Returns 0, or -1 with a message.
 */
int bs_topo_defaults(const char *name, int nodes, bs_topo_params *p, char *err, size_t errlen);

/*
 * dgx generators: the NIC local GPU i of a node sends and receives through when
 * the node has nics_per_node NICs (rail order): NIC i * nics / gpus_per_node, so
 * GPUs 0 .. gpus/nics - 1 share NIC 0, the next gpus/nics share NIC 1, and so
 * on. With one NIC per GPU (nics_per_node 0 or gpus_per_node) it is i.
 */
int bs_topo_nic_of(const bs_topo_params *p, int i);
/* dgx generators: the NICs of a node (gpus_per_node when nics_per_node is 0). */
int bs_topo_nics(const bs_topo_params *p);
/*
 * dgx generators: the NIC local GPU i of node n uses, failed NICs included: on the node with
 * failed_nics > 0 (every node when failed_node is -1) the last failed_nics NICs are down and a GPU whose NIC j is down sends
 * through NIC j mod (NICs - failed_nics), the first live NICs in rail order. Elsewhere
 * bs_topo_nic_of.
 */
int bs_topo_nic_of_node(const bs_topo_params *p, int n, int i);

/* Checks the parameters (counts positive, leaves divide, ...). */
int bs_topo_check(const bs_topo_params *p, char *err, size_t errlen);

/* dgx generators: the bandwidth of leaf q's uplink to the spine (one rail), its switch
 * ports aggregated: ports x the fabric port bandwidth / oversubscription. */
double bs_topo_uplink_bw(const bs_topo_params *p, int leaf);

/* The platform as SimGrid XML (malloc'd, NUL-terminated), or NULL with a message. */
char *bs_topo_xml(const bs_topo_params *p, char *err, size_t errlen);

/*
 * Folding (the simulator's shortcut for symmetric plans): the number of nodes
 * M < nodes such that a platform generated with M nodes reproduces, for every
 * flow whose node offset (shortest way round the node ring) is at most
 * `max_node_offset`, the same path class and the same number of flows on every
 * shared link as the full platform does, provided the plan is invariant under
 * shifting all ranks by M nodes. Returns 0 when no such M exists (or the
 * platform has no node symmetry, as the host).
 */
int bs_topo_fold_nodes(const bs_topo_params *p, int max_node_offset);
/* The same, the smallest such M of at least min_nodes (a plan whose programs repeat only every few
 * nodes folds onto a larger M). */
int bs_topo_fold_nodes_from(const bs_topo_params *p, int max_node_offset, int min_nodes);

/*
 * The tighter fold of the dgx fabric: one leaf's worth of nodes (returned, or
 * 0 when impossible: single leaf, partial leaves, or 2 * max_node_offset >=
 * nodes_per_leaf). Generated with wrap_offset = max_node_offset, the folded
 * platform routes a same-rail message that wraps round the folded ring of
 * nodes through its rail's leaf uplink, up and down, as the message it stands
 * for crosses from one leaf to the next: same links classes, same number of
 * flows on every uplink direction. Valid for messages between equal local
 * indices only (cross-rail routes are not reproduced).
 */
int bs_topo_fold_quotient(const bs_topo_params *p, int max_node_offset);

#ifdef __cplusplus
}
#endif

#endif
