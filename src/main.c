/*
 * main.c — the `burstsim` command: dispatches to a subcommand.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "commands.h"

typedef struct {
  const char *name;
  int (*fn)(int, char **);
  const char *usage;
} command;

static const command commands[] = {
  {"sim", cmd_sim, "sim SCENARIO.ini [--set k=v]... [--profile P.json] [--out F.json] [--csv F.csv] [--trace F.json]"},
  {"search", cmd_search, "search SCENARIO.ini [--set k=v]... [--top K] [--out F.json] [--csv F.csv] [--report DIR]"},
  {"run", cmd_run, "run SCENARIO.ini [--set k=v]... [--out F.json] [--trace F.json]   (under mpirun -np G)"},
  {"calib", cmd_calib, "calib [--backend cpu|cuda] --out PROFILE.json                 (under mpirun -np G)"},
  {"validate", cmd_validate, "validate SCENARIO.ini [--profile P.json] [--out F.json]"},
  {"bench", cmd_bench, "bench kernels [--json F.json]                                (the CPU kernels)"},
  {"diff", cmd_diff, "diff A.json B.json [--out F.json]                         (two sim or search results)"},
  {"import", cmd_import,
   "import megatron|nemo|torchtitan FILE [--gpus N] [--out S.ini] (a scenario from a job's configuration)"},
  {"export", cmd_export,
   "export megatron|nemo|torchtitan RESULT.json [--point N] [--out F] (a point's launch configuration)"},
  {"topo", cmd_topo, "topo NAME [--nodes N] > platform.xml"},
  {"schema", cmd_schema, "schema result                                          (the result files' JSON Schema)"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
  fprintf(f, "burstsim %s — distributed long-sequence attention: run, calibrate, simulate\n\nusage:\n",
          BURSTSIM_VERSION);
  for (size_t i = 0; i < NCOMMANDS; i++) fprintf(f, "  burstsim %s\n", commands[i].usage);
  fprintf(f, "  burstsim --version\n\nEvery subcommand takes --help.\n");
}

/* A table or JSON that did not reach standard output (a full disk) is a failure too. */
static int finish(int rc) {
  errno = 0;
  if (fflush(stdout) || ferror(stdout)) {
    fprintf(stderr, "burstsim: standard output: write failed: %s\n", strerror(errno ? errno : EIO));
    return rc ? rc : 1;
  }
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
    printf("burstsim %s\n", BURSTSIM_VERSION);
    return 0;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (!strcmp(argv[1], commands[i].name)) return finish(commands[i].fn(argc - 1, argv + 1));
  fprintf(stderr, "burstsim: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
