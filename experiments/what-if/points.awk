# points.awk: one what-if CSV as run.sh's rows: method, seq_len, whatif (spaces as '+'), step_s,
# wait_for_peers_s, comm_exposed_s, compute_s, status (ok or error). Needs lib/csv.awk.
csv_row() {
  w = V["whatif"]
  gsub(/ /, "+", w)
  print V["method"], V["seq_len"], w, V["step_s"], V["wait_for_peers_s"], V["comm_exposed_s"], V["compute_s"],
        (V["status"] == "ok" ? "ok" : "error")
}
