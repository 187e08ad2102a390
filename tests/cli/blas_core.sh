#!/bin/sh
# blas_core.sh BURSTSIM — OpenBLAS told to run its Prescott (SSE3) kernels on a CPU with AVX2 or
# AVX-512 (as Debian's 0.3.21 picks by itself on some AVX-512 Xeons): a command that times GEMMs says
# so on stderr, with the OPENBLAS_CORETYPE that fixes it: bench, calib, validate and run. Without AVX2
# there is nothing to say: skipped.
bs=$1
grep -qw avx2 /proc/cpuinfo 2>/dev/null || { echo "blas_core.sh: no AVX2 here: skipped"; exit 0; }
out=$(OPENBLAS_CORETYPE=Prescott timeout 120 "$bs" bench kernels --quick --threads 1 2>&1 >/dev/null)
echo "$out"
echo "$out" | grep -q "warning: OpenBLAS runs its Prescott kernels on a CPU with AVX.*set OPENBLAS_CORETYPE=" ||
  { echo "blas_core.sh: no warning about the Prescott kernels"; exit 1; }
# calib, validate and run time GEMMs too: each says so before its work (calib and validate are then
# stopped by a bad output or profile, exit 2; run runs one small rank)
src=$(cd "$(dirname "$0")/../.." && pwd)
for c in "calib --quick --out /proc/burstsim-never.json" \
         "validate $src/tests/runtime/small.ini --profile /nonexistent/p.json" \
         "run $src/tests/runtime/small.ini --set parallel.gpus=1 --threads 1"; do
  # shellcheck disable=SC2086
  out=$(OPENBLAS_CORETYPE=Prescott timeout 120 "$bs" $c 2>&1 >/dev/null)
  echo "$out" | grep -q "^burstsim ${c%% *}: warning: OpenBLAS runs its Prescott kernels on a CPU with AVX.*set OPENBLAS_CORETYPE=" ||
    { echo "$out"; echo "blas_core.sh: ${c%% *} does not warn about the Prescott kernels"; exit 1; }
done
echo "blas_core.sh: ok"
