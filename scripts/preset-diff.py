#!/usr/bin/env python3
"""Compares two runs of scripts/preset-outputs.sh (a refactor must leave every preset's
output unchanged).

    scripts/preset-diff.py BEFORE_DIR AFTER_DIR

Every preset's stdout and every text file it wrote (CSV, JSON, TXT; not images) must be
equal, except what measures the machine rather than the simulation: wall-clock times,
events or deliveries per second, peak memory, and the paths of plots. Those lines,
CSV columns and JSON keys are masked on both sides. Exits 1 and prints a unified diff
per differing file when anything else differs; prints the wall time of each preset
before and after.
"""
import difflib
import os
import re
import sys

# A line that reports how fast or big the run was on this machine, not what it simulated.
MACHINE_LINE = re.compile(
    r"wall|events/s|deliveries/s|packets/s|peak memory|RSS|MiB|^plot: |^no plot|^outputs in ",
    re.IGNORECASE,
)
MACHINE_COLUMN = re.compile(r"^(wall_s|wall_ms|setup_s|events_per_s|elapsed.*)$")
MACHINE_JSON_KEY = re.compile(r'^\s*"(wall_s|setup_s|events_per_s|wall_ms)"\s*:')
TEXT = (".csv", ".json", ".txt", ".stdout", ".md", ".dat")


def normalise(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    if path.endswith(".csv") and lines:
        header = lines[0].split(",")
        drop = {i for i, h in enumerate(header) if MACHINE_COLUMN.match(h.strip())}
        if drop:
            lines = [
                ",".join(c for i, c in enumerate(l.split(",")) if i not in drop) for l in lines
            ]
        return lines
    if path.endswith(".json"):
        return [l for l in lines if not MACHINE_JSON_KEY.match(l)]
    return [l for l in lines if not MACHINE_LINE.search(l)]


def files(root):
    out = {}
    for dp, _, fns in os.walk(root):
        for f in fns:
            p = os.path.join(dp, f)
            rel = os.path.relpath(p, root)
            if rel.endswith(TEXT):
                out[rel] = p
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    before, after = files(sys.argv[1]), files(sys.argv[2])
    # A preset run on one side only (or still running: no .time yet) is reported, not compared.
    ran = lambda d: {f[: -len(".time")] for f in os.listdir(d) if f.endswith(".time")}
    both = ran(sys.argv[1]) & ran(sys.argv[2])
    for name in sorted(ran(sys.argv[1]) ^ ran(sys.argv[2])):
        print(f"not compared (run on one side only): {name}")
    preset_of = lambda rel: rel.split(os.sep)[0].removesuffix(".stdout").removesuffix(".stderr")
    before = {k: v for k, v in before.items() if preset_of(k) in both}
    after = {k: v for k, v in after.items() if preset_of(k) in both}
    bad = 0
    for rel in sorted(set(before) | set(after)):
        if rel not in before or rel not in after:
            print(f"only in {'before' if rel in before else 'after'}: {rel}")
            bad += 1
            continue
        a, b = normalise(before[rel]), normalise(after[rel])
        if a != b:
            bad += 1
            print(f"DIFFERS: {rel}")
            sys.stdout.writelines(
                l + "\n" for l in list(difflib.unified_diff(a, b, "before", "after", lineterm=""))[:60]
            )
    print(f"{len(both)} presets, {len(set(before) | set(after))} files compared, {bad} differ")
    for name in sorted(both):
        t = name + ".time"
        tb = open(os.path.join(sys.argv[1], t)).read().split()
        ta = open(os.path.join(sys.argv[2], t)).read().split()
        print(f"  {name:20} before {tb[0]:4} {tb[-1]:>8} ms   after {ta[0]:4} {ta[-1]:>8} ms")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
