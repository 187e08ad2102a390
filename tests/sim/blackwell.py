#!/usr/bin/env python3
"""blackwell.py — the Blackwell profiles (b200, gb200, gb300) and topologies (dgx-b200, nvl72) on toy
cases whose figures are computed by hand here, from the profiles' own numbers, one case per ctest.

    blackwell.py BUILD CASE        (CASE: one of CASES; exit 0 when the simulator agrees)

Times come from build/tests/sim/fidelity_point (one collective or one send, as nccl-tests runs it)
and points from `burstsim sim`; a time must agree within 0.01 %, bytes and memory exactly.
Python 3 standard library only.
"""
import json
import os
import subprocess
import sys
import tempfile

MiB = 1 << 20
# The profiles' figures the hand arithmetic uses (calib/profiles/{b200,gb200,gb300}.json).
NVLINK_BW = 721.8e9  # links.nvlink.bandwidth_Bps, per direction
NVLINK_HOP = 2 * 1.7e-6  # GPU - NVSwitch - GPU: two nvlink latencies
NIC_BW = {"gb200": 48e9, "gb300": 96e9, "b200": 48e9}  # links.nic.bandwidth_Bps
NIC_HOP = 2 * 7e-6  # GPU - leaf - GPU: two nic latencies (fabric latency 0)
COLL_BASE = 6.6e-6  # collectives.base_s
P2P_INTRA_EFF = 0.486  # p2p.intra_node.efficiency
P2P_INTER_BASE = 17.5e-6  # p2p.inter_node.base_s
RESERVED = 454140672  # device.reserved_bytes
MEMORY = {"b200": 180e9, "gb200": 186e9, "gb300": 288e9}  # device.memory_bytes


def ring_allgather(n, chunk, hop, bw):
    """NCCL's ring allgather of `chunk` bytes per rank: n - 1 steps, each a hop's latency and the chunk
    at the slowest link's bandwidth, after the per-call base cost."""
    return COLL_BASE + (n - 1) * (hop + chunk / bw)


# name: (fidelity_point arguments, seconds by hand)
TIMES = {
    # a ring of 72 inside one NVL72 rack: every step on NVLink 5
    "ring72_nvlink": (["gb200", "nvl72", "72", "allgather", str(16 * MiB), "72"],
                      ring_allgather(72, 16 * MiB, NVLINK_HOP, NVLINK_BW)),
    # a ring of 144 over two racks: one channel per rail (72), each ring crossing between racks on
    # its own rail with 1/72 of the data; every GPU still sends 71/72 of each step over its NVLink,
    # which sets the pace (the flow model: a channel's 143 steps as one message per hop)
    "ring144_two_racks": (["gb200", "nvl72", "144", "allgather", str(16 * MiB), "144"],
                          COLL_BASE + NVLINK_HOP + 143 * 16 * MiB * 71 / 72 / NVLINK_BW),
    # two DGX B200 nodes: one ring channel per rail (8), each carrying 1/8 of the chunk over its NIC
    "rails_dgx_b200": (["b200", "dgx-b200", "16", "allgather", str(16 * MiB), "16"],
                       ring_allgather(16, 2 * MiB, NIC_HOP, NIC_BW["b200"])),
    # GPU 0 to GPU 71 of one rack: NVLink, at the point-to-point fraction of its bandwidth
    "sendrecv_in_rack": (["gb200", "nvl72", "72", "sendrecv", str(1 << 30), "71"],
                         NVLINK_HOP + (1 << 30) / (NVLINK_BW * P2P_INTRA_EFF)),
    # GPU 0 of rack 0 to GPU 0 of rack 1: rail 0, one leaf, at the NIC's rate (GB300: ConnectX-8)
    "sendrecv_cross_rack": (["gb200", "nvl72", "144", "sendrecv", str(1 << 30), "72"],
                            P2P_INTER_BASE + NIC_HOP + (1 << 30) / NIC_BW["gb200"]),
    "sendrecv_cross_rack_gb300": (["gb300", "nvl72", "144", "sendrecv", str(1 << 30), "72"],
                                  P2P_INTER_BASE + NIC_HOP + (1 << 30) / NIC_BW["gb300"]),
}

# Memory: a ring prefill holds, per token of its shard (llama3-8b: 32 query heads, 8 KV heads,
# d = 128, BF16): Q 8192 B, K and V 2048 B each (input), O 8192 B and the step's block output 8192 B
# and lse 128 B (fp32) (output), the K,V receive double buffer 8192 B (comm): 36992 B per token;
# every allocation is a multiple of 2 MiB at shards of 16384 k tokens (no rounding).
PER_TOKEN = 8192 + 2048 + 2048 + 8192 + 8192 + 128 + 8192
TOPO = {"b200": ("dgx-b200", 8), "gb200": ("nvl72", 72), "gb300": ("nvl72", 72)}


def memory_case(profile, fits):
    cap = int(MEMORY[profile]) - RESERVED
    k = cap // PER_TOKEN // 16384 + (0 if fits else 1)
    tokens = 16384 * k
    topo, gpus = TOPO[profile]
    ini = ("[model]\npreset = llama3-8b\n[workload]\nphase = prefill\nseq_len = %d\ncausal = false\n"
           "[parallel]\nmethod = ring\ngpus = %d\n[cluster]\ntopology = %s\nprofile = %s\n" %
           (tokens * gpus, gpus, topo, profile))
    return ini, {"memory.peak_bytes_max": PER_TOKEN * tokens, "memory.capacity_bytes": cap,
                 "memory.oom": not fits}


