#!/usr/bin/env python3
"""stage_fold.py BURSTSIM — the stage fold (sim/fold.c) against the straightforward run.

A pipeline's stages lie whole blocks of nodes apart, so the node fold finds nothing, but the
data-parallel replicas inside a stage run the same programs: the stage fold simulates m of every
Ki nodes. Where it applies (one leaf, same-rail messages; several leaves with cross-rail
messages, whole leaves kept: never fewer nodes than a leaf, whose uplinks move the result) every figure of the result equals --fold off's to 1e-12 relative,
bytes and memory exactly, under both engines; where it must not (a straggler, the pipeline not
outermost in parallel.order) it is refused. A 256-GPU point whose pre-pass can rule out every
fold after one node's programs stops there, and its figures equal --fold off's as well.
"""
import json
import os
import subprocess
import sys
import tempfile

BS = sys.argv[1]
BASE = """[model]
preset = llama3.1-8b
layers = 4
[workload]
phase = train
seq_len = 8K
causal = true
scope = model
[parallel]
method = ring
layout = zigzag
micro_batch = 1
zero = 1
[cluster]
topology = dgx-h100
"""
failed = []


def run(tmp, sets, flags):
    ini = os.path.join(tmp, "p.ini")
    with open(ini, "w") as f:
        f.write(BASE)
    out = os.path.join(tmp, "r.json")
    cmd = [BS, "sim", ini, "--quiet", "--out", out] + flags
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("stage_fold: %s failed (exit %d): %s" % (" ".join(cmd), p.returncode, p.stderr))
    with open(out) as f:
        return json.load(f)["results"][0]


def diff(a, b, path=""):
    """The worst relative difference of two results' figures (sim.* left out), or a path that differs."""
    worst = 0.0
    if isinstance(a, dict):
        for k in a:
            if k != "sim":
                worst = max(worst, diff(a[k], b.get(k), path + "." + k))
    elif isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            failed.append("%s: lists differ in length" % path)
            return worst
        for i, (x, y) in enumerate(zip(a, b)):
            worst = max(worst, diff(x, y, "%s[%d]" % (path, i)))
    elif isinstance(a, bool) or not isinstance(a, (int, float)):
        if a != b:
            failed.append("%s: %r against %r" % (path, a, b))
    elif isinstance(a, int) and isinstance(b, int):
        if a != b:  # bytes and memory: exactly
            failed.append("%s: %d against %d" % (path, a, b))
    elif a != b:
        worst = max(worst, abs(a - b) / max(abs(a), abs(b)))
    return worst


def check(name, sets, flags, want):
    with tempfile.TemporaryDirectory() as tmp:
        folded = run(tmp, sets, flags)
        full = run(tmp, sets, flags + ["--fold", "off"])
    net = folded["sim"]["network"]
    used = "stage fold" in net
    if used != (want == "stage"):
        failed.append("%s: sim.network says %r (want %s)" % (name, net, want))
    if want == "stopped" and "pre-pass stopped at" not in net:
        failed.append("%s: the pre-pass did not stop early: %r" % (name, net))
    if want == "stage" and folded["sim"]["actors"] >= full["sim"]["actors"]:
        failed.append("%s: %d actors folded, %d full" % (name, folded["sim"]["actors"], full["sim"]["actors"]))
    worst = diff(folded, full)
    if worst > 1e-12:
        failed.append("%s: a time differs by %.3g relative" % (name, worst))
    print("stage_fold: %-34s %3d of %3d actors, worst relative difference %.1e; %s" %
          (name, folded["sim"]["actors"], full["sim"]["actors"], worst, net.split("fold: ", 1)[1]))


one_leaf = ["parallel.gpus=96", "parallel.tp=8", "parallel.dp=6", "parallel.pp=2", "workload.batch=24"]
leaves = ["parallel.gpus=128", "parallel.tp=4", "parallel.dp=8", "parallel.pp=2", "workload.batch=32"]
check("one leaf, direct", one_leaf, [], "stage")
check("one leaf, simgrid", one_leaf, ["--engine", "simgrid"], "stage")
check("leaves of 2 nodes, cross-rail", leaves, ["--nodes-per-leaf", "2"], "stage")
check("leaves of 2, cross-rail, simgrid", leaves, ["--nodes-per-leaf", "2", "--engine", "simgrid"], "stage")
check("interleaved, leaves of 2", leaves + ["parallel.pp_schedule=interleaved", "parallel.pp_chunks=2"],
      ["--nodes-per-leaf", "2"], "stage")
# Cross-rail gradient rings on leaves of 4 nodes, stage blocks of 8: no fold of fewer nodes than
# whole leaves (2 here) is exact, since the leaves' uplinks move the full run's result.
check("cross-rail, leaves of 4 (must not)", leaves, ["--nodes-per-leaf", "4"], "none")
check("straggler (must not)", one_leaf + ["cluster.straggler=40:1.5"], [], "none")
check("pipeline not outermost (must not)", one_leaf + ["parallel.order=tp-pp-dp-cp"], [], "none")
check("256 GPUs, pre-pass stops", ["parallel.gpus=256", "parallel.tp=4", "parallel.dp=8", "parallel.pp=4",
                                    "workload.batch=32"], [], "stopped")
if failed:
    print("\n".join("stage_fold: FAIL " + f for f in failed))
    sys.exit(1)
print("stage_fold: ok")
