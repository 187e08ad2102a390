/*
 * test_fileio.c — the shared writer (base/fileio.h) on every kind of path a
 * careless or hostile user can give: links, devices, FIFOs, directories,
 * read-only files, inputs and duplicate outputs, failed writes and signals.
 * Each case checks the return code, the message and what is on disk after.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fileio.h"

static char dir[256];

static void at(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static char *slurp(const char *path) {
  char err[512];
  return bs_read_file(path, NULL, err, sizeof err);
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* No ".NAME.tmp-*" file is left in the test directory. */
static void assert_no_temps(void) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".tmp-")) fail_msg("a temporary file was left: %s", e->d_name);
  closedir(d);
}

static void test_replaces_regular_file(void **st) {
  (void)st;
  char p[512], err[512];
  at(p, sizeof p, "plain.json");
  put(p, "old");
  assert_int_equal(bs_write_file(p, "newer", 5, err, sizeof err), 0);
  char *t = slurp(p);
  assert_string_equal(t, "newer");
  free(t);
  assert_no_temps();
}

static void test_symlink_target_written(void **st) {
  (void)st;
  char target[512], link[512], err[512];
  at(target, sizeof target, "target.json");
  at(link, sizeof link, "link.json");
  put(target, "old");
  assert_int_equal(chmod(target, 0640), 0);
  assert_int_equal(symlink("target.json", link), 0);
  assert_int_equal(bs_write_file(link, "new", 3, err, sizeof err), 0);
  struct stat sl, stt;
  assert_int_equal(lstat(link, &sl), 0);
  assert_true(S_ISLNK(sl.st_mode)); /* the link is kept */
  assert_int_equal(stat(target, &stt), 0);
  assert_int_equal(stt.st_mode & 07777, 0640); /* the target keeps its permission bits */
  char *t = slurp(target);
  assert_string_equal(t, "new");
  free(t);
  /* a dangling link: its target is created, the link kept */
  char dangling[512], made[512];
  at(dangling, sizeof dangling, "dangling.json");
  at(made, sizeof made, "made.json");
  assert_int_equal(symlink("made.json", dangling), 0);
  assert_int_equal(bs_write_file(dangling, "x", 1, err, sizeof err), 0);
  assert_int_equal(lstat(dangling, &sl), 0);
  assert_true(S_ISLNK(sl.st_mode));
  t = slurp(made);
  assert_string_equal(t, "x");
  free(t);
  assert_no_temps();
}

static void test_read_only_refused(void **st) {
  (void)st;
  char p[512], err[512] = "";
  at(p, sizeof p, "ro.json");
  put(p, "keep");
  assert_int_equal(chmod(p, 0444), 0);
  assert_int_equal(bs_out_check(p, err, sizeof err), -1);
  assert_non_null(strstr(err, "read-only"));
  err[0] = '\0';
  assert_int_equal(bs_write_file(p, "new", 3, err, sizeof err), -1);
  assert_non_null(strstr(err, p));
  assert_non_null(strstr(err, "read-only"));
  char *t = slurp(p);
  assert_string_equal(t, "keep");
  free(t);
  assert_no_temps();
}

static void test_directory_refused(void **st) {
  (void)st;
  char p[512], err[512] = "";
  at(p, sizeof p, "adir");
  assert_int_equal(mkdir(p, 0755), 0);
  assert_int_equal(bs_write_file(p, "x", 1, err, sizeof err), -1);
  assert_non_null(strstr(err, "is a directory"));
  struct stat sb;
  assert_int_equal(stat(p, &sb), 0);
  assert_true(S_ISDIR(sb.st_mode));
  /* and a read of a directory is an error, not an empty file */
  size_t n = 99;
  assert_null(bs_read_file(p, &n, err, sizeof err));
  assert_non_null(strstr(err, "is a directory"));
  /* a missing directory: the message names the path, nothing is created */
  char q[512];
  at(q, sizeof q, "no-such-dir/r.json");
  assert_int_equal(bs_write_file(q, "x", 1, err, sizeof err), -1);
  assert_non_null(strstr(err, "no-such-dir"));
  assert_int_not_equal(stat(q, &sb), 0);
}

