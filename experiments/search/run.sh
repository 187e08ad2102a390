#!/bin/sh
# search: the three questions `burstsim search` answers, for DGX A100 and DGX H100 clusters, on
# LLaMA-2-7B (llama2-7b.ini, the whole model, one causal sequence per step):
#   best-split   the fastest configuration of 32 GPUs at 256K tokens (every parallel key searched);
#   fewest-gpus  the smallest GPU count (8, 16, 32, 64) that trains 512K tokens;
#   longest      the longest sequence (64K .. 2M, doubling) 16 GPUs train.
# The last two are loops over --set (search has no mode for them): each step asks for the best
# configuration only (--top 1 --top-only) and the loop stops at the first (or last) that fits.
# Every search writes OUTDIR/<cluster>-<question>[-<value>]/report.md with front.png.
# Usage: run.sh BURSTSIM OUTDIR
set -eu
BURSTSIM=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
INI=$HERE/llama2-7b.ini
mkdir -p "$OUT"

for cluster in a100 h100; do
  if [ $cluster = a100 ]; then CL="--set cluster.topology=dgx-a100 --set cluster.profile=a100-sxm4-80gb"
  else CL="--set cluster.topology=dgx-h100 --set cluster.profile=h100-sxm"; fi

  # shellcheck disable=SC2086
  "$BURSTSIM" search "$INI" $CL --quiet --set parallel.gpus=32 --set workload.seq_len=256K --top 5 \
    --report "$OUT/$cluster-best-split" > "$OUT/$cluster-best-split.txt"

  : > "$OUT/$cluster-fewest-gpus.txt"
  for g in 8 16 32 64; do
    # shellcheck disable=SC2086
    if "$BURSTSIM" search "$INI" $CL --quiet --set parallel.gpus=$g --set workload.seq_len=512K --top 1 --top-only \
      --report "$OUT/$cluster-fewest-gpus-$g" > "$OUT/$cluster-fewest-gpus-$g.txt" 2>&1; then
      echo "$cluster: 512K tokens fit on $g GPUs (smallest of 8, 16, 32, 64)" >> "$OUT/$cluster-fewest-gpus.txt"
      cat "$OUT/$cluster-fewest-gpus-$g.txt" >> "$OUT/$cluster-fewest-gpus.txt"
      break
    fi
    echo "$cluster: 512K tokens do not fit on $g GPUs" >> "$OUT/$cluster-fewest-gpus.txt"
  done

  : > "$OUT/$cluster-longest.txt"
  for n in 64K 128K 256K 512K 1M 2M; do
    # shellcheck disable=SC2086
    if ! "$BURSTSIM" search "$INI" $CL --quiet --set parallel.gpus=16 --set workload.seq_len=$n --top 1 --top-only \
      --report "$OUT/$cluster-longest-$n" > "$OUT/$cluster-longest-$n.txt" 2>&1; then
      echo "$cluster: $n tokens do not fit on 16 GPUs" >> "$OUT/$cluster-longest.txt"
      break
    fi
    echo "$cluster: $n tokens fit on 16 GPUs" >> "$OUT/$cluster-longest.txt"
    head -3 "$OUT/$cluster-longest-$n.txt" >> "$OUT/$cluster-longest.txt"
  done
done
# One summary: the answers, and the best split's report per cluster.
{
  echo "# burstsim search: three questions on LLaMA-2-7B (experiments/search/run.sh)"
  for cluster in a100 h100; do
    echo
    echo "## $cluster"
    echo
    echo "Fewest GPUs for 512K tokens:"
    echo
    grep -E "fit on|do not fit" "$OUT/$cluster-fewest-gpus.txt" | sed 's/^/- /'
    echo
    echo "Longest sequence on 16 GPUs:"
    echo
    grep -E "fit on|do not fit" "$OUT/$cluster-longest.txt" | sed 's/^/- /'
    echo
    echo "Best split of 32 GPUs at 256K tokens ($cluster-best-split/report.md):"
    echo
    sed -n '/^## Top/,/^## Why/p' "$OUT/$cluster-best-split/report.md" | grep '^|'
    echo
    grep -E '^[0-9]+ candidates' "$OUT/$cluster-best-split/report.md"
  done
} > "$OUT/report.md"
echo "reports in $OUT (summary: $OUT/report.md)"
