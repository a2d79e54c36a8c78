#!/usr/bin/env python3
"""merge_states on the GPU (attnfuse_merge_states) against the same merge written in PyTorch, eager
and torch.compile'd, in one process: GB/s of O and LSE moved (every state read once, out written
once) against the device's copy rate, measured here with a device-to-device copy of the same bytes.
Every case is validated first against a float64 merge in PyTorch (bf16 / fp32 output tolerance).

  python3 bench/gpu_merge_states.py [--lib L] [--json out.json] [--iters 50] [--ours-only] [--graph]

Without --graph each form is timed as back-to-back calls from Python, so the small cases measure
the host's launch path as much as the kernel; --graph times one CUDA graph of the calls.

Cases: a cascade's two bf16 parts at prefill size (8192 queries) and at decode size (64 sequences),
16 fp32 split partials into bf16 (decode, Llama-3-8B heads), and 64 fp32 states (two levels).
"""
import argparse
import ctypes
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attnfuse_abi import BF16, DEVICE_CUDA, FP16, FP32, State, raw_tensor  # noqa: E402
from decode_lib import REPO, Lib, default_lib  # noqa: E402

CODES = {torch.float32: FP32, torch.bfloat16: BF16, torch.float16: FP16}

# name, (B, H, N, D), number of states, state dtype, out dtype
CASES = [
    ("cascade prefill, 2 bf16 parts", (1, 32, 8192, 128), 2, torch.bfloat16, torch.bfloat16),
    ("cascade decode, 2 bf16 parts", (64, 32, 1, 128), 2, torch.bfloat16, torch.bfloat16),
    ("16 fp32 split partials -> bf16", (8, 32, 1, 128), 16, torch.float32, torch.bfloat16),
    ("64 fp32 states -> bf16 (two levels)", (1, 32, 64, 128), 64, torch.float32, torch.bfloat16),
]


def state(o, lse):
    s = State()
    s.o = raw_tensor(o.data_ptr(), list(o.shape), list(o.stride()))
    s.dtype = CODES[o.dtype]
    s.lse = lse.data_ptr()
    s.lse_strides[:] = list(lse.stride())
    return s


def torch_merge(os_, lses, out_dtype):
    """The same merge in PyTorch (fp32 arithmetic); rows empty everywhere are not handled (none here)."""
    lse = torch.stack(lses)                      # [n, B, H, N]
    m = lse.amax(0)
    w = torch.exp(lse - m)
    s = w.sum(0)
    o = sum((w[k] / s).unsqueeze(-1) * os_[k].float() for k in range(len(os_)))
    return o.to(out_dtype), m + torch.log(s)


def per_call_ms(fn, iters):
    """Median over 5 runs of (time of `iters` back-to-back calls) / iters, CUDA events."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        runs.append(a.elapsed_time(b) / iters)
    return statistics.median(runs)


def per_call_ms_graphed(fn, iters):
    """The same median, of one CUDA graph replay holding `iters` calls: the kernels' time without
    the host's launch cost (what a serving loop that captures its decode step sees). fn(stream)
    launches one call on that stream handle; warm-up runs on the capture stream first, so any
    workspace the call needs exists before the capture."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(s.cuda_stream)
    s.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for _ in range(iters):
            fn(s.cuda_stream)
    torch.cuda.synchronize()
    return per_call_ms(g.replay, 1) / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default=default_lib())
    ap.add_argument("--json", default=None)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--ours-only", action="store_true", help="time ours and the copy only (still validated)")
    ap.add_argument("--graph", action="store_true",
                    help="time each form as one CUDA graph of --iters calls (no host launch cost)")
    args = ap.parse_args()
    lib = Lib(args.lib)
    dev = torch.device("cuda")
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}, attnfuse {commit or '?'} ({platform.node()}); "
          f"command: python3 bench/gpu_merge_states.py --iters {args.iters}{' --ours-only' if args.ours_only else ''}"
          f"{' --graph' if args.graph else ''}")
    compiled = torch.compile(torch_merge)
    rows_out = []
    stream = torch.cuda.current_stream().cuda_stream
    for name, shape, n, in_dtype, out_dtype in CASES:
        gen = torch.Generator(device=dev).manual_seed(53)
        B, H, N, D = shape
        os_ = [torch.randn(shape, device=dev, dtype=in_dtype, generator=gen) for _ in range(n)]
        lses = [torch.rand((B, H, N), device=dev, generator=gen) * 20 - 10 for _ in range(n)]
        out = torch.full(shape, float("nan"), device=dev, dtype=out_dtype)
        out_lse = torch.full((B, H, N), float("nan"), device=dev)
        states, o_state = [state(o, l) for o, l in zip(os_, lses)], state(out, out_lse)

        def ours(st):
            lib.merge_states(DEVICE_CUDA, states, o_state, st)
        ours(stream)
        torch.cuda.synchronize()
        want_o, want_lse = torch_merge([o.double() for o in os_], [l.double() for l in lses], torch.float64)
        tol = 2.0 ** -7 if out_dtype == torch.bfloat16 else 1e-5
        err_o = ((out.double() - want_o).abs() / want_o.abs().clamp_min(1e-3)).max().item()
        err_lse = (out_lse.double() - want_lse).abs().max().item()
        ok = err_o <= tol and err_lse <= 1e-4
        moved = sum(o.numel() * o.element_size() + l.numel() * 4 for o, l in zip(os_, lses)) + \
            out.numel() * out.element_size() + out_lse.numel() * 4
        src = torch.empty(moved // 2, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        forms = {"attnfuse": ours}
        if not args.ours_only:
            forms["torch eager"] = lambda st: torch_merge(os_, lses, out_dtype)
            forms["torch.compile"] = lambda st: compiled(os_, lses, out_dtype)
        forms["copy (same bytes)"] = lambda st: dst.copy_(src)
        if args.graph:
            times = {k: per_call_ms_graphed(f, args.iters) for k, f in forms.items()}
        else:
            times = {k: per_call_ms(lambda f=f: f(stream), args.iters) for k, f in forms.items()}
        row = {"case": name, "shape": shape, "states": n, "bytes": moved, "valid": ok, "max_rel_err_o": err_o,
               "max_err_lse": err_lse, "graphed": args.graph, "ms": times}
        rows_out.append(row)
        line = ", ".join(f"{k} {v * 1e3:.1f} us ({moved / v / 1e6:.0f} GB/s)" for k, v in times.items())
        peers = [v for k, v in times.items() if k.startswith("torch")]
        ratio = f"{min(peers) / times['attnfuse']:.2f}x the faster torch; " if peers else ""
        print(f"{name:38s} {moved / 1e6:7.1f} MB: {line}; {ratio}"
              f"{'valid' if ok else 'INVALID'} (rel O {err_o:.1e}, LSE {err_lse:.1e})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "commit": commit, "rows": rows_out}, f, indent=1)
    return 0 if all(r["valid"] for r in rows_out) else 1


if __name__ == "__main__":
    sys.exit(main())
