/*
 * replay.c — runs a fuzz target's LLVMFuzzerTestOneInput over files without
 * libFuzzer, so that ctest (and the sanitizer and valgrind builds) replays
 * every crash found so far (tests/fuzz/regress/TARGET) and the seed corpus:
 * each input must end cleanly, i.e. without the target's abort() or a crash.
 * replay FILE...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/fuzz/fuzz_target.h"

static int replay(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: %s: cannot open\n", path);
    return -1;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += r;
    if (n == cap) {
      uint8_t *b = realloc(buf, cap *= 2);
      if (!b) free(buf);
      buf = b;
    }
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "replay: %s: out of memory\n", path);
    return -1;
  }
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  printf("replay: %s: %zu bytes, ok\n", path, n);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: replay FILE...\n");
    return 2;
  }
  int bad = 0;
  for (int i = 1; i < argc; i++) bad |= replay(argv[i]) != 0;
  return bad;
}
