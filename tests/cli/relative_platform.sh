#!/bin/sh
# relative_platform.sh BURSTSIM — a scenario's relative `topology = FILE.xml` names the file next
# to the scenario, whatever the current directory; one given by --set is taken relative to the
# current directory. A scenario reached through a symbolic link is next to its target: its relative
# files are found there, not next to the link.
bs=$1
expect_fail=$(cd "$(dirname "$0")/.." && pwd)/expect_fail.sh
fail() { echo "relative_platform: $*"; rm -rf "$d"; exit 1; }
d=$(mktemp -d) || exit 1
mkdir "$d/scen" "$d/elsewhere"
"$bs" topo host --gpus 2 >"$d/scen/plat.xml" || fail "topo host exited $?"
printf '[workload]\nseq_len = 4K\n[parallel]\nmethod = ring\ngpus = 2\n[cluster]\ntopology = plat.xml\nprofile = host\n' \
  >"$d/scen/rel.ini"
cd "$d/elsewhere" || fail "cd"
"$bs" sim ../scen/rel.ini --out out.json >sim.log 2>&1 || { cat sim.log; fail "sim from another directory exited non-zero"; }
grep -q '"topology":[[:space:]]*"../scen/plat.xml"' out.json || { cat out.json; fail "the result does not name ../scen/plat.xml"; }
grep -q '"error":[[:space:]]*"[^"]' out.json && { cat out.json; fail "the point failed"; }
grep -q '"step":[[:space:]]*[1-9]' out.json || { cat out.json; fail "the result has no step time"; }
# through --set the same name is relative to the current directory, where there is no such file
EXPECT_RC=2 sh "$expect_fail" 60 "cluster.topology: plat.xml: cannot read the platform file" \
  "$bs" sim ../scen/rel.ini --set cluster.topology=plat.xml || fail "--set plat.xml did not fail with exit 2 naming plat.xml"
# through a symlink in another directory: the platform next to the target, not next to the link
mkdir "$d/links" && ln -s ../scen/rel.ini "$d/links/rel.ini" || fail "ln -s"
"$bs" sim ../links/rel.ini --out link.json >link.log 2>&1 || { cat link.log; fail "sim through a symlink exited non-zero"; }
grep -q '"topology":[[:space:]]*"[^"]*/scen/plat.xml"' link.json || { cat link.json; fail "the result does not name scen/plat.xml"; }
grep -q '"step":[[:space:]]*[1-9]' link.json || { cat link.json; fail "the point through the symlink has no step time"; }
echo "relative_platform: the platform next to the scenario was used"
rm -rf "$d"
