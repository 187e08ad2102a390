#!/bin/sh
# device_check_detect.sh DEVICE_CHECK OUTDIR — the detection step of scripts/device-check.sh alone
# (BURSTSIM_DEVICE_CHECK_DRY=1): with a GPU it exits 0 naming the GPU and builds nothing; without
# one it exits 77 with a message saying so. Any other exit status, or a message that does not
# match the status, fails.
script=$1; dir=$2
out=$(BURSTSIM_DEVICE_CHECK_DRY=1 timeout 50 "$script" "$dir" 2>&1)
rc=$?
echo "$out"
case $rc in
  0) echo "$out" | grep -q "device-check: GPU found" || { echo "device_check_detect: exit 0 without 'GPU found'"; exit 1; }
     echo "$out" | grep -q "dry run, nothing built" || { echo "device_check_detect: the dry run did not stop after detection"; exit 1; }
     [ -z "$(ls -A "$dir")" ] || { echo "device_check_detect: the dry run wrote into $dir"; exit 1; } ;;
  77) echo "$out" | grep -q "device-check: no CUDA device" || { echo "device_check_detect: exit 77 without 'no CUDA device'"; exit 1; } ;;
  *) echo "device_check_detect: exit $rc, expected 0 (GPU) or 77 (no GPU)"; exit 1 ;;
esac
echo "device_check_detect: exit $rc as expected"
