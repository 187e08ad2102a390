#!/bin/sh
# expect_fail.sh BOUND_S PATTERN CMD... — passes when CMD fails (non-zero exit, not killed by
# the outer bound) within BOUND_S seconds and its output contains PATTERN: the fault tests'
# "a clear error in bounded time, never a hang". With EXPECT_RC set, the exit status must be that.
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
