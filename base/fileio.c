/*
 * fileio.c — whole-file output and input for every command (contract in
 * fileio.h). It exists so that no writer replaces what it should not (a device,
 * a symlink, a read-only file, an input) and no reader takes a directory or a
 * read error for an empty file.
 */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define BS_PATH_MAX 4096

typedef enum { OUT_STDOUT, OUT_REPLACE, OUT_INPLACE } out_kind;

struct bs_outfile {
  FILE *f;
  out_kind kind;
  int slot;                 /* temp registry slot, -1 = none */
  char path[BS_PATH_MAX];   /* as the user gave it, for messages */
  char target[BS_PATH_MAX]; /* the file replaced (symlinks followed) */
  char tmp[BS_PATH_MAX];    /* the temporary file (OUT_REPLACE) */
};

/* ------------------------------------------------------------------ */
/* Temporary files removed when a signal stops the process             */
/* ------------------------------------------------------------------ */

#define TEMP_SLOTS 16
static struct {
  volatile sig_atomic_t used;
  pid_t pid;
  char path[BS_PATH_MAX];
} temps[TEMP_SLOTS];

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define NSTOP ((int)(sizeof stop_signals / sizeof stop_signals[0]))
static struct sigaction prev_action[NSTOP];
static int handlers_installed;

static void on_stop_signal(int sig) {
  int saved = errno;
  pid_t me = getpid();
  for (int i = 0; i < TEMP_SLOTS; i++)
    if (temps[i].used && temps[i].pid == me) unlink(temps[i].path);
  /* Then whatever would have happened without this handler. */
  for (int i = 0; i < NSTOP; i++)
    if (stop_signals[i] == sig) sigaction(sig, &prev_action[i], NULL);
  errno = saved;
  raise(sig);
}

static void install_handlers(void) {
  if (handlers_installed) return;
  handlers_installed = 1;
  for (int i = 0; i < NSTOP; i++) {
    struct sigaction cur;
    if (sigaction(stop_signals[i], NULL, &cur)) continue;
    /* An ignored signal stays ignored: removing the file would only break the write. */
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN) continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    prev_action[i] = cur;
    sigaction(stop_signals[i], &sa, NULL);
  }
}

static int temp_register(const char *path) {
  install_handlers();
  for (int i = 0; i < TEMP_SLOTS; i++)
    if (!temps[i].used) {
      snprintf(temps[i].path, sizeof temps[i].path, "%s", path);
      temps[i].pid = getpid();
      temps[i].used = 1;
      return i;
    }
  return -1; /* still written and removed on errors, just not on a signal */
}

static void temp_unregister(int slot) {
  if (slot >= 0 && slot < TEMP_SLOTS) temps[slot].used = 0;
}

/* ------------------------------------------------------------------ */
/* What a path is                                                      */
/* ------------------------------------------------------------------ */

static void dir_of(const char *path, char *dir, size_t n) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, n, ".");
  else if (slash == path) snprintf(dir, n, "/");
  else snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

static const char *base_of(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Follows path's symlink chain (a dangling link included) to the name that is written. */
static int follow_links(const char *path, char *out, size_t n, char *err, size_t errlen) {
  char cur[BS_PATH_MAX];
  if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur) {
    snprintf(err, errlen, "%.200s...: path too long", path);
    return -1;
  }
  for (int hops = 0; hops < 40; hops++) {
    struct stat st;
    if (lstat(cur, &st) || !S_ISLNK(st.st_mode)) {
      snprintf(out, n, "%s", cur);
      return 0;
    }
    char link[BS_PATH_MAX];
    ssize_t k = readlink(cur, link, sizeof link - 1);
    if (k < 0) {
      snprintf(err, errlen, "%s: cannot read the link: %s", path, strerror(errno));
      return -1;
    }
    link[k] = '\0';
    char next[BS_PATH_MAX], dir[BS_PATH_MAX];
    dir_of(cur, dir, sizeof dir);
    int w = link[0] == '/' || !strchr(cur, '/') ? snprintf(next, sizeof next, "%s", link)
                                                : snprintf(next, sizeof next, "%s/%s", dir, link);
    if (w >= (int)sizeof next) {
      snprintf(err, errlen, "%s: the link's target is too long", path);
      return -1;
    }
    snprintf(cur, sizeof cur, "%s", next);
  }
  snprintf(err, errlen, "%s: too many levels of symbolic links", path);
  return -1;
}

/*
 * Whether an entry can be made in dir: access(W_OK) passes for root everywhere but on a read-only
 * mount, also in /proc or /sys where nothing can be created; a hidden file is made and removed at
 * once (mkstemp), so that "checked before the work" holds there too. 0, or -1 with errno set.
 */
