#!/bin/sh
# deterministic.sh sim|run BURSTSIM JSON_SAME SCENARIO MPIRUN... — the determinism tests.
#   sim: the same `burstsim sim` scenario twice, with OMP_NUM_THREADS=1 and =2, and its sweep
#        split over 2 MPI processes: every result JSON equal byte for byte once the wall-clock
#        and process-memory fields (sim.wall_s, sim.rss_bytes) are removed.
#   run: `burstsim run` on 2 ranks with 1 and 2 kernel threads per rank, and again with 1: the
#        fields deterministic by design (bytes per peer, memory peaks and breakdowns, the
#        configuration) equal; the measured times, the throughput derived from them and the
#        process RSS are removed.
set -u
mode=$1 bs=$2 same=$3 scen=$4; shift 4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
check() { "$same" "$@" || fail=1; }
case $mode in
  sim)
    "$bs" sim "$scen" --out "$dir/a.json" >/dev/null || { echo "deterministic: sim run 1 failed"; exit 1; }
    "$bs" sim "$scen" --out "$dir/b.json" >/dev/null || { echo "deterministic: sim run 2 failed"; exit 1; }
    OMP_NUM_THREADS=1 "$bs" sim "$scen" --out "$dir/t1.json" >/dev/null || { echo "deterministic: OMP_NUM_THREADS=1 failed"; exit 1; }
    OMP_NUM_THREADS=2 "$bs" sim "$scen" --out "$dir/t2.json" >/dev/null || { echo "deterministic: OMP_NUM_THREADS=2 failed"; exit 1; }
    "$@" -np 2 "$bs" sim "$scen" --out "$dir/mpi.json" >/dev/null || { echo "deterministic: the 2-process sweep failed"; exit 1; }
    for f in b t1 t2 mpi; do check "$dir/a.json" "$dir/$f.json" wall_s rss_bytes; done
    if grep -q '"error"' "$dir/a.json"; then echo "deterministic: some points failed (the sweep must be valid)"; fail=1; fi
    ;;
  run)
    for t in 1 2 1b; do
      "$@" -np 2 "$bs" run "$scen" --threads "${t%b}" --out "$dir/r$t.json" >/dev/null ||
        { echo "deterministic: burstsim run --threads ${t%b} failed"; exit 1; }
    done
    drop="time_s step fwd bwd compute comm_exposed rss_bytes threads_per_rank wall_s throughput"
    # shellcheck disable=SC2086
    { check "$dir/r1.json" "$dir/r2.json" $drop; check "$dir/r1.json" "$dir/r1b.json" $drop; }
    grep -q '"sent_to"' "$dir/r1.json" || { echo "deterministic: the run JSON has no bytes per peer"; fail=1; }
    ;;
  *) echo "usage: deterministic.sh sim|run BURSTSIM JSON_SAME SCENARIO MPIRUN..."; exit 2 ;;
esac
[ $fail -eq 0 ] && echo "deterministic: $mode results identical"
exit $fail
