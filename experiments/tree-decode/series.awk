# series.awk: splits tree-decode's points.tsv (lib/rows.awk columns) into the files plot.gp reads:
# d/kvKVH-METHOD-SEQ.dat (gpus step intra inter peak total-GiB/rank) and d/seq-kvKVH-METHOD-GPUS.dat
# (tokens step peak). Invalid points are skipped (report.md lists them).
# Usage: awk -F'\t' -v d=DIR -f lib/fmt.awk -f series.awk points.tsv
$27 != "error" {
  m = "kv" $29 "-" $2
  f = d "/" m "-" tok($4) ".dat"
  print $3, $9, $15, $16, $17, $15 + $16 >> f
  close(f)
  f = d "/seq-" m "-" $3 ".dat"
  print $4, $9, $17 >> f
  close(f)
}
