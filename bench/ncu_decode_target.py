#!/usr/bin/env python3
"""A few decode calls of one implementation, for Nsight Compute (bench/run_gpu_ncu_decode.sh).

No timing and no reference: the profiler times the one launch it is told to, and gpu_decode.py
checks the same calls against float64 before it times them. `ours` runs attnfuse through the C ABI
(the runtime's knobs apply, e.g. ATTNFUSE_CUDA_DECODE_TILE); `cudnn` is SDPA with the cuDNN backend
and enable_gqa, on the same inputs.
`--page-size P` gives `ours` the same K/V in a paged cache (NHD pages of P rows in random order,
gpu_decode.py's make_pages), to profile the paged kernel against the contiguous one.
Usage: python3 bench/ncu_decode_target.py ours|cudnn B,Hq,Hkv,KV [--calls N] [--lib L] [--page-size P]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_decode as gd  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("impl", choices=["ours", "cudnn"])
    ap.add_argument("cell", help="B,Hq,Hkv,KV at D 128, bf16, Nq = 1")
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--lib", default=None)
    ap.add_argument("--page-size", type=int, default=0, help="ours: a paged cache with pages of this many rows")
    a = ap.parse_args()
    gd.import_torch()
    torch = gd.torch
    c = gd.parse_cells(a.cell)[0]
    gen = torch.Generator(device=gd.DEV).manual_seed(1234)
    q, k, v = gd.make_decode_inputs(c, 1, gen)[0]
    if a.impl == "ours":
        gd.SINK = gd.Sink(None, {})
        ours = gd.Ours(gd.Lib(os.path.abspath(a.lib or gd.default_lib())))
        handle, err = ours.compile(gd.DECODE_PROGRAM, 128, torch.bfloat16)
        if handle is None:
            sys.exit(f"compile failed: {err}")
        if a.page_size > 0:
            pages = gd.make_pages(k, v, a.page_size, gen)
            fn = ours.call(handle, q, None, None, torch.empty_like(q), paged=pages)
        else:
            fn = ours.call(handle, q, k, v, torch.empty_like(q))
    else:
        fn = gd.sdpa_peer(gd.SDPBackend.CUDNN_ATTENTION, q, k, v, True)
    for _ in range(a.calls):
        fn()
    torch.cuda.synchronize()
    print(f"{a.impl} {a.cell}: {a.calls} calls done")


if __name__ == "__main__":
    main()
