# tree-decode plots (gnuplot): decode latency against GPUs and tokens, bytes per rank and peak
# memory, tree against ring, from the files series.awk writes. Call with -e "d='DATDIR'; o='OUTDIR'".
set terminal pngcairo size 900,520 noenhanced
set grid
set logscale xy 2
set key outside right top
f(k, m, n) = sprintf("%s/kv%d-%s-%s.dat", d, k, m, n)
s(k, m, g) = sprintf("%s/seq-kv%d-%s-%d.dat", d, k, m, g)
set format y "%g"

set output o."/latency.png"
set title "Decode step (one token, one LLaMA-3.1-8B attention layer, DGX H100)"
set xlabel "GPUs"
set ylabel "step time (s)"
set logscale y 10
plot f(8,"tree","32K") u 1:2 w lp lc 1 pt 7 t "tree 32K", f(8,"ring","32K") u 1:2 w lp lc 1 dt 2 pt 6 t "ring 32K", \
     f(8,"tree","1M") u 1:2 w lp lc 2 pt 7 t "tree 1M", f(8,"ring","1M") u 1:2 w lp lc 2 dt 2 pt 6 t "ring 1M", \
     f(8,"tree","5M") u 1:2 w lp lc 3 pt 7 t "tree 5M", f(8,"ring","5M") u 1:2 w lp lc 3 dt 2 pt 6 t "ring 5M"

set output o."/latency_seq.png"
set xtics ("32K" 32768, "128K" 131072, "512K" 524288, "1M" 1048576, "2M" 2097152, "5M" 5242880)
set title "Decode step by KV length (LLaMA-3.1-8B attention layer, DGX H100)"
set xlabel "tokens of KV cache"
plot s(8,"tree",8) u 1:2 w lp lc 1 pt 7 t "tree 8 GPUs", s(8,"ring",8) u 1:2 w lp lc 1 dt 2 pt 6 t "ring 8 GPUs", \
     s(8,"tree",128) u 1:2 w lp lc 2 pt 7 t "tree 128 GPUs", s(8,"ring",128) u 1:2 w lp lc 2 dt 2 pt 6 t "ring 128 GPUs", \
     s(8,"tree",1024) u 1:2 w lp lc 3 pt 7 t "tree 1024 GPUs", s(8,"ring",1024) u 1:2 w lp lc 3 dt 2 pt 6 t "ring 1024 GPUs"

set output o."/bytes.png"
set xtics auto
set title "Bytes sent per rank, decode (LLaMA-3.1-8B attention layer)"
set xlabel "GPUs"
set ylabel "MiB per rank"
plot f(8,"tree","32K") u 1:($6*1024) w lp lc 1 pt 7 t "tree 32K", f(8,"tree","5M") u 1:($6*1024) w lp lc 3 pt 7 t "tree 5M", \
     f(8,"ring","32K") u 1:($6*1024) w lp lc 1 dt 2 pt 6 t "ring 32K", f(8,"ring","5M") u 1:($6*1024) w lp lc 3 dt 2 pt 6 t "ring 5M"

set output o."/memory.png"
set xtics ("32K" 32768, "128K" 131072, "512K" 524288, "1M" 1048576, "2M" 2097152, "5M" 5242880)
set title "Peak memory per GPU, decode, 8 GPUs (one attention layer)"
set xlabel "tokens of KV cache"
set ylabel "GiB"
plot s(8,"tree",8) u 1:3 w lp lc 1 pt 7 t "tree, LLaMA-3.1-8B (8 KV heads)", s(8,"ring",8) u 1:3 w lp lc 1 dt 2 pt 6 t "ring, LLaMA-3.1-8B", \
     s(32,"tree",8) u 1:3 w lp lc 2 pt 7 t "tree, LLaMA-2-7B (32 KV heads)", s(32,"ring",8) u 1:3 w lp lc 2 dt 2 pt 6 t "ring, LLaMA-2-7B"
