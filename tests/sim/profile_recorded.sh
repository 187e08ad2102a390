#!/bin/sh
# profile_recorded.sh BURSTSIM SCENARIO PROFILE OUTDIR — `sim --profile FILE` records FILE (as
# given) as each point's profile in the JSON and the CSV, for a plain point and one run through
# the layer shortcut (workload.scope = model), not the scenario's cluster.profile.
bs=$1; scenario=$2; profile=$3; dir=$4
mkdir -p "$dir" || exit 1
rm -f "$dir/out.json" "$dir/out.csv"
"$bs" sim "$scenario" --profile "$profile" --set parallel.gpus=16 --set parallel.method=burst \
  --set workload.scope=attention,model --out "$dir/out.json" --csv "$dir/out.csv" >"$dir/log" 2>&1
rc=$?
cat "$dir/log"
if [ "$rc" -ne 0 ]; then echo "profile_recorded: sim exited $rc"; exit 1; fi
n=$(grep -c "\"profile\":[[:space:]]*\"$profile\"" "$dir/out.json")
if [ "$n" -ne 2 ]; then echo "profile_recorded: $n of 2 points in out.json name $profile"; exit 1; fi
n=$(grep -c ",$profile," "$dir/out.csv")
if [ "$n" -ne 2 ]; then echo "profile_recorded: $n of 2 rows in out.csv name $profile"; exit 1; fi
if grep -q "a100-sxm4-80gb" "$dir/out.csv"; then echo "profile_recorded: out.csv names the scenario's profile"; exit 1; fi
echo "profile_recorded: both points record $profile"
