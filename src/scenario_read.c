/*
 * scenario_read.c — a scenario file and the --set overrides into one entry
 * per key (the values of its list, checked by the key's setter, and where they
 * were given).
 *
 * inih does the INI syntax; this file hands it the lines and takes its keys.
 * Unknown sections and keys, duplicates, values out of range, NUL bytes and
 * files that cannot be read are errors that name FILE:LINE and the key.
 * Overrides from --set replace the file's value and are reported as
 * "--set[i]" when wrong. The file is read whole first, so a line may be as
 * long as the file (at most MAX_FILE bytes) and inih is handed one whole line
 * per call.
 */
#include "scenario_impl.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void entry_clear(entry *e) {
  for (int i = 0; i < e->nvalues; i++) free(e->values[i]);
  e->nvalues = 0;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
  return s;
}

/* Splits a comma list into e->values; checks each value with the key's setter. */
static int entry_fill(entry *e, const key_def *def, const char *value, const char *where, char *err, size_t errlen) {
  entry_clear(e);
  e->def = def;
  snprintf(e->where, sizeof e->where, "%s", where);
  int count = 0;
  for (const char *p = value; *p; p++) count += (*p == ',');
  if (count + 1 > MAX_VALUES) {
    snprintf(err, errlen, "%s: %s.%s: more than %d values in the list", where, def->section, def->key, MAX_VALUES);
    return -1;
  }
  char *buf = strdup(value);
  if (!buf) {
    snprintf(err, errlen, "%s: out of memory", where);
    return -1;
  }
  /* Walk by hand (strtok would drop empty fields; "a,,b" is an error). */
  char *p = buf;
  for (;;) {
    char *comma = strchr(p, ',');
    if (comma) *comma = '\0';
    char *v = trim(p);
    char why[256] = "";
    bs_config scratch;
    bs_config_default(&scratch);
    if (*v == '\0') {
      snprintf(err, errlen, "%s: %s.%s: empty value in the list", where, def->section, def->key);
      break;
    }
    if (def->set(&scratch, v, why, sizeof why)) {
      snprintf(err, errlen, "%s: %s.%s: %s", where, def->section, def->key, why);
      break;
    }
    e->values[e->nvalues] = strdup(v);
    if (!e->values[e->nvalues]) {
      snprintf(err, errlen, "%s: out of memory", where);
      break;
    }
    e->nvalues++;
    if (!comma) {
      free(buf);
      return 0;
    }
    p = comma + 1;
  }
  free(buf);
  entry_clear(e);
  return -1;
}

/*
 * Reads the whole scenario file. A directory, a read error, a file over
 * MAX_FILE bytes and a NUL byte are errors naming the path (and the line of the
 * NUL); a UTF-8 byte order mark is dropped. *longest is the longest line.
 */
char *scn_read_scenario(const char *path, size_t *longest, int *regular, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  struct stat sb;
  if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
    snprintf(err, errlen, "%s: is a directory, not a scenario file", path);
    fclose(f);
    return NULL;
  }
  *regular = S_ISREG(sb.st_mode);
  size_t cap = 0, len = 0;
  char *text = NULL;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      size_t ncap = cap ? 2 * cap : 8192;
      if (ncap > (size_t)MAX_FILE + 4096 + 1) ncap = (size_t)MAX_FILE + 4096 + 1;
      char *t = realloc(text, ncap);
      if (!t) {
        snprintf(err, errlen, "%s: out of memory reading the file", path);
        goto fail;
      }
      text = t, cap = ncap;
    }
    errno = 0;
    size_t got = fread(text + len, 1, 4096, f);
    len += got;
    if (len > (size_t)MAX_FILE) {
      snprintf(err, errlen, "%s: larger than %d bytes: not a scenario file", path, MAX_FILE);
      goto fail;
    }
    if (got < 4096) {
      if (ferror(f)) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno ? errno : EIO));
        goto fail;
      }
      break;
    }
  }
  fclose(f);
  text[len] = '\0';
  const char *nul = memchr(text, '\0', len);
  if (nul) {
    int line = 1;
    for (const char *p = text; p < nul; p++) line += (*p == '\n');
    snprintf(err, errlen, "%s:%d: NUL byte in the line (not a text file?)", path, line);
    free(text);
    return NULL;
  }
  if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) memmove(text, text + 3, len - 2);
  *longest = 0;
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
    if (n > *longest) *longest = n;
    p += n;
  }
  return text;
fail:
  free(text);
  fclose(f);
  return NULL;
}

/*
 * A section line: its name must be known and nothing but a comment may follow
 * the ']' (inih ignores the rest). Rewrites the line to "[name]" so inih sees
 * the trimmed name. Returns -1 with the error set.
 */
