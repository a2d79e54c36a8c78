#!/usr/bin/env python3
"""Where a decode call's time goes, from bench/experiments/decode_phase_probe.patch's PROBE lines.

The patched decode kernel prints, from thread 0 of every block, its %globaltimer (ns) at seven
points: t0 entry, t1 after griddepcontrol.wait, t2 before the main loop (Q loaded, barriers up,
first copies issued), t3 after the main loop, t4 after its partial (or final) rows are written,
t5 after its part is counted (split calls; 0 otherwise), t6 at the end (after the merge, for the
block that counts last). This script groups the lines into calls (a call's blocks end their wait
within microseconds of each other; calls are a kernel's length apart), drops the first calls as
warm-up, and prints per-phase medians over the calls: the spread of block starts, each phase's
median and slowest block, the merge, the call's span from the first wait to the last block's end,
and the gap to the next call's first wait (launch latency as the GPU sees it).

Since the twenty-fifth session the patch also has lane 0 of each warp of a tile's last block
print a MERGE line: the warp's rows (1 or 2), its t5 and four %globaltimer reads inside
SplitMerge::rows_of_warp, each taken once the value of the step before it is in a register:
m0 the first loads (the LSEs and the first 8 parts' rows) landed, m1 the weights computed, m2
the row pass done (the later parts' loads and the sums), m3 the stores issued. The script
prints their medians over every merging warp after the warm-up calls. Those printf calls run
before the block's t6, so with MERGE lines the PROBE "merge" and "span" rows include them; read
the merge from the MERGE rows then.
Usage: python3 bench/decode_phase_probe.py RAW.txt [--warmup N]   (RAW: the kernel's stdout)
"""
import argparse
import statistics
import sys


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--gap-ns", type=int, default=3000, help="a new call starts after this gap in wait ends")
    a = ap.parse_args()
    recs, warp_merges = [], []
    for line in open(a.raw, errors="replace"):
        f = line.split()
        if len(f) == 11 and f[0] == "MERGE":
            t5, m0, m1, m2, m3 = (int(x) for x in f[6:11])
            warp_merges.append(dict(rows=int(f[5]), t5=t5, d=(m0 - t5, m1 - m0, m2 - m1, m3 - m2, m3 - t5)))
        if len(f) == 13 and f[0] == "PROBE":
            bx, by, bz, sm, last = (int(x) for x in f[1:6])
            t = [int(x) for x in f[6:13]]
            recs.append(dict(b=(bx, by, bz), sm=sm, last=last, t=t))
    if not recs:
        sys.exit("no PROBE lines (was the patched kernel used? ATTNFUSE_KERNEL_DIR)")
    recs.sort(key=lambda r: r["t"][1])
    calls, cur = [], [recs[0]]
    for r in recs[1:]:
        if r["t"][1] - cur[-1]["t"][1] > a.gap_ns:
            calls.append(cur)
            cur = []
        cur.append(r)
    calls.append(cur)
    steps = sorted({abs(x - y) for r in recs for x, y in zip(r["t"][1:], r["t"][:-1]) if x and y and x != y})
    print(f"{len(recs)} block records in {len(calls)} calls; blocks per call {sorted({len(c) for c in calls})}; "
          f"smallest nonzero timer step {steps[0] if steps else '?'} ns")
    rows = {k: [] for k in ("blocks", "entry_spread", "waited", "pre", "pre_max", "loop", "loop_max", "write",
                            "count", "merge", "span", "gap_next", "last_loop_end_to_end")}
    use = calls[a.warmup:-1] if len(calls) > a.warmup + 1 else calls
    for i, c in enumerate(calls):
        if c not in use:
            continue
        nxt = calls[i + 1] if i + 1 < len(calls) else None
        t = [r["t"] for r in c]
        rows["blocks"].append(len(c))
        rows["entry_spread"].append(max(x[0] for x in t) - min(x[0] for x in t))
        rows["waited"].append(med([x[1] - x[0] for x in t]))
        rows["pre"].append(med([x[2] - x[1] for x in t]))
        rows["pre_max"].append(max(x[2] - x[1] for x in t))
        rows["loop"].append(med([x[3] - x[2] for x in t]))
        rows["loop_max"].append(max(x[3] - x[2] for x in t))
        rows["write"].append(med([x[4] - x[3] for x in t]))
        counted = [x[5] - x[4] for x in t if x[5]]
        if counted:
            rows["count"].append(med(counted))
        merges = [r["t"][6] - r["t"][5] for r in c if r["last"] == 1 and r["t"][5]]
        if merges:
            rows["merge"].append(max(merges))
        start, end = min(x[1] for x in t), max(x[6] for x in t)
        rows["span"].append(end - start)
        rows["last_loop_end_to_end"].append(end - max(x[3] for x in t))
        if nxt:
            rows["gap_next"].append(min(r["t"][1] for r in nxt) - end)
    print(f"medians over {len(use)} calls (ns):")
    notes = {
        "blocks": "blocks per call",
        "entry_spread": "last block's entry - first block's entry",
        "waited": "entry -> end of griddepcontrol.wait (median block)",
        "pre": "wait -> main loop (Q, barriers, first copies), median block",
        "pre_max": "... slowest block",
        "loop": "main loop, median block",
        "loop_max": "... slowest block",
        "write": "key-warp merge + rows written, median block",
        "count": "threadfence + count on the tile's counter, median block",
        "merge": "the merge of the block that counted last (slowest tile)",
        "span": "first wait end -> last block's end",
        "last_loop_end_to_end": "last main loop's end -> call's end (the tail)",
        "gap_next": "call's end -> next call's first wait end",
    }
    for k, v in rows.items():
        if v:
            print(f"  {k:22} {med(v):10.0f}   {notes[k]}")
    if warp_merges:
        first = min(r["t"][1] for r in use[0]) if use else 0
        kept = [m for m in warp_merges if m["t5"] >= first]
        names = ("first loads landed", "weights", "row pass (later loads, sums)", "stores issued", "whole merge")
        for nrows in sorted({m["rows"] for m in kept}):
            ms = [m["d"] for m in kept if m["rows"] == nrows]
            print(f"merging warps with {nrows} row(s) each: {len(ms)} warp records, medians (ns) from t5:")
            for i, n in enumerate(names):
                print(f"  {n:30} {med([d[i] for d in ms]):8.0f}   (max {max(d[i] for d in ms)})")


if __name__ == "__main__":
    main()
