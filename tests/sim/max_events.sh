#!/bin/sh
# max_events.sh BURSTSIM SRCDIR — a point's work is estimated before it is simulated (sim/estimate.c)
# and a point past --max-events is refused, exit 2, with the estimate:
#  - the estimate is the simulator's own count: on 16 GPUs without a fold (every rank's program the
#    same length) it equals the sim.events the point then reports, for ring and ulysses; a bound one
#    below that count refuses the point naming parallel.gpus and that count, the count itself runs it;
#  - --max-events 0 is no bound;
#  - a sweep whose points are refused for one reason says it once, then one line with the count
#    (not a line per point), and the table keeps a row per point.
bs=$1; src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/bs-maxev-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail() { echo "max_events: $*"; exit 1; }
ini=$src/tests/sim/small.ini
for m in ring ulysses; do
  pt="--set parallel.method=$m --set parallel.gpus=16 --set workload.causal=false --fold off --quiet"
  # shellcheck disable=SC2086
  timeout 120 "$bs" sim "$ini" $pt --out "$work/$m.json" >/dev/null 2>"$work/err" || { cat "$work/err"; fail "$m did not run"; }
  ev=$(sed -n 's/.*"events":[[:space:]]*\([0-9][0-9]*\).*/\1/p' "$work/$m.json" | head -n 1)
  [ -n "$ev" ] && [ "$ev" -gt 100 ] || fail "$m: no sim.events in the result"
  # shellcheck disable=SC2086
  timeout 60 "$bs" sim "$ini" $pt --max-events $((ev - 1)) >"$work/table" 2>"$work/err"
  rc=$?
  [ "$rc" -eq 2 ] || { cat "$work/table" "$work/err"; fail "$m: --max-events $((ev - 1)): exit $rc, expected 2"; }
  grep -q "parallel.gpus: 16 ranks' programs hold about $ev events (about $((ev / 16)) a rank over 3 read" "$work/err" ||
    { cat "$work/err"; fail "$m: the refusal does not give the simulator's $ev events"; }
  grep -q "past --max-events $((ev - 1)); .* or --max-events $ev or more to simulate it anyway" "$work/err" ||
    { cat "$work/err"; fail "$m: the refusal does not say how to override it"; }
  # shellcheck disable=SC2086
  timeout 120 "$bs" sim "$ini" $pt --max-events "$ev" >/dev/null 2>"$work/err" || { cat "$work/err"; fail "$m: --max-events $ev refused"; }
  # shellcheck disable=SC2086
  timeout 120 "$bs" sim "$ini" $pt --max-events 0 >/dev/null 2>"$work/err" || { cat "$work/err"; fail "$m: --max-events 0 refused"; }
done
# 6 points refused for one reason (ulysses beyond its query heads), 1 for another: 2 reason lines and one
# count, 2 progress lines (the first of each reason), 7 rows
timeout 120 "$bs" sim "$ini" --set parallel.method=ulysses --set model.heads=8 --set model.kv_heads=8 \
  --set parallel.gpus=16,32,64,128,256,512,3 --set workload.seq_len=1000 >"$work/table" 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] || { cat "$work/table" "$work/err"; fail "a sweep refused whole: exit $rc, expected 2"; }
[ "$(grep -c "^burstsim sim: point .*ulysses needs gpus <= heads" "$work/err")" -eq 1 ] ||
  { cat "$work/err"; fail "the repeated reason is said more than once"; }
grep -q "^burstsim sim: 5 more point(s) refused as point 1 was (parallel.gpus: ulysses needs gpus <= heads: N > N)$" \
  "$work/err" || { cat "$work/err"; fail "no count line for the repeated reason"; }
[ "$(grep -c "^burstsim sim: point [0-9]*/7 refused" "$work/err")" -eq 2 ] ||
  { cat "$work/err"; fail "not one progress line per reason"; }
[ "$(grep -c "refused: " "$work/table")" -eq 7 ] || { cat "$work/table"; fail "the table has not 7 refused rows"; }
# Where the plan proves its ranks alike (a zigzag causal burst layer, bs_plan_ring_uniform), the bound
# applies to the ranks the fold simulates: 1024 GPUs hold about 1.1e7 events unfolded, the folded ones
# fewer than 1e6, so --max-events 1e6 runs the zigzag layer and refuses the contiguous one (not alike).
lay=$src/scripts/bench-scale/attn-layer.ini
big="--set parallel.gpus=1024 --set workload.seq_len=64K --max-events 1e6 --quiet"
# shellcheck disable=SC2086
timeout 120 "$bs" sim "$lay" $big >"$work/table" 2>"$work/err" || { cat "$work/err"; fail "the alike 1024-GPU layer was refused"; }
# shellcheck disable=SC2086
timeout 120 "$bs" sim "$lay" $big --set parallel.layout=contiguous >"$work/table" 2>"$work/err"
grep -q "refused: parallel.gpus: 1024 ranks' programs hold about 1.1e+07 events" "$work/table" ||
  { cat "$work/table" "$work/err"; fail "the contiguous 1024-GPU layer was not refused on its unfolded work"; }
echo "max_events: the estimate equals sim.events, the bound refuses with it and --max-events overrides; refusals said once per reason; alike ranks bounded after the fold"
