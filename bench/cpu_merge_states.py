#!/usr/bin/env python3
"""merge_states on the CPU (attnfuse_merge_states with ATTNFUSE_DEVICE_CPU) through the C ABI: GB/s
of O moved (every state read once, out written once) against a one-thread NumPy copy of 200 MB,
each case validated first on its first head against a float64 merge in NumPy.

  python3 bench/cpu_merge_states.py [--lib build/lib/libattnfuse_c.so] [--repeats 5]

Cases: a cascade's two bf16 parts at prefill size ([1, 32, 8192, 128] into bf16) and 64 fp32 states
into bf16 ([1, 32, 64, 128]). The time is the fastest of --repeats calls.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attnfuse_abi import BF16, DEVICE_CPU, FP32, State, raw_tensor  # noqa: E402
from decode_lib import Lib, default_lib  # noqa: E402

CASES = [((1, 32, 8192, 128), 2, BF16), ((1, 32, 64, 128), 64, FP32)]


def state(o, lse, code):
    s = State()
    s.o = raw_tensor(o.ctypes.data, list(o.shape), [x // o.itemsize for x in o.strides])
    s.dtype = code
    s.lse = lse.ctypes.data
    s.lse_strides[:] = [x // 4 for x in lse.strides]
    return s


def bf16_to_f64(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default=default_lib())
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    lib = Lib(args.lib)
    src = np.ones(25_000_000, np.float32)
    dst = np.empty_like(src)
    copy = min(_timed(lambda: np.copyto(dst, src)) for _ in range(args.repeats))
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores; "
          f"lib {args.lib}; one-thread copy {2 * src.nbytes / copy / 1e9:.1f} GB/s")
    ok = True
    for shape, n, code in CASES:
        rng = np.random.default_rng(54)
        if code == BF16:  # bf16 bits of values in [-2, 2)
            os_ = [(rng.standard_normal(shape, np.float32).view(np.uint32) >> 16).astype(np.uint16) for _ in range(n)]
        else:
            os_ = [rng.standard_normal(shape, np.float32) for _ in range(n)]
        lses = [(rng.random(shape[:3], np.float32) * 20 - 10) for _ in range(n)]
        out = np.full(shape, 0x7fc0, np.uint16)
        out_lse = np.full(shape[:3], np.nan, np.float32)
        states = [state(o, l, code) for o, l in zip(os_, lses)]
        o_state = state(out, out_lse, BF16)
        lib.merge_states(DEVICE_CPU, states, o_state, None)
        # The first head against float64.
        f64 = [bf16_to_f64(o[0, 0]) if code == BF16 else o[0, 0].astype(np.float64) for o in os_]
        lse = np.stack([l[0, 0].astype(np.float64) for l in lses])
        m = lse.max(0)
        w = np.exp(lse - m)
        want = sum(w[k][:, None] * f64[k] for k in range(n)) / w.sum(0)[:, None]
        err = np.abs(bf16_to_f64(out[0, 0]) - want).max() / max(np.abs(want).max(), 1e-3)
        valid = err <= 2.0 ** -8 and np.abs(out_lse[0, 0] - (m + np.log(w.sum(0)))).max() <= 1e-4
        ok = ok and valid
        t = min(_timed(lambda: lib.merge_states(DEVICE_CPU, states, o_state, None)) for _ in range(args.repeats))
        moved = sum(o.nbytes for o in os_) + out.nbytes
        print(f"{n} {'bf16' if code == BF16 else 'fp32'} states {list(shape)} -> bf16: {t * 1e3:.2f} ms, "
              f"{moved / t / 1e9:.2f} GB/s; {'valid' if valid else 'INVALID'} (rel O {err:.1e})")
    return 0 if ok else 1


def _timed(fn):
    a = time.perf_counter()
    fn()
    return time.perf_counter() - a


if __name__ == "__main__":
    sys.exit(main())
