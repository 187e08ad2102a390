#!/bin/sh
# bench-scale.sh BUILD_DIR [--quick] [--only TEXT] [--timeout S] — the simulator's own cost at the scale users plan
# at (issue 27): one row per point with the CPU seconds (user + sys of the command and its forked
# point, from /usr/bin/time), wall seconds, peak RSS, the engine that ran, the shortcuts it used
# (sim.network: the fold and its kind, the layer and micro-batch shortcuts) and the target. Every point runs under a
# timeout (default 900 s, --timeout S), so the script always ends: a row that does not finish says
# "timeout". --quick runs only the small rows (a 64-GPU model step, a 1024-GPU attention layer);
# --only TEXT the rows whose label contains TEXT (e.g. --only "attention layer").
# Scenarios: scripts/bench-scale/*.ini. Not a test: speed is measured here, not asserted in ctest.
set -u
if [ $# -lt 1 ]; then
  echo "usage: scripts/bench-scale.sh BUILD_DIR [--quick] [--only TEXT] [--timeout S]" >&2
  exit 2
fi
bs=$(cd "$1" && pwd)/burstsim
shift
quick=0
only=
limit=900
while [ $# -gt 0 ]; do
  case $1 in
  --quick) quick=1 ;;
  --only)
    shift
    only=${1:?--only needs text}
    ;;
  --timeout)
    shift
    limit=${1:?--timeout needs seconds}
    ;;
  *)
    echo "bench-scale.sh: unknown argument $1" >&2
    exit 2
    ;;
  esac
  shift
done
[ -x "$bs" ] || { echo "bench-scale.sh: no burstsim in the build directory" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench-scale.sh: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)/bench-scale
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf '| %-44s | %8s | %8s | %9s | %-7s | %-60s | %s |\n' point "CPU s" "wall s" "peak RSS" engine shortcuts target
printf '|%s|%s|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' $(seq 46))" ---------- ---------- ----------- --------- \
  "$(printf -- '-%.0s' $(seq 62))" --------

# row LABEL TARGET INI [--set k=v ...]: one point, timed
row() {
  label=$1 target=$2 ini=$3
  shift 3
  case $label in *"$only"*) ;; *) return ;; esac
  /usr/bin/time -f '%U %S %e %M' -o "$tmp/time" timeout "$limit" "$bs" sim "$here/$ini" "$@" --quiet \
    --out "$tmp/r.json" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    printf '| %-44s | %8s | %8s | %9s | %-7s | %-60s | %s |\n' "$label" timeout ">$limit" - - - "$target"
    return
  fi
  if [ $rc -ne 0 ] || [ ! -s "$tmp/r.json" ]; then
    printf '| %-44s | %8s | %8s | %9s | %-7s | %-60s | %s |\n' "$label" "failed ($rc)" - - - \
      "$(head -c 60 "$tmp/err" | tr '\n|' '  ')" "$target"
    return
  fi
  set -- $(tail -n 1 "$tmp/time")
  cpu=$(awk -v u="$1" -v s="$2" 'BEGIN { printf("%.1f", u + s) }')
  wall=$(awk -v w="$3" 'BEGIN { printf("%.1f", w) }')
  rss=$(awk -v k="$4" 'BEGIN { printf("%.0f MiB", k / 1024) }')
  net=$(sed -n 's/.*"network":[[:space:]]*"\(.*\)".*/\1/p' "$tmp/r.json" | tail -n 1)
  engine=$(echo "$net" | sed -n 's/.*engine: \([a-z]*\).*/\1/p')
  fold=$(echo "$net" | sed -n 's/.*fold: \([^;]*\).*/\1/p' | sed 's/ ranks simulated.*(stage fold.*/ ranks, stage fold/;
    s/ ranks simulated.*/ ranks, node fold/; s/^no: .*/no fold/')
  layers=$(echo "$net" | sed -n 's/.*layers: \([0-9]* and [0-9]*\) simulated.*/, layers \1 extended/p')
  micro=$(echo "$net" | sed -n 's/.*micro-batches: \([0-9]* and [0-9]*\) simulated.*/, micro-b. \1 extended/p;
    s/.*micro-batches: all simulated.*/, micro-b. all/p')
  printf '| %-44s | %8s | %8s | %9s | %-7s | %-60s | %s |\n' "$label" "$cpu" "$wall" "$rss" "$engine" \
    "fold: $fold$layers$micro" "$target"
}

row "Llama 3.1 70B step, 64 GPUs (TP4 PP4 CP2 DP2)" "<= 1 s" 70b-64.ini
row "attention layer, 1024 GPUs (burst, 4M)" "-" attn-layer.ini --set parallel.gpus=1024
[ "$quick" = 1 ] && exit 0
row "attention layer, 4096 GPUs (burst, 4M)" "-" attn-layer.ini --set parallel.gpus=4096
row "attention layer, 16384 GPUs (burst, 4M)" "<= 30 s" attn-layer.ini --set parallel.gpus=16384
row "Llama 3.1 70B step, 2048 GPUs (64 micro-b.)" "<= 10 s" 70b-2048.ini
row "Llama 3.1 405B step, 2304 GPUs (63 micro-b.)" "<= 10 s" 405b-2304.ini
row "Llama 3.1 405B step, 16384 GPUs (TP8 PP16 CP4)" "<= 60 s, 4 GB" 405b-16384.ini
