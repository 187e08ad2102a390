# rows.awk: turns `burstsim sim --csv` files into one tab-separated row per point, the columns the
# experiments' reports and gnuplot scripts read (byte and memory figures per rank, in GiB), so every
# run.sh parses the CSV the same way. The error text may hold commas: it is everything after the
# 34th comma up to the last two columns. Usage: awk -v tag=NAME -f rows.awk points.csv ...   (tag labels the sweep)
# Output columns: 1 tag, 2 method, 3 gpus, 4 seq_len, 5 layout, 6 double_ring, 7 topology,
# 8 profile, 9 step_s, 10 fwd_s, 11 bwd_s, 12 compute_s, 13 exposed_s, 14 exposed_pct,
# 15 intra GiB/rank, 16 inter GiB/rank, 17 peak GiB, 18 capacity GiB, 19 oom (0/1), 20 tp_variant,
# 21 lao, 22 zero, 23 phase, 24 scope, 25 heads, 26 causal, 27 status (ok, OOM, error), 28 error text
# ("-" when none), 29 kv_heads.
BEGIN { FS = ","; OFS = "\t"; gib = 1024 * 1024 * 1024 }
FNR == 1 { next }
{
  e = $0
  for (i = 0; i < 34; i++) e = substr(e, index(e, ",") + 1)
  sub(/,[^,]*,[^,]*$/, "", e) # columns 36 and 37 (wait_for_peers_s, whatif) follow it, without commas
  gsub(/^"|"$/, "", e)
  gsub(/\t/, " ", e)
  g = $2 > 0 ? $2 : 1
  st = e != "" ? "error" : ($32 == 1 ? "OOM" : "ok")
  pct = $21 > 0 ? 100 * $25 / $21 : 0
  print tag, $1, $2, $3, $8, $9, $19, $20, $21, $22, $23, $24, $25, sprintf("%.2f", pct),
        sprintf("%.6g", $28 / g / gib), sprintf("%.6g", $29 / g / gib), sprintf("%.6g", $30 / gib),
        sprintf("%.2f", $31 / gib), $32, $13, $10, $14, $5, $6, $16, $7, st, (e == "" ? "-" : e), $17
}
