#!/bin/sh
# outputs.sh CASE BURSTSIM SRCDIR [MPIEXEC] — one hostile output path per case, through the real
# command: the exit code, the message, and what is on disk afterwards (the file written, or the
# old file or nothing). Every command writes through base/fileio, so each writer gets a case.
case_=$1; bs=$2; src=$3; mpiexec=${4:-mpirun}
work=$(mktemp -d "${TMPDIR:-/tmp}/bs-outputs-XXXXXX") || exit 1
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1
scen=$src/tests/sim/small.ini
log=$work/log

fail() { echo "outputs.sh $case_: $*"; echo "--- output:"; cat "$log"; exit 1; }
# run RC PATTERN CMD...: CMD must exit with RC and print PATTERN (stdout or stderr).
run() {
  want=$1; pattern=$2; shift 2
  timeout 300 "$@" >"$log" 2>&1
  rc=$?
  [ "$rc" -eq "$want" ] || fail "exit $rc, expected $want"
  [ -z "$pattern" ] || grep -q -- "$pattern" "$log" || fail "output lacks '$pattern'"
}
# A complete result JSON: its first and last lines and the tool name.
is_json() {
  [ "$(head -c 1 "$1")" = "{" ] && [ "$(tail -n 1 "$1")" = "}" ] && grep -q '"tool":[[:space:]]*"burstsim"' "$1"
}
mpi() { "$mpiexec" --allow-run-as-root --oversubscribe --mca btl self,vader "$@"; }

case $case_ in
sim_out_is_scenario)
  cp "$scen" s.ini; cp s.ini before.ini
  run 2 "--out s.ini: the same file as the scenario" "$bs" sim s.ini --out s.ini
  cmp -s s.ini before.ini || fail "the scenario was changed"
  ln -s s.ini alias.ini
  run 2 "--csv alias.ini: the same file as the scenario" "$bs" sim s.ini --csv alias.ini
  cmp -s s.ini before.ini || fail "the scenario was changed through a link" ;;
sim_out_is_profile_or_platform)
  cp "$src/calib/profiles/a100-sxm4-80gb.json" p.json; cp p.json before.json
  run 2 "--trace p.json: the same file as --profile" "$bs" sim "$scen" --profile p.json --trace p.json
  cmp -s p.json before.json || fail "the profile was changed"
  run 2 "--out p.json: the same file as the profile" "$bs" sim "$scen" --set "cluster.profile=$work/p.json" --out p.json
  cmp -s p.json before.json || fail "the scenario's profile was changed"
  "$bs" topo dgx-a100 --nodes 4 >plat.xml || fail "topo failed"; cp plat.xml before.xml
  run 2 "--csv plat.xml: the same file as the platform" "$bs" sim "$scen" --set "cluster.topology=$work/plat.xml" --csv plat.xml
  cmp -s plat.xml before.xml || fail "the platform was changed" ;;
sim_out_equals_csv)
  run 2 "--csv x: the same file as --out x" "$bs" sim "$scen" --out x --csv x
  [ ! -e x ] || fail "x was created"
  run 2 "--csv -: --out writes standard output too" "$bs" sim "$scen" --out - --csv - ;;
sim_out_directory)
  mkdir d
  run 2 "--out d: is a directory" "$bs" sim "$scen" --out d
  [ -d d ] || fail "d is no longer a directory" ;;
sim_out_read_only)
  echo old > ro.json; chmod 444 ro.json
  run 2 "--out ro.json: the file is read-only; not replaced" "$bs" sim "$scen" --out ro.json
  [ "$(cat ro.json)" = old ] || fail "ro.json was replaced" ;;
sim_out_checked_first)
  # the check comes before the simulation: no table, nothing created
  run 2 "--csv nodir/x.csv: directory nodir" "$bs" sim "$scen" --csv nodir/x.csv
  ! grep -q "^ring " "$log" || fail "the points ran before the output was checked"
  [ ! -e nodir ] || fail "nodir was created" ;;
sim_out_symlink)
  echo old > target.json; chmod 640 target.json; ln -s target.json link.json
  run 0 "" "$bs" sim "$scen" --out link.json
  [ -L link.json ] || fail "link.json is no longer a symlink"
  is_json target.json || fail "target.json is not the result JSON"
  [ "$(stat -c %a target.json)" = 640 ] || fail "target.json lost its permission bits"
  [ -z "$(ls -A | grep '\.tmp-')" ] || fail "a temporary file was left" ;;
