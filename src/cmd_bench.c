/* cmd_bench.c — `burstsim bench` (not built yet: this placeholder says so). */
#include <stdio.h>
#include "commands.h"

int cmd_bench(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "burstsim bench: not available in this build yet\n");
  return 2;
}
