#!/bin/sh
# format-check.sh [--diff] [FILE...] — lists the C, C++ and CUDA files whose formatting differs from
# .clang-format (all tracked ones when no FILE is given), with the number of lines that would change,
# and exits 1 when any differs. --diff prints the changes too. Nothing is rewritten: to reformat a file,
# run clang-format -i on it. Needs clang-format 14 (CLANG_FORMAT names another binary).
set -u
cd "$(dirname "$0")/.." || exit 2
cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
  for c in clang-format-14 clang-format; do command -v "$c" >/dev/null 2>&1 && { cf=$c; break; }; done
fi
[ -n "$cf" ] || { echo "format-check: clang-format not found (set CLANG_FORMAT)" >&2; exit 2; }
show=0
if [ "${1:-}" = "--diff" ]; then show=1; shift; fi
if [ $# -eq 0 ]; then
  set -- $(git ls-files '*.c' '*.h' '*.cpp' '*.cu' '*.cuh')
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
differ=0 total=0
for f in "$@"; do
  total=$((total + 1))
  "$cf" --style=file "$f" >"$tmp" 2>/dev/null || { echo "format-check: $cf failed on $f" >&2; exit 2; }
  if ! cmp -s "$f" "$tmp"; then
    differ=$((differ + 1))
    echo "$f: $(diff "$f" "$tmp" | grep -c '^<') lines differ"
    [ $show -eq 0 ] || diff -u "$f" "$tmp" | sed "1,2s|$tmp|$f (formatted)|"
  fi
done
echo "format-check: $differ of $total files differ from .clang-format"
[ $differ -eq 0 ]
