#!/usr/bin/env python3
"""A few decode calls of one implementation, for Nsight Compute (bench/run_gpu_ncu_decode.sh).

No timing and no reference: the profiler times the one launch it is told to, and gpu_decode.py
checks the same calls against float64 before it times them. `ours` runs attnfuse through the C ABI
(the runtime's knobs apply, e.g. ATTNFUSE_CUDA_DECODE_TILE); `cudnn` is SDPA with the cuDNN backend
and enable_gqa, on the same inputs.
`--page-size P` gives `ours` the same K/V in a paged cache (NHD pages of P rows in random order,
gpu_decode.py's make_pages), to profile the paged kernel against the contiguous one.
`--sets S` rotates the calls over S input sets (enough that K/V outgrow the L2, as the benchmark
does); `--graph` captures the calls into one CUDA graph and replays it once, so they run back to
back as in the benchmark's timing (bench/run_gpu_decode_phases.sh).
Usage: python3 bench/ncu_decode_target.py ours|cudnn B,Hq,Hkv,KV [--calls N] [--lib L] [--page-size P [--settled]]
       [--sets S] [--graph]
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
    ap.add_argument("--settled", action="store_true",
                    help="ours, paged: attnfuse_args.paged_table_settled (the table read before the grid dependency wait)")
    ap.add_argument("--sets", type=int, default=1, help="input sets the calls rotate over")
    ap.add_argument("--graph", action="store_true", help="capture the calls into a CUDA graph, replay it once")
    a = ap.parse_args()
    gd.import_torch()
    torch = gd.torch
    c = gd.parse_cells(a.cell)[0]
    gen = torch.Generator(device=gd.DEV).manual_seed(1234)
    sets = gd.make_decode_inputs(c, max(a.sets, 1), gen)
    fns = []
    if a.impl == "ours":
        gd.SINK = gd.Sink(None, {})
        ours = gd.Ours(gd.Lib(os.path.abspath(a.lib or gd.default_lib())))
        handle, err = ours.compile(gd.DECODE_PROGRAM, 128, torch.bfloat16)
        if handle is None:
            sys.exit(f"compile failed: {err}")
        for q, k, v in sets:
            if a.page_size > 0:
                pages = dict(gd.make_pages(k, v, a.page_size, gen), table_settled=a.settled)
                fns.append(ours.call(handle, q, None, None, torch.empty_like(q), paged=pages))
            else:
                fns.append(ours.call(handle, q, k, v, torch.empty_like(q)))
    else:
        fns = [gd.sdpa_peer(gd.SDPBackend.CUDNN_ATTENTION, q, k, v, True) for q, k, v in sets]
    if a.graph:
        torch.cuda.synchronize()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            for fn in fns:  # workspaces and uploads happen outside the capture
                fn()
            stream.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                for i in range(a.calls):
                    fns[i % len(fns)]()
            graph.replay()
            stream.synchronize()
    else:
        for i in range(a.calls):
            fns[i % len(fns)]()
    torch.cuda.synchronize()
    print(f"{a.impl} {a.cell}: {a.calls} calls done")


if __name__ == "__main__":
    main()
