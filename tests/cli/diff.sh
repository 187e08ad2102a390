#!/bin/sh
# diff.sh BURSTSIM SRCDIR CASE — burstsim diff against figures read apart from it: each case
# simulates two result files (--out) and their CSV (--csv, the same figures by column name), and
# every row diff prints (A, B, B - A, change) must equal what awk computes from the two CSVs, row
# by row, pair by pair. Cases: profiles (two 2-point sweeps under two profiles: two pairs, setting
# profile), gpus (one point at 32 and one at 64 GPUs), unpaired (32,64 against 64,128: one pair and
# one unpaired point each side), json (--out: the JSON's deltas equal the CSVs' too), nopair (no
# point pairs: exit 2 naming the settings that must agree).
bs=$1; src=$2; case=$3
q="$src/experiments/quickstart.ini"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "diff.sh $case: $*"; exit 1; }
sim() { # sim NAME --set ...
  name=$1; shift
  "$bs" sim "$q" --quiet --set parallel.method=burst --set workload.seq_len=256K "$@" \
    --out "$tmp/$name.json" --csv "$tmp/$name.csv" >/dev/null || fail "sim $name failed"
}
# The CSV columns of each label diff prints.
cols='step=step_s
compute attn_fwd=explain_attn_fwd_s
compute attn_bwd=explain_attn_bwd_s
compute merge=explain_merge_s
compute gemm=explain_gemm_s
compute elemwise=explain_elemwise_s
compute other=explain_other_compute_s
launches=explain_launch_s
exposed nvlink=explain_nvlink_s
exposed pcie=explain_pcie_s
exposed shm=explain_shm_s
exposed network=explain_network_s
exposed other=explain_other_link_s
waiting for peers=explain_wait_for_peers_s
bytes intra-node=bytes_intra_node
bytes inter-node=bytes_inter_node
bytes tp group/rank=bytes_tp
bytes cp group/rank=bytes_cp
bytes dp group/rank=bytes_dp
bytes pp group/rank=bytes_pp
peak memory=peak_bytes_max'
printf '%s\n' "$cols" > "$tmp/cols"
# check TABLE: every figure row against the CSVs; prints "pairs N rows M".
check() {
  awk -v acsv="$tmp/a.csv" -v bcsv="$tmp/b.csv" -v colsf="$tmp/cols" '
    function readcsv(f, tab,   line, n, i, h, r, x) {
      r = 0
      while ((getline line < f) > 0) {
        n = split(line, x, ",")
        if (r == 0) { for (i = 1; i <= n; i++) h[i] = x[i] }
        else for (i = 1; i <= n; i++) tab[r, h[i]] = x[i]
        r++
      }
    }
    function near(got, want, tol) { d = got - want; if (d < 0) d = -d; return d <= tol }
    BEGIN {
      readcsv(acsv, A); readcsv(bcsv, B)
      while ((getline line < colsf) > 0) { split(line, x, "="); col[x[1]] = x[2] }
    }
    /^A\[[0-9]+\] / { match($0, /^A\[[0-9]+\]/); ia = substr($0, 3, RLENGTH - 3)
                      match($0, /vs B\[[0-9]+\]/); ib = substr($0, RSTART + 5, RLENGTH - 6); pairs++; next }
    /^  .* \((ms|B)\) / {
      lab = $0; sub(/^  /, "", lab); sub(/ \((ms|B)\).*/, "", lab)
      ms = ($0 ~ /\(ms\)/); rest = $0; sub(/^.*\((ms|B)\) +/, "", rest); split(rest, v, / +/)
      c = col[lab]; if (c == "") { print "unknown row " lab; bad = 1; next }
      s = ms ? 1000 : 1; a = A[ia, c] * s; b = B[ib, c] * s; tol = ms ? 0.00051 + 1e-7 * (a < 0 ? -a : a) : 0.5
      if (!near(v[1], a, tol) || !near(v[2], b, tol) || !near(v[3], b - a, 2 * tol)) {
        print "pair " ia "/" ib " " lab ": printed " v[1] " " v[2] " " v[3] ", the CSVs give " a " " b " " b - a; bad = 1 }
      if (a != 0) { want = 100 * (b - a) / a; g = v[4]; sub(/%/, "", g)
        if (!near(g, want, 0.051)) { print "pair " ia "/" ib " " lab ": change " v[4] ", the CSVs give " want; bad = 1 } }
      rows++
    }
    END { print "pairs " pairs+0 " rows " rows+0; if (rows == 0) bad = 1; exit bad }' "$1"
}
case "$case" in
  profiles)
    sim a --set parallel.gpus=32,64 --set cluster.profile=a100-sxm4-80gb
    sim b --set parallel.gpus=32,64 --set cluster.profile=h100-sxm
    "$bs" diff "$tmp/a.json" "$tmp/b.json" > "$tmp/t" || fail "diff failed"
    cat "$tmp/t"
    got=$(check "$tmp/t") || fail "$got"
    [ "$(printf '%s\n' "$got" | tail -n 1 | awk '{ print $2 }')" = 2 ] || fail "not two pairs: $got"
    [ "$(grep -c '^  setting profile: a100-sxm4-80gb -> h100-sxm$' "$tmp/t")" = 2 ] || fail "the profile setting is not named twice"
    grep -q '^A\[2\] (burst, 64 GPUs, seq 262144) vs B\[2\]$' "$tmp/t" || fail "A[2] does not pair with B[2]"
    grep -q unpaired "$tmp/t" && fail "a point is unpaired"
    ;;
  gpus)
    sim a --set parallel.gpus=32
    sim b --set parallel.gpus=64
    "$bs" diff "$tmp/a.json" "$tmp/b.json" > "$tmp/t" || fail "diff failed"
    cat "$tmp/t"
    got=$(check "$tmp/t") || fail "$got"
    grep -q '^  setting gpus: 32 -> 64$' "$tmp/t" || fail "gpus is not named"
    grep -q '^  setting parallel.cp: 32 -> 64$' "$tmp/t" || fail "parallel.cp is not named"
    grep -q '^  step (ms) ' "$tmp/t" || fail "no step row"
    ;;
  unpaired)
    sim a --set parallel.gpus=32,64
    sim b --set parallel.gpus=64,128
    "$bs" diff "$tmp/a.json" "$tmp/b.json" > "$tmp/t" || fail "diff failed"
    cat "$tmp/t"
    got=$(check "$tmp/t") || fail "$got"
    grep -q '^A\[2\] (burst, 64 GPUs, seq 262144) vs B\[1\]$' "$tmp/t" || fail "A[2] does not pair with B[1]"
    grep -q '^unpaired: A\[1\] (burst, 32 GPUs' "$tmp/t" || fail "A[1] is not listed unpaired"
    grep -q '^unpaired: B\[2\] (burst, 128 GPUs' "$tmp/t" || fail "B[2] is not listed unpaired"
    ;;
  json)
    sim a --set parallel.gpus=32 --set cluster.profile=a100-sxm4-80gb
    sim b --set parallel.gpus=32 --set cluster.profile=h100-sxm
    "$bs" diff "$tmp/a.json" "$tmp/b.json" --out "$tmp/d.json" > "$tmp/t" || fail "diff failed"
    # the JSON's figures as table rows (times in ms), checked the same way
    awk '/"(time_s|explain|comm_bytes|memory)\.[a-z_.]*":/ { p = $1; gsub(/[":]/, "", p) }
      /"unit":/ { u = $2; gsub(/[",]/, "", u) }
      /"a":/ && p != "" { a = $2; sub(/,/, "", a) }
      /"b":/ && p != "" { b = $2; sub(/,/, "", b) }
      /"delta":/ && p != "" { d = $2; sub(/,/, "", d) }
      /"relative":/ && p != "" { r = $2; sub(/,/, "", r); s = (u == "s") ? 1000 : 1
        printf "%s %s %.17g %.17g %.17g %s\n", p, u, a * s, b * s, d * s, r; p = "" }' "$tmp/d.json" > "$tmp/j"
    grep -q '"mode":	"diff"' "$tmp/d.json" || fail "no mode diff in the JSON"
    grep -q '"profile":' "$tmp/d.json" || fail "the JSON lacks the profile setting"
    [ -s "$tmp/j" ] || fail "no figures in the JSON"
    # every JSON figure: delta = b - a and relative = delta / a; and the step equals the CSVs'
    awk '{ if ($5 - ($4 - $3) > 1e-6 * (1 + ($3 < 0 ? -$3 : $3)) || ($4 - $3) - $5 > 1e-6 * (1 + ($3 < 0 ? -$3 : $3))) { print "delta " $0; bad = 1 }
           if ($3 != 0) { w = ($4 - $3) / $3; if ($6 - w > 1e-9 || w - $6 > 1e-9) { print "relative " $0; bad = 1 } } }
         END { exit bad }' "$tmp/j" || fail "the JSON's deltas disagree"
    sa=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "step_s") c = i } NR == 2 { print $c * 1000 }' "$tmp/a.csv")
    sb=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "step_s") c = i } NR == 2 { print $c * 1000 }' "$tmp/b.csv")
    awk -v sa="$sa" -v sb="$sb" '$1 == "time_s.step" { d = $5 - (sb - sa); if (d < 0) d = -d; exit !(d < 1e-3) }' "$tmp/j" ||
      fail "the JSON's step delta is not the CSVs' ($sa, $sb)"
    ;;
  nopair)
    sim a --set parallel.gpus=32,64
    sim b --set parallel.gpus=128,256
    "$bs" diff "$tmp/a.json" "$tmp/b.json" > "$tmp/t" 2> "$tmp/e"
    rc=$?
    cat "$tmp/t" "$tmp/e"
    [ "$rc" = 2 ] || fail "exit $rc, not 2"
    grep -q 'burstsim diff: no point of A pairs with a point of B; .* gpus ' "$tmp/e" || fail "no clear message"
    ;;
  *) fail "no such case" ;;
esac
echo "diff.sh $case: ok"
