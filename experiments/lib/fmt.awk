# fmt.awk: number formatting shared by the experiments' report generators (awk -f fmt.awk -f ...):
# token counts as 128K / 1M, times in s / ms / us, so every report.md prints figures the same way.
function tok(n) {
  if (n >= 1048576 && n % 1048576 == 0) return (n / 1048576) "M"
  if (n >= 1024 && n % 1024 == 0) return (n / 1024) "K"
  return n
}
function tm(s) {
  if (s >= 1) return sprintf("%.3f s", s)
  if (s >= 1e-3) return sprintf("%.2f ms", s * 1e3)
  return sprintf("%.1f us", s * 1e6)
}
