#!/usr/bin/env bash
# device-check.sh OUTDIR — the GPU check of the CUDA backend, for a single-GPU
# machine (sized for one H200, <= 6 minutes). It exists so that a session with
# a GPU only has to run this one script:
#   1. detects the GPU (no GPU: a clear message and exit 77, nothing built);
#   2. builds bs_cuda_check with nvcc alone (the project's other dependencies
#      need not be installed there), for the GPU's own architecture;
#   3. runs it: correctness against a float64 CPU reference on fresh random
#      inputs, then the benchmark table next to the cuBLAS bf16 GEMM ceiling
#      and cuBLAS GEMMs of transformer projection shapes (bench.csv rows
#      gemm_proj: n = m tokens, d = k, heads = n outputs), the points that fit
#      the simulator's tiled GEMM model (README, "Calibrating your own machine");
#   4. if time is left and the whole project configures there, builds it and
#      runs `burstsim calib --backend cuda` when that command exists;
#   5. prints the summary last.
# OUTDIR receives at most 8 files: device.txt build.log check.log
# correctness.txt bench.txt bench.csv summary.txt [h200-measured.json].
# Exit: 0 all checks passed, 1 a check or the build failed, 2 usage, 77 no GPU.
# BURSTSIM_DEVICE_CHECK_DRY=1: detection only (used by ctest on any machine).
set -uo pipefail

if [ $# -ne 1 ] || [ "${1:0:1}" = "-" ]; then
  echo "usage: scripts/device-check.sh OUTDIR" >&2
  exit 2
fi
OUTDIR=$1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T0=$(date +%s)
LIMIT=${BURSTSIM_DEVICE_CHECK_SECONDS:-345} # whole run, a margin under 6 minutes
elapsed() { echo $(($(date +%s) - T0)); }

mkdir -p "$OUTDIR" || { echo "device-check: cannot create $OUTDIR" >&2; exit 2; }
OUTDIR=$(cd "$OUTDIR" && pwd)

# 1. Detection. nvidia-smi only reads; no setting of the card is changed here.
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "device-check: no CUDA device: nvidia-smi is not installed on this machine"
  exit 77
fi
if ! GPUS=$(nvidia-smi -L 2>&1) || ! echo "$GPUS" | grep -q "^GPU "; then
  echo "device-check: no CUDA device: nvidia-smi -L says: $(echo "$GPUS" | head -1)"
  exit 77
fi
echo "device-check: GPU found: $(echo "$GPUS" | head -1)"
if [ "${BURSTSIM_DEVICE_CHECK_DRY:-0}" = "1" ]; then
  echo "device-check: dry run, nothing built"
  exit 0
fi
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
if ! command -v nvcc >/dev/null 2>&1; then
  echo "device-check: nvcc not found (PATH or /usr/local/cuda/bin): cannot build" | tee "$OUTDIR/build.log"
  exit 1
fi
{
  echo "== nvidia-smi (read only) =="
  nvidia-smi 2>&1
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv 2>&1
  echo "== nvcc =="
  nvcc --version 2>&1
  echo "== host =="
  uname -a
  nproc
} >"$OUTDIR/device.txt" 2>&1

# 2. Build with nvcc for this GPU's architecture (sm_XY from compute_cap X.Y).
CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
case "$CAP" in
  ''|*[!0-9]*) CAP=90 ;;
