# composed plots (gnuplot): Llama 3.1 405B 128K prefill time against nodes (TP 8 x CP N).
# Call with -e "d='DATDIR'; o='OUTDIR'".
set terminal pngcairo size 800,480 noenhanced
set grid
set logscale xy 2
set key top right
set output o."/prefill.png"
set title "Llama 3.1 405B prefill, 128K tokens, TP 8 x CP N (DGX H100, FP8 GEMMs)"
set xlabel "nodes (8 GPUs each)"
set ylabel "time to first token (s)"
plot d."/meta.dat" u 1:2 w lp pt 7 t "simulated", d."/meta.dat" u 1:($3) w l dt 2 t "ideal (1 node / N)"
