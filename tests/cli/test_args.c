/*
 * test_args.c — the command-line parse step of every subcommand
 * (src/cmd_args.h): good command lines fill the options, and every bad flag
 * (not a number, out of range, missing value, given twice, unknown, a value
 * given to a switch) is an error naming the flag and the value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/cmd_args.h"

#define MAXW 80

/* Splits a space-separated command line into argv (words point into a static copy). */
static int split(const char *line, char **argv) {
  static char buf[1024];
  snprintf(buf, sizeof buf, "%s", line);
  int n = 0;
  for (char *t = strtok(buf, " "); t && n < MAXW; t = strtok(NULL, " ")) argv[n++] = t;
  return n;
}

typedef int (*parse_fn)(int, char **, void *, char *, size_t);

static union {
  bs_run_args run;
  bs_sim_args sim;
  bs_calib_args calib;
  bs_validate_args validate;
  bs_bench_args bench;
  bs_topo_args topo;
  bs_search_args search;
  bs_diff_args diff;
  bs_import_args import;
  bs_export_args export;
} opts;

static int parse(const char *line, char *err, size_t errlen) {
  char *argv[MAXW];
  int argc = split(line, argv);
  const char *cmd = argv[0];
  if (!strcmp(cmd, "run")) return bs_run_args_parse(argc, argv, &opts.run, err, errlen);
  if (!strcmp(cmd, "sim")) return bs_sim_args_parse(argc, argv, &opts.sim, err, errlen);
  if (!strcmp(cmd, "calib")) return bs_calib_args_parse(argc, argv, &opts.calib, err, errlen);
  if (!strcmp(cmd, "validate")) return bs_validate_args_parse(argc, argv, &opts.validate, err, errlen);
  if (!strcmp(cmd, "bench")) return bs_bench_args_parse(argc, argv, &opts.bench, err, errlen);
  if (!strcmp(cmd, "topo")) return bs_topo_args_parse(argc, argv, &opts.topo, err, errlen);
  if (!strcmp(cmd, "search")) return bs_search_args_parse(argc, argv, &opts.search, err, errlen);
  if (!strcmp(cmd, "diff")) return bs_diff_args_parse(argc, argv, &opts.diff, err, errlen);
  if (!strcmp(cmd, "import")) return bs_import_args_parse(argc, argv, &opts.import, err, errlen);
  if (!strcmp(cmd, "export")) return bs_export_args_parse(argc, argv, &opts.export, err, errlen);
  fail_msg("no command %s", cmd);
  return 0;
}

static void expect_ok(const char *line) {
  char err[512] = "";
  if (parse(line, err, sizeof err)) fail_msg("'%s' rejected: %s", line, err);
}

/* Fails unless the line is rejected with a message holding both needles. */
static void expect_bad(const char *line, const char *n1, const char *n2) {
  char err[512] = "";
  if (parse(line, err, sizeof err) != -1) fail_msg("'%s' accepted", line);
  if (!strstr(err, n1) || (n2 && !strstr(err, n2)))
    fail_msg("'%s': message '%s' lacks '%s' / '%s'", line, err, n1, n2 ? n2 : "");
}

