/*
 * fuzz_import.c — libFuzzer target for the readers of `burstsim import`'s framework configs: the
 * input's bytes as a torchtitan TOML file (src/toml_read.c) and as a NeMo YAML file
 * (src/import_nemo.c, libyaml underneath). Each must give its settings or an error naming a line,
 * never a crash, a leak or undefined behaviour; a setting read must carry a line inside the input.
 * Built and run by scripts/fuzz.sh; replayed over the corpus by ctest.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/import_nemo.h"
#include "src/toml_read.h"
#include "tests/fuzz/fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  /* TOML lines end at '\n'; YAML's also at '\r' and Unicode's breaks (NEL, LS, PS: bytes 0x85,
   * 0xA8, 0xA9 in UTF-8), an upper bound for the YAML reader's lines. */
  int lines = 1, yaml_lines = 1;
  for (size_t i = 0; i < size; i++) {
    unsigned char c = (unsigned char)text[i];
    lines += c == '\n';
    yaml_lines += c == '\n' || c == '\r' || c == 0x85 || c == 0xA8 || c == 0xA9;
  }
  char err[512] = "";
  bs_toml t;
  if (bs_toml_read(text, &t, err, sizeof err) == 0) {
    for (int i = 0; i < t.n; i++)
      if (t.v[i].line < 1 || t.v[i].line > lines) abort();
    bs_toml_free(&t);
  } else if (strncmp(err, "line ", 5) && strcmp(err, "out of memory")) abort();
  FILE *sink = fopen("/dev/null", "w");
  bs_import_out *log = calloc(1, sizeof *log);
  if (sink && log) {
    log->log = sink;
    bs_mg_args a;
    err[0] = '\0';
    if (bs_nemo_args(text, &a, log, err, sizeof err) == 0) {
      for (int i = 0; i < a.n; i++)
        if (a.v[i].line < 1 || a.v[i].line > yaml_lines) abort();
      bs_mg_args_free(&a);
    } else if (!err[0]) abort();
  }
  free(log);
  if (sink) fclose(sink);
  free(text);
  return 0;
}
