#!/usr/bin/env python3
"""measured_gpu_profile.py BURSTSIM REPO OUTDIR — the H200 profile measured by `calib --backend cuda`
(calib/profiles/measured/h200-sxm-1gpu.json) loads, and with it the simulator predicts the one-rank
16K-token point within 10 % of the step, forward and backward that the same GPU ran
(experiments/gpu-h200/validate1.json, measured by `validate --backend cuda`)."""
import json
import os
import subprocess
import sys

bs, repo, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
res = os.path.join(out, "h200-point1.json")
subprocess.run([bs, "sim", os.path.join(repo, "experiments/gpu-h200/point1.ini"), "--profile",
                os.path.join(repo, "calib/profiles/measured/h200-sxm-1gpu.json"), "--quiet", "--out", res],
               check=True)
pred = json.load(open(res))["results"][0]["time_s"]
meas = json.load(open(os.path.join(repo, "experiments/gpu-h200/validate1.json")))["entries"][0]["measured"]["time_s"]
bad = 0
for k in ("step", "fwd", "bwd"):
    err = pred[k] / meas[k] - 1
    print(f"{k}: predicted {pred[k] * 1e3:.3f} ms, measured on the H200 {meas[k] * 1e3:.3f} ms ({err:+.1%})")
    bad |= abs(err) > 0.10
sys.exit(1 if bad else 0)
