#!/bin/sh
# nemo.sh BURSTSIM SRCDIR CASE — burstsim import nemo: a NeMo training config (tests/cli/nemo/
# llama3-8b.yaml, or that file edited per case) translated to Megatron's flags and mapped by their
# table; the scenario must hold the keys, stderr must name each translation with its line, the
# scenario must run in sim; refusals exit 2 and write nothing.
bs=$1; src=$2; case=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "nemo.sh $case: $*"; for f in log c.yaml s.ini; do [ -f "$tmp/$f" ] && { echo "-- $f"; cat "$tmp/$f"; }; done; exit 1; }
base() { cp "$src/tests/cli/nemo/llama3-8b.yaml" "$tmp/c.yaml"; }
set_() { sed -i "s|^  $1:.*|  $1: $2|" "$tmp/c.yaml"; grep -q "^  $1: $2" "$tmp/c.yaml" || fail "no key $1 in the base config"; }
imp() { rm -f "$tmp/s.ini"; "$bs" import nemo "$tmp/c.yaml" --topology dgx-h100 --out "$tmp/s.ini" "$@" 2> "$tmp/log"; rc=$?; }
key() { grep -qx "$1" "$tmp/s.ini" || fail "the scenario lacks '$1'"; }
said() { grep -q -- "$1" "$tmp/log" || fail "stderr lacks '$1'"; }
ok() { [ "$rc" = 0 ] || fail "import exit $rc"; }
refused() { [ "$rc" = 2 ] || fail "import exit $rc, not 2"; said "$1"; [ -f "$tmp/s.ini" ] && fail "a scenario was written"; return 0; }
sim() { "$bs" sim "$tmp/s.ini" --quiet > "$tmp/sim" 2>&1 || { cat "$tmp/sim"; fail "the scenario does not run in sim"; }; }
case "$case" in
  example)
    base; imp; ok
    key 'layers = 32'; key 'kv_heads = 8'; key 'ffn = 14336'; key 'vocab = 128256'; key 'seq_len = 16384'
    key 'gpus = 32'; key 'tp = 2'; key 'tp_variant = v3'; key 'pp = 2'; key 'dp = 4'; key 'zero = 1'; key 'batch = 32'
    key 'recompute = selective'; key 'method = ring'; key 'layout = zigzag'
    said '^nemo     model.tensor_model_parallel_size: 2 (line 19) -> --tensor-model-parallel-size 2$'
    said '^nemo     trainer.precision: bf16 (line 10) -> --bf16$'
    said 'model.tokenizer.type: meta-llama/Meta-Llama-3-8B -> --padded-vocab-size 128256'
    said '^nemo     model.optim.name: distributed_fused_adam (line 46) -> --use-distributed-optimizer$'
    said '^ignored  model.optim.lr: 3.0e-4: no effect'; said '^mapped   --context-parallel-size 2 -> parallel.cp = 2'; sim ;;
  vocab)
    base; sed -i 's|type: meta-llama/Meta-Llama-3-8B|type: meta-llama/Llama-2-7b-hf|' "$tmp/c.yaml"; imp; ok; key 'vocab = 32000'
    base; sed -i 's|type: meta-llama/Meta-Llama-3-8B|type: gpt2|' "$tmp/c.yaml"; imp; refused '^refused  --padded-vocab-size: missing' ;;
  fp8)
    base; set_ fp8 true; set_ fp8_hybrid true; imp; ok; key 'fp8 = all'; said 'model.fp8: true (line 43) -> --fp8-format hybrid'; sim ;;
  virtual)
    base; set_ virtual_pipeline_model_parallel_size 2; set_ context_parallel_size 1; imp; ok
    key 'pp_schedule = interleaved'; key 'pp_chunks = 2'; key 'dp = 8'; sim ;;
  recompute)
    base; set_ activations_checkpoint_granularity full; imp; ok; key 'recompute = full'
    base; set_ activations_checkpoint_granularity null; imp; ok; key 'recompute = off'
    said 'model.activations_checkpoint_granularity: null (line 40) -> no flag' ;;
  world)
    base; imp --gpus 64; ok; key 'gpus = 64'; key 'dp = 8'
    base; sed -i '/num_nodes/d; /devices/d' "$tmp/c.yaml"; imp; refused 'the world size: missing' ;;
  refused)
    base; sed -i 's|^  num_layers: 32|&\n  num_moe_experts: 8|' "$tmp/c.yaml"; imp; refused '^refused  --num-experts 8: cannot be modelled'
    said 'model.num_moe_experts: 8 (line 26) -> --num-experts 8' ;;
  yaml)
    base; printf 'model:\n  num_layers: [1\n' > "$tmp/c.yaml"; imp; refused 'burstsim import: .*c.yaml: line 3:'
    printf 'trainer:\n  devices: 8\n' > "$tmp/c.yaml"; imp; refused 'no model.num_layers: not a NeMo GPT training config' ;;
  roundtrip)
    # import -> sim -> export nemo -> import: the same scenario (the example, and interleaved + FP8 + ulysses)
    for edit in "" "virtual_pipeline_model_parallel_size 4" ; do
      base; [ -n "$edit" ] && { set_ $edit; set_ fp8 true; set_ context_parallel_size 1; }
      imp; ok; "$bs" sim "$tmp/s.ini" --quiet --out "$tmp/r.json" > /dev/null 2>&1 || fail "sim failed"
      "$bs" export nemo "$tmp/r.json" > "$tmp/e.yaml" 2> "$tmp/elog" || { cat "$tmp/elog"; fail "export failed"; }
      "$bs" import nemo "$tmp/e.yaml" --topology dgx-h100 --out "$tmp/s2.ini" 2> "$tmp/log2" || { cat "$tmp/log2" "$tmp/e.yaml"; fail "the export does not import"; }
      grep -v '^;' "$tmp/s.ini" | sort > "$tmp/k1"; grep -v '^;' "$tmp/s2.ini" | sort > "$tmp/k2"
      cmp -s "$tmp/k1" "$tmp/k2" || { diff "$tmp/k1" "$tmp/k2"; cat "$tmp/e.yaml"; fail "import(export(sim(import))) is another scenario ($edit)"; }
    done
    base; set_ context_parallel_size 4; sed -i 's|^  context_parallel_size: 4|&\n  cp_comm_type: a2a|' "$tmp/c.yaml"; imp; ok; key 'method = ulysses'
    "$bs" sim "$tmp/s.ini" --quiet --out "$tmp/r.json" > /dev/null 2>&1 || fail "sim of ulysses failed"
    "$bs" export nemo "$tmp/r.json" > "$tmp/e.yaml" 2> "$tmp/elog" || fail "export of ulysses failed"
    grep -q '^  cp_comm_type: a2a$' "$tmp/e.yaml" || fail "no cp_comm_type a2a" ;;
  export_refused)
    base; set_ pipeline_model_parallel_size 1; imp; ok; sed -i 's/^zero = 1/zero = 2/' "$tmp/s.ini"; "$bs" sim "$tmp/s.ini" --quiet --out "$tmp/r.json" > /dev/null 2>&1
    "$bs" export nemo "$tmp/r.json" > /dev/null 2> "$tmp/elog"; erc=$?
    [ "$erc" = 2 ] || fail "export of zero 2 exit $erc"; grep -q "parallel.zero = 2: NeMo" "$tmp/elog" || fail "no reason: $(cat "$tmp/elog")" ;;
  *) fail "no such case" ;;
esac
echo "nemo.sh $case: ok"
