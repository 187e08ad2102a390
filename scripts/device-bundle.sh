#!/usr/bin/env bash
# device-bundle.sh BUILD_DIR OUT.tar.xz — pack a built burstsim (with its CUDA module) together with
# the shared libraries and the Open MPI runtime it needs, for a GPU machine that has the NVIDIA driver,
# the CUDA toolkit and NCCL but none of this project's Debian packages (SimGrid, Open MPI, GSL, inih,
# cJSON, OpenBLAS). GPU nodes are often set up that way, with nothing to install from; the usual answer
# is to build on a machine of the same or an older C library and carry the result.
#
# What goes in (paths inside the archive):
#   bin/      burstsim, burstsim_cuda.so (loaded from beside the binary), mpirun, orted
#   lib/      every shared library those need, except the C library family and libstdc++/libgcc_s
#             (the GPU machine's own, which must be as new as this machine's) and the CUDA libraries
#             (libcuda, libcudart, libcublas, libcublasLt, libnccl: the GPU machine's own)
#   sys/      Open MPI's and PMIx's plugins, help texts and configuration at their absolute Debian
#             paths (Open MPI looks for them there), listed in sys.trees; scripts/device-check.sh
#             copies each into place only where that folder is missing or empty on the GPU machine.
# Needs: ldd, tar with xz. Exit 0 written, 1 something missing, 2 usage.
set -euo pipefail

if [ $# -ne 2 ] || [ "${1:0:1}" = "-" ]; then
  echo "usage: scripts/device-bundle.sh BUILD_DIR OUT.tar.xz" >&2
  exit 2
fi
BUILD=$1
OUT=$2
for f in burstsim burstsim_cuda.so; do
  if [ ! -f "$BUILD/$f" ]; then
    echo "device-bundle: $BUILD/$f: not found (build with CUDA and NCCL first)" >&2
    exit 1
  fi
done
ORTERUN=$(readlink -f "$(command -v orterun || command -v mpirun || echo /nonexistent)")
if [ ! -x "$ORTERUN" ]; then
  echo "device-bundle: Open MPI's orterun/mpirun not found on this machine" >&2
  exit 1
fi
ORTED=$(readlink -f "$(command -v orted || echo /nonexistent)")

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/sys"
cp "$BUILD/burstsim" "$BUILD/burstsim_cuda.so" "$STAGE/bin/"
cp "$ORTERUN" "$STAGE/bin/mpirun"
[ -x "$ORTED" ] && cp "$ORTED" "$STAGE/bin/orted"

# Open MPI's and PMIx's run-time trees, at their absolute paths under sys/.
MPI_LIBDIR=$(ompi_info --path libdir --parsable 2>/dev/null | sed -n 's/^path:libdir://p')
MPI_PKGLIB=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
MPI_DATA=$(ompi_info --path pkgdatadir --parsable 2>/dev/null | sed -n 's/^path:pkgdatadir://p')
MPI_ETC=$(ompi_info --path sysconfdir --parsable 2>/dev/null | sed -n 's/^path:sysconfdir://p')
TREES=()
for d in "$MPI_LIBDIR" "$MPI_PKGLIB" "$MPI_DATA" "$MPI_ETC"; do
  [ -n "$d" ] && [ -d "$d" ] && TREES+=("$d")
done
# PMIx: the external library Open MPI was built against, with its plugins beside it.
PMIX_LIB=$(ldd "$MPI_PKGLIB"/mca_pmix_ext3x.so 2>/dev/null | awk '/libpmix/{print $3}' || true)
if [ -n "$PMIX_LIB" ]; then
  PMIX_PREFIX=$(dirname "$(dirname "$(readlink -f "$PMIX_LIB")")")
  [ -d "$PMIX_PREFIX/lib/pmix" ] && TREES+=("$PMIX_PREFIX/lib/pmix")
  [ -d "$PMIX_PREFIX/share" ] && TREES+=("$PMIX_PREFIX/share")
fi
for d in "${TREES[@]}"; do
  mkdir -p "$STAGE/sys$(dirname "$d")"
  cp -a "$d" "$STAGE/sys$(dirname "$d")/"
done
printf '%s\n' "${TREES[@]}" >"$STAGE/sys.trees"

# The libraries: the closure under ldd of every binary and plugin, less the base and CUDA.
skip() {
  case "$(basename "$1")" in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libutil.so.* | ld-linux*) return 0 ;;
    libstdc++.so.* | libgcc_s.so.*) return 0 ;;
    libcuda.so.* | libcudart.so.* | libcublas.so.* | libcublasLt.so.* | libnccl.so.* | libnvidia-*) return 0 ;;
  esac
  return 1
}
mapfile -t plugins < <(find "$STAGE/sys" -name '*.so*' -type f)
objs=("$STAGE"/bin/* "${plugins[@]}")
missing=0
for o in "${objs[@]}"; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$path" = "not" ]; then
      skip "$name" || {
        echo "device-bundle: $o needs $name, not found on this machine" >&2
        missing=1
      }
      continue
    fi
    skip "$path" && continue
    [ -e "$STAGE/lib/$name" ] || cp -L "$path" "$STAGE/lib/$name"
  done < <(ldd "$o" 2>/dev/null)
done
if [ $missing -ne 0 ]; then
  exit 1
fi
# Plugins that need libraries of a fabric this machine lacks would only warn; none are expected.
mkdir -p "$(dirname "$OUT")"
tar -C "$STAGE" -cf - bin lib sys sys.trees | xz -T0 -6 >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "device-bundle: $OUT: $(du -h "$OUT" | cut -f1) ($(find "$STAGE/lib" -type f | wc -l) libraries, $(find "$STAGE/sys" -type f | wc -l) Open MPI/PMIx files)"
