#!/usr/bin/env bash
# Installs every Debian package burstsim builds, tests and plots with.
# Idempotent: when everything is present it only checks and returns.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libsimgrid-dev
  libopenmpi-dev openmpi-bin
  libgsl-dev
  libcjson-dev
  libinih-dev
  libyaml-dev                # import nemo (src/import_nemo.c)
  libcmocka-dev
  libopenblas-dev
  gnuplot-nox
  clang libclang-rt-14-dev   # scripts/fuzz.sh (libFuzzer)
  clang-format               # scripts/format-check.sh (CI)
  valgrind                  # scripts/memcheck.sh
  python3 python3-jsonschema # tests: fidelity, published figures, JSON Schemas (tests/cli/schema.py)
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "deps.sh: installing ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "deps.sh: missing packages (${missing[*]}) and not root: run as root, or" >&2
    echo "         apt-get install ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps.sh: done" >&2
