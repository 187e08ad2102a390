#!/bin/sh
# validate_hostile.sh CASE BURSTSIM SOURCE_DIR — `burstsim validate` on hostile paths, signals and
# failed points, with a stand-in mpirun first on PATH (no MPI job runs, so each case takes seconds):
# its calib copies calib/profiles/host.json to the --out profile, its run simulates the points
# (burstsim sim with the same scenario and --set) as the measured results. FAKE_RUN=fail marks each
# measured point as failed; FAKE_RUN=hang leaves a child that sleeps (named by a unique marker).
# Each case checks the exit status, the message and the files afterwards.
case_=$1; bs=$2; src=$3
scen=$src/tests/calib/ci.ini
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/mpirun" <<'EOS'
#!/bin/sh
# stand-in: skip mpirun's own options up to the burstsim executable, then act as its command
while [ $# -gt 0 ] && [ "$1" != "${BS_EXE}" ]; do shift; done
shift
cmd=$1; shift
out=""; prev=""
for a in "$@"; do
  [ "$prev" = "--out" ] && out=$a
  prev=$a
done
case "$cmd" in
  calib) cp "$BS_SRC/calib/profiles/host.json" "$out" ;;
  run)
    if [ "${FAKE_RUN:-}" = hang ]; then
      sh -c 'sleep 300; :' "validate-hostile-child-$BS_MARK" &
      wait
      exit 1
    fi
    scen=$1; shift
    n=$#; skip=0
    for a in "$@"; do # the same arguments less run's --warmup N
      if [ $skip = 1 ]; then skip=0; elif [ "$a" = --warmup ]; then skip=1; else set -- "$@" "$a"; fi
    done
    shift "$n"
    "$BS_EXE" sim "$scen" "$@" || exit 1
    if [ "${FAKE_RUN:-}" = fail ]; then
      sed 's/"status":[[:space:]]*"ok",/"status": "ok", "error": "injected failure",/' "$out" > "$out.x" && mv "$out.x" "$out"
    fi ;;
  *) exit 1 ;;
esac
EOS
chmod +x "$dir/mpirun"
export PATH="$dir:$PATH" BS_EXE="$bs" BS_SRC="$src" BS_MARK="$$-$(date +%s%N)"
fail() {
  cat "$dir/log" 2>/dev/null
  for p in $(pgrep -f "validate-hostile-child-$BS_MARK"); do pkill -P "$p"; kill "$p"; done
  echo "validate_hostile $case_: $*"; exit 1; }
run() { # RC_EXPECTED PATTERN ARGS... : validate's exit status and a line of its output
  want=$1; pat=$2; shift 2
  timeout 120 "$bs" validate "$scen" --np 2 "$@" >"$dir/log" 2>&1
  rc=$?
  [ "$rc" -eq "$want" ] || fail "exit $rc, expected $want"
  grep -q -- "$pat" "$dir/log" || fail "output lacks '$pat'"
}
case "$case_" in
  out_is_work_profile) # --out naming the profile the calibration writes in --workdir
    mkdir "$dir/wd"
    run 2 "is a file of the work directory" --workdir "$dir/wd" --out "$dir/wd/profile-g2.json"
    [ ! -e "$dir/wd/profile-g2.json" ] || fail "a profile was written though the output was refused"
    run 2 "is a file of the work directory" --workdir "$dir/wd" --out "$dir/wd/../wd/run-g2-1.json"
    run 2 "is a file of the work directory" --workdir "$dir/wd" --out "$dir/wd/calib-g2.log"
    # another name in the work directory is fine, and holds the entries afterwards
    run 0 "targets" --workdir "$dir/wd" --out "$dir/wd/validate.json"
    grep -q '"entries"' "$dir/wd/validate.json" || fail "validate.json lacks its entries"
    grep -q '"mode":[[:space:]]*"validate"' "$dir/wd/validate.json" || fail "validate.json is not validate's"
    grep -q '"tool"' "$dir/wd/profile-g2.json" || grep -q 'host' "$dir/wd/profile-g2.json" \
      || fail "the calibrated profile was overwritten" ;;
  no_point_compared) # every measured point failed: nothing was validated, exit 1 with a message
    FAKE_RUN=fail run 1 "none of the 2 point(s) could be compared" --workdir "$dir/wd" --out "$dir/v.json"
    grep -q "0 of 2 point(s) ran" "$dir/log" || fail "the summary line is missing"
    grep -q '"ran":[[:space:]]*0' "$dir/v.json" || fail "v.json lacks its summary"
    FAKE_RUN= run 0 "2 of 2 point(s) ran" --workdir "$dir/wd2" ;;
  profile_name) # --profile takes a profile name as sim does
    run 0 "2 of 2 point(s) ran" --profile host --workdir "$dir/wd"
    [ ! -e "$dir/wd/profile-g2.json" ] || fail "a profile was calibrated though --profile was given"
    run 2 "unknown profile 'no-such-name'" --profile no-such-name ;;
  workdir_is_file) # --workdir naming a regular file: exit 2 naming it, the file unchanged
    printf 'keep\n' > "$dir/file"
    run 2 "--workdir $dir/file: exists and is not a directory" --workdir "$dir/file"
    [ "$(cat "$dir/file")" = keep ] || fail "the file given as --workdir changed" ;;
  signal_ends_children) # SIGTERM and SIGINT reach the mpirun job's process group; validate waits, exits 128+N
    # validate runs in the foreground (a background job of a script ignores SIGINT); a helper sends
    # the signal once the stand-in job's child runs, found by the unique marker in its arguments
    for sig in TERM INT; do
      (
        i=0
        until pgrep -f "validate-hostile-child-$BS_MARK" >/dev/null; do
          i=$((i + 1)); [ $i -lt 600 ] || exit 1; sleep 0.1
        done
        kill -s $sig $(pgrep -f -- "^$bs validate $scen --np 2 --profile $src/calib/profiles/host.json --workdir $dir/wd-$sig")
      ) &
      start=$(date +%s)
      FAKE_RUN=hang timeout 60 "$bs" validate "$scen" --np 2 --profile "$src/calib/profiles/host.json" --workdir "$dir/wd-$sig" >"$dir/log" 2>&1
      rc=$?
      wait
      sleep 0.5
      if pgrep -f "validate-hostile-child-$BS_MARK" >/dev/null; then
        fail "a child of the mpirun job outlived validate (SIG$sig)"
      fi
      want=$([ $sig = TERM ] && echo 143 || echo 130)
      [ $rc -eq "$want" ] || fail "exit $rc after SIG$sig, expected $want"
      grep -q "stopped by SIG$sig" "$dir/log" || fail "no message naming SIG$sig"
      [ $(($(date +%s) - start)) -lt 30 ] || fail "validate took 30 s or more to end after SIG$sig"
    done ;;
  out_stdout_alone) # --out -: stdout holds the entries JSON alone, the table goes to stderr
    timeout 120 "$bs" validate "$scen" --np 2 --workdir "$dir/wd" --out - >"$dir/out.json" 2>"$dir/log" \
      || fail "validate --out - failed"
    [ "$(head -c 1 "$dir/out.json")" = "{" ] && [ "$(tail -n 1 "$dir/out.json")" = "}" ] \
      || { cat "$dir/out.json"; fail "stdout is not the JSON alone"; }
    grep -q '"entries"' "$dir/out.json" || fail "the JSON lacks its entries"
    grep -q "step_meas" "$dir/log" || fail "the table is not on stderr" ;;
  *) fail "unknown case" ;;
esac
echo "validate_hostile $case_: ok"