sim_out_fifo)
  mkfifo pipe
  cat pipe > got.json &
  reader=$!
  run 0 "" "$bs" sim "$scen" --out pipe
  wait $reader
  [ -p pipe ] || fail "pipe is no longer a FIFO"
  is_json got.json || fail "the reader did not get the result JSON" ;;
sim_out_dev_null)
  run 0 "" "$bs" sim "$scen" --out /dev/null --csv /dev/null
  [ -c /dev/null ] || fail "/dev/null is no longer a character device" ;;
sim_out_dev_full)
  run 1 "--out /dev/full: write failed: No space left on device" "$bs" sim "$scen" --out /dev/full
  [ -c /dev/full ] || fail "/dev/full is no longer a character device" ;;
sim_stdout_full)
  timeout 300 "$bs" sim "$scen" >/dev/full 2>"$log"
  rc=$?
  [ "$rc" -eq 1 ] || fail "exit $rc with the table lost, expected 1"
  grep -q "standard output: write failed" "$log" || fail "no message for the lost table" ;;
run_out_directory)
  mkdir d
  run 2 "--trace d: is a directory" "$mpiexec" --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 "$bs" run "$src/tests/runtime/small.ini" --trace d
  ! grep -q "^rank" "$log" || fail "the run went ahead before the output was checked" ;;
run_out_stdout_once)
  mpi -np 2 "$bs" run "$src/tests/runtime/small.ini" --out - >"$log" 2>&1 || fail "the run failed"
  [ "$(grep -c '"tool":' "$log")" -eq 1 ] || fail "the JSON was not written exactly once to stdout"
  mpi -np 2 "$bs" run "$src/tests/runtime/small.ini" --out r.json >"$log" 2>&1 || fail "the run failed"
  is_json r.json || fail "r.json is not the result JSON"
  grep -q '"sent_to"' r.json || fail "r.json lacks the per-peer bytes" ;;
sim_out_stdout_alone) # --out - / --csv -: stdout holds that output alone, the table goes to stderr
  "$bs" sim "$scen" --quiet --out - >out.json 2>err || fail "sim --out - failed"
  is_json out.json || { cp out.json "$log"; fail "stdout is not the result JSON alone"; }
  grep -q "^method" err || { cp err "$log"; fail "the table is not on stderr"; }
  "$bs" sim "$scen" --quiet --csv - >out.csv 2>err || fail "sim --csv - failed"
  "$bs" sim "$scen" --quiet --csv f.csv >table.txt 2>/dev/null || fail "sim --csv f.csv failed"
  [ "$(head -n 1 out.csv)" = "$(head -n 1 f.csv)" ] && [ "$(wc -l <out.csv)" -eq "$(wc -l <f.csv)" ] \
    || { cp out.csv "$log"; fail "stdout is not the CSV alone"; }
  grep -q "^method" table.txt || { cp table.txt "$log"; fail "without -, the table is not on stdout"; } ;;
sim_trace_stale_removed) # a refused first point leaves no trace of an earlier run under the name
  "$bs" sim "$scen" --quiet --trace t.json >"$log" 2>&1 || fail "the first run failed"
  grep -q '"traceEvents"' t.json || fail "the first run wrote no trace"
  run 2 "not written: point 1 refused (the earlier file of that name was removed)" \
    "$bs" sim "$scen" --quiet --trace t.json --set parallel.method=ulysses --set parallel.gpus=64
  [ ! -e t.json ] || fail "the earlier run's trace is still there" ;;
search_out_stdout_alone)
  "$bs" search "$src/tests/search/search.ini" --quiet --out - >out.json 2>err || fail "search --out - failed"
  is_json out.json || { cp out.json "$log"; fail "stdout is not the search JSON alone"; }
  grep -q "^method" err || { cp err "$log"; fail "the table is not on stderr"; } ;;
search_report_is_input)
  # --report DIR writes DIR/front.dat, front.gp, front.png, report.md: none may be an input.
  sargs="--set parallel.method=ring --set parallel.tp=1 --quiet"
  mkdir d; cp "$src/tests/search/search.ini" d/front.gp; cp d/front.gp before.ini
  run 2 "--report d/front.gp: the same file as the scenario" "$bs" search d/front.gp $sargs --report d
  cmp -s d/front.gp before.ini || fail "the scenario saved as front.gp was overwritten"
  mkdir e; cp before.ini s.ini; ln -s ../s.ini e/report.md
  run 2 "--report e/report.md: the same file as the scenario s.ini" "$bs" search s.ini $sargs --report e
  cmp -s s.ini before.ini || fail "the scenario was overwritten through e/report.md" ;;
