/*
 * cmd_topo.c — `burstsim topo NAME --nodes N`: prints a generated platform as
 * SimGrid XML (link speeds from the profile) for users to read, edit and pass
 * back as `topology = FILE.xml`.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "sim/profile.h"
#include "topologies/topo.h"

static void topo_usage(FILE *f) {
  fprintf(f,
          "usage: burstsim topo NAME [--nodes N] [--profile P] [--nodes-per-leaf L] [--oversub X]\n"
          "\n"
          "Prints the SimGrid platform XML of a generator: %s.\n"
          "Link bandwidths and latencies are the profile's (default: the topology's\n"
          "usual profile). Rank r runs on host gpu<r>, except on topology host: its\n"
          "one host, cpu, runs every rank (so does any platform with a single host).\n"
          "Links named CLASS-... take their values from the profile when simulated.\n"
          "\n"
          "  --nodes N           nodes (default 1; host: ignored)\n"
          "  --gpus G            ranks on the host (host topology only, default 2)\n"
          "  --profile P         profile name or JSON file\n"
          "  --nodes-per-leaf L  dgx: nodes under one leaf switch of a rail (default 16)\n"
          "  --oversub X         dgx: leaf oversubscription (default 1)\n",
          bs_topo_generator_names());
}

static const char *default_profile(const char *topo) {
  if (!strcmp(topo, "dgx-h100")) return "h100-sxm";
  if (!strcmp(topo, "a100-pcie-node")) return "a100-pcie-40gb";
  if (!strcmp(topo, "host")) return "host";
  return "a100-sxm4-80gb";
}

static int parse_pos(const char *s, long *v) {
  char *end;
  *v = strtol(s, &end, 10);
  return (*end || *v < 1 || *v > 1 << 20) ? -1 : 0;
}

int cmd_topo(int argc, char **argv) {
  const char *name = NULL, *profile = NULL;
  long nodes = 1, leaf = 0, gpus = 0;
  double oversub = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      topo_usage(stdout);
      return 0;
    }
    int has = i + 1 < argc;
    if ((!strcmp(a, "--nodes") || !strcmp(a, "--nodes-per-leaf") || !strcmp(a, "--gpus") ||
         !strcmp(a, "--profile") || !strcmp(a, "--oversub")) && !has) {
      fprintf(stderr, "burstsim topo: %s needs a value\n", a);
      return 2;
    }
    if (!strcmp(a, "--nodes")) {
      if (parse_pos(argv[++i], &nodes)) {
        fprintf(stderr, "burstsim topo: --nodes: '%s' is not a positive integer\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--nodes-per-leaf")) {
      if (parse_pos(argv[++i], &leaf)) {
        fprintf(stderr, "burstsim topo: --nodes-per-leaf: '%s' is not a positive integer\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--gpus")) {
      if (parse_pos(argv[++i], &gpus)) {
        fprintf(stderr, "burstsim topo: --gpus: '%s' is not a positive integer\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--oversub")) {
      char *end;
      oversub = strtod(argv[++i], &end);
      if (*end || !(oversub >= 1) || !isfinite(oversub)) {
        fprintf(stderr, "burstsim topo: --oversub: '%s' must be a number >= 1\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--profile")) {
      profile = argv[++i];
    } else if (a[0] == '-') {
      fprintf(stderr, "burstsim topo: unknown option '%s'\n", a);
      topo_usage(stderr);
      return 2;
    } else if (!name) {
      name = a;
    } else {
      fprintf(stderr, "burstsim topo: one topology name only\n");
      return 2;
    }
  }
  if (!name) {
    fprintf(stderr, "burstsim topo: no topology name (one of %s)\n", bs_topo_generator_names());
    return 2;
  }
  char err[600];
  bs_topo_params p;
  if (bs_topo_defaults(name, (int)nodes, &p, err, sizeof err)) {
    fprintf(stderr, "burstsim topo: %s\n", err);
    return 2;
  }
  if (leaf) p.nodes_per_leaf = (int)leaf;
  if (oversub) p.oversub = oversub;
  if (gpus && !strcmp(name, "host")) p.gpus_per_node = (int)gpus;
  bs_profile *prof = calloc(1, sizeof *prof);
  if (!prof) {
    fprintf(stderr, "burstsim topo: out of memory\n");
    return 1;
  }
  if (bs_profile_load(profile ? profile : default_profile(name), prof, err, sizeof err)) {
    fprintf(stderr, "burstsim topo: %s\n", err);
    free(prof);
    return 2;
  }
  bs_profile_apply_topo(prof, &p);
  free(prof);
  char *xml = bs_topo_xml(&p, err, sizeof err);
  if (!xml) {
    fprintf(stderr, "burstsim topo: %s\n", err);
    return 2;
  }
  int ok = fputs(xml, stdout) >= 0 && fflush(stdout) == 0;
  free(xml);
  if (!ok) {
    fprintf(stderr, "burstsim topo: cannot write the XML\n");
    return 1;
  }
  return 0;
}
