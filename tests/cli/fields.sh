#!/bin/sh
# fields.sh BURSTSIM CHECK_FIELDS SRCDIR — one small sweep written as JSON and CSV (methods that run
# and one that fails, train and decode, what-ifs), read back by check_fields against the table of field
# descriptions: every CSV column is described, and JSON and CSV carry the same values.
bs=$1; check=$2; src=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/bs-fields-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail() { echo "fields.sh: $*"; exit 1; }
timeout 120 "$bs" sim "$src/tests/sim/small.ini" --set parallel.gpus=16 --set workload.seq_len=16K \
  --set parallel.method=burst,ring,ulysses --set model.heads=8 --set model.kv_heads=8 \
  --out "$work/r.json" --csv "$work/r.csv" >"$work/log" 2>&1 || { cat "$work/log"; fail "the train sweep failed"; }
grep -q "refused: " "$work/log" || { cat "$work/log"; fail "no point of the sweep was refused (ulysses on 16 GPUs, 8 heads)"; }
"$check" "$work/r.json" "$work/r.csv" || fail "train sweep: JSON, CSV and the field table disagree"
timeout 120 "$bs" sim "$src/tests/sim/small.ini" --set parallel.gpus=8 --set workload.seq_len=16K \
  --set workload.phase=decode --set parallel.method=tree,ring \
  --out "$work/d.json" --csv "$work/d.csv" >"$work/log" 2>&1 || { cat "$work/log"; fail "the decode sweep failed"; }
grep -q '"decode_tokens"' "$work/d.json" || fail "the decode sweep's JSON has no decode_tokens"
"$check" "$work/d.json" "$work/d.csv" || fail "decode sweep: JSON, CSV and the field table disagree"
timeout 120 "$bs" sim "$src/tests/sim/small.ini" --set parallel.gpus=16 --set workload.seq_len=16K \
  --set parallel.method=ring --set cluster.straggler=none,3:1.5 --set cluster.degrade=nic:0.5 \
  --out "$work/w.json" --csv "$work/w.csv" >"$work/log" 2>&1 || { cat "$work/log"; fail "the what-if sweep failed"; }
grep -q '"whatif":[[:space:]]*"straggler=3:1.5 degrade=nic:0.5"' "$work/w.json" || fail "the what-if sweep's JSON lacks its whatif"
grep -q ',straggler=3:1.5 degrade=nic:0.5,' "$work/w.csv" || fail "the what-if sweep's CSV lacks its whatif column"
"$check" "$work/w.json" "$work/w.csv" || fail "what-if sweep: JSON, CSV and the field table disagree"
echo "fields.sh: the three sweeps read back against the field table"
