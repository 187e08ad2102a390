# series.awk: splits burst-paper's points.tsv (lib/rows.awk columns) into the files plot.gp reads:
# d/PHASE-hHEADS-gGPUS-LABEL.dat (tokens step peak-GiB oom), LABEL naming the variant (label.awk).
# Invalid points are skipped (report.md lists them).
# Usage: awk -F'\t' -v d=DIR -f lib/fmt.awk -f label.awk -f series.awk points.tsv
$27 != "error" {
  f = d "/" $23 "-h" $25 "-g" $3 "-" label() ".dat"
  print $4, $9, $17, $19 >> f
  close(f)
}
