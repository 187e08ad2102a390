#!/bin/sh
# mfu_precision.sh BURSTSIM SRCDIR — MFU by the precision the GEMMs ran in, on one LLaMA-2-7B layer
# on 8 H100s (profile h100-sxm: dense BF16 989, FP8 1979 TFLOP/s): with model.fp8 = all the CSV says
# gemm_precision fp8, peak_tflops_per_gpu_gemm 1979 and mfu_gemm_peak = model_tflops_per_gpu / 1979
# (= mfu x 989 / 1979); without FP8, bf16, 989 and mfu_gemm_peak = mfu. The table heads the columns
# "MFU bf16" and "MFU fp8" when a point runs FP8, and "MFU" alone otherwise.
bs=$1; src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/bs-mfu-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail() { echo "mfu_precision: $*"; exit 1; }
run() {
  timeout 120 "$bs" sim "$src/experiments/quickstart.ini" --quiet --set workload.scope=layer --set parallel.gpus=8 \
    --set workload.seq_len=16K --set cluster.topology=dgx-h100 --set cluster.profile=h100-sxm --set parallel.method=ring "$@"
}
run --set model.fp8=off,all --csv "$work/r.csv" >"$work/table" 2>&1 || { cat "$work/table"; fail "the sweep failed"; }
cat "$work/table"
head -n 1 "$work/table" | grep -q " MFU bf16 MFU fp8$" || fail "the table does not head MFU bf16 and MFU fp8"
sed -n 2p "$work/table" | grep -q " -$" || fail "the point without FP8 shows an FP8 MFU"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
  function near(a, b) { return a - b < 1e-5 * b && b - a < 1e-5 * b } # the CSV holds 6 digits
  { fp8 = $c["fp8"]; prec = $c["gemm_precision"]; peak = $c["peak_tflops_per_gpu_gemm"] + 0
    mt = $c["model_tflops_per_gpu"] + 0; m = $c["mfu"] + 0; mg = $c["mfu_gemm_peak"] + 0
    want_prec = fp8 == "off" ? "bf16" : "fp8"; want_peak = fp8 == "off" ? 989 : 1979
    if (prec != want_prec) { print "fp8 " fp8 ": gemm_precision " prec ", expected " want_prec; bad = 1 }
    if (!near(peak, want_peak)) { print "fp8 " fp8 ": peak " peak ", expected " want_peak; bad = 1 }
    if (!(mt > 0) || !near(mg, mt / want_peak) || !near(m, mt / 989)) {
      print "fp8 " fp8 ": mfu " m " mfu_gemm_peak " mg " against model TFLOP/s " mt; bad = 1 }
    n++ }
  END { if (n != 2) { print n " rows, expected 2"; bad = 1 } exit bad }' "$work/r.csv" || fail "the CSV figures"
run --csv "$work/o.csv" >"$work/table" 2>&1 || fail "the point without FP8 failed"
head -n 1 "$work/table" | grep -q " MFU$" || fail "without FP8 the table does not end with MFU alone"
echo "mfu_precision: both MFU figures as computed by hand"
