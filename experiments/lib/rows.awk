# rows.awk: turns `burstsim sim --csv` files into one tab-separated row per point, the columns the
# experiments' reports and gnuplot scripts read (byte and memory figures per rank, in GiB), so every
# run.sh parses the CSV the same way. Columns are read by name (lib/csv.awk, which must come first:
# awk -v tag=NAME -f csv.awk -f rows.awk points.csv ...; tag labels the sweep).
# Output columns: 1 tag, 2 method, 3 gpus, 4 seq_len, 5 layout, 6 double_ring, 7 topology,
# 8 profile, 9 step_s, 10 fwd_s, 11 bwd_s, 12 compute_s, 13 exposed_s, 14 exposed_pct,
# 15 intra GiB/rank, 16 inter GiB/rank, 17 peak GiB, 18 capacity GiB, 19 oom (0/1), 20 tp_variant,
# 21 lao, 22 zero, 23 phase, 24 scope, 25 heads, 26 causal, 27 status (ok, OOM, error), 28 error text
# ("-" when none), 29 kv_heads.
BEGIN { OFS = "\t"; gib = 1024 * 1024 * 1024 }
csv_row() {
  e = V["error"]
  gsub(/\t/, " ", e)
  g = V["gpus"] > 0 ? V["gpus"] : 1
  st = e != "" ? "error" : (V["oom"] == 1 ? "OOM" : "ok")
  pct = V["step_s"] > 0 ? 100 * V["comm_exposed_s"] / V["step_s"] : 0
  print tag, V["method"], V["gpus"], V["seq_len"], V["layout"], V["double_ring"], V["topology"], V["profile"],
        V["step_s"], V["fwd_s"], V["bwd_s"], V["compute_s"], V["comm_exposed_s"], sprintf("%.2f", pct),
        sprintf("%.6g", V["bytes_intra_node"] / g / gib), sprintf("%.6g", V["bytes_inter_node"] / g / gib),
        sprintf("%.6g", V["peak_bytes_max"] / gib), sprintf("%.2f", V["capacity_bytes"] / gib), V["oom"],
        V["tp_variant"], V["lao"], V["zero"], V["phase"], V["scope"], V["heads"], V["causal"], st,
        (e == "" ? "-" : e), V["kv_heads"]
}
