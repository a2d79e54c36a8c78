#!/usr/bin/env python3
"""Summarises a decode phase-probe log whose kernels also stamp the producer warp (the thirty-
second session's diagnosis of a settled paged call's prologue). Input: the raw output of
bench/ncu_decode_target.py with the probe templates (PROBE lines: thread 0's stamps t0..t6;
PROD lines: the producer warp's lane 0 at its entry, after its wait, after its first tile's
copies were issued, after the block barrier, after its last issue). The k-th PROD line of a block
is matched with the k-th PROBE line of the same block (one of each per call). Prints medians, ns,
over the calls after --warmup, relative to thread 0's wait end (t1)."""
import argparse
import collections
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--warmup", type=int, default=4)
    a = ap.parse_args()
    probe, prod = collections.defaultdict(list), collections.defaultdict(list)
    for line in open(a.raw):
        f = line.split()
        if len(f) == 13 and f[0] == "PROBE":
            probe[tuple(f[1:4])].append([int(x) for x in f[6:13]])
        elif len(f) == 9 and f[0] == "PROD":
            prod[tuple(f[1:4])].append([int(x) for x in f[4:9]])
    rows = collections.defaultdict(list)
    for key, ts in probe.items():
        ps = prod.get(key, [])
        for k, t in enumerate(ts):
            if k < a.warmup:
                continue
            rows["thread 0: wait end -> main loop (pre)"].append(t[2] - t[1])
            if k < len(ps):
                p = ps[k]
                rows["producer entry - thread 0's wait end"].append(p[0] - t[1])
                rows["producer wait end - thread 0's wait end"].append(p[1] - t[1])
                rows["producer: wait end -> first tile issued"].append(p[2] - p[1])
                rows["producer: first tile issued -> past the block barrier"].append(p[3] - p[2])
                rows["thread 0: main loop start - producer past the barrier"].append(t[2] - p[3])
                rows["producer: last issue - thread 0's main loop start"].append(p[4] - t[2])
    for name, v in rows.items():
        print(f"  {name:58s} {statistics.median(v):9.0f}  (n {len(v)})")


if __name__ == "__main__":
    main()
