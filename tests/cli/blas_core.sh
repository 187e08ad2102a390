#!/bin/sh
# blas_core.sh BURSTSIM — OpenBLAS told to run its Prescott (SSE3) kernels on a CPU with AVX2 or
# AVX-512 (as Debian's 0.3.21 picks by itself on some AVX-512 Xeons): a command that times GEMMs says
# so on stderr, with the OPENBLAS_CORETYPE that fixes it. Without AVX2 there is nothing to say: skipped.
bs=$1
grep -qw avx2 /proc/cpuinfo 2>/dev/null || { echo "blas_core.sh: no AVX2 here: skipped"; exit 0; }
out=$(OPENBLAS_CORETYPE=Prescott timeout 120 "$bs" bench kernels --quick --threads 1 2>&1 >/dev/null)
echo "$out"
echo "$out" | grep -q "warning: OpenBLAS runs its Prescott kernels on a CPU with AVX.*set OPENBLAS_CORETYPE=" ||
  { echo "blas_core.sh: no warning about the Prescott kernels"; exit 1; }
echo "blas_core.sh: ok"