/* A character device is written in place: it stays a device. Made with mknod (as root) so that a
 * writer that renames over it cannot harm the machine's own /dev/null or /dev/full. */
static void test_devices_in_place(void **st) {
  (void)st;
  char null[512], full[512], err[512] = "";
  at(null, sizeof null, "null");
  at(full, sizeof full, "full");
  if (mknod(null, S_IFCHR | 0666, makedev(1, 3)) || mknod(full, S_IFCHR | 0666, makedev(1, 7))) {
    /* not root, or a nodev file system: the real devices are safe to write in place */
    snprintf(null, sizeof null, "/dev/null");
    snprintf(full, sizeof full, "/dev/full");
  }
  assert_int_equal(bs_write_file(null, "data", 4, err, sizeof err), 0);
  struct stat sb;
  assert_int_equal(stat(null, &sb), 0);
  assert_true(S_ISCHR(sb.st_mode));
  /* a full device: the write fails with a message, and the device stays */
  assert_int_equal(bs_write_file(full, "data", 4, err, sizeof err), -1);
  assert_non_null(strstr(err, full));
  assert_non_null(strstr(err, strerror(ENOSPC)));
  assert_int_equal(stat(full, &sb), 0);
  assert_true(S_ISCHR(sb.st_mode));
  assert_no_temps();
}

static void test_fifo_in_place(void **st) {
  (void)st;
  char p[512], err[512];
  at(p, sizeof p, "fifo");
  assert_int_equal(mkfifo(p, 0600), 0);
  int rd = open(p, O_RDONLY | O_NONBLOCK); /* a reader, so the writer's open does not block */
  assert_true(rd >= 0);
  assert_int_equal(bs_write_file(p, "through", 7, err, sizeof err), 0);
  char buf[16] = "";
  assert_int_equal(read(rd, buf, sizeof buf - 1), 7);
  assert_string_equal(buf, "through");
  close(rd);
  struct stat sb;
  assert_int_equal(lstat(p, &sb), 0);
  assert_true(S_ISFIFO(sb.st_mode));
  assert_no_temps();
}

static void test_inputs_and_duplicates(void **st) {
  (void)st;
  char in[512], alias[512], hard[512], out[512], dotted[512], err[1024] = "";
  at(in, sizeof in, "scenario.ini");
  at(alias, sizeof alias, "alias.ini");
  at(hard, sizeof hard, "hard.ini");
  at(out, sizeof out, "out.json");
  snprintf(dotted, sizeof dotted, "%s/./out.json", dir);
  put(in, "[workload]\n");
  assert_int_equal(symlink("scenario.ini", alias), 0);
  assert_int_equal(link(in, hard), 0);
  const bs_path_role ins[] = {{"the scenario", in}};
  /* an output that is the input, through a symlink or a hard link */
  const char *same[] = {in, alias, hard};
  for (int i = 0; i < 3; i++) {
    const bs_path_role outs[] = {{"--out", same[i]}};
    err[0] = '\0';
    assert_int_equal(bs_out_check_all(outs, 1, ins, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "--out"));
    assert_non_null(strstr(err, "the same file as the scenario"));
  }
  /* two outputs on one missing name, spelled differently: refused, nothing created */
  const bs_path_role dup[] = {{"--out", out}, {"--csv", dotted}};
  assert_int_equal(bs_out_check_all(dup, 2, ins, 1, err, sizeof err), -1);
  assert_non_null(strstr(err, "--csv"));
  assert_non_null(strstr(err, "the same file as --out"));
  struct stat sb;
  assert_int_not_equal(stat(out, &sb), 0);
  /* two outputs on stdout */
  const bs_path_role two_std[] = {{"--out", "-"}, {"--csv", "-"}};
  assert_int_equal(bs_out_check_all(two_std, 2, NULL, 0, err, sizeof err), -1);
  assert_non_null(strstr(err, "standard output"));
  /* an empty output path is an error, not "no output" */
  const bs_path_role empty[] = {{"--out", ""}};
  assert_int_equal(bs_out_check_all(empty, 1, NULL, 0, err, sizeof err), -1);
  assert_non_null(strstr(err, "--out '': an empty path"));
  /* distinct outputs, and devices shared by outputs, pass */
  const bs_path_role fine[] = {{"--out", out}, {"--csv", "/dev/null"}, {"--trace", "/dev/null"}, {"--x", NULL}};
  assert_int_equal(bs_out_check_all(fine, 4, ins, 1, err, sizeof err), 0);
  assert_int_not_equal(stat(out, &sb), 0); /* the check creates nothing */
  char *t = slurp(in);
  assert_string_equal(t, "[workload]\n");
  free(t);
}

