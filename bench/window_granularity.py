#!/usr/bin/env python3
"""How much of rope_window's QK work the wgmma form can skip, from the window table alone.

The wgmma kernel (rope.cuh WindowCut) skips whole 16-dim k steps (8 interleaved pairs) per
warpgroup tile (64 query rows x 128 keys), from the first pair that is in the window of some
cell of the tile. This counts, for causal attention of length N, the share of QK k steps it
still issues (s'), and the speedup a kernel with no other overhead would reach, 2 / (1 + s'),
next to the per-cell ceiling 2 / (1 + s) that `attnfuse window-table` prints. With
--corrections it also counts the pairs the cut takes back per cell (WindowCut::corr: multiplied,
and out of the window of some unmasked cell of the warp's 16 rows), per warp and tile, and how
much of that work sits on the diagonal tile and the one before it. No GPU needed.

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


def abs_delta_range(q_lo, q_hi, k_lo, k_hi):
    d_lo, d_hi = q_lo - k_hi, q_hi - k_lo
    return (d_lo if d_lo > 0 else (-d_hi if d_hi < 0 else 0)), max(-d_lo, d_hi)


def corrected_pairs(limits, n, keys, pairs_per_step, steps):
    """Corrected pairs per warp and tile (causal, q_offset 0, 128-row blocks of two 64-row
    warpgroups of four 16-row warps), as window_cut makes them with causal Δ ranges, and the
    share of that work on diagonal distances 0, 1 and 2+ (in key tiles)."""
    by_dist = collections.Counter()
    tiles = 0
    for qt in range(n // 128):
        for kt in range(qt + 1):
            tiles += 1
            k_lo, k_hi = keys * kt, keys * kt + keys - 1
            for wg in range(2):
                g_lo = 128 * qt + 64 * wg
                g_min, _ = abs_delta_range(g_lo, g_lo + 63, k_lo, max(k_lo, min(k_hi, g_lo + 63)))
                kept = [lim >= g_min for lim in limits]
                first = next((p for p, k in enumerate(kept) if k), len(limits))
                lead = min(first // pairs_per_step, steps - 1)
                for w in range(4):
                    w_lo = g_lo + 16 * w
                    _, w_max = abs_delta_range(w_lo, w_lo + 15, k_lo, max(k_lo, min(k_hi, w_lo + 15)))
                    c = 0
                    for p, lim in enumerate(limits):
                        in_lead = lead * pairs_per_step <= p < (lead + 1) * pairs_per_step
                        multiplied = p >= lead * pairs_per_step and (kept[p] or not in_lead)
                        c += multiplied and lim < w_max
                    by_dist[min(qt - kt, 2)] += c
    total = sum(by_dist.values())
    return total / (8 * tiles), {d: by_dist[d] / total for d in (0, 1, 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default="build/bin/attnfuse")
    ap.add_argument("--config", required=True)
    ap.add_argument("--k", type=float, default=1.0)
    ap.add_argument("--seq-len", default="8192,32768,131072")
    ap.add_argument("--rows", type=int, default=64, help="query rows per warpgroup tile")
    ap.add_argument("--keys", type=int, default=128, help="keys per tile")
    ap.add_argument("--corrections", action="store_true", help="also count the corrected pairs (slow at 128k)")
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
        if a.corrections:
            per_tile, share = corrected_pairs(limits, n, a.keys, 8, steps)
            print(f"{'':>8} corrected pairs per warp and tile {per_tile:.3f}; of that work: diagonal tile "
                  f"{share[0]:.0%}, the one before {share[1]:.0%}, the rest {share[2]:.0%}")


if __name__ == "__main__":
    main()
