#!/bin/sh
# import.sh BURSTSIM SRCDIR CASE — burstsim import megatron, one flag family per case: an arguments
# file written here (a small model's documented Megatron flags plus the family's), imported; the
# scenario must hold the keys the family maps to, stderr must name each flag mapped, and the
# scenario must load and run in burstsim sim. The refusals exit 2 naming the flag.
bs=$1; src=$2; case=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "import.sh $case: $*"; [ -f "$tmp/log" ] && cat "$tmp/log"; [ -f "$tmp/s.ini" ] && cat "$tmp/s.ini"; exit 1; }
# imp [--gpus N] FLAG...: the base model's flags and these, imported; rc in $rc.
imp() {
  gpus=8
  if [ "$1" = --gpus ]; then gpus=$2; shift 2; fi
  { echo 'MODEL_ARGS=('
    echo '    --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 4096'
    echo '    --padded-vocab-size 32000 --swiglu --ffn-hidden-size 2816'
    echo ')'
    for w in "$@"; do printf '%s \\\n' "$w"; done
    echo; } > "$tmp/args.sh"
  rm -f "$tmp/s.ini"
  if [ "$gpus" = 0 ]; then "$bs" import megatron "$tmp/args.sh" --out "$tmp/s.ini" 2> "$tmp/log"
  else "$bs" import megatron "$tmp/args.sh" --gpus "$gpus" --out "$tmp/s.ini" 2> "$tmp/log"; fi
  rc=$?
}
key() { grep -qx "$1" "$tmp/s.ini" || fail "the scenario lacks '$1'"; }
said() { grep -q -- "$1" "$tmp/log" || fail "stderr lacks '$1'"; }
ok() { [ "$rc" = 0 ] || fail "import exit $rc"; }
refused() { [ "$rc" = 2 ] || fail "import exit $rc, not 2"; said "^refused  $1"; [ -f "$tmp/s.ini" ] && fail "a scenario was written"; return 0; }
sim() { "$bs" sim "$tmp/s.ini" --quiet > "$tmp/sim" 2>&1 || { cat "$tmp/sim"; fail "the scenario does not run in sim"; }
        [ "$(wc -l < "$tmp/sim")" -ge 2 ] || fail "sim printed no row"; }
