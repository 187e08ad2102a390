#!/usr/bin/env bash
# sources_link.sh SRCDIR — links every fuzz target of scripts/fuzz.sh from its own source list
# (tests/fuzz/fuzz_NAME.sources, pkg-config modules in fuzz_NAME.libs) with the host compiler and
# replay.c instead of libFuzzer. The campaign builds its targets from these hand lists, not from
# CMake; a file a parser came to need and the list lacks (it happened twice) broke the campaign at
# link time. This fails first, naming the target and the missing symbol.
set -euo pipefail
src=$(cd "$1" && pwd)
cd "$src"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CC=${CC:-cc} CXX=${CXX:-c++}
flags=(-O0 -w -I. -D_GNU_SOURCE -DBURSTSIM_VERSION=\"fuzz\")
status=0 n=0
for list in tests/fuzz/fuzz_*.sources; do
  name=$(basename "$list" .sources); name=${name#fuzz_}
  mods=""; [ -e "tests/fuzz/fuzz_$name.libs" ] && mods=$(cat "tests/fuzz/fuzz_$name.libs")
  # shellcheck disable=SC2086
  cflags=$(pkg-config --cflags inih libcjson $mods)
  objs=()
  # shellcheck disable=SC2046
  for f in tests/fuzz/replay.c "tests/fuzz/fuzz_$name.c" $(cat "$list"); do
    obj="$tmp/$(echo "$f" | tr '/' '_').o"
    if [ ! -e "$obj" ]; then
      # shellcheck disable=SC2086
      case $f in
        *.cpp) $CXX "${flags[@]}" -std=c++17 $cflags -c -o "$obj" "$f" ;;
        *) $CC "${flags[@]}" -std=gnu11 $cflags -c -o "$obj" "$f" ;;
      esac
    fi
    objs+=("$obj")
  done
  # shellcheck disable=SC2086
  if ! $CXX -o "$tmp/fuzz_$name" "${objs[@]}" $(pkg-config --libs inih libcjson $mods) -lm 2>"$tmp/$name.err"; then
    echo "sources_link: $list lacks what the target needs:" >&2
    grep -o "undefined reference to .*" "$tmp/$name.err" | sort -u >&2 || cat "$tmp/$name.err" >&2
    status=1
  fi
  n=$((n + 1))
done
echo "sources_link: $n fuzz targets, $([ $status = 0 ] && echo 'every list links' || echo 'a list does not link')"
exit $status
