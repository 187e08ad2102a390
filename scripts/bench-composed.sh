#!/bin/sh
# bench-composed.sh [BURSTSIM] — how long the simulator takes for a composed point at scale:
# a 32-layer LLaMA-2-7B training step at 1M tokens on 1024 DGX H100 GPUs as tp 4 x cp 32 x dp 8
# (issue target: under 60 s on this 2-core machine), folded (the default) and, for the record,
# the predicted step. Prints one line per run: wall seconds, peak RSS, actors simulated, fold.
set -eu
bs=${1:-build/burstsim}
ini=$(mktemp)
out=$(mktemp)
trap 'rm -f "$ini" "$out"' EXIT
cat > "$ini" <<'INI'
[model]
preset = llama2-7b
[workload]
phase = train
seq_len = 1M
batch = 8
causal = true
scope = model
[parallel]
method = burst
layout = zigzag
gpus = 1024
tp = 4
tp_variant = v3
dp = 8
[cluster]
topology = dgx-h100
INI
start=$(date +%s.%N)
"$bs" sim "$ini" --quiet --out "$out" > /dev/null
end=$(date +%s.%N)
python3 - "$out" "$start" "$end" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
wall = float(sys.argv[3]) - float(sys.argv[2])
fold = r["sim"]["network"].split("fold: ")[-1].split(";")[0]
print("llama2-7b train 1M tokens, 1024 GPUs, tp 4 x cp %d x dp %d: step %.3f s predicted; "
      "simulated in %.1f s wall, %.0f MB, %d actors (fold: %s)"
      % (r["parallel"]["cp"], r["parallel"]["dp"], r["time_s"]["step"], wall, r["sim"]["rss_bytes"] / 1e6,
         r["sim"]["actors"], fold))
PY