esac
ARCH="-gencode=arch=compute_${CAP},code=sm_${CAP}"
BUILD="$ROOT/build-cuda-device"
mkdir -p "$BUILD"
CUDA_INC=$(dirname "$(dirname "$(command -v nvcc)")")/include
NVFLAGS=(-O3 -std=c++17 "$ARCH" -lineinfo -Xptxas=-v -Werror=all-warnings -Xcompiler=-Wall,-Wextra -I"$ROOT")
CFLAGS=(-O2 -std=gnu11 -Wall -Wextra -D_GNU_SOURCE -I"$ROOT" -I"$CUDA_INC")
# bs_cuda_check's sources (tests/cuda/CMakeLists.txt lists the same).
CHECK_SRC="bs_cuda_check cuda_check_host cuda_check_ref cuda_check_cases cuda_check_bench"
compile_tests() {
  for f in "$@"; do cc "${CFLAGS[@]}" -c "$ROOT/tests/cuda/$f.c" -o "$BUILD/$f.o" 2>&1 || return 1; done
}
echo "device-check: building bs_cuda_check for sm_${CAP} in $BUILD"
(
  echo "== build for sm_${CAP} at $(date -u) =="
  pids=()
  for f in attn_cuda_simple attn_cuda_fwd_mma attn_cuda_bwd_mma comm_cuda_ops; do
    nvcc "${NVFLAGS[@]}" -c "$ROOT/kernels/cuda/$f.cu" -o "$BUILD/$f.o" >"$BUILD/$f.log" 2>&1 &
    pids+=($!)
  done
  # The communicator in its local mode only: no NCCL or MPI needed there.
  cc "${CFLAGS[@]}" -c "$ROOT/kernels/cuda/attn_cuda_host.c" -o "$BUILD/attn_cuda_host.o" 2>&1 &&
    compile_tests $CHECK_SRC &&
    cc "${CFLAGS[@]}" -DBS_COMM_NCCL_LOCAL_ONLY -c "$ROOT/kernels/comm/comm_nccl.c" -o "$BUILD/comm_nccl.o" 2>&1 &&
    cc "${CFLAGS[@]}" -c "$ROOT/kernels/comm/comm.c" -o "$BUILD/comm.o" 2>&1 &&
    cc "${CFLAGS[@]}" -c "$ROOT/base/clock.c" -o "$BUILD/clock.o" 2>&1 &&
    cc "${CFLAGS[@]}" -c "$ROOT/base/fill.c" -o "$BUILD/fill.o" 2>&1 &&
    cc "${CFLAGS[@]}" -c "$ROOT/base/vec.c" -o "$BUILD/vec.o" 2>&1 &&
    cc "${CFLAGS[@]}" -c "$ROOT/tests/cuda/bs_comm_check.c" -o "$BUILD/bs_comm_check.o" 2>&1
  rc=$?
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  for f in attn_cuda_simple attn_cuda_fwd_mma attn_cuda_bwd_mma comm_cuda_ops; do
    echo "-- $f.cu --"
    cat "$BUILD/$f.log"
  done
  if [ $rc -eq 0 ]; then
    nvcc "$ARCH" -o "$BUILD/bs_cuda_check" "$BUILD"/attn_cuda_host.o "$BUILD"/attn_cuda_simple.o \
      "$BUILD"/attn_cuda_fwd_mma.o "$BUILD"/attn_cuda_bwd_mma.o $(for f in $CHECK_SRC; do echo "$BUILD/$f.o"; done) \
      "$BUILD"/clock.o "$BUILD"/fill.o \
      -lcublas -lm 2>&1 || rc=1
    nvcc "$ARCH" -o "$BUILD/bs_comm_check" "$BUILD"/comm_nccl.o "$BUILD"/comm.o "$BUILD"/clock.o "$BUILD"/fill.o "$BUILD"/vec.o \
      "$BUILD"/comm_cuda_ops.o \
      "$BUILD"/bs_comm_check.o -lpthread -lm 2>&1 || rc=1
  fi
  echo "build rc=$rc after $(elapsed) s"
  exit $rc
) >"$OUTDIR/build.log" 2>&1
BRC=$?
if [ $BRC -ne 0 ]; then
  echo "device-check: build FAILED (rc $BRC); the end of $OUTDIR/build.log:"
  tail -30 "$OUTDIR/build.log"
  exit 1
fi
echo "device-check: built in $(elapsed) s; spills reported by ptxas:"
grep -E "spill stores" "$OUTDIR/build.log" | grep -v " 0 bytes spill stores" | head -8 || true

