#!/bin/sh
# composed: simulates the tensor x context x data x pipeline configurations published for long
# contexts (NeMo's Llama 3 8B recipes, Meta's Llama 3.1 405B TP 8 x CP N serving, LLaMA-2-7B at 1M
# tokens on 1024 GPUs, LLaMA-3-8B tp x ulysses x ring), plots the 405B prefill scaling and writes
# report.md from the data. Usage: run.sh BURSTSIM OUTDIR
set -eu
BURSTSIM=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/lib/common.sh
. "$HERE/../lib/common.sh"

sweep nemo-16k "$HERE/nemo-llama3-8b.ini"
sweep nemo-64k "$HERE/nemo-llama3-8b.ini" --set workload.seq_len=64K --set parallel.gpus=32
sweep grid "$HERE/llama2-7b-grid.ini"
sweep meta "$HERE/meta-405b.ini"
# TP 16 and 32 across nodes: more ranks than the 8 KV heads, each KV head replicated 2 and 4 times.
sweep meta-tp "$HERE/meta-405b.ini" --set parallel.method=tp --set parallel.tp=1 --set parallel.gpus=16,32 \
  --set parallel.layout=contiguous || true
sweep meta-1m "$HERE/meta-405b.ini" --set parallel.gpus=128 --set workload.seq_len=1M
sweep usp "$HERE/usp-llama3-8b.ini"

# nodes, prefill time, ideal scaling from one node (ok points of the 128K sweep)
awk -f "$LIB/csv.awk" -f "$HERE/prefill.awk" "$OUT/meta.csv" > "$OUT/dat/meta.dat"
gnuplot -e "d='$OUT/dat'; o='$OUT'" "$HERE/plot.gp"
cd "$OUT"
awk -f "$LIB/csv.awk" -f "$LIB/fmt.awk" -f "$HERE/report.awk" nemo-16k.csv nemo-64k.csv grid.csv meta.csv meta-tp.csv \
  meta-1m.csv usp.csv > report.md
echo "composed: $OUT/report.md"
