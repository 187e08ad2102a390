#!/bin/sh
# lean.sh BURSTSIM SCENARIO DIR KIB — issue 27: a space of millions of candidates (Llama 3.1 405B on
# 2304 GPUs, every key searched) is searched within KIB kibibytes of address space (ulimit -v): each
# candidate's record holds a few dozen bytes, not its configuration and its result (12 KB each, 25 GB
# for that space, which ran out of memory before the first walk). The search gets SIGTERM once it
# examines candidates, and ends as an interrupted search does (exit 1, "interrupted by SIGTERM: N of M
# candidates examined", --out marked partial), with no "out of memory".
bin=$1; scen=$2; dir=$3; kib=$4
rm -rf "$dir"; mkdir -p "$dir"
(ulimit -v "$kib" && BURSTSIM_PROGRESS_S=0 exec "$bin" search "$scen" --force --out "$dir/s.json" \
  >"$dir/out" 2>"$dir/err") &
pid=$!
i=0
while [ $i -lt 2400 ] && kill -0 $pid 2>/dev/null && ! grep -q "examined" "$dir/err"; do sleep 0.1; i=$((i + 1)); done
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?
cat "$dir/out" "$dir/err"
fail() { echo "lean.sh: $1"; exit 1; }
grep -q "out of memory" "$dir/err" && fail "out of memory within $kib KiB"
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q "interrupted by SIGTERM: [1-9][0-9]* of [1-9][0-9]\{6,\} candidates examined" "$dir/err" ||
  fail "no line on what was examined of a space of millions"
grep -q '"partial":[[:space:]]*true' "$dir/s.json" || fail "--out is not marked partial"
echo "lean.sh: searched within $kib KiB"
