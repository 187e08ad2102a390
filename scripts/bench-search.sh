#!/bin/sh
# bench-search.sh BUILD_DIR [TIMEOUT_S] — the speed of `burstsim search` on the two spaces of issue
# 27 (not a ctest): Llama 3.1 70B at 128K tokens on 256 DGX H100 GPUs (target: exact top 10 and
# front in 60 CPU seconds) and Llama 3.1 405B at 8K on 2304 GPUs (target: 5 CPU minutes), each the
# whole default space (--force: both are past the search's one-hour refusal). Each search runs under
# a bound (TIMEOUT_S, default 600 s of wall time); one that passes it gets SIGTERM, which ends a
# search with what it has (its counts marked partial). One line per search: CPU seconds (user +
# sys, from /usr/bin/time -v), wall seconds, peak RSS, candidates, walked, refined (walked a second
# time, over the corners), simulated, pruned by memory and by bound, the CPU target and whether it
# was met (a partial search never meets it), and whether it finished.
set -eu
build=${1:?usage: bench-search.sh BUILD_DIR [TIMEOUT_S]}
bound=${2:-600}
bs=$build/burstsim
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x "$bs" ] || { echo "bench-search.sh: no $bs (build first)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench-search.sh: /usr/bin/time is needed (apt-get install time)" >&2; exit 2; }

field() { # field NAME FILE: a number of the search object of --out
  sed -n "s/^[[:space:]]*\"$1\":[[:space:]]*\([0-9.e+-]*\),*$/\1/p" "$2" | head -n 1
}
tfield() { # tfield LABEL FILE: a figure of /usr/bin/time -v
  sed -n "s/^[[:space:]]*$1:[[:space:]]*//p" "$2" | head -n 1
}

printf '%-26s %9s %9s %9s %10s %9s %9s %9s %9s %9s %9s %s\n' search "CPU s" "wall s" "RSS MiB" candidates walked refined \
  simulated "memory" "bound" target status
for name in h100-256-70b-128k h100-2304-405b-8k; do
  case $name in
  h100-256-70b-128k) target=60 ;;
  *) target=300 ;;
  esac
  rc=0
  /usr/bin/time -v timeout -s TERM "$bound" "$bs" search "$here/experiments/search/$name.ini" --force --quiet \
    --out "$tmp/$name.json" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
  user=$(tfield "User time (seconds)" "$tmp/$name.err")
  sys=$(tfield "System time (seconds)" "$tmp/$name.err")
  wall=$(tfield "Elapsed (wall clock) time (h:mm:ss or m:ss)" "$tmp/$name.err")
  rss=$(tfield "Maximum resident set size (kbytes)" "$tmp/$name.err")
  cpu=$(echo "${user:-0} ${sys:-0}" | awk '{printf "%.1f", $1 + $2}')
  wall_s=$(echo "${wall:-0}" | awk -F: '{s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s}')
  rss_m=$(echo "${rss:-0}" | awk '{printf "%.0f", $1 / 1024}')
  status=done
  met=$(awk -v c="$cpu" -v t="$target" 'BEGIN { print (c <= t ? "met" : "missed") }')
  if [ -f "$tmp/$name.json" ]; then
    [ "$(sed -n 's/^[[:space:]]*"partial":[[:space:]]*\(true\|false\),*$/\1/p' "$tmp/$name.json")" = true ] &&
      status="partial (stopped at ${bound} s)" met=missed
    printf '%-26s %9s %9s %9s %10s %9s %9s %9s %9s %9s %9s %s\n' "$name" "$cpu" "$wall_s" "$rss_m" \
      "$(field candidates "$tmp/$name.json")" "$(field walked "$tmp/$name.json")" \
      "$(field refined "$tmp/$name.json")" "$(field simulated "$tmp/$name.json")" \
      "$(field pruned_memory "$tmp/$name.json")" "$(field pruned_bound "$tmp/$name.json")" \
      "<=${target} s: $met" "$status"
  else
    printf '%-26s %9s %9s %9s %10s %9s %9s %9s %9s %9s %9s %s\n' "$name" "$cpu" "$wall_s" "$rss_m" - - - - - - \
      "<=${target} s: missed" "no result (exit $rc): $(tail -n 1 "$tmp/$name.err")"
  fi
done
