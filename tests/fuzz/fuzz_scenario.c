/*
 * fuzz_scenario.c — libFuzzer target for the scenario parser: any bytes as a
 * scenario file must give either points or an error message, never a crash,
 * a leak or undefined behaviour. Built and run by scripts/fuzz.sh.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/scenario.h"
#include "tests/fuzz/fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[64];
  if (!path[0]) snprintf(path, sizeof path, "/tmp/bs_fuzz_scenario.%ld.ini", (long)getpid());
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  /* the first line, if it looks like an override, is also fed to --set */
  char set[128] = "";
  const char *nl = memchr(data, '\n', size < 127 ? size : 127);
  if (nl && size > 4 && data[0] == '@') memcpy(set, data + 1, (size_t)(nl - (const char *)data) - 1);
  char *sets[] = {set};
  bs_scenario s;
  char err[1024];
  if (bs_scenario_load(path, sets, set[0] ? 1 : 0, &s, err, sizeof err) == 0) {
    if (s.npoints < 1) abort();
    bs_scenario_free(&s);
  } else if (err[0] == '\0') {
    abort(); /* an error must say what is wrong */
  }
  return 0;
}
