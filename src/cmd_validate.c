/* cmd_validate.c — `burstsim validate` (not built yet: this placeholder says so). */
#include <stdio.h>
#include "commands.h"

int cmd_validate(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "burstsim validate: not available in this build yet\n");
  return 2;
}
