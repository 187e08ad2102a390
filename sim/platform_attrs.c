/*
 * platform_attrs.c — a user platform file's attributes that SimGrid 3.32
 * aborts on (xbt_die: "Not a valid model!", then signal 6, naming neither the
 * file nor the attribute), checked before SimGrid reads the file
 * (platform.h: bs_platform_check_attrs). A small scan of the XML's start tags
 * with their lines, comments and declarations skipped; SimGrid's own parser
 * still judges the syntax (a Parse error naming FILE:LINE). Checked: a zone's
 * routing among the models SimGrid builds (case-insensitive, as it compares),
 * no route in a zone of routing None, no link latency in a Wifi zone, a host's
 * core count a whole number >= 1 and its pstate an index into its speeds.
 */
#include "sim/platform.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "base/fileio.h"

#define MAX_ATTRS 16
#define MAX_DEPTH 64

typedef struct {
  const char *name, *value; /* into a copy of the tag, NUL-terminated */
} attr;

/* One start tag's text (between '<' and '>', without a closing '/') in buf, split in place into its
 * name and attributes. The count, or -1 when malformed (left to SimGrid's parser, which names the line). */
static int parse_tag(char *buf, char **name, attr *a) {
  char *p = buf;
  *name = p;
  while (*p && !isspace((unsigned char)*p)) p++;
  if (*p) *p++ = '\0';
  int na = 0;
  for (;;) {
    while (isspace((unsigned char)*p)) p++;
    if (!*p) return na;
    char *key = p;
    while (*p && *p != '=' && !isspace((unsigned char)*p)) p++;
    char *key_end = p;
    while (isspace((unsigned char)*p)) p++;
    if (*p != '=') return -1;
    p++;
    *key_end = '\0';
    while (isspace((unsigned char)*p)) p++;
    char q = *p;
    if (q != '"' && q != '\'') return -1;
    char *val = ++p;
    while (*p && *p != q) p++;
    if (!*p) return -1;
    *p++ = '\0';
    if (na < MAX_ATTRS) a[na++] = (attr){key, val};
  }
}

static const char *get(const attr *a, int n, const char *key) {
  for (int i = 0; i < n; i++)
    if (!strcmp(a[i].name, key)) return a[i].value;
  return NULL;
}

static int known_routing(const char *r) {
  static const char *const models[] = {"Full", "Floyd",   "Dijkstra", "DijkstraCache",
                                       "None", "Vivaldi", "Cluster",  "Wifi"};
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    if (!strcasecmp(r, models[i])) return 1;
  return 0;
}

/* A host's core and pstate: 0, or -1 with the message. */
static int check_host(const char *file, int line, const attr *a, int na, char *err, size_t errlen) {
  const char *id = get(a, na, "id"), *core = get(a, na, "core"), *pstate = get(a, na, "pstate"),
             *speed = get(a, na, "speed");
  char *end;
  if (core) {
    long c = strtol(core, &end, 10);
    if (end == core || *end || c < 1) {
      snprintf(err, errlen, "cluster.topology: %s:%d: host '%.64s': core='%.32s' is not a whole number >= 1", file,
               line, id ? id : "?", core);
      return -1;
    }
  }
  if (pstate) {
    long ps = strtol(pstate, &end, 10);
    long speeds = 1;
    for (const char *s = speed ? speed : ""; *s; s++) speeds += *s == ',';
    if (end == pstate || *end || ps < 0 || ps >= speeds) {
      snprintf(err, errlen,
               "cluster.topology: %s:%d: host '%.64s': pstate='%.32s' is not an index into its %ld speed(s) "
               "(0 .. %ld)",
               file, line, id ? id : "?", pstate, speeds, speeds - 1);
      return -1;
    }
  }
  return 0;
}

