#!/bin/sh
# expect_fail.sh BOUND_S PATTERN CMD... — the one idiom for "this command fails with this message in
# this time": passes when CMD exits non-zero (not killed by the outer bound) within BOUND_S seconds
# and its output (stdout and stderr) matches PATTERN (a grep basic regular expression). With
# EXPECT_RC set, the exit status must be exactly that. A failure that is a hang, a success, another
# exit status or another message fails the test, naming which.
bound=$1; pattern=$2; shift 2
out=$(mktemp)
start=$(date +%s)
timeout "$bound" "$@" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
if [ "$rc" -eq 0 ]; then echo "expect_fail: the run succeeded, a failure was expected"; rm -f "$out"; exit 1; fi
if [ "$rc" -eq 124 ]; then echo "expect_fail: still running after ${bound} s (a hang)"; rm -f "$out"; exit 1; fi
if [ -n "${EXPECT_RC:-}" ] && [ "$rc" -ne "$EXPECT_RC" ]; then echo "expect_fail: exit $rc, expected $EXPECT_RC"; rm -f "$out"; exit 1; fi
if ! grep -q -- "$pattern" "$out"; then echo "expect_fail: output lacks '$pattern'"; rm -f "$out"; exit 1; fi
echo "expect_fail: failed as expected (exit $rc) in ${elapsed} s"
rm -f "$out"
exit 0