static void test_run(void **state) {
  (void)state;
  expect_ok("run s.ini --threads 4 --timeout 2.5 --warmup 3 --tile 64 --verify --set a.b=1 --set=c.d=2 --out o.json");
  assert_string_equal(opts.run.scenario, "s.ini");
  assert_int_equal(opts.run.threads, 4);
  assert_true(opts.run.timeout == 2.5);
  assert_int_equal(opts.run.warmup, 3);
  assert_int_equal(opts.run.tile, 64);
  assert_int_equal(opts.run.verify, 1);
  assert_int_equal(opts.run.nsets, 2);
  assert_string_equal(opts.run.sets[1], "c.d=2");
  assert_string_equal(opts.run.out, "o.json");
  expect_ok("run s.ini --fault stall:1:2");
  assert_int_equal(opts.run.fault, 2);
  assert_int_equal(opts.run.fault_rank, 1);
  assert_int_equal(opts.run.fault_step, 2);
  expect_ok("run --help");
  assert_int_equal(opts.run.help, 1);
  expect_ok("run s.ini --backend cuda --comm nccl");
  assert_int_equal(opts.run.backend, 1);
  assert_int_equal(opts.run.comm, 1);
  expect_ok("run s.ini --backend cuda");
  assert_int_equal(opts.run.comm, 0);
  expect_bad("run s.ini --comm nccl", "--comm nccl", "needs --backend cuda");
  expect_bad("run s.ini --backend cuda --overlap-bench", "--overlap-bench", "CPU backend only");
  expect_bad("run s.ini --backend gpu", "--backend", "'gpu'");
  expect_bad("run s.ini --comm ucx --backend cuda", "--comm", "'ucx'");
  expect_ok("validate s.ini --backend cuda --comm nccl");
  assert_int_equal(opts.validate.backend, 1);
  expect_bad("validate s.ini --comm nccl", "--comm nccl", "needs --backend cuda");
  expect_bad("run s.ini --threads 100000", "--threads", "'100000' is out of range");
  expect_bad("run s.ini --threads abc", "--threads", "'abc' is not an integer");
  expect_bad("run s.ini --threads -4", "--threads", "'-4'");
  expect_bad("run s.ini --threads 4x", "--threads", "'4x'");
  expect_bad("run s.ini --threads=", "--threads", "''");
  expect_bad("run s.ini --warmup -1", "--warmup", "'-1'");
  expect_bad("run s.ini --tile -5", "--tile", "'-5'");
  expect_bad("run s.ini --timeout -1", "--timeout", "'-1'");
  expect_bad("run s.ini --timeout 0", "--timeout", "'0'");
  expect_bad("run s.ini --timeout nan", "--timeout", "'nan' is not a number");
  expect_bad("run s.ini --timeout inf", "--timeout", "'inf'");
  expect_bad("run s.ini --timeout", "--timeout", "needs a value");
  expect_bad("run s.ini --threads 2 --threads 3", "--threads", "given twice");
  expect_bad("run s.ini --verify=yes", "--verify", "takes no value");
  expect_bad("run s.ini --frobnicate", "unknown option '--frobnicate'", NULL);
  expect_bad("run s.ini t.ini", "one scenario file only", "t.ini");
  expect_bad("run --threads 2", "missing SCENARIO.ini", NULL);
  expect_bad("run s.ini --reps 5", "--reps", "--overlap-bench");
  expect_bad("run s.ini --fault stall:1", "--fault", "stall:1");
  expect_bad("run s.ini --fault hang:1:2", "--fault", "hang:1:2");
  expect_bad("run s.ini --fault exit:-1:2", "--fault", "'-1'");
  expect_bad("run s.ini --set", "--set", "needs a value");
  expect_bad("run s.ini --set=", "--set", "empty");
}

static void test_sim(void **state) {
  (void)state;
  expect_ok("sim s.ini --fold off --layers off --coll flow --nodes-per-leaf 8 --oversub 2 --csv c.csv --timeout 30");
  assert_int_equal(opts.sim.fold, 2);
  assert_int_equal(opts.sim.layers, 1);
  assert_int_equal(opts.sim.coll, 2);
  assert_int_equal(opts.sim.nodes_per_leaf, 8);
  assert_true(opts.sim.oversub == 2);
  assert_true(opts.sim.timeout == 30);
  assert_int_equal(opts.sim.quiet, 0);
  expect_ok("sim s.ini --quiet");
  assert_int_equal(opts.sim.quiet, 1);
  assert_true(opts.sim.max_events == -1); /* not given: the default bound */
  expect_bad("sim s.ini --quiet --quiet", "--quiet", "given twice");
  assert_int_equal(opts.sim.explain, 0);
  expect_ok("sim s.ini --explain");
  assert_int_equal(opts.sim.explain, 1);
  expect_bad("sim s.ini --explain --explain", "--explain", "given twice");
  expect_bad("sim s.ini --explain=yes", "--explain", "takes no value");
  assert_int_equal(opts.sim.memory, 0);
  expect_ok("sim s.ini --memory");
  assert_int_equal(opts.sim.memory, 1);
  expect_bad("sim s.ini --memory --memory", "--memory", "given twice");
  expect_bad("sim s.ini --fold maybe", "--fold", "'maybe' is not one of auto, on, off");
  assert_int_equal(opts.sim.micro_batches, 0);
  expect_ok("sim s.ini --micro-batches off");
  assert_int_equal(opts.sim.micro_batches, 1);
  expect_bad("sim s.ini --micro-batches on", "--micro-batches", "'on' is not one of auto, off");
  expect_bad("sim s.ini --coll ring", "--coll", "'ring'");
  expect_bad("sim s.ini --oversub 0.5", "--oversub", "'0.5'");
  expect_bad("sim s.ini --oversub inf", "--oversub", "'inf'");
  expect_bad("sim s.ini --nodes-per-leaf 0", "--nodes-per-leaf", "'0'");
  expect_bad("sim s.ini --profile", "--profile", "needs a value");
  expect_bad("sim s.ini --out a --out b", "--out", "given twice");
  expect_bad("sim s.ini --timeout -3", "--timeout", "'-3'");
  expect_ok("sim s.ini --max-events 1e10");
  assert_true(opts.sim.max_events == 1e10);
  expect_ok("sim s.ini --max-events 0");
  assert_true(opts.sim.max_events == 0);
  expect_bad("sim s.ini --max-events -1", "--max-events", "'-1'");
  expect_bad("sim s.ini --max-events nan", "--max-events", "'nan'");
  expect_bad("sim s.ini --max-events 1e19", "--max-events", "'1e19'");
  expect_bad("sim", "no scenario file", NULL);
}

