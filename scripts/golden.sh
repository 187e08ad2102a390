#!/usr/bin/env bash
# golden.sh — the behaviour-neutral check of CONTRIBUTING.md as one command.
#   scripts/golden.sh run BUILD DIR      simulate the golden set (tests/golden/*.ini) under every
#                                        engine, fold, layer-shortcut, collective model and --explain,
#                                        writing DIR/NAME.FLAGS.{json,csv,txt}
#   scripts/golden.sh compare BUILD A B  every JSON equal (json_same, less sim.wall_s and
#                                        sim.rss_bytes), every CSV equal less its host-measured
#                                        columns, every table equal; exit 1 on the first difference
# A refactor runs `run` before and after and `compare`s the two folders: 0 differences means no
# prediction, byte count, memory figure, message or output format moved.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
case $mode in
  run)
    bs=$(cd "$2" && pwd)/burstsim out=$3
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    cd "$here" || exit 2 # scenario paths relative to the checkout: messages name them the same in any clone
    fail=0
    # flags per set: every ini under each; model-scope inis add --layers off
    flagsets=("" "--engine simgrid" "--engine direct" "--fold off" "--coll steps" "--coll flow"
      "--coll analytic" "--explain")
    for ini in tests/golden/*.ini; do
      name=$(basename "$ini" .ini)
      sets=("${flagsets[@]}")
      grep -q '^scope *=.*model' "$ini" && sets+=("--layers off")
      for f in "${sets[@]}"; do
        tag=$(echo "default $f" | sed 's/^default --/--/; s/^default $/default/; s/--//g; s/ /-/g')
        # shellcheck disable=SC2086
        "$bs" sim "$ini" $f --quiet --out "$out/$name.$tag.json" --csv "$out/$name.$tag.csv" \
          >"$out/$name.$tag.txt" 2>"$out/$name.$tag.err"
        rc=$?
        echo "$rc" >"$out/$name.$tag.rc"
        [ "$rc" -le 2 ] || { echo "golden: $name $f: exit $rc"; fail=1; }
      done
    done
    # the search's walk (the zero-time replay) and its pruning, at attention and model scope
    # (the search's own seconds are cut from its summary line)
    space=(--set model.fp8=off --set workload.recompute=off --set parallel.pp_schedule=1f1b --set parallel.tp=auto
      --set parallel.pp=auto --set parallel.method=auto --set parallel.layout=auto --set parallel.zero=auto)
    for ini in tests/search/search.ini tests/golden/composed.ini; do
      name=search-$(basename "$ini" .ini)
      a=()
      [ "$name" = search-composed ] && a=("${space[@]}")
      for dry in "" --dry-run; do
        "$bs" search "$ini" "${a[@]}" $dry --quiet --out "$out/$name$dry.json" --csv "$out/$name$dry.csv" \
          >"$out/$name$dry.txt" 2>"$out/$name$dry.err"
        echo $? >"$out/$name$dry.rc"
        sed -i 's/; [0-9.]* s$//' "$out/$name$dry.txt"
      done
    done
    exit $fail
    ;;
  compare)
    same=$2/tests/reliability/json_same a=$3 b=$4
    n=0 bad=0
    for fa in "$a"/*.rc; do
      base=$(basename "$fa" .rc)
      n=$((n + 1))
      for ext in rc txt err; do
        cmp -s "$a/$base.$ext" "$b/$base.$ext" || { echo "golden: $base.$ext differs"; diff "$a/$base.$ext" "$b/$base.$ext" | head -5; bad=$((bad + 1)); }
      done
      if [ -s "$a/$base.json" ] || [ -s "$b/$base.json" ]; then
        "$same" "$a/$base.json" "$b/$base.json" wall_s rss_bytes walk_s sim_s >/dev/null ||
          { echo "golden: $base.json differs"; "$same" "$a/$base.json" "$b/$base.json" wall_s rss_bytes walk_s sim_s | head -5; bad=$((bad + 1)); }
      fi
      if [ -s "$a/$base.csv" ] || [ -s "$b/$base.csv" ]; then
        drop() { awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /wall_s|rss/) skip[i] = 1 }
          { s = ""; for (i = 1; i <= NF; i++) if (!skip[i]) s = s $i ","; print s }' "$1"; }
        cmp -s <(drop "$a/$base.csv") <(drop "$b/$base.csv") || { echo "golden: $base.csv differs"; bad=$((bad + 1)); }
      fi
    done
    [ -d "$b" ] && [ "$(ls "$b"/*.rc 2>/dev/null | wc -l)" -eq "$n" ] || { echo "golden: the folders hold different runs"; bad=$((bad + 1)); }
    echo "golden: $n runs compared, $bad differences"
    [ $bad -eq 0 ]
    ;;
  *) echo "usage: golden.sh run BUILD DIR | compare BUILD A B"; exit 2 ;;
esac
