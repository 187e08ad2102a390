#!/bin/sh
# critical_rank.sh BURSTSIM SCENARIO [ARGS...] — the table's step, fwd and bwd are one rank's (the
# critical rank's, which finished last): on every row fwd + bwd fits in the step. Per-field maxima
# over ranks (a pipeline's first stage has the longest forward, its last the longest backward) did
# not. The columns are found by the header; each time cell is a number and a unit.
bs=$1; shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bs" sim "$@" --quiet >"$out" 2>/dev/null || { echo "critical_rank: sim failed"; exit 1; }
awk '
function sec(v, u) { return u == "s" ? v : u == "ms" ? v / 1e3 : u == "us" || u == "\302\265s" ? v / 1e6 : u == "ns" ? v / 1e9 : -1 }
NR == 1 { for (i = 1; i <= NF; i++) if ($i == "step") k = i; if ($(k + 1) != "fwd" || $(k + 2) != "bwd") bad = "no step fwd bwd columns"; next }
/refused|failed/ { next }
{ rows++
  step = sec($k, $(k + 1)); fwd = sec($(k + 2), $(k + 3)); bwd = sec($(k + 4), $(k + 5))
  if (step < 0 || fwd < 0 || bwd < 0) { bad = "cannot read the times of row " NR; exit }
  if (fwd + bwd > step * 1.001 + 1e-9) { bad = sprintf("row %d: fwd %s %s + bwd %s %s exceeds the step %s %s", NR, $(k + 2), $(k + 3), $(k + 4), $(k + 5), $k, $(k + 1)); exit } }
END { if (!bad && !rows) bad = "no row"; if (bad) { print "critical_rank: " bad; exit 1 } print "critical_rank: " rows " rows, fwd + bwd within the step" }' "$out" || { cat "$out"; exit 1; }
