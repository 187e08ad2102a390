# csv.awk: reads `burstsim sim --csv` files by column name, for the experiments' report generators
# (awk -f lib/csv.awk -f report.awk A.csv B.csv ...). csv_fields splits one record (RFC 4180:
# quoted fields, doubled quotes) into f[1..n]; csv_row() fills V[name] for the current record of
# any file, the names taken from that file's first line. Settings a point has no value for (a
# refused or failed point's figures) are empty strings.
function csv_fields(s, f,   n, i, c, q, cur) {
  n = 0; cur = ""; q = 0
  for (i = 1; i <= length(s); i++) {
    c = substr(s, i, 1)
    if (q) {
      if (c == "\"" && substr(s, i + 1, 1) == "\"") { cur = cur c; i++ }
      else if (c == "\"") q = 0
      else cur = cur c
    } else if (c == "\"") q = 1
    else if (c == ",") { f[++n] = cur; cur = "" }
    else cur = cur c
  }
  f[++n] = cur
  return n
}
# 1 for a data record (V filled), 0 for a header (the names of this file's columns kept).
function csv_row(   n, i, f) {
  n = csv_fields($0, f)
  if (FNR == 1) {
    delete COL
    for (i = 1; i <= n; i++) COL[i] = f[i]
    NCOL = n
    return 0
  }
  delete V
  for (i = 1; i <= n && i <= NCOL; i++) V[COL[i]] = f[i]
  return 1
}
