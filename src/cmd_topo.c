/*
 * cmd_topo.c — `burstsim topo NAME --nodes N`: prints a generated platform as
 * SimGrid XML (link speeds from the profile) for users to read, edit and pass
 * back as `topology = FILE.xml`.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_args.h"
#include "commands.h"
#include "profile/profile.h"
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
          "  --nodes N           nodes (nvl72: racks of 72 GPUs), 1 .. 2^20 / GPUs per node: at most 2^20 ranks\n"
          "                      in all (default 1; host: ignored)\n"
          "  --gpus G            ranks on the host, 1 .. 2^20 (host topology only, default 2)\n"
          "  --profile P         profile name or JSON file\n"
          "  --nodes-per-leaf L  dgx, nvl72: nodes under one leaf switch of a rail, 1 .. 2^20 (default 16; nvl72: 8)\n"
          "  --oversub X         dgx, nvl72: leaf oversubscription, 1 .. 10^6 (default 1)\n",
          bs_topo_generator_names());
}

int cmd_topo(int argc, char **argv) {
  bs_topo_args A;
  char aerr[512];
  if (bs_topo_args_parse(argc, argv, &A, aerr, sizeof aerr)) {
    if (!A.name && !strcmp(aerr, "no topology name"))
      fprintf(stderr, "burstsim topo: no topology name (one of %s)\n", bs_topo_generator_names());
    else fprintf(stderr, "burstsim topo: %s\n", aerr);
    return 2;
  }
  if (A.help) {
    topo_usage(stdout);
    return 0;
  }
  const char *name = A.name, *profile = A.profile;
  long nodes = A.nodes, leaf = A.nodes_per_leaf, gpus = A.gpus;
  double oversub = A.oversub;
  char err[600];
  bs_topo_params p;
  if (bs_topo_defaults(name, (int)nodes, &p, err, sizeof err)) {
    fprintf(stderr, "burstsim topo: %s\n", err);
    return 2;
  }
  if (leaf) p.nodes_per_leaf = (int)leaf;
  if (oversub) p.oversub = oversub;
  if (gpus && !strcmp(name, "host")) p.gpus_per_node = (int)gpus;
  if ((long)p.nodes * p.gpus_per_node > 1L << 20) { /* the generators' limit: 2^20 ranks in all */
    fprintf(stderr,
            "burstsim topo: --nodes %d: %s has %d GPUs per node and a generated platform at most 2^20 = 1048576 "
            "ranks: --nodes at most %ld\n",
            p.nodes, name, p.gpus_per_node, (1L << 20) / p.gpus_per_node);
    return 2;
  }
  bs_profile *prof = calloc(1, sizeof *prof);
  if (!prof) {
    fprintf(stderr, "burstsim topo: out of memory\n");
    return 1;
  }
  if (bs_profile_load(profile ? profile : bs_topo_default_profile(name), prof, err, sizeof err)) {
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
