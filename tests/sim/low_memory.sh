#!/bin/sh
# low_memory.sh BURSTSIM SCENARIO — `sim` under a low address-space limit (ulimit -v): a small
# point still runs (OpenBLAS's fork handler would wait for ever on its starved thread pool),
# and a point too large for the limit fails with "out of memory", a non-zero exit, in bounded time.
bs=$1; scenario=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
( ulimit -v 200000 && exec timeout 60 "$bs" sim "$scenario" --set parallel.gpus=16 --set parallel.method=burst ) >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -eq 124 ]; then echo "low_memory: the small point still ran after 60 s (a hang)"; exit 1; fi
if [ "$rc" -ne 0 ]; then echo "low_memory: the small point failed (exit $rc) under ulimit -v 200000"; exit 1; fi
if ! grep -q "burst  *16  *64K  *[0-9.]* ms" "$out"; then echo "low_memory: no result row for the small point"; exit 1; fi
( ulimit -v 150000 && exec timeout 60 "$bs" sim "$scenario" --set parallel.gpus=1024 --set parallel.method=ring --fold off ) >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -eq 124 ]; then echo "low_memory: the large point still ran after 60 s (a hang)"; exit 1; fi
if [ "$rc" -eq 0 ]; then echo "low_memory: the large point succeeded under ulimit -v 150000"; exit 1; fi
if ! grep -q "burstsim sim: point 1 (ring, 1024 GPUs, 65536 tokens): out of memory" "$out"; then
  echo "low_memory: the error does not say out of memory"; exit 1
fi
echo "low_memory: the small point ran, the large one failed with out of memory (exit $rc)"
