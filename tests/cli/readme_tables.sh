#!/bin/sh
# readme_tables.sh BURSTSIM SRCDIR — the README's result tables stay true: every row of the
# quickstart table at the top is simulated again (its method and GPUs on the quickstart scenario)
# and must print exactly as the README shows it, header included; and the model-scope example of
# "Reading the results" must give the step, tokens/s per GPU, MFU and peak the README quotes; and
# every "    $ burstsim ..." command of the README and of the guide's docs/ pages prints exactly the
# lines shown under it.
bs=$1; src=$2
readme="$src/README.md"; q="$src/experiments/quickstart.ini"
guide=$(ls "$src"/README.md "$src"/docs/*.md)
fail() { echo "readme_tables: $*"; exit 1; }
# the indented block after "Part of its output here"
block=$(awk '/Part of its output here/ { on = 1; next } on && /^    / { print substr($0, 5); seen = 1; next }
             on && seen { exit }' "$readme")
[ -n "$block" ] || fail "no quickstart table in the README"
header=$(printf '%s\n' "$block" | head -n 1)
n=0
printf '%s\n' "$block" | tail -n +2 > "${TMPDIR:-/tmp}/readme_rows.$$"
trap 'rm -f "${TMPDIR:-/tmp}/readme_rows.$$"' EXIT
while IFS= read -r row; do
  method=$(printf '%s' "$row" | awk '{ print $1 }'); gpus=$(printf '%s' "$row" | awk '{ print $2 }')
  out=$(timeout 300 "$bs" sim "$q" --quiet --set parallel.method="$method" --set parallel.gpus="$gpus" 2>/dev/null)
  [ "$(printf '%s\n' "$out" | head -n 1)" = "$header" ] || fail "the header is now: $(printf '%s\n' "$out" | head -n 1)"
  [ "$(printf '%s\n' "$out" | sed -n 2p)" = "$row" ] || fail "$method on $gpus GPUs is now: $(printf '%s\n' "$out" | sed -n 2p)"
  n=$((n + 1))
done < "${TMPDIR:-/tmp}/readme_rows.$$"
[ "$n" -ge 3 ] || fail "only $n rows checked"
# the throughput example
out=$(timeout 300 "$bs" sim "$q" --quiet --set model.preset=llama3-8b --set workload.scope=model \
  --set workload.seq_len=32K --set parallel.gpus=8 --set parallel.method=ring --set parallel.zero=1 2>/dev/null)
row=$(printf '%s\n' "$out" | sed -n 2p)
for want in "2.125 s" " 1927 " "59.7%" " 77.07 " " 74.08 "; do
  case "$row" in *"$want"*) ;; *) fail "the model-scope example no longer shows '$want': $row" ;; esac
  # shellcheck disable=SC2086
  cat $guide | grep -q "$(printf '%s' "$want" | sed 's/^ //; s/ $//; s/%/ %/')" || fail "the guide does not quote '$want'"
done
# every "    $ burstsim ..." command of the README with the output below it (up to a blank line)
# shellcheck disable=SC2086
awk 'FNR == 1 && cmd != "" { print "."; cmd = "" }
     /^    \$ burstsim / { if (cmd != "") print "."; cmd = substr($0, 7); print "$" cmd; next }
     cmd != "" && /^    / { print substr($0, 5); next }
     cmd != "" { print "."; cmd = "" }
     END { if (cmd != "") print "." }' $guide > "${TMPDIR:-/tmp}/readme_cmds.$$"
trap 'rm -f "${TMPDIR:-/tmp}/readme_rows.$$" "${TMPDIR:-/tmp}/readme_cmds.$$" "${TMPDIR:-/tmp}/readme_want.$$"' EXIT
ncmd=0
while IFS= read -r line; do
  case "$line" in
    '$'*) cmd=${line#\$burstsim }; : > "${TMPDIR:-/tmp}/readme_want.$$" ;;
    .)
      # shellcheck disable=SC2086
      got=$(cd "$src" && timeout 300 "$bs" $cmd 2>/dev/null)
      [ "$got" = "$(cat "${TMPDIR:-/tmp}/readme_want.$$")" ] ||
        { printf '%s\n' "$got"; fail "'burstsim $cmd' no longer prints what the README shows (now above)"; }
      ncmd=$((ncmd + 1)) ;;
    *) printf '%s\n' "$line" >> "${TMPDIR:-/tmp}/readme_want.$$" ;;
  esac
done < "${TMPDIR:-/tmp}/readme_cmds.$$"
[ "$ncmd" -ge 4 ] || fail "only $ncmd README commands found"
echo "readme_tables: $n quickstart rows, the throughput example and $ncmd README commands as the README shows them"
