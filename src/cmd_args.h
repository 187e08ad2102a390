/*
 * cmd_args.h — the options of each subcommand and the functions that parse
 * its command line into them. Parsing executes nothing (no file is opened,
 * no MPI call is made), so tests and the fuzz target (tests/fuzz/fuzz_args.c)
 * drive every flag apart from running. Each parse function returns 0 (with
 * out->help set for --help), or -1 with a message naming the flag and value
 * in err; the command prints it and exits 2.
 */
#ifndef BURSTSIM_CMD_ARGS_H
#define BURSTSIM_CMD_ARGS_H

#include <stddef.h>
#include <stdint.h>

#define BS_ARGS_MAX_SETS 256         /* --set options per command line */
#define BS_ARGS_MAX_THREADS 1024     /* kernel threads per rank: beyond any machine's cores x 4 */
#define BS_ARGS_MAX_TIMEOUT 604800.0 /* one week, in seconds */
#define BS_ARGS_MAX_NP 16
#define BS_ARGS_VALIDATE_MAX_SETS 32 /* validate passes them on to every spawned run */

typedef struct {
  int help;
  const char *scenario, *out, *trace;
  char *sets[BS_ARGS_MAX_SETS];
  int nsets;
  int verify, overlap, reps, threads, warmup;
  int64_t tile;
  double timeout;                    /* seconds; 0 = the runtime's default (120) */
  int fault, fault_rank, fault_step; /* test hook: 0 none, 1 exit, 2 stall */
  int backend, comm;                 /* --backend cpu|cuda, --comm mpi|nccl (0 = cpu, mpi) */
} bs_run_args;

typedef struct {
  int help;
  const char *scenario, *out, *csv, *trace, *profile;
  char *sets[BS_ARGS_MAX_SETS];
  int nsets;
  int fold;           /* 0 auto, 1 on, 2 off */
  int layers;         /* 0 auto, 1 off */
  int micro_batches;  /* 0 auto, 1 off */
  int coll;           /* 0 auto, 1 steps, 2 flow, 3 analytic */
  int nodes_per_leaf; /* 0 = default */
  double oversub;     /* 0 = default */
  double timeout;     /* under mpirun: 0 = no bound on other ranks' points, 120 s on start-up and gather */
  int quiet;          /* no progress lines on stderr */
  int explain;        /* a second table: where each point's step goes */
  int memory;         /* a table of each point's memory at the peak, term by term */
  int engine;         /* 0 auto, 1 simgrid, 2 direct */
  double max_events;  /* --max-events: a point's events bound (0: none; -1: not given, the default) */
  int no_cache;       /* --no-cache: every layer regenerates its attention's ops (bs_sim_opts.no_op_cache) */
} bs_sim_args;

typedef struct {
  int help;
  const char *out, *plots;
  int quick, no_links, no_kernels;
  int fp32, bf16, primary_bf16;
  int head_dim, threads, ranks_per_node;
  int64_t max_block;
  double timeout; /* 0 = 120 s on MPI start-up */
  int backend;    /* --backend cpu|cuda (0 = cpu) */
} bs_calib_args;

typedef struct {
  int help;
  const char *scenario, *profile, *out, *workdir;
  char *sets[BS_ARGS_MAX_SETS];
  int nsets;
  int nps[BS_ARGS_MAX_NP], nnp;
  int full_calib, fail_exact, warmup, keep;
  double fail_factor;
  int backend, comm; /* --backend cpu|cuda, --comm mpi|nccl, passed to calib and run (0 = cpu, mpi) */
} bs_validate_args;

typedef struct {
  int help;
  const char *json;
  int quick, threads, heads;
} bs_bench_args;

typedef struct {
  int help;
  const char *name, *profile;
  int nodes, nodes_per_leaf, gpus;
  double oversub;
} bs_topo_args;

#define BS_ARGS_SEARCH_MAX_SETS (BS_ARGS_MAX_SETS - 16) /* --set options of search */
#define BS_ARGS_SEARCH_MAX_TOP 100000

typedef struct {
  int help;
  const char *scenario, *out, *csv, *report, *profile;
  char *sets[BS_ARGS_MAX_SETS];
  int nsets;
  int top; /* K (default 10) */
  int quiet, dry_run, top_only;
  int walk_all;   /* walk every candidate first (bs_search_opts.walk_all): the reference of the lazy walks */
  int force;      /* search a space whose walk is estimated past BS_SEARCH_REFUSE_S */
  int no_cache;   /* every layer's attention ops regenerated (bs_sim_opts.no_op_cache) */
  double timeout; /* under mpirun: 0 = 120 s on start-up and the gather, no bound on other ranks' parts */
} bs_search_args;

/* diff A.json B.json [--out F.json] */
typedef struct {
  int help;
  const char *a, *b, *out;
} bs_diff_args;

/* import megatron ARGS.txt [--gpus N] [--topology T] [--out S.ini] */
typedef struct {
  int help;
  const char *framework, *file, *out, *topology;
  int gpus; /* 0: from the file */
} bs_import_args;

/* export megatron RESULT.json [--point N] [--out F] */
typedef struct {
  int help;
  const char *framework, *file, *out;
  int point; /* from 1 (default 1) */
} bs_export_args;

/* argv[0] is the command name ("run", ...), as main() passes it. */
int bs_run_args_parse(int argc, char **argv, bs_run_args *out, char *err, size_t errlen);
int bs_sim_args_parse(int argc, char **argv, bs_sim_args *out, char *err, size_t errlen);
int bs_calib_args_parse(int argc, char **argv, bs_calib_args *out, char *err, size_t errlen);
int bs_validate_args_parse(int argc, char **argv, bs_validate_args *out, char *err, size_t errlen);
int bs_bench_args_parse(int argc, char **argv, bs_bench_args *out, char *err, size_t errlen);
int bs_topo_args_parse(int argc, char **argv, bs_topo_args *out, char *err, size_t errlen);
/* search: a flag given twice keeps its last value; its messages are its own (cmd_args.c). */
int bs_search_args_parse(int argc, char **argv, bs_search_args *out, char *err, size_t errlen);
int bs_diff_args_parse(int argc, char **argv, bs_diff_args *out, char *err, size_t errlen);
int bs_import_args_parse(int argc, char **argv, bs_import_args *out, char *err, size_t errlen);
int bs_export_args_parse(int argc, char **argv, bs_export_args *out, char *err, size_t errlen);

#endif
