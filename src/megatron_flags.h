/*
 * megatron_flags.h — Megatron-LM's launch flags and burstsim's scenario keys, one table read both
 * ways: `burstsim import megatron` turns a pretrain_gpt.py command line into a scenario, and
 * `burstsim export megatron` turns a simulated point back into the flags. Each row says what a flag
 * becomes (a key, a switch's value, or a rule of the importer), or why it is ignored (no effect on
 * the step) or refused (something the simulator cannot model). Also the reader of an arguments
 * file: Megatron's example scripts (bash arrays, backslash continuations, NAME=value lines).
 */
#ifndef BURSTSIM_MEGATRON_FLAGS_H
#define BURSTSIM_MEGATRON_FLAGS_H

#include <stddef.h>

typedef enum {
  BS_MG_INT,    /* an integer value: key = value (key NULL: the importer uses it, no key of its own) */
  BS_MG_SWITCH, /* given: key = on; absent: key = off (NULL: nothing written) */
  BS_MG_RULE,   /* the importer's own rule (why: what it becomes) */
  BS_MG_IGNORE, /* no effect on the step time (why) */
  BS_MG_REFUSE  /* cannot be modelled (why) */
} bs_mg_kind;

typedef struct {
  const char *flag; /* without "--"; a name ending in '*' is a family (a prefix) */
  bs_mg_kind kind;
  const char *key;    /* INT, SWITCH: "section.key" */
  const char *on;     /* SWITCH: the key's value when given */
  const char *off;    /* SWITCH: its value when absent (NULL: not written) */
  const char *result; /* export: the result's path the flag is read back from (NULL: not exported) */
  const char *why;
} bs_mg_flag;

/* The table, in the order export prints. */
const bs_mg_flag *bs_mg_flags(int *n);
/* The row of a flag (without "--", '_' read as '-'), a family's row, or NULL. */
const bs_mg_flag *bs_mg_find(const char *flag);

/* One flag of an arguments file: its name (without "--", '_' as '-'), its value (the words after it
 * up to the next flag, joined by one space; "" for a switch) and its line. */
typedef struct {
  char name[64];
  char val[256];
  int line;
} bs_mg_arg;

typedef struct {
  bs_mg_arg *v;
  int n;
  long world; /* WORLD_SIZE=N in the file, 0 when absent */
} bs_mg_args;

/* Reads an arguments file's text: comments, quotes, backslash continuations, bash array brackets
 * and words that are no flag (torchrun, pretrain_gpt.py) are skipped; $NAME and ${NAME} are replaced
 * by a NAME=value set earlier in the file. 0, or -1 with a message in err. */
int bs_mg_args_read(const char *text, bs_mg_args *out, char *err, size_t errlen);
void bs_mg_args_free(bs_mg_args *a);

#endif
