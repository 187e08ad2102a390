#!/bin/sh
# json_same_detects.sh JSON_SAME — the comparer itself: a value changed in the 10th digit is a
# difference (exit 1, showing where), a value under a removed key is not (exit 0), and a file that
# is not JSON is bad input (exit 2, naming the file).
same=$1
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
printf '{"a":1,"w":2}' >"$d/js1.json"
printf '{"a":1.0000000001,"w":2}' >"$d/js2.json"
printf '{"a":1,"w":3}' >"$d/js3.json"
printf '{"a":' >"$d/broken.json"
ef=$(dirname "$0")/../expect_fail.sh
EXPECT_RC=1 sh "$ef" 10 "differ at byte" "$same" "$d/js1.json" "$d/js2.json" w || exit 1
EXPECT_RC=2 sh "$ef" 10 "broken.json: not valid JSON" "$same" "$d/js1.json" "$d/broken.json" || exit 1
"$same" "$d/js1.json" "$d/js3.json" w || { echo "json_same_detects: a removed key still compared"; exit 1; }
echo "json_same_detects: differences found, removed keys ignored, bad input refused"
