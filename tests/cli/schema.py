#!/usr/bin/env python3
"""schema.py BURSTSIM SRCDIR CASE -- the JSON Schemas of docs/schema against real files.

Cases: result_current (docs/schema/result.schema.json is what `burstsim schema result` prints),
result_valid (sim results with ok and refused points, a search result and the result files kept
under tests/cli/data validate), result_rejects (a result with a figure of the wrong type, a key the
contract lacks, or a missing setting fails), profiles_valid (every shipped profile validates),
profile_rejects (a figure without its source, a negative link factor, a device without its peak
fail). Validation is python3-jsonschema's (Draft 2020-12), independent of the C writers."""
import copy
import glob
import json
import os
import subprocess
import sys
import tempfile

import jsonschema

bs, src, case = sys.argv[1], sys.argv[2], sys.argv[3]
V = jsonschema.Draft202012Validator


def fail(msg):
    print(f"schema.py {case}: {msg}")
    sys.exit(1)


def load(path):
    with open(path) as f:
        return json.load(f)


def errors(doc, schema):
    return [f"{list(e.path)}: {e.message[:160]}" for e in V(schema).iter_errors(doc)]


def must_fail(doc, schema, what):
    if not errors(doc, schema):
        fail(f"{what}: validated, but the schema must reject it")


result_schema = load(os.path.join(src, "docs/schema/result.schema.json"))
profile_schema = load(os.path.join(src, "docs/schema/profile.schema.json"))
V.check_schema(result_schema)
V.check_schema(profile_schema)


def sim(tmp, *args):
    out = os.path.join(tmp, "r.json")
    p = subprocess.run([bs, "sim", os.path.join(src, "experiments/quickstart.ini"), "--quiet", "--out", out, *args],
                       capture_output=True, text=True)
    if p.returncode not in (0,):
        fail(f"sim exit {p.returncode}: {p.stderr[-400:]}")
    return load(out)


with tempfile.TemporaryDirectory() as tmp:
    if case == "result_current":
        p = subprocess.run([bs, "schema", "result"], capture_output=True, text=True)
        if p.returncode or json.loads(p.stdout) != result_schema:
            fail("docs/schema/result.schema.json is not what `burstsim schema result` prints: regenerate it "
                 "(build/burstsim schema result > docs/schema/result.schema.json)")
    elif case == "result_valid":
        # ok and refused points (ulysses above its head count), explain on, one sweep
        doc = sim(tmp, "--set", "parallel.gpus=32,64", "--set", "parallel.method=ring,ulysses", "--set",
                  "parallel.ulysses_degree=64", "--explain")
        status = {r["status"] for r in doc["results"]}
        if status != {"ok", "refused"}:
            fail(f"the sweep's statuses are {status}, not ok and refused")
        checked = [("sim sweep", doc)]
        out = os.path.join(tmp, "s.json")
        p = subprocess.run([bs, "search", os.path.join(src, "experiments/quickstart.ini"), "--quiet", "--set",
                            "parallel.gpus=32", "--set", "parallel.method=burst,ring", "--top", "2", "--out", out],
                           capture_output=True, text=True)
        if p.returncode:
            fail(f"search exit {p.returncode}: {p.stderr[-400:]}")
        checked.append(("search", load(out)))
        for f in sorted(glob.glob(os.path.join(src, "tests/cli/data/*.json"))):
            checked.append((os.path.basename(f), load(f)))
        for what, d in checked:
            e = errors(d, result_schema)
            if e:
                fail(f"{what}: " + "; ".join(e[:5]))
        print(f"schema.py {case}: {len(checked)} result files validate")
    elif case == "result_rejects":
        doc = sim(tmp, "--set", "parallel.gpus=32", "--set", "parallel.method=ring")
        r = doc["results"][0]
        bad = copy.deepcopy(doc)
        bad["results"][0]["time_s"]["step"] = "fast"
        must_fail(bad, result_schema, "time_s.step as a string")
        bad = copy.deepcopy(doc)
        bad["results"][0]["comm_bytes"]["per_rank_max_sent"] = 1.5
        must_fail(bad, result_schema, "a byte count that is not an integer")
        bad = copy.deepcopy(doc)
        bad["results"][0]["speedup"] = 2
        must_fail(bad, result_schema, "a key the contract lacks")
        bad = copy.deepcopy(doc)
        del bad["results"][0]["method"]
        must_fail(bad, result_schema, "a result without its method")
        if errors(doc, result_schema):
            fail("the unmodified result does not validate")
        if r["status"] != "ok":
            fail("the point did not run")
    elif case == "profiles_valid":
        files = sorted(glob.glob(os.path.join(src, "calib/profiles/*.json")) +
                       glob.glob(os.path.join(src, "calib/profiles/measured/*.json")))
        if len(files) < 5:
            fail(f"only {len(files)} profiles found")
        for f in files:
            e = errors(load(f), profile_schema)
            if e:
                fail(f"{os.path.relpath(f, src)}: " + "; ".join(e[:5]))
        print(f"schema.py {case}: {len(files)} profiles validate")
    elif case == "profile_rejects":
        doc = load(os.path.join(src, "calib/profiles/h100-sxm.json"))
        bad = copy.deepcopy(doc)
        del bad["device"]["peak_flops"]["source"]
        must_fail(bad, profile_schema, "a figure without its source")
        bad = copy.deepcopy(doc)
        bad["links"]["nvlink"]["factors"][0]["bandwidth"] = -1
        must_fail(bad, profile_schema, "a negative link factor")
        bad = copy.deepcopy(doc)
        del bad["device"]["peak_flops"]
        must_fail(bad, profile_schema, "a device without its peak")
        bad = copy.deepcopy(doc)
        bad["kernels"]["attn_fwd"]["tables"][0]["tflops"][0] = "many"
        must_fail(bad, profile_schema, "a rate that is not a number")
    else:
        fail("no such case")
print(f"schema.py {case}: ok")
