#!/bin/sh
# framework.sh BURSTSIM SRCDIR — workload.framework end to end on a two-layer Llama-3-8B step on 8
# H100s (dp 8): torchtitan takes parallel.zero = 3 (FSDP2) and model.attention_kernel = cudnn where
# the scenario gives neither, and the result says so (workload.framework, workload.framework_defaults
# "zero+attention_kernel"); a zero given wins (defaults "attention_kernel"); deepspeed resolves the
# kernel to fa2; megatron, the default, writes neither field and keeps the profile's default kernel.
bs=$1; src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/bs-fw-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail() { echo "framework: $*"; exit 1; }
run() {
  timeout 120 "$bs" sim "$src/experiments/quickstart.ini" --quiet --set model.preset=llama3-8b --set model.layers=2 \
    --set workload.scope=model --set workload.seq_len=8K --set workload.batch=8 --set workload.causal=true \
    --set parallel.method=burst --set parallel.gpus=8 --set parallel.dp=8 --set cluster.topology=dgx-h100 \
    --set cluster.profile=h100-sxm "$@"
}
check() { # FILE FRAMEWORK DEFAULTS ZERO KERNEL ("-": the field is absent)
  python3 - "$@" <<'PY' || exit 1
import json, sys
path, fw, dflt, zero, kernel = sys.argv[1:]
r = json.load(open(path))["results"][0]
got = (r.get("workload", {}).get("framework", "-"), r.get("workload", {}).get("framework_defaults", "-"),
       str(r["zero"]), r["model"]["attention_kernel"])
if got != (fw, dflt, zero, kernel):
    print("framework: %s: got %s, expected %s" % (fw, got, (fw, dflt, zero, kernel)))
    sys.exit(1)
PY
}
run --set workload.framework=torchtitan --out "$work/t.json" >"$work/t.txt" 2>&1 || { cat "$work/t.txt"; fail "torchtitan failed"; }
check "$work/t.json" torchtitan zero+attention_kernel 3 cudnn || exit 1
grep -q "torchtitan zero+attention_kernel" "$work/t.txt" || { cat "$work/t.txt"; fail "the table does not name the defaults"; }
run --set workload.framework=torchtitan --set parallel.zero=1 --out "$work/z.json" >/dev/null 2>&1 || fail "zero given"
check "$work/z.json" torchtitan attention_kernel 1 cudnn || exit 1
run --set workload.framework=torchtitan --set model.attention_kernel=fa3 --out "$work/k.json" >/dev/null 2>&1 || fail "kernel given"
check "$work/k.json" torchtitan zero 3 fa3 || exit 1
run --set workload.framework=deepspeed --out "$work/d.json" >/dev/null 2>&1 || fail "deepspeed failed"
check "$work/d.json" deepspeed attention_kernel 0 fa2 || exit 1
# torchtitan's context parallelism where no method is given: allgather over head-tail (zigzag) shards
grep -v '^method' "$src/experiments/frameworks.ini" > "$work/cp.ini"
"$bs" sim "$work/cp.ini" --quiet --set model.layers=2 --set parallel.dp=4 --set workload.framework=torchtitan \
  --out "$work/c.json" >"$work/c.txt" 2>&1 || { cat "$work/c.txt"; fail "torchtitan cp failed"; }
python3 - "$work/c.json" <<'PY' || fail "torchtitan's all-gather context parallelism not applied"
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
got = (r["workload"]["framework_defaults"], r["method"], r["layout"])
want = ("zero+attention_kernel+method+layout", "allgather", "zigzag")
if got != want:
    print("framework: got %s, expected %s" % (got, want))
    sys.exit(1)
PY
run --out "$work/m.json" >/dev/null 2>&1 || fail "megatron failed"
check "$work/m.json" - - 0 default || exit 1
echo "framework: ok"
