/*
 * test_topo.c — the platform generators (topologies/topo.h) without SimGrid: the generator table,
 * the link classes, the platforms they write counted element by element against their wiring
 * (hosts, routers, links, routes per node, NIC and leaf), every reference in the XML naming an
 * element the file declares, the NIC each GPU uses (shared and failed NICs), the leaf uplinks,
 * the fold's node counts, and each refusal of bs_topo_check with its message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "topologies/topo.h"

/* The platform of a generator with its defaults and `nodes` nodes; fails the test on an error. */
static char *xml_of(const char *name, int nodes, void (*tweak)(bs_topo_params *p)) {
  bs_topo_params p;
  char err[256] = "";
  assert_int_equal(bs_topo_defaults(name, nodes, &p, err, sizeof err), 0);
  if (tweak) tweak(&p);
  char *xml = bs_topo_xml(&p, err, sizeof err);
  if (!xml) fail_msg("bs_topo_xml(%s): %s", name, err);
  return xml;
}

/* Occurrences of needle in s. */
static int count(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* Whether the XML declares an element <tag id="id". */
static int declares(const char *xml, const char *tag, const char *id) {
  char want[128];
  snprintf(want, sizeof want, "<%s id=\"%s\"", tag, id);
  return strstr(xml, want) != NULL;
}

/*
 * Every route's src and dst is a declared host or router, every link_ctn a declared link, no id
 * is declared twice, and the zone and platform open and close once: what SimGrid needs of a
 * platform to load it, checked here without it.
 */
static void assert_references_resolve(const char *xml) {
  assert_int_equal(count(xml, "<platform "), 1);
  assert_int_equal(count(xml, "</platform>"), 1);
  assert_int_equal(count(xml, "<zone "), 1);
  assert_int_equal(count(xml, "</zone>"), 1);
  static const char *const refs[] = {" src=\"", " dst=\"", "<link_ctn id=\""};
  for (int r = 0; r < 3; r++)
    for (const char *p = strstr(xml, refs[r]); p; p = strstr(p + 1, refs[r])) {
      const char *v = p + strlen(refs[r]), *end = strchr(v, '"');
      assert_non_null(end);
      char id[64];
      assert_true(end - v < (long)sizeof id);
      memcpy(id, v, (size_t)(end - v));
      id[end - v] = '\0';
      if (r == 2) {
        if (!declares(xml, "link", id)) fail_msg("link_ctn names undeclared link '%s'", id);
      } else if (!declares(xml, "host", id) && !declares(xml, "router", id)) {
        fail_msg("a route names undeclared netpoint '%s'", id);
      }
    }
  static const char *const tags[] = {"<host id=\"", "<router id=\"", "<link id=\""};
  for (int t = 0; t < 3; t++)
    for (const char *p = strstr(xml, tags[t]); p; p = strstr(p + 1, tags[t])) {
      const char *v = p + strlen(tags[t]), *end = strchr(v, '"');
      char want[96];
      snprintf(want, sizeof want, "%s%.*s\"", tags[t], (int)(end - v), v);
      if (count(xml, want) != 1) fail_msg("'%s' is declared %d times", want, count(xml, want));
    }
}

static void test_link_classes(void **state) {
  (void)state;
  static const char *const names[] = {"nvlink", "nic", "fabric", "pcie", "hostbridge", "shm", "socket"};
  assert_int_equal(BS_LINK_CLASS_COUNT, 7);
  for (int c = 0; c < BS_LINK_CLASS_COUNT; c++) {
    assert_string_equal(bs_link_class_name((bs_link_class)c), names[c]);
    char link[64];
    snprintf(link, sizeof link, "%s-n0-g3", names[c]);
    assert_int_equal(bs_link_class_of(link), c);
  }
  assert_string_equal(bs_link_class_name(BS_LINK_CLASS_COUNT), "?");
  assert_string_equal(bs_link_class_name((bs_link_class)-1), "?");
  assert_int_equal(bs_link_class_of("nvlink"), -1); /* the class name alone: no '-' */
  assert_int_equal(bs_link_class_of("nvlinkx-n0"), -1);
  assert_int_equal(bs_link_class_of("uplink-n0"), -1);
  assert_int_equal(bs_link_class_of(""), -1);
}

static void test_generator_table(void **state) {
  (void)state;
  assert_string_equal(bs_topo_generator_names(), "dgx-a100, a100-pcie-node, dgx-h100, dgx-b200, nvl72, host");
  static const char *const gens[][2] = {
    {"dgx-a100", "a100-sxm4-80gb"}, {"a100-pcie-node", "a100-pcie-40gb"}, {"dgx-h100", "h100-sxm"}, {"host", "host"}};
  for (int i = 0; i < 4; i++) {
    assert_true(bs_topo_is_generator(gens[i][0]));
    assert_string_equal(bs_topo_default_profile(gens[i][0]), gens[i][1]);
  }
  assert_false(bs_topo_is_generator("dgx"));
  assert_false(bs_topo_is_generator("DGX-A100"));
  assert_false(bs_topo_is_generator("cluster.xml"));
  assert_null(bs_topo_default_profile("cluster.xml"));
}

static void test_unknown_refused(void **state) {
  (void)state;
  bs_topo_params p;
  char err[256] = "";
  assert_int_equal(bs_topo_defaults("dgx-z100", 2, &p, err, sizeof err), -1);
  assert_string_equal(
    err,
    "unknown topology 'dgx-z100' (known: dgx-a100, a100-pcie-node, dgx-h100, dgx-b200, nvl72, host, or a FILE.xml)");
  assert_int_equal(bs_topo_defaults("dgx-a100", 2, &p, err, sizeof err), 0);
  snprintf(p.name, sizeof p.name, "%s", "nope");
  assert_null(bs_topo_xml(&p, err, sizeof err));
  assert_string_equal(err, "unknown topology 'nope'");
}

/* dgx: per node 8 hosts, an NVSwitch, 8 NVLink and 8 NIC links; per rail and leaf a router and an
 * uplink; one core; the routes GPU-NVSwitch, GPU-leaf and leaf-core. */
static void test_dgx_counts(void **state) {
  (void)state;
  static const char *const gens[] = {"dgx-a100", "dgx-h100"};
  for (int i = 0; i < 2; i++) {
    int K = 3;
    char *x = xml_of(gens[i], K, NULL);
    assert_int_equal(count(x, "<host id=\"gpu"), 8 * K);
    assert_true(declares(x, "host", "gpu23"));
    assert_false(declares(x, "host", "gpu24"));
    assert_int_equal(count(x, "<prop id=\"node\" value=\"2\"/>"), 8);
    assert_int_equal(count(x, "<router id=\"nvsw-n"), K);
    assert_int_equal(count(x, "<router id=\"leaf-r"), 8); /* one leaf per rail under 16 nodes */
    assert_int_equal(count(x, "<router id=\"core\""), 1);
    assert_int_equal(count(x, "<link id=\"nvlink-"), 8 * K);
    assert_int_equal(count(x, "<link id=\"nic-"), 8 * K);
    assert_int_equal(count(x, "<link id=\"fabric-"), 8);
    assert_int_equal(count(x, "<route "), 8 * K + 8 * K + 8);
    assert_int_equal(count(x, "<bypassRoute "), 0);
    assert_non_null(strstr(x, "routing=\"DijkstraCache\""));
    assert_references_resolve(x);
    free(x);
  }
}

static void leaves_of_4(bs_topo_params *p) {
  p->nodes_per_leaf = 4;
  p->oversub = 2;
}

/* 10 nodes, 4 per leaf: 3 leaves per rail, the last with 2 nodes; uplinks of ports x port / oversub. */
static void test_dgx_leaves(void **state) {
  (void)state;
  char *x = xml_of("dgx-a100", 10, leaves_of_4);
  assert_int_equal(count(x, "<router id=\"leaf-r"), 8 * 3);
  assert_int_equal(count(x, "<link id=\"fabric-"), 8 * 3);
  assert_true(declares(x, "router", "leaf-r7-l2"));
  assert_non_null(strstr(x, "<route src=\"gpu79\" dst=\"leaf-r7-l2\""));
  assert_non_null(strstr(x, "<route src=\"gpu0\" dst=\"leaf-r0-l0\""));
  assert_non_null(strstr(x, "<route src=\"gpu39\" dst=\"leaf-r7-l1\"")); /* node 4: the second leaf */
  assert_references_resolve(x);
  free(x);
  bs_topo_params p;
  char err[256];
  assert_int_equal(bs_topo_defaults("dgx-a100", 10, &p, err, sizeof err), 0);
  leaves_of_4(&p);
  double port = p.link[BS_LINK_FABRIC].bw_Bps;
  assert_true(bs_topo_uplink_bw(&p, 0) == port * 4 / 2);
  assert_true(bs_topo_uplink_bw(&p, 1) == port * 4 / 2);
  assert_true(bs_topo_uplink_bw(&p, 2) == port * 2 / 2);
}

static void two_nics(bs_topo_params *p) { p->nics_per_node = 2; }

/* Two NICs per node of 8 GPUs: GPUs 0-3 on NIC 0, 4-7 on NIC 1, and a bypass route pinning every
 * pair that shares a NIC to NVLink, both ways. */
static void test_dgx_shared_nics(void **state) {
  (void)state;
  int K = 2;
  char *x = xml_of("dgx-a100", K, two_nics);
  assert_int_equal(count(x, "<link id=\"nic-"), 2 * K);
  assert_true(declares(x, "link", "nic-n1-nic1"));
  assert_int_equal(count(x, "<router id=\"leaf-r"), 2);
  assert_int_equal(count(x, "<bypassRoute "), K * 8 * 3);
  assert_non_null(strstr(x, "<bypassRoute src=\"gpu4\" dst=\"gpu7\"><link_ctn id=\"nvlink-n0-g4\""));
  assert_null(strstr(x, "<bypassRoute src=\"gpu3\" dst=\"gpu4\""));
  assert_non_null(strstr(x, "2 NICs per node (GPU i uses NIC i * 2 / 8)"));
  assert_references_resolve(x);
  free(x);
  bs_topo_params p;
  char err[256];
  assert_int_equal(bs_topo_defaults("dgx-a100", K, &p, err, sizeof err), 0);
  assert_int_equal(bs_topo_nics(&p), 8);
  for (int i = 0; i < 8; i++) assert_int_equal(bs_topo_nic_of(&p, i), i);
  two_nics(&p);
  assert_int_equal(bs_topo_nics(&p), 2);
  for (int i = 0; i < 8; i++) assert_int_equal(bs_topo_nic_of(&p, i), i < 4 ? 0 : 1);
}

/* Failed NICs: on the named node (or every node) a GPU whose NIC is down uses NIC j mod live. */
static void test_failed_nics(void **state) {
  (void)state;
  bs_topo_params p;
  char err[256];
  assert_int_equal(bs_topo_defaults("dgx-a100", 4, &p, err, sizeof err), 0);
  p.failed_node = 1;
  p.failed_nics = 3; /* NICs 5, 6, 7 of node 1 down: their GPUs on NICs 0, 1, 2 */
  for (int i = 0; i < 8; i++) {
    assert_int_equal(bs_topo_nic_of_node(&p, 1, i), i < 5 ? i : i % 5);
    assert_int_equal(bs_topo_nic_of_node(&p, 0, i), i);
  }
  p.failed_node = -1;
  for (int n = 0; n < 4; n++) assert_int_equal(bs_topo_nic_of_node(&p, n, 7), 2);
  p.failed_node = 1;
  char *x = bs_topo_xml(&p, err, sizeof err);
  assert_non_null(x);
  assert_non_null(strstr(x, "<route src=\"gpu15\" dst=\"leaf-r2-l0\"")); /* node 1, GPU 7: NIC 2 */
  assert_non_null(strstr(x, "<route src=\"gpu7\" dst=\"leaf-r7-l0\""));  /* node 0 untouched */
  /* GPUs 2 and 7 of node 1 share NIC 2 now: pinned to NVLink */
  assert_non_null(strstr(x, "<bypassRoute src=\"gpu10\" dst=\"gpu15\""));
  assert_null(strstr(x, "<bypassRoute src=\"gpu2\" dst=\"gpu7\""));
  assert_references_resolve(x);
  free(x);
}

/* a100-pcie-node: per node 8 hosts, 2 PCIe switches of 4 GPUs, 2 sockets each with a NIC link, one
 * socket link; one switch for the cluster. */
static void test_pcie_counts(void **state) {
  (void)state;
  int K = 3;
  char *x = xml_of("a100-pcie-node", K, NULL);
  assert_int_equal(count(x, "<host id=\"gpu"), 8 * K);
  assert_int_equal(count(x, "<router id=\"pciesw-n"), 2 * K);
  assert_int_equal(count(x, "<router id=\"root-n"), 2 * K);
  assert_int_equal(count(x, "<router id=\"switch\""), 1);
  assert_int_equal(count(x, "<link id=\"pcie-"), 8 * K);
  assert_int_equal(count(x, "<link id=\"hostbridge-"), 2 * K);
  assert_int_equal(count(x, "<link id=\"nic-"), 2 * K);
  assert_int_equal(count(x, "<link id=\"socket-"), K);
  assert_int_equal(count(x, "<route "), 8 * K + 2 * K + 2 * K + K);
  assert_non_null(strstr(x, "<route src=\"pciesw-n2-s1\" dst=\"root-n2-c1\""));
  assert_non_null(strstr(x,
                         "<route src=\"root-n0-c0\" dst=\"root-n0-c1\" symmetrical=\"YES\"><link_ctn "
                         "id=\"socket-n0-c0-c1\""));
  assert_references_resolve(x);
  free(x);
}

/* host: one host cpu running every rank, its shared-memory link, a full routing zone. */
static void test_host_platform(void **state) {
  (void)state;
  char *x = xml_of("host", 5, NULL); /* nodes ignored */
  assert_int_equal(count(x, "<host "), 1);
  assert_true(declares(x, "host", "cpu"));
  assert_int_equal(count(x, "<link id="), 1);
  assert_true(declares(x, "link", "shm-cpu"));
  assert_non_null(strstr(x, "routing=\"Full\""));
  assert_non_null(strstr(x, "1 node(s) x 2 GPU(s)"));
  assert_non_null(strstr(x, "Every rank runs on host cpu."));
  assert_null(strstr(x, "gpu<r>"));
  assert_references_resolve(x);
  free(x);
}

/* Each refusal of bs_topo_check, from a valid platform changed in one field, and its message. */
static void test_check_refusals(void **state) {
  (void)state;
  static const struct {
    const char *gen, *field, *msg;
    double value;
  } cases[] = {
    {"dgx-a100", "nodes", "topology dgx-a100: nodes (0) and GPUs per node (8) must be >= 1", 0},
    {"dgx-a100", "gpus_per_node", "topology dgx-a100: nodes (2) and GPUs per node (-1) must be >= 1", -1},
    {"dgx-a100", "nodes", "topology dgx-a100: 1048577 x 8 ranks is more than this generator supports", 1048577},
    {"dgx-a100", "nodes_per_leaf", "topology dgx-a100: nodes_per_leaf (0) must be >= 1 and oversubscription (1) >= 1",
     0},
    {"dgx-h100", "oversub", "topology dgx-h100: nodes_per_leaf (16) must be >= 1 and oversubscription (0.5) >= 1", 0.5},
    {"dgx-a100", "nics_per_node", "topology dgx-a100: 3 NICs per node must divide its 8 GPUs (dgx generators only)", 3},
    {"dgx-a100", "nics_per_node", "topology dgx-a100: 16 NICs per node must divide its 8 GPUs (dgx generators only)",
     16},
    {"a100-pcie-node", "nics_per_node",
     "topology a100-pcie-node: 2 NICs per node must divide its 8 GPUs (dgx generators only)", 2},
    {"a100-pcie-node", "gpus_per_pcie_switch", "topology a100-pcie-node: 3 GPUs per PCIe switch must divide 8 GPUs", 3},
    {"a100-pcie-node", "sockets_per_node", "topology a100-pcie-node: 3 CPU sockets must divide its 2 PCIe switches", 3},
    {"host", "nodes", "topology host: exactly one node and a positive CPU speed", 2},
    {"host", "host_speed", "topology host: exactly one node and a positive CPU speed", 0},
    {"dgx-a100", "nic_bw", "topology dgx-a100: link class nic needs a finite bandwidth > 0 and latency >= 0", 0},
    {"a100-pcie-node", "socket_lat",
     "topology a100-pcie-node: link class socket needs a finite bandwidth > 0 and latency >= 0", -1e-6},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    bs_topo_params p;
    char err[256] = "";
    assert_int_equal(bs_topo_defaults(cases[i].gen, 2, &p, err, sizeof err), 0);
    assert_int_equal(bs_topo_check(&p, err, sizeof err), 0);
    const char *f = cases[i].field;
    double v = cases[i].value;
    if (!strcmp(f, "nodes")) p.nodes = (int)v;
    else if (!strcmp(f, "gpus_per_node")) p.gpus_per_node = (int)v;
    else if (!strcmp(f, "nodes_per_leaf")) p.nodes_per_leaf = (int)v;
    else if (!strcmp(f, "oversub")) p.oversub = v;
    else if (!strcmp(f, "nics_per_node")) p.nics_per_node = (int)v;
    else if (!strcmp(f, "gpus_per_pcie_switch")) p.gpus_per_pcie_switch = (int)v;
    else if (!strcmp(f, "sockets_per_node")) p.sockets_per_node = (int)v;
    else if (!strcmp(f, "host_speed")) p.host_speed = v;
    else if (!strcmp(f, "nic_bw")) p.link[BS_LINK_NIC].bw_Bps = v;
    else if (!strcmp(f, "socket_lat")) p.link[BS_LINK_SOCKET].lat_s = v;
    else fail_msg("unknown field %s", f);
    err[0] = '\0';
    if (bs_topo_check(&p, err, sizeof err) != -1) fail_msg("case %zu (%s %s = %g) accepted", i, cases[i].gen, f, v);
    assert_string_equal(err, cases[i].msg);
    err[0] = '\0';
    assert_null(bs_topo_xml(&p, err, sizeof err)); /* the writer refuses the same */
    assert_string_equal(err, cases[i].msg);
  }
}

/* The fold's node counts: the smallest M dividing the nodes, above 2D, whole leaves on a dgx
 * with several; the quotient of one leaf; none for the host. */
static void test_fold_nodes(void **state) {
  (void)state;
  bs_topo_params p;
  char err[256];
  assert_int_equal(bs_topo_defaults("a100-pcie-node", 12, &p, err, sizeof err), 0);
  assert_int_equal(bs_topo_fold_nodes(&p, 1), 3); /* M = 2 is not above 2D = 2 */
  assert_int_equal(bs_topo_fold_nodes(&p, 0), 2); /* no node offset: any divisor from 2 */
  assert_int_equal(bs_topo_fold_nodes(&p, 2), 6); /* 3, 4 <= 2D = 4 */
  assert_int_equal(bs_topo_fold_nodes(&p, 6), 0); /* only 12 itself is above 12 */
  assert_int_equal(bs_topo_fold_nodes_from(&p, 1, 4), 4);
  assert_int_equal(bs_topo_fold_quotient(&p, 1), 0); /* not a dgx */
  assert_int_equal(bs_topo_defaults("dgx-a100", 64, &p, err, sizeof err), 0);
  assert_int_equal(bs_topo_fold_nodes(&p, 1), 32); /* whole leaves of 16: 2 of 4 */
  assert_int_equal(bs_topo_fold_nodes(&p, 16), 0); /* 32 is not above 2D = 32, 48 does not divide 64 */
  assert_int_equal(bs_topo_fold_quotient(&p, 1), 16);
  assert_int_equal(bs_topo_fold_quotient(&p, 7), 16);
  assert_int_equal(bs_topo_fold_quotient(&p, 8), 0); /* 2D >= a leaf */
  assert_int_equal(bs_topo_defaults("dgx-a100", 8, &p, err, sizeof err), 0);
  assert_int_equal(bs_topo_fold_quotient(&p, 1), 0); /* a single leaf */
  assert_int_equal(bs_topo_fold_nodes(&p, 1), 4);    /* one leaf: node symmetry only */
  assert_int_equal(bs_topo_defaults("host", 1, &p, err, sizeof err), 0);
  assert_int_equal(bs_topo_fold_nodes(&p, 0), 0);
}

/* A folded dgx with wrap_offset D routes a same-rail message that wraps round the folded ring of
 * nodes up and down its rail's uplink. */
static void test_fold_wrap_routes(void **state) {
  (void)state;
  bs_topo_params p;
  char err[256];
  assert_int_equal(bs_topo_defaults("dgx-a100", 4, &p, err, sizeof err), 0);
  p.wrap_offset = 1;
  char *x = bs_topo_xml(&p, err, sizeof err);
  assert_non_null(x);
  /* node 0 to node 3 (offset -1 wraps), node 3 to node 0: 2 x 8 GPUs */
  assert_int_equal(count(x, "<bypassRoute "), 2 * 8);
  assert_non_null(strstr(x,
                         "<bypassRoute src=\"gpu0\" dst=\"gpu24\"><link_ctn id=\"nic-n0-g0\" direction=\"UP\"/>"
                         "<link_ctn id=\"fabric-r0-l0\" direction=\"UP\"/>"));
  assert_references_resolve(x);
  free(x);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_link_classes),    cmocka_unit_test(test_generator_table),
    cmocka_unit_test(test_unknown_refused), cmocka_unit_test(test_dgx_counts),
    cmocka_unit_test(test_dgx_leaves),      cmocka_unit_test(test_dgx_shared_nics),
    cmocka_unit_test(test_failed_nics),     cmocka_unit_test(test_pcie_counts),
    cmocka_unit_test(test_host_platform),   cmocka_unit_test(test_check_refusals),
    cmocka_unit_test(test_fold_nodes),      cmocka_unit_test(test_fold_wrap_routes),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