static int check_section(parse_state *st, char *str) {
  char *t = trim(str);
  if (*t != '[') return 0;
  char *close = strchr(t, ']');
  if (!close) return 0; /* inih reports the syntax error */
  char *rest = trim(close + 1);
  if (*rest && *rest != ';' && *rest != '#') {
    char cb[SHOWN + 4];
    snprintf(st->err, st->errlen, "%s:%d: text after the section header: '%s'", st->path, st->line, scn_clip(rest, cb));
    return -1;
  }
  *close = '\0';
  char *name = trim(t + 1);
  if (!scn_known_section(name)) {
    char cb[SHOWN + 4];
    snprintf(st->err, st->errlen, "%s:%d: unknown section [%s] (model, workload, parallel, cluster, output)", st->path,
             st->line, scn_clip(name, cb));
    scn_suggest_section(name, st->err, st->errlen);
    return -1;
  }
  memmove(str + 1, name, strlen(name) + 1);
  str[0] = '[';
  strcat(str, "]\n");
  return 0;
}

/* inih reader: one whole line per call (num exceeds the longest line), counted; sections checked here. */
static char *reader(char *str, int num, void *stream) {
  parse_state *st = stream;
  if (st->failed || !*st->next) return NULL;
  const char *nl = strchr(st->next, '\n');
  size_t len = nl ? (size_t)(nl - st->next) + 1 : strlen(st->next);
  st->line++;
  if (len + 3 > (size_t)num) { /* cannot happen: the buffer is sized to the longest line */
    snprintf(st->err, st->errlen, "%s:%d: line longer than %d characters", st->path, st->line, num - 3);
    st->failed = 1;
    return NULL;
  }
  memcpy(str, st->next, len);
  str[len] = '\0';
  st->next += len;
  if (check_section(st, str)) {
    st->failed = 1;
    return NULL;
  }
  return str;
}

static int is_path_key(const key_def *def, const char **suffix) {
  if (strcmp(def->section, "cluster")) return 0;
  if (!strcmp(def->key, "topology")) return *suffix = ".xml", 1;
  if (!strcmp(def->key, "profile")) return *suffix = ".json", 1;
  return 0;
}

/*
 * A file's cluster.topology = X.xml or cluster.profile = X.json with a
 * relative path names a file next to the scenario: prefix the scenario's
 * directory (nothing when the scenario is in the current directory, or is a
 * pipe such as /dev/fd/N from a shell's process substitution). A scenario
 * reached through a symbolic link is next to its target, not to the link: the
 * directory is then the target's (realpath).
 */
static int resolve_paths(parse_state *st, entry *e, const char *where) {
  const char *suffix;
  if (!is_path_key(e->def, &suffix)) return 0;
  if (!st->regular) return 0;
  const char *path = st->path;
  char real[PATH_MAX];
  struct stat ls;
  if (!lstat(path, &ls) && S_ISLNK(ls.st_mode) && realpath(path, real)) path = real;
  const char *slash = strrchr(path, '/');
  if (!slash) return 0;
  int dirlen = (int)(slash - path) + 1;
  for (int i = 0; i < e->nvalues; i++) {
    const char *v = e->values[i];
    size_t n = strlen(v), sl = strlen(suffix);
    if (v[0] == '/' || n <= sl || strcmp(v + n - sl, suffix)) continue;
    size_t total = (size_t)dirlen + n + 1;
    char *r = malloc(total);
    if (!r) {
      snprintf(st->err, st->errlen, "%s: out of memory", where);
      return -1;
    }
    snprintf(r, total, "%.*s%s", dirlen, path, v);
    bs_config scratch;
    bs_config_default(&scratch);
    char why[256];
    if (e->def->set(&scratch, r, why, sizeof why)) {
      snprintf(st->err, st->errlen, "%s: %s.%s: %s relative to the scenario's directory: %s", where, e->def->section,
               e->def->key, v, why);
      free(r);
      return -1;
    }
    free(e->values[i]);
    e->values[i] = r;
  }
  return 0;
}

/* `burstsim search`: keys whose value "auto" means "search every legal value" (bs_scenario_auto_keys). */
static const char *const *search_autos;

void bs_scenario_auto_keys(const char *const *section_keys) { search_autos = section_keys; }

