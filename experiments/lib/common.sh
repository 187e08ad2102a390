# Sourced by experiments/*/run.sh once BURSTSIM, OUT and HERE are set: the output folders
# (OUT, and OUT/dat emptied for the gnuplot series) and one sweep of the simulator.
LIB=$HERE/../lib
mkdir -p "$OUT"
rm -rf "$OUT/dat" && mkdir -p "$OUT/dat"

# One sweep: NAME INI [--set ...] writes OUT/NAME.csv, the table (NAME.txt) and stderr (NAME.log);
# points a method cannot run are rows of the CSV, not failures.
sweep() {
  name=$1
  shift
  "$BURSTSIM" sim "$@" --csv "$OUT/$name.csv" > "$OUT/$name.txt" 2> "$OUT/$name.log"
}
