# label.awk: the name of a burst-paper variant from a lib/rows.awk row (tp-v1, tp-v3, ring-li2021,
# burst, burst-laooff, burst-zigzag, ..., -zero3), shared by series.awk and report.awk.
function label(   s) {
  s = $2
  if ($2 == "tp") s = s "-" $20
  if ($2 == "burst") s = s ($21 == 1 ? "" : "-laooff") ($5 == "zigzag" ? "-zigzag" : "")
  if ($22 > 0) s = s "-zero" $22
  return s
}
