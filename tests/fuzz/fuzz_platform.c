/*
 * fuzz_platform.c — libFuzzer target for the topology path: the scenario's
 * cluster.topology, parallel.gpus, cluster.nodes and parallel.ranks_per_node,
 * the options --nodes-per-leaf and --oversub and a profile's link values go
 * through bs_platform_resolve; an accepted platform is generated as XML (full
 * size and every fold the simulator could pick). Each step must give a result
 * or an error message, never a crash or undefined behaviour, and a generated
 * platform must hold exactly one host gpu<r> per rank (or the one shared
 * host) and no negative or non-finite value. Built and run by
 * scripts/fuzz.sh.
 *
 * Input: text lines "key value" (keys below; unknown lines are ignored), so
 * seeds stay readable: topology, gpus, nodes, rpn, leaf, oversub, offset,
 * host_speed, and bw.CLASS / lat.CLASS for the link classes of topo.h.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/platform.h"
#include "tests/fuzz/fuzz_target.h"

#define MAX_RANKS_XML 4096 /* larger platforms are valid but slow to print per input */

/* Occurrences of pat in s, in one pass: strstr from each match measured the rest of the XML again
 * under ASan (its interceptor takes strlen of the haystack), quadratic for thousands of hosts. */
static int count(const char *s, const char *pat) {
  size_t len = strlen(s), m = strlen(pat);
  int n = 0;
  for (size_t i = 0; m && i + m <= len; i++)
    if (s[i] == pat[0] && !memcmp(s + i, pat, m)) n++;
  return n;
}

/* Generates nodes x per_node (with a fold wrap) and checks one gpu host per rank. */
static void check_xml(const bs_platform_spec *ps, int nodes, int per_node, int wrap) {
  char err[512] = "";
  char *xml = bs_platform_xml(ps, nodes, per_node, wrap, err, sizeof err);
  if (!xml) {
    if (!err[0]) abort();
    return;
  }
  char last[48];
  snprintf(last, sizeof last, "<host id=\"gpu%d\"", nodes * per_node - 1);
  int hosts_ok = ps->shared_host ? count(xml, "<host id=") == 1
                                 : count(xml, "<host id=\"gpu") == nodes * per_node && strstr(xml, last);
  if (!hosts_ok || !strstr(xml, "</platform>") || strstr(xml, "\"nan") || strstr(xml, "\"-nan") ||
      strstr(xml, "\"inf") || strstr(xml, "\"-inf") || strstr(xml, "\"-")) {
    fprintf(stderr, "generated platform %d x %d (wrap %d) is wrong:\n%.2000s\n", nodes, per_node, wrap, xml);
    abort();
  }
  free(xml);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char text[8192];
  if (size >= sizeof text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  bs_config cfg;
  bs_config_default(&cfg);
  bs_sim_opts opts;
  memset(&opts, 0, sizeof opts);
  static bs_profile prof;
  memset(&prof, 0, sizeof prof);
  snprintf(prof.name, sizeof prof.name, "fuzz");
  int offset = 1;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char key[32], val[256];
    if (sscanf(line, "%31s %255s", key, val) != 2) continue;
    double x = strtod(val, NULL);
    long i = strtol(val, NULL, 10);
    int iv = i > INT32_MAX ? INT32_MAX : i < INT32_MIN ? INT32_MIN : (int)i;
    if (!strcmp(key, "topology")) snprintf(cfg.cluster.topology, sizeof cfg.cluster.topology, "%s", val);
    else if (!strcmp(key, "gpus")) cfg.par.gpus = iv;
    else if (!strcmp(key, "nodes")) cfg.cluster.nodes = iv;
    else if (!strcmp(key, "rpn")) cfg.par.ranks_per_node = iv;
    else if (!strcmp(key, "leaf")) opts.nodes_per_leaf = iv;
    else if (!strcmp(key, "oversub")) opts.oversub = x;
    else if (!strcmp(key, "offset")) offset = iv;
    else if (!strcmp(key, "host_speed")) prof.host_speed = x, prof.host_cores = 1;
    else if (!strncmp(key, "bw.", 3) || !strncmp(key, "lat.", 4)) {
      int c = bs_link_class_of(key[0] == 'b' ? key + 3 : key + 4);
      if (c < 0) { /* "bw.nvlink" has no '-': look the class up by name */
        for (int k = 0; k < BS_LINK_CLASS_COUNT; k++)
          if (!strcmp(key[0] == 'b' ? key + 3 : key + 4, bs_link_class_name((bs_link_class)k))) c = k;
      }
      if (c < 0) continue;
      if (key[0] == 'b') prof.link[c].bw_Bps = x;
      else prof.link[c].lat_s = x;
      prof.link[c].present = 1;
    } else if (!strcmp(key, "link")) {
      (void)bs_link_class_of(val);
    }
  }
  bs_platform_spec ps;
  char err[512] = "";
  if (bs_platform_resolve(&cfg, &opts, &prof, &ps, err, sizeof err)) {
    if (!err[0]) abort();
    return 0;
  }
  if (!ps.generated) {
    if (!ps.file[0] || ps.ranks_per_node < 1) abort();
    return 0;
  }
  const bs_topo_params *tp = &ps.topo;
  if ((int64_t)tp->nodes * tp->gpus_per_node != cfg.par.gpus) abort();
  if (cfg.par.gpus > MAX_RANKS_XML) return 0;
  check_xml(&ps, tp->nodes, tp->gpus_per_node, 0);
  int M = bs_topo_fold_nodes(tp, offset);
  if (M) {
    if (M >= tp->nodes || tp->nodes % M) abort();
    check_xml(&ps, M, tp->gpus_per_node, 0);
  }
  int Mq = bs_topo_fold_quotient(tp, offset);
  if (Mq) {
    if (Mq >= tp->nodes) abort();
    check_xml(&ps, Mq, tp->gpus_per_node, offset);
  }
  return 0;
}
