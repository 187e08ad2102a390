#!/usr/bin/env python3
"""moe_alltoall.py BURSTSIM MPIEXEC INI DIR — a mixture-of-experts layer's all-to-all bytes on a real
run (CPU, 4 ranks under mpirun) and in the simulator, against the formula.

One MoE layer trained (ring over cp = 2, dp = 2, ep = 2; 4 experts) runs with top_k = 1 and with
top_k = 2. Nothing else that travels depends on top_k (the router's weights are hidden x experts,
the experts' gradients their own), so every rank's bytes sent differ by the all-to-alls' alone:
4 of them (dispatch and combine, forward and backward), each sending (ep - 1) / ep of its buffer of
tokens x top_k x hidden x bytes, the tokens being a rank's seq_len / cp. The run and the
simulator must both show that difference on every rank, and agree with each other exactly.
"""
import json
import os
import subprocess
import sys

BS, MPIEXEC, INI, DIR = sys.argv[1:5]
NP, EP, CP, HIDDEN, SEQ, ES = 4, 2, 2, 128, 192, 4  # run_vs_sim.ini: hidden 128, fp32, seq_len 192
SETS = [
    "parallel.gpus=4", "cluster.coll_algo=ring", "workload.scope=layer", "model.ffn=256",
    "parallel.method=ring", "parallel.dp=2", "workload.batch=2", "model.experts=4",
    "model.moe_ffn=64", "parallel.ep=%d" % EP,
]


def sent(mode, top_k):
    out = os.path.join(DIR, "%s_k%d.json" % (mode, top_k))
    args = [BS, mode, INI]
    for s in SETS + ["model.top_k=%d" % top_k]:
        args += ["--set", s]
    args += ["--out", out]
    if mode == "run":
        args = [MPIEXEC, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader", "-np",
                str(NP)] + args + ["--threads", "1", "--timeout", "60"]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        r = json.load(f)["results"][0]
    assert r["status"] == "ok", r.get("error")
    return [x["bytes_sent"] for x in r["ranks"]]


os.makedirs(DIR, exist_ok=True)
tokens = SEQ // CP  # a rank's tokens (one sequence per microbatch)
want = 4 * (EP - 1) * tokens * (2 - 1) * HIDDEN * ES // EP
fails = 0
runs = {m: (sent(m, 1), sent(m, 2)) for m in ("run", "sim")}
for rank in range(NP):
    d = {m: runs[m][1][rank] - runs[m][0][rank] for m in runs}
    ok = d["run"] == want and d["sim"] == want and runs["run"][1][rank] == runs["sim"][1][rank]
    print("rank %d: all-to-all bytes (top_k 2 - top_k 1) run %d sim %d formula %d; sent run %d sim %d  %s" %
          (rank, d["run"], d["sim"], want, runs["run"][1][rank], runs["sim"][1][rank], "ok" if ok else "DIFFERENT"))
    fails += not ok
sys.exit(1 if fails else 0)