search_report_equals_out)
  sargs="--set parallel.method=ring --set parallel.tp=1 --quiet"
  mkdir d
  run 2 "--report d/report.md: the same file as --out d/report.md" "$bs" search "$src/tests/search/search.ini" \
    $sargs --report d --out d/report.md
  run 2 "--report d/front.dat: the same file as --csv d/front.dat" "$bs" search "$src/tests/search/search.ini" \
    $sargs --report d --csv d/front.dat
  [ -z "$(ls d)" ] || fail "files were written: $(ls d)" ;;
search_report_checked_first)
  # a file, a missing parent: refused before the search (exit 2), nothing made
  sargs="--set parallel.method=ring --set parallel.tp=1 --quiet"
  echo keep >f
  run 2 "--report f: exists and is not a directory" "$bs" search "$src/tests/search/search.ini" $sargs --report f \
    --out out.json
  [ "$(cat f)" = keep ] && [ ! -e out.json ] || fail "something was written"
  run 2 "--report nope/r: directory nope" "$bs" search "$src/tests/search/search.ini" $sargs --report nope/r
  [ ! -e nope ] || fail "nope was made" ;;
search_report_no_empty_png)
  # nothing fits (16M tokens): no front.png, not even an empty one, and the report says why
  run 1 "no configuration fits" "$bs" search "$src/tests/search/search.ini" --set parallel.method=ring \
    --set parallel.tp=1 --set workload.seq_len=16M --quiet --report d
  [ ! -e d/front.png ] || fail "front.png left ($(wc -c <d/front.png) bytes)"
  grep -q "nothing to plot" d/report.md || fail "report.md does not say why there is no plot" ;;
search_interrupted)
  # SIGINT during the first simulation (about 9 s): not "no configuration fits" but what was not
  # examined, on stderr, in report.md and in the JSON
  "$bs" search "$src/tests/search/search.ini" --quiet --set parallel.gpus=2048 --set workload.seq_len=8M \
    --set parallel.method=ring --set parallel.tp=1 --set workload.scope=layer --top 1 --top-only \
    --report d --out out.json >"$log" 2>&1 &
  pid=$!
  sleep 1
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
  grep -q "no configuration fits" "$log" && fail "an interrupted search says no configuration fits"
  grep -q "no configuration found before the interruption" "$log" || fail "stderr does not say nothing was found"
  grep -q "interrupted by SIGINT (Ctrl-C): [0-9]* of 3 candidates examined.*; 3 never examined" "$log" ||
    fail "stderr does not say what was not examined"
  grep -q "Partial: interrupted by SIGINT.*3 were never examined" d/report.md ||
    fail "report.md does not say it was interrupted"
  grep -q '"interrupted":[[:space:]]*true' out.json || fail "the JSON does not say it was interrupted" ;;
run_out_stdout_alone)
  mpi -np 2 "$bs" run "$src/tests/runtime/small.ini" --out - >out.json 2>err || fail "the run failed"
  is_json out.json || { cp out.json "$log"; fail "stdout is not the run JSON alone"; }
  grep -q "step_s" err || { cp err "$log"; fail "the table is not on stderr"; } ;;
calib_checked_first)
  echo x > file
  run 2 "--plots file: exists and is not a directory" "$bs" calib --quick --out p.json --plots file
  [ ! -e p.json ] || fail "p.json was created by the check"
  run 2 "--out nodir/p.json: directory nodir" "$bs" calib --quick --out nodir/p.json
  mkdir d
  run 2 "--out d: is a directory" "$bs" calib --quick --out d ;;
validate_out_is_scenario)
  cp "$src/tests/calib/ci.ini" v.ini; cp v.ini before.ini
  run 2 "--out v.ini: the same file as the scenario" "$bs" validate v.ini --out v.ini
  cmp -s v.ini before.ini || fail "the scenario was changed" ;;
bench_json_directory)
  mkdir d
  run 2 "--json d: is a directory" "$bs" bench kernels --quick --json d
  ! grep -q "^ *attn" "$log" || fail "the benchmark ran before the output was checked" ;;
*)
  echo "outputs.sh: unknown case '$case_'"; exit 2 ;;
esac
echo "outputs.sh $case_: ok"
