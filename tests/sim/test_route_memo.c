/*
 * test_route_memo.c — sim/route_memo.c against SimGrid on the generated
 * fabrics: on a DGX H100 rail fabric over three leaves, a DGX A100 whose GPUs
 * share NICs (4 per node), two NVL72 racks and three two-socket PCIe nodes,
 * the route latency and bandwidth remembered for every ordered pair of hosts
 * (and each host to itself) equal sg_host_get_route_latency and _bandwidth bit
 * for bit, when first asked (a miss) and when asked again (a hit), after the
 * table has grown past its first size. The pairs' figures differ by class
 * (NVLink, NIC, through the core, PCIe and the sockets), so a memo that
 * mixed up two pairs fails. SimGrid loads one platform per process: one
 * ctest per fabric.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/run_named.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>

#include "sim/direct_net.h"
#include "sim/load.h"
#include "sim/point.h"
#include "topologies/topo.h"

/* Loads generator `name` at `nodes` nodes (nics NICs per node, 0: the default; leaf nodes per leaf,
 * 0: the default) into SimGrid and checks every pair of its GPU hosts through a fresh memo. */
static void check_fabric(const char *name, int nodes, int nics, int leaf) {
  bs_topo_params p;
  char err[512];
  assert_int_equal(bs_topo_defaults(name, nodes, &p, err, sizeof err), 0);
  if (nics) p.nics_per_node = nics;
  if (leaf) p.nodes_per_leaf = leaf;
  char *xml = bs_topo_xml(&p, err, sizeof err);
  if (!xml) print_error("%s\n", err);
  assert_non_null(xml);
  char path[] = "/tmp/bs-route-memo-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  size_t len = strlen(xml);
  assert_int_equal(write(fd, xml, len), (ssize_t)len);
  close(fd);
  free(xml);

  int argc = 1;
  char arg0[] = "test_route_memo", *argv[] = {arg0, NULL};
  simgrid_init(&argc, argv);
  int rc = bs_sim_load_platform(path, err, sizeof err);
  unlink(path);
  if (rc) print_error("%s\n", err);
  assert_int_equal(rc, 0);
  bs_direct_seal(); /* routes exist once the platform is sealed */

  int n = nodes * p.gpus_per_node;
  sg_host_t *host = calloc((size_t)n, sizeof *host);
  assert_non_null(host);
  for (int i = 0; i < n; i++) {
    char h[32];
    snprintf(h, sizeof h, "gpu%d", i);
    host[i] = sg_host_by_name(h);
    assert_non_null(host[i]);
  }
  sim_ctx c;
  memset(&c, 0, sizeof c);
  double lat_seen[2] = {-1, -1};
  int classes = 0; /* distinct latencies met: the pairs are of several classes */
  for (int pass = 0; pass < 2; pass++)
    for (int a = 0; a < n; a++)
      for (int b = 0; b < n; b++) {
        double lat = -1, bw = -1;
        sim_route_figures(&c, host[a], host[b], &lat, &bw);
        double want_lat = sg_host_get_route_latency(host[a], host[b]);
        double want_bw = sg_host_get_route_bandwidth(host[a], host[b]);
        if (lat != want_lat || bw != want_bw)
          print_error("%s pass %d, gpu%d -> gpu%d: memo %.17g s %.17g B/s, SimGrid %.17g s %.17g B/s\n", name, pass, a,
                      b, lat, bw, want_lat, want_bw);
        assert_true(lat == want_lat);
        assert_true(bw == want_bw);
        if (a != b && lat != lat_seen[0] && lat != lat_seen[1] && classes < 2) lat_seen[classes++] = lat;
      }
  assert_int_equal(classes, 2);
  assert_non_null(c.route_memo);
  sim_route_memo_free(&c);
  assert_null(c.route_memo);
  free(host);
}

/* Three leaves of two nodes: NVLink inside a node, one leaf, and through the core. */
static void test_dgx_rails(void **state) {
  (void)state;
  check_fabric("dgx-h100", 6, 0, 2);
}

/* Two GPUs per NIC: a pair sharing one keeps its NVLink route (topo.c's bypass routes). */
static void test_shared_nics(void **state) {
  (void)state;
  check_fabric("dgx-a100", 3, 4, 2);
}

static void test_nvl72(void **state) {
  (void)state;
  check_fabric("nvl72", 2, 0, 0);
}

/* PCIe switches, host bridges, the socket link and the NIC of a two-socket node. */
static void test_pcie_sockets(void **state) {
  (void)state;
  check_fabric("a100-pcie-node", 3, 0, 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_dgx_rails),
    cmocka_unit_test(test_shared_nics),
    cmocka_unit_test(test_nvl72),
    cmocka_unit_test(test_pcie_sockets),
  };
  return bs_run_named("route_memo", tests, sizeof tests / sizeof tests[0], argc, argv, NULL, NULL);
}