POINTS = {}
for _p in MEMORY:
    for _fits in (True, False):
        POINTS["memory_%s_%s" % (_p, "fit" if _fits else "oom")] = memory_case(_p, _fits)

# Placement on two racks (144 GPUs, tp = 8, llama3-8b: one KV head per tp rank), ring prefill of
# 147456 tokens, batch 2. A K,V block = batch/dp x (147456 / cp) tokens x 1 head x 128 x 2 B x 2.
PLACE = ("[model]\npreset = llama3-8b\n[workload]\nphase = prefill\nseq_len = 147456\nbatch = 2\n"
         "causal = false\n[parallel]\nmethod = ring\ngpus = 144\ntp = 8\ndp = %d\norder = %s\n"
         "[cluster]\ntopology = nvl72\n")
BLK18 = 2 * 8192 * 128 * 2 * 2  # cp = 18, dp = 1: 8 MiB
BLK9 = 1 * 16384 * 128 * 2 * 2  # cp = 9, dp = 2: 8 MiB
POINTS.update({
    # cp = 9 per replica, tp fastest: each CP ring is 9 GPUs of one rack, nothing leaves it
    "place_cp_in_rack": (PLACE % (2, "tp-cp-dp-pp"),
                         {"comm_bytes.inter_node": 0, "comm_bytes.intra_node": 144 * 8 * BLK9}),
    # cp = 18, cp fastest: the ring's 18 GPUs are neighbours in one rack
    "place_cp18_in_rack": (PLACE % (1, "cp-dp-tp-pp"),
                           {"comm_bytes.inter_node": 0, "comm_bytes.intra_node": 144 * 17 * BLK18}),
    # cp = 18 with stride 8 spans both racks: a double ring, inner 9 per rack on NVLink, outer 2
    # across on the rail of each GPU (rank 8m and 8m + 72 share local index, so rail): each rank
    # sends its block across once and inside its rack 16 times
    "place_cp18_two_racks": (PLACE % (1, "tp-cp-dp-pp"),
                             {"comm_bytes.inter_node": 144 * 1 * BLK18, "comm_bytes.intra_node": 144 * 16 * BLK18,
                              "plan.double_ring": True, "plan.ring_inner": 9, "plan.ring_outer": 2}),
})

# Every method and one composed model step simulate without error on each new topology.
METHOD = ("[model]\npreset = llama3-8b\n[workload]\nphase = %s\nseq_len = %d\nbatch = %d\ncausal = true\n"
          "decode_tokens = 2\n[parallel]\nmethod = %s\ngpus = %d\ndp = %d\nulysses_degree = 8\n"
          "[cluster]\ntopology = %s\n")
for _topo, _g, _seq in (("nvl72", 72, 147456), ("dgx-b200", 16, 131072)):
    for _m in ("burst", "ring", "usp", "ulysses", "tp", "tree"):
        dp = _g // 8 if _m in ("ulysses", "tp") else 1  # 8 KV heads: ulysses and tp over 8 GPUs
        phase = "decode" if _m == "tree" else "train"
        POINTS["method_%s_%s" % (_m, _topo)] = (METHOD % (phase, _seq, dp, _m, _g, dp, _topo), {"status": "ok"})
COMPOSED = ("[model]\npreset = llama3-8b\nlayers = 4\n[workload]\nphase = train\nseq_len = %d\nbatch = 4\n"
            "causal = true\nscope = model\n[parallel]\nmethod = ring\ngpus = %d\ntp = %d\ndp = 2\npp = 2\n"
            "micro_batch = 1\n[cluster]\ntopology = %s\n")
POINTS["composed_nvl72"] = (COMPOSED % (147456, 144, 4, "nvl72"), {"status": "ok", "parallel.cp": 9})
POINTS["composed_dgx-b200"] = (COMPOSED % (131072, 32, 2, "dgx-b200"), {"status": "ok", "parallel.cp": 4})


def field(point, dotted):
    v = point
    for k in dotted.split("."):
        v = v[k]
    return v


def run_point(build, ini, want):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "case.ini")
        out = os.path.join(d, "case.json")
        with open(path, "w") as f:
            f.write(ini)
        r = subprocess.run([os.path.join(build, "burstsim"), "sim", path, "--quiet", "--out", out],
                           capture_output=True, text=True)
        if r.returncode != 0 and not os.path.exists(out):
            print(r.stderr)
            return 1
        with open(out) as f:
            point = json.load(f)["results"][0]
    bad = 0
    for k, v in want.items():
        got = field(point, k)
        print("%-28s hand %-16s simulated %s" % (k, v, got))
        if got != v:
            bad = 1
    if point.get("status") != "ok":
        print("status %s: %s" % (point.get("status"), point.get("error")))
        bad = 1
    return bad


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in list(TIMES) + list(POINTS):
        sys.stderr.write("usage: blackwell.py BUILD CASE (cases: %s)\n" % ", ".join(list(TIMES) + list(POINTS)))
        return 2
    build, case = sys.argv[1], sys.argv[2]
    if case in TIMES:
        args, hand = TIMES[case]
        r = subprocess.run([os.path.join(build, "tests", "sim", "fidelity_point")] + args,
                           capture_output=True, text=True, check=True)
        t = float(r.stdout)
        print("%s: hand %.9g s, simulated %.9g s" % (case, hand, t))
        return 0 if abs(t - hand) <= 1e-4 * hand else 1
    return run_point(build, *POINTS[case])


if __name__ == "__main__":
    sys.exit(main())
