#!/usr/bin/env python3
"""readme-refresh.py BURSTSIM — rewrites the README's simulated outputs after a change that moves
predictions: the quickstart table (after "Part of its output here") and the output under every
"    $ burstsim ..." command, in the README and every docs/ page of the guide.
tests/cli/readme_tables.sh checks the same blocks; the model-scope
throughput example's figures are quoted in prose and checked there by value, so they are updated
by hand. Run from the repository root."""
import glob
import subprocess
import sys


def run(bs, args):
    out = subprocess.run([bs] + args, capture_output=True, text=True, timeout=600).stdout
    return out.rstrip("\n").split("\n")


def main():
    bs = sys.argv[1]
    for page in ["README.md"] + sorted(glob.glob("docs/*.md")):
        refresh(bs, page)


def refresh(bs, page):
    lines = open(page).read().split("\n")
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if "Part of its output here" in line:
            out.append(line)
            i += 1
            while i < len(lines) and not lines[i].startswith("    "):
                out.append(lines[i])
                i += 1
            block = []
            while i < len(lines) and lines[i].startswith("    "):
                block.append(lines[i][4:])
                i += 1
            rows = []
            for row in block[1:]:
                method, gpus = row.split()[:2]
                got = run(bs, ["sim", "experiments/quickstart.ini", "--quiet", "--set", "parallel.method=" + method,
                               "--set", "parallel.gpus=" + gpus])
                header = got[0]
                rows.append(got[1])
            out += ["    " + header] + ["    " + r for r in rows]
            continue
        if line.startswith("    $ burstsim "):
            out.append(line)
            args = line[len("    $ burstsim "):].split()
            i += 1
            while i < len(lines) and lines[i].startswith("    ") and not lines[i].startswith("    $ "):
                i += 1
            out += ["    " + g if g else "" for g in run(bs, args)]
            continue
        out.append(line)
        i += 1
    open(page, "w").write("\n".join(out))


if __name__ == "__main__":
    main()
