/*
 * tests/run_named.h — the main() of every cmocka test binary: with no argument it runs every test;
 * with arguments it runs the tests whose names match one of them (shell globs, so ctest's
 * "test_ring_step_exact" is an exact name) and exits 2 naming any argument that matches no test,
 * so that a typo or a renamed test in a CMakeLists line fails instead of passing with nothing run.
 * Header only: a test file includes it once, after <cmocka.h>.
 */
#ifndef BS_TESTS_RUN_NAMED_H
#define BS_TESTS_RUN_NAMED_H

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>

static inline int bs_name_matches(const char *name, int argc, char **argv) {
  for (int a = 1; a < argc; a++)
    if (fnmatch(argv[a], name, 0) == 0) return 1;
  return 0;
}

static inline int bs_run_named(const char *group, const struct CMUnitTest *tests, size_t n, int argc, char **argv,
                               CMFixtureFunction setup, CMFixtureFunction teardown) {
  if (argc < 2) return _cmocka_run_group_tests(group, tests, n, setup, teardown);
  int unknown = 0;
  for (int a = 1; a < argc; a++) {
    size_t i = 0;
    while (i < n && fnmatch(argv[a], tests[i].name, 0) != 0) i++;
    if (i == n) {
      fprintf(stderr, "%s: no test named '%s'\n", argv[0], argv[a]);
      unknown = 1;
    }
  }
  if (unknown) return 2;
  struct CMUnitTest *chosen = calloc(n, sizeof *chosen);
  if (!chosen) {
    fprintf(stderr, "%s: out of memory\n", argv[0]);
    return 2;
  }
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (bs_name_matches(tests[i].name, argc, argv)) chosen[m++] = tests[i];
  int rc = _cmocka_run_group_tests(group, chosen, m, setup, teardown);
  free(chosen);
  return rc;
}

/* BS_RUN_NAMED(tests, argc, argv, setup, teardown): cmocka_run_group_tests with the selection above. */
#define BS_RUN_NAMED(tests, argc, argv, setup, teardown) \
  bs_run_named(#tests, tests, sizeof(tests) / sizeof((tests)[0]), argc, argv, setup, teardown)

#endif