static void test_calib(void **state) {
  (void)state;
  expect_ok("calib --out p.json --dtype fp32 --threads 2 --head-dim 64 --max-block 512 --ranks-per-node 2 --quick");
  assert_int_equal(opts.calib.fp32, 1);
  assert_int_equal(opts.calib.bf16, 0);
  assert_int_equal(opts.calib.primary_bf16, 0);
  assert_int_equal(opts.calib.max_block, 512);
  expect_ok("calib --out p.json");
  assert_int_equal(opts.calib.primary_bf16, 1);
  expect_bad("calib --out p.json --threads 0", "--threads", "'0'");
  expect_bad("calib --out p.json --threads 5000", "--threads", "'5000'");
  expect_bad("calib --out p.json --head-dim 1e9", "--head-dim", "'1e9'");
  expect_bad("calib --out p.json --dtype fp64", "--dtype", "'fp64'");
  expect_ok("calib --out p.json --backend cuda");
  assert_int_equal(opts.calib.backend, 1);
  expect_bad("calib --out p.json --backend rocm", "--backend", "'rocm'");
  expect_bad("calib --out p.json --dtype fp32 --primary bf16", "--primary bf16", "--dtype");
  expect_bad("calib --out p.json --no-kernels --no-links", "--no-kernels", "--no-links");
  expect_bad("calib --quick", "--out", "required");
  expect_bad("calib p.json", "'p.json'", "no positional");
  expect_bad("calib --out p.json --quick --quick", "--quick", "given twice");
}

static void test_validate(void **state) {
  (void)state;
  expect_ok("validate s.ini --np 2 --np 4 --warmup 0 --fail-factor 1.5 --keep --set a.b=1");
  assert_int_equal(opts.validate.nnp, 2);
  assert_int_equal(opts.validate.nps[1], 4);
  assert_int_equal(opts.validate.warmup, 0);
  assert_int_equal(opts.validate.keep, 1);
  expect_ok("validate s.ini");
  assert_int_equal(opts.validate.warmup, 1);
  assert_int_equal(opts.validate.keep, 0);
  expect_bad("validate s.ini --np 0", "--np", "'0'");
  expect_bad("validate s.ini --np 2.5", "--np", "'2.5'");
  expect_bad("validate s.ini --warmup 101", "--warmup", "'101'");
  expect_bad("validate s.ini --fail-factor 0", "--fail-factor", "'0'");
  expect_bad("validate s.ini --fail-factor -1", "--fail-factor", "'-1'");
  expect_bad(
    "validate s.ini --np 1 --np 1 --np 1 --np 1 --np 1 --np 1 --np 1 --np 1 --np 1 --np 1 --np 1 --np 1 --np 1 "
    "--np 1 --np 1 --np 1 --np 1",
    "--np", "at most 16");
  expect_bad("validate --keep", "SCENARIO.ini is required", NULL);
  char line[1024] = "validate s.ini";
  for (int i = 0; i < 33; i++) strcat(line, " --set a.b=1");
  expect_bad(line, "--set", "at most 32");
}

