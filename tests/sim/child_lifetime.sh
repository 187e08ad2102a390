#!/bin/sh
# child_lifetime.sh BURSTSIM SCENARIO — the forked SimGrid process of a slow point (256 GPUs,
# unfolded, every collective step a message, in SimGrid: several seconds):
#   1. stderr not a terminal: "point 1/1 still running (N s)" lines (BURSTSIM_LIVENESS_S=1);
#   2. SIGTERM to `burstsim sim`: it kills and reaps its child, then ends by SIGTERM;
#   3. SIGKILL to `burstsim sim`: the child dies with it (PR_SET_PDEATHSIG).
bs=$1; scenario=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
slow="--set parallel.gpus=256 --set parallel.method=burst --fold off --coll steps --engine simgrid"

BURSTSIM_LIVENESS_S=1 timeout 300 "$bs" sim "$scenario" $slow >"$log" 2>&1
rc=$?
cat "$log"
if [ "$rc" -ne 0 ]; then echo "child_lifetime: the slow point failed (exit $rc)"; exit 1; fi
if ! grep -q "^burstsim sim: point 1/1 still running ([0-9]* s)$" "$log"; then
  echo "child_lifetime: no line says the point is still running"; exit 1
fi
if ! grep -q "burst  *256  *64K  *[0-9.]* ms" "$log"; then echo "child_lifetime: no result row"; exit 1; fi

# Waits up to 10 s for a child of $1; prints its pid.
child_of() {
  i=0
  while [ $i -lt 100 ]; do
    c=$(pgrep -P "$1" | head -n 1)
    if [ -n "$c" ]; then echo "$c"; return 0; fi
    sleep 0.1; i=$((i + 1))
  done
  return 1
}
# Succeeds when pid $1 is gone (or a zombie no one reaps) within 3 s.
gone_soon() {
  i=0
  while [ $i -lt 30 ]; do
    st=$(ps -o stat= -p "$1" 2>/dev/null)
    case "$st" in ''|Z*) return 0 ;; esac
    sleep 0.1; i=$((i + 1))
  done
  return 1
}

for sig in TERM KILL; do
  "$bs" sim "$scenario" $slow >"$log" 2>&1 &
  parent=$!
  child=$(child_of "$parent") || { echo "child_lifetime: SIG$sig: no child process appeared"; kill -9 "$parent"; exit 1; }
  kill -s "$sig" "$parent"
  wait "$parent"
  prc=$?
  if ! gone_soon "$child"; then
    echo "child_lifetime: SIG$sig to the parent left its child $child running"; kill -9 "$child"; exit 1
  fi
  want=143; [ "$sig" = KILL ] && want=137
  if [ "$prc" -ne "$want" ]; then echo "child_lifetime: SIG$sig: the parent exited $prc, not $want"; exit 1; fi
  echo "child_lifetime: SIG$sig to the parent: its child is gone, the parent exited $prc"
done
