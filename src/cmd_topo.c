/* cmd_topo.c — `burstsim topo` (not built yet: this placeholder says so). */
#include <stdio.h>
#include "commands.h"

int cmd_topo(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "burstsim topo: not available in this build yet\n");
  return 2;
}
