#!/usr/bin/env python3
"""links.py SRCDIR -- every relative link and anchor in the README and docs/ resolves.

A link [text](path), [text](path#anchor) or [text](#anchor) in README.md, CONTRIBUTING.md or a
docs/ page must name a file of the repository, and its anchor a heading of that file, as GitHub
makes them (lowercase; punctuation other than '-' and '_' dropped; spaces to '-'; a repeated
heading gets -1, -2, ...). An image ![alt](path) must name a file too. Web links are not fetched (CI has no network)."""
import glob
import os
import re
import sys

src = sys.argv[1]
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def slugs(path):
    seen, out = {}, set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line.strip()):
                in_code = not in_code
                continue
            m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if in_code or not m:
                continue
            text = re.sub(r"`([^`]*)`", r"\1", m.group(2))
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
            s = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def links(path):
    in_code = False
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if FENCE.match(line.strip()):
                in_code = not in_code
                continue
            if in_code or line.startswith("    "):
                continue
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                yield no, m.group(1)


pages = [os.path.join(src, p) for p in ("README.md", "CONTRIBUTING.md")]
pages += sorted(glob.glob(os.path.join(src, "docs", "**", "*.md"), recursive=True))
bad, n = [], 0
for page in pages:
    if not os.path.exists(page):
        continue
    for no, target in links(page):
        if re.match(r"^[a-z]+:", target):
            continue
        n += 1
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        where = f"{os.path.relpath(page, src)}:{no}: {target}"
        if not os.path.exists(dest):
            bad.append(f"{where}: no such file")
        elif anchor and dest.endswith(".md") and anchor not in slugs(dest):
            bad.append(f"{where}: no heading makes the anchor #{anchor}")
for b in bad:
    print(b)
print(f"links.py: {n} relative links in {len(pages)} pages, {len(bad)} broken")
sys.exit(1 if bad else 0)
