/*
 * validate.h — the pieces of `burstsim validate`: calibrate and run a
 * scenario for real by spawning `mpirun` on this machine, read the measured
 * results back, predict the same points with the simulator on the `host`
 * topology, and compare. Scenario parsing and printing stay in src/
 * (cmd_validate.c); this floor only spawns, reads, simulates and compares.
 */
#ifndef BURSTSIM_VALIDATE_H
#define BURSTSIM_VALIDATE_H

#include <stddef.h>
#include <stdio.h>
#include "plans/config.h"
#include "plans/result.h"

typedef struct {
  const char *exe;     /* the burstsim binary to spawn (NULL: this process's executable) */
  const char *mpirun;  /* NULL: "mpirun" from PATH */
  const char *workdir; /* profiles, results and logs of the spawned jobs */
  int full_calib;      /* 0: burstsim calib --quick */
  int warmup;          /* untimed executions before the measured one (burstsim run --warmup) */
  FILE *log;           /* progress (NULL = quiet) */
  /* --backend and --comm passed to the spawned calib (backend only) and run (NULL: not passed) */
  const char *backend, *comm;
} bs_validate_opts;

/* Spawns `mpirun -np G burstsim calib [--quick] --dtype D [--head-dim H] [--max-block B] --out PROFILE`
 * (head_dim, max_block 0: not passed). 0, or -1 with the log's tail in err. */
int bs_validate_calibrate(const bs_validate_opts *o, int G, const char *dtype, int head_dim, int64_t max_block,
                          const char *profile_out, char *err, size_t errlen);

/* The stop signal (SIGINT, SIGTERM, SIGHUP) that ended the last spawned job, 0 if none. The calibrate
 * and run jobs run in a process group of their own: such a signal to this process is forwarded to the
 * whole group, the job is waited for (its group killed 10 s after the signal if still there), and the
 * call returns -1 naming the signal. */
int bs_validate_stopped(void);

/* Spawns `mpirun -np G burstsim run SCENARIO --set ... --set parallel.gpus=G --out RESULTS`. */
int bs_validate_run(const bs_validate_opts *o, int G, const char *scenario, char **sets, int nsets,
                    const char *results_out, char *err, size_t errlen);

/*
 * Reads a result JSON written by `burstsim run` / `sim` (result contract of docs/design.md)
 * into *out (n entries, malloc'd; free each with bs_result_free, then free).
 * Only the fields compared here are filled: method, gpus, seq_len, causal,
 * layout, phase, lao, bwd_comm in cfg; times, bytes, memory, error.
 */
int bs_validate_read_results(const char *path, bs_result **out, int *n, char *err, size_t errlen);

/* The simulator's prediction of cfg on the host topology with the given profile. */
int bs_validate_predict(const bs_config *cfg, const char *profile, bs_result *out, char *err, size_t errlen);

/* Signed errors in percent ((predicted - measured) / measured); bytes: exact equality. */
typedef struct {
  double step, fwd, bwd, comm_exposed, peak;
  int bytes_exact; /* per-rank max sent and total both equal */
  double bytes;    /* % on the total */
} bs_validate_error;

void bs_validate_compare(const bs_result *measured, const bs_result *predicted, bs_validate_error *e);

/* 1 when the measured result's identifying fields match cfg (pairing check). */
int bs_validate_same_point(const bs_config *cfg, const bs_result *measured);

#endif
