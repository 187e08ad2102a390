#!/bin/sh
# trace_scopes.sh BURSTSIM SRCDIR — traces are never silently nothing: at model scope --trace writes
# the layers the layer shortcut simulated, labelled so (otherData.note, an instant event), with
# tracks named by node and rank; output.trace = on in the scenario writes SCENARIO.trace.json in
# the current directory (layer scope); a first point that is refused says that no trace was written.
bs=$1; src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/bs-trace-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail() { echo "trace_scopes: $*"; exit 1; }
q="$src/experiments/quickstart.ini"
common="--set parallel.method=ring --set parallel.gpus=8 --set workload.seq_len=8K --set model.preset=llama3-8b"
# shellcheck disable=SC2086
timeout 120 "$bs" sim "$q" $common --set workload.scope=model --trace "$work/m.json" >"$work/log" 2>&1 ||
  { cat "$work/log"; fail "the model-scope point failed"; }
[ -s "$work/m.json" ] || fail "no trace at model scope"
grep -q '"note":"layer shortcut: 4 of 32 layers simulated' "$work/m.json" || fail "the model trace is not labelled"
grep -q '"name":"layer shortcut[^"]*","ph":"i"' "$work/m.json" || fail "no instant event says what the trace shows"
grep -q '"thread_name".*"args":{"name":"rank 7"}' "$work/m.json" || fail "rank 7's track is not named"
grep -q '"process_name".*"args":{"name":"node 0"}' "$work/m.json" || fail "node 0's track is not named"
grep -q '"cat":"compute"' "$work/m.json" || fail "the model trace has no compute event"
grep -q "trace of point 1 written to $work/m.json (the layer shortcut" "$work/log" || fail "stderr does not say so"
# output.trace = on, layer scope, no --trace
cp "$q" "$work/layer.ini"
# shellcheck disable=SC2086
(cd "$work" && timeout 120 "$bs" sim layer.ini $common --set workload.scope=layer --set output.trace=on \
  >"$work/log" 2>&1) || { cat "$work/log"; fail "the layer-scope point failed"; }
[ -s "$work/layer.trace.json" ] || { cat "$work/log"; fail "output.trace = on wrote no layer.trace.json"; }
grep -q '"note":"the whole point"' "$work/layer.trace.json" || fail "the layer trace does not say it is whole"
# a refused first point: said, no file
timeout 120 "$bs" sim "$q" --set parallel.method=ulysses --set parallel.gpus=64 --trace "$work/u.json" \
  >"$work/log" 2>&1
[ -e "$work/u.json" ] && fail "a refused point wrote a trace"
grep -q "trace $work/u.json: not written: point 1 refused" "$work/log" || { cat "$work/log"; fail "no word on the trace"; }
echo "trace_scopes: model and layer traces written and labelled, a refused point's said"