case "$case" in
  model)
    imp --bf16 --kv-channels 64; ok
    key 'layers = 8'; key 'hidden = 1024'; key 'heads = 16'; key 'head_dim = 64'; key 'ffn = 2816'; key 'vocab = 32000'
    key 'phase = train'; key 'scope = model'; key 'causal = true'
    said '^mapped   --num-layers 8 -> model.layers = 8$'; said '^mapped   --kv-channels 64 -> model.head_dim = 64$'
    said '^mapped   --swiglu --ffn-hidden-size 2816 -> model.ffn = 2816$'; sim ;;
  main_grads)
    imp --bf16 --accumulate-allreduce-grads-in-fp32; ok
    grep -q 'main_grads' "$tmp/s.ini" && fail "fp32 main gradients (the default) written as a key"
    said '^ignored  --accumulate-allreduce-grads-in-fp32: --bf16 sets it already'
    imp --bf16 --grad-reduce-in-bf16; ok; key 'main_grads = bf16'
    said '^mapped   --grad-reduce-in-bf16 -> model.main_grads = bf16$'; sim
    imp --bf16 --cross-entropy-loss-fusion; ok; key 'cross_entropy = fused'
    said '^mapped   --cross-entropy-loss-fusion -> workload.cross_entropy = fused$'; sim ;;
  gqa)
    imp --group-query-attention --num-query-groups 4; ok; key 'kv_heads = 4'; key 'head_dim = 64'
    said 'mapped   --group-query-attention --num-query-groups 4 -> model.kv_heads = 4'; sim
    imp --num-query-groups 4; ok; key 'kv_heads = 16'; said 'ignored  --num-query-groups 4: without --group-query-attention' ;;
  ffn_gelu)
    # no --swiglu: a GeLU MLP of F is a SwiGLU of 2F/3 (4096 -> 2731); the base's --swiglu is dropped
    imp --ffn-hidden-size 4096; sed -i 's/ --swiglu//' "$tmp/args.sh"
    "$bs" import megatron "$tmp/args.sh" --gpus 8 --out "$tmp/s.ini" 2> "$tmp/log"; rc=$?; ok
    key 'ffn = 2731'; said '(no --swiglu) GeLU MLP of 4096 -> model.ffn = 2731'; sim ;;
  vocab)
    sed_base='s/--padded-vocab-size 32000/--vocab-size 50257/'
    imp --tensor-model-parallel-size 2; sed -i "$sed_base" "$tmp/args.sh"
    "$bs" import megatron "$tmp/args.sh" --gpus 8 --out "$tmp/s.ini" 2> "$tmp/log"; rc=$?; ok
    key 'vocab = 50432'; said 'model.vocab = 50432 (padded to a multiple of 256'; sim
    sed -i 's/--vocab-size 50257//' "$tmp/args.sh"; rm -f "$tmp/s.ini"
    "$bs" import megatron "$tmp/args.sh" --gpus 8 --out "$tmp/s.ini" 2> "$tmp/log"; rc=$?; refused '--padded-vocab-size: missing' ;;
  batch)
    imp --micro-batch-size 2 --global-batch-size 16; ok
    key 'seq_len = 4096'; key 'micro_batch = 2'; key 'batch = 16'; key 'dp = 8'
    said 'mapped   --global-batch-size 16 -> workload.batch = 16'; sim
    imp --micro-batch-size 2 --global-batch-size 12; refused '--global-batch-size 12: not a multiple of micro batch x dp = 16' ;;
  tp_sp)
    imp --tensor-model-parallel-size 2 --sequence-parallel; ok; key 'tp = 2'; key 'tp_variant = v3'; key 'dp = 4'
    said 'mapped   --sequence-parallel -> parallel.tp_variant = v3'; sim
    imp --tensor-model-parallel-size 2; ok; key 'tp_variant = v1'; said '(no --sequence-parallel) -> parallel.tp_variant = v1' ;;
  pp_virtual)
    imp --gpus 16 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 --global-batch-size 16; ok
    key 'pp = 2'; key 'pp_schedule = interleaved'; key 'pp_chunks = 2'; key 'dp = 8'
    said 'num-layers-per-virtual-pipeline-stage 2 -> parallel.pp_schedule = interleaved, pp_chunks = 2'; sim
    imp --pipeline-model-parallel-size 2 --virtual-pipeline-model-parallel-size 4 --global-batch-size 8; ok; key 'pp_chunks = 4'
    imp --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 3; refused '--num-layers-per-virtual-pipeline-stage 3' ;;
  cp_p2p)
    imp --context-parallel-size 4; ok; key 'method = ring'; key 'layout = zigzag'; key 'double_ring = off'; key 'dp = 2'
    said 'mapped   --cp-comm-type p2p -> parallel.method = ring'; sim ;;
  cp_a2a)
    imp --context-parallel-size 4 --cp-comm-type a2a; ok; key 'method = ulysses'; said 'cp-comm-type a2a -> parallel.method = ulysses'; sim ;;
  cp_usp)
    imp --context-parallel-size 8 --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 4; ok
    key 'method = usp'; key 'ulysses_degree = 2'; said 'usp, ulysses_degree = 2'; sim
    imp --context-parallel-size 8 --cp-comm-type a2a+p2p; refused '--cp-comm-type a2a+p2p: needs --hierarchical-context-parallel-sizes' ;;
  cp_all_gather)
    imp --context-parallel-size 4 --cp-comm-type all_gather; ok; key 'method = allgather'; key 'layout = zigzag'
    said 'mapped   --cp-comm-type all_gather -> parallel.method = allgather, layout = zigzag'; sim ;;
  zero)
    imp --use-distributed-optimizer; ok; key 'zero = 1'; said 'mapped   --use-distributed-optimizer -> parallel.zero = 1'; sim
    imp; ok; key 'zero = 0' ;;
  recompute)
    imp --recompute-activations; ok; key 'recompute = selective'; said 'recompute-activations -> workload.recompute = selective'; sim
    imp --recompute-granularity full --recompute-method uniform --recompute-num-layers 1; ok; key 'recompute = full'
    said 'ignored  --recompute-method uniform: the simulator recomputes every layer'; sim ;;
  dtype)
    imp --fp16; ok; key 'dtype = fp16'; said 'mapped   --fp16 -> model.dtype = fp16'; sim
    imp; ok; key 'dtype = fp32'; said '(no --bf16, --fp16) -> model.dtype = fp32'
    imp --bf16 --fp8-format hybrid; ok; key 'dtype = bf16'; key 'fp8 = all'; said 'fp8-format hybrid -> model.fp8 = all' ;;
  world)
    imp --gpus 0 --nnodes 2 --nproc-per-node 8; ok; key 'gpus = 16'; said '--nnodes 2 --nproc-per-node 8 -> parallel.gpus = 16'
    imp --gpus 0 WORLD_SIZE=16; ok; key 'gpus = 16'; said 'WORLD_SIZE=16 -> parallel.gpus = 16'; sim
    imp --gpus 0; refused 'the world size: missing'
    imp --gpus 12 --tensor-model-parallel-size 8; refused 'the world size 12: not a multiple of tp x pp x cp = 8' ;;
  refused)
    imp --num-experts 8 --expert-model-parallel-size 2; refused '--num-experts 8: cannot be modelled: mixture of experts'
    said 'refused  --expert-model-parallel-size 2'
    imp --decoder-first-pipeline-num-layers 2; refused '--decoder-first-pipeline-num-layers 2: cannot be modelled: uneven' ;;
  ignored)
    imp --lr 3e-4 --adam-beta2 0.95 --save /ckpt --frobnicate-level 3 --use-flash-attn; ok
    said '^ignored  --lr 3e-4: no effect on the step time$'; said '^ignored  --adam-beta2 0.95: no effect on the step time$'
    said '^ignored  --save /ckpt: checkpoints are not simulated$'
    said '^ignored  --frobnicate-level 3: unknown to this importer'; said '^ignored  --use-flash-attn' ;;
  long_value)
    # a value past the flag table's 255 characters is refused naming its line and flag, never cut
    long=$(printf 'x%.0s' $(seq 300))
    imp --save "/ckpt/$long"; [ "$rc" = 2 ] || fail "import exit $rc, not 2"
    said "args.sh: line 5: --save: a value longer than 255 characters"; [ -f "$tmp/s.ini" ] && fail "a scenario was written" ;;
  example)
    # the README's example file, a bash script as Megatron's examples are
    "$bs" import megatron "$src/tests/cli/megatron/llama3-8b.sh" --out "$tmp/s.ini" 2> "$tmp/log"; rc=$?; ok
    key 'gpus = 32'; key 'kv_heads = 8'; key 'tp = 2'; key 'pp = 2'; key 'dp = 2'; key 'zero = 1'; sim ;;
  *) fail "no such case" ;;
esac
echo "import.sh $case: ok"