static void test_abort_keeps_old(void **st) {
  (void)st;
  char p[512], err[512];
  at(p, sizeof p, "aborted.json");
  put(p, "old");
  bs_outfile *o = bs_out_open(p, err, sizeof err);
  assert_non_null(o);
  assert_non_null(bs_out_temp_path(o));
  fputs("half", bs_out_stream(o));
  bs_out_abort(o);
  char *t = slurp(p);
  assert_string_equal(t, "old");
  free(t);
  assert_no_temps();
}

/* SIGTERM or SIGINT in the middle of a write: the old file stays whole and no temporary file is
 * left; the process still dies of the signal. */
static void test_signal_mid_write(void **st) {
  (void)st;
  const int sigs[] = {SIGTERM, SIGINT};
  for (int k = 0; k < 2; k++) {
    char p[512];
    at(p, sizeof p, "signalled.json");
    put(p, "old");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      char err[512];
      bs_outfile *o = bs_out_open(p, err, sizeof err);
      if (!o) _exit(3);
      fputs("partial", bs_out_stream(o));
      fflush(bs_out_stream(o));
      raise(sigs[k]);
      _exit(4); /* not reached */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), sigs[k]);
    char *t = slurp(p);
    assert_string_equal(t, "old");
    free(t);
    assert_no_temps();
  }
}

static void test_stdout(void **st) {
  (void)st;
  char err[512];
  assert_int_equal(bs_out_check("-", err, sizeof err), 0);
  bs_outfile *o = bs_out_open("-", err, sizeof err);
  assert_non_null(o);
  assert_ptr_equal(bs_out_stream(o), stdout);
  assert_null(bs_out_temp_path(o));
  assert_int_equal(bs_out_commit(o, err, sizeof err), 0);
}

static void test_check_dir(void **st) {
  (void)st;
  char p[512], f[512], err[512] = "";
  at(p, sizeof p, "plots");
  assert_int_equal(bs_out_check_dir(p, err, sizeof err), 0); /* missing, can be created */
  struct stat sb;
  assert_int_not_equal(stat(p, &sb), 0);
  at(f, sizeof f, "afile");
  put(f, "x");
  assert_int_equal(bs_out_check_dir(f, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a directory"));
}

static int cleanup(void **st) {
  (void)st;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : 0;
}

int main(int argc, char **argv) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/bs_fileio_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return 1;
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_replaces_regular_file),
    cmocka_unit_test(test_symlink_target_written),
    cmocka_unit_test(test_read_only_refused),
    cmocka_unit_test(test_directory_refused),
    cmocka_unit_test(test_devices_in_place),
    cmocka_unit_test(test_fifo_in_place),
    cmocka_unit_test(test_inputs_and_duplicates),
    cmocka_unit_test(test_abort_keeps_old),
    cmocka_unit_test(test_signal_mid_write),
    cmocka_unit_test(test_stdout),
    cmocka_unit_test(test_check_dir),
  };
  return BS_RUN_NAMED(tests, argc, argv, NULL, cleanup);
}
