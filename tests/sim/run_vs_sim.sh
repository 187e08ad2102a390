#!/bin/sh
# run_vs_sim.sh — one case of the runtime-against-simulator check: runs the point
# for real under mpirun and in the simulator (ring collectives, as the runtime
# counts them), then compares bytes per rank and peak memory (check_run_vs_sim). The real run
# also checks its outputs and gradients against the single-rank reference (--verify), at
# attention scope: at layer and model scope (a workload.scope=... argument) the layer's
# projections run on scratch, so there is nothing for the reference to check.
# usage: run_vs_sim.sh BURSTSIM CHECKER MPIEXEC NP SCENARIO OUTDIR [section.key=value]...
set -eu
burstsim=$1 checker=$2 mpiexec=$3 np=$4 ini=$5 dir=$6
shift 6
sets="--set parallel.gpus=$np --set cluster.coll_algo=ring"
verify=--verify
for kv in "$@"; do
  sets="$sets --set $kv"
  case $kv in
  workload.scope=attention) verify=--verify ;;
  workload.scope=*) verify= ;;
  esac
done
mkdir -p "$dir"
rm -f "$dir/run.json" "$dir/sim.json"
# shellcheck disable=SC2086  # $sets is a list of options
"$mpiexec" --allow-run-as-root --oversubscribe --mca btl self,vader -np "$np" \
  "$burstsim" run "$ini" $sets --threads 1 --timeout 60 $verify --out "$dir/run.json" > "$dir/run.txt"
# shellcheck disable=SC2086
"$burstsim" sim "$ini" $sets --out "$dir/sim.json" > "$dir/sim.txt"
exec "$checker" "$dir/run.json" "$dir/sim.json"
