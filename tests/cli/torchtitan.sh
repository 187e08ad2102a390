#!/bin/sh
# torchtitan.sh BURSTSIM SRCDIR CASE — burstsim import/export torchtitan, one setting family per case:
# a train config written here (or one of tests/cli/torchtitan/*.toml), imported; the scenario must
# hold the keys the family maps to, stderr must name each setting mapped, the scenario must run in
# sim; refusals exit 2 naming the setting and write nothing. Export cases go round import -> sim ->
# export -> import and must give the same scenario back.
bs=$1; src=$2; case=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "torchtitan.sh $case: $*"; for f in log c.toml s.ini e.toml; do [ -f "$tmp/$f" ] && { echo "-- $f"; cat "$tmp/$f"; }; done; exit 1; }
# cfg LINES...: a config of the 8B flavor with these lines appended (each a [section] or key = value).
cfg() {
  printf '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 4\nseq_len = 8192\n' > "$tmp/c.toml"
  printf '[activation_checkpoint]\nmode = "none"\n' >> "$tmp/c.toml"
  for l in "$@"; do printf '%s\n' "$l" >> "$tmp/c.toml"; done
}
# imp GPUS [FILE]: import; rc in $rc.
imp() { rm -f "$tmp/s.ini"; "$bs" import torchtitan "${2:-$tmp/c.toml}" --gpus "$1" --topology dgx-h100 --out "$tmp/s.ini" 2> "$tmp/log"; rc=$?; }
key() { grep -qx "$1" "$tmp/s.ini" || fail "the scenario lacks '$1'"; }
said() { grep -q -- "$1" "$tmp/log" || fail "stderr lacks '$1'"; }
ok() { [ "$rc" = 0 ] || fail "import exit $rc"; }
refused() { [ "$rc" = 2 ] || fail "import exit $rc, not 2"; said "^refused  $1"; [ -f "$tmp/s.ini" ] && fail "a scenario was written"; return 0; }
sim() { "$bs" sim "$tmp/s.ini" --quiet --out "$tmp/r.json" > "$tmp/sim" 2>&1 || { cat "$tmp/sim"; fail "the scenario does not run in sim"; }; }
# roundtrip: the imported scenario simulated, exported, imported again: the same keys.
roundtrip() {
  sim; "$bs" export torchtitan "$tmp/r.json" > "$tmp/e.toml" 2> "$tmp/elog" || { cat "$tmp/elog"; fail "export failed"; }
  gpus=$(sed -n 's/^gpus = //p' "$tmp/s.ini")
  "$bs" import torchtitan "$tmp/e.toml" --gpus "$gpus" --topology dgx-h100 --out "$tmp/s2.ini" 2>/dev/null || fail "the export does not import"
  grep -v '^;' "$tmp/s.ini" | sort > "$tmp/k1"; grep -v '^;' "$tmp/s2.ini" | sort > "$tmp/k2"
  cmp -s "$tmp/k1" "$tmp/k2" || { diff "$tmp/k1" "$tmp/k2"; fail "import(export(sim(import))) is another scenario"; }
}
case "$case" in
  example_8b)
    imp 64 "$src/tests/cli/torchtitan/llama3-8b.toml"; ok
    key 'preset = llama3.1-8b'; key 'seq_len = 32768'; key 'tp = 2'; key 'dp = 8'; key 'zero = 3'; key 'method = ring'
    key 'layout = zigzag'; key 'recompute = selective'; key 'batch = 16'; key 'micro_batch = 2'
    said 'rotate_method = alltoall -> parallel.method = ring'; said '^ignored  \[optimizer\] lr = 3e-4: no effect'
    said '^ignored  \[compile\] enable = false: torch.compile'; roundtrip ;;
  example_405b)
    imp 128 "$src/tests/cli/torchtitan/llama3-405b.toml"; ok
    key 'preset = llama3.1-405b'; key 'fp8 = all'; key 'tp = 8'; key 'dp = 16'; key 'zero = 3'; key 'recompute = full'
    key 'batch = 32'; said 'converters = float8 -> model.fp8 = all'; said '^ignored  \[parallelism\] enable_async_tensor_parallel = true: async TP'
    roundtrip ;;
  mesh)
    cfg '[parallelism]' 'data_parallel_shard_degree = 4' 'tensor_parallel_degree = 2'; imp 8; ok; key 'dp = 4'; key 'zero = 3'; key 'tp_variant = v3'; sim; roundtrip
    cfg '[parallelism]' 'data_parallel_replicate_degree = 8'; imp 8; ok; key 'dp = 8'; key 'zero = 0'; said 'DDP (replicas) -> parallel.zero = 0'
    cfg '[parallelism]' 'data_parallel_replicate_degree = 2' 'data_parallel_shard_degree = 4'; imp 8; refused 'HSDP (replicate 2 x shard 4)'
    cfg '[parallelism]' 'data_parallel_shard_degree = 4'; imp 16; refused 'the degrees multiply to 4 GPUs, not the world size 16'
    cfg '[parallelism]' 'tensor_parallel_degree = 3'; imp 8; refused 'the world size 8: not a multiple of replicate x tp x pp x cp = 3'
    cfg; "$bs" import torchtitan "$tmp/c.toml" --out "$tmp/s.ini" 2> "$tmp/log"; rc=$?; refused 'the world size: give import --gpus N' ;;
  batch)
    cfg '[parallelism]' 'pipeline_parallel_degree = 2' 'pipeline_parallel_microbatch_size = 2' 'tensor_parallel_degree = 4'; imp 8; ok
    key 'batch = 4'; key 'micro_batch = 2'; key 'pp = 2'; key 'dp = 1'; key 'zero = 0'; key 'pp_schedule = 1f1b'; sim; roundtrip
    cfg '[parallelism]' 'pipeline_parallel_degree = 2'; imp 8; refused 'FSDP2 (shard 4 x cp 1) with 2 pipeline stages'
    cfg; sed -i 's/^seq_len = 8192/&\nglobal_batch_size = 64/' "$tmp/c.toml"; imp 8; ok
    key 'batch = 64'; key 'micro_batch = 4'; said 'local_batch_size = 4 (per data-parallel rank) -> workload.batch = 64'; roundtrip
    sed -i 's/^global_batch_size = 64/global_batch_size = 60/' "$tmp/c.toml"; imp 8; refused '\[training\] global_batch_size = 60: not a multiple of local batch x dp = 32' ;;
  pipeline)
    cfg '[parallelism]' 'pipeline_parallel_degree = 2' 'pipeline_parallel_schedule = "Interleaved1F1B"' 'pipeline_parallel_layers_per_stage = 4' 'tensor_parallel_degree = 4'
    imp 8; ok; key 'pp_schedule = interleaved'; key 'pp_chunks = 4'; said 'pp_chunks = 4 (layers / (pp x layers per stage))'; sim; roundtrip
    cfg '[parallelism]' 'pipeline_parallel_degree = 2' 'pipeline_parallel_schedule = "Interleaved1F1B"'; imp 2; ok; key 'pp_chunks = 2'
    cfg '[parallelism]' 'pipeline_parallel_degree = 2' 'pipeline_parallel_schedule = "ZBVZeroBubble"'; imp 2
    refused '\[parallelism\] pipeline_parallel_schedule = ZBVZeroBubble: only 1F1B and Interleaved1F1B'
    cfg '[parallelism]' 'pipeline_parallel_degree = 2' 'pipeline_parallel_schedule = "Interleaved1F1B"' 'pipeline_parallel_layers_per_stage = 5'
    imp 2; refused 'pipeline_parallel_layers_per_stage = 5: pp x 5 does not divide 32 layers' ;;
  cp)
    cfg '[parallelism]' 'context_parallel_degree = 4'; imp 8; ok; key 'method = allgather'; key 'layout = zigzag'; key 'zero = 3'
    said '^mapped   \[parallelism\] context_parallel_degree = 4, rotate_method = allgather (the default) -> parallel.method = allgather'; roundtrip
    cfg '[parallelism]' 'context_parallel_degree = 4' 'context_parallel_rotate_method = "ring"'; imp 8
    refused '\[parallelism\] context_parallel_rotate_method = ring: allgather or alltoall' ;;
  recompute)
    cfg; sed -i 's/mode = "none"/mode = "full"/' "$tmp/c.toml"; imp 8; ok; key 'recompute = full'
    sed -i 's/mode = "full"/mode = "selective"/' "$tmp/c.toml"; imp 8; ok; key 'recompute = selective'
    printf 'selective_ac_option = "2"\n' >> "$tmp/c.toml"; imp 8; refused '\[activation_checkpoint\] selective_ac_option = 2'
    cfg; sed -i '/^\[activation_checkpoint\]/d; /^mode/d' "$tmp/c.toml"; imp 8; refused '\[activation_checkpoint\] mode: missing' ;;
  model)
    cfg '[float8]' 'enable_float8_linear = true'; imp 8; ok; key 'fp8 = all'; said 'enable_float8_linear = true -> model.fp8 = all'
    cfg; sed -i 's/^seq_len = 8192/seq_len = 8192\nmixed_precision_param = "float32"/' "$tmp/c.toml"; imp 8; ok; key 'dtype = fp32'; sim
    cfg; sed -i 's/flavor = "8B"/flavor = "debugmodel"/' "$tmp/c.toml"; imp 8; refused '\[model\] flavor = debugmodel: 8B, 70B or 405B'
    cfg; sed -i 's/name = "llama3"/name = "deepseek_v3"/' "$tmp/c.toml"; imp 8; refused '\[model\] name = deepseek_v3: only torchtitan'\''s llama3'
    cfg; sed -i 's/^seq_len = 8192/seq_len = "long"/' "$tmp/c.toml"; imp 8; refused '\[training\] seq_len = long (line 6): an integer' ;;
  toml)
    # what the reader does not take is an error naming the line; an unknown key is named as ignored
    cfg '[job]' 'description = """two' 'lines"""'; imp 8; [ "$rc" = 2 ] || fail "exit $rc"; said 'c.toml: line 10: multi-line strings are not read'
    cfg '[[experimental]]'; imp 8; [ "$rc" = 2 ] || fail "exit $rc"; said 'line 9: array-of-tables headers'
    cfg '[training]' 'seq_len 8192'; imp 8; [ "$rc" = 2 ] || fail "exit $rc"; said 'line 10: expected key = value'
    cfg '[parallelism]' 'frobnicate = 3'; imp 8; ok; said '^ignored  \[parallelism\] frobnicate = 3 (line 10): unknown to this importer' ;;
  export_refused)
    cfg '[parallelism]' 'context_parallel_degree = 4'; imp 8; ok; sed -i 's/^method = allgather/method = ulysses/; /^layout/d' "$tmp/s.ini"; sim
    "$bs" export torchtitan "$tmp/r.json" > /dev/null 2> "$tmp/elog"; erc=$?
    [ "$erc" = 2 ] || fail "export of ulysses exit $erc, not 2"; grep -q "method ulysses: torchtitan's context parallelism" "$tmp/elog" || fail "no reason: $(cat "$tmp/elog")"
    cfg; imp 8; ok; sed -i 's/^zero = 3/zero = 1/' "$tmp/s.ini"; sim
    "$bs" export torchtitan "$tmp/r.json" > /dev/null 2> "$tmp/elog"; erc=$?
    [ "$erc" = 2 ] || fail "export of zero 1 exit $erc, not 2"; grep -q "parallel.zero = 1: torchtitan runs FSDP" "$tmp/elog" || fail "no reason: $(cat "$tmp/elog")" ;;
  *) fail "no such case" ;;
esac
echo "torchtitan.sh $case: ok"
