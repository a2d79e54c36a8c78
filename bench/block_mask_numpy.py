#!/usr/bin/env python3
"""Cell-exact BlockMasks from Python with NumPy through the C ABI: the block kinds computed in one
array expression, and the cells of the partial blocks in either of two forms: filled by a NumPy
callback per block (attnfuse_block_mask_from_block_kinds), or evaluated for every partial block in
one vectorized expression and passed packed (attnfuse_block_mask_from_partial_cells). Times both at
long lengths for a causal sliding window and a causal document mask, after checking each mask at a
short length: the block_sparse program with it against the built-in sliding_window / document
program on the CPU (max |diff| < 1e-5).

  python3 bench/block_mask_numpy.py [--lib build/lib/libattnfuse_c.so] [--n 131072] [--reps 5]

Needs numpy (pip install numpy); no torch, no GPU. Prints one line per mask and length.
"""
import argparse
import ctypes
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attnfuse_abi import BLOCK_FULL, BLOCK_INACTIVE, BLOCK_PARTIAL, DEVICE_CPU, FP32, OK, Args, Offsets  # noqa: E402
from decode_lib import REPO, Lib, default_lib  # noqa: E402


def window_mask(n, block, w):
    """Causal sliding window of w keys: kinds from the q - kv range of each block, cells by broadcasting."""
    starts = np.arange(0, n, block)
    ends = np.minimum(starts + block, n)
    lo = starts[:, None] - (ends[None, :] - 1)  # smallest q - kv in the block
    hi = (ends[:, None] - 1) - starts[None, :]  # largest
    kinds = np.full(lo.shape, BLOCK_PARTIAL, np.uint8)
    kinds[(hi < 0) | (lo >= w)] = BLOCK_INACTIVE
    kinds[(lo >= 0) & (hi < w)] = BLOCK_FULL

    def fill(b, h, q0, q1, kv0, kv1, keep):
        cells = np.ctypeslib.as_array(keep, shape=(q1 - q0, kv1 - kv0))
        d = np.arange(q0, q1)[:, None] - np.arange(kv0, kv1)[None, :]
        cells[:] = (d >= 0) & (d < w)
    def cells(q, kv):  # q [P, block, 1], kv [P, 1, block]: every partial block at once
        d = q - kv
        return (d >= 0) & (d < w)
    return kinds, fill, cells, f"sliding_window(causal(scaled_dot_product(Q, K)), {w})", None


def documents_mask(n, block, lengths):
    """Causal attention within packed documents of the given lengths (cut at n)."""
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    bounds = np.minimum(bounds, n)
    bounds = np.unique(np.append(bounds, n))
    doc = np.searchsorted(bounds, np.arange(n), side="right") - 1
    starts = np.arange(0, n, block)
    ends = np.minimum(starts + block, n)
    # A block is inactive where no key is at or before a query of the same document, full where
    # every query and key share one document and the block lies wholly below the diagonal.
    q_doc_lo, q_doc_hi = doc[starts], doc[ends - 1]
    same_single = (q_doc_lo == q_doc_hi)[:, None] & (doc[starts][None, :] == doc[ends - 1][None, :]) & \
        (q_doc_lo[:, None] == doc[starts][None, :])
    below = (ends[None, :] - 1) <= starts[:, None]
    above = starts[None, :] > (ends[:, None] - 1)
    disjoint = (doc[ends - 1][None, :] < q_doc_lo[:, None]) | (doc[starts][None, :] > q_doc_hi[:, None])
    kinds = np.full((len(starts), len(starts)), BLOCK_PARTIAL, np.uint8)
    kinds[above | disjoint] = BLOCK_INACTIVE
    kinds[same_single & below] = BLOCK_FULL

    def fill(b, h, q0, q1, kv0, kv1, keep):
        cells = np.ctypeslib.as_array(keep, shape=(q1 - q0, kv1 - kv0))
        q, kv = np.arange(q0, q1)[:, None], np.arange(kv0, kv1)[None, :]
        cells[:] = (kv <= q) & (doc[q0:q1][:, None] == doc[kv0:kv1][None, :])
    def cells(q, kv):  # past n the indices are clipped: those bytes are not read
        return (kv <= q) & (doc[np.minimum(q, n - 1)] == doc[np.minimum(kv, n - 1)])
    return kinds, fill, cells, "document(causal(scaled_dot_product(Q, K)))", bounds


