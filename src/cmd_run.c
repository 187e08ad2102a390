/* cmd_run.c — `burstsim run` (not built yet: this placeholder says so). */
#include <stdio.h>
#include "commands.h"

int cmd_run(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "burstsim run: not available in this build yet\n");
  return 2;
}
