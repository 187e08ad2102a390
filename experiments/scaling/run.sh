#!/bin/sh
# scaling: simulates burst, ring, ulysses, usp and tp training one LLaMA-2-7B attention layer at
# 32..1024 GPUs of DGX A100 and DGX H100, 128K..4M tokens, plus the double-ring and causal-layout
# sweeps and the whole model at 32 GPUs (does it fit); splits the points into gnuplot series, plots them and writes report.md from the data.
# Usage: run.sh BURSTSIM OUTDIR
set -eu
BURSTSIM=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/lib/common.sh
. "$HERE/../lib/common.sh"

# DGX H100 at every length of the A100 sweeps (usp at 1024 GPUs does not fold: ~25 s a point here).
H100="--set cluster.topology=dgx-h100 --set cluster.profile=h100-sxm"
sweep a100-ring "$HERE/ring-family.ini"
sweep a100-heads "$HERE/head-split.ini"
# shellcheck disable=SC2086
sweep h100-ring "$HERE/ring-family.ini" $H100
# shellcheck disable=SC2086
sweep h100-heads "$HERE/head-split.ini" $H100
sweep dring "$HERE/double-ring.ini"
sweep layouts "$HERE/layouts.ini"
sweep fit-ring "$HERE/fit-ring.ini"
sweep fit-heads "$HERE/fit-heads.ini"

{
  awk -v tag=a100 -f "$LIB/csv.awk" -f "$LIB/rows.awk" "$OUT/a100-ring.csv" "$OUT/a100-heads.csv"
  awk -v tag=h100 -f "$LIB/csv.awk" -f "$LIB/rows.awk" "$OUT/h100-ring.csv" "$OUT/h100-heads.csv"
  awk -v tag=dring -f "$LIB/csv.awk" -f "$LIB/rows.awk" "$OUT/dring.csv"
  awk -v tag=layouts -f "$LIB/csv.awk" -f "$LIB/rows.awk" "$OUT/layouts.csv"
  awk -v tag=fit -f "$LIB/csv.awk" -f "$LIB/rows.awk" "$OUT/fit-ring.csv" "$OUT/fit-heads.csv"
} > "$OUT/points.tsv"

# gnuplot series (series.awk says which files); valid points only.
awk -F'\t' -v d="$OUT/dat" -f "$LIB/fmt.awk" -f "$HERE/series.awk" "$OUT/points.tsv"

CAP=$(awk -F'\t' '$1 == "a100" && $18 > 0 { print $18; exit }' "$OUT/points.tsv")
gnuplot -e "d='$OUT/dat'; o='$OUT'; cap=${CAP:-0}" "$HERE/plot.gp"
awk -F'\t' -f "$LIB/fmt.awk" -f "$HERE/report.awk" "$OUT/points.tsv" > "$OUT/report.md"
echo "scaling: $OUT/report.md"
