#!/usr/bin/env python3
"""Issue 5 on the GPU: decode, paged KV caches, BigBird block sparsity and packed documents.

attnfuse (through the C ABI, ctypes on PyTorch tensors) against its peers in one process, on
identical inputs. Every implementation is checked against a float64 reference before it is timed
(and the peers against attnfuse); times are the median of many CUDA-event measurements.

Suites (--suite, default all):
  decode     softmax(causal(scaled_dot_product(Q, K))) @ V, bf16, Nq = 1 (the query at position
             KV - 1, bottom-right). Llama-3-8B (Hq 32, Hkv 8, D 128) at B 1/8/32 x KV 4k/32k/128k
             and Llama-3-70B (Hq 64, Hkv 8, D 128) at B 1, KV 32k, against SDPA-cuDNN (GQA, or K/V
             heads expanded when the backend refuses it; the row says so), SDPA-flash and compiled
             flex_attention. TB/s = bytes of K and V read (2 * B * Hkv * KV * D * 2) / time.
  paged      the same program with a paged KV cache (page size 16 and 64, NHD, pages in a random
             order; page tables are device int32 tensors) against attnfuse on the contiguous
             cache holding the same data: the paged overhead in %. --paged-layouts nhd,hnd adds
             HND pages (rows attnfuse_paged_hnd_ps16, ...). Each NHD page size is timed twice:
             as is, and with attnfuse_args.paged_table_settled (rows ..._settled: the kernel
             reads the table before it waits for the call ahead of it). --pages-in-order adds
             NHD pages laid out in table order (rows ..._inorder): the same lookups and copies
             over memory in order, which separates the cost of the pages' placement from that of
             the paged addressing.
  bigbird    softmax(block_sparse(scaled_dot_product(Q, K))) @ V, GPT-2 geometry (B 4, H 12, D 64)
             at N 4k and 16k, a BigBird grid of 128-blocks (global first block row and column, the
             diagonal band, random blocks per row; about 12% at 4k, since global + diagonal alone
             are 9.2% there) and of 64-blocks (7.6% at 4k, the paper's ~7.7% point), built
             from a dense uint8 grid with attnfuse_block_mask_from_dense, against compiled
             flex_attention with a BlockMask of the same grid (create_block_mask, BLOCK_SIZE = the
             block; at 64-blocks with kernel_options BLOCK_M = BLOCK_N = 64, since flex's tiles
             must divide its blocks, and as flex_b128 over the same cells in 128-blocks) and SDPA
             with the dense boolean mask. TFLOP/s of active work; construction times of both
             masks and the wall time of a first launch (the mask's upload).
  documents  softmax(document(causal(scaled_dot_product(Q, K)))) @ V on 16k packed tokens of 8
             documents (B 1; Llama-3-8B: Hq 32, Hkv 8, D 128; GPT-2, not with --quick: H 12, D 64),
             cu_seqlens as device int32, against flex with a
             document mask_mod and FlashAttention-2 varlen through PyTorch (skipped if absent);
             then varlen decode: 32 sequences of one query each with caches of 1k-32k keys packed
             as documents (Llama-3-8B), TB/s of K/V, against FA2 varlen (--varlen-lengths
             uniform: the same keys in 32 equal caches).

Timing (--timing): `graph` (default) captures `inner` back-to-back calls, rotating over enough
input sets that the working set exceeds the L2, into a CUDA graph and times its replays, so host
launch overhead does not hide microsecond decode kernels; an implementation that cannot be captured
falls back to `loop` (events around back-to-back calls; the JSON records which). --l2-flush times
single calls after a 256 MiB memset instead.

--quick: decode at 8B B1 32k, B8 4k, B32 32k and 70B B1 32k; paged at 8B B8 32k and 70B B1 32k;
BigBird at 4k with 128-blocks; documents at Llama-3-8B only. Cells that do not fit in memory are skipped.

Usage:
  python3 bench/gpu_decode.py [--lib L] [--suite decode|paged|bigbird|documents|all] [--quick]
                              [--out DIR] [--filter TEXT] [--timing graph|loop] [--l2-flush]
                              [--ours-only] [--bigbird-block 64|128] [--peers sdpa_cudnn,...]
                              [--cells "B,Hq,Hkv,KV;..."]
  python3 bench/gpu_decode.py --selfcheck [--lib L]   # no GPU: ctypes layouts vs the C header,
                                                       # and the new ABI on the CPU device
The library is --lib, else $ATTNFUSE_LIB, else .devcarry/lib/libattnfuse_c.so, else
build/lib/libattnfuse_c.so. --out DIR receives <suite>.json per suite and summary.txt.
"""
import argparse
import datetime
import os
import platform
import sys
import time

# The code lives in decode_lib.py (ctypes, --selfcheck), decode_harness.py (the shared GPU
# machinery), decode_suites.py (decode, paged) and decode_sparse_suites.py (bigbird, documents);
# the names bench/ncu_decode_target.py reads as gd.<name> are imported here for it.
from decode_harness import (DEV, FLEX, FLEX_ERROR, GIB, SINK, SUITE_ORDER, Ours, SDPBackend, Sink,  # noqa: F401
                            import_torch, say, set_sink, share_state, torch)
