#!/usr/bin/env python3
"""Decoding on the fused CPU backend: GB/s of K/V read, per thread count, optionally against an
older build of the CLI (before / after a change to the kernel).

Cases: one query (or a few: speculative drafts) per sequence against long caches, at the GQA
geometries of Llama-3-8B (Hq 32, Hkv 8, D 128) and Gemma-2B (Hq 8, Hkv 1, D 256), bf16.

1. every (cli, case) is checked against the float64 reference first, on one KV group of the
   case's heads (B 1) at the full cache length (`attnfuse bench` with its check);
2. then each is timed in alternating rounds (`attnfuse bench --no-check`, the median of --reps
   runs after its warm-up), and the median over rounds is reported, with K/V GB/s = bytes of K
   and V read once / time.

Results go to bench/results/cpu_decode_<date>.json and .md with the date, the machine, the
commit and the command.

Usage: python3 bench/cpu_decode.py [--cli build/bin/attnfuse] [--baseline-cli OLD/bin/attnfuse]
                                   [--baseline-label TEXT] [--threads 1,2] [--rounds 3] [--reps 5]
"""
import argparse
import datetime
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from cpu_bench import attnfuse_bench  # noqa: E402
from cpu_vs_torch import git_commit, machine  # noqa: E402  (no torch needed for these two)

PROGRAM = "softmax(causal(scaled_dot_product(Q, K))) @ V"
# (name, B, Hq, Hkv, Nq, Nk, D)
CASES = [
    ("llama3-8b B1 32k", 1, 32, 8, 1, 32768, 128),
    ("llama3-8b B8 16k", 8, 32, 8, 1, 16384, 128),
    ("llama3-8b B1 32k, 2 drafts", 1, 32, 8, 2, 32768, 128),
    ("llama3-8b B1 32k, 4 drafts", 1, 32, 8, 4, 32768, 128),
    ("llama3-70b B1 16k", 1, 64, 8, 1, 16384, 128),
    ("llama3-70b B1 16k, 2 drafts", 1, 64, 8, 2, 16384, 128),
    ("gemma-2b B1 32k", 1, 8, 1, 1, 32768, 256),
    ("gemma-2b B4 8k", 4, 8, 1, 1, 8192, 256),
]


def run_bench(cli, shape, threads, reps, check):
    """Median ms of `attnfuse bench` on bf16 inputs (checked first when `check`)."""
    return attnfuse_bench(cli, PROGRAM, shape, threads, reps, check, extra=["--dtype", "bf16"])[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "attnfuse"))
    ap.add_argument("--baseline-cli", help="an older build's attnfuse, timed beside --cli")
    ap.add_argument("--baseline-label", default="baseline", help="what the older build is (commit, change)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    clis = [("this build", a.cli)] + ([(a.baseline_label, a.baseline_cli)] if a.baseline_cli else [])
    threads = [int(t) for t in a.threads.split(",")]

    for label, cli in clis:  # every build and case checked before any is timed
        for name, b, hq, hkv, nq, nk, d in CASES:
            run_bench(cli, (1, hq // hkv, 1, nq, nk, d), 1, 1, True)
            print(f"checked: {label}: {name}", flush=True)

    times = {}
    for r in range(a.rounds):
        for name, b, hq, hkv, nq, nk, d in CASES:
            for t in threads:
                for label, cli in (clis if r % 2 == 0 else list(reversed(clis))):
                    ms = run_bench(cli, (b, hq, hkv, nq, nk, d), t, a.reps, False)
                    times.setdefault((name, t, label), []).append(ms)
                    print(f"round {r + 1}: {name}, {t} threads, {label}: {ms:.3f} ms", flush=True)

    rows = []
    for name, b, hq, hkv, nq, nk, d in CASES:
        kv_bytes = 2 * b * hkv * nk * d * 2  # K and V, bf16
        for t in threads:
            row = {"case": name, "shape": [b, hq, hkv, nq, nk, d], "threads": t, "kv_bytes": kv_bytes, "builds": {}}
            for label, _ in clis:
                ms = statistics.median(times[(name, t, label)])
                row["builds"][label] = {"median_ms": ms, "kv_gbs": kv_bytes / (ms * 1e-3) / 1e9,
                                        "rounds_ms": times[(name, t, label)]}
            rows.append(row)

    now = datetime.datetime.now(datetime.timezone.utc)
    record = {"date": now.isoformat(timespec="seconds"), "machine": machine(), "commit": git_commit(),
              "command": " ".join(["bench/cpu_decode.py"] + sys.argv[1:]), "program": PROGRAM, "dtype": "bf16",
              "rounds": a.rounds, "reps": a.reps, "rows": rows}
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, f"cpu_decode_{now.date().isoformat()}")
    with open(stem + ".json", "w") as f:
        json.dump(record, f, indent=2)
    mi = record["machine"]
    labels = [label for label, _ in clis]
    with open(stem + ".md", "w") as f:
        f.write(f"# Decoding on the CPU backend, {record['date']}\n\n")
        f.write(f"- machine: {mi.get('Model name', mi['platform'])}, {mi['cpus_online']} CPUs online\n"
                f"- commit: {record['commit']}\n- command: `python3 {record['command']}`\n"
                f"- `{PROGRAM}`, bf16, queries at the end of the cache; every build and case checked against "
                f"the float64 reference first (one KV group, B 1); medians of {a.rounds} alternating rounds of "
                f"{a.reps} runs; K/V GB/s = bytes of K and V / time\n\n")
        f.write("| case | B,Hq,Hkv,Nq,Nk,D | threads | " +
                " | ".join(f"{l} ms | {l} K/V GB/s" for l in labels) +
                (" | speedup |" if len(labels) > 1 else " |") + "\n")
        f.write("| --- | --- | ---: | " + " | ".join("---: | ---:" for _ in labels) +
                (" | ---: |" if len(labels) > 1 else " |") + "\n")
        for row in rows:
            bl = row["builds"]
            cells = " | ".join(f"{bl[l]['median_ms']:.2f} | {bl[l]['kv_gbs']:.2f}" for l in labels)
            sp = f" | {bl[labels[1]]['median_ms'] / bl[labels[0]]['median_ms']:.2f}x |" if len(labels) > 1 else " |"
            f.write(f"| {row['case']} | {','.join(map(str, row['shape']))} | {row['threads']} | {cells}{sp}\n")
    print(open(stem + ".md").read())


if __name__ == "__main__":
    main()
