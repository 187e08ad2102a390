#!/bin/sh
# device_check_loop.sh DEVICE_CHECK BURSTSIM OUTDIR — step 4 of scripts/device-check.sh alone
# (BURSTSIM_DEVICE_CHECK_LOOP_ONLY=1) on a machine without a GPU: every burstsim step must start
# (calib, the runs, validate) and end with burstsim's exit 4, the summary
# must name each, and the script must exit 1. Skipped (77) where a GPU exists: there the whole
# script is the check, not this plumbing.
script=$1; bs=$2; dir=$3
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU "; then
  echo "device_check_loop: a GPU is present: run scripts/device-check.sh itself"
  exit 77
fi
rm -rf "$dir"
out=$(BURSTSIM_DEVICE_CHECK_LOOP_ONLY=1 BURSTSIM_BIN=$bs timeout 120 "$script" "$dir" 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || { echo "device_check_loop: exit $rc, expected 1"; exit 1; }
for s in calib=4 run_burst_mpi=4 run_ring_mpi=4 run_burst_nccl=4 run_layer_mpi=4 run_point=4 validate=4 validate_one=4 validate_decode=4; do
  echo "$out" | grep -q "burstsim loop .*$s" || { echo "device_check_loop: the summary lacks $s"; exit 1; }
done
echo "$out" | tail -1 | grep -q "^files in" || { echo "device_check_loop: the summary is not last"; exit 1; }
[ -f "$dir/point.ini" ] && [ -f "$dir/loop.log" ] || { echo "device_check_loop: point.ini or loop.log missing"; exit 1; }
grep -q "no CUDA device" "$dir/loop.log" || { echo "device_check_loop: loop.log lacks the reason"; exit 1; }
echo "device_check_loop: every step started and reported"
