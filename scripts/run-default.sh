#!/usr/bin/env bash
# `make run`: the default job. The quick-start scenario once the simulator exists,
# the kernel benchmark before that.
set -euo pipefail
BUILD=${1:-build}
if [ -f experiments/quickstart.ini ] && "$BUILD/burstsim" sim --help >/dev/null 2>&1; then
  exec "$BUILD/burstsim" sim experiments/quickstart.ini
fi
exec "$BUILD/burstsim" bench kernels
