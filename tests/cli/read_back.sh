#!/bin/sh
# read_back.sh KIND JSON_SAME FILE... — reads back the result files a command test wrote, so that
# a test passes on what was written and not only on the exit code.
#   run JSON_SAME RESULT.json TRACE.json RANKS: one point, verified, with figures and bytes per peer
#       for every rank, and a trace that is JSON naming every rank;
#   validate JSON_SAME RESULT.json POINTS: every point ran, bytes exact, the memory peak within 2 %.
kind=$1; same=$2; file=$3
fail() { echo "read_back $kind: $*"; exit 1; }
[ -s "$file" ] || fail "$file is missing or empty"
"$same" "$file" "$file" >/dev/null || fail "$file is not valid JSON"
has() { grep -q -- "$1" "$file" || fail "$file lacks $1"; }
count() { [ "$(grep -c -- "$1" "$file")" -eq "$2" ] || fail "$file has $(grep -c -- "$1" "$file") of $1, expected $2"; }
case $kind in
run)
  trace=$4; ranks=$5
  has '"mode":[[:space:]]*"run"'
  count '"method":' 1
  count '"sent_to"' "$ranks"
  has '"pass":[[:space:]]*true'
  has '"per_rank_max_sent":[[:space:]]*[1-9]'
  has '"peak_bytes_max":[[:space:]]*[1-9]'
  [ -s "$trace" ] || fail "$trace is missing or empty"
  "$same" "$trace" "$trace" >/dev/null || fail "$trace is not valid JSON"
  r=0
  while [ "$r" -lt "$ranks" ]; do
    grep -q "\"rank $r\"" "$trace" || fail "$trace names no rank $r"
    r=$((r + 1))
  done ;;
validate)
  points=$4
  has '"mode":[[:space:]]*"validate"'
  count '"config":' "$points"
  has "\"ran\":[[:space:]]*$points,"
  has "\"bytes_exact\":[[:space:]]*$points,"
  has "\"peak_within_2pct\":[[:space:]]*$points,"
  count '"bytes_exact":[[:space:]]*true' "$points" ;;
*)
  echo "read_back: unknown kind '$kind'"; exit 2 ;;
esac
echo "read_back $kind: $file read back"