/* One start tag at line `line` inside the zones of routing[0 .. depth). 0, or -1 with the message. */
static int check_tag(const char *file, int line, const char *name, const attr *a, int na, char (*routing)[32],
                     int depth, char *err, size_t errlen) {
  const char *zr = depth > 0 ? routing[depth - 1] : "";
  if (!strcmp(name, "zone") || !strcmp(name, "AS")) {
    const char *r = get(a, na, "routing"), *id = get(a, na, "id");
    if (r && !known_routing(r)) {
      snprintf(err, errlen,
               "cluster.topology: %s:%d: %s '%.64s': routing='%.48s' is not a routing SimGrid knows (Full, Floyd, "
               "Dijkstra, DijkstraCache, None, Vivaldi, Cluster, Wifi)",
               file, line, name, id ? id : "?", r);
      return -1;
    }
  } else if (!strcmp(name, "route") || !strcmp(name, "zoneRoute") || !strcmp(name, "ASroute") ||
             !strcmp(name, "bypassRoute")) {
    if (!strcasecmp(zr, "None")) {
      snprintf(err, errlen, "cluster.topology: %s:%d: a %s inside a zone of routing='None', which takes no routes",
               file, line, name);
      return -1;
    }
  } else if (!strcmp(name, "link")) {
    if (!strcasecmp(zr, "Wifi") && get(a, na, "latency")) {
      snprintf(err, errlen,
               "cluster.topology: %s:%d: link '%.64s': a latency in a zone of routing='Wifi' (SimGrid's "
               "Wi-Fi links take none)",
               file, line, get(a, na, "id") ? get(a, na, "id") : "?");
      return -1;
    }
  } else if (!strcmp(name, "host")) {
    return check_host(file, line, a, na, err, errlen);
  }
  return 0;
}

/* Skips past `close` from p; the new position (end of text when missing), counting newlines. */
static const char *skip_to(const char *p, const char *close, int *line) {
  const char *e = strstr(p, close);
  if (!e) e = p + strlen(p);
  else e += strlen(close);
  for (const char *q = p; q < e; q++) *line += *q == '\n';
  return e;
}

int bs_platform_check_attrs(const char *file, char *err, size_t errlen) {
  char rerr[512];
  size_t len = 0;
  char *text = bs_read_file(file, &len, rerr, sizeof rerr);
  if (!text) return 0; /* unreadable: SimGrid's loader says so */
  char routing[MAX_DEPTH][32];
  int depth = 0, line = 1, rc = 0;
  char *buf = malloc(len + 1);
  const char *p = text;
  while (buf && !rc && *p) {
    if (*p == '\n') line++;
    if (*p != '<') {
      p++;
      continue;
    }
    if (!strncmp(p, "<!--", 4)) p = skip_to(p, "-->", &line);
    else if (p[1] == '?' || p[1] == '!') p = skip_to(p, ">", &line);
    else if (p[1] == '/') { /* a closing tag: </zone> or </AS> leaves the zone */ size_t n = strcspn(p + 2, " \t\r\n>");
      if (depth > 0 && ((n == 4 && !strncmp(p + 2, "zone", 4)) || (n == 2 && !strncmp(p + 2, "AS", 2)))) depth--;
      p = skip_to(p, ">", &line);
    } else {
      int tag_line = line;
      const char *e = p + 1;
      char q = 0;
      while (*e && (q || *e != '>')) {
        if (q && *e == q) q = 0;
        else if (!q && (*e == '"' || *e == '\'')) q = *e;
        e++;
      }
      int self_close = e > p + 1 && e[-1] == '/';
      char *name;
      attr a[MAX_ATTRS];
      size_t n = (size_t)(e - p - 1 - self_close);
      memcpy(buf, p + 1, n);
      buf[n] = '\0';
      int na = parse_tag(buf, &name, a);
      if (na >= 0) rc = check_tag(file, tag_line, name, a, na, routing, depth, err, errlen);
      if (!rc && na >= 0 && !self_close && (!strcmp(name, "zone") || !strcmp(name, "AS"))) {
        const char *r = get(a, na, "routing");
        if (depth < MAX_DEPTH) snprintf(routing[depth], sizeof routing[depth], "%s", r ? r : "");
        depth += depth < MAX_DEPTH;
      }
      for (const char *c = p; c < e; c++) line += *c == '\n';
      p = *e ? e + 1 : e;
    }
  }
  free(buf);
  free(text);
  return rc;
}
