#!/usr/bin/env python3
"""Can CudaForward.ScoresRisingAndFallingAcrossTiles fail? A numpy model of its cases.

The GPU test (tests/gpu/cuda_forward_test.cpp) drifts the scores along the keys (every query's
dim 0 is 1, key j's dim 0 is ramp * j) and compares the kernel with the float64 reference under
DESIGN §3's rule: error <= 2 x (the naive same-precision implementation's error) + 1e-5. For each
of its cases (one head, causal) this prints that tolerance, the error of a model of the lazy
kernel (128-key tiles, fp32 scores and sums, the running maximum kept unless a tile's exceeds it
by more than 8 in base 2, P rounded to the input dtype before P V) and the error of the same
kernel with the rescale of O and l left out when the maximum moves (the bug the test is for).
The test is useful where the bug's error is far above the tolerance and the lazy model's far
below. Falling ramps never move the maximum, so there the bug changes nothing (they cover the
path that never rescales). bf16 is left out of the steep ramp: scores in the hundreds make its
naive reference (S rounded to bf16) err by O(1).
Usage: python3 bench/experiments/lazy_rescale_test_model.py   (numpy; a few seconds)
"""
import numpy as np


def bf16(x):
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32)


def f16(x):
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


def run(ramp, d, nq, nk, rnd, rng, tile=128):
    q = rnd(rng.standard_normal((nq, d)))
    q[:, 0] = 1
    k = rnd(rng.standard_normal((nk, d)))
    k[:, 0] = rnd(ramp * np.arange(nk))
    v = rnd(rng.standard_normal((nk, d)))
    scale = 1 / np.sqrt(d)
    masked = np.arange(nk)[None, :] > np.arange(nq)[:, None] + (nk - nq)  # causal, bottom-right
    s64 = (q.astype(np.float64) @ k.T.astype(np.float64)) * scale
    s64[masked] = -np.inf
    p = np.exp(s64 - s64.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v
    sn = rnd((q @ k.T) * np.float32(scale))
    sn[masked] = -np.inf
    pn = np.exp(sn - sn.max(1, keepdims=True))
    naive = np.abs(rnd(rnd(pn / pn.sum(1, keepdims=True)) @ v) - ref).max()
    s2 = (q @ k.T) * np.float32(scale * np.log2(np.e))
    s2[masked] = -np.inf

    def kernel(rescale):
        m = np.full(nq, -np.inf, np.float32)
        l = np.zeros(nq, np.float32)
        acc = np.zeros((nq, d), np.float32)
        for t0 in range(0, nk, tile):
            s = s2[:, t0:t0 + tile]
            tm = s.max(1)
            with np.errstate(invalid="ignore"):
                keep = (tm - m) <= 8
            mn = np.where(keep, m, np.maximum(m, tm))
            mu = np.where(np.isinf(mn), 0, mn)
            alpha = np.where(mn == m, 1, np.exp2(np.where(np.isinf(m), -np.inf, m) - mu)) if rescale else 1
            pt = np.exp2(s - mu[:, None]).astype(np.float32)
            l = l * alpha + pt.sum(1)
            acc = acc * (alpha[:, None] if rescale else 1) + rnd(pt) @ v[t0:t0 + tile]
            m = mn
        return np.abs(rnd(acc / np.where(l > 0, l, 1)[:, None]) - ref).max()

    return 2 * naive + 1e-5, kernel(True), kernel(False)


def main():
    rng = np.random.default_rng(1)
    print(f"{'dtype':5} {'ramp':>5} {'D':>4} {'Nq':>4} {'Nk':>5} {'tolerance':>10} {'lazy err':>9} {'no-rescale err':>15}")
    for name, rnd, ramp in (("f16", f16, 1.5), ("bf16", bf16, 0.15), ("f16", f16, 0.15), ("bf16", bf16, -0.5)):
        for d in (64, 128):
            for nq, nk in ((333, 1500), (1, 3001), (7, 2000)):
                tol, lazy, bug = run(ramp, d, nq, nk, rnd, rng)
                print(f"{name:5} {ramp:5} {d:4} {nq:4} {nk:5} {tol:10.3g} {lazy:9.3g} {bug:15.3g}"
                      f"  lazy {'passes' if lazy <= tol else 'FAILS'}, bug {'caught' if bug > tol else 'missed'}")


if __name__ == "__main__":
    main()
