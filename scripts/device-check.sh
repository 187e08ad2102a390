#!/usr/bin/env bash
# device-check.sh OUTDIR — the GPU check of the CUDA backend and of the whole
# calibrate / run / validate loop, for a single-GPU machine (sized for one
# H200, <= 6 minutes). It exists so that a session with a GPU only has to run
# this one script:
#   1. detects the GPU (no GPU: a clear message and exit 77, nothing built);
#   2. builds bs_cuda_check and bs_comm_check with nvcc alone (the project's
#      other dependencies need not be installed there), for the GPU's own
#      architecture;
#   3. runs them: correctness against a float64 CPU reference on fresh random
#      inputs, then the benchmark table next to the cuBLAS bf16 GEMM ceiling
#      and cuBLAS GEMMs of transformer projection shapes (bench.csv rows
#      gemm_proj: n = m tokens, d = k, heads = n outputs), and the
#      communicator's local multi-rank mode;
#   4. the loop with burstsim itself, if a burstsim built with CUDA runs here
#      ($BURSTSIM_BIN, or build/burstsim carried with the tree, or a build of
#      the project here when it configures): `calib --backend cuda` on a short
#      grid, verified `run --backend cuda` of a small burst and ring point on
#      two local ranks sharing the GPU (--comm mpi) and on one rank over NCCL,
#      a timed burst point at 16k tokens, and `validate --backend cuda` of
#      that point (it calibrates on its two ranks, runs, simulates, compares);
#   5. prints the summary last.
# OUTDIR receives: device.txt build.log check.log correctness.txt bench.txt
# bench.csv summary.txt, and from step 4 loop.log gpu-profile.json run-*.json
# point.ini point1.ini validate.json validate1.json and the folders validate/
# and validate1/ (their calibrations, runs and logs).
# Exit: 0 all checks passed, 1 a check or the build failed, 2 usage, 77 no GPU.
# BURSTSIM_DEVICE_CHECK_DRY=1: detection only (used by ctest on any machine).
# BURSTSIM_DEVICE_CHECK_SECONDS=S: the whole run's limit (default 300).
# BURSTSIM_DEVICE_CHECK_CALIB=full: calib measures the full grid (bf16, head dims 64 and 128, blocks
# to 32k) instead of the quick one, for a profile to keep; give the run 420 s then.
# BURSTSIM_DEVICE_CHECK_PROJECT=0: skip step 4.
# BURSTSIM_DEVICE_CHECK_LOOP_ONLY=1: step 4 and the summary only (no detection: on a machine
# without a GPU every burstsim step then ends with exit 4, which checks the script's plumbing).
set -uo pipefail

if [ $# -ne 1 ] || [ "${1:0:1}" = "-" ]; then
  echo "usage: scripts/device-check.sh OUTDIR" >&2
  exit 2
fi
OUTDIR=$1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T0=$(date +%s)
LIMIT=${BURSTSIM_DEVICE_CHECK_SECONDS:-300} # whole run: 5 minutes
elapsed() { echo $(($(date +%s) - T0)); }

mkdir -p "$OUTDIR" || { echo "device-check: cannot create $OUTDIR" >&2; exit 2; }
OUTDIR=$(cd "$OUTDIR" && pwd)

# The CUDA toolkit's and NCCL's library folders on this machine (the toolkit's, then a Python
# package's, as PyTorch images carry NCCL), for a carried burstsim_cuda.so: printed as a path list.
cuda_lib_path() {
  local lib d dirs=""
  for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
    d=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')
    [ -n "$d" ] && continue
    d=$(find /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda*/lib* /usr/lib/x86_64-linux-gnu \
      /opt /usr/local/lib /usr/lib/python3* -name "$lib" 2>/dev/null | head -1)
    [ -n "$d" ] && case ":$dirs:" in *":$(dirname "$d"):"*) ;; *) dirs="$dirs:$(dirname "$d")" ;; esac
  done
  echo "${dirs#:}"
}

