#!/usr/bin/env python3
"""rope_window on vs off on the fused CPU backend, against the 2/(1+s) ceiling (issue 4).

The GPU figure the issue asks for is in bench/gpu_rope.py --suite window (H200). This is the
same comparison on the CPU kernel, whose time follows its arithmetic closely, so it shows what
the per-(query tile, key chunk) pruning saves when the QK product is on the critical path.

For each geometry (Llama-3.2-3B: Hq 24, Hkv 8, D 128, base 500000, llama3 scaling factor 32;
Qwen2.5-7B-1M: Hq 28, Hkv 4, base 1e7) and causal length N, B = 1, fp32, random normal inputs:

1. both programs are checked against the float64 reference first (`attnfuse bench` with its
   check, at one KV group of the geometry and at most 2048 rows, the reference's size limit);
2. `rope` and `rope_window(k)` are timed in alternating rounds (each `attnfuse bench --no-check`,
   the median of --reps runs after its warm-up) on the whole geometry;
3. `attnfuse window-table` gives the ceiling 2/(1+s) for the same config, k and N.

Reported: the medians over rounds, speedup = rope ms / rope_window ms and speedup / ceiling.
Results go to bench/results/cpu_rope_window_<date>.json and .md with the date, the machine,
the commit and the command.

Usage: python3 bench/cpu_rope_window.py [--cli build/bin/attnfuse] [--threads 2] [--rounds 3]
                                        [--reps 3] [--k 1] [--seq-len 2048,4096,8192] [--quick]
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from cpu_bench import attnfuse_bench  # noqa: E402
from cpu_vs_torch import git_commit, machine  # noqa: E402  (no torch needed for these two)

GEOMETRIES = {
    "llama-3.2-3b": {"config": "examples/llama-3.2-3b-config.json", "Hq": 24, "Hkv": 8, "D": 128},
    "qwen2.5-7b-1m": {"config": "examples/qwen2.5-7b-1m-config.json", "Hq": 28, "Hkv": 4, "D": 128},
}
ROPE = "softmax(causal(rope(Q, K))) @ V"
WINDOW = "softmax(causal(rope_window(Q, K, k={k}))) @ V"
CHECK_ROWS = 2048


def bench(cli, program, config, shape, threads, reps, check):
    """Median ms of `attnfuse bench` with the config's RoPE (checked first when `check`)."""
    return attnfuse_bench(cli, program, shape, threads, reps, check, extra=["--rope-config", config])[0]


def ceiling(cli, config, k, n):
    out = subprocess.run([cli, "window-table", "--config", config, "--k", str(k), "--seq-len", str(n)],
                         capture_output=True, text=True, check=True).stdout
    c = float(re.search(r"^ceiling_speedup=([0-9.]+)$", out, re.M).group(1))
    pruned = float(re.search(r"^pruned_share=([0-9.]+)$", out, re.M).group(1))
    return c, pruned


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "attnfuse"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--k", default="1")
    ap.add_argument("--seq-len", default="2048,4096,8192")
    ap.add_argument("--quick", action="store_true", help="N 1024 and 2048, one round")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    lengths = [1024, 2048] if args.quick else [int(x) for x in args.seq_len.split(",")]
    rounds = 1 if args.quick else args.rounds
    window = WINDOW.format(k=args.k)
    rows = []
    for name, g in GEOMETRIES.items():
        config = os.path.join(ROOT, g["config"])
        group = g["Hq"] // g["Hkv"]
        for n in lengths:
            m = min(n, CHECK_ROWS)
            for program in (ROPE, window):  # 1. checked first, at one KV group
                bench(args.cli, program, config, (1, group, 1, m, m, g["D"]), args.threads, 1, True)
            shape = (1, g["Hq"], g["Hkv"], n, n, g["D"])
            times = {"rope": [], "window": []}
            for _ in range(rounds):  # 2. alternating rounds
                times["rope"].append(bench(args.cli, ROPE, config, shape, args.threads, args.reps, False))
                times["window"].append(bench(args.cli, window, config, shape, args.threads, args.reps, False))
            c, pruned = ceiling(args.cli, config, args.k, n)
            rope_ms, window_ms = statistics.median(times["rope"]), statistics.median(times["window"])
            row = {"geometry": name, "N": n, "k": args.k, "rope_ms": rope_ms, "window_ms": window_ms,
                   "rope_rounds_ms": times["rope"], "window_rounds_ms": times["window"],
                   "speedup": rope_ms / window_ms, "ceiling": c, "pruned_share": pruned,
                   "of_ceiling": rope_ms / window_ms / c}
            rows.append(row)
            print(f"{name:14s} N {n:6d}  rope {rope_ms:9.2f} ms  rope_window {window_ms:9.2f} ms  "
                  f"speedup {row['speedup']:.3f}  ceiling {c:.3f}  of ceiling {row['of_ceiling']:.0%}", flush=True)

    now = datetime.datetime.now(datetime.timezone.utc)
    command = "python3 bench/cpu_rope_window.py " + " ".join(sys.argv[1:])
    record = {"date": now.isoformat(timespec="seconds"), "machine": machine(), "commit": git_commit(),
              "command": command.strip(), "threads": args.threads, "rounds": rounds, "reps": args.reps,
              "dtype": "fp32", "B": 1, "rows": rows}
    if args.quick:
        return
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"cpu_rope_window_{now.date().isoformat()}")
    with open(stem + ".json", "w") as f:
        json.dump(record, f, indent=1)
    mi = record["machine"]
    with open(stem + ".md", "w") as f:
        f.write(f"# rope_window on vs off, attnfuse CPU backend ({record['date']})\n\n")
        f.write(f"- machine: {mi.get('Model name', mi['platform'])}, {mi['cpus_online']} CPUs online, "
                f"flags {mi.get('Flags', '?')}\n")
        f.write(f"- attnfuse commit {record['commit']}; {args.threads} threads; fp32, B = 1, causal, random "
                f"normal inputs, both programs checked against the float64 reference first\n")
        f.write(f"- timing: {rounds} alternating rounds, each `attnfuse bench --no-check` (median of "
                f"{args.reps} runs after a warm-up); the median over rounds\n")
        f.write(f"- command: `{record['command']}`\n\n")
        f.write("| geometry | N | rope ms | rope_window ms (k = %s) | speedup | ceiling 2/(1+s) | of ceiling |\n"
                % args.k)
        f.write("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
        for r in rows:
            f.write(f"| {r['geometry']} | {r['N']} | {r['rope_ms']:.2f} | {r['window_ms']:.2f} | "
                    f"{r['speedup']:.3f} | {r['ceiling']:.3f} | {r['of_ceiling']:.0%} |\n")
    print(f"wrote {stem}.json and .md")


if __name__ == "__main__":
    main()
