#!/bin/sh
# mpirun for the sanitizer build. Open MPI's own start-up allocations are never
# freed and come from components whose stacks LeakSanitizer cannot symbolise, so
# leak reports are turned off for MPI jobs (ASan's memory-error checks and UBSan
# stay on); leaks in single-process tests are still caught, and
# scripts/memcheck.sh covers the rest with valgrind.
ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export ASAN_OPTIONS
exec mpirun "$@"