SRC=- XRC=- BRC=- CRC=0 MRC=0
if [ "${BURSTSIM_DEVICE_CHECK_LOOP_ONLY:-0}" != "1" ]; then

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
  grep -E "^(PRETTY_NAME|VERSION_ID)=" /etc/os-release
  ldd --version | head -1
  echo "== libraries the loop needs, as this machine has them =="
  ldconfig -p | grep -E "libnccl|libcublas|libcudart|libmpi|libsimgrid|libgsl|libcjson|libinih" || echo "(none in ldconfig's cache)"
  echo "mpirun: $(command -v mpirun || echo none)"
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
# shellcheck disable=SC2054 # -Xcompiler takes its options comma-separated
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
  # shellcheck disable=SC2086 # CHECK_SRC is a list of names
  cc "${CFLAGS[@]}" -c "$ROOT/kernels/cuda/attn_cuda_host.c" -o "$BUILD/attn_cuda_host.o" 2>&1 &&
    compile_tests $CHECK_SRC &&
    cc "${CFLAGS[@]}" -DBS_COMM_NCCL_LOCAL_ONLY -c "$ROOT/comm/comm_nccl.c" -o "$BUILD/comm_nccl.o" 2>&1 &&
    cc "${CFLAGS[@]}" -DBS_COMM_NCCL_LOCAL_ONLY -c "$ROOT/comm/comm_nccl_local.c" -o "$BUILD/comm_nccl_local.o" 2>&1 &&
    cc "${CFLAGS[@]}" -c "$ROOT/comm/comm.c" -o "$BUILD/comm.o" 2>&1 &&
    cc "${CFLAGS[@]}" -c "$ROOT/base/clock.c" -o "$BUILD/clock.o" 2>&1 &&
    cc "${CFLAGS[@]}" -c "$ROOT/base/fill.c" -o "$BUILD/fill.o" 2>&1 &&
    cc "${CFLAGS[@]}" -c "$ROOT/base/vec.c" -o "$BUILD/vec.o" 2>&1 &&
    cc "${CFLAGS[@]}" -c "$ROOT/tests/comm/bs_comm_check.c" -o "$BUILD/bs_comm_check.o" 2>&1
  rc=$?
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  for f in attn_cuda_simple attn_cuda_fwd_mma attn_cuda_bwd_mma comm_cuda_ops; do
    echo "-- $f.cu --"
    cat "$BUILD/$f.log"
  done
  if [ $rc -eq 0 ]; then
    LIBDIRS=()
    for d in $(cuda_lib_path | tr ':' ' '); do LIBDIRS+=(-L"$d" -Xlinker -rpath="$d"); done
    # shellcheck disable=SC2046 # one object per name
    nvcc "$ARCH" "${LIBDIRS[@]}" -o "$BUILD/bs_cuda_check" "$BUILD"/attn_cuda_host.o "$BUILD"/attn_cuda_simple.o \
      "$BUILD"/attn_cuda_fwd_mma.o "$BUILD"/attn_cuda_bwd_mma.o $(for f in $CHECK_SRC; do echo "$BUILD/$f.o"; done) \
      "$BUILD"/clock.o "$BUILD"/fill.o \
      -lcublas -lm 2>&1 || rc=1
    nvcc "$ARCH" -o "$BUILD/bs_comm_check" "$BUILD"/comm_nccl.o "$BUILD"/comm_nccl_local.o "$BUILD"/comm.o "$BUILD"/clock.o "$BUILD"/fill.o "$BUILD"/vec.o \
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
timeout 90 "$CHECK" --path simple --no-bench --seed "$SEED" --out "$OUTDIR" >>"$OUTDIR/check.log" 2>&1
SRC=$?
echo "device-check: correctness, tensor-core path"
timeout 90 "$CHECK" --path mma --no-bench --seed "$SEED" --out "$OUTDIR" >>"$OUTDIR/check.log" 2>&1
XRC=$?
if [ $SRC -eq 77 ] && [ $XRC -eq 77 ]; then
  echo "device-check: no CUDA device usable by the CUDA runtime:"
  grep -m1 "^SKIP" "$OUTDIR/check.log" || true
  exit 77