/* A value "auto" of a key search spreads: the key is taken as not given. */
static int search_auto(parse_state *st, int k, const char *value) {
  if (!search_autos) return 0;
  char v[16];
  snprintf(v, sizeof v, "%s", value);
  trim(v);
  for (int i = 0; search_autos[i]; i++) {
    const char *dot = strchr(search_autos[i], '.'), *eq = strchr(search_autos[i], '=');
    size_t sl = dot ? (size_t)(dot - search_autos[i]) : 0, kl = dot && eq ? (size_t)(eq - dot - 1) : SIZE_MAX;
    if (strcmp(v, eq ? eq + 1 : "auto")) continue; /* "section.key=word": word, not auto, asks for the search */
    if (dot && strlen(scn_keys[k].section) == sl && !strncmp(search_autos[i], scn_keys[k].section, sl) &&
        (eq ? strlen(scn_keys[k].key) == kl && !strncmp(dot + 1, scn_keys[k].key, kl)
            : !strcmp(dot + 1, scn_keys[k].key))) {
      entry_clear(&st->entries[k]);
      st->have[k] = 0;
      st->autod[k] = 1;
      return 1;
    }
  }
  return 0;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
  parse_state *st = user;
  if (st->failed) return 0;
  char where[PATH_MAX + 32], cb[SHOWN + 4];
  snprintf(where, sizeof where, "%s:%d", st->path, st->line);
  if (!*section) {
    snprintf(st->err, st->errlen, "%s: key '%s' outside any section", where, scn_clip(name, cb));
    st->failed = 1;
    return 0;
  }
  int k = scn_find_key(section, name);
  if (k < 0) {
    snprintf(st->err, st->errlen, "%s: %s.%s: unknown key", where, section, scn_clip(name, cb));
    scn_suggest_key(section, name, st->err, st->errlen);
    st->failed = 1;
    return 0;
  }
  if (search_auto(st, k, value)) return 1;
  if (st->have[k]) {
    snprintf(st->err, st->errlen, "%s: %s.%s: duplicate key (first given at %s)", where, section, name,
             st->entries[k].where);
    st->failed = 1;
    return 0;
  }
  if (entry_fill(&st->entries[k], &scn_keys[k], value, where, st->err, st->errlen) ||
      resolve_paths(st, &st->entries[k], where)) {
    st->failed = 1;
    return 0;
  }
  st->have[k] = 1;
  st->autod[k] = 0;
  return 1;
}

int scn_apply_set(parse_state *st, const char *set, int idx) {
  char where[64], cb[SHOWN + 4];
  snprintf(where, sizeof where, "--set[%d]", idx);
  const char *eq = strchr(set, '=');
  const char *dot = strchr(set, '.');
  if (!eq || !dot || dot > eq || dot == set || eq == dot + 1) {
    snprintf(st->err, st->errlen, "%s: '%s' is not section.key=value", where, scn_clip(set, cb));
    return -1;
  }
  char section[64], key[64];
  size_t sl = (size_t)(dot - set), kl = (size_t)(eq - dot - 1);
  if (sl >= sizeof section || kl >= sizeof key) {
    snprintf(st->err, st->errlen, "%s: '%.*s': unknown key", where, SHOWN, set);
    return -1;
  }
  memcpy(section, set, sl);
  section[sl] = '\0';
  memcpy(key, dot + 1, kl);
  key[kl] = '\0';
  char *sec = trim(section), *name = trim(key);
  int k = scn_find_key(sec, name);
  if (k < 0) {
    snprintf(st->err, st->errlen, "%s: %s.%s: unknown key", where, sec, name);
    scn_suggest_key(sec, name, st->err, st->errlen);
    return -1;
  }
  if (search_auto(st, k, eq + 1)) return 0;
  if (entry_fill(&st->entries[k], &scn_keys[k], eq + 1, where, st->err, st->errlen)) return -1;
  st->have[k] = 1;
  st->autod[k] = 0;
  return 0;
}

void scn_state_free(parse_state *st) {
  for (int i = 0; i < SCN_NKEYS; i++) entry_clear(&st->entries[i]);
  free(st->text);
}

/* inih with a heap line buffer of `size` bytes; the library's settings are restored after. */
int scn_parse_lines(parse_state *st, size_t size) {
  bool stack = ini_use_stack, realloc_ok = ini_allow_realloc, multi = ini_allow_multiline,
       stop = ini_stop_on_first_error;
  int max_line = ini_max_line, initial = ini_initial_alloc;
  ini_use_stack = false; /* a buffer as long as the longest line, from the heap */
  ini_allow_realloc = false;
  ini_initial_alloc = ini_max_line = (int)size;
  ini_allow_multiline = false;    /* an indented line is its own key, never a continuation */
  ini_stop_on_first_error = true; /* report the first fault, not a consequence of it */
  int rc = ini_parse_stream(reader, st, handler, st);
  ini_use_stack = stack, ini_allow_realloc = realloc_ok, ini_allow_multiline = multi;
  ini_stop_on_first_error = stop, ini_max_line = max_line, ini_initial_alloc = initial;
  return rc;
}

/* "FILE (model.preset = X at FILE:L)" style places for model keys a preset or the default gave. */
