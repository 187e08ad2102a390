#!/bin/sh
# expect_ok.sh BOUND_S PATTERN CMD... — the counterpart of expect_fail.sh for commands that must
# succeed: passes when CMD exits 0 within BOUND_S seconds and its output (stdout and stderr) matches
# PATTERN: a grep extended regular expression matched against the whole output, so '.' spans lines
# and '^' is its start, as with ctest's PASS_REGULAR_EXPRESSION (which ignores the exit status).
bound=$1; pattern=$2; shift 2
out=$(mktemp)
start=$(date +%s)
timeout "$bound" "$@" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
if [ "$rc" -eq 124 ]; then echo "expect_ok: still running after ${bound} s (a hang)"; rm -f "$out"; exit 1; fi
if [ "$rc" -ne 0 ]; then echo "expect_ok: exit $rc, expected 0"; rm -f "$out"; exit 1; fi
if ! grep -Ezq -- "$pattern" "$out"; then echo "expect_ok: output lacks '$pattern'"; rm -f "$out"; exit 1; fi
echo "expect_ok: succeeded as expected in ${elapsed} s"
rm -f "$out"
exit 0
