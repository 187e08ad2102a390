# comm-volume plot: backward bytes per rank and link class, burst vs ring (gnuplot; dat, png given with -e).
set terminal pngcairo size 900,500 noenhanced
set output png
set title "Backward bytes per rank (LLaMA-2-7B attention, 1M tokens, DGX A100)"
set xlabel "GPUs"
set ylabel "GiB per rank"
set logscale x 2
set key top right
set grid
plot dat using 1:2 with linespoints title "burst intra-node", \
     dat using 1:3 with linespoints title "burst inter-node", \
     dat using 1:4 with linespoints title "ring intra-node", \
     dat using 1:5 with linespoints title "ring inter-node"