static void test_bench_topo(void **state) {
  (void)state;
  expect_ok("bench kernels --quick --threads 2 --heads 4 --json -");
  assert_int_equal(opts.bench.threads, 2);
  assert_string_equal(opts.bench.json, "-");
  expect_bad("bench", "expected 'kernels'", NULL);
  expect_bad("bench kernel", "expected 'kernels'", "'kernel'");
  expect_bad("bench kernels --threads 100000", "--threads", "'100000'");
  expect_bad("bench kernels --heads abc", "--heads", "'abc'");
  expect_bad("bench kernels extra", "'extra'", NULL);
  expect_ok("topo dgx-h100 --nodes 4 --nodes-per-leaf 2 --oversub 2");
  assert_int_equal(opts.topo.nodes, 4);
  expect_ok("topo host --gpus 4");
  assert_int_equal(opts.topo.gpus, 4);
  expect_bad("topo dgx-h100 --gpus 4", "--gpus", "host topology only");
  expect_bad("topo host --nodes 0", "--nodes", "'0'");
  expect_bad("topo host --nodes 2 --nodes 3", "--nodes", "given twice");
  expect_bad("topo", "no topology name", NULL);
  expect_bad("topo a b", "one topology name only", NULL);
}

/* search keeps its own words: a repeated flag's last value wins, "--out needs a value". */
static void test_search(void **state) {
  (void)state;
  expect_ok("search s.ini --top 3 --out a.json --csv a.csv --report dir --profile p --quiet --dry-run --top-only");
  assert_int_equal(opts.search.top, 3);
  assert_string_equal(opts.search.report, "dir");
  assert_true(opts.search.quiet && opts.search.dry_run && opts.search.top_only);
  assert_false(opts.search.walk_all);
  expect_ok("search s.ini --walk-all");
  assert_true(opts.search.walk_all && !opts.search.dry_run);
  expect_ok("search s.ini --set a.b=1 --set c.d=2 --top 2 --top 5 --out=b.json");
  assert_int_equal(opts.search.nsets, 2);
  assert_int_equal(opts.search.top, 5);
  assert_string_equal(opts.search.out, "b.json");
  expect_ok("search --help");
  assert_true(opts.search.help);
  expect_bad("search s.ini --top 0", "--top: '0' is not a count from 1 to 100000", NULL);
  expect_bad("search s.ini --top x", "--top: 'x' is not a count", NULL);
  expect_bad("search s.ini --out", "--out needs a value", NULL);
  expect_bad("search s.ini --quiet=1", "unknown option '--quiet=1'", NULL);
  expect_bad("search s.ini --frob", "unknown option '--frob'", NULL);
  expect_bad("search a.ini b.ini", "one scenario only ('a.ini' and 'b.ini')", NULL);
  expect_bad("search --top 3", "no scenario given", NULL);
}

/* diff, import, export: two files; a framework and a file; --gpus and --point in range. */
static void test_translate(void **state) {
  (void)state;
  expect_ok("diff a.json b.json --out d.json");
  assert_string_equal(opts.diff.a, "a.json");
  assert_string_equal(opts.diff.b, "b.json");
  assert_string_equal(opts.diff.out, "d.json");
  expect_bad("diff a.json", "two result files are needed", NULL);
  expect_bad("diff a.json b.json c.json", "'c.json': a third result file", NULL);
  expect_bad("diff a.json b.json --out", "--out", "needs a value");
  expect_ok("import megatron args.sh --gpus 64 --topology dgx-h100 --out s.ini");
  assert_int_equal(opts.import.gpus, 64);
  assert_string_equal(opts.import.file, "args.sh");
  assert_string_equal(opts.import.topology, "dgx-h100");
  expect_bad("import megatron args.sh --gpus 0", "--gpus", "'0'");
  expect_bad("import deepspeed x.json", "'deepspeed': megatron, nemo or torchtitan", NULL);
  expect_bad("import megatron", "no configuration file", NULL);
  expect_bad("import", "no framework", NULL);
  expect_ok("export megatron r.json --point 3 --out f.sh");
  assert_int_equal(opts.export.point, 3);
  expect_ok("export megatron r.json");
  assert_int_equal(opts.export.point, 1);
  expect_bad("export megatron r.json --point 0", "--point", "'0'");
  expect_bad("export deepspeed r.json", "'deepspeed': megatron, nemo or torchtitan", NULL);
  expect_bad("export megatron", "no result file", NULL);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_run),       cmocka_unit_test(test_sim),        cmocka_unit_test(test_calib),
    cmocka_unit_test(test_validate),  cmocka_unit_test(test_bench_topo), cmocka_unit_test(test_search),
    cmocka_unit_test(test_translate),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
}
