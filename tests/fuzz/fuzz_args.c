/*
 * fuzz_args.c — libFuzzer target for the command-line parse step of every
 * subcommand (src/cmd_args.h): the input's bytes, split at '\n' and '\0' into
 * argv words, are parsed as the arguments of run, sim, calib, validate, bench,
 * topo and search. Each must give options or an error message, never a crash, a
 * leak, undefined behaviour or an option outside its documented range.
 * Built and run by scripts/fuzz.sh; replayed over the corpus by ctest.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/cmd_args.h"
#include "tests/fuzz/fuzz_target.h"

#define MAX_WORDS 64

static void check(int rc, const char *err) {
  if (rc != 0 && rc != -1) abort();
  if (rc == -1 && err[0] == '\0') abort(); /* an error must say what is wrong */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  char *argv[MAX_WORDS + 2];
  int argc = 1;
  argv[0] = "cmd";
  for (size_t i = 0, start = 0; i <= size && argc <= MAX_WORDS; i++)
    if (i == size || text[i] == '\n' || text[i] == '\0') {
      text[i] = '\0';
      if (i > start || i < size) argv[argc++] = text + start;
      start = i + 1;
    }
  argv[argc] = NULL;
  char err[512];
  bs_run_args r;
  int rc = bs_run_args_parse(argc, argv, &r, err, sizeof err);
  check(rc, err);
  if (rc == 0 && !r.help &&
      (!r.scenario || r.threads < 0 || r.threads > BS_ARGS_MAX_THREADS || r.warmup < 0 || r.tile < 0 || r.timeout < 0 ||
       r.nsets > BS_ARGS_MAX_SETS))
    abort();
  bs_sim_args s;
  rc = bs_sim_args_parse(argc, argv, &s, err, sizeof err);
  check(rc, err);
  if (rc == 0 && !s.help && (!s.scenario || s.fold < 0 || s.fold > 2 || s.coll < 0 || s.coll > 3 || s.oversub < 0))
    abort();
  bs_calib_args c;
  rc = bs_calib_args_parse(argc, argv, &c, err, sizeof err);
  check(rc, err);
  if (rc == 0 && !c.help &&
      (!c.out || (c.no_kernels && c.no_links) || c.threads < 0 || c.threads > BS_ARGS_MAX_THREADS))
    abort();
  bs_validate_args v;
  rc = bs_validate_args_parse(argc, argv, &v, err, sizeof err);
  check(rc, err);
  if (rc == 0 && !v.help && (!v.scenario || v.nnp > BS_ARGS_MAX_NP || v.warmup < 0 || v.warmup > 100)) abort();
  bs_bench_args b;
  rc = bs_bench_args_parse(argc, argv, &b, err, sizeof err);
  check(rc, err);
  if (rc == 0 && !b.help && (b.threads < 0 || b.threads > BS_ARGS_MAX_THREADS || b.heads < 0)) abort();
  bs_topo_args t;
  rc = bs_topo_args_parse(argc, argv, &t, err, sizeof err);
  check(rc, err);
  if (rc == 0 && !t.help && (!t.name || t.nodes < 1)) abort();
  bs_search_args q;
  rc = bs_search_args_parse(argc, argv, &q, err, sizeof err);
  check(rc, err);
  if (rc == 0 && !q.help &&
      (!q.scenario || q.top < 1 || q.top > BS_ARGS_SEARCH_MAX_TOP || q.nsets > BS_ARGS_SEARCH_MAX_SETS))
    abort();
  free(text);
  return 0;
}
