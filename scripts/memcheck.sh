#!/usr/bin/env bash
# Runs the single-process tests under valgrind memcheck (the MPI tests are
# covered by ASan in CI: valgrind and Open MPI's shared memory do not mix
# well). scripts/memcheck.sh [BUILD_DIR]. Exit non-zero on any error or leak.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-memcheck}
command -v valgrind >/dev/null || { echo "memcheck.sh: valgrind not found (apt-get install valgrind)" >&2; exit 1; }
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$BUILD" -j "$(nproc)" >/dev/null
cd "$BUILD"
# Tests that spawn mpirun are left out by label; everything else runs under memcheck.
ctest -T memcheck -LE mpi --overwrite MemoryCheckCommandOptions="--leak-check=full --error-exitcode=3 --errors-for-leak-kinds=definite" \
  -E 'bench' --output-on-failure 2>&1 | tee memcheck.log | tail -20
# ctest lists one line per defect kind after this header; none means clean.
grep -q "Memory checking results:" memcheck.log
defects=$(sed -n '/Memory checking results:/,$p' memcheck.log | tail -n +2 | grep -E ' - [0-9]+' || true)
if [ -n "$defects" ]; then echo "memcheck: defects found:"; echo "$defects"; exit 1; fi
echo "memcheck: clean"
