# scaling plots (gnuplot): step time, exposed communication, bytes per link class, peak memory,
# double ring and causal layouts, from the series files series.awk writes. Call with
# -e "d='DATDIR'; o='OUTDIR'; cap=CAPACITY_GIB".
set terminal pngcairo size 900,520 noenhanced
set grid
set logscale x 2
set key outside right top
set format y "%g"
f(t, m, l, r, n) = sprintf("%s/%s-%s-%s-%s-%s.dat", d, t, m, l, r, n)
s(t, m, l, g) = sprintf("%s/seq-%s-%s-%s-%d.dat", d, t, m, l, g)

set output o."/step.png"
set title "Train step, one LLaMA-2-7B attention layer, 1M tokens, causal"
set xlabel "GPUs"
set ylabel "step time (s)"
set logscale y
plot f("a100","burst","zigzag","auto","1M") u 1:2 w lp lc 1 pt 7 t "burst A100", \
     f("a100","ring","zigzag","auto","1M") u 1:2 w lp lc 2 pt 7 t "ring A100", \
     f("a100","usp","contiguous","auto","1M") u 1:2 w lp lc 3 pt 7 t "usp A100", \
     f("a100","ulysses","contiguous","auto","1M") u 1:2 w lp lc 4 pt 9 ps 1.5 t "ulysses A100", \
     f("a100","tp","contiguous","auto","1M") u 1:2 w lp lc 7 pt 11 ps 1.5 t "tp v1 A100", \
     f("h100","burst","zigzag","auto","1M") u 1:2 w lp lc 1 dt 2 pt 6 t "burst H100", \
     f("h100","ring","zigzag","auto","1M") u 1:2 w lp lc 2 dt 2 pt 6 t "ring H100", \
     f("h100","usp","contiguous","auto","1M") u 1:2 w lp lc 3 dt 2 pt 6 t "usp H100"

set output o."/seq.png"
set xtics ("128K" 131072, "256K" 262144, "512K" 524288, "1M" 1048576, "2M" 2097152, "4M" 4194304)
set title "Train step at 32 GPUs (DGX A100) by sequence length"
set xlabel "tokens"
set ylabel "step time (s)"
plot s("a100","burst","zigzag",32) u 1:2 w lp lc 1 pt 7 t "burst", \
     s("a100","ring","zigzag",32) u 1:2 w lp lc 2 pt 7 t "ring", \
     s("a100","usp","contiguous",32) u 1:2 w lp lc 3 pt 7 t "usp", \
     s("a100","ulysses","contiguous",32) u 1:2 w lp lc 4 pt 9 t "ulysses", \
     s("a100","tp","contiguous",32) u 1:2 w lp lc 7 pt 11 t "tp v1"
unset logscale y

set output o."/exposed.png"
set xtics auto
set title "Exposed communication, 1M tokens, causal"
set xlabel "GPUs"
set ylabel "exposed communication (% of step)"
set yrange [0:100]
plot f("a100","burst","zigzag","auto","1M") u 1:3 w lp lc 1 pt 7 t "burst A100", \
     f("a100","ring","zigzag","auto","1M") u 1:3 w lp lc 2 pt 7 t "ring A100", \
     f("a100","usp","contiguous","auto","1M") u 1:3 w lp lc 3 pt 7 t "usp A100", \
     f("h100","burst","zigzag","auto","1M") u 1:3 w lp lc 1 dt 2 pt 6 t "burst H100", \
     f("h100","ring","zigzag","auto","1M") u 1:3 w lp lc 2 dt 2 pt 6 t "ring H100", \
     f("h100","usp","contiguous","auto","1M") u 1:3 w lp lc 3 dt 2 pt 6 t "usp H100"
set autoscale y

set output o."/bytes.png"
set title "Bytes sent per rank by link class, 1M tokens (DGX A100)"
set xlabel "GPUs"
set ylabel "GiB per rank"
set logscale y
plot f("a100","burst","zigzag","auto","1M") u 1:4 w lp lc 1 pt 7 t "burst intra-node", \
     f("a100","burst","zigzag","auto","1M") u 1:5 w lp lc 1 dt 2 pt 6 t "burst inter-node", \
     f("a100","ring","zigzag","auto","1M") u 1:4 w lp lc 2 pt 7 t "ring intra-node", \
     f("a100","ring","zigzag","auto","1M") u 1:5 w lp lc 2 dt 2 pt 6 t "ring inter-node", \
     f("a100","usp","contiguous","auto","1M") u 1:4 w lp lc 3 pt 7 t "usp intra-node", \
     f("a100","usp","contiguous","auto","1M") u 1:5 w lp lc 3 dt 2 pt 6 t "usp inter-node"
unset logscale y

set output o."/memory.png"
set xtics ("128K" 131072, "256K" 262144, "512K" 524288, "1M" 1048576, "2M" 2097152, "4M" 4194304)
set title "Peak memory per GPU at 32 GPUs (DGX A100, attention layer only)"
set xlabel "tokens"
set ylabel "GiB"
set logscale y
plot s("a100","burst","zigzag",32) u 1:3 w lp lc 1 pt 7 t "burst", \
     s("a100","ring","zigzag",32) u 1:3 w lp lc 2 pt 7 t "ring", \
     s("a100","usp","contiguous",32) u 1:3 w lp lc 3 pt 7 t "usp", \
     s("a100","ulysses","contiguous",32) u 1:3 w lp lc 4 pt 9 t "ulysses", \
     s("a100","tp","contiguous",32) u 1:3 w lp lc 7 pt 11 t "tp v1", \
     cap w l lc 0 dt 3 t "capacity"
unset logscale y

set output o."/double_ring.png"
set xtics auto
set title "Double ring on vs off, 1M tokens, causal zigzag (DGX A100)"
set xlabel "GPUs"
set ylabel "step time (s)"
set logscale y
plot f("dring","burst","zigzag","on","1M") u 1:2 w lp lc 1 pt 7 t "burst, double ring", \
     f("dring","burst","zigzag","off","1M") u 1:2 w lp lc 1 dt 2 pt 6 t "burst, one ring", \
     f("dring","ring","zigzag","on","1M") u 1:2 w lp lc 2 pt 7 t "ring, double ring", \
     f("dring","ring","zigzag","off","1M") u 1:2 w lp lc 2 dt 2 pt 6 t "ring, one ring"

set output o."/layouts.png"
set title "burst, causal, 1M tokens: token layouts (DGX A100)"
plot f("layouts","burst","contiguous","auto","1M") u 1:2 w lp lc 1 pt 7 t "contiguous", \
     f("layouts","burst","zigzag","auto","1M") u 1:2 w lp lc 2 pt 7 t "zigzag", \
     f("layouts","burst","striped","auto","1M") u 1:2 w lp lc 3 pt 7 t "striped"
