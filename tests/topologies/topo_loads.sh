#!/bin/sh
# topo_loads.sh BURSTSIM SCENARIO — what `burstsim topo NAME` prints loads back: each generator's
# XML, written to a file and given as cluster.topology = FILE.xml with the generator's profile,
# predicts the same step (the table `sim` prints) as the generator named directly, under each
# engine that runs it (a generator and a file may default to different engines, so each is named).
bs=$1 ini=$2
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "topo_loads: $*"
  exit 1
}
# NAME NODES GPUS PROFILE ENGINES [topo flags] (the host's shared CPU needs SimGrid)
for c in "dgx-a100 2 16 a100-sxm4-80gb simgrid,direct" "dgx-h100 2 16 h100-sxm simgrid,direct" \
  "a100-pcie-node 2 16 a100-pcie-40gb simgrid,direct" "host 1 2 host simgrid --gpus 2"; do
  # shellcheck disable=SC2086
  set -- $c
  name=$1 nodes=$2 gpus=$3 profile=$4 engines=$(echo "$5" | tr , ' ')
  shift 5
  xml=$dir/$name.xml
  "$bs" topo "$name" --nodes "$nodes" --profile "$profile" "$@" >"$xml" || fail "topo $name exited $?"
  hosts=$gpus
  [ "$name" = host ] && hosts=1
  [ "$(grep -c '<host ' "$xml")" -eq "$hosts" ] || fail "topo $name --nodes $nodes: not $hosts hosts"
  for engine in $engines; do
    sets="--set parallel.gpus=$gpus --set cluster.profile=$profile --set cluster.nodes=$nodes --engine $engine"
    # shellcheck disable=SC2086
    "$bs" sim "$ini" $sets --set cluster.topology="$name" >"$dir/by-name.txt" 2>"$dir/err" ||
      fail "sim with topology $name ($engine) exited $?: $(cat "$dir/err")"
    # shellcheck disable=SC2086
    "$bs" sim "$ini" $sets --set cluster.topology="$xml" >"$dir/by-file.txt" 2>"$dir/err" ||
      fail "sim with the XML of topo $name ($engine) exited $?: $(cat "$dir/err")"
    grep -q "^burst " "$dir/by-file.txt" || fail "sim with the XML of topo $name ($engine) printed no step"
    cmp -s "$dir/by-name.txt" "$dir/by-file.txt" ||
      fail "topo $name ($engine): the XML predicts otherwise than the generator: $(diff "$dir/by-name.txt" "$dir/by-file.txt")"
  done
  echo "topo_loads: $name: the printed XML loads and predicts the same ($engines)"
done