fi
grep -E "^correctness \(path" "$OUTDIR/check.log" || true
grep -E "FAIL" "$OUTDIR/check.log" | head -20 || true
LEFT=$((LIMIT - $(elapsed)))
BUDGET=$((LEFT - 60)) # the rest of this script keeps a minute, and step 4 its share
[ "${BURSTSIM_DEVICE_CHECK_PROJECT:-1}" = "1" ] && BUDGET=$((LEFT - 200))
[ $BUDGET -gt "${BURSTSIM_DEVICE_CHECK_BENCH:-60}" ] && BUDGET=${BURSTSIM_DEVICE_CHECK_BENCH:-60}
[ "$BUDGET" -lt 20 ] && BUDGET=20
echo "device-check: benchmark (budget ${BUDGET} s)"
timeout $((BUDGET + 40)) "$CHECK" --bench-only --out "$OUTDIR" --budget "$BUDGET" 2>&1 | tee -a "$OUTDIR/check.log"
BRC=${PIPESTATUS[0]}
if [ $SRC -eq 77 ] || [ $XRC -eq 77 ]; then CRC=77; elif [ $SRC -eq 0 ] && [ $XRC -eq 0 ] && [ "$BRC" -eq 0 ]; then CRC=0; else CRC=1; fi

# The communicator's local multi-rank mode (G virtual ranks on this GPU).
echo "device-check: running bs_comm_check (local multi-rank mode)"
timeout 45 "$BUILD/bs_comm_check" 2>&1 | tee -a "$OUTDIR/check.log"
MRC=${PIPESTATUS[0]}

fi # steps 1-3

# 4. The loop with burstsim: a binary built with CUDA that runs here (its libraries found), else
# a build of the project here if it configures (SimGrid, Open MPI, GSL, ... may be missing).
LOOP="skipped"
LRC=0
BS=""
LOG="$OUTDIR/loop.log"
usable() { # a burstsim whose libraries (its CUDA module's too) resolve and that knows --backend cuda
  [ -x "$1" ] || return 1
  local f
  for f in "$1" "$(dirname "$1")/burstsim_cuda.so"; do
    [ -f "$f" ] || continue
    if ldd "$f" 2>/dev/null | grep -q "not found"; then
      echo "device-check: $f: libraries not found here: $(ldd "$f" | grep "not found" | awk '{print $1}' | tr '\n' ' ')" >>"$LOG"
      return 1
    fi
  done
  "$1" run --help 2>&1 | grep -q -- "--backend cpu|cuda"
}
# A bundle made by scripts/device-bundle.sh (burstsim, its libraries, Open MPI's run time), carried
# with the tree: unpacked under /tmp; Open MPI's trees copied to their paths only where this machine
# has none (with an Open MPI of its own, that one runs and the bundle's MPI libraries stand aside).
use_bundle() {
  local tarball=$1 dir=/tmp/burstsim-bundle d
  rm -rf "$dir" && mkdir -p "$dir" && tar -C "$dir" -xJf "$tarball" || return 1
  if [ -n "$(ls -A /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 2>/dev/null)" ]; then
    echo "device-check: this machine has its own Open MPI: the bundle's MPI libraries stand aside" >>"$LOG"
    mkdir -p "$dir/lib-mpi-aside"
    mv "$dir"/lib/libmpi* "$dir"/lib/libopen-* "$dir"/lib/libmca_common* "$dir"/lib/libpmix* "$dir"/lib/libhwloc* \
      "$dir"/lib/libevent* "$dir/lib-mpi-aside/" 2>/dev/null
    rm -f "$dir/bin/mpirun" "$dir/bin/orted"
  else
    while read -r d; do
      if [ -z "$(ls -A "$d" 2>/dev/null)" ]; then
        mkdir -p "$d" && cp -a "$dir/sys$d/." "$d/" && echo "device-check: Open MPI files put in $d" >>"$LOG"
      fi
    done <"$dir/sys.trees"
    export PATH="$dir/bin:$PATH"
  fi
  export LD_LIBRARY_PATH="$dir/lib${CUDA_LIBS:+:$CUDA_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "device-check: bundle unpacked in $dir; LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >>"$LOG"
  BUNDLE_BS="$dir/bin/burstsim"
}
if [ "${BURSTSIM_DEVICE_CHECK_PROJECT:-1}" = "1" ]; then
  : >"$LOG"
  CUDA_LIBS=$(cuda_lib_path)
  echo "device-check: CUDA library folders found: ${CUDA_LIBS:-none}" >>"$LOG"
  for cand in "${BURSTSIM_BIN:-}" "$ROOT/build/burstsim" "$ROOT/build-device-project/burstsim"; do
    if [ -n "$cand" ] && usable "$cand"; then BS=$cand; break; fi
  done
  BUNDLE=${BURSTSIM_DEVICE_BUNDLE:-$ROOT/build/device-bundle.tar.xz}
  if [ -z "$BS" ] && [ -f "$BUNDLE" ]; then
    echo "device-check: using the carried bundle $BUNDLE"
    BUNDLE_BS=""
    if use_bundle "$BUNDLE" && usable "$BUNDLE_BS"; then
      BS=$BUNDLE_BS
    else
      echo "device-check: the bundle does not run here (see loop.log)"
    fi
  fi
  if [ -z "$BS" ] && [ $((LIMIT - $(elapsed))) -gt 200 ] && command -v cmake >/dev/null 2>&1; then
    echo "device-check: building the project here (at most $((LIMIT - $(elapsed) - 150)) s)"
    if timeout 60 cmake -S "$ROOT" -B "$ROOT/build-device-project" >>"$LOG" 2>&1 &&
      timeout $((LIMIT - $(elapsed) - 150)) cmake --build "$ROOT/build-device-project" -j "$(nproc)" >>"$LOG" 2>&1 &&
      usable "$ROOT/build-device-project/burstsim"; then
      BS="$ROOT/build-device-project/burstsim"
    fi
  fi
  if [ -z "$BS" ]; then
    LOOP="no burstsim with CUDA runs here (see loop.log): calib, run and validate not run"
  fi
