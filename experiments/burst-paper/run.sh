#!/bin/sh
# burst-paper: simulates the BurstAttention paper's setups on A100 40 GB PCIe nodes (prefill
# first-token latency of LLaMA-2-7B/13B on 8 GPUs; LLaMA-2-7B training on 8 and 32 GPUs), plots
# them with gnuplot and writes report.md from the data. Usage: run.sh BURSTSIM OUTDIR
set -eu
BURSTSIM=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/lib/common.sh
. "$HERE/../lib/common.sh"
for s in prefill-tp prefill-ring prefill-burst train-tp train-burst; do
  sweep "$s" "$HERE/$s.ini"
done
for s in prefill-tp prefill-ring prefill-burst train-tp train-burst; do
  awk -v tag=pcie -f "$LIB/csv.awk" -f "$LIB/rows.awk" "$OUT/$s.csv"
done > "$OUT/points.tsv"
awk -F'\t' -v d="$OUT/dat" -f "$LIB/fmt.awk" -f "$HERE/label.awk" -f "$HERE/series.awk" "$OUT/points.tsv"
CAP=$(awk -F'\t' '$18 > 0 { print $18; exit }' "$OUT/points.tsv")
gnuplot -e "d='$OUT/dat'; o='$OUT'; cap=${CAP:-0}" "$HERE/plot.gp"
awk -F'\t' -f "$LIB/fmt.awk" -f "$HERE/label.awk" -f "$HERE/report.awk" "$OUT/points.tsv" > "$OUT/report.md"
echo "burst-paper: $OUT/report.md"
