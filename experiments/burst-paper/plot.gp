# burst-paper plots (gnuplot): first-token latency and peak memory of the prefill on one 8 x A100
# 40 GB PCIe node, and training step and memory on 8 and 32 GPUs, from the files series.awk writes.
# Points whose peak passes the capacity are drawn as crosses (predicted, would not fit).
# Call with -e "d='DATDIR'; o='OUTDIR'; cap=CAPACITY_GIB".
set terminal pngcairo size 900,520 noenhanced
set grid
set logscale x 2
set logscale y
set key outside right top
set format y "%g"
set xrange [3400:310000]
set xtics ("4K" 4096, "8K" 8192, "16K" 16384, "32K" 32768, "64K" 65536, "128K" 131072, "256K" 262144)
f(p, h, g, l) = sprintf("%s/%s-h%d-g%d-%s.dat", d, p, h, g, l)
fit(y, oom) = oom > 0 ? 1/0 : y
over(y, oom) = oom > 0 ? y : 1/0
P(h, l, c, t) = sprintf("f('prefill',%d,8,'%s') u 1:(fit($2,$4)) w lp lc %d pt 7 t '%s', f('prefill',%d,8,'%s') u 1:(over($2,$4)) w p lc %d pt 2 ps 2 notitle", h, l, c, t, h, l, c)

do for [h in "32 40"] {
  set output sprintf("%s/prefill_h%s.png", o, h)
  set title sprintf("First-token latency, %s, 8 x A100 40 GB PCIe, fp16, causal (x: does not fit)", h eq "32" ? "LLaMA-2-7B" : "LLaMA-2-13B")
  set xlabel "tokens"
  set ylabel "prefill time (s)"
  hn = h + 0
  eval "plot ".P(hn,"tp-v1",1,"tp v1").", ".P(hn,"tp-v3",2,"tp v3").", ".P(hn,"ring-li2021",3,"ring-li2021").", ".\
       P(hn,"burst-laooff",4,"burst, lao off").", ".P(hn,"burst",7,"burst").", ".P(hn,"burst-zigzag",6,"burst, zigzag")
}

set output o."/prefill_memory.png"
set title "Peak memory per GPU, LLaMA-2-7B prefill, 8 x A100 40 GB PCIe"
set ylabel "GiB"
plot f('prefill',32,8,'tp-v1') u 1:3 w lp lc 1 pt 7 t "tp v1", f('prefill',32,8,'tp-v3') u 1:3 w lp lc 2 pt 7 t "tp v3", \
     f('prefill',32,8,'ring-li2021') u 1:3 w lp lc 3 pt 7 t "ring-li2021", f('prefill',32,8,'burst-laooff') u 1:3 w lp lc 4 pt 7 t "burst, lao off", \
     f('prefill',32,8,'burst') u 1:3 w lp lc 7 pt 7 t "burst", cap w l lc 0 dt 3 t "capacity"

set xrange [24576:174763]
T(g, l, c, t, dash) = sprintf("f('train',32,%d,'%s') u 1:(fit($2,$4)) w lp lc %d dt %d pt 7 t '%s', f('train',32,%d,'%s') u 1:(over($2,$4)) w p lc %d pt 2 ps 2 notitle", g, l, c, dash, t, g, l, c)
set output o."/train.png"
set title "Training step, LLaMA-2-7B, fp16, A100 40 GB PCIe nodes (x: does not fit)"
set ylabel "step time (s)"
eval "plot ".T(8,"tp-v3",2,"tp v3, 8 GPUs",1).", ".T(8,"burst-zigzag",7,"burst, 8 GPUs",1).", ".T(8,"burst-zigzag-zero3",6,"burst ZeRO-3, 8 GPUs",1).", ".\
     T(32,"tp-v3",2,"tp v3, 32 GPUs",2).", ".T(32,"burst-zigzag",7,"burst, 32 GPUs",2).", ".T(32,"burst-zigzag-zero3",6,"burst ZeRO-3, 32 GPUs",2)

set output o."/train_memory.png"
set title "Peak memory per GPU, LLaMA-2-7B training, A100 40 GB PCIe"
set ylabel "GiB"
plot f('train',32,8,'tp-v3') u 1:3 w lp lc 2 pt 7 t "tp v3, 8 GPUs", f('train',32,8,'burst-zigzag') u 1:3 w lp lc 7 pt 7 t "burst, 8 GPUs", \
     f('train',32,8,'burst-zigzag-zero3') u 1:3 w lp lc 6 pt 7 t "burst ZeRO-3, 8 GPUs", \
     f('train',32,32,'tp-v3') u 1:3 w lp lc 2 dt 2 pt 6 t "tp v3, 32 GPUs", f('train',32,32,'burst-zigzag') u 1:3 w lp lc 7 dt 2 pt 6 t "burst, 32 GPUs", \
     f('train',32,32,'burst-zigzag-zero3') u 1:3 w lp lc 6 dt 2 pt 6 t "burst ZeRO-3, 32 GPUs", cap w l lc 0 dt 3 t "capacity"
