/*
 * args.h — command-line flag parsing shared by every subcommand: a cursor
 * over argv and typed readers ("an integer in [lo, hi] for --threads") that
 * fill an error naming the flag and the value instead of printing, so that
 * each command's parse step (src/cmd_args.c) runs apart from the command and
 * can be unit-tested and fuzzed. Flags take their value as "--flag V" or
 * "--flag=V"; a flag given twice is an error unless it is repeatable.
 */
#ifndef BURSTSIM_ARGS_H
#define BURSTSIM_ARGS_H

#include <stddef.h>
#include <stdint.h>

#define BS_ARGS_MAX_SEEN 32

typedef struct {
  int argc;
  char **argv;
  int i;            /* the word being read */
  const char *word; /* argv[i] */
  const char *flag; /* the flag matched last (for messages) */
  const char *val;  /* its value, when it takes one */
  char *err;
  size_t errlen;
  const char *seen[BS_ARGS_MAX_SEEN]; /* flags given once so far */
  int nseen;
} bs_args;

enum { BS_ARG_SWITCH = 0, BS_ARG_VALUE = 1, BS_ARG_REPEAT = 2 };

/* Starts reading argv[first..argc-1]; messages go to err. */
void bs_args_init(bs_args *a, int argc, char **argv, int first, char *err, size_t errlen);

/* 1 and a->word set while words remain (each call moves past the previous word and its value). */
int bs_args_next(bs_args *a);

/*
 * Does the current word name `flag`? mode: BS_ARG_SWITCH (no value),
 * BS_ARG_VALUE (a value, in the next word or after '='), optionally
 * | BS_ARG_REPEAT. Returns 1 on a match (a->val set for a value), 0 when the
 * word is another flag, -1 on a match that is wrong (missing value, a value
 * given to a switch, a repeated flag) with the message in err.
 */
int bs_args_flag(bs_args *a, const char *flag, int mode);

/* 1 when the current word is a positional argument (not starting with '-', or exactly "-"). */
int bs_args_positional(const bs_args *a);

/* An error for the current word: an unknown option (or an extra positional argument when what != NULL). */
int bs_args_unknown(bs_args *a, const char *what);

/* Typed readers of a->val for a->flag: 0, or -1 with "--flag: 'V' ..." in err. */
int bs_args_int(bs_args *a, long lo, long hi, int *out);
int bs_args_int64(bs_args *a, int64_t lo, int64_t hi, int64_t *out);
int bs_args_double(bs_args *a, double lo, double hi, double *out);
/* names: NULL-terminated; *out = index of the match. */
int bs_args_enum(bs_args *a, const char *const *names, int *out);
/* A path or name: not empty (and no longer than 4095 bytes, PATH_MAX). */
int bs_args_path(bs_args *a, const char **out);

/* Formats an error into a->err; returns -1. */
int bs_args_fail(bs_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
