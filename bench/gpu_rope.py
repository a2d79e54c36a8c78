#!/usr/bin/env python3
"""RoPE on the GPU: attnfuse's rope / rope_window against its peers, in one process.

Suites (--suite):
  peers       causal + RoPE: attnfuse (auto, fused, prerotate placements) against SDPA-cuDNN,
              SDPA-flash and compiled flex_attention, each peer fed by a torch.compile'd
              pre-rotation (timed together), at the GPT-2 and Llama-3-8B geometries.
  placement   fused vs prerotate over N and batch: the measurements the rope_mode=auto cost
              model is fitted to (passes/rope_placement.cpp).
  window      rope_window on vs off (both attnfuse, rope_mode auto) at the Llama-3.2-3B and
              Qwen2.5-7B-1M geometries, with the ceiling 2/(1+s) that `attnfuse window-table`
              predicts (s = retained share of QK work).
Every implementation is checked against a float64 reference on sampled rows before it is timed.
Usage: python3 bench/gpu_rope.py --lib L --cli attnfuse-binary --suite peers|placement|window --out F
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_peers import FLEX, Attnfuse, time_ms  # noqa: E402

if FLEX is not None:
    from torch.nn.attention.flex_attention import create_block_mask

# ---------------------------------------------------------------- RoPE in PyTorch


def inv_freq(D, base, llama3=None):
    """θ_r in float64 (Hugging Face's default and llama3 rules)."""
    f = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    if llama3:
        factor, lo, hi, orig = llama3
        wavelen = 2 * math.pi / f
        low_wl, high_wl = orig / lo, orig / hi
        smooth = (orig / wavelen - lo) / (hi - lo)
        scaled = torch.where(wavelen > low_wl, f / factor, f)
        mid = (wavelen <= low_wl) & (wavelen >= high_wl)
        f = torch.where(mid, (1 - smooth) * f / factor + smooth * f, scaled)
    return f


def cos_sin(theta, positions):
    ang = positions.double().view(-1, 1) * theta.view(1, -1).to(positions.device)
    return torch.cos(ang), torch.sin(ang)  # [N, D/2]


def rotate64(x, cos, sin):
    """neox rotation of x [..., N, D] in float64."""
    h = x.shape[-1] // 2
    a, b = x[..., :h].double(), x[..., h:].double()
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def _rotate_half_apply(x, cos, sin):
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos + rot * sin


# What a model does before attention (HF apply_rotary_pos_emb with cached cos/sin tables),
# compiled so the peers get a fused elementwise kernel for it.
PREROTATE = torch.compile(lambda q, k, cos, sin: (_rotate_half_apply(q, cos, sin), _rotate_half_apply(k, cos, sin)))


class RopeCase:
    def __init__(self, name, B, Hq, Hkv, N, D, base, llama3=None, window_k=None, geometry=""):
        self.__dict__.update(locals())
        del self.__dict__["self"]

    def rope_text(self):
        t = f"base={self.base:g}"
        if self.llama3:
            factor, lo, hi, orig = self.llama3
            t += (f", rope_type=llama3, factor={factor:g}, low_freq_factor={lo:g}, high_freq_factor={hi:g}, "
                  f"original_max_position_embeddings={orig}")
        return t

    def program(self, windowed):
        if windowed:
            return f"softmax(causal(rope_window(Q, K, k={self.window_k:g}, {self.rope_text()}))) @ V"
        return f"softmax(causal(rope(Q, K, {self.rope_text()}))) @ V"

    def flops(self):
        return 4.0 * self.B * self.Hq * self.N * self.N * self.D * ((self.N + 1) / (2 * self.N))


def reference_rows(c, q, k, v, rows, windowed):
    """float64 causal rope / rope_window attention for the sampled query rows."""
    g = c.Hq // c.Hkv
    theta = inv_freq(c.D, c.base, c.llama3)
    pos = torch.arange(c.N, device=q.device)
    cos, sin = cos_sin(theta, pos)
    qr = rotate64(q[:, :, rows], cos[rows], sin[rows])
    kr = rotate64(k, cos, sin).repeat_interleave(g, dim=1)
    vd = v.double().repeat_interleave(g, dim=1)
    delta = rows.view(-1, 1).double() - pos.view(1, -1).double()
    if windowed:
        h = c.D // 2
        limits = torch.floor(c.window_k * 2 * math.pi / theta)  # rope::window_limits
        s = torch.zeros(c.B, c.Hq, len(rows), c.N, dtype=torch.float64, device=q.device)
        for r in range(h):
            keep = (delta.abs() <= limits[r].item()).double()
            t = (qr[..., r:r + 1] @ kr[..., r:r + 1].transpose(-1, -2) +
                 qr[..., r + h:r + h + 1] @ kr[..., r + h:r + h + 1].transpose(-1, -2))
            s += t * keep
    else:
        s = qr @ kr.transpose(-1, -2)
    s = s / math.sqrt(c.D)
    p = torch.softmax(s.masked_fill(delta < 0, float("-inf")), dim=-1)
    return p @ vd


def peer_calls(c, q, k, v, cos16, sin16):
    """Peers fed by the compiled pre-rotation (timed together)."""
    out = {}
    g = c.Hq // c.Hkv
    for name, backend in (("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa_flash", SDPBackend.FLASH_ATTENTION)):
        def run(backend=backend):
            qr, kr = PREROTATE(q, k, cos16, sin16)
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(qr, kr, v, is_causal=True, enable_gqa=g > 1)
        out[name + "+rot"] = run
    if FLEX is not None:
        bm = create_block_mask(lambda b, h, qi, kv: qi >= kv, None, None, c.N, c.N, device=q.device)

        def run_flex():
            qr, kr = PREROTATE(q, k, cos16, sin16)
            return FLEX(qr, kr, v, block_mask=bm, enable_gqa=g > 1)
        out["flex+rot"] = run_flex
    return out


MODES = {"auto": 0, "fused": 1, "prerotate": 2}


def run(af, c, dtype, impls_wanted, windowed_too=False, peers=False, sets=2, iters=20):
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(4321)
    inputs = []
    for _ in range(sets):
        q = torch.randn(c.B, c.Hq, c.N, c.D, device=dev, dtype=dtype, generator=gen)
        k = torch.randn(c.B, c.Hkv, c.N, c.D, device=dev, dtype=dtype, generator=gen)
        v = torch.randn(c.B, c.Hkv, c.N, c.D, device=dev, dtype=dtype, generator=gen)
        inputs.append((q, k, v))
    theta = inv_freq(c.D, c.base, c.llama3)
    cos, sin = cos_sin(theta, torch.arange(c.N, device=dev))
    cos16 = torch.cat([cos, cos], -1).to(dtype)
    sin16 = torch.cat([sin, sin], -1).to(dtype)

    impls = {}  # name -> (windowed, [calls])
    for mode in impls_wanted:
        variants = [(False, "rope")] + ([(True, "rope_window")] if windowed_too else [])
        for windowed, label in variants:
            handle = af.compile_rope(c.program(windowed), dtype, c.D, MODES[mode])
            calls = []
            for (q, k, v) in inputs:
                o = torch.full((c.B, c.Hq, c.N, c.D), float("nan"), device=dev, dtype=dtype)
                calls.append(af.make_call(handle, q, k, v, o))
            impls[f"attnfuse_{label}_{mode}"] = (windowed, calls)
    if peers:
        for (q, k, v) in inputs:
            for name, fn in peer_calls(c, q, k, v, cos16, sin16).items():
                impls.setdefault(name, (False, []))[1].append(fn)

    q, k, v = inputs[0]
    nrows = 64 if c.N <= 32768 else 16
    rows = torch.unique(torch.cat([torch.randint(0, c.N, (nrows,), device=dev, generator=gen),
                                   torch.arange(c.N - 8, c.N, device=dev), torch.arange(0, 8, device=dev)]))
    refs = {w: reference_rows(c, q, k, v, rows, w) for w in {w for w, _ in impls.values()}}
    res = {"case": c.name, "geometry": c.geometry, "B": c.B, "Hq": c.Hq, "Hkv": c.Hkv, "N": c.N, "D": c.D,
           "base": c.base, "llama3": c.llama3, "window_k": c.window_k, "impls": {}}
    for name, (windowed, calls) in impls.items():
        e = {}
        try:
            o = calls[0]()
            torch.cuda.synchronize()
            got = o[:, :, rows].double()
            ref = refs[windowed]
            err = float((got - ref).norm() / ref.norm())
            e["rel_l2_error"] = err
            e["valid"] = bool(torch.isfinite(got).all()) and err < 2e-2
            if e["valid"]:
                e["ms"] = time_ms(calls, warmup=3, iters=iters)
                e["tflops"] = c.flops() / (e["ms"] * 1e-3) / 1e12
        except Exception as ex:  # noqa: BLE001 - reported, not fatal
            e["error"] = str(ex).splitlines()[0][:200]
        res["impls"][name] = e
    return res


def ceiling(cli, config, k, n):
    """(retained share s, ceiling 2/(1+s)) from `attnfuse window-table`."""
    out = subprocess.run([cli, "window-table", "--config", config, "--k", str(k), "--seq-len", str(n)],
                         capture_output=True, text=True, check=True).stdout
    vals = dict(line.split("=") for line in out.splitlines() if "=" in line and " " not in line)
    return float(vals["retained_share"]), float(vals["ceiling_speedup"])


def suite(kind):
    gpt2 = dict(B=4, Hq=12, Hkv=12, D=64, base=10000.0, geometry="gpt2")
    llama = dict(B=1, Hq=32, Hkv=8, D=128, base=500000.0, geometry="llama3-8b")
    if kind == "peers":
        return [RopeCase(f"causal+rope {g['geometry']}", N=n, **g)
                for g, ns in ((gpt2, [1024, 2048, 4096, 8192, 16384, 32768]), (llama, [1024, 2048, 4096, 8192, 16384, 32768]))
                for n in ns]
    if kind == "placement":
        cases = []
        for b in (1, 4):
            for n in (256, 512, 1024, 2048, 4096, 8192, 16384):
                cases.append(RopeCase(f"placement llama3-8b B{b}", N=n, **dict(llama, B=b)))
        for n in (512, 1024, 2048, 4096, 8192):
            cases.append(RopeCase("placement gpt2", N=n, **gpt2))
        return cases
    if kind == "window":
        l32 = dict(B=1, Hq=24, Hkv=8, D=128, base=500000.0, llama3=(32.0, 1.0, 4.0, 8192), geometry="llama-3.2-3b")
        qw = dict(B=1, Hq=28, Hkv=4, D=128, base=1e7, geometry="qwen2.5-7b-1m")
        cases = [RopeCase("rope_window llama-3.2-3b", N=n, window_k=1.0, **l32) for n in (8192, 32768, 131072)]
        cases += [RopeCase("rope_window qwen2.5-7b-1m", N=n, window_k=1.0, **qw) for n in (32768, 131072, 262144)]
        # k so large that every pair is live everywhere: nothing is pruned, so on / off is the
        # window machinery's own cost (the per-tile plan, the Q-fragment masks).
        cases.append(RopeCase("rope_window overhead (k=1e6) llama-3.2-3b", N=32768, window_k=1e6, **l32))
        return cases
    raise ValueError(kind)


CONFIGS = {"llama-3.2-3b": "examples/llama-3.2-3b-config.json", "qwen2.5-7b-1m": "examples/qwen2.5-7b-1m-config.json"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/lib/libattnfuse_c.so")
    ap.add_argument("--cli", default="build/bin/attnfuse")
    ap.add_argument("--suite", choices=["peers", "placement", "window"], required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--max-n", type=int, default=1 << 30)
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    a = ap.parse_args()
    af = Attnfuse(os.path.abspath(a.lib))
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "command": " ".join([os.path.basename(sys.executable)] + sys.argv), "flex": FLEX is not None}
    results = []
    print(f"{'case':32} {'N':>7} {'impl':28} {'ms':>9} {'TFLOP/s':>8} {'err':>8} {'note'}", flush=True)
    for c in suite(a.suite):
        if c.N > a.max_n or a.filter not in c.name:
            continue
        t0 = time.time()
        if a.suite == "peers":
            r = run(af, c, torch.bfloat16, ["auto", "fused", "prerotate"], peers=True)
        elif a.suite == "placement":
            r = run(af, c, torch.bfloat16, ["fused", "prerotate"], iters=30)
        else:
            iters = 10 if c.N <= 32768 else 3
            r = run(af, c, torch.bfloat16, ["auto"], windowed_too=True, iters=iters, sets=1)
            s, ceil = ceiling(a.cli, CONFIGS[c.geometry], c.window_k, c.N)
            on, off = r["impls"]["attnfuse_rope_window_auto"].get("ms"), r["impls"]["attnfuse_rope_auto"].get("ms")
            r["retained_share"], r["ceiling_speedup"] = s, ceil
            if on and off:
                r["speedup"] = off / on
                r["share_of_ceiling"] = (off / on - 1) / (ceil - 1) if ceil > 1 else None
        results.append(r)
        ours = r["impls"].get("attnfuse_rope_auto", {}).get("ms")
        for name, e in r["impls"].items():
            ms = f"{e['ms']:9.3f}" if "ms" in e else "        -"
            tf = f"{e['tflops']:8.1f}" if "tflops" in e else "       -"
            err = f"{e['rel_l2_error']:8.1e}" if "rel_l2_error" in e else "       -"
            note = e.get("error", "" if e.get("valid", True) else "INVALID")
            if ours and "ms" in e and name.endswith("+rot"):
                e["speedup_of_attnfuse"] = e["ms"] / ours
                note = f"attnfuse x{e['speedup_of_attnfuse']:.2f}"
            print(f"{c.name:32} {c.N:7} {name:28} {ms} {tf} {err} {note}", flush=True)
        if "speedup" in r:
            share = r.get("share_of_ceiling")
            gain = f"{100 * share:.0f}% of the ceiling's gain" if share is not None else "nothing pruned"
            print(f"  rope_window speedup {r['speedup']:.3f} vs ceiling {r['ceiling_speedup']:.3f} "
                  f"(s={r['retained_share']:.3f}): {gain}", flush=True)
        print(f"  ({time.time() - t0:.1f} s)", flush=True)
        if a.out:
            with open(a.out, "w") as f:
                json.dump({"meta": meta, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