static int can_create_in(const char *dir) {
  char probe[BS_PATH_MAX];
  if (snprintf(probe, sizeof probe, "%s/.burstsim-probe-XXXXXX", dir) >= (int)sizeof probe) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int fd = mkstemp(probe);
  if (fd < 0) return -1;
  close(fd);
  unlink(probe);
  return 0;
}

static int check_dir(const char *path, const char *target, char *err, size_t errlen) {
  char dir[BS_PATH_MAX];
  dir_of(target, dir, sizeof dir);
  struct stat st;
  if (stat(dir, &st)) {
    snprintf(err, errlen, "%s: directory %s: %s", path, dir, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "%s: %s is not a directory", path, dir);
    return -1;
  }
  if (access(dir, W_OK | X_OK) || can_create_in(dir)) {
    snprintf(err, errlen, "%s: directory %s is not writable: %s", path, dir, strerror(errno));
    return -1;
  }
  return 0;
}

/* Decides how path is written; target (OUT_REPLACE) is the file replaced; *st and *exists
 * describe it. Creates nothing. */
static int classify(const char *path, out_kind *kind, char *target, size_t tlen, struct stat *st, int *exists,
                    char *err, size_t errlen) {
  *exists = 0;
  if (!path || !*path) {
    snprintf(err, errlen, "an empty output path");
    return -1;
  }
  if (!strcmp(path, "-")) {
    *kind = OUT_STDOUT;
    return 0;
  }
  if (stat(path, st) == 0) {
    *exists = 1;
    if (S_ISDIR(st->st_mode)) {
      snprintf(err, errlen, "%s: is a directory", path);
      return -1;
    }
    if (S_ISCHR(st->st_mode) || S_ISFIFO(st->st_mode)) {
      if (access(path, W_OK)) {
        snprintf(err, errlen, "%s: not writable: %s", path, strerror(errno));
        return -1;
      }
      *kind = OUT_INPLACE;
      snprintf(target, tlen, "%s", path);
      return 0;
    }
    if (!S_ISREG(st->st_mode)) {
      snprintf(err, errlen, "%s: not a regular file, character device or FIFO (%s); not written", path,
               S_ISSOCK(st->st_mode)  ? "a socket"
               : S_ISBLK(st->st_mode) ? "a block device"
                                      : "another type");
      return -1;
    }
    if (!(st->st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) || access(path, W_OK)) {
      snprintf(err, errlen, "%s: the file is read-only; not replaced", path);
      return -1;
    }
    if (follow_links(path, target, tlen, err, errlen)) return -1;
    struct stat t;
    if (stat(target, &t) || t.st_dev != st->st_dev || t.st_ino != st->st_ino) {
      /* a link through /proc or similar: its name is not a path that can be renamed over */
      snprintf(err, errlen, "%s: cannot tell which file the link names; not written", path);
      return -1;
    }
    *kind = OUT_REPLACE;
    return check_dir(path, target, err, errlen);
  }
  if (errno != ENOENT) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  if (follow_links(path, target, tlen, err, errlen)) return -1;
  if (path[strlen(path) - 1] == '/') {
    snprintf(err, errlen, "%s: names a directory, not a file", path);
    return -1;
  }
  *kind = OUT_REPLACE;
  return check_dir(path, target, err, errlen);
}

int bs_out_check(const char *path, char *err, size_t errlen) {
  out_kind kind;
  char target[BS_PATH_MAX];
  struct stat st;
  int exists;
  return classify(path, &kind, target, sizeof target, &st, &exists, err, errlen);
}

int bs_out_check_dir(const char *path, char *err, size_t errlen) {
  struct stat st;
  if (!path || !*path) {
    snprintf(err, errlen, "an empty directory path");
    return -1;
  }
  if (stat(path, &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      snprintf(err, errlen, "%s: exists and is not a directory", path);
      return -1;
    }
    if (access(path, W_OK | X_OK) || can_create_in(path)) {
      snprintf(err, errlen, "%s: directory not writable: %s", path, strerror(errno));
      return -1;
    }
    return 0;
  }
  if (errno != ENOENT) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  char trimmed[BS_PATH_MAX];
  snprintf(trimmed, sizeof trimmed, "%s", path);
  for (size_t n = strlen(trimmed); n > 1 && trimmed[n - 1] == '/'; n--) trimmed[n - 1] = '\0';
  return check_dir(path, trimmed, err, errlen);
}

/* ------------------------------------------------------------------ */
/* Writing                                                             */
/* ------------------------------------------------------------------ */

