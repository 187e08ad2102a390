#!/bin/sh
# explain.sh BURSTSIM SRCDIR — `burstsim sim --explain`: a sweep with a refused point prints the second
# table after the results, one row per point whose parts (ms) add up to its step and whose shares add
# up to 100 %; the refused point's row says so; the CSV's explain columns add up to step_s on every
# point that ran; without --explain there is no second table.
bs=$1; src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/bs-explain-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail() { echo "explain.sh: $*"; exit 1; }
timeout 120 "$bs" sim "$src/tests/sim/small.ini" --quiet --set parallel.gpus=16 --set workload.seq_len=16K \
  --set parallel.method=burst,ring,ulysses --set model.heads=8 --set model.kv_heads=8 --explain \
  --csv "$work/r.csv" >"$work/out" 2>"$work/err" || { cat "$work/out" "$work/err"; fail "the sweep failed"; }
cat "$work/out"
grep -q "^where the step goes: the critical rank of each point" "$work/out" || fail "no explain table"
# the rows after the explain table's header: method gpus seq rank step, then "ms pct%" per part
awk '/^where the step goes/ { on = 1; getline; next }
     on && $1 == "ulysses" { refused = ($NF == "refused") }
     on && ($1 == "burst" || $1 == "ring") {
       n++; step = $5; ms = 0; pct = 0
       for (i = 6; i < NF; i += 2) { ms += $i; p = $(i + 1); sub(/%$/, "", p); pct += p }
       if (ms < step - 0.0005 * NF || ms > step + 0.0005 * NF) { print "parts " ms " ms, step " step " ms: " $0; bad = 1 }
       if (pct < 100 - 0.05 * NF || pct > 100 + 0.05 * NF) { print "shares add up to " pct " %: " $0; bad = 1 }
     }
     END { if (n != 2) { print n " rows that ran, expected 2"; bad = 1 }
           if (!refused) { print "the refused point does not say so"; bad = 1 }
           exit bad }' "$work/out" || fail "the explain table does not add up"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
         { st = $h["status"] }
         st == "ok" { s = 0; for (c in h) if (c ~ /^explain_.*_s$/) s += $h[c]
                      if (s < $h["step_s"] * (1 - 1e-6) || s > $h["step_s"] * (1 + 1e-6)) { print "row " NR ": explain columns " s " s, step_s " $h["step_s"]; bad = 1 }
                      if ($h["explain_rank"] == "") { print "row " NR ": no explain_rank"; bad = 1 }
                      n++ }
         st != "ok" && $h["explain_rank"] != "" { print "row " NR ": a refused point with an explain_rank"; bad = 1 }
         END { if (n != 2) { print n " ok rows, expected 2"; bad = 1 }; exit bad }' "$work/r.csv" ||
  fail "the CSV's explain columns do not add up to step_s"
timeout 120 "$bs" sim "$src/tests/sim/small.ini" --quiet --set parallel.gpus=16 --set workload.seq_len=16K \
  --set parallel.method=burst >"$work/plain" 2>&1 || { cat "$work/plain"; fail "the plain run failed"; }
grep -q "where the step goes" "$work/plain" && fail "a second table without --explain"
echo "explain.sh: the explain table and columns add up"
