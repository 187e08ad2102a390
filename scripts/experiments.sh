#!/bin/sh
# `make experiments`: runs every experiments/NAME/run.sh with this build's burstsim; each writes its
# data, gnuplot PNGs and report.md under experiments/NAME/out.
set -eu
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/$BUILD/burstsim"
[ -x "$BIN" ] || { echo "experiments: $BIN not built (run make build)" >&2; exit 1; }
for run in "$ROOT"/experiments/*/run.sh; do
  [ -f "$run" ] || continue
  dir=$(dirname "$run")
  "$run" "$BIN" "$dir/out"
done
