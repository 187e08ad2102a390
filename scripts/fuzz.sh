#!/usr/bin/env bash
# Fuzzes the input parsers with libFuzzer (clang, from Debian) for a bounded
# time each: scripts/fuzz.sh [SECONDS_PER_TARGET]. Seeds live in
# tests/fuzz/corpus/TARGET; crashes are written to build-fuzz/crashes/ and
# should each become a regression test. Prints executions, coverage and crashes found.
# FUZZ_JOBS=N runs N targets at once.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
OUT=build-fuzz
mkdir -p "$OUT/crashes"
CC=${CC_FUZZ:-clang}
CXX=${CXX_FUZZ:-clang++}
for c in "$CC" "$CXX"; do
  command -v "$c" >/dev/null || { echo "fuzz.sh: $c not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
done
FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. -DBURSTSIM_VERSION=\"fuzz\" -D_GNU_SOURCE"

build_target() { # name, extra pkg-config modules, sources... (C, or C++ for .cpp)
  local name=$1 mods=$2; shift 2
  local objs=() src obj
  mkdir -p "$OUT/obj-$name"
  for src in "$@"; do
    obj="$OUT/obj-$name/$(echo "$src" | tr '/' '_').o"
    case $src in
      *.cpp) $CXX $FLAGS -std=c++17 -c -o "$obj" "$src" $(pkg-config --cflags $mods) ;;
      *) $CC $FLAGS -std=gnu11 -Wall -Wextra -Werror -c -o "$obj" "$src" $(pkg-config --cflags inih libcjson $mods) ;;
    esac
    objs+=("$obj")
  done
  # linked by the C++ driver: SimGrid and the sanitizers' C++ runtime
  $CXX $FLAGS -o "$OUT/$name" "${objs[@]}" $(pkg-config --libs inih libcjson $mods) -lm
}

# Each target: tests/fuzz/fuzz_NAME.c with tests/fuzz/fuzz_NAME.sources listing the sources it needs
# and, optionally, tests/fuzz/fuzz_NAME.libs naming extra pkg-config modules. ctest's
# fuzz.sources_link links every list with the host compiler, so a list that lacks a file fails there
# before a campaign starts.
targets=()
for f in tests/fuzz/fuzz_*.sources; do
  name=$(basename "$f" .sources); name=${name#fuzz_}
  libs="tests/fuzz/fuzz_$name.libs"
  mods=""; [ -e "$libs" ] && mods=$(cat "$libs")
  # shellcheck disable=SC2046
  build_target "$name" "$mods" "tests/fuzz/fuzz_$name.c" $(cat "$f")
  targets+=("$name")
done

# Targets run side by side (FUZZ_JOBS at a time, default 1), each for SECS seconds.
JOBS=${FUZZ_JOBS:-1}
run_target() {
  local t=$1 corpus="$OUT/corpus-$1" log="$OUT/$1.log"
  mkdir -p "$corpus"
  "$OUT/$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$OUT/crashes/$t-" "$corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1
  echo $? >"$OUT/$t.rc"
}
running=0
for t in "${targets[@]}"; do
  run_target "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then wait -n || true; running=$((running - 1)); fi
done
wait

status=0
# execs: inputs run; cov / ft: coverage points and features libFuzzer reached (its final DONE line);
# crashes: crash, timeout (hang over 10 s) and out-of-memory artifacts.
printf '%-10s %12s %6s %6s %8s %8s\n' target execs cov ft crashes seconds
for t in "${targets[@]}"; do
  log="$OUT/$t.log"
  rc=$(cat "$OUT/$t.rc")
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 || true)
  cov=$(echo "$done_line" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$done_line" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
  crashes=$(ls "$OUT/crashes" | grep -cE "^$t-(crash|timeout|oom|leak)-" || true) # not slow-unit-
  printf '%-10s %12s %6s %6s %8s %8s\n' "$t" "${execs:-0}" "${cov:--}" "${ft:--}" "$crashes" "$SECS"
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then status=1; tail -30 "$log" >&2; fi
done
exit $status
