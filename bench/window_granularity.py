#!/usr/bin/env python3
"""How much of rope_window's QK work the wgmma form can skip, from the window table alone.

The wgmma kernel (rope.cuh WindowCut) skips whole 16-dim k steps (8 interleaved pairs) per
warpgroup tile (64 query rows x 128 keys), from the first pair that is in the window of some
cell of the tile. This counts, for causal attention of length N, the share of QK k steps it
still issues (s'), and the speedup a kernel with no other overhead would reach, 2 / (1 + s'),
next to the per-cell ceiling 2 / (1 + s) that `attnfuse window-table` prints. No GPU needed.

Usage: python3 bench/window_granularity.py --cli build/bin/attnfuse \
           --config examples/llama-3.2-3b-config.json --k 1 --seq-len 8192,32768,131072
"""
import argparse
import collections
import math
import subprocess


def table(cli, config, k, n):
    out = subprocess.run([cli, "window-table", "--config", config, "--k", str(k), "--seq-len", str(n)],
                         check=True, capture_output=True, text=True).stdout
    windows, s = [], None
    for line in out.splitlines():
        f = line.split()
        if len(f) == 5 and f[0].isdigit():
            windows.append(float(f[3]))
        if line.startswith("retained_share="):
            s = float(line.split("=")[1])
    return windows, s


def issued_share(limits, n, rows, keys, pairs_per_step, steps):
    # Tiles by their least |Δ| (every causal tile the kernel visits: key tiles up to the diagonal).
    count = collections.Counter()
    for r in range(n // rows):
        q_lo = rows * r
        for c in range((q_lo + rows - 1) // keys + 1):
            count[max(0, q_lo - (keys * c + keys - 1))] += 1
    issued = total = 0
    for g_min, m in count.items():
        first = next((p for p, lim in enumerate(limits) if lim >= g_min), len(limits))
        lead = min(first // pairs_per_step, steps - 1)
        issued += m * (steps - lead)
        total += m * steps
    return issued / total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default="build/bin/attnfuse")
    ap.add_argument("--config", required=True)
    ap.add_argument("--k", type=float, default=1.0)
    ap.add_argument("--seq-len", default="8192,32768,131072")
    ap.add_argument("--rows", type=int, default=64, help="query rows per warpgroup tile")
    ap.add_argument("--keys", type=int, default=128, help="keys per tile")
    a = ap.parse_args()
    print(f"# {a.config}, k={a.k:g}: warpgroup tiles of {a.rows} rows x {a.keys} keys, 8 pairs per k step")
    print(f"{'N':>8} {'s (cells)':>10} {'ceiling':>8} {'s (steps)':>10} {'no-overhead speedup':>20} {'of ceiling':>10}")
    for n in (int(x) for x in a.seq_len.split(",")):
        windows, s = table(a.cli, a.config, a.k, n)
        limits = [math.floor(w) for w in windows]
        steps = (2 * len(limits) + 15) // 16  # rotated k steps (full rotation: head_dim / 16)
        sp = issued_share(limits, n, a.rows, a.keys, 8, steps)
        ceil, best = 2 / (1 + s), 2 / (1 + sp)
        print(f"{n:>8} {s:>10.3f} {ceil:>8.3f} {sp:>10.3f} {best:>20.3f} {best / ceil:>10.1%}")


if __name__ == "__main__":
    main()
