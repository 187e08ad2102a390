/* cmd_calib.c — `burstsim calib` (not built yet: this placeholder says so). */
#include <stdio.h>
#include "commands.h"

int cmd_calib(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "burstsim calib: not available in this build yet\n");
  return 2;
}