static int open_temp(bs_outfile *o, const struct stat *st, int exists, char *err, size_t errlen) {
  static unsigned counter;
  char dir[BS_PATH_MAX];
  dir_of(o->target, dir, sizeof dir);
  const char *base = base_of(o->target);
  /* Keep the extension: a reader that goes by it (a profile's ".json") can check the temp. */
  const char *dot = strrchr(base, '.');
  if (!dot || dot == base) dot = base + strlen(base);
  for (int tries = 0; tries < 100; tries++) {
    int w = snprintf(o->tmp, sizeof o->tmp, "%s/.%.*s.tmp-%ld-%u%s", dir, (int)(dot - base), base, (long)getpid(),
                     counter++, dot);
    if (w >= (int)sizeof o->tmp) {
      snprintf(err, errlen, "%s: path too long", o->path);
      return -1;
    }
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      snprintf(err, errlen, "%s: cannot create a temporary file in %s: %s", o->path, dir, strerror(errno));
      return -1;
    }
    o->slot = temp_register(o->tmp);
    if (exists) {
      /* The replacement keeps the old file's permission bits (and, where allowed, its owner). */
      if (fchmod(fd, st->st_mode & 07777)) {
        /* not fatal: the file is still written with the default mode */
      }
      if (geteuid() == 0 && fchown(fd, st->st_uid, st->st_gid)) {
        /* not fatal either */
      }
    }
    o->f = fdopen(fd, "w");
    if (!o->f) {
      int e = errno;
      close(fd);
      unlink(o->tmp);
      temp_unregister(o->slot);
      snprintf(err, errlen, "%s: %s", o->path, strerror(e));
      return -1;
    }
    return 0;
  }
  snprintf(err, errlen, "%s: cannot find a free temporary name in %s", o->path, dir);
  return -1;
}

bs_outfile *bs_out_open(const char *path, char *err, size_t errlen) {
  bs_outfile *o = calloc(1, sizeof *o);
  if (!o) {
    snprintf(err, errlen, "%s: out of memory", path ? path : "");
    return NULL;
  }
  o->slot = -1;
  struct stat st;
  int exists;
  if (classify(path, &o->kind, o->target, sizeof o->target, &st, &exists, err, errlen)) {
    free(o);
    return NULL;
  }
  snprintf(o->path, sizeof o->path, "%s", path);
  if (o->kind == OUT_STDOUT) {
    o->f = stdout;
    return o;
  }
  if (o->kind == OUT_INPLACE) {
    int fd = open(o->target, O_WRONLY | O_CLOEXEC);
    o->f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!o->f) {
      snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
      if (fd >= 0) close(fd);
      free(o);
      return NULL;
    }
    return o;
  }
  if (open_temp(o, &st, exists, err, errlen)) {
    free(o);
    return NULL;
  }
  return o;
}

FILE *bs_out_stream(bs_outfile *o) { return o->f; }

const char *bs_out_temp_path(const bs_outfile *o) { return o->kind == OUT_REPLACE ? o->tmp : NULL; }

void bs_out_abort(bs_outfile *o) {
  if (!o) return;
  if (o->kind != OUT_STDOUT && o->f) fclose(o->f);
  if (o->kind == OUT_REPLACE) {
    unlink(o->tmp);
    temp_unregister(o->slot);
  }
  free(o);
}

int bs_out_commit(bs_outfile *o, char *err, size_t errlen) {
  int e = 0;
  if (fflush(o->f) || ferror(o->f)) e = errno ? errno : EIO;
  if (o->kind == OUT_STDOUT) {
    free(o);
    if (e) {
      snprintf(err, errlen, "standard output: write failed: %s", strerror(e));
      return -1;
    }
    return 0;
  }
  /* Devices and FIFOs cannot be synced (EINVAL); a regular file must be, before the rename. */
  if (!e && fsync(fileno(o->f)) && o->kind == OUT_REPLACE) e = errno;
  if (fclose(o->f) && !e) e = errno ? errno : EIO;
  o->f = NULL;
  if (!e && o->kind == OUT_REPLACE) {
    if (rename(o->tmp, o->target)) e = errno;
    else {
      char dir[BS_PATH_MAX];
      dir_of(o->target, dir, sizeof dir);
      int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dfd >= 0) {
        if (fsync(dfd)) {
          /* the data is in place; a directory that cannot be synced is not an error */
        }
        close(dfd);
      }
    }
  }
  if (o->kind == OUT_REPLACE) {
    if (e) unlink(o->tmp);
    temp_unregister(o->slot);
  }
  if (e) snprintf(err, errlen, "%s: write failed: %s", o->path, strerror(e));
  free(o);
  return e ? -1 : 0;
}

