#!/usr/bin/env python3
"""attnfuse against its peers on one GPU, in one process, on identical inputs.

For each case: build the inputs, check every implementation against a float64 reference on a
sample of query rows (all keys), then time each with CUDA events (median of many runs after
warm-up, rotating over several input sets so the L2 does not flatter), and report ms, TFLOP/s
(unmasked work only) and ratios against PyTorch SDPA (cuDNN and flash backends) and compiled
flex_attention. Results go to a JSON file with the date, device and command.

Usage: python3 bench/gpu_peers.py --lib build/lib/libattnfuse_c.so [--suite quick|full] [--out F]
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch._dynamo

# Every case is a new (score_mod, mask, shape): let flex recompile instead of falling back to eager.
torch._dynamo.config.cache_size_limit = 512
if hasattr(torch._dynamo.config, "recompile_limit"):
    torch._dynamo.config.recompile_limit = 512

try:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    FLEX = torch.compile(flex_attention, dynamic=False)
except Exception as e:  # noqa: BLE001 - report and continue without flex
    FLEX = None
    FLEX_ERROR = str(e)

# ---------------------------------------------------------------- attnfuse through the C ABI


from attnfuse_abi import Args, Tensor  # noqa: E402  (the C ABI's ctypes mirrors)


def as_tensor(t):
    assert t.dim() == 4 and t.stride(3) == 1
    return Tensor(t.data_ptr(), (ctypes.c_int64 * 4)(*t.shape), (ctypes.c_int64 * 4)(*t.stride()))


class Attnfuse:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.attnfuse_compile.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                              ctypes.POINTER(ctypes.c_void_p)]
        self.lib.attnfuse_launch.argtypes = [ctypes.c_void_p, ctypes.POINTER(Args), ctypes.c_void_p]
        self.lib.attnfuse_compile_rope.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                                   ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
        self.lib.attnfuse_last_error.restype = ctypes.c_char_p

    def compile(self, program, dtype, head_dim):
        handle = ctypes.c_void_p()
        code = {torch.bfloat16: 1, torch.float16: 2}[dtype]
        st = self.lib.attnfuse_compile(program.encode(), 1, code, head_dim, ctypes.byref(handle))
        if st != 0:
            raise RuntimeError(self.lib.attnfuse_last_error().decode())
        return handle

    def compile_rope(self, program, dtype, head_dim, rope_mode):
        """attnfuse_compile_rope: rope_mode 0 auto, 1 fused, 2 prerotate."""
        handle = ctypes.c_void_p()
        code = {torch.bfloat16: 1, torch.float16: 2}[dtype]
        st = self.lib.attnfuse_compile_rope(program.encode(), 1, code, head_dim, rope_mode, ctypes.byref(handle))
        if st != 0:
            raise RuntimeError(self.lib.attnfuse_last_error().decode())
        return handle

    def make_call(self, handle, q, k, v, out, bias=None):
        args = Args()
        args.q, args.k, args.v, args.out = as_tensor(q), as_tensor(k), as_tensor(v), as_tensor(out)
        args.lse = None
        keep = []
        if bias is not None:
            bt = as_tensor(bias)
            keep.append(bt)
            args.bias = ctypes.pointer(bt)
            args.bias_dtype = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}[bias.dtype]
        args_ref = ctypes.byref(args)
        lib = self.lib

        def call():
            stream = torch.cuda.current_stream().cuda_stream
            st = lib.attnfuse_launch(handle, args_ref, ctypes.c_void_p(stream))
            if st != 0:
                raise RuntimeError(lib.attnfuse_last_error().decode())
            return out

        call._keep = (args, keep)
        return call


# ---------------------------------------------------------------- cases


def alibi_slopes(h):
    n = 2 ** int(math.floor(math.log2(h)))
    s = [2 ** (-8 * (i + 1) / n) for i in range(n)]
    if n < h:
        s += [2 ** (-8 * (2 * i + 1) / (2 * n)) for i in range(h - n)]
    return torch.tensor(s, dtype=torch.float64)


class Case:
    def __init__(self, name, program, B, Hq, Hkv, N, D, causal=False, window=None, alibi=False,
                 bias=False, softcap=None, relu=False):
        self.__dict__.update(locals())
        del self.__dict__["self"]

    def density(self):
        N = self.N
        i = torch.arange(N, dtype=torch.float64)
        lo = torch.zeros(N, dtype=torch.float64)
        hi = torch.full((N,), float(N))
        if self.causal:
            hi = i + 1
        if self.window:
            lo = torch.clamp(i - self.window + 1, min=0)
            if not self.causal:
                hi = torch.clamp(i + self.window, max=N)
        return float((hi - lo).clamp(min=0).sum()) / (N * N)

    def flops(self):
        return 4.0 * self.B * self.Hq * self.N * self.N * self.D * self.density()


def reference_rows(c, q, k, v, bias, rows):
    """float64 reference for the sampled query rows (DESIGN §2 semantics), [B, Hq, len(rows), D]."""
    g = c.Hq // c.Hkv
    qd = q[:, :, rows].double()
    kd = k.double().repeat_interleave(g, dim=1)
    vd = v.double().repeat_interleave(g, dim=1)
    s = torch.einsum("bhid,bhjd->bhij", qd, kd) / math.sqrt(c.D)
    i = rows.view(-1, 1).double()
    j = torch.arange(c.N, device=q.device).view(1, -1).double()
    delta = i - j
    if c.alibi:
        s = s - alibi_slopes(c.Hq).to(q.device).view(1, -1, 1, 1) * delta.abs()
    if c.bias:
        s = s + bias[:, :, rows].double()
    if c.softcap:
        s = c.softcap * torch.tanh(s / c.softcap)
    keep = torch.ones_like(delta, dtype=torch.bool)
    if c.causal:
        keep &= delta >= 0
    if c.window:
        keep &= delta.abs() < c.window
    if c.relu:
        p = torch.where(keep, s.clamp(min=0), 0.0) / keep.sum(-1, keepdim=True).clamp(min=1)
    else:
        p = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.einsum("bhij,bhjd->bhid", p, vd)


def peers(c, q, k, v, bias):
    """name -> zero-arg callable returning the output, for each peer that supports the case."""
    out = {}
    g = c.Hq // c.Hkv
    plain = not (c.window or c.alibi or c.bias or c.softcap or c.relu)
    if plain or (c.bias and not c.causal):
        for name, backend in (("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa_flash", SDPBackend.FLASH_ATTENTION)):
            mask = bias.to(q.dtype) if c.bias else None
            if c.bias and backend == SDPBackend.FLASH_ATTENTION:
                continue  # flash takes no additive mask

            def run(backend=backend, mask=mask):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=c.causal,
                                                          enable_gqa=g > 1)
            out[name] = run
    if FLEX is not None and not c.relu:
        slopes = alibi_slopes(c.Hq).to(q.device).float()

        def mask_mod(b, h, qi, kv):
            keep = qi >= 0
            if c.causal:
                keep = keep & (qi >= kv)
            if c.window:
                keep = keep & ((qi - kv).abs() < c.window)
            return keep

        def score_mod(score, b, h, qi, kv):
            if c.alibi:
                score = score - slopes[h] * (qi - kv).abs()
            if c.bias:
                score = score + bias[0, h, qi, kv]
            if c.softcap:
                score = c.softcap * torch.tanh(score / c.softcap)
            return score

        masked = c.causal or c.window
        bm = create_block_mask(mask_mod, None, None, c.N, c.N, device=q.device) if masked else None
        mod = score_mod if (c.alibi or c.bias or c.softcap) else None
        out["flex"] = lambda: FLEX(q, k, v, score_mod=mod, block_mask=bm, enable_gqa=g > 1)
    return out


def time_ms(fns, warmup=5, iters=30):
    """Median ms of fns[i % len(fns)] (rotating input sets), CUDA events."""
    for i in range(warmup):
        fns[i % len(fns)]()
    torch.cuda.synchronize()
    times = []
    for i in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fns[i % len(fns)]()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def run_case(af, c, dtype, sets=3, with_peers=True):
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(1234)
    inputs = []
    for _ in range(sets):
        q = torch.randn(c.B, c.Hq, c.N, c.D, device=dev, dtype=dtype, generator=gen)
        k = torch.randn(c.B, c.Hkv, c.N, c.D, device=dev, dtype=dtype, generator=gen)
        v = torch.randn(c.B, c.Hkv, c.N, c.D, device=dev, dtype=dtype, generator=gen)
        # bias=True: an fp32 bias; bias="inputs": one in the inputs' dtype (as SDPA's attn_mask is).
        bias_dtype = dtype if c.bias == "inputs" else torch.float32
        bias = torch.randn(1, c.Hq, c.N, c.N, device=dev, dtype=bias_dtype, generator=gen) if c.bias else None
        inputs.append((q, k, v, bias))
    handle = af.compile(c.program, dtype, c.D)
    impls = {"attnfuse": []}
    for (q, k, v, bias) in inputs:
        out = torch.full((c.B, c.Hq, c.N, c.D), float("nan"), device=dev, dtype=dtype)
        impls["attnfuse"].append(af.make_call(handle, q, k, v, out, bias))
        for name, fn in (peers(c, q, k, v, bias) if with_peers else {}).items():
            impls.setdefault(name, []).append(fn)

    # Validate before timing: every implementation on set 0 against float64 on sampled rows.
    q, k, v, bias = inputs[0]
    rows = torch.unique(torch.cat([torch.randint(0, c.N, (96,), device=dev, generator=gen),
                                   torch.arange(max(0, c.N - 32), c.N, device=dev),
                                   torch.arange(0, min(32, c.N), device=dev)]))
    ref = reference_rows(c, q, k, v, bias, rows)
    result = {"case": c.name, "program": c.program, "B": c.B, "Hq": c.Hq, "Hkv": c.Hkv, "N": c.N, "D": c.D,
              "dtype": str(dtype).replace("torch.", ""), "density": c.density(), "impls": {}}
    for name, fns in impls.items():
        entry = {}
        try:
            o = fns[0]()
            torch.cuda.synchronize()
            got = o[:, :, rows].double()
            err = float((got - ref).norm() / ref.norm().clamp(min=1e-30))
            entry["rel_l2_error"] = err
            entry["valid"] = bool(torch.isfinite(got).all()) and err < 2e-2
            if entry["valid"]:
                ms = time_ms(fns)
                entry["ms"] = ms
                entry["tflops"] = c.flops() / (ms * 1e-3) / 1e12
        except Exception as e:  # noqa: BLE001 - a peer that cannot run this case is reported, not fatal
            entry["error"] = str(e).splitlines()[0][:200]
        result["impls"][name] = entry
    ours = result["impls"]["attnfuse"].get("ms")
    for name, e in result["impls"].items():
        if name != "attnfuse" and ours and e.get("ms"):
            e["speedup_of_attnfuse"] = e["ms"] / ours
    return result


def suite(kind):
    sdp = "scaled_dot_product(Q, K)"
    cases = []
    gpt2 = dict(B=4, Hq=12, Hkv=12, D=64)
    llama = dict(B=1, Hq=32, Hkv=8, D=128)
    ns_gpt2 = [1024, 2048, 4096, 8192] if kind == "full" else [4096]
    ns_llama = [2048, 4096, 8192, 16384] if kind == "full" else [4096, 8192]
    for geo_name, geo, ns in (("gpt2", gpt2, ns_gpt2), ("llama3-8b", llama, ns_llama)):
        for N in ns:
            cases.append(Case(f"causal {geo_name}", f"softmax(causal({sdp})) @ V", N=N, causal=True, **geo))
            cases.append(Case(f"dense {geo_name}", f"softmax({sdp}) @ V", N=N, **geo))
    N = 8192
    cases.append(Case("causal sliding window 1024 llama3-8b", f"softmax(sliding_window(causal({sdp}), 1024)) @ V",
                      N=N, causal=True, window=1024, **llama))
    cases.append(Case("causal+alibi llama3-8b", f"softmax(alibi(causal({sdp}))) @ V", N=N, causal=True, alibi=True, **llama))
    cases.append(Case("softcap 50 causal llama3-8b", f"softmax(softcap(causal({sdp}), 50)) @ V", N=N, causal=True,
                      softcap=50.0, **llama))
    cases.append(Case("relu causal llama3-8b", f"relu_attention(causal({sdp})) @ V", N=N, causal=True, relu=True, **llama))
    cases.append(Case("additive bias gpt2", f"softmax(additive_bias({sdp})) @ V", N=4096, bias=True, **gpt2))
    cases.append(Case("additive bias gpt2, 16-bit bias", f"softmax(additive_bias({sdp})) @ V", N=4096,
                      bias="inputs", **gpt2))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/lib/libattnfuse_c.so")
    ap.add_argument("--suite", choices=["quick", "full"], default="quick")
    ap.add_argument("--out", default=None)
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--ours-only", action="store_true", help="skip the peers (tile sweeps)")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    a = ap.parse_args()
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    af = Attnfuse(os.path.abspath(a.lib))
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
            "host": platform.node(), "flex": FLEX is not None}
    results = []
    hdr = f"{'case':40} {'N':>6} {'impl':11} {'ms':>8} {'TFLOP/s':>8} {'err':>8} {'ours x':>7}"
    print(hdr, flush=True)
    for c in suite(a.suite):
        if a.filter not in c.name:
            continue
        t0 = time.time()
        r = run_case(af, c, dtype, with_peers=not a.ours_only)
        results.append(r)
        for name, e in r["impls"].items():
            ms = f"{e['ms']:8.3f}" if "ms" in e else "       -"
            tf = f"{e['tflops']:8.1f}" if "tflops" in e else "       -"
            err = f"{e['rel_l2_error']:8.1e}" if "rel_l2_error" in e else "       -"
            sp = f"{e['speedup_of_attnfuse']:7.2f}" if "speedup_of_attnfuse" in e else ""
            note = f"  {e['error']}" if "error" in e else ("" if e.get("valid", True) else "  INVALID")
            print(f"{c.name:40} {c.N:6} {name:11} {ms} {tf} {err} {sp}{note}", flush=True)
        print(f"  ({time.time() - t0:.1f} s)", flush=True)
    doc = {"meta": meta, "results": results}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
