#!/usr/bin/env python3
"""attnfuse's fused CPU backend against PyTorch's CPU scaled_dot_product_attention.

For causal and dense fp32 attention at N in {1024, 2048, 4096} and D in {64, 128} (B=1,
Hq=Hkv=8), on 2 threads: write the same inputs as .npy, run `attnfuse run` on them and check
its output against torch's first, then time both in alternating rounds (each the median of
many runs after warm-up; `attnfuse bench` on the same files, torch in this process) and report ms, GFLOP/s (unmasked
work only: 4*B*H*N*N*D*density) and the ratio torch_time / attnfuse_time (> 1: attnfuse is
faster). Results go to bench/results/cpu_vs_torch_<date>.json and .md with the date, the
machine and the command.

Torch lives in a venv of its own (bench/.venv-bench), created and filled from PyPI on first
use: this script re-executes itself inside it. PyPI's Linux torch wheel is the CUDA build, and
its CUDA libraries come along as dependencies (a few GB, unused here: torch runs on the CPU);
PyPI has no CPU-only torch wheel.

Usage: python3 bench/cpu_vs_torch.py [--cli build/bin/attnfuse] [--quick] [--threads 2] [--rounds 3]
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV = os.path.join(HERE, ".venv-bench")
VENV_PY = os.path.join(VENV, "bin", "python")

PROGRAMS = {
    "causal": "softmax(causal(scaled_dot_product(Q, K))) @ V",
    "dense": "softmax(scaled_dot_product(Q, K)) @ V",
}


def ensure_venv():
    """Re-executes this script in bench/.venv-bench, creating it (torch + numpy) if needed."""
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(VENV_PY):
        print(f"creating {VENV} (torch and numpy from PyPI; the first time takes a few minutes)",
              flush=True)
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
    probe = subprocess.run([VENV_PY, "-c", "import torch, numpy"], capture_output=True)
    if probe.returncode != 0:
        subprocess.check_call([VENV_PY, "-m", "pip", "install", "--quiet", "torch", "numpy"])
    os.execv(VENV_PY, [VENV_PY, os.path.abspath(__file__)] + sys.argv[1:])


def machine():
    info = {"platform": platform.platform(), "cpus_online": os.cpu_count()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("Model name", "Core(s) per socket", "Socket(s)", "Thread(s) per core",
                               "L2 cache", "L3 cache", "Flags"):
                value = value.strip()
                if key.strip() == "Flags":
                    value = " ".join(f for f in value.split() if f.startswith("avx512") or f in ("avx2", "fma"))
                info[key.strip()] = value
    except OSError:
        pass
    return info


def git_commit():
    try:
        out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except OSError:
        return "unknown"


def time_torch(fn, min_reps=5, max_reps=200, budget_s=1.0):
    """Median seconds of fn() after two warm-up calls (as `attnfuse bench` does)."""
    t0 = time.perf_counter()
    fn()
    fn()
    warm = max(1e-4, (time.perf_counter() - t0) / 2)
    reps = max(min_reps, min(max_reps, int(budget_s / warm)))
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), reps


def run_cli(args, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"attnfuse failed ({r.returncode}): {' '.join(args)}\n{r.stdout}{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "attnfuse"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="N=1024 only")
    ap.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    ap.add_argument("--tol", type=float, default=1e-4, help="max |attnfuse - torch| to accept")
    ap.add_argument("--rounds", type=int, default=3, help="alternating torch/attnfuse timing rounds")
    args = ap.parse_args()

    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    B, H = 1, 8
    lengths = [1024] if args.quick else [1024, 2048, 4096]
    dims = [64, 128]
    rows = []
    with tempfile.TemporaryDirectory(prefix="attnfuse-cpu-bench-") as tmp:
        for mask in ("causal", "dense"):
            for n in lengths:
                for d in dims:
                    rng = np.random.default_rng(1000 * n + d)
                    q, k, v = (rng.standard_normal((B, H, n, d), dtype=np.float32) for _ in range(3))
                    paths = {}
                    for name, arr in (("q", q), ("k", k), ("v", v)):
                        paths[name] = os.path.join(tmp, f"{name}.npy")
                        np.save(paths[name], arr)
                    out_path = os.path.join(tmp, "o.npy")
                    json_path = os.path.join(tmp, "bench.json")
                    files = ["--q", paths["q"], "--k", paths["k"], "--v", paths["v"]]

                    # 1. Same inputs, outputs compared before anything is timed.
                    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
                    with torch.inference_mode():
                        ref = F.scaled_dot_product_attention(tq, tk, tv, is_causal=(mask == "causal")).numpy()
                    run_cli([args.cli, "run", PROGRAMS[mask], *files, "--out", out_path, "--threads",
                             str(args.threads)], args.threads)
                    ours = np.load(out_path)
                    err = float(np.max(np.abs(ours.astype(np.float64) - ref.astype(np.float64))))
                    if not np.isfinite(err) or err > args.tol:
                        raise SystemExit(f"{mask} N={n} D={d}: attnfuse differs from torch by {err:.3g} "
                                         f"(> {args.tol}); not timing a wrong kernel")

                    # 2. Time both on the same inputs, alternating in rounds so that both see
                    # the same machine load; each side's time is the median over rounds of its
                    # per-round medians. attnfuse validates against its float64 reference in the
                    # first round (when small enough); later rounds only time.
                    def torch_call():
                        with torch.inference_mode():
                            F.scaled_dot_product_attention(tq, tk, tv, is_causal=(mask == "causal"))

                    torch_rounds, ours_rounds, ours_json = [], [], None
                    for rnd in range(args.rounds):
                        torch_rounds.append(time_torch(torch_call))
                        extra = [] if rnd == 0 else ["--no-check"]
                        run_cli([args.cli, "bench", PROGRAMS[mask], *files, "--threads", str(args.threads),
                                 "--json", json_path, *extra], args.threads)
                        with open(json_path) as f:
                            this = json.load(f)
                        if ours_json is None:
                            ours_json = this
                        ours_rounds.append(next(x for x in this["variants"] if x["name"] == "fused"))
                    t_med = statistics.median(t[0] for t in torch_rounds)
                    t_min = min(t[1] for t in torch_rounds)
                    t_reps = sum(t[2] for t in torch_rounds)
                    fused = {
                        "median_ms": statistics.median(x["median_ms"] for x in ours_rounds),
                        "min_ms": min(x["min_ms"] for x in ours_rounds),
                        "reps": sum(x["reps"] for x in ours_rounds),
                    }
                    fused["gflops"] = ours_json["flops"] / (fused["median_ms"] * 1e-3) * 1e-9
                    flops = ours_json["flops"]
                    row = {
                        "mask": mask, "B": B, "H": H, "N": n, "D": d, "dtype": "fp32",
                        "density": ours_json["density"], "gflop": flops * 1e-9,
                        "max_abs_diff_vs_torch": err,
                        "attnfuse_check": ours_json.get("check"),
                        "torch_ms": t_med * 1e3, "torch_min_ms": t_min * 1e3, "torch_reps": t_reps,
                        "torch_round_ms": [t[0] * 1e3 for t in torch_rounds],
                        "attnfuse_round_ms": [x["median_ms"] for x in ours_rounds],
                        "torch_gflops": flops / t_med * 1e-9,
                        "attnfuse_ms": fused["median_ms"], "attnfuse_min_ms": fused["min_ms"],
                        "attnfuse_reps": fused["reps"], "attnfuse_gflops": fused["gflops"],
                        "ratio_torch_over_attnfuse": t_med * 1e3 / fused["median_ms"],
                    }
                    rows.append(row)
                    print(f"{mask:6} N={n:5} D={d:3}  torch {row['torch_ms']:9.2f} ms "
                          f"({row['torch_gflops']:6.1f} GFLOP/s)  attnfuse {row['attnfuse_ms']:9.2f} ms "
                          f"({row['attnfuse_gflops']:6.1f} GFLOP/s)  ratio {row['ratio_torch_over_attnfuse']:.2f}x"
                          f"  |diff| {err:.2e}", flush=True)

    now = datetime.datetime.now(datetime.timezone.utc)
    result = {
        "date": now.isoformat(timespec="seconds"),
        "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
        "rerun": "bench/run_cpu_bench.sh",
        "machine": machine(),
        "threads": args.threads,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "attnfuse_commit": git_commit(),
        "geometry": f"B={B}, Hq=Hkv={H}, Nq=Nk=N, fp32, BHSD contiguous, q_offset 0",
        "timing": (f"{args.rounds} alternating rounds per case; each round the median of >= 5 runs "
                   "after 2 warm-ups (wall clock); reported: median over rounds; same .npy inputs"),
        "rows": rows,
    }
    os.makedirs(args.out_dir, exist_ok=True)
    stem = os.path.join(args.out_dir, f"cpu_vs_torch_{now.date().isoformat()}")
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    with open(stem + ".md", "w") as f:
        f.write(render_markdown(result))
    print(f"wrote {stem}.json and {stem}.md")


def render_markdown(r):
    m = r["machine"]
    lines = [
        f"# attnfuse CPU vs PyTorch SDPA ({r['date']})",
        "",
        f"- machine: {m.get('Model name', '?')}, {m.get('cpus_online')} CPUs online "
        f"({m.get('Core(s) per socket', '?')} cores/socket x {m.get('Socket(s)', '?')}), "
        f"flags {m.get('Flags', '?')}",
        f"- threads: {r['threads']} (torch.set_num_threads, attnfuse --threads / OMP_NUM_THREADS)",
        f"- torch {r['torch']}, attnfuse commit {r['attnfuse_commit']}",
        f"- geometry: {r['geometry']}",
        f"- timing: {r['timing']}",
        f"- command: `{r['command']}` (rerun: `{r['rerun']}`)",
        "",
        "ratio = torch time / attnfuse time (> 1: attnfuse faster). GFLOP/s count kept cells only.",
        "",
        "| mask | N | D | torch ms | torch GFLOP/s | attnfuse ms | attnfuse GFLOP/s | ratio | max abs diff |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for x in r["rows"]:
        lines.append(f"| {x['mask']} | {x['N']} | {x['D']} | {x['torch_ms']:.2f} | {x['torch_gflops']:.1f} | "
                     f"{x['attnfuse_ms']:.2f} | {x['attnfuse_gflops']:.1f} | "
                     f"**{x['ratio_torch_over_attnfuse']:.2f}x** | {x['max_abs_diff_vs_torch']:.1e} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    ensure_venv()
    main()