from decode_lib import Lib, default_lib, selfcheck
from decode_sparse_suites import run_bigbird, run_documents
from decode_suites import (DECODE_PROGRAM, make_decode_inputs, make_pages, parse_cells, run_decode,  # noqa: F401
                           run_paged, sdpa_peer)

share_state(globals())  # keeps torch, FLEX, SINK, ... (decode_harness.SHARED) current here


# ---------------------------------------------------------------- main

SUITES = {"decode": run_decode, "paged": run_paged, "bigbird": run_bigbird, "documents": run_documents}


def gpu_main(a):
    try:
        import_torch()
    except ImportError as e:
        print(f"gpu_decode: PyTorch is needed for the GPU suites ({e}); --selfcheck runs without it")
        return 2
    if not torch.cuda.is_available():
        print("gpu_decode: no CUDA device visible to PyTorch; nothing to time (--selfcheck runs without one)")
        return 2
    lib = Lib(a.lib)
    if not lib.lib.attnfuse_cuda_available():
        print(f"gpu_decode: {lib.path} reports no usable CUDA device (attnfuse_cuda_available() = 0)")
        return 2
    ours = Ours(lib)
    props = torch.cuda.get_device_properties(0)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(), "capability": f"sm_{props.major}{props.minor}",
            "memory_gib": round(props.total_memory / GIB, 1), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "flex": FLEX is not None, "lib": lib.path,
            "command": " ".join([os.path.basename(sys.executable)] + sys.argv), "host": platform.node(),
            "timing": "l2_flush" if a.l2_flush else a.timing, "quick": a.quick}
    set_sink(Sink(a.out, meta))
    say(f"gpu_decode on {meta['device']} ({meta['capability']}, {meta['memory_gib']} GiB), torch {meta['torch']}, "
        f"cuDNN {meta['cudnn']}, flex {'yes' if FLEX else 'no: ' + FLEX_ERROR[:80]}, {meta['date']}")
    rc = 0
    for s in (SUITE_ORDER if a.suite == "all" else [a.suite]):
        SINK.start(s)
        say(f"# {meta['device']}, torch {meta['torch']}, {meta['date']}: {meta['command']}")
        t0 = time.time()
        try:
            SUITES[s](ours, a, a.quick)
        except Exception as e:  # noqa: BLE001 - one suite failing does not lose the others
            say(f"== {s} FAILED: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            SINK.results.append({"error": f"{type(e).__name__}: {e}"})
            rc = 1
        say(f"== {s} done in {time.time() - t0:.0f} s")
        say()
        SINK.save()
        torch.cuda.empty_cache()
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=None, help="libattnfuse_c.so (default: $ATTNFUSE_LIB, .devcarry/lib, build/lib)")
    ap.add_argument("--suite", choices=["all"] + list(SUITES), default="all")
    ap.add_argument("--quick", action="store_true", help="a smaller sweep")
    ap.add_argument("--out", default=None, help="directory for <suite>.json and summary.txt")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("--timing", choices=["graph", "loop"], default="graph")
    ap.add_argument("--l2-flush", action="store_true", help="time single calls after a 256 MiB memset")
    ap.add_argument("--ours-only", action="store_true", help="skip the peers")
    ap.add_argument("--paged-layouts", default="nhd", choices=["nhd", "hnd", "nhd,hnd", "hnd,nhd"],
                    help="paged: the page layouts to time (NHD, FlashInfer's default; HND keeps a head's rows together)")
    ap.add_argument("--pages-in-order", action="store_true",
                    help="paged: also time NHD pages laid out in table order (_inorder rows): the page placement's "
                         "share of the overhead")
    ap.add_argument("--peers", default="", help="decode and bigbird: only these peers (comma lists; decode: sdpa_cudnn, sdpa_flash, flex; "
                         "bigbird: flex, flex_b128, sdpa_dense_mask)")
    ap.add_argument("--cells", default="",
                    help='decode: these cells instead of the default ones, "B,Hq,Hkv,KV;..." at D 128')
    ap.add_argument("--bigbird-block", type=int, choices=[64, 128], default=None,
                    help="only this block size (default: 128 at 4k and 16k, and 64 at 4k, the paper's 7.7%% point)")
    ap.add_argument("--varlen-lengths", choices=["random", "uniform"], default="random",
                    help="documents: the varlen decode caches' lengths, random in 1k-32k (default) or all equal to "
                         "that draw's mean (row name ending in 'uniform')")
    ap.add_argument("--selfcheck", action="store_true",
                    help="no GPU: ctypes layouts vs the C header, and the new ABI on the CPU device")
    a = ap.parse_args()
    a.lib = os.path.abspath(a.lib or default_lib())
    if a.selfcheck:
        return selfcheck(a.lib)
    return gpu_main(a)


if __name__ == "__main__":
    sys.exit(main())
