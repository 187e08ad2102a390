/* cmd_sim.c — `burstsim sim` (not built yet: this placeholder says so). */
#include <stdio.h>
#include "commands.h"

int cmd_sim(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "burstsim sim: not available in this build yet\n");
  return 2;
}
