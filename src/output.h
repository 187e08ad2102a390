/*
 * output.h — results out: the result JSON of docs/design.md, CSV for sweeps and the
 * stdout table, all three from the field descriptions of result_fields.h. Files are
 * written through base/fileio.h, so nothing is ever left half-written.
 */
#ifndef BURSTSIM_OUTPUT_H
#define BURSTSIM_OUTPUT_H

#include <stdio.h>
#include <stddef.h>
#include "base/fileio.h"
#include "plans/result.h"
#include "scenario.h"

/* {"tool","version","mode","results":[...]} to path ("-" = stdout). */
int bs_output_json(const char *path, const char *mode, const bs_result *r, int n, char *err, size_t errlen);
/* The same document as a cJSON tree (for a command that adds to it; the caller deletes it),
 * and the writer of such a tree (one file write; "-" = stdout). */
struct cJSON;
struct cJSON *bs_output_json_tree(const char *mode, const bs_result *r, int n);
int bs_output_json_write(const char *path, const struct cJSON *root, char *err, size_t errlen);
int bs_output_csv(const char *path, const bs_result *r, int n, char *err, size_t errlen);
/* The human table: a column per field with a table header (method, GPUs, seq, step, fwd,
 * bwd, exposed %, bytes per rank, peak GiB, OOM); a failed point shows its error. */
void bs_output_table(FILE *f, const bs_result *r, int n);
/* Where a command's human table and summary go: stderr when one of its n outputs (NULL: not given)
 * is standard output ("-"), so `--out - | jq` reads the JSON alone; stdout otherwise. */
FILE *bs_output_table_stream(const char *const *outs, int n);

/* The --explain table of `burstsim sim`: per point, its key columns and the settings that vary, the
 * critical rank (the one that finished last), the step in ms and each part of explain (compute by
 * kernel kind, launch, exposed communication by link class, waiting for peers) in ms and % of the
 * step; a part that no point has is left out. */
void bs_output_explain_table(FILE *f, const bs_result *r, int n);
/* The --memory table of `burstsim sim`: per point, its key columns and the settings that vary, and
 * the memory at the peak of the rank with the largest one, each term (memory.breakdown's classes, a
 * class no point holds left out), the allocator's reserve, the peak, the reserved total and the
 * capacity, in GiB per GPU. */
void bs_output_memory_table(FILE *f, const bs_result *r, int n);

/* Checks a command's outputs before any work, creating nothing (bs_out_check_all): each
 * writable, none the same file as an input (the scenario file, the --profile file, every
 * point's profile and platform XML; sc and profile may be NULL) or as another output.
 * 0, or -1 with "FLAG PATH: why" in err. */
int bs_output_precheck(const bs_path_role *outs, int nout, const char *scenario_path, const bs_scenario *sc,
                       const char *profile, char *err, size_t errlen);

#endif
