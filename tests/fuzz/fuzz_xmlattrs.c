/*
 * fuzz_xmlattrs.c — libFuzzer target for the scan of a user platform file's
 * attributes (sim/platform_attrs.c) that runs before SimGrid reads the file:
 * any bytes as the file must give 0 or an error naming the file ("cluster.topology:
 * FILE:LINE: ..."), never a crash, an over-read or undefined behaviour. Built
 * and run by scripts/fuzz.sh.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/platform.h"
#include "tests/fuzz/fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[] = "/tmp/burstsim-fuzz-xml-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return 0;
  int ok = write(fd, data, size) == (ssize_t)size;
  close(fd);
  char err[600] = "";
  int rc = ok ? bs_platform_check_attrs(path, err, sizeof err) : 0;
  unlink(path);
  if (rc != 0 && (rc != -1 || strncmp(err, "cluster.topology: ", 18) || !strstr(err, path))) {
    fprintf(stderr, "platform attrs: rc %d, message '%s'\n", rc, err);
    abort();
  }
  return 0;
}
