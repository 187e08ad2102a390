#!/usr/bin/env python3
"""fidelity.py — the shipped profiles against the public microbenchmarks they are built from.

For every figure a GPU profile is built from (an attention kernel at a benchmark shape, a message size
on a link class, a collective's per-call cost) this runs the simulator on that microbenchmark and prints
predicted, published and the error, as a Markdown table (docs/fidelity.md's "Public-spec fidelity" section
quotes it). Kernels run as a one-GPU `burstsim sim` point (one attention kernel per pass) on a
one-host platform; messages and collectives run through build/tests/sim/fidelity_point, the same engine
with a hand-written program, on the shipped topologies. Rows marked "check" are public figures the
profile is NOT built from (other hardware, other settings): they show where the model stands, and are
kept out of the 5 % claim. Python 3 standard library only.

    scripts/fidelity.py [--build build] [--check]     (--check: exit 1 when a "built" row is off by > 5 %)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
X = [512, 1024, 2048, 4096, 8192, 16384]
FA3 = "arXiv 2407.08608 v2"  # FlashAttention-3 paper: FlashAttention-2 bars on H100 80GB SXM5
README = "flash-attention README"  # github.com/Dao-AILab/flash-attention benchmark figures

# (profile, pass, mask, head_dim, published TFLOP/s at X, source): the benchmark setting of both
# FlashAttention papers, batch x seqlen = 16k tokens, hidden 2048 (heads = 2048 / head_dim).
KERNELS = [
    ("h100-sxm", "fwd", "full", 128, [309, 350, 362, 368, 370, 370], FA3 + " Fig. 5c"),
    ("h100-sxm", "fwd", "causal", 128, [191, 260, 298, 319, 333, 335], FA3 + " Fig. 5d"),
    ("h100-sxm", "bwd", "full", 128, [214, 260, 291, 310, 318, 322], FA3 + " Fig. 6b"),
    ("h100-sxm", "fwd+bwd", "causal", 128, [163, 221, 265, 294, 308, 328], README + ", H100"),
    ("a100-sxm4-80gb", "fwd+bwd", "full", 128, [151, 173, 187, 196, 201, 203], README + ", A100"),
    ("a100-sxm4-80gb", "fwd+bwd", "causal", 128, [99, 133, 155, 173, 182, 189], README + ", A100"),
    ("a100-sxm4-80gb", "fwd+bwd", "causal", 64, [88, 119, 140, 156, 165, 171], "arXiv 2307.08691 Fig. 4c"),
]
# model.attention_kernel = fa3 / cudnn: the other bars of the same figures (H100 80GB SXM5, d = 128):
# (profile, kernel, pass, mask, head_dim, published TFLOP/s at X, source)
KERNELS_ALT = [
    ("h100-sxm", "fa3", "fwd", "full", 128, [467, 565, 625, 638, 646, 648], FA3 + " Fig. 5c"),
    ("h100-sxm", "fa3", "fwd", "causal", 128, [292, 423, 521, 579, 602, 616], FA3 + " Fig. 5d"),
    ("h100-sxm", "fa3", "bwd", "full", 128, [316, 424, 501, 542, 559, 561], FA3 + " Fig. 6b"),
    ("h100-sxm", "cudnn", "fwd", "full", 128, [497, 574, 617, 609, 600, 595], FA3 + " Fig. 5c"),
    ("h100-sxm", "cudnn", "fwd", "causal", 128, [315, 410, 484, 518, 529, 539], FA3 + " Fig. 5d"),
    ("h100-sxm", "cudnn", "bwd", "full", 128, [305, 408, 465, 499, 518, 516], FA3 + " Fig. 6b"),
]
KERNEL_LABEL = {"fa2": "FA2", "fa3": "FA3", "cudnn": "cuDNN"}
# Best-case text figures, not a table at a shape: checks.
KERNEL_CHECKS = [
    ("a100-sxm4-80gb", "fwd", "full", 128, 16384, 228, "arXiv 2307.08691 Sec. 1: forward up to 73 % of 312"),
    ("a100-sxm4-80gb", "bwd", "full", 128, 16384, 197, "arXiv 2307.08691 Sec. 1: backward up to 63 % of 312"),
]

# Blackwell: the one published attention rate the profiles' tables are scaled to (a best case):
# (profile, pass, mask, head_dim, seqlen, published TFLOP/s, label, source, kind)
KERNEL_POINTS = [
    ("b200", "fwd", "full", 128, 16384, 1613, "FA4 fwd, full, d=128, best", "arXiv 2603.05451 abstract (up to 1613)",
     "built"),
]

# Decode attention (one query row per head against a KV cache): (profile, keys, batch, query heads, KV heads,
# head_dim, published us, label, source, kind); one GPU's Flash-Decoding op at Llama 3 405B shapes under TP8.
META8 = "arXiv 2411.01783 Table 8"
DECODES = [
    ("h100-sxm-96gb", 131072, 1, 16, 1, 128, 38.9, "decode attention, 128K keys, batch 1", META8 + " (1 host)",
     "built"),
    ("h100-sxm-96gb", 65536, 1, 16, 1, 128, 22.0, "decode attention, 64K keys, batch 1", META8 + " (2 hosts)",
     "built"),
    ("h100-sxm-96gb", 32768, 1, 16, 1, 128, 14.7, "decode attention, 32K keys, batch 1", META8 + " (4 hosts)",
     "built"),
    # the batch-4 rows disagree with each other (32K keys x 4 in 60.1 us, 16K x 4 in 13.9 us: 4.3x for twice the
    # bytes) and with the batch-1 rows at equal bytes: kept as checks
    ("h100-sxm-96gb", 32768, 4, 16, 1, 128, 60.1, "decode attention, 32K keys, batch 4", META8 + " (1 host)",
     "check"),
    ("h100-sxm-96gb", 16384, 4, 16, 1, 128, 13.9, "decode attention, 16K keys, batch 4", META8 + " (2 hosts)",
     "check"),
]

GiB = 1 << 30
# (profile, label, topology, gpus, op, bytes (nccl-tests size), ranks or peer, nics, published, unit, source, kind)
# unit GB/s: nccl-tests busbw; us: time of one call.
COMMS = [
    ("h100-sxm", "NVLink 4, all_gather, 8 GPUs, 4 GiB", "dgx-h100", 8, "allgather", 4 * GiB, 8, 0, 370, "GB/s",
     "nccl-tests #212 (maintainer: ring busbw about 370)", "built"),
    ("h100-sxm", "NDR NIC, sendrecv across 2 nodes, 1 GiB", "dgx-h100", 16, "sendrecv", GiB, 8, 0, 48, "GB/s",
     "nccl-tests #267 (48-49 GB/s per NIC)", "built"),
    ("h100-sxm", "all_reduce 4 B, 8 GPUs, one node", "dgx-h100", 8, "allreduce", 4, 8, 0, (12.5, 16.7), "us",
     "DeepEP #303 (H20 node, 4 B - 4 KB)", "built"),
    ("h100-sxm", "all_reduce 4 KB, 8 GPUs, one node", "dgx-h100", 8, "allreduce", 4096, 8, 0, (12.5, 16.7), "us",
     "DeepEP #303 (H20 node, 4 B - 4 KB)", "built"),
    ("h800-sxm5", "NVLink (H800), all_reduce, 8 GPUs, 256 MB", "dgx-h100", 8, "allreduce", 256 << 20, 8, 0, 160,
     "GB/s", "nccl-tests #210", "built"),
    ("a100-sxm4-80gb", "NVLink 3, all_reduce, 8 GPUs, 4 GB", "dgx-a100", 8, "allreduce", 4 * GiB, 8, 0, 232.5,
     "GB/s", "nccl-tests #175", "built"),
    ("a100-sxm4-80gb", "8 HDR NICs, all_reduce, 2 nodes, 4 GiB", "dgx-a100", 16, "allreduce", 4 * GiB, 16, 0, 192,
     "GB/s", "nccl #812", "built"),
    ("a100-sxm4-80gb", "4 HDR NICs per node, all_reduce, 3 nodes, 128 MB", "dgx-a100", 24, "allreduce", 128 << 20, 24,
     4, 96.2, "GB/s", "nccl-tests #119 (95.7-96.7)", "built"),
    ("a800-sxm4-80gb", "NVLink (A800), all_reduce, 8 GPUs, 4 GB", "dgx-a100", 8, "allreduce", 4 * GiB, 8, 0, 156,
     "GB/s", "nccl-tests #210", "built"),
    ("h100-sxm", "empty reduce_scatter (8 B here), 8 GPUs", "dgx-h100", 8, "reduce_scatter", 8, 8, 0, 5.5, "us",
     "nccl-tests #128 (0 B, 2 nodes x 4 GPUs)", "check"),
    ("h100-sxm", "sendrecv 256 B across 2 nodes", "dgx-h100", 16, "sendrecv", 256, 8, 0, 30.7, "us",
     "nccl-tests #214 (2 nodes x 1 A40)", "built"),
    ("h100-sxm", "sendrecv 4 KB across 2 hosts", "dgx-h100", 16, "sendrecv", 4096, 8, 0, 32.3, "us",
     "arXiv 2411.01783 Table 8 (decode SendRecv, 2 hosts)", "built"),
    ("h100-sxm", "sendrecv, 2 GPUs on NVLink, 1 GiB", "dgx-h100", 8, "sendrecv", GiB, 1, 0, 180, "GB/s",
     "nccl-tests #268 (plateau near 180)", "built"),
    # the per-send cost across nodes, taken over from the same Ampere measurement; H800 sends at its link's rate
    ("a100-sxm4-80gb", "sendrecv 256 B across 2 nodes", "dgx-a100", 16, "sendrecv", 256, 8, 0, 30.7, "us",
     "nccl-tests #214 (2 nodes x 1 A40)", "built"),
    ("a800-sxm4-80gb", "sendrecv 256 B across 2 nodes", "dgx-a100", 16, "sendrecv", 256, 8, 0, 30.7, "us",
     "nccl-tests #214 (2 nodes x 1 A40)", "built"),
    ("a100-pcie-40gb", "sendrecv 256 B across 2 nodes", "a100-pcie-node", 16, "sendrecv", 256, 8, 0, 30.7, "us",
     "nccl-tests #214 (2 nodes x 1 A40)", "built"),
    ("h800-sxm5", "sendrecv 256 B across 2 nodes", "dgx-h100", 16, "sendrecv", 256, 8, 0, 30.7, "us",
     "nccl-tests #214 (2 nodes x 1 A40)", "built"),
    ("h800-sxm5", "sendrecv, 2 GPUs on NVLink, 1 GiB", "dgx-h100", 8, "sendrecv", GiB, 1, 0, 160, "GB/s",
     "DeepSeek-V3 #28, DeepEP #16 (one-way, measured)", "built"),
    # the two-socket PCIe node: NCCL's own path figures (src/graph/topo.h), and a measured 8-GPU ring as a check
    ("a100-pcie-40gb", "sendrecv under one PCIe switch (GPU 0 -> 1), 1 GiB", "a100-pcie-node", 8, "sendrecv", GiB, 1,
     0, 24, "GB/s", "NCCL src/graph/topo.h (Gen4 x16 = 2 x PCI_BW 12)", "built"),
    ("a100-pcie-40gb", "sendrecv across the two CPU sockets (GPU 0 -> 4), 1 GiB", "a100-pcie-node", 8, "sendrecv",
     GiB, 4, 0, 10, "GB/s", "NCCL src/graph/topo.h (SKL_QPI_BW 10)", "built"),
    ("a100-pcie-40gb", "all_reduce, 8 GPUs on two sockets, 128 MB", "a100-pcie-node", 8, "allreduce", 128 << 20, 8, 0,
     (8, 21), "GB/s", "nccl #841 (8 A100 80GB PCIe, 2 x EPYC 7543)", "check"),
    # Blackwell: NCCL's NVLink 5 figure (src/graph/topo.h SM100_NVLINK_BW 40.1 x 18 links), the NDR NIC of B200 and
    # GB200 nodes, and the NVLink SHARP allreduce the model leaves out (a check)
    ("b200", "NVLink 5, all_gather, 8 GPUs, 4 GiB", "dgx-b200", 8, "allgather", 4 * GiB, 8, 0, 721.8, "GB/s",
     "NCCL src/graph/topo.h (SM100_NVLINK_BW x 18; nccl #1807)", "built"),
    ("gb200", "NVLink 5, all_gather, 72 GPUs of a rack, 4 GiB", "nvl72", 72, "allgather", 4 * GiB, 72, 0, 721.8,
     "GB/s", "NCCL src/graph/topo.h (SM100_NVLINK_BW x 18)", "built"),
    ("b200", "NDR NIC, sendrecv across 2 nodes, 1 GiB", "dgx-b200", 16, "sendrecv", GiB, 8, 0, 48, "GB/s",
     "nccl-tests #267 (48-49 GB/s per NIC)", "built"),
    ("gb200", "NDR NIC, sendrecv across 2 NVL72 racks, 1 GiB", "nvl72", 144, "sendrecv", GiB, 72, 0, 48, "GB/s",
     "nccl-tests #267 (48-49 GB/s per NIC)", "built"),
    ("b200", "all_reduce, 8 GPUs (NVLink SHARP, not modelled), 4 GiB", "dgx-b200", 8, "allreduce", 4 * GiB, 8, 0, 830,
     "GB/s", "nccl #1807 (830+ GB/s busbw)", "check"),
    # one KV block of a pass-KV ring iteration: 128000 tokens / CP4 = 32000 tokens x 1 KV head x d 128 x (K, V) x 2 B
    ("h100-sxm-96gb", "sendrecv of one KV block (16.4 MB) across hosts", "dgx-h100", 16, "sendrecv", 16384000, 8, 0, 627,
     "us", "arXiv 2411.01783 Table 5 (pass-KV SendRecv, 4 hosts, 128K)", "built"),
]


def bench_flops(x, d, causal):
    """Forward FLOPs of the benchmark at seqlen x: 4 x seqlen^2 x d x heads x batch, halved when causal."""
    heads, batch = 2048 // d, 16384 // x
    f = 4.0 * x * x * d * heads * batch
    return f / 2 if causal else f


def run_json(args):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        subprocess.run(args + ["--out", out], check=True, stdout=subprocess.DEVNULL)
        with open(out) as fh:
            r = json.load(fh)["results"][0]
    if r.get("error"):
        raise SystemExit("fidelity: %s" % r["error"])
    return r["time_s"]


def kernel_time(build, xml, ini, profile, phase, x, d, causal, kernel="default"):
    """fwd and bwd seconds of one GPU's attention at the benchmark shape."""
    sets = ["model.attention_kernel=" + kernel, "cluster.profile=" + profile, "cluster.topology=" + xml, "workload.phase=" + phase,
            "workload.seq_len=%d" % x, "workload.batch=%d" % (16384 // x), "model.heads=%d" % (2048 // d),
            "model.kv_heads=%d" % (2048 // d), "model.head_dim=%d" % d, "workload.causal=" + str(causal).lower()]
    args = [os.path.join(build, "burstsim"), "sim", ini]
    for s in sets:
        args += ["--set", s]
    t = run_json(args)
    return t["fwd"], t["bwd"]


def predicted_rate(build, xml, ini, profile, pas, mask, d, x, kernel="default"):
    causal = mask == "causal"
    f = bench_flops(x, d, causal)
    fwd, bwd = kernel_time(build, xml, ini, profile, "prefill" if pas == "fwd" else "train", x, d, causal, kernel)
    if pas == "fwd":
        return f / fwd / 1e12
    if pas == "bwd":
        return 2.5 * f / bwd / 1e12
    return 3.5 * f / (fwd + bwd) / 1e12


def decode_us(build, xml, ini, profile, keys, batch, heads, kv_heads, d):
    """Microseconds of one GPU's decode step at scope attention: one attention call against `keys` keys."""
    sets = ["cluster.profile=" + profile, "cluster.topology=" + xml, "workload.phase=decode",
            "workload.seq_len=%d" % keys, "workload.batch=%d" % batch, "model.heads=%d" % heads,
            "model.kv_heads=%d" % kv_heads, "model.head_dim=%d" % d]
    args = [os.path.join(build, "burstsim"), "sim", ini]
    for s in sets:
        args += ["--set", s]
    return run_json(args)["step"] * 1e6


def comm_value(build, row):
    profile, _, topo, gpus, op, size, arg, nics, _, unit = row[:10]
    n = arg if op != "sendrecv" else 2
    nbytes = size // n if op == "allgather" else size  # fidelity_point takes allgather's per-rank share
    cmd = [os.path.join(build, "tests", "sim", "fidelity_point"), profile, topo, str(gpus), op, str(nbytes), str(arg)]
    if nics:
        cmd.append("nics=%d" % nics)
    t = float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    if unit == "us":
        return t * 1e6
    factor = {"sendrecv": 1.0, "allreduce": 2.0 * (n - 1) / n, "allgather": (n - 1) / n,
              "reduce_scatter": (n - 1) / n}[op]
    return size / t * factor / 1e9  # nccl-tests busbw


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    rows, worst = [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "one-gpu.xml")
        with open(xml, "w") as fh:
            fh.write('<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
                     '<platform version="4.1"><zone id="z" routing="Full"><host id="gpu0" speed="1Gf"/></zone>'
                     '</platform>\n')
        ini = os.path.join(tmp, "kernel.ini")
        with open(ini, "w") as fh:
            fh.write("[model]\ndtype = bf16\n[workload]\nscope = attention\n[parallel]\nmethod = ring\ngpus = 1\n")
        for profile, pas, mask, d, pub, src in KERNELS:
            for x, p in zip(X, pub):
                got = predicted_rate(a.build, xml, ini, profile, pas, mask, d, x)
                rows.append((profile, "FA2 %s, %s, d=%d, seqlen %d" % (pas, mask, d, x), src, got, p, "TFLOP/s",
                             "built"))
        for profile, kernel, pas, mask, d, pub, src in KERNELS_ALT:
            for x, p in zip(X, pub):
                got = predicted_rate(a.build, xml, ini, profile, pas, mask, d, x, kernel)
                rows.append((profile, "%s %s, %s, d=%d, seqlen %d" % (KERNEL_LABEL[kernel], pas, mask, d, x), src, got, p,
                             "TFLOP/s", "built"))
        for profile, pas, mask, d, x, p, src in KERNEL_CHECKS:
            got = predicted_rate(a.build, xml, ini, profile, pas, mask, d, x)
            rows.append((profile, "FA2 %s, %s, d=%d, seqlen %d" % (pas, mask, d, x), src, got, p, "TFLOP/s",
                         "check"))
        for profile, pas, mask, d, x, p, label, src, kind in KERNEL_POINTS:
            got = predicted_rate(a.build, xml, ini, profile, pas, mask, d, x)
            rows.append((profile, "%s, seqlen %d" % (label, x), src, got, p, "TFLOP/s", kind))
        for profile, keys, batch, heads, kv_heads, d, p, label, src, kind in DECODES:
            got = decode_us(a.build, xml, ini, profile, keys, batch, heads, kv_heads, d)
            rows.append((profile, label, src, got, p, "us", kind))
    for row in COMMS:
        rows.append((row[0], row[1], row[10], comm_value(a.build, row), row[8], row[9], row[11]))
    print("| profile | microbenchmark | source | predicted | published | error | |")
    print("|---|---|---|---|---|---|---|")
    for profile, label, src, got, pub, unit, kind in rows:
        lo, hi = pub if isinstance(pub, tuple) else (pub, pub)  # a range: no error inside it
        err = (got - lo) / lo if got < lo else (got - hi) / hi if got > hi else 0.0
        if kind == "built":
            worst = max(worst, abs(err))
        shown = "%.1f %s" % (lo, unit) if lo == hi else "%.1f-%.1f %s" % (lo, hi, unit)
        print("| %s | %s | %s | %.1f %s | %s | %+.1f %% | %s |" % (profile, label, src, got, unit, shown, 100 * err,
                                                                 kind))
    print("\nbuilt rows: %d, largest error %.1f %%" % (sum(r[6] == "built" for r in rows), 100 * worst))
    if a.check and worst > 0.05:
        sys.exit(1)


if __name__ == "__main__":
    main()
