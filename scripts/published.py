#!/usr/bin/env python3
"""published.py — burstsim's predictions against whole-job measurements other teams published.

Every case of experiments/published/figures.json (BurstAttention's first-token latencies, BurstEngine's
attention benchmarks, Meta's Llama 3.1 405B context-parallel inference; each group cites its public
source) runs as one `burstsim sim` point of the group's setup, and this prints predicted, published and
the error, as a Markdown table (docs/fidelity.md's "Against published measurements" section quotes it),
then the median and the worst error of each group.
A group whose setup names the attention kernel the job ran (model.attention_kernel) also says, in the
note, what the profile's default kernel predicts. No
profile parameter is fitted to these figures: they are the test, not an input. A case the simulator
refuses (a mechanism it does not model) or predicts out of memory is a row with the reason, not a gap.
Python 3 standard library only.

    scripts/published.py [--build build] [--quick] [--group NAME] [--set section.key=value ...]
                         [--figures FILE]

--quick runs the first case of each group (ctest); --set applies to every case after the group's own
settings (e.g. --set model.attention_kernel=fa3 for the FlashAttention-3 column of docs/fidelity.md).
Exit 0 when every case ran or was refused with a reason; 1 when a run failed otherwise; 2 when the
figures file is malformed.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGURES = os.path.join(ROOT, "experiments", "published", "figures.json")
QUANTITIES = ("step_s", "fwd_s", "bwd_s")


def bad(msg):
    print("published: %s: %s" % (bad.path, msg), file=sys.stderr)
    sys.exit(2)


bad.path = FIGURES


def check_figures(doc):
    """The figures file's shape: every group cites a source, every case has a label, settings and a
    published number (or null with the note saying why there is none)."""
    if not isinstance(doc.get("groups"), list) or not doc["groups"]:
        bad("no groups")
    for g in doc["groups"]:
        for key in ("name", "title", "source", "quantity", "unit", "setup", "base", "cases"):
            if key not in g:
                bad("group %s: no %s" % (g.get("name", "?"), key))
        if g["quantity"] not in QUANTITIES:
            bad("group %s: quantity %s is not one of %s" % (g["name"], g["quantity"], ", ".join(QUANTITIES)))
        if not g["cases"]:
            bad("group %s: no cases" % g["name"])
        for c in g["cases"]:
            if not c.get("label") or not isinstance(c.get("set"), dict):
                bad("group %s: a case without label or settings" % g["name"])
            pub = c.get("published", "missing")
            if pub is None and not c.get("published_note"):
                bad("case %s: published is null without a published_note" % c["label"])
            if pub is not None and (not isinstance(pub, (int, float)) or pub <= 0):
                bad("case %s: published must be a positive number or null" % c["label"])


def write_ini(path, settings):
    sections = {}
    for key, value in settings.items():
        sec, _, name = key.partition(".")
        sections.setdefault(sec, []).append((name, value))
    with open(path, "w") as fh:
        for sec, kv in sections.items():
            fh.write("[%s]\n" % sec)
            for name, value in kv:
                fh.write("%s = %s\n" % (name, value))


def simulate(build, tmp, base, case_set, extra):
    """(predicted value or None, status, reason) of one case."""
    ini = os.path.join(tmp, "case.ini")
    out = os.path.join(tmp, "case.csv")
    write_ini(ini, base)
    args = [os.path.join(build, "burstsim"), "sim", ini, "--csv", out]
    for key, value in list(case_set.items()) + extra:
        args += ["--set", "%s=%s" % (key, value)]
    if os.path.exists(out):
        os.remove(out)
    p = subprocess.run(args, capture_output=True, text=True)
    if not os.path.exists(out):
        msg = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        return None, "error", msg
    with open(out) as fh:
        rows = list(csv.DictReader(fh))
    if len(rows) != 1:
        return None, "error", "%d result rows, expected 1" % len(rows)
    return rows[0], rows[0].get("status", ""), rows[0].get("error", "")


def fmt(v, unit):
    if v is None:
        return "-"
    return ("%.3f %s" if v < 10 else "%.2f %s" if v < 100 else "%.1f %s") % (v, unit)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true", help="the first case of each group")
    ap.add_argument("--group", action="append", default=[], help="only this group (repeatable)")
    ap.add_argument("--set", action="append", default=[], dest="sets", help="section.key=value for every case")
    ap.add_argument("--figures", default=FIGURES, help="the figures file (default experiments/published/figures.json)")
    a = ap.parse_args()
    bad.path = a.figures
    try:
        with open(a.figures) as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as e:
        bad("cannot read: %s" % e)
    if not isinstance(doc, dict):
        bad("not a JSON object")
    check_figures(doc)
    extra = []
    for s in a.sets:
        key, eq, value = s.partition("=")
        if not eq or "." not in key:
            print("published: --set %s: expected section.key=value" % s, file=sys.stderr)
            sys.exit(2)
        extra.append((key, value))
    groups = [g for g in doc["groups"] if not a.group or g["name"] in a.group]
    unknown = set(a.group) - {g["name"] for g in doc["groups"]}
    if unknown:
        print("published: no group %s" % ", ".join(sorted(unknown)), file=sys.stderr)
        sys.exit(2)
    counts = {"ok": 0, "refused": 0, "oom": 0, "error": 0}
    errors = []
    by_group = []  # (group name, [signed errors in % of the simulated cases with a published figure])
    print("| case | predicted | published | error | note |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for g in groups:
            print("| **%s** (%s) | | | | |" % (g["title"], g["source"]))
            by_group.append((g["name"], []))
            for c in g["cases"][:1] if a.quick else g["cases"]:
                row, status, reason = simulate(a.build, tmp, g["base"], c["set"], extra)
                pub = c["published"]
                got, err, note = None, "-", c.get("source", "")
                if row is not None and status == "ok" and row.get(g["quantity"]):
                    got = float(row[g["quantity"]])
                    if row.get("oom", "") in ("true", "1"):
                        note = "predicted out of memory; " + note
                        counts["oom"] += 1
                    else:
                        counts["ok"] += 1
                    if pub is not None:
                        err = "%+.1f %%" % (100.0 * (got - pub) / pub)
                        by_group[-1][1].append(100.0 * (got - pub) / pub)
                elif status == "refused":
                    counts["refused"] += 1
                    note = "refused: %s" % reason
                else:
                    counts["error"] += 1
                    errors.append("%s: %s %s" % (c["label"], status, reason))
                    note = "failed: %s %s" % (status, reason)
                kernel = g["base"].get("model.attention_kernel")
                if kernel and got is not None and not any(k == "model.attention_kernel" for k, _ in extra):
                    before, st, _ = simulate(a.build, tmp, g["base"], c["set"],
                                             extra + [("model.attention_kernel", "default")])
                    if before is not None and st == "ok" and before.get(g["quantity"]):
                        b = float(before[g["quantity"]])
                        note = "with the profile's default attention kernel (not %s): %s%s; %s" % (
                            kernel, fmt(b, g["unit"]),
                            " (%+.1f %%)" % (100.0 * (b - pub) / pub) if pub is not None else "", note)
                shown_pub = fmt(pub, g["unit"]) if pub is not None else c.get("published_note", "-")
                print("| %s | %s | %s | %s | %s |" % (c["label"], fmt(got, g["unit"]), shown_pub, err,
                                                     note.replace("|", "/").strip("; ")))
    total = sum(counts.values())
    print("\ncases: %d; simulated %d, out of memory %d, refused %d, failed %d" %
          (total, counts["ok"], counts["oom"], counts["refused"], counts["error"]))
    for name, errs in by_group:
        if errs:
            s = sorted(errs)
            mid = (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2
            worst = max(errs, key=abs)
            print("%s: %d compared, median error %+.1f %%, worst %+.1f %%" % (name, len(errs), mid, worst))
    print("not simulated: " + "; ".join(doc.get("not_simulated", [])))
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
