/*
 * toml_read.h — the part of TOML that framework configuration files use (torchtitan's train
 * configs): [section] headers, key = value lines, basic and literal strings, numbers, booleans and
 * arrays (on one line or several), # comments. Each value is kept as written (a string without its
 * quotes, an array as its text) with its line, so an importer can name the line of every setting.
 * What this reader does not take (multi-line strings, inline tables, array-of-tables headers) is an
 * error naming the line, never a silent skip; nor is a value longer than the table's field.
 */
#ifndef BURSTSIM_TOML_READ_H
#define BURSTSIM_TOML_READ_H

#include <stddef.h>

typedef struct {
  char section[64]; /* "" before the first header */
  char key[64];
  char val[256]; /* a string without its quotes; an array as written, "[...]" */
  int is_string;
  int line;
} bs_toml_kv;

typedef struct {
  bs_toml_kv *v;
  int n;
} bs_toml;

/* 0, or -1 with "line N: ..." in err. */
int bs_toml_read(const char *text, bs_toml *out, char *err, size_t errlen);
void bs_toml_free(bs_toml *t);
/* The last setting of section.key, or NULL. */
const bs_toml_kv *bs_toml_get(const bs_toml *t, const char *section, const char *key);

#endif
