#!/usr/bin/env bash
# Runs a representative subset of the single-process tests under valgrind
# memcheck (the MPI tests are covered by ASan in CI: valgrind and Open MPI's
# shared memory do not mix well). scripts/memcheck.sh [BUILD_DIR].
# Environment: MEMCHECK_TESTS (ctest -R regex of the subset), MEMCHECK_CMAKE_ARGS
# (e.g. -DBURSTSIM_CUDA=OFF), JOBS (build parallelism). Exit non-zero on any
# error or definite leak (possibly-lost blocks, SimGrid's actor stacks and the
# messages of a plan aborted mid-flight, are not reported).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-memcheck}
command -v valgrind >/dev/null || { echo "memcheck.sh: valgrind not found (apt-get install valgrind)" >&2; exit 1; }
SUBSET=${MEMCHECK_TESTS:-'^(cli|fuzz|plans|reliability\.json_same|calib\.fit|sim\.(ring_step_exact|overlap|deadlock|mismatched|unmatched|wrong_size|unwaited|memory_peak|allreduce|bad_config|shared_host|size_factors|profile|generators|trace_json|cli_(sweep|topo|unknown|bad|missing))).*'}
# shellcheck disable=SC2086
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DBURSTSIM_WERROR=ON ${MEMCHECK_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" >/dev/null
cd "$BUILD"
# Tests that spawn mpirun (label mpi, or mpi in the name) and benchmarks are left out.
ctest -T memcheck -LE mpi --overwrite MemoryCheckCommandOptions="--leak-check=full --error-exitcode=3 --errors-for-leak-kinds=definite --show-possibly-lost=no --trace-children=yes" \
  -R "$SUBSET" -E 'bench|mpi' --output-on-failure 2>&1 | tee memcheck.log | tail -20
# ctest lists one line per defect kind after this header; none means clean.
grep -q "Memory checking results:" memcheck.log
defects=$(sed -n '/Memory checking results:/,$p' memcheck.log | tail -n +2 | grep -E ' - [0-9]+' || true)
if [ -n "$defects" ]; then echo "memcheck: defects found:"; echo "$defects"; exit 1; fi
echo "memcheck: clean"