# 3. Correctness of each path in its own process (a fault in one cannot hide
# the other's results), then the benchmark within what is left of the limit.
rm -f "$OUTDIR/correctness.txt" "$OUTDIR/summary.txt" "$OUTDIR/check.log"
CHECK="$BUILD/bs_cuda_check"
SEED=${BURSTSIM_SEED:-$(date +%s)}
echo "device-check: correctness, simple path (seed $SEED)"
timeout 150 "$CHECK" --path simple --no-bench --seed "$SEED" --out "$OUTDIR" >>"$OUTDIR/check.log" 2>&1
SRC=$?
echo "device-check: correctness, tensor-core path"
timeout 150 "$CHECK" --path mma --no-bench --seed "$SEED" --out "$OUTDIR" >>"$OUTDIR/check.log" 2>&1
XRC=$?
if [ $SRC -eq 77 ] && [ $XRC -eq 77 ]; then
  echo "device-check: no CUDA device usable by the CUDA runtime:"
  grep -m1 "^SKIP" "$OUTDIR/check.log" || true
  exit 77
fi
grep -E "^correctness \(path" "$OUTDIR/check.log" || true
grep -E "FAIL" "$OUTDIR/check.log" | head -20 || true
LEFT=$((LIMIT - $(elapsed)))
BUDGET=$((LEFT - 60)) # the rest of this script keeps a minute
[ $BUDGET -lt 20 ] && BUDGET=20
echo "device-check: benchmark (budget ${BUDGET} s)"
timeout $((BUDGET + 40)) "$CHECK" --bench-only --out "$OUTDIR" --budget "$BUDGET" 2>&1 | tee -a "$OUTDIR/check.log"
BRC=${PIPESTATUS[0]}
if [ $SRC -eq 77 ] || [ $XRC -eq 77 ]; then CRC=77; elif [ $SRC -eq 0 ] && [ $XRC -eq 0 ] && [ $BRC -eq 0 ]; then CRC=0; else CRC=1; fi

# The communicator's local multi-rank mode (G virtual ranks on this GPU).
echo "device-check: running bs_comm_check (local multi-rank mode)"
timeout 60 "$BUILD/bs_comm_check" 2>&1 | tee -a "$OUTDIR/check.log"
MRC=${PIPESTATUS[0]}

# 4. Optional: the whole project and `burstsim calib --backend cuda`, only if
# time is left and it configures here (SimGrid, MPI, ... may be missing).
PROJECT="skipped"
if [ $((LIMIT - $(elapsed))) -gt 150 ] && [ "${BURSTSIM_DEVICE_CHECK_PROJECT:-1}" = "1" ] && command -v cmake >/dev/null 2>&1; then
  if timeout 60 cmake -S "$ROOT" -B "$ROOT/build-device-project" >"$BUILD/project-configure.log" 2>&1 &&
    timeout $((LIMIT - $(elapsed) - 70)) cmake --build "$ROOT/build-device-project" -j "$(nproc)" >"$BUILD/project-build.log" 2>&1; then
    BS="$ROOT/build-device-project/burstsim"
    if "$BS" calib --help 2>&1 | grep -q -- "--backend"; then
      if timeout 60 "$BS" calib --backend cuda --out "$OUTDIR/h200-measured.json" >>"$OUTDIR/check.log" 2>&1; then
        PROJECT="burstsim calib --backend cuda wrote h200-measured.json"
      else
        PROJECT="burstsim calib --backend cuda failed (see check.log)"
      fi
    else
      PROJECT="project built; burstsim calib has no --backend option yet"
    fi
  else
    PROJECT="project did not configure/build here in time (dependencies or time), calib skipped"
  fi
fi

# 5. Summary last.
echo
echo "== device-check summary ($(elapsed) s) =="
if [ -f "$OUTDIR/summary.txt" ]; then cat "$OUTDIR/summary.txt"; else echo "no summary (bs_cuda_check rc $CRC)"; fi
echo "exit codes: simple $SRC, mma $XRC, bench $BRC (0 pass, 1 fail, 124 timeout, 77 no device)"
echo "communicator local mode: $(grep -E '^bs_comm_check: [0-9]+ passed' "$OUTDIR/check.log" | tail -1 || true) (rc $MRC)"
echo "project stage: $PROJECT"
echo "files in $OUTDIR: $(cd "$OUTDIR" && ls | tr '\n' ' ')"
if [ "$CRC" -eq 77 ]; then exit 77; fi
if [ "$CRC" -eq 0 ] && [ "$MRC" -eq 0 ]; then exit 0; fi
exit 1