int bs_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen) {
  bs_outfile *o = bs_out_open(path, err, errlen);
  if (!o) return -1;
  if (len && fwrite(data, 1, len, o->f) != len) {
    int e = errno ? errno : EIO;
    bs_out_abort(o);
    snprintf(err, errlen, "%s: write failed: %s", path, strerror(e));
    return -1;
  }
  return bs_out_commit(o, err, errlen);
}

/* ------------------------------------------------------------------ */
/* Outputs against inputs and each other                               */
/* ------------------------------------------------------------------ */

typedef struct {
  int exists, special; /* special: a device or FIFO (may be shared by outputs) */
  dev_t dev;
  ino_t ino;
  char name[PATH_MAX + BS_PATH_MAX + 2]; /* missing files: the resolved name they would get */
} file_id;

static void identify(const char *path, file_id *id) {
  memset(id, 0, sizeof *id);
  struct stat st;
  if (stat(path, &st) == 0) {
    id->exists = 1;
    id->special = !S_ISREG(st.st_mode);
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    return;
  }
  char target[BS_PATH_MAX], dir[BS_PATH_MAX], err[64];
  if (follow_links(path, target, sizeof target, err, sizeof err)) snprintf(target, sizeof target, "%s", path);
  dir_of(target, dir, sizeof dir);
  char real[PATH_MAX];
  if (realpath(dir, real)) snprintf(id->name, sizeof id->name, "%s/%s", real, base_of(target));
  else snprintf(id->name, sizeof id->name, "%s", target);
}

static int same_file(const file_id *a, const file_id *b) {
  if (a->exists != b->exists) return 0;
  if (a->exists) return a->dev == b->dev && a->ino == b->ino;
  return !strcmp(a->name, b->name);
}

int bs_out_check_all(const bs_path_role *outs, int nout, const bs_path_role *ins, int nin, char *err, size_t errlen) {
  char why[BS_PATH_MAX + 256];
  for (int i = 0; i < nout; i++) {
    const char *p = outs[i].path;
    if (!p) continue;
    if (!*p) {
      snprintf(err, errlen, "%s '': an empty path", outs[i].what);
      return -1;
    }
    if (bs_out_check(p, why, sizeof why)) {
      snprintf(err, errlen, "%s %s", outs[i].what, why);
      return -1;
    }
  }
  for (int i = 0; i < nout; i++) {
    const char *p = outs[i].path;
    if (!p || !*p) continue;
    int std = !strcmp(p, "-");
    file_id a;
    if (!std) identify(p, &a);
    for (int j = 0; j < i; j++) {
      const char *q = outs[j].path;
      if (!q || !*q) continue;
      if (std || !strcmp(q, "-")) {
        if (std && !strcmp(q, "-")) {
          snprintf(err, errlen, "%s -: %s writes standard output too; give one of them a file", outs[i].what,
                   outs[j].what);
          return -1;
        }
        continue;
      }
      file_id b;
      identify(q, &b);
      if (!(a.exists && a.special) && same_file(&a, &b)) {
        snprintf(err, errlen, "%s %s: the same file as %s %s; one would overwrite the other", outs[i].what, p,
                 outs[j].what, q);
        return -1;
      }
    }
    if (std) continue;
    for (int j = 0; j < nin; j++) {
      const char *q = ins[j].path;
      if (!q || !*q || !strcmp(q, "-")) continue;
      file_id b;
      identify(q, &b);
      if (same_file(&a, &b)) {
        snprintf(err, errlen, "%s %s: the same file as %s %s (an input); not overwritten", outs[i].what, p, ins[j].what,
                 q);
        return -1;
      }
    }
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* Reading                                                             */
/* ------------------------------------------------------------------ */

char *bs_read_file(const char *path, size_t *len, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    int e = errno;
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
    errno = e;
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(f);
    snprintf(err, errlen, "%s: is a directory, not a file", path);
    errno = 0;
    return NULL;
  }
  size_t cap = 4096, n = 0;
  char *s = malloc(cap);
  while (s) {
    if (n + 1 >= cap) {
      char *ns = cap < ((size_t)1 << 40) ? realloc(s, cap * 2) : NULL;
      if (!ns) {
        free(s);
        s = NULL;
        break;
      }
      s = ns;
      cap *= 2;
    }
    size_t got = fread(s + n, 1, cap - 1 - n, f);
    n += got;
    if (got == 0) break;
  }
  if (!s) {
    fclose(f);
    snprintf(err, errlen, "%s: out of memory reading it", path);
    errno = 0;
    return NULL;
  }
  if (ferror(f)) {
    int e = errno;
    fclose(f);
    free(s);
    snprintf(err, errlen, "%s: read error: %s", path, strerror(e));
    errno = 0;
    return NULL;
  }
  fclose(f);
  s[n] = '\0';
  if (len) *len = n;
  return s;
}