def packed_cells(kinds, cells, block, chunk=256):
    """The cells of kinds' partial blocks in its C order, [P, block, block] uint8, evaluated by the
    vectorized rule `cells` chunk blocks at a time (int32 positions, so memory stays bounded)."""
    qb, kb = np.nonzero(kinds == BLOCK_PARTIAL)
    out = np.empty((len(qb), block, block), np.uint8)
    r = np.arange(block, dtype=np.int32)
    for i in range(0, len(qb), chunk):
        q = (qb[i:i + chunk].astype(np.int32) * block)[:, None, None] + r[None, :, None]
        kv = (kb[i:i + chunk].astype(np.int32) * block)[:, None, None] + r[None, None, :]
        out[i:i + chunk] = cells(q, kv)
    return out


def build(lib, form, kinds, fill, cells, n, block):
    """The mask by one of the two NumPy forms: a fill callback per partial block, or packed cells."""
    if form == "callback":
        return lib.block_mask_from_block_kinds(kinds.ctypes.data, fill, 1, 1, n, n, block, block)
    packed = packed_cells(kinds, cells, block)
    return lib.block_mask_from_partial_cells(kinds.ctypes.data, packed.ctypes.data, len(packed), 1, 1, n, n, block,
                                             block)


def check(lib, make, form, n, block, Hq=4, Hkv=2, D=32):
    """The block_sparse program with the mask against the built-in program, fp32 on the CPU."""
    kinds, fill, cells, program, bounds = make(n, block)
    mask = build(lib, form, kinds, fill, cells, n, block)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, h, n, D), dtype=np.float32) for h in (Hq, Hkv, Hkv))
    outs = []
    for prog, m in (("softmax(block_sparse(scaled_dot_product(Q, K))) @ V", mask), (f"softmax({program}) @ V", None)):
        kernel = lib.compile(prog, DEVICE_CPU, FP32, 0)
        o = np.full((1, Hq, n, D), 7, np.float32)
        a = Args()
        for name, t in (("q", q), ("k", k), ("v", v), ("out", o)):
            f = getattr(a, name)
            f.data = t.ctypes.data
            for i in range(4):
                f.shape[i], f.strides[i] = t.shape[i], t.strides[i] // 4
        a.block_mask = m.handle if m else None
        cu = np.ascontiguousarray(bounds, np.int32) if bounds is not None else None
        if cu is not None and m is None:  # the built-in program takes the offsets
            off = Offsets(cu.ctypes.data, 0, 1, len(cu), len(cu))
            a.cu_seqlens_q = a.cu_seqlens_k = ctypes.pointer(off)
        if lib.launch(kernel, a) != OK:
            raise RuntimeError(f"{prog}: {lib.error()}")
        lib.lib.attnfuse_kernel_free(kernel)
        outs.append(o)
    mask.free()
    return float(np.abs(outs[0] - outs[1]).max())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default=default_lib())
    ap.add_argument("--n", type=int, default=131072)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    lib = Lib(args.lib)
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, numpy {np.__version__}, attnfuse {commit}; "
          f"command: python3 bench/block_mask_numpy.py --n {args.n} --reps {args.reps}")
    rng = np.random.default_rng(0)
    cases = [("causal sliding window 4096", lambda n, block: window_mask(n, block, 4096)),
             ("causal documents of N/64 to N/8 tokens",  # 65-521 at the check's length, 2k-16k at 128k
              lambda n, block: documents_mask(n, block, rng.integers(n // 64, n // 8, 64)))]
    for name, make in cases:
        for form in ("callback", "packed cells"):
            diff = check(lib, make, form, 4096 + 77, 128)
            if not diff < 1e-5:
                print(f"FAIL: {name}, {form}: block_sparse with the NumPy mask differs from the built-in program "
                      f"by {diff:.2e}")
                return 1
            times = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                kinds, fill, cells, _, _ = make(args.n, 128)
                t1 = time.perf_counter()
                build(lib, form, kinds, fill, cells, args.n, 128).free()
                times.append((time.perf_counter() - t0, t1 - t0, int((kinds == BLOCK_PARTIAL).sum())))
            total, kinds_s, partial = (statistics.median(x[i] for x in times) for i in range(3))
            print(f"{name:40s} {form:12s} N {args.n}: {total * 1e3:7.1f} ms (kinds {kinds_s * 1e3:.1f} ms, "
                  f"{int(partial)} partial blocks), checked at N 4173: max |diff| {diff:.1e}; median of {args.reps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
