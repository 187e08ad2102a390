#!/bin/sh
# results_contract.sh BURSTSIM CHECK_FIELDS SRCDIR — the result contract of a sweep over two keys
# (method x layout) with a refused point (ulysses beyond the KV heads, and zigzag) and a failed one
# (BURSTSIM_TEST_CRASH aborts the simulation of point 2): the exit code (1: a point failed; 0 when
# only refusals), the table's columns (the layout that varies, no phase or zero that do not), the
# status and reason of every row, null figures in the JSON and empty cells in the CSV for the points
# without figures, the JSON and CSV agreeing (check_fields), the progress lines on stderr and none
# with --quiet, and a setting without effect (ZeRO at attention scope) warned once.
bs=$1; check=$2; src=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/bs-contract-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail() { echo "results_contract: $*"; exit 1; }
sweep() {
  timeout 120 "$bs" sim "$src/tests/sim/small.ini" --set parallel.gpus=16 --set workload.seq_len=16K \
    --set parallel.method=burst,ulysses --set parallel.layout=contiguous,zigzag --set model.heads=8 \
    --set model.kv_heads=8 "$@"
}
BURSTSIM_TEST_CRASH="point 2/4" sweep --set parallel.zero=1 --out "$work/r.json" --csv "$work/r.csv" \
  >"$work/table" 2>"$work/err"
rc=$?
[ "$rc" -eq 1 ] || { cat "$work/table" "$work/err"; fail "exit code $rc with a failed point, expected 1"; }
# the table: a layout column, no phase / zero / profile column; one row per point, why for the others
head -n 1 "$work/table" | grep -q " layout " || fail "the table has no layout column (it varies)"
for c in phase zero profile topology; do
  head -n 1 "$work/table" | grep -q " $c " && fail "the table has a $c column, which does not vary"
done
[ "$(wc -l <"$work/table")" -eq 5 ] || fail "the table has not a header and 4 rows"
sed -n 2p "$work/table" | grep -q "^burst .* ms .*%$" || fail "point 1 shows no figures: $(sed -n 2p "$work/table")"
sed -n 3p "$work/table" | grep -q "  failed: the simulation process died of signal" || fail "point 2 is not failed"
sed -n 4p "$work/table" | grep -q "  refused: parallel.gpus: ulysses needs gpus <= heads: 16 > 8" ||
  fail "point 3 is not refused with its reason"
sed -n 5p "$work/table" | grep -q "  refused: parallel.layout: " || fail "point 4 is not refused with its reason"
for n in 3 4 5; do
  sed -n "${n}p" "$work/table" | grep -q " ms \| us \| OOM" && fail "row $n has figures: $(sed -n "${n}p" "$work/table")"
done
# the CSV: status by its header name, figures empty except for the point that ran
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  { st = $col["status"]; s = s st " "
    if ((st == "ok") != ($col["step_s"] != "") || (st == "ok") != ($col["oom"] != "") ||
        (st == "ok") != ($col["tokens_per_s"] != "") || $col["method"] == "" || $col["layout"] == "") bad = 1 }
  END { if (s != "ok failed refused refused " || bad) { print s; exit 1 } }' "$work/r.csv" ||
  fail "the CSV's status or figures are wrong"
# the JSON: statuses, null figures (3 points x step), the error of the three, the warnings array
[ "$(grep -c '"status":[[:space:]]*"ok"' "$work/r.json")" -eq 1 ] || fail "the JSON has not one ok point"
[ "$(grep -c '"step":[[:space:]]*null' "$work/r.json")" -eq 3 ] || fail "the JSON has not 3 null steps"
[ "$(grep -c '"oom":[[:space:]]*null' "$work/r.json")" -eq 3 ] || fail "the JSON has not 3 null oom"
[ "$(grep -c '"error":' "$work/r.json")" -eq 3 ] || fail "the JSON has not 3 errors"
# ZeRO at attention scope: one warning for the 4 points, on stderr and in the JSON's warnings
[ "$(grep -c "^burstsim sim: warning: parallel.zero: stage 1 has no effect at attention scope" "$work/err")" -eq 1 ] ||
  { cat "$work/err"; fail "the ZeRO warning is not said once"; }
grep -q '"warnings":[[:space:]]*\["parallel.zero: stage 1 has no effect at attention scope' "$work/r.json" ||
  fail "the JSON's warnings lack the ZeRO warning"
"$check" "$work/r.json" "$work/r.csv" || fail "JSON, CSV and the field table disagree"
# stderr, not a terminal: a line per finished point with its status
for s in "1/4 ok" "2/4 failed" "3/4 refused" "4/4 refused"; do
  grep -q "^burstsim sim: point $s (.*) in .*; .* elapsed, about .* left$" "$work/err" ||
    { cat "$work/err"; fail "no progress line 'point $s'"; }
done
# only refusals: exit 0 (a refusal is an answer); --quiet: no progress line, the reasons still
sweep --quiet >"$work/table" 2>"$work/err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$work/err"; fail "exit code $rc with refused points only, expected 0"; }
grep -q "point [0-9]*/4 " "$work/err" && { cat "$work/err"; fail "--quiet printed progress lines"; }
grep -q "ulysses needs gpus <= heads" "$work/err" || fail "--quiet silenced the reason of a refusal"
echo "results_contract: exit codes, table columns, statuses, null figures, progress lines as documented"
