#!/bin/sh
# tree-decode: simulates tree and ring decoding (one token, one attention layer) on 8..1024 DGX H100
# GPUs at 32K..5M tokens, plots latency, bytes and memory with gnuplot and writes report.md.
# Usage: run.sh BURSTSIM OUTDIR
set -eu
BURSTSIM=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/lib/common.sh
. "$HERE/../lib/common.sh"
sweep gqa "$HERE/scenario.ini"
sweep kv32 "$HERE/kv32.ini"
awk -v tag=h100 -f "$LIB/csv.awk" -f "$LIB/rows.awk" "$OUT/gqa.csv" "$OUT/kv32.csv" > "$OUT/points.tsv"
awk -F'\t' -v d="$OUT/dat" -f "$LIB/fmt.awk" -f "$HERE/series.awk" "$OUT/points.tsv"
gnuplot -e "d='$OUT/dat'; o='$OUT'" "$HERE/plot.gp"
awk -F'\t' -f "$LIB/fmt.awk" -f "$HERE/report.awk" "$OUT/points.tsv" > "$OUT/report.md"
echo "tree-decode: $OUT/report.md"
