#!/bin/sh
# what-if: the step-time cost of a non-uniform cluster for burst, ring, usp and tp training one
# attention layer on 128 DGX A100 GPUs at 128K and 1M tokens: one straggler GPU (rank 17) computing 1.1x to 2x slower,
# every NIC at half rate, one failed NIC per node (its GPU sends through another NIC of the node),
# and leaves of 4 nodes with 2:1, 4:1 and 8:1 oversubscribed uplinks. Writes the points, two gnuplot
# PNGs and report.md. Usage: run.sh BURSTSIM OUTDIR
set -eu
BURSTSIM=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/lib/common.sh
. "$HERE/../lib/common.sh"

start=$(date +%s)
for f in ring heads; do
  sweep "straggler-$f" "$HERE/$f.ini" --set cluster.straggler=none,17:1.1,17:1.25,17:1.5,17:2
  sweep "nic-$f" "$HERE/$f.ini" --set cluster.degrade=nic:0.5
  sweep "failed-$f" "$HERE/$f.ini" --set cluster.failed_nics=all:1
  sweep "leaf-$f" "$HERE/$f.ini" --set cluster.nodes_per_leaf=4 --set cluster.oversub=1,2,4,8
done
wall=$(($(date +%s) - start))

# One row per point: method, seq_len, whatif, step_s, wait_for_peers_s, comm_exposed_s, compute_s,
# status (the CSV's columns by name, lib/csv.awk; the what-if label holds no comma, its spaces
# become '+').
for f in "$OUT"/straggler-*.csv "$OUT"/nic-*.csv "$OUT"/failed-*.csv "$OUT"/leaf-*.csv; do
  awk -f "$LIB/csv.awk" -f "$HERE/points.awk" "$f"
done > "$OUT/points.txt"

# Slowdown against each method's uniform point (what-if "none"); straggler factor series for the plot.
awk -v d="$OUT/dat" -f "$HERE/series.awk" "$OUT/points.txt"
gnuplot -e "d='$OUT/dat'; o='$OUT'" "$HERE/plot.gp"
awk -f "$LIB/fmt.awk" -f "$HERE/report.awk" "$OUT/points.txt" > "$OUT/report.md"
echo "what-if: $OUT/report.md ($wall s of simulation)"
