# series.awk: splits scaling's points.tsv (lib/rows.awk columns) into the small files plot.gp reads:
# per GPU count, d/TAG-METHOD-LAYOUT-DOUBLERING-SEQ.dat (gpus step exposed% intra inter peak), and per
# sequence length, d/seq-TAG-METHOD-LAYOUT-GPUS.dat (tokens step peak). Invalid points are skipped
# (report.md lists them). Usage: awk -F'\t' -v d=DIR -f lib/fmt.awk -f series.awk points.tsv
$27 != "error" {
  f = d "/" $1 "-" $2 "-" $5 "-" $6 "-" tok($4) ".dat"
  print $3, $9, $14, $15, $16, $17 >> f
  close(f)
  f = d "/seq-" $1 "-" $2 "-" $5 "-" $3 ".dat"
  print $4, $9, $17 >> f
  close(f)
}
