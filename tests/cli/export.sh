#!/bin/sh
# export.sh BURSTSIM SRCDIR CASE — burstsim export megatron, round trips: a Megatron arguments file
# imported, simulated (sim --out), exported; every parallel flag of the file must come back as it
# was given, and importing the exported flags must give the same scenario. Cases: p2p (the README's
# LLaMA-3-8B file), usp (a2a+p2p, interleaved pipeline, FP8, full recomputation), a2a (ulysses, FP16,
# FSDP2, GQA), search (every point of a search result: the grid flags equal the result's parallel
# columns), burst (a method Megatron has no --cp-comm-type for: exit 2).
bs=$1; src=$2; case=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "export.sh $case: $*"; for f in args.sh e.sh s1.ini s2.ini; do [ -f "$tmp/$f" ] && { echo "-- $f"; cat "$tmp/$f"; }; done; exit 1; }
small() { # small FLAG...: a small model's arguments file with these flags
  { echo 'MODEL_ARGS=('
    echo '    --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 8192'
    echo '    --padded-vocab-size 32000 --swiglu --ffn-hidden-size 2816'
    echo ')'
    echo "PARALLEL_ARGS=( $* )"; } > "$tmp/args.sh"
}
# roundtrip ARGS TOPOLOGY: import, sim, export, the parallel flags back, import again the same.
roundtrip() {
  "$bs" import megatron "$1" --topology "$2" --out "$tmp/s1.ini" 2>/dev/null || fail "import failed"
  "$bs" sim "$tmp/s1.ini" --quiet --out "$tmp/r.json" >/dev/null || fail "sim failed"
  "$bs" export megatron "$tmp/r.json" > "$tmp/e.sh" || fail "export failed"
  n=0
  for f in tensor-model-parallel-size sequence-parallel pipeline-model-parallel-size context-parallel-size \
           cp-comm-type hierarchical-context-parallel-sizes num-layers-per-virtual-pipeline-stage \
           use-distributed-optimizer use-torch-fsdp2 micro-batch-size global-batch-size; do
    given=$(grep -o -- "--$f\( [0-9a-z+_ ]*[0-9a-z]\)\?" "$1" | tail -n 1)
    [ -n "$given" ] || continue
    grep -qx -- "$given" "$tmp/e.sh" || fail "'$given' did not come back"
    n=$((n + 1))
  done
  [ "$n" -ge 4 ] || fail "only $n parallel flags checked"
  gpus=$(sed -n 's/^gpus = //p' "$tmp/s1.ini")
  grep -qx "WORLD_SIZE=$gpus" "$tmp/e.sh" || fail "the world size $gpus did not come back"
  "$bs" import megatron "$tmp/e.sh" --topology "$2" --out "$tmp/s2.ini" 2>/dev/null || fail "the exported flags do not import"
  grep -v '^;' "$tmp/s1.ini" | sort > "$tmp/k1"; grep -v '^;' "$tmp/s2.ini" | sort > "$tmp/k2"
  cmp -s "$tmp/k1" "$tmp/k2" || { diff "$tmp/k1" "$tmp/k2"; fail "import(export(sim(import))) is another scenario"; }
  echo "export.sh $case: $n parallel flags and the world size came back; the scenario re-imports unchanged"
}
case "$case" in
  p2p) roundtrip "$src/tests/cli/megatron/llama3-8b.sh" dgx-h100 ;;
  usp)
    small --tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 2 \
      --num-layers-per-virtual-pipeline-stage 2 --context-parallel-size 8 --cp-comm-type a2a+p2p \
      --hierarchical-context-parallel-sizes 2 4 --micro-batch-size 1 --global-batch-size 4 --bf16 \
      --fp8-format hybrid --recompute-granularity full WORLD_SIZE=32
    roundtrip "$tmp/args.sh" dgx-h100
    grep -qx -- '--fp8-format hybrid' "$tmp/e.sh" || fail "no --fp8-format" ;;
  a2a)
    small --context-parallel-size 4 --cp-comm-type a2a --use-torch-fsdp2 --fp16 --group-query-attention \
      --num-query-groups 4 --global-batch-size 8 --micro-batch-size 2 WORLD_SIZE=16
    roundtrip "$tmp/args.sh" dgx-a100 ;;
  search)
    small --tensor-model-parallel-size 2 --global-batch-size 16 --bf16
    "$bs" import megatron "$tmp/args.sh" --gpus 16 --out "$tmp/s1.ini" 2>/dev/null || fail "import failed"
    "$bs" search "$tmp/s1.ini" --set parallel.tp=auto --set parallel.dp=auto --top 3 --quiet \
      --out "$tmp/r.json" --csv "$tmp/r.csv" >/dev/null 2>&1 || fail "search failed"
    k=0
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
             { print $c["tp"], $c["cp"], $c["pp"], $c["micro_batch"] }' "$tmp/r.csv" > "$tmp/grid"
    [ "$(wc -l < "$tmp/grid")" -ge 2 ] || fail "fewer than two points"
    while read -r tp cp pp mbs; do
      k=$((k + 1))
      "$bs" export megatron "$tmp/r.json" --point "$k" > "$tmp/e.sh" 2>/dev/null || fail "export --point $k failed"
      for want in "--tensor-model-parallel-size $tp" "--context-parallel-size $cp" \
                  "--pipeline-model-parallel-size $pp" "--micro-batch-size $mbs" "WORLD_SIZE=16"; do
        grep -qx -- "$want" "$tmp/e.sh" || fail "point $k: no '$want'"
      done
    done < "$tmp/grid"
    echo "export.sh search: $k points' grid flags equal the result's" ;;
  burst)
    small --context-parallel-size 2
    "$bs" import megatron "$tmp/args.sh" --gpus 8 --out "$tmp/s1.ini" 2>/dev/null || fail "import failed"
    "$bs" sim "$tmp/s1.ini" --quiet --set parallel.method=burst --out "$tmp/r.json" >/dev/null || fail "sim failed"
    "$bs" export megatron "$tmp/r.json" > "$tmp/e.sh" 2> "$tmp/err"; rc=$?
    cat "$tmp/err"
    [ "$rc" = 2 ] || fail "exit $rc, not 2"
    grep -q 'burstsim export: method burst: Megatron has no --cp-comm-type' "$tmp/err" || fail "the reason is not given"
    [ -s "$tmp/e.sh" ] && fail "flags were printed"
    echo "export.sh burst: refused, exit 2" ;;
  *) fail "no such case" ;;
esac
