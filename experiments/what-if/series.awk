# series.awk: points.txt (method seq whatif step peers exposed compute status) -> gnuplot series
# under d: straggler-METHOD-SEQ.dat (factor, step / uniform step, wait_for_peers / step) and
# network-SEQ.dat (one row per method: slowdown under half-rate NICs, a failed NIC per node, and
# leaves of 4 nodes at 2:1, 4:1 and 8:1 against leaves of 4 at 1:1).
$8 == "ok" { step[$1, $2, $3] = $4; peers[$1, $2, $3] = $5; seqs[$2] = 1 }
END {
  n = split("burst ring usp tp", order, " ")
  split("1.1 1.25 1.5 2", fac, " ")
  for (s in seqs)
    for (i = 1; i <= n; i++) {
      k = order[i]
      if (!((k, s, "none") in step)) continue
      f = d "/straggler-" k "-" s ".dat"
      base = step[k, s, "none"]
      printf "1 1 %.6f\n", peers[k, s, "none"] / base > f
      for (j = 1; j <= 4; j++) {
        w = "straggler=17:" fac[j]
        if ((k, s, w) in step) printf "%s %.6f %.6f\n", fac[j], step[k, s, w] / base, peers[k, s, w] / step[k, s, w] > f
      }
      close(f)
      leaf = step[k, s, "oversub=1+nodes_per_leaf=4"]
      printf "%s %.6f %.6f %.6f %.6f %.6f\n", k, step[k, s, "degrade=nic:0.5"] / base,
             step[k, s, "failed_nics=all:1"] / base, step[k, s, "oversub=2+nodes_per_leaf=4"] / leaf,
             step[k, s, "oversub=4+nodes_per_leaf=4"] / leaf, step[k, s, "oversub=8+nodes_per_leaf=4"] / leaf > (d "/network-" s ".dat")
    }
}
