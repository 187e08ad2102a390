/*
 * import_out.h — what an importer of a framework's configuration builds: the scenario's keys (a
 * key set twice keeps its last value) and the log on stderr that names, line by line, every setting
 * mapped ("mapped"), ignored with why ("ignored"), refused as something the simulator cannot model
 * ("refused") or worth knowing ("note"). `burstsim import megatron` and `import torchtitan` share it,
 * so their logs read the same and their scenarios are written the same way.
 */
#ifndef BURSTSIM_IMPORT_OUT_H
#define BURSTSIM_IMPORT_OUT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

enum { BS_IMPORT_MAX_KEYS = 48 };

typedef struct {
  FILE *log;
  char key[BS_IMPORT_MAX_KEYS][40], val[BS_IMPORT_MAX_KEYS][64];
  int nkeys;
  int refused; /* settings refused: no scenario is written when above 0 */
  int full;    /* a key or a value did not fit: refused too */
} bs_import_out;

/* One line of the log: what ("mapped", "ignored", "refused", "note") then the text. "refused"
 * counts in out->refused. */
void bs_import_say(bs_import_out *out, const char *what, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void bs_import_vsay(bs_import_out *out, const char *what, const char *fmt, va_list ap)
  __attribute__((format(printf, 3, 0)));
/* Sets "section.key" to the formatted value. */
void bs_import_put(bs_import_out *out, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The value of a key set earlier, or NULL. */
const char *bs_import_get(const bs_import_out *out, const char *key);
/* The scenario: the comment line, then the keys by section (model, workload, parallel, cluster).
 * NULL when out of memory. */
char *bs_import_scenario(const bs_import_out *out, const char *comment, size_t *len);

#endif
