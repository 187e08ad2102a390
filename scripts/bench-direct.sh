#!/bin/sh
# bench-direct.sh [BURSTSIM] [--direct-only] [--only WORD] — the simulator's own cost on the 1024-GPU
# points without symmetry (the fold cannot apply, or a what-if breaks it): attention layers with a
# straggler, causal contiguous burst and ring, causal striped burst, half-rate NICs, a failed NIC,
# usp (its all-to-alls), and a 32-layer LLaMA-2-7B training step unfolded (its gradient allreduce).
# Each point runs in the direct engine and, unless --direct-only, in SimGrid (about 45 s to 2 min each
# on 2 cores, the model step far more); --only runs the points whose name holds WORD. One line per
# point: wall seconds and peak RSS of each engine, the ratio of their walls measured in this run, and
# both predicted step times (they must agree: tests/sim/test_direct.c checks every field on smaller
# points). 1M tokens, LLaMA-2-7B, DGX A100 nodes, the A100 profile (experiments/quickstart.ini).
set -eu
bs=build/burstsim
both=1
only=
want_only=0
for a in "$@"; do
  if [ "$want_only" = 1 ]; then
    only=$a
    want_only=0
    continue
  fi
  case $a in
  --direct-only) both=0 ;;
  --only) want_only=1 ;;
  *) bs=$a ;;
  esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
ini=$here/experiments/quickstart.ini
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# field NAME: the first number of "NAME": in the result JSON
field() { sed -n "s/.*\"$1\":[[:space:]]*\([-0-9.e+]*\).*/\1/p" "$out" | head -n 1; }

# num VALUE DIVISOR: a measured figure for the table (seconds to 0.01, bytes in MiB), "-" when none
num() {
  case $1 in
  - | failed) echo "$1" ;;
  *) awk -v v="$1" -v d="$2" 'BEGIN { printf(d == 1 ? "%.2f" : "%.0f", v / d) }' ;;
  esac
}

# run ENGINE SETS...: prints "wall rss_MiB step engine-note" of one point
run() {
  engine=$1
  shift
  if ! "$bs" sim "$ini" --set parallel.gpus=1024 "$@" --engine "$engine" --quiet --out "$out" >/dev/null 2>&1; then
    echo "failed - - -"
    return
  fi
  ran=$(sed -n 's/.*engine: \([a-z]*\).*/\1/p' "$out" | head -n 1)
  echo "$(field wall_s) $(field rss_bytes) $(awk -v s="$(field step)" 'BEGIN { printf "%.6g", s }') $ran"
}

printf '%-34s %9s %9s %8s %9s %9s %7s %12s %12s\n' point direct_s rss_MiB ran simgrid_s rss_MiB ratio step_direct step_simgrid
bench() {
  name=$1
  shift
  case $name in *"$only"*) ;; *) return ;; esac
  set -- $(run auto "$@") "$@"
  dw=$1 drss=$2 dstep=$3 dran=$4
  shift 4
  sw=- srss=- sstep=- ratio=-
  if [ "$both" = 1 ]; then
    set -- $(run simgrid "$@")
    sw=$1 srss=$2 sstep=$3
    [ "$sw" != failed ] && ratio=$(awk -v s="$sw" -v d="$dw" 'BEGIN { printf "%.1f", s / d }')
  fi
  printf '%-34s %9s %9s %8s %9s %9s %7s %12s %12s\n' "$name" "$(num "$dw" 1)" "$(num "$drss" 1048576)" "$dran" \
    "$(num "$sw" 1)" "$(num "$srss" 1048576)" "$ratio" "$dstep" "$sstep"
}

bench "burst, straggler 17:1.5" --set parallel.method=burst --set cluster.straggler=17:1.5
bench "burst, causal contiguous" --set parallel.method=burst --set workload.causal=true --set parallel.layout=contiguous
bench "ring, causal contiguous" --set parallel.method=ring --set workload.causal=true --set parallel.layout=contiguous
bench "burst, causal striped" --set parallel.method=burst --set workload.causal=true --set parallel.layout=striped
bench "burst, NICs at half rate, fold off" --set parallel.method=burst --set cluster.degrade=nic:0.5 --fold off
bench "burst, one failed NIC on node 3" --set parallel.method=burst --set cluster.failed_nics=3:1
bench "usp, causal contiguous" --set parallel.method=usp --set workload.causal=true --set parallel.layout=contiguous
bench "LLaMA-2-7B step, 32 layers, fold off" --set parallel.method=burst --set workload.scope=model --fold off
