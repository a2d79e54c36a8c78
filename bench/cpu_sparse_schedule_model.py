#!/usr/bin/env python3
"""Model of the CPU fused kernel's dynamic schedule on a BigBird mask (issue 5).

The CPU kernel hands out (query tile, head) items to an OpenMP team with schedule(dynamic, 1).
This models that schedule: item cost = active keys of its tile's mask row, each thread takes the
next item when it frees up. It compares the old order (latest query tiles first, the causal rule)
with the heaviest-first order that block-sparse calls now use, at the BigBird point the GPU
benchmark uses (GPT-2 heads, N 4k, 128-blocks: global row and column, diagonal, one random block
per row; the CPU's 64-row tiles). A model, not a measurement: the build machine has 2 cores,
where both orders measure the same (858-889 vs 875-886 ms, `attnfuse bench --device cpu`).

Usage: python3 bench/cpu_sparse_schedule_model.py
"""
import heapq
import random


def bigbird(n, seed=4096):
    g = [[0] * n for _ in range(n)]
    for k in range(n):
        g[0][k] = g[k][0] = g[k][k] = 1
    rng = random.Random(seed)
    for q in range(n):
        g[q][rng.randrange(n)] = 1
    return g


def makespan(costs, threads):
    free = [0.0] * threads
    for c in costs:
        t = heapq.heappop(free)
        heapq.heappush(free, t + c)
    return max(free)


def main():
    grid, heads = bigbird(32), 12
    tiles = [sum(grid[t // 2]) for t in range(64)]  # two 64-row tiles per 128-row block
    old = [c for c in reversed(tiles) for _ in range(heads)]
    new = sorted(old, reverse=True)
    for threads in (2, 16, 64, 128):
        ideal = sum(old) / threads
        print(f"threads {threads:4d}: latest-first {makespan(old, threads) / ideal:.3f} x ideal, "
              f"heaviest-first {makespan(new, threads) / ideal:.3f} x ideal")


if __name__ == "__main__":
    main()