fi
if [ -n "$BS" ]; then
  MPIRUN=()
  if command -v mpirun >/dev/null 2>&1; then
    MPIRUN=(mpirun --oversubscribe --bind-to none)
    [ "$(id -u)" = "0" ] && MPIRUN+=(--allow-run-as-root)
  fi
  # one rank: under mpirun, or an MPI singleton where there is none; two ranks need mpirun
  NP1=()
  NP2=()
  if [ ${#MPIRUN[@]} -gt 0 ]; then
    NP1=("${MPIRUN[@]}" -np 1)
    NP2=("${MPIRUN[@]}" -np 2)
  fi
  SMALL="$ROOT/tests/runtime/small.ini"
  cat >"$OUTDIR/point.ini" <<'INI'
; point.ini — device-check's timed point: burst attention, bf16, causal, 16k tokens, 16 heads of 128
[model]
heads = 16
kv_heads = 16
head_dim = 128
dtype = bf16
[workload]
phase = train
seq_len = 16384
causal = true
[parallel]
method = burst
gpus = 2
layout = zigzag
ranks_per_node = 2
[cluster]
topology = host
profile = host
INI
  step() { # step NAME TIMEOUT RANKS CMD...: runs, logs, records NAME=rc (two ranks without mpirun: skipped)
    local name=$1 t=$2 ranks=$3
    shift 3
    if [ "$ranks" = "2" ] && [ ${#NP2[@]} -eq 0 ]; then
      RESULTS+=("$name=skipped(no mpirun)")
      return 0
    fi
    if [ "$ranks" = "2" ]; then set -- "${NP2[@]}" "$@"; elif [ ${#NP1[@]} -gt 0 ]; then set -- "${NP1[@]}" "$@"; fi
    local left=$((LIMIT - $(elapsed) - 10))
    if [ $left -lt 15 ]; then
      RESULTS+=("$name=skipped(time)")
      LRC=1
      return 1
    fi
    [ "$t" -gt $left ] && t=$left
    echo "device-check: $name (at most $t s)"
    echo "== $name: $* ==" >>"$LOG"
    timeout "$t" "$@" >>"$LOG" 2>&1
    local rc=$?
    echo "== $name: rc $rc after $(elapsed) s ==" >>"$LOG"
    RESULTS+=("$name=$rc")
    [ $rc -eq 0 ] || LRC=1
    return $rc
  }
  RESULTS=()
  if [ "${BURSTSIM_DEVICE_CHECK_CALIB:-quick}" = "full" ]; then
    step calib 160 1 "$BS" calib --backend cuda --dtype bf16 --out "$OUTDIR/gpu-profile.json"
  else
    step calib 100 1 "$BS" calib --backend cuda --quick --dtype bf16 --head-dim 128 --max-block 8192 \
      --out "$OUTDIR/gpu-profile.json"
  fi
  step run_burst_mpi 45 2 "$BS" run "$SMALL" --backend cuda --comm mpi --verify --out "$OUTDIR/run-burst.json"
  step run_ring_mpi 45 2 "$BS" run "$SMALL" --backend cuda --comm mpi --verify --set parallel.method=ring \
    --out "$OUTDIR/run-ring.json"
  step run_burst_nccl 45 1 "$BS" run "$SMALL" --backend cuda --comm nccl --verify --set parallel.gpus=1 \
    --set parallel.ranks_per_node=1 --out "$OUTDIR/run-nccl.json"
  step run_layer_mpi 45 2 "$BS" run "$SMALL" --backend cuda --comm mpi --set workload.scope=layer --set model.ffn=256 \
    --out "$OUTDIR/run-layer.json"
  step run_point 45 2 "$BS" run "$OUTDIR/point.ini" --backend cuda --warmup 1 --out "$OUTDIR/run-point.json"
  if [ ${#MPIRUN[@]} -gt 0 ]; then
    # validate calibrates on the point's two ranks (bf16, d = 128) and spawns its own mpirun jobs:
    # started here without a launcher
    NP1=()
    step validate 150 1 "$BS" validate "$OUTDIR/point.ini" --backend cuda --np 2 --fail-exact \
      --workdir "$OUTDIR/validate" --out "$OUTDIR/validate.json"
    # the same point on one rank: the GPU's kernels alone, no communication to stage through the host
    sed -e 's/^gpus = 2/gpus = 1/' -e 's/^ranks_per_node = 2/ranks_per_node = 1/' "$OUTDIR/point.ini" >"$OUTDIR/point1.ini"
    step validate_one 100 1 "$BS" validate "$OUTDIR/point1.ini" --backend cuda --np 1 --fail-exact \
      --workdir "$OUTDIR/validate1" --out "$OUTDIR/validate1.json"
    # decode on one rank: one token against a 256k-token KV cache, bound by reading K and V (ring
    # decode: tree decode needs the rescale and finalize kernels the CUDA table lacks)
    sed -e '/^\[workload\]/,/^\[parallel\]/c\[workload]\nphase = decode\ndecode_tokens = 1\nseq_len = 262144\ncausal = true\n[parallel]' \
      -e 's/^method = burst/method = ring/' -e 's/^layout = zigzag/layout = contiguous/' "$OUTDIR/point1.ini" \
      >"$OUTDIR/point-decode.ini"
    step validate_decode 100 1 "$BS" validate "$OUTDIR/point-decode.ini" --backend cuda --np 1 --fail-exact \
      --workdir "$OUTDIR/validate-decode" --out "$OUTDIR/validate-decode.json"
  else
    RESULTS+=("validate=skipped(no mpirun)")
  fi
  LOOP="${RESULTS[*]} (0 pass; 124 timeout; 4 no device; see loop.log)"
  grep -E "verify \(|PASS|FAIL|profile written|^ *[0-9]+ +[0-9.]+ " "$LOG" | tail -20 || true
fi

# 5. Summary last.
echo
echo "== device-check summary ($(elapsed) s) =="
if [ -f "$OUTDIR/summary.txt" ]; then cat "$OUTDIR/summary.txt"; else echo "no summary (bs_cuda_check rc $CRC)"; fi
echo "exit codes: simple $SRC, mma $XRC, bench $BRC (0 pass, 1 fail, 124 timeout, 77 no device)"
echo "communicator local mode: $(grep -E '^bs_comm_check: [0-9]+ passed' "$OUTDIR/check.log" 2>/dev/null | tail -1) (rc $MRC)"
echo "burstsim loop ($BS): $LOOP"
echo "files in $OUTDIR: $(cd "$OUTDIR" && find . -maxdepth 1 -type f -printf '%f ')"
if [ "$CRC" -eq 77 ]; then exit 77; fi
if [ "$CRC" -eq 0 ] && [ "$MRC" -eq 0 ] && [ "$LRC" -eq 0 ]; then exit 0; fi
exit 1
