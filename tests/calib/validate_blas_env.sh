#!/bin/sh
# validate_blas_env.sh BURSTSIM SCENARIO PROFILE — validate forks its simulations without an OpenBLAS
# thread pool (OPENBLAS_NUM_THREADS=1 in its own process), while the mpirun it starts gets back
# the user's OPENBLAS_NUM_THREADS (set or unset). A stand-in mpirun records both and fails, so
# validate must also exit non-zero.
bs=$1; scenario=$2; profile=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/mpirun" <<'EOS'
#!/bin/sh
{ echo "mpirun=${OPENBLAS_NUM_THREADS-unset}"
  tr '\0' '\n' < "/proc/$PPID/environ" | grep '^OPENBLAS_NUM_THREADS=' | sed 's/^OPENBLAS_NUM_THREADS=/validate=/'
} > "$(dirname "$0")/seen"
exit 1
EOS
chmod +x "$dir/mpirun"
check() { # GIVEN EXPECTED_MPIRUN
  rm -f "$dir/seen"
  if [ "$1" = unset ]; then
    env -u OPENBLAS_NUM_THREADS PATH="$dir:$PATH" "$bs" validate "$scenario" --np 2 --profile "$profile" >"$dir/out" 2>&1
  else
    env OPENBLAS_NUM_THREADS="$1" PATH="$dir:$PATH" "$bs" validate "$scenario" --np 2 --profile "$profile" >"$dir/out" 2>&1
  fi
  rc=$?
  [ "$rc" -ne 0 ] || { cat "$dir/out"; echo "validate_blas_env: validate exited 0 though mpirun failed"; exit 1; }
  [ -f "$dir/seen" ] || { cat "$dir/out"; echo "validate_blas_env: the stand-in mpirun never ran"; exit 1; }
  grep -qx "mpirun=$2" "$dir/seen" || { cat "$dir/seen"; echo "validate_blas_env: mpirun should see $2 (given $1)"; exit 1; }
  grep -qx "validate=1" "$dir/seen" || { cat "$dir/seen"; echo "validate_blas_env: validate itself kept a BLAS pool (given $1)"; exit 1; }
}
check 3 3
check unset unset
check 1 1
echo "validate_blas_env: validate runs with one BLAS thread; mpirun sees the user's setting"
