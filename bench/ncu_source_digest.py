#!/usr/bin/env python3
"""Digest of an Nsight Compute source page (`ncu -i R --page source --csv --print-source sass`):
warp-stall samples by stall reason, by opcode, and the SASS lines that hold the most samples
(with how often each executed, to tell per-block code from the key-tile loop).
Usage: python3 bench/ncu_source_digest.py sass.csv[.gz] [top_lines]"""
import collections
import csv
import gzip
import sys


def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 50
    with (gzip.open(path, "rt", errors="replace") if path.endswith(".gz") else open(path, errors="replace")) as f:
        rows = list(csv.reader(f))
    hi = next(i for i, r in enumerate(rows) if "Source" in [c.strip() for c in r])
    head = rows[hi]
    data = [r for r in rows[hi + 1:] if len(r) == len(head)]
    col = {h: i for i, h in enumerate(head)}
    samples, src, execd = col["Warp Stall Sampling (All Samples)"], col["Source"], col["Instructions Executed"]
    reasons = [i for i, h in enumerate(head) if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(num(r[samples]) for r in data) or 1.0
    print(f"{len(data)} SASS lines, {total:.0f} warp-stall samples")

    print("\nby stall reason (share of all samples):")
    by_reason = collections.Counter({head[i]: sum(num(r[i]) for r in data) for i in reasons})
    for name, v in by_reason.most_common(12):
        print(f"  {name:26} {100 * v / total:5.1f}%")

    print("\nby opcode:")
    by_op = collections.Counter()
    for r in data:
        words = [w for w in r[src].split() if not w.startswith("@")]
        by_op[words[0].split(".")[0] if words else "?"] += num(r[samples])
    for name, v in by_op.most_common(16):
        print(f"  {name:12} {100 * v / total:5.1f}%")

    print(f"\ntop {top} lines: share, times executed (warp level), top reasons, SASS")
    for r in sorted(data, key=lambda r: -num(r[samples]))[:top]:
        rs = sorted(((num(r[i]), head[i][6:]) for i in reasons), reverse=True)[:2]
        why = " ".join(f"{n}={v:.0f}" for v, n in rs if v > 0)
        print(f"  {100 * num(r[samples]) / total:5.2f}% {num(r[execd]):>10.0f}  {why:32} {r[src].strip()[:80]}")


if __name__ == "__main__":
    main()
