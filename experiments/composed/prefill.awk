# prefill.awk: the 405B prefill sweep as gnuplot data: nodes, time, ideal scaling from one node
# (ok points only). Usage: awk -f lib/csv.awk -f prefill.awk meta.csv > meta.dat
csv_row() && V["status"] == "ok" {
  n = V["gpus"] / 8
  if (n == 1) t1 = V["step_s"]
  print n, V["step_s"], (t1 != "" ? t1 / n : V["step_s"])
}
