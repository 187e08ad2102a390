#!/bin/sh
# sanity.sh BURSTSIM SRCDIR — figures no device can give are said: a profile whose dense peak
# (device.peak_flops, 10 TFLOP/s) lies below its own kernel rates makes MFU pass 100 %; sim
# warns naming the point and the figure (and still reports it).
bs=$1; src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/bs-sanity-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
sed 's/"value": 312000000000000.0,/"value": 1e13,/' "$src/calib/profiles/a100-sxm4-80gb.json" >"$work/low-peak.json"
grep -q '"value": 1e13,' "$work/low-peak.json" || { echo "sanity.sh: the profile's peak was not replaced"; exit 1; }
timeout 120 "$bs" sim "$src/tests/sim/small.ini" --quiet --set parallel.gpus=16 --set parallel.method=burst \
  --profile "$work/low-peak.json" --out "$work/r.json" >"$work/log" 2>&1
rc=$?
cat "$work/log"
[ "$rc" -eq 0 ] || { echo "sanity.sh: exit $rc, expected 0"; exit 1; }
grep -q "warning: point 1 (burst, 16 GPUs, 65536 tokens): MFU [0-9.]* % is above 100 % of the profile's device.peak_flops" \
  "$work/log" || { echo "sanity.sh: no warning about MFU above 100 %"; exit 1; }
grep -q '"warnings":.*MFU' "$work/r.json" || grep -A3 '"warnings"' "$work/r.json" | grep -q MFU ||
  { echo "sanity.sh: the JSON's warnings lack it"; exit 1; }
echo "sanity.sh: ok"
