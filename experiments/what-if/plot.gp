# what-if plots (gnuplot): step slowdown against the straggler's factor per method, and the
# slowdown of each network what-if per method, at 128K and 1M tokens, from the files series.awk
# writes. Call with -e "d='DATDIR'; o='OUTDIR'".
set terminal pngcairo size 1100,520 noenhanced
set grid
f(m, s) = sprintf("%s/straggler-%s-%s.dat", d, m, s)

set output o."/straggler.png"
set multiplot layout 1,2 title "One straggler GPU (rank 17 of 128 DGX A100 GPUs), attention layer training"
set xlabel "straggler's compute slowdown (x)"
set ylabel "step time / uniform step time"
set xrange [0.95:2.05]
set key left top
do for [s in "131072 1048576"] {
  set title (s eq "131072" ? "128K tokens" : "1M tokens")
  plot x w l lc rgb "#999999" dt 3 t "y = x", \
       f("burst", s) u 1:2 w lp lc 1 pt 7 t "burst", f("ring", s) u 1:2 w lp lc 2 pt 5 t "ring", \
       f("usp", s) u 1:2 w lp lc 3 pt 9 t "usp", f("tp", s) u 1:2 w lp lc 4 pt 11 t "tp"
}
unset multiplot

set output o."/network.png"
set multiplot layout 1,2 title "Network what-ifs, 128 DGX A100 GPUs: step time / step time without it"
set xlabel ""
set xrange [*:*]
set yrange [0.9:*]
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set key below horizontal
do for [s in "131072 1048576"] {
  set title (s eq "131072" ? "128K tokens" : "1M tokens")
  plot sprintf("%s/network-%s.dat", d, s) u 2:xtic(1) t "NICs at half rate", "" u 3 t "a failed NIC per node", \
       "" u 4 t "leaves of 4, 2:1", "" u 5 t "leaves of 4, 4:1", "" u 6 t "leaves of 4, 8:1"
}
unset multiplot
