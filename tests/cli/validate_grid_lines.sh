#!/bin/sh
# validate_grid_lines.sh BURSTSIM — a validation file with [grid NAME] sections is read in whole
# lines: a line longer than 4,096 characters in one grid does not shift the line numbers of
# another grid's errors, and lines past the 8,192nd are read too. Exit code and message checked.
bs=$1
d=$(mktemp -d) || exit 1
fail() { echo "validate_grid_lines: $*"; rm -rf "$d"; exit 1; }
long=$(head -c 5000 /dev/zero | tr '\0' c)
printf '[workload]\nseq_len = 4K\n[grid a]\n[parallel]\nmethod = ring ; %s\n[grid b]\n[parallel]\ngpus = 0\n' "$long" \
  >"$d/long.ini"
"$bs" validate "$d/long.ini" --np 2 --workdir "$d/work" >"$d/log" 2>&1
rc=$?
cat "$d/log"
[ "$rc" -eq 2 ] || fail "exit $rc, expected 2"
grep -q "long.ini \[grid b\]:8: parallel.gpus: 0 is out of range" "$d/log" || fail "the error does not name long.ini [grid b]:8"
{ printf '[grid a]\n[parallel]\nmethod = ring\n'; i=0; while [ $i -lt 9000 ]; do echo; i=$((i + 1)); done
  printf 'gpus = 0\n'; } >"$d/many.ini"
"$bs" validate "$d/many.ini" --np 2 --workdir "$d/work2" >"$d/log" 2>&1
rc=$?
cat "$d/log"
[ "$rc" -eq 2 ] || fail "exit $rc, expected 2"
grep -q "many.ini \[grid a\]:9004: parallel.gpus: 0 is out of range" "$d/log" || fail "line 9004 was not read"
echo "validate_grid_lines: whole lines, all of them"
rm -rf "$d"
