#!/bin/sh
# sweep_outputs.sh JSON_SAME POINTS ONE.json SPLIT.json ONE.csv TRACE.json — reads back what a sweep
# wrote (sim.cli_sweep in one process, sim.cli_mpi_sweep split over MPI ranks): the two result
# JSON files hold the same results once wall time and RSS are removed, the CSV has a header and
# one row of as many fields per point and no error, and the trace is a JSON trace with compute events.
same=$1; points=$2; one=$3; split=$4; csv=$5; trace=$6
fail() { echo "sweep_outputs: $*"; exit 1; }
for f in "$one" "$split" "$csv" "$trace"; do [ -s "$f" ] || fail "$f is missing or empty"; done
# sim.network aside: it names the engine, and the traced point runs in SimGrid (--trace), its twin in
# the split sweep in the direct engine; their figures must still be the same.
"$same" "$one" "$split" wall_s rss_bytes network || fail "the split sweep's results differ from the single process's"
grep -q '"error"' "$one" && fail "$one holds a failed point"
[ "$(grep -c '"method":' "$one")" -eq "$points" ] || fail "$one does not hold $points points"
rows=$(($(wc -l <"$csv") - 1))
[ "$rows" -eq "$points" ] || fail "$csv has $rows rows, expected $points"
head -n 1 "$csv" | grep -q '^method,gpus,seq_len,.*step_s' || fail "$csv has no header naming method .. step_s"
awk -F, 'NR == 1 { n = NF } NF != n { bad = 1 } END { exit bad }' "$csv" || fail "$csv rows differ in field count"
"$same" "$trace" "$trace" >/dev/null || fail "$trace is not valid JSON"
grep -q '"traceEvents"' "$trace" || fail "$trace has no traceEvents"
grep -q '"cat":"compute"' "$trace" || fail "$trace has no compute event"
echo "sweep_outputs: $points points, JSON equal across processes, CSV and trace read back"
