#!/bin/sh
# sigterm.sh BURSTSIM SCENARIO DIR — a search ended by SIGTERM writes what it has, marked partial:
# --out's "partial": true, report.md's "Partial: interrupted by SIGTERM", and a message naming what
# was examined and what was not (not "no configuration fits"). Exit 1 (nothing found in time).
bin=$1; scen=$2; dir=$3
rm -rf "$dir"; mkdir -p "$dir"
BURSTSIM_PROGRESS_S=0 "$bin" search "$scen" --force --top-only --out "$dir/s.json" --report "$dir/rep" \
  >"$dir/out" 2>"$dir/err" &
pid=$!
i=0
while [ $i -lt 600 ] && ! grep -q "examined" "$dir/err"; do sleep 0.1; i=$((i + 1)); done
kill -TERM $pid
wait $pid
rc=$?
cat "$dir/out" "$dir/err"
fail() { echo "sigterm.sh: $1"; exit 1; }
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q "interrupted by SIGTERM: [0-9]* of 383733 candidates examined" "$dir/err" || fail "no line on what was examined"
grep -q "no configuration fits" "$dir/err" && fail "says no configuration fits"
grep -q '"partial":[[:space:]]*true' "$dir/s.json" || fail "--out is not marked partial"
grep -q "Partial: interrupted by SIGTERM" "$dir/rep/report.md" || fail "report.md does not say it was interrupted"
echo "sigterm.sh: partial outputs written"
