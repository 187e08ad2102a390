/*
 * result_fields.h — the result contract as data: one row per setting or figure of a point's
 * result, naming it in the result JSON (a dotted path), in the CSV (column name and position)
 * and in the stdout table (header, width, how the cell reads), with its unit and where its
 * value lives in bs_result. src/output.c writes all three outputs from these rows only, so a
 * figure has one description, and a new one is one new row.
 *
 * CSV column names are explicit per row (the csv member), not derived from the JSON path: the
 * experiments' scripts read the columns by name and position, and both stay as they are.
 */
#ifndef BURSTSIM_RESULT_FIELDS_H
#define BURSTSIM_RESULT_FIELDS_H

#include <stddef.h>
#include <stdint.h>
#include "plans/result.h"

/* How a row's value is stored, which also says how each output writes it. */
typedef enum {
  BS_FIELD_INT,   /* int member: JSON number, CSV integer */
  BS_FIELD_I64,   /* int64_t member: JSON number, CSV integer */
  BS_FIELD_REAL,  /* double member: JSON number, CSV %.*g with the row's digits */
  BS_FIELD_BOOL,  /* int member read as a flag: JSON true/false, CSV the integer (0/1) */
  BS_FIELD_CHARS, /* char array member: JSON string, CSV field (RFC 4180) */
  BS_FIELD_NAME,  /* a name the row's name() derives from the result (an enum's name) */
  BS_FIELD_RANKS, /* the per-rank array: one object per rank, its members bs_rank_fields */
  BS_FIELD_CALC   /* a figure calc() derives from the result (throughput); NaN: not defined, which
                     reads null in JSON, an empty CSV cell and "-" in the table */
} bs_field_kind;

/* A row's value as read from one result. */
typedef struct {
  bs_field_kind kind;
  int64_t i;     /* INT, I64, BOOL */
  double d;      /* REAL */
  const char *s; /* CHARS, NAME */
} bs_value;

typedef struct bs_field {
  const char *path; /* JSON: dotted path inside a result object; objects are made on first use */
  const char *unit; /* "s", "B", "tokens", ...; "" for names and flags */
  bs_field_kind kind;
  size_t off;                              /* where the value is (bs_result; bs_rank_result for rank rows) */
  const char *(*name)(const bs_result *r); /* BS_FIELD_NAME: the value */
  int (*present)(const bs_result *r);      /* JSON: NULL = always; else only when it returns 1 */
  /* CSV: every row has its column on every line, whether or not the JSON carries it */
  int col;         /* position from 1; 0 = no CSV column */
  const char *csv; /* column name */
  int digits;      /* BS_FIELD_REAL: significant digits */
  int quote;       /* text: always quoted (else only when it must be) */
  /* stdout table: columns in row order, separated by one space */
  const char *head; /* header; NULL = not in the table */
  int width;        /* negative: left-aligned */
  int key;          /* always in the table (the point's identity) */
  void (*cell)(const bs_result *r, bs_value v, char *dst, size_t n);
  /* added at the end, so the initialisers above keep their meaning */
  double (*calc)(const bs_result *r); /* BS_FIELD_CALC: the value */
  int figure; /* a figure of the simulation: a point without figures (refused or failed, bs_result_has_figures)
                 writes null in JSON, an empty CSV cell and "-" in the table */
  int vary;   /* a setting: its table column is shown only when the points of the sweep differ in it;
                 2: shown when news holds for some point, whatever the values */
  /* vary: NULL, or the column is shown only when this holds for some point too (a value that follows
   * another column is not news unless it stops following it) */
  int (*news)(const bs_result *r);
  /* the stdout table over a sweep's n points: shown, NULL or whether the column is shown at all;
   * header, NULL or the header to print instead of head (a label that depends on the points) */
  int (*shown)(const bs_result *r, int n);
  const char *(*header)(const bs_result *r, int n);
} bs_field;

/* A point has figures when it ran: no error (refused or failed). */
int bs_result_has_figures(const bs_result *r);
/* "ok", "refused" (the method or platform cannot run the point) or "failed". */
const char *bs_result_status(const bs_result *r);
/* Model FLOP/s per GPU over the profile's dense peak (device.peak_flops); NaN when either is unknown. */
double bs_result_mfu(const bs_result *r);

/* The rows of a result, in JSON order; the rows of one entry of its "ranks" array. */
const bs_field *bs_result_fields(int *n);
const bs_field *bs_rank_fields(int *n);
/* The value of row f in obj: a bs_result for result rows, a bs_rank_result for rank rows. */
bs_value bs_field_value(const bs_field *f, const void *obj);

#endif
