#!/bin/sh
# gpu_or_skip.sh CMD... — a test that needs a CUDA device: runs CMD; where it exits 4 (burstsim's
# "no CUDA in this build or no CUDA device") with that message, the test is skipped (exit 77,
# ctest's SKIP_RETURN_CODE here) and says why; any other status is the test's own result.
out=$(mktemp)
"$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -eq 4 ]; then
  if grep -q -e "--backend cuda: no CUDA device" -e "--backend cuda: this build has no CUDA" "$out"; then
    echo "gpu_or_skip: SKIP: $(grep -m1 -e "--backend cuda" "$out")"
    rm -f "$out"
    exit 77
  fi
  echo "gpu_or_skip: exit 4 without the no-device message"
  rm -f "$out"
  exit 1
fi
rm -f "$out"
exit "$rc"
