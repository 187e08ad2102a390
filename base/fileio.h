/*
 * fileio.h — the one way burstsim writes and reads whole files. Every command's
 * outputs (results, CSV, traces, profiles, plots, bench rows) go through it, so
 * that every writer keeps the same promises:
 *
 *   "-"                     standard output;
 *   a regular file or a     written to a temporary file in the target's own
 *   missing path            directory, fsync'd and renamed over the target; a
 *                           symlink is followed (its target is written, the link
 *                           kept) and an existing file keeps its permission bits;
 *   a character device or   written in place (no rename, no truncation):
 *   a FIFO                  /dev/null, /dev/stdout, a named pipe;
 *   anything else           refused: directories, sockets, block devices, and
 *                           read-only regular files (never renamed over).
 *
 * A temporary file is removed on every error path and, through a handler for
 * SIGINT, SIGTERM and SIGHUP, when the process is stopped by one of these while
 * it writes. Only an uncatchable kill (SIGKILL) can leave a ".NAME.tmp-*" file.
 */
#ifndef BURSTSIM_BASE_FILEIO_H
#define BURSTSIM_BASE_FILEIO_H

#include <stddef.h>
#include <stdio.h>

/* One output being written. */
typedef struct bs_outfile bs_outfile;

/* Opens path for writing as described above; NULL with "PATH: why" in err. */
bs_outfile *bs_out_open(const char *path, char *err, size_t errlen);
/* The stream to write to. */
FILE *bs_out_stream(bs_outfile *o);
/* The temporary file being written (to check it before it replaces the target), or NULL
 * when the output is written in place (stdout, a device, a FIFO). */
const char *bs_out_temp_path(const bs_outfile *o);
/* Flushes, syncs and renames into place; frees o. On any failure nothing replaces the target,
 * the temporary file is removed and -1 comes back with "PATH: why" in err. */
int bs_out_commit(bs_outfile *o, char *err, size_t errlen);
/* Gives up: closes and removes the temporary file; frees o. */
void bs_out_abort(bs_outfile *o);

/* The whole of data to path in one go (open, write, commit). */
int bs_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* Whether path can be written as described above, creating nothing: the path is "-", a
 * device or FIFO that can be opened for writing, or a writable regular file or a missing
 * name in an existing writable directory. 0, or -1 with "PATH: why" in err. */
int bs_out_check(const char *path, char *err, size_t errlen);

/* Whether path is a directory that files can be written into, or a missing name that can be
 * created as one (an existing writable parent directory). Creates nothing. */
int bs_out_check_dir(const char *path, char *err, size_t errlen);

/* A path with what it is to the command: {"--out", path}, {"the scenario", path}. */
typedef struct {
  const char *what;
  const char *path; /* NULL = not given (an input may also be ""; an empty output is an error) */
} bs_path_role;

/* bs_out_check on every output, then refuses an output that is the same file as an input
 * or as another output (by device and inode when the file exists, by its resolved name when
 * it does not; devices and FIFOs may be shared by outputs). Two outputs on "-" are refused.
 * 0, or -1 with "WHAT PATH: why" in err. */
int bs_out_check_all(const bs_path_role *outs, int nout, const bs_path_role *ins, int nin, char *err, size_t errlen);

/* Reads a whole file (regular file or FIFO; a directory is an error) and NUL-terminates it.
 * *len (when not NULL) gets its length. NULL with "PATH: why" in err, and errno set to why the
 * file did not open, or to 0 when it opened and could not be read (a caller can tell the two). */
char *bs_read_file(const char *path, size_t *len, char *err, size_t errlen);

#endif
