#!/bin/sh
# validate_workdir.sh BURSTSIM SCENARIO PROFILE — `burstsim validate` leaves no work directory
# behind: not after a validation that succeeds (exit 0, its --out read back), not after one that
# fails (exit 2 naming the key), and keeps it only with --keep (saying where). Runs with TMPDIR
# pointed at a fresh directory, which must be empty afterwards.
set -u
exe=$1; scen=$2; prof=$3
tmp=$(mktemp -d)
fail() { echo "validate_workdir: $*"; rm -rf "$tmp"; exit 1; }
mkdir "$tmp/t"
TMPDIR="$tmp/t" "$exe" validate "$scen" --profile "$prof" --np 2 --warmup 0 --out "$tmp/v.json" >"$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
[ "$rc" -eq 0 ] || fail "a successful validation exited $rc"
grep -q '"mode":[[:space:]]*"validate"' "$tmp/v.json" || fail "the result lacks mode validate"
grep -q '"entries"' "$tmp/v.json" || fail "the result lacks entries"
[ -z "$(ls -A "$tmp/t")" ] || fail "work directory left after success: $(ls "$tmp/t")"
TMPDIR="$tmp/t" "$exe" validate "$scen" --profile "$prof" --set parallel.lao=maybe >"$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
[ "$rc" -eq 2 ] || fail "a bad --set exited $rc, expected 2"
grep -q "parallel.lao" "$tmp/log" || fail "the error does not name parallel.lao"
[ -z "$(ls -A "$tmp/t")" ] || fail "work directory left after failure: $(ls "$tmp/t")"
TMPDIR="$tmp/t" "$exe" validate "$scen" --profile "$prof" --keep --set parallel.lao=maybe >"$tmp/log" 2>&1
cat "$tmp/log"
kept=$(sed -n 's/^burstsim validate: work directory kept: //p' "$tmp/log")
[ -n "$kept" ] && [ -d "$kept" ] || fail "--keep did not keep and name the work directory"
case $kept in "$tmp/t/"*) ;; *) fail "the work directory $kept is not under TMPDIR" ;; esac
echo "validate_workdir: ok"
rm -rf "$tmp"
