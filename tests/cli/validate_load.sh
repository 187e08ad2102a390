#!/bin/sh
# validate_load.sh BURSTSIM SRCDIR — validate knows when the machine is busy: with a busy loop on
# every CPU, the points' runs must be measured as disturbed (load column marked *), repeated once
# (a spread printed), and a warning must say their errors may be the machine's; the JSON carries
# the share and the spread. (A quiet machine cannot be promised under a parallel ctest: not checked.)
bs=$1; src=$2
tmp=$(mktemp -d)
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "validate_load.sh: $*"; cat "$tmp/out" 2>/dev/null; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cat > "$tmp/v.ini" <<'INI'
[model]
preset = llama2-7b
heads = 4
kv_heads = 4
[workload]
phase = train
seq_len = 2K
causal = true
scope = attention
[parallel]
method = ring
gpus = 2
[cluster]
topology = host
profile = host
INI
n=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
i=0
while [ "$i" -lt "$n" ]; do sh -c 'while :; do :; done' & pids="$pids $!"; i=$((i + 1)); done
sleep 1
"$bs" validate "$tmp/v.ini" --profile "$src/calib/profiles/host.json" --workdir "$tmp/wd" --out "$tmp/v.json" > "$tmp/out" 2>&1
rc=$?
[ "$rc" -le 1 ] || fail "validate exit $rc"
grep -q "other work took [0-9]*% of the CPUs while the 2-rank points ran; running them again" "$tmp/out" || fail "no repeat announced"
grep -q "warning: 1 point(s) measured on a busy machine" "$tmp/out" || fail "no warning"
grep -q "^ring .* [0-9]*%\* *[0-9.]*%$" "$tmp/out" || fail "the row lacks the load mark and the spread"
python3 - "$tmp/v.json" <<'PY' || fail "the JSON lacks the share or the spread"
import json, sys
d = json.load(open(sys.argv[1]))
e = d["entries"][0]
assert e["others_cpu_pct"] > 10, e["others_cpu_pct"]
assert e["step_spread_pct"] is not None
assert d["summary"]["disturbed"] == 1
PY
echo "validate_load.sh: ok"
