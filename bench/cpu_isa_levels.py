#!/usr/bin/env python3
"""The CPU kernel at each instruction-set level it is compiled for (src/cpu/isa.hpp).

One binary holds the kernel for x86-64-v4 (avx512), x86-64-v3 (avx2) and SSE2 (baseline) and
runs the best one the CPU supports; ATTNFUSE_CPU_ISA picks another. This times each level this
machine runs on a few typical calls, in the same build:

1. every (level, case) is checked against the float64 reference first (`attnfuse bench` with its
   check, on one KV group of the case's heads with lengths halved until the reference's cell
   limit allows it; the run stops on a failed check);
2. the levels are then timed in alternating rounds (`attnfuse bench --no-check`, the median of
   --reps runs after its warm-up), and the median over rounds is reported.

Results go to bench/results/cpu_isa_levels_<date>.json and .md with the date, the machine, the
commit and the command.

Usage: python3 bench/cpu_isa_levels.py [--cli build/bin/attnfuse] [--threads 2] [--rounds 3]
                                       [--reps 5] [--quick]
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from cpu_bench import attnfuse_bench  # noqa: E402
from cpu_vs_torch import git_commit, machine  # noqa: E402  (no torch needed for these two)

LEVELS = ["avx512", "avx2", "baseline"]
# (name, program, shape B,Hq,Hkv,Nq,Nk,D, dtype)
CASES = [
    ("causal gpt2-like fp32", "softmax(causal(scaled_dot_product(Q, K))) @ V", (1, 8, 8, 2048, 2048, 64), "fp32"),
    ("causal llama3-8b bf16", "softmax(causal(scaled_dot_product(Q, K))) @ V", (1, 32, 8, 2048, 2048, 128), "bf16"),
    ("dense llama3-8b fp32", "softmax(scaled_dot_product(Q, K)) @ V", (1, 32, 8, 1024, 1024, 128), "fp32"),
    ("causal rope llama3-8b fp32", "softmax(causal(rope(Q, K, base=500000))) @ V", (1, 32, 8, 1024, 1024, 128),
     "fp32"),
    ("decode llama3-8b bf16", "softmax(causal(scaled_dot_product(Q, K))) @ V", (8, 32, 8, 1, 16384, 128), "bf16"),
]


def bench(cli, level, program, shape, dtype, threads, reps, check):
    """(median ms, GFLOP/s) of `attnfuse bench` at `level` (checked first when `check`)."""
    ms, gflops, _ = attnfuse_bench(cli, program, shape, threads, reps, check, extra=["--dtype", dtype],
                                   env=dict(os.environ, ATTNFUSE_CPU_ISA=level), expect=f"device cpu ({level})")
    return ms, gflops


CHECK_CELLS = 3.3e7  # `attnfuse bench` checks calls up to about this many cells


def check_shape(shape):
    """One KV group of the case (B 1, Hkv 1, its Hq/Hkv query heads), lengths halved to fit."""
    b, hq, hkv, nq, nk, d = shape
    g = hq // hkv
    while g * nq * nk > CHECK_CELLS:
        nq, nk = max(1, nq // 2), max(1, nk // 2)
    return (1, g, 1, nq, nk, d)


def supported(cli, level):
    env = dict(os.environ, ATTNFUSE_CPU_ISA=level)
    out = subprocess.run([cli, "run", "softmax(scaled_dot_product(Q, K)) @ V", "--shape", "1,1,1,4,4,16",
                          "--device", "cpu"], capture_output=True, text=True, env=env)
    return out.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "attnfuse"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="one round, two reps, the first two cases")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    cases = CASES[:2] if a.quick else CASES
    rounds, reps = (1, 2) if a.quick else (a.rounds, a.reps)
    levels = [l for l in LEVELS if supported(a.cli, l)]
    print("levels this machine runs:", ", ".join(levels), flush=True)

    for name, program, shape, dtype in cases:  # every call checked before any is timed
        for level in levels:
            bench(a.cli, level, program, check_shape(shape), dtype, a.threads, 1, True)
            print(f"checked: {name} at {level}", flush=True)

    times = {(c[0], l): [] for c in cases for l in levels}
    rates = {(c[0], l): [] for c in cases for l in levels}
    for r in range(rounds):
        for name, program, shape, dtype in cases:
            for level in levels if r % 2 == 0 else reversed(levels):
                ms, gf = bench(a.cli, level, program, shape, dtype, a.threads, reps, False)
                times[(name, level)].append(ms)
                rates[(name, level)].append(gf)
                print(f"round {r + 1}: {name} {level}: {ms:.3f} ms, {gf:.1f} GFLOP/s", flush=True)

    rows = []
    for name, program, shape, dtype in cases:
        row = {"case": name, "program": program, "shape": shape, "dtype": dtype, "levels": {}}
        for level in levels:
            row["levels"][level] = {"median_ms": statistics.median(times[(name, level)]),
                                    "gflops": statistics.median(rates[(name, level)]),
                                    "rounds_ms": times[(name, level)]}
        rows.append(row)

    now = datetime.datetime.now(datetime.timezone.utc)
    record = {"date": now.isoformat(timespec="seconds"), "machine": machine(), "commit": git_commit(),
              "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]), "threads": a.threads,
              "rounds": rounds, "reps": reps, "rows": rows}
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, f"cpu_isa_levels_{now.date().isoformat()}")
    with open(stem + ".json", "w") as f:
        json.dump(record, f, indent=2)
    mi = record["machine"]
    with open(stem + ".md", "w") as f:
        f.write(f"# The CPU kernel per instruction-set level, {record['date']}\n\n")
        f.write(f"- machine: {mi.get('Model name', mi['platform'])}, {mi['cpus_online']} CPUs online, "
                f"{a.threads} threads\n- commit: {record['commit']}\n- command: `python3 {record['command']}`\n"
                f"- every (level, case) checked against the float64 reference before timing; medians of "
                f"{rounds} alternating rounds of {reps} runs\n\n")
        f.write("| case | shape | dtype | " + " | ".join(f"{l} ms | {l} GFLOP/s" for l in levels) +
                " | " + " | ".join(f"{l} / {levels[0]}" for l in levels[1:]) + " |\n")
        f.write("| --- | --- | --- | " + " | ".join("---: | ---:" for _ in levels) + " | " +
                " | ".join("---:" for _ in levels[1:]) + " |\n")
        for row in rows:
            lv = row["levels"]
            cells = " | ".join(f"{lv[l]['median_ms']:.2f} | {lv[l]['gflops']:.1f}" for l in levels)
            ratios = " | ".join(f"{lv[l]['gflops'] / lv[levels[0]]['gflops']:.2f}" for l in levels[1:])
            f.write(f"| {row['case']} | {','.join(map(str, row['shape']))} | {row['dtype']} | {cells} | {ratios} |\n")
    print(open(stem + ".md").read())


if __name__ == "__main__":
    main()
