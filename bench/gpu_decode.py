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
             as documents (Llama-3-8B), TB/s of K/V, against FA2 varlen.

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
import ctypes
import datetime
import itertools
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------- the C ABI (include/attnfuse/attnfuse.h)

from attnfuse_abi import (BF16, DEVICE_CPU, DEVICE_CUDA, FP16, FP32, MISSING_TENSOR, OK, PAGED_HND,  # noqa: E402
                          PAGED_NHD, Args, Offsets, PagedKV, Tensor, raw_tensor)


def default_lib():
    for cand in (os.environ.get("ATTNFUSE_LIB"), os.path.join(REPO, ".devcarry/lib/libattnfuse_c.so"),
                 os.path.join(REPO, "build/lib/libattnfuse_c.so")):
        if cand and os.path.exists(cand):
            return cand
    return os.path.join(REPO, "build/lib/libattnfuse_c.so")


class Lib:
    """The C ABI's functions with their argument types (no torch needed)."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        lib = self.lib = ctypes.CDLL(self.path)
        vp, i64 = ctypes.c_void_p, ctypes.c_int64
        lib.attnfuse_compile.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(vp)]
        lib.attnfuse_launch.argtypes = [vp, ctypes.POINTER(Args), vp]
        lib.attnfuse_kernel_free.argtypes = [vp]
        lib.attnfuse_last_error.restype = ctypes.c_char_p
        lib.attnfuse_block_mask_from_dense.argtypes = [vp, i64, i64, i64, i64, ctypes.c_int, ctypes.c_int,
                                                       ctypes.POINTER(vp)]
        lib.attnfuse_block_mask_free.argtypes = [vp]

    def error(self):
        return self.lib.attnfuse_last_error().decode()

    def compile(self, program, device, dtype_code, head_dim):
        handle = ctypes.c_void_p()
        st = self.lib.attnfuse_compile(program.encode(), device, dtype_code, head_dim, ctypes.byref(handle))
        if st != OK:
            raise RuntimeError(f"attnfuse_compile: status {st}: {self.error()}")
        return handle

    def block_mask_from_dense(self, grid_ptr, batch, heads, q_len, kv_len, block_q, block_k):
        """attnfuse_block_mask_from_dense on a host uint8 grid; free the result with .free()."""
        handle = ctypes.c_void_p()
        st = self.lib.attnfuse_block_mask_from_dense(grid_ptr, batch, heads, q_len, kv_len, block_q, block_k,
                                                     ctypes.byref(handle))
        if st != OK:
            raise RuntimeError(f"attnfuse_block_mask_from_dense: status {st}: {self.error()}")
        return BlockMaskHandle(self, handle)

    def launch(self, handle, args, stream=None):
        return self.lib.attnfuse_launch(handle, ctypes.byref(args), ctypes.c_void_p(stream))


class BlockMaskHandle:
    """An attnfuse_block_mask*: pass .handle as attnfuse_args.block_mask; .free() when no launch
    that reads it is in flight."""

    def __init__(self, lib, handle):
        self.lib, self.handle = lib, handle

    def free(self):
        if self.handle:
            self.lib.lib.attnfuse_block_mask_free(self.handle)
            self.handle = None


# ---------------------------------------------------------------- --selfcheck (no GPU)

LAYOUT_PROGRAM = r"""
#include <stddef.h>
#include <stdio.h>
#include "attnfuse/attnfuse.h"
#define S(T) printf(#T " sizeof %zu\n", sizeof(T));
#define O(T, f) printf(#T "." #f " %zu\n", offsetof(T, f));
int main(void) {
  S(attnfuse_tensor) O(attnfuse_tensor, data) O(attnfuse_tensor, shape) O(attnfuse_tensor, strides)
  S(attnfuse_offsets) O(attnfuse_offsets, data) O(attnfuse_offsets, is_int64) O(attnfuse_offsets, batch)
  O(attnfuse_offsets, length) O(attnfuse_offsets, batch_stride)
  S(attnfuse_paged_kv) O(attnfuse_paged_kv, k_pages) O(attnfuse_paged_kv, v_pages) O(attnfuse_paged_kv, layout)
  O(attnfuse_paged_kv, page_indices) O(attnfuse_paged_kv, num_page_indices) O(attnfuse_paged_kv, page_indptr)
  O(attnfuse_paged_kv, last_page_len)
  S(attnfuse_args) O(attnfuse_args, q) O(attnfuse_args, k) O(attnfuse_args, v) O(attnfuse_args, out)
  O(attnfuse_args, lse) O(attnfuse_args, lse_strides) O(attnfuse_args, bias) O(attnfuse_args, has_q_offset)
  O(attnfuse_args, q_offset) O(attnfuse_args, cu_seqlens_q) O(attnfuse_args, cu_seqlens_k)
  O(attnfuse_args, paged) O(attnfuse_args, block_mask) O(attnfuse_args, rope_cos) O(attnfuse_args, rope_sin)
  O(attnfuse_args, rope_positions) O(attnfuse_args, rope_pairs) O(attnfuse_args, paged_table_settled)
  printf("enum sizeof %zu\n", sizeof(attnfuse_paged_layout));
  printf("ATTNFUSE_PAGED_NHD %d\nATTNFUSE_PAGED_HND %d\n", (int)ATTNFUSE_PAGED_NHD, (int)ATTNFUSE_PAGED_HND);
  printf("ATTNFUSE_ERROR_MISSING_TENSOR %d\n", (int)ATTNFUSE_ERROR_MISSING_TENSOR);
  return 0;
}
"""


def check_layouts():
    """Compiles LAYOUT_PROGRAM against the header and compares with the ctypes structures."""
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
        with open(src, "w") as f:
            f.write(LAYOUT_PROGRAM)
        try:
            subprocess.run([cc, "-std=c99", "-Wall", "-Werror", "-I", os.path.join(REPO, "include"), src, "-o", exe],
                           check=True, capture_output=True, text=True)
        except FileNotFoundError:
            print(f"selfcheck: no C compiler ({cc}); layout check skipped")
            return True
        except subprocess.CalledProcessError as e:
            print(f"selfcheck: the layout program does not compile:\n{e.stderr}")
            return False
        lines = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines()
    c = {}
    for line in lines:
        key, val = line.rsplit(" ", 1)
        c[key] = int(val)
    ours = {"attnfuse_tensor": Tensor, "attnfuse_offsets": Offsets, "attnfuse_paged_kv": PagedKV,
            "attnfuse_args": Args}
    py = {}
    for cname, cls in ours.items():
        py[f"{cname} sizeof"] = ctypes.sizeof(cls)
        for fname, _ in cls._fields_:
            py[f"{cname}.{fname}"] = getattr(cls, fname).offset
    py["enum sizeof"] = ctypes.sizeof(ctypes.c_int)
    py["ATTNFUSE_PAGED_NHD"], py["ATTNFUSE_PAGED_HND"] = PAGED_NHD, PAGED_HND
    py["ATTNFUSE_ERROR_MISSING_TENSOR"] = MISSING_TENSOR
    ok = True
    for key in sorted(set(c) | set(py)):
        if c.get(key) != py.get(key):
            print(f"selfcheck: MISMATCH {key}: C {c.get(key)} vs ctypes {py.get(key)}")
            ok = False
    print(f"selfcheck: {len(c)} sizes/offsets/enum values of the C header match the ctypes structures"
          if ok else "selfcheck: layout check FAILED")
    return ok


def floats(values):
    return (ctypes.c_float * len(values))(*values)


def host_view(arr, shape):
    strides = [1] * 4
    for i in (2, 1, 0):
        strides[i] = strides[i + 1] * shape[i + 1]
    return raw_tensor(ctypes.addressof(arr), shape, strides)


def check_cpu_abi(lib):
    """The new fields through ctypes on the CPU device: paged = contiguous bit for bit, a block mask
    of all-active blocks = the dense program, document offsets, and a missing mask's status."""
    rng = random.Random(5)
    B, Hq, Hkv, Nq, Nk, D, ps = 2, 4, 2, 1, 37, 16, 8
    q = floats([rng.gauss(0, 1) for _ in range(B * Hq * Nq * D)])
    k = floats([rng.gauss(0, 1) for _ in range(B * Hkv * Nk * D)])
    v = floats([rng.gauss(0, 1) for _ in range(B * Hkv * Nk * D)])
    ok = True
    causal = lib.compile("softmax(causal(scaled_dot_product(Q, K))) @ V", DEVICE_CPU, FP32, 0)
    # contiguous
    o1 = floats([7.0] * (B * Hq * Nq * D))
    a = Args()
    a.q, a.k, a.v, a.out = (host_view(q, [B, Hq, Nq, D]), host_view(k, [B, Hkv, Nk, D]),
                            host_view(v, [B, Hkv, Nk, D]), host_view(o1, [B, Hq, Nq, D]))
    st = lib.launch(causal, a)
    ok &= st == OK
    # paged NHD, pages in a shuffled order with a spare page
    per_seq = (Nk + ps - 1) // ps
    num_pages = B * per_seq + 1
    order = list(range(num_pages))
    rng.shuffle(order)
    kp = floats([float("nan")] * (num_pages * ps * Hkv * D))
    vp = floats([float("nan")] * (num_pages * ps * Hkv * D))
    indices = []
    for b in range(B):
        for p in range(per_seq):
            page = order[b * per_seq + p]
            indices.append(page)
            for r in range(ps):
                u = p * ps + r
                if u >= Nk:
                    break
                for h in range(Hkv):
                    for d in range(D):
                        dst = ((page * ps + r) * Hkv + h) * D + d
                        src = ((b * Hkv + h) * Nk + u) * D + d
                        kp[dst], vp[dst] = k[src], v[src]
    idx = (ctypes.c_int32 * len(indices))(*indices)
    indptr = (ctypes.c_int32 * (B + 1))(*[b * per_seq for b in range(B + 1)])
    last = (ctypes.c_int32 * B)(*([Nk - (per_seq - 1) * ps] * B))
    paged = PagedKV()
    paged.k_pages = host_view(kp, [num_pages, ps, Hkv, D])
    paged.v_pages = host_view(vp, [num_pages, ps, Hkv, D])
    paged.layout = PAGED_NHD
    paged.page_indices, paged.num_page_indices = ctypes.addressof(idx), len(indices)
    paged.page_indptr, paged.last_page_len = ctypes.addressof(indptr), ctypes.addressof(last)
    o2 = floats([7.0] * (B * Hq * Nq * D))
    a2 = Args()
    a2.q, a2.out = host_view(q, [B, Hq, Nq, D]), host_view(o2, [B, Hq, Nq, D])
    a2.paged = ctypes.pointer(paged)
    st2 = lib.launch(causal, a2)
    same = st2 == OK and bytes(o1) == bytes(o2)
    print(f"selfcheck: CPU paged NHD vs contiguous: {'same bits' if same else 'DIFFERENT: ' + lib.error()}")
    ok &= same

    # block_sparse with every block active = the dense program; no mask = MISSING_TENSOR
    N = 40
    qs = floats([rng.gauss(0, 1) for _ in range(Hq * N * D)])
    ks = floats([rng.gauss(0, 1) for _ in range(Hkv * N * D)])
    vs = floats([rng.gauss(0, 1) for _ in range(Hkv * N * D)])
    sparse = lib.compile("softmax(block_sparse(scaled_dot_product(Q, K))) @ V", DEVICE_CPU, FP32, 0)
    dense = lib.compile("softmax(scaled_dot_product(Q, K)) @ V", DEVICE_CPU, FP32, 0)
    nb = (N + 15) // 16
    grid = (ctypes.c_uint8 * (nb * nb))(*([1] * (nb * nb)))
    mask = lib.block_mask_from_dense(ctypes.addressof(grid), 1, 1, N, N, 16, 16)
    outs = []
    for handle, m in ((sparse, None), (sparse, mask), (dense, None)):
        o = floats([7.0] * (Hq * N * D))
        a3 = Args()
        a3.q, a3.k, a3.v, a3.out = (host_view(qs, [1, Hq, N, D]), host_view(ks, [1, Hkv, N, D]),
                                    host_view(vs, [1, Hkv, N, D]), host_view(o, [1, Hq, N, D]))
        a3.block_mask = m.handle if m else None
        outs.append((lib.launch(handle, a3), o, lib.error()))
    missing_ok = outs[0][0] == MISSING_TENSOR and "BlockMask" in outs[0][2] and all(x == 7.0 for x in outs[0][1])
    diff = max(abs(x - y) for x, y in zip(outs[1][1], outs[2][1])) if outs[1][0] == OK else float("inf")
    print(f"selfcheck: CPU block mask: missing mask -> status {outs[0][0]} ({'ok' if missing_ok else 'WRONG'}); "
          f"all-active grid vs dense program: max |diff| {diff:.1e}")
    ok &= missing_ok and diff < 1e-5
    mask.free()

    # documents: offsets [0, 25, 40] through attnfuse_offsets
    docs = lib.compile("softmax(document(causal(scaled_dot_product(Q, K)))) @ V", DEVICE_CPU, FP32, 0)
    cu = (ctypes.c_int32 * 3)(0, 25, N)
    off = Offsets(ctypes.addressof(cu), 0, 1, 3, 3)
    od = floats([7.0] * (Hq * N * D))
    a4 = Args()
    a4.q, a4.k, a4.v, a4.out = (host_view(qs, [1, Hq, N, D]), host_view(ks, [1, Hkv, N, D]),
                                host_view(vs, [1, Hkv, N, D]), host_view(od, [1, Hq, N, D]))
    a4.cu_seqlens_q = a4.cu_seqlens_k = ctypes.pointer(off)
    st4 = lib.launch(docs, a4)
    print(f"selfcheck: CPU document offsets: status {st4} {lib.error()}")
    ok &= st4 == OK
    for h in (causal, sparse, dense, docs):
        lib.lib.attnfuse_kernel_free(h)
    return ok


def selfcheck(lib_path):
    ok = check_layouts()
    if os.path.exists(lib_path):
        ok &= check_cpu_abi(Lib(lib_path))
    else:
        print(f"selfcheck: {lib_path} not found; the CPU ABI check is skipped (build attnfuse_c first)")
    print("selfcheck: PASS" if ok else "selfcheck: FAIL")
    return 0 if ok else 1


# ---------------------------------------------------------------- GPU: shared machinery
# (torch is imported in gpu_main only, so --selfcheck runs where there is no torch.)

torch = F = SDPBackend = sdpa_kernel = FLEX = create_block_mask = None
FLEX_ERROR = ""
GIB = 1 << 30
DEV = "cuda"  # where every tensor lives (and the index arrays the C ABI gets: device memory)
DEVICE_CODE = DEVICE_CUDA
L2_TARGET = 256 << 20  # working set per timed sequence of calls: several times the H200's 60 MB L2
SUITE_ORDER = ("decode", "paged", "bigbird", "documents")


class Sink:
    """Where a suite's results and printed lines go: --out DIR/<suite>.json and <suite>.txt,
    rewritten after every case (a run cut short keeps what it measured), and summary.txt, the
    concatenation of every <suite>.txt in DIR (so suites run in separate calls still add up)."""

    def __init__(self, out_dir, meta):
        self.out_dir, self.meta = out_dir, meta
        self.suite, self.lines, self.results = None, [], []
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)

    def start(self, suite):
        self.suite, self.lines, self.results = suite, [], []

    def say(self, line=""):
        print(line, flush=True)
        self.lines.append(line)

    def add(self, result):
        self.results.append(result)
        self.save()

    def save(self):
        if not self.out_dir or self.suite is None:
            return
        with open(os.path.join(self.out_dir, f"{self.suite}.json"), "w") as f:
            json.dump({"meta": self.meta, "suite": self.suite, "results": strip_private(self.results)}, f, indent=1)
        with open(os.path.join(self.out_dir, f"{self.suite}.txt"), "w") as f:
            f.write("\n".join(self.lines) + "\n")
        parts = []
        for s in SUITE_ORDER:
            path = os.path.join(self.out_dir, f"{s}.txt")
            if os.path.exists(path):
                with open(path) as f:
                    parts.append(f.read())
        with open(os.path.join(self.out_dir, "summary.txt"), "w") as f:
            f.write("\n".join(parts))


SINK = Sink(None, {})


def say(line=""):
    SINK.say(line)


def import_torch():
    global torch, F, SDPBackend, sdpa_kernel, FLEX, create_block_mask, FLEX_ERROR
    import torch as _torch
    import torch.nn.functional as _F
    from torch.nn.attention import SDPBackend as _B, sdpa_kernel as _k
    torch, F, SDPBackend, sdpa_kernel = _torch, _F, _B, _k
    import torch._dynamo
    torch._dynamo.config.cache_size_limit = 512
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = 512
    try:
        from torch.nn.attention.flex_attention import create_block_mask as _cbm, flex_attention
        FLEX = torch.compile(flex_attention, dynamic=False)
        create_block_mask = _cbm
    except Exception as e:  # noqa: BLE001 - report and continue without flex
        FLEX, FLEX_ERROR = None, str(e)


def as_tensor(t):
    assert t.dim() == 4 and t.stride(3) == 1
    return raw_tensor(t.data_ptr(), list(t.shape), list(t.stride()))


class Ours:
    """attnfuse on CUDA through the C ABI: compile once, build argument blocks per call."""

    def __init__(self, lib):
        self.lib = lib

    def compile(self, program, head_dim, dtype):
        """(handle, None), or (None, the error) so that the peers still run and the row says why."""
        code = {torch.bfloat16: BF16, torch.float16: FP16}[dtype]
        try:
            return self.lib.compile(program, DEVICE_CODE, code, head_dim), None
        except RuntimeError as e:
            say(f"  attnfuse cannot compile {program!r}: {e}")
            return None, str(e).splitlines()[0][:300]

    def impl(self, handle, error, make_fns, note=""):
        """The implementation entry for validate_and_time: fns from make_fns(), or the error."""
        if handle is None:
            return {"error": error}
        try:
            return {"fns": make_fns(), "note": note}
        except Exception as e:  # noqa: BLE001 - e.g. the block mask could not be built
            return {"error": str(e).splitlines()[0][:300]}

    def call(self, handle, q, k, v, out, paged=None, block_mask=None, cu_seqlens=None, cu_seqlens_k=None):
        """A zero-argument callable launching on the current stream (raises on a bad status).
        paged: dict(k_pages, v_pages, layout, page_indices, page_indptr, last_page_len) of device
        tensors (int32 for the table), and optionally table_settled (attnfuse_args.
        paged_table_settled: no kernel ahead of the call writes the table); cu_seqlens: a device int32 tensor [num_docs + 1] for the
        queries and, unless cu_seqlens_k is given, the keys."""
        a = Args()
        a.q, a.out = as_tensor(q), as_tensor(out)
        keep = [q, out]
        if paged is None:
            a.k, a.v = as_tensor(k), as_tensor(v)
            keep += [k, v]
        else:
            p = PagedKV()
            p.k_pages, p.v_pages = as_tensor(paged["k_pages"]), as_tensor(paged["v_pages"])
            p.layout = paged["layout"]
            for name in ("page_indices", "page_indptr", "last_page_len"):
                t = paged[name]
                # device int32 on CUDA (the kernel reads the table on the GPU), like Q
                assert t.device == q.device and t.dtype == torch.int32 and t.is_contiguous(), name
                setattr(p, name, t.data_ptr())
            p.num_page_indices = paged["page_indices"].numel()
            keep += [paged, p]
            a.paged = ctypes.pointer(p)
            a.paged_table_settled = int(paged.get("table_settled", False))
        if block_mask is not None:
            a.block_mask = block_mask.handle
            keep.append(block_mask)
        if cu_seqlens is not None:
            assert cu_seqlens.device == q.device and cu_seqlens.dtype == torch.int32 and cu_seqlens.is_contiguous()
            off = Offsets(cu_seqlens.data_ptr(), 0, 1, cu_seqlens.numel(), cu_seqlens.numel())
            keep += [cu_seqlens, off]
            a.cu_seqlens_q = a.cu_seqlens_k = ctypes.pointer(off)
            if cu_seqlens_k is not None:
                assert cu_seqlens_k.dtype == torch.int32 and cu_seqlens_k.numel() == cu_seqlens.numel()
                off_k = Offsets(cu_seqlens_k.data_ptr(), 0, 1, cu_seqlens_k.numel(), cu_seqlens_k.numel())
                keep += [cu_seqlens_k, off_k]
                a.cu_seqlens_k = ctypes.pointer(off_k)
        lib, args_ref = self.lib, ctypes.byref(a)

        def run():
            st = lib.lib.attnfuse_launch(handle, args_ref, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            if st != OK:
                raise RuntimeError(f"attnfuse_launch: status {st}: {lib.error()}")
            return out

        run._keep = (a, keep)
        return run


def free_bytes():
    free, _ = torch.cuda.mem_get_info()
    return free


def sets_for(bytes_per_set, budget):
    """Input sets so that one timed sequence of calls streams >= L2_TARGET bytes, within budget."""
    want = max(1, math.ceil(L2_TARGET / max(bytes_per_set, 1)))
    return max(1, min(want, 16, int(budget // max(bytes_per_set, 1))))


def _event_pair():
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def time_calls(fns, mode="graph", l2_flush=False, budget_s=2.0):
    """Median ms per call of fns[i % len(fns)], and how it was timed.

    graph: `inner` back-to-back calls captured once into a CUDA graph, replayed; loop: the same
    calls launched from Python between two events; l2_flush: single calls each after a 256 MiB
    memset (the memset hides the launch latency). Warm-up runs on the timing stream first, so any
    per-stream workspace or one-time upload happens outside capture and timing."""
    torch.cuda.synchronize()  # inputs were made on the default stream
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for i in range(max(3, len(fns))):
            fns[i % len(fns)]()
        stream.synchronize()
        a, b = _event_pair()
        a.record()
        fns[0]()
        b.record()
        b.synchronize()
        est = max(a.elapsed_time(b), 1e-3)
        reps = int(max(5, min(50, budget_s * 1e3 / (est * 10))))
        if l2_flush:
            scratch = torch.empty(256 << 20, dtype=torch.uint8, device=DEV)
            times = []
            for i in range(reps * 3):
                scratch.zero_()
                a, b = _event_pair()
                a.record()
                fns[i % len(fns)]()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b))
            return statistics.median(times), "l2_flush"
        inner = int(max(len(fns), min(200, math.ceil(2.0 / est))))  # about 2 ms per timed sequence
        inner = math.ceil(inner / len(fns)) * len(fns)
        how = mode
        graph = None
        if mode == "graph":
            try:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, stream=stream):
                    for i in range(inner):
                        fns[i % len(fns)]()
                graph.replay()
                stream.synchronize()
            except Exception as e:  # noqa: BLE001 - not capturable: time launches instead
                graph, how = None, f"loop (graph capture failed: {str(e).splitlines()[0][:100]})"
                torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = _event_pair()
            a.record()
            if graph is not None:
                graph.replay()
            else:
                for i in range(inner):
                    fns[i % len(fns)]()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / inner)
        del graph
        return statistics.median(times), how


def rel_err(got, ref):
    got = got.double()
    return float((got - ref).norm() / ref.norm().clamp(min=1e-30))


def validate_and_time(impls, ref_fn, args, compare_to="attnfuse", tol=2e-2):
    """impls: name -> dict(fns=[callables], note=str). ref_fn(out) -> rel. error vs float64; every
    implementation is validated, then the valid ones are timed. Adds agreement with `compare_to`."""
    res = {}
    base = None
    for name, spec in impls.items():
        e = {"note": spec.get("note", "")} if spec.get("note") else {}
        if spec.get("error"):
            e["error"] = spec["error"]
            res[name] = e
            continue
        try:
            o = spec["fns"][0]()
            torch.cuda.synchronize()
            finite = bool(torch.isfinite(o).all())
            err = ref_fn(o)
            e["rel_l2_error"] = err
            e["valid"] = finite and err < tol
            if name == compare_to:
                base = o.clone()
            elif base is not None and base.shape == o.shape:
                e["rel_diff_vs_attnfuse"] = rel_err(o, base.double())
            if e["valid"]:
                e["ms"], e["timing"] = time_calls(spec["fns"], args.timing, args.l2_flush)
        except Exception as ex:  # noqa: BLE001 - reported, not fatal
            e["error"] = str(ex).splitlines()[0][:300] if str(ex) else type(ex).__name__
        res[name] = e
        torch.cuda.synchronize()
    ours = res.get(compare_to, {}).get("ms")
    for name, e in res.items():
        if name != compare_to and ours and e.get("ms"):
            e["speedup_of_attnfuse"] = e["ms"] / ours  # peer time / our time: > 1 = attnfuse faster
    return res


def print_rows(case, res, metric_name, metric_fn):
    for name, e in res.items():
        ms = f"{e['ms']:9.4f}" if "ms" in e else "        -"
        if "ms" in e:
            e[metric_name] = metric_fn(e["ms"])
        m = f"{e[metric_name]:8.2f}" if metric_name in e else "       -"
        err = f"{e['rel_l2_error']:8.1e}" if "rel_l2_error" in e else "       -"
        sp = f"{e['speedup_of_attnfuse']:6.2f}" if "speedup_of_attnfuse" in e else "      "
        notes = []
        if "error" in e:
            notes.append(e["error"])
        elif not e.get("valid", True):
            notes.append("INVALID")
        if "rel_diff_vs_attnfuse" in e:
            notes.append(f"vs attnfuse {e['rel_diff_vs_attnfuse']:.1e}")
        if e.get("note"):
            notes.append(e["note"])
        if e.get("timing", "graph") not in ("graph",):
            notes.append(f"timing: {e['timing']}")
        say(f"{case:34} {name:22} {ms} {m} {err} {sp}  {'; '.join(notes)}")


def header(metric):
    say(f"{'case':34} {'impl':22} {'ms':>9} {metric:>8} {'err':>8} {'ours x':>6}  note")


# ---------------------------------------------------------------- decode

DECODE_PROGRAM = "softmax(causal(scaled_dot_product(Q, K))) @ V"
LLAMA8 = dict(geometry="llama3-8b", Hq=32, Hkv=8, D=128)
LLAMA70 = dict(geometry="llama3-70b", Hq=64, Hkv=8, D=128)


def parse_cells(text):
    """--cells "B,Hq,Hkv,KV;...": decode cells at D 128 (e.g. a KV-length sweep at one geometry)."""
    cells = []
    for part in filter(None, (x.strip() for x in text.split(";"))):
        b, hq, hkv, kv = (int(x) for x in part.split(","))
        geo = {(32, 8): "llama3-8b", (64, 8): "llama3-70b"}.get((hq, hkv), f"Hq{hq}-Hkv{hkv}")
        cells.append(dict(geometry=geo, Hq=hq, Hkv=hkv, D=128, B=b, KV=kv))
    return cells


def decode_cells(quick, cells=""):
    if cells:
        return parse_cells(cells)
    if quick:
        cells = [dict(LLAMA8, B=1, KV=32768), dict(LLAMA8, B=8, KV=4096), dict(LLAMA8, B=32, KV=32768)]
    else:
        cells = [dict(LLAMA8, B=b, KV=kv) for b in (1, 8, 32) for kv in (4096, 32768, 131072)]
    return cells + [dict(LLAMA70, B=1, KV=32768)]


def kv_bytes(c):
    return 2 * c["B"] * c["Hkv"] * c["KV"] * c["D"] * 2


def cell_name(c):
    kv = f"{c['KV'] // 1024}k" if c["KV"] % 1024 == 0 else str(c["KV"])
    return f"{c['geometry']} B{c['B']} KV{kv}"


def make_decode_inputs(c, sets, gen):
    out = []
    for _ in range(sets):
        q = torch.randn(c["B"], c["Hq"], 1, c["D"], device=DEV, dtype=torch.bfloat16, generator=gen)
        k = torch.randn(c["B"], c["Hkv"], c["KV"], c["D"], device=DEV, dtype=torch.bfloat16, generator=gen)
        v = torch.randn(c["B"], c["Hkv"], c["KV"], c["D"], device=DEV, dtype=torch.bfloat16, generator=gen)
        out.append((q, k, v))
    return out


def decode_reference(q, k, v, batches):
    """float64 attention of one query per (b, h) over all keys (Nq = 1 bottom-right: causal keeps
    every key), grouped by KV head without expanding K/V: [len(batches), Hq, 1, D]."""
    Hq, Hkv, D = q.shape[1], k.shape[1], q.shape[3]
    g = Hq // Hkv
    outs = []
    for b in batches:
        qd = q[b, :, 0].double().view(Hkv, g, D)
        kd, vd = k[b].double(), v[b].double()
        s = torch.einsum("hgd,hnd->hgn", qd, kd) / math.sqrt(D)
        p = torch.softmax(s, dim=-1)
        outs.append(torch.einsum("hgn,hnd->hgd", p, vd).reshape(Hq, 1, D))
        del kd, vd, s, p
    return torch.stack(outs)


def sdpa_peer(backend, q, k, v, gqa_ok):
    g = q.shape[1] // k.shape[1]

    def run():
        with sdpa_kernel(backend):
            # Nq = 1 bottom-right causal keeps every key; SDPA's is_causal is top-left, so no mask.
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=g > 1) if gqa_ok and g > 1 else \
                F.scaled_dot_product_attention(q, k, v)
    return run


def decode_peers(c, inputs, budget, only=""):
    """name -> dict(fns, note) for SDPA-cuDNN, SDPA-flash and flex (`only`: a comma list of them)."""
    impls = {}
    g = c["Hq"] // c["Hkv"]
    wanted = set(filter(None, only.split(","))) or {"sdpa_cudnn", "sdpa_flash", "flex"}
    for name, backend in (("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa_flash", SDPBackend.FLASH_ATTENTION)):
        if name not in wanted:
            continue
        q, k, v = inputs[0]
        try:
            sdpa_peer(backend, q, k, v, True)()
            torch.cuda.synchronize()
            impls[name] = {"fns": [sdpa_peer(backend, *x, True) for x in inputs], "note": "enable_gqa=True"}
            continue
        except Exception as e:  # noqa: BLE001 - the backend refused GQA (or the shape)
            why = str(e).splitlines()[0][:120]
        need = len(inputs) * kv_bytes(c) * g
        if need > budget:
            impls[name] = {"error": f"refused enable_gqa ({why}); expanded K/V ({need / GIB:.1f} GiB) would not fit"}
            continue
        expanded = [(q, k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)) for (q, k, v) in inputs]
        impls[name] = {"fns": [sdpa_peer(backend, *x, False) for x in expanded],
                       "note": f"K/V heads EXPANDED {c['Hkv']}->{c['Hq']} outside timing (refused enable_gqa: {why}); "
                               f"reads {g}x the bytes", "_keep": expanded}
    if "flex" not in wanted:
        pass
    elif FLEX is not None:
        impls["flex"] = {"fns": [lambda q=q, k=k, v=v: FLEX(q, k, v, enable_gqa=True) for (q, k, v) in inputs],
                         "note": "no block mask (Nq = 1 bottom-right causal keeps every key)"}
    else:
        impls["flex"] = {"error": f"flex_attention unavailable: {FLEX_ERROR[:120]}"}
    return impls


def run_decode(ours, args, quick):
    say(f"== decode: {DECODE_PROGRAM}, bf16, Nq = 1; TB/s = K+V bytes / time; ours x = peer ms / attnfuse ms")
    handle, cerr = ours.compile(DECODE_PROGRAM, 128, torch.bfloat16)
    header("TB/s")
    for c in decode_cells(quick, args.cells):
        name = cell_name(c)
        if args.filter not in name:
            continue
        t0 = time.time()
        torch.cuda.empty_cache()
        budget = free_bytes() * 0.85
        per_set = kv_bytes(c)
        # room for our inputs, the float64 reference of one batch entry and flex's workspace
        if 2.2 * per_set > budget:
            say(f"{name:34} skipped: K/V take {per_set / GIB:.1f} GiB, {budget / GIB:.1f} GiB free")
            SINK.add({"case": name, **c, "skipped": "does not fit in memory"})
            continue
        sets = sets_for(per_set, budget * 0.4)
        gen = torch.Generator(device=DEV).manual_seed(1234)
        inputs = make_decode_inputs(c, sets, gen)
        impls = {"attnfuse": ours.impl(handle, cerr, lambda: [
            ours.call(handle, q, k, v, torch.full_like(q, float("nan"))) for (q, k, v) in inputs])}
        if not args.ours_only:
            impls.update(decode_peers(c, inputs, free_bytes() * 0.7, args.peers))
        q, k, v = inputs[0]
        batches = sorted({0, c["B"] - 1})
        ref = decode_reference(q, k, v, batches)
        res = validate_and_time(impls, lambda o: rel_err(o[batches], ref), args)
        print_rows(name, res, "tb_per_s", lambda ms: per_set / (ms * 1e-3) / 1e12)
        SINK.add({"case": name, **c, "program": DECODE_PROGRAM, "dtype": "bf16", "Nq": 1,
                  "kv_bytes": per_set, "input_sets": sets, "impls": res})
        say(f"  ({time.time() - t0:.1f} s, {sets} input set(s))")
        inputs = impls = ref = None  # free this cell before the next one allocates


# ---------------------------------------------------------------- paged

def paged_cells(quick):
    cells = [dict(LLAMA8, B=8, KV=32768)] + ([] if quick else [dict(LLAMA8, B=32, KV=32768)])
    return cells + [dict(LLAMA70, B=1, KV=32768)]


def make_pages(k, v, page_size, gen, layout="nhd", in_order=False):
    """NHD pages [num_pages, page_size, Hkv, D] (or HND [num_pages, Hkv, page_size, D]) holding
    k / v [B, Hkv, KV, D] (KV a multiple of page_size) at a random permutation of page slots (or,
    in_order, logical page i in slot i); the page table as device int32."""
    B, Hkv, KV, D = k.shape
    per_seq = KV // page_size
    num_pages = B * per_seq
    perm = (torch.arange(num_pages, device=DEV) if in_order
            else torch.randperm(num_pages, device=DEV, generator=gen))

    def paged(t):
        if layout == "hnd":
            blocks = t.view(B, Hkv, per_seq, page_size, D).permute(0, 2, 1, 3, 4).reshape(num_pages, Hkv, page_size, D)
        else:
            blocks = t.view(B, Hkv, per_seq, page_size, D).permute(0, 2, 3, 1, 4).reshape(num_pages, page_size, Hkv, D)
        pages = torch.empty_like(blocks)
        pages[perm] = blocks  # logical page i of the table lives in slot perm[i]
        return pages

    return {"k_pages": paged(k), "v_pages": paged(v), "layout": PAGED_HND if layout == "hnd" else PAGED_NHD,
            "page_indices": perm.to(torch.int32).contiguous(),
            "page_indptr": (torch.arange(B + 1, device=DEV, dtype=torch.int32) * per_seq).contiguous(),
            "last_page_len": torch.full((B,), page_size, device=DEV, dtype=torch.int32)}


def run_paged(ours, args, quick):
    layouts = [x for x in args.paged_layouts.split(",") if x]
    say(f"== paged: {DECODE_PROGRAM}, bf16, Nq = 1, {'/'.join(x.upper() for x in layouts)} pages in random order, "
        f"device int32 page table; "
        f"overhead = paged ms / contiguous ms - 1")
    handle, cerr = ours.compile(DECODE_PROGRAM, 128, torch.bfloat16)
    header("TB/s")
    for c in paged_cells(quick):
        name = cell_name(c)
        if args.filter not in name:
            continue
        t0 = time.time()
        torch.cuda.empty_cache()
        per_set = kv_bytes(c)
        if 3.2 * per_set > free_bytes() * 0.85:
            say(f"{name:34} skipped: contiguous + paged K/V do not fit")
            SINK.add({"case": name, **c, "skipped": "does not fit in memory"})
            continue
        gen = torch.Generator(device=DEV).manual_seed(99)
        (q, k, v), = make_decode_inputs(c, 1, gen)
        impls = {"attnfuse": ours.impl(handle, cerr, lambda: [ours.call(handle, q, k, v, torch.full_like(q, float("nan")))],
                                       "contiguous")}
        tables = {}
        for lay in layouts:
            for ps in (16, 64):
                key = f"attnfuse_paged{'' if lay == 'nhd' else '_' + lay}_ps{ps}"  # NHD rows keep their old names
                tables[key] = make_pages(k, v, ps, gen, lay)
                impls[key] = ours.impl(
                    handle, cerr, lambda key=key: [ours.call(handle, q, None, None, torch.full_like(q, float("nan")),
                                                             paged=tables[key])],
                    f"{tables[key]['k_pages'].shape[0]} {lay.upper()} pages of {ps}")
                if lay == "nhd":  # the same pages with the table read ahead of the grid dependency wait
                    skey = f"{key}_settled"
                    tables[skey] = dict(tables[key], table_settled=True)
                    impls[skey] = ours.impl(
                        handle, cerr, lambda key=skey: [ours.call(handle, q, None, None, torch.full_like(q, float("nan")),
                                                                  paged=tables[key])],
                        f"pages of {ps}, table_settled")
                if lay == "nhd" and args.pages_in_order:  # the same addressing, pages laid out in table order
                    okey = f"{key}_inorder"
                    tables[okey] = make_pages(k, v, ps, gen, lay, in_order=True)
                    impls[okey] = ours.impl(
                        handle, cerr, lambda key=okey: [ours.call(handle, q, None, None, torch.full_like(q, float("nan")),
                                                                  paged=tables[key])],
                        f"pages of {ps} in table order")
        batches = sorted({0, c["B"] - 1})
        ref = decode_reference(q, k, v, batches)
        res = validate_and_time(impls, lambda o: rel_err(o[batches], ref), args)
        base = res["attnfuse"].get("ms")
        for nm, e in res.items():
            if nm != "attnfuse" and base and e.get("ms"):
                e["overhead_pct"] = 100.0 * (e["ms"] / base - 1.0)
                e.pop("speedup_of_attnfuse", None)
                e["note"] = f"{e.get('note', '')}; overhead {e['overhead_pct']:+.1f}%"
        print_rows(name, res, "tb_per_s", lambda ms: per_set / (ms * 1e-3) / 1e12)
        SINK.add({"case": name, **c, "program": DECODE_PROGRAM, "dtype": "bf16", "Nq": 1, "layouts": layouts,
                  "kv_bytes": per_set, "impls": res})
        say(f"  ({time.time() - t0:.1f} s)")
        q = k = v = tables = impls = None


# ---------------------------------------------------------------- bigbird

BIGBIRD_PROGRAM = "softmax(block_sparse(scaled_dot_product(Q, K))) @ V"


def bigbird_grid(n, block, random_per_row, seed=0):
    """uint8 [nqb, nkb] on the host: global block row 0 and column 0, the diagonal (local band),
    `random_per_row` random key blocks per query block (duplicates allowed)."""
    nb = (n + block - 1) // block
    rng = random.Random(seed)
    g = torch.zeros(nb, nb, dtype=torch.uint8)
    g[0, :] = 1
    g[:, 0] = 1
    idx = torch.arange(nb)
    g[idx, idx] = 1
    for qb in range(nb):
        for _ in range(random_per_row):
            g[qb, rng.randrange(nb)] = 1
    return g


def median_s(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# (N, block size, random blocks per row). With 128-blocks at 4k, the global row and column and the
# diagonal alone are 94 of 32 x 32 blocks (9.2%), so the paper's ~7.7% is out of reach; one random
# block per row gives about 12%. The 64-block grid (the rule of bench/block_mask_bench.cpp, 7.6%)
# is the paper's density point.
BIGBIRD_CASES_QUICK = [(4096, 128, 1)]
BIGBIRD_CASES = [(4096, 128, 1), (4096, 64, 2), (16384, 128, 1), (16384, 64, 2)]


def run_bigbird(ours, args, quick):
    B, H, D = 4, 12, 64
    say(f"== bigbird: {BIGBIRD_PROGRAM}, bf16, GPT-2 geometry B{B} H{H} D{D}; TFLOP/s of active "
        f"work (4 B H N^2 D density); ours x = peer ms / attnfuse ms")
    handle, cerr = ours.compile(BIGBIRD_PROGRAM, D, torch.bfloat16)
    cases = BIGBIRD_CASES_QUICK if quick else BIGBIRD_CASES
    if args.bigbird_block:
        cases = [(n, args.bigbird_block, 1 if args.bigbird_block == 128 else 2) for n in sorted({n for n, _, _ in cases})]
    for N, block, random_per_row in cases:
        name = f"bigbird gpt2 N{N // 1024}k b{block}"
        if args.filter not in name:
            continue
        t0 = time.time()
        grid = bigbird_grid(N, block, random_per_row, seed=N).contiguous()
        nb = grid.shape[0]
        density = float(grid.double().mean())
        flops = 4.0 * B * H * N * N * D * density  # N is a multiple of the block: no cut edge blocks
        say(f"{name}: {nb}x{nb} blocks of {block}, global row + column, diagonal, {random_per_row} random per "
            f"row: {int(grid.sum())} active, density {100 * density:.2f}%")
        entry = {"case": name, "B": B, "H": H, "N": N, "D": D, "block": block, "random_per_row": random_per_row,
                 "density": density,
                 "active_blocks": int(grid.sum()), "program": BIGBIRD_PROGRAM, "dtype": "bf16", "flops": flops}

        # Mask construction, for the record: ours on the host from the dense grid, flex's
        # create_block_mask on the GPU from a mask_mod reading the same grid.
        grid_ptr = grid.data_ptr()
        mask = ours.lib.block_mask_from_dense(grid_ptr, 1, 1, N, N, block, block)

        def build_ours():
            ours.lib.block_mask_from_dense(grid_ptr, 1, 1, N, N, block, block).free()
        entry["build_ms"] = {"attnfuse_block_mask_from_dense": 1e3 * median_s(build_ours, 20)}
        grid_dev = grid.to(DEV, dtype=torch.bool)
        grid_flat = grid_dev.reshape(-1)
        flex_bm = None
        if FLEX is not None:
            def mask_mod(b, h, qi, kv):  # every cell of an active block: flex stores them as full blocks
                return grid_flat[(qi // block) * nb + kv // block]

            def build_flex():
                m = create_block_mask(mask_mod, 1, 1, N, N, device=DEV, BLOCK_SIZE=block)
                torch.cuda.synchronize()
                return m
            try:
                flex_bm = build_flex()
                entry["build_ms"]["flex_create_block_mask"] = 1e3 * median_s(build_flex, 5)
            except Exception as e:  # noqa: BLE001
                entry["build_ms"]["flex_create_block_mask_error"] = str(e).splitlines()[0][:200]
        say("  mask construction: " + ", ".join(f"{k} {v:.3f} ms" if isinstance(v, float) else f"{k}: {v}"
                                                for k, v in entry["build_ms"].items()))

        gen = torch.Generator(device=DEV).manual_seed(77)
        per_set = 3 * B * H * N * D * 2
        sets = sets_for(per_set, free_bytes() * 0.3)
        inputs = [tuple(torch.randn(B, H, N, D, device=DEV, dtype=torch.bfloat16, generator=gen) for _ in range(3))
                  for _ in range(sets)]
        impls = {"attnfuse": ours.impl(handle, cerr, lambda: [
            ours.call(handle, q, k, v, torch.full_like(q, float("nan")), block_mask=mask) for (q, k, v) in inputs])}
        if not args.ours_only:
            dense_mask = grid_dev.repeat_interleave(block, 0).repeat_interleave(block, 1)[:N, :N].contiguous()
            if flex_bm is not None:
                # flex's kernel tiles must divide its mask blocks: blocks finer than its default
                # 128-row tile run with tiles of the block's size (kernel_options).
                opts = {"BLOCK_M": block, "BLOCK_N": block} if block < 128 else None
                impls["flex"] = {"fns": [lambda q=q, k=k, v=v: FLEX(q, k, v, block_mask=flex_bm, kernel_options=opts)
                                         for (q, k, v) in inputs],
                                 "note": f"create_block_mask(BLOCK_SIZE={block}) from the same grid"
                                         + (f", kernel_options BLOCK_M = BLOCK_N = {block}" if opts else "")}
            else:
                impls["flex"] = {"error": "flex unavailable or its BlockMask failed"}
            if FLEX is not None and block < 128:
                # The same cells in flex's own 128-blocks: its default tile, with the blocks that
                # straddle active and inactive 64-blocks partial (mask_mod evaluated per cell).
                try:
                    bm128 = create_block_mask(mask_mod, 1, 1, N, N, device=DEV, BLOCK_SIZE=128)
                    impls["flex_b128"] = {
                        "fns": [lambda q=q, k=k, v=v: FLEX(q, k, v, block_mask=bm128) for (q, k, v) in inputs],
                        "note": "create_block_mask(BLOCK_SIZE=128) over the same cells (partial blocks masked per cell)"}
                except Exception as e:  # noqa: BLE001
                    impls["flex_b128"] = {"error": str(e).splitlines()[0][:200]}
            impls["sdpa_dense_mask"] = {
                "fns": [lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, attn_mask=dense_mask)
                        for (q, k, v) in inputs],
                "note": "dense bool mask [N, N], default backend (does all N^2 work)"}
        # float64 reference on sampled query rows, all keys
        q, k, v = inputs[0]
        rows = torch.unique(torch.cat([torch.randint(0, N, (48,), device=DEV, generator=gen),
                                       torch.arange(0, 8, device=DEV), torch.arange(N - 8, N, device=DEV)]))
        keep = grid_dev[(rows // block).view(-1, 1), (torch.arange(N, device=DEV) // block).view(1, -1)]
        s = torch.einsum("bhid,bhjd->bhij", q[:, :, rows].double(), k.double()) / math.sqrt(D)
        p = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
        ref = torch.einsum("bhij,bhjd->bhid", p, v.double())
        del s, p
        if args.peers:  # only these peers (ours always runs)
            keep_peers = set(args.peers.split(","))
            impls = {k: v for k, v in impls.items() if k == "attnfuse" or k in keep_peers}
        res = validate_and_time(impls, lambda o: rel_err(o[:, :, rows], ref), args)
        header("TFLOP/s")
        print_rows(name, res, "tflops", lambda ms: flops / (ms * 1e-3) / 1e12)
        # The first launch with a new mask uploads it (synchronously); with the kernel warm now, the
        # wall time of one such launch against the steady state shows what the upload costs.
        if res["attnfuse"].get("ms"):
            try:
                torch.cuda.synchronize()
                fresh = ours.lib.block_mask_from_dense(grid_ptr, 1, 1, N, N, block, block)
                first = ours.call(handle, q, k, v, torch.empty_like(q), block_mask=fresh)
                t = time.perf_counter()
                first()
                torch.cuda.synchronize()
                entry["first_launch_ms_with_upload"] = 1e3 * (time.perf_counter() - t)
                fresh.free()
                say(f"  first launch with a new mask (upload included, wall time): "
                    f"{entry['first_launch_ms_with_upload']:.3f} ms vs {res['attnfuse']['ms']:.3f} ms steady")
            except Exception as e:  # noqa: BLE001
                entry["first_launch_error"] = str(e).splitlines()[0][:200]
        entry.update({"input_sets": sets, "impls": res})
        SINK.add(entry)
        mask.free()
        say(f"  ({time.time() - t0:.1f} s)")
        inputs = impls = None


# ---------------------------------------------------------------- documents

DOCUMENTS_PROGRAM = "softmax(document(causal(scaled_dot_product(Q, K)))) @ V"


def doc_lengths(total, n, seed):
    """n random document lengths (>= 64 each) summing to total."""
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, total // 64), n - 1))
    bounds = [0] + [c * 64 for c in cuts] + [total]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def flash_varlen(q, k, v, cu, max_len, cu_k=None, max_k=None):
    """FlashAttention-2 varlen through PyTorch's aten op: [total, H, D] layouts, causal per doc
    (bottom-right aligned where a document has fewer queries than keys)."""
    op = torch.ops.aten._flash_attention_forward
    out = op(q, k, v, cu, cu if cu_k is None else cu_k, max_len, max_len if max_k is None else max_k, 0.0, True,
             False, scale=1.0 / math.sqrt(q.shape[-1]))
    return out[0]


# (geometry, Hq, Hkv, D): Llama-3-8B always; GPT-2 (D = 64, no GQA) outside --quick.
DOC_GEOMETRIES = (("llama3-8b", 32, 8, 128), ("gpt2", 12, 12, 64))


def run_documents(ours, args, quick):
    for geo in DOC_GEOMETRIES[:1] if quick else DOC_GEOMETRIES:
        run_documents_cell(ours, args, *geo)
    run_varlen_decode(ours, args)


def run_varlen_decode(ours, args, seqs=32, Hq=32, Hkv=8, D=128):
    """Varlen decode: `seqs` sequences of one query each, packed with their caches of random
    lengths (1k-32k keys) as documents (cu_seqlens_q = 0, 1, .., cu_seqlens_k = the caches'
    offsets); TB/s of K and V read. Against FA2 varlen with the same offsets."""
    name = f"varlen decode llama3-8b B{seqs}"
    if args.filter not in name:
        return
    t0 = time.time()
    rng = random.Random(11)
    lens = [rng.randrange(1024, 32769) for _ in range(seqs)]
    N = sum(lens)
    say(f"== varlen decode: {DOCUMENTS_PROGRAM}, bf16, Hq{Hq} Hkv{Hkv} D{D}, {seqs} sequences of one query, "
        f"caches of {min(lens)}-{max(lens)} keys ({N} in all) packed as documents; TB/s of K and V read")
    handle, cerr = ours.compile(DOCUMENTS_PROGRAM, D, torch.bfloat16)
    cu_q = torch.arange(seqs + 1, dtype=torch.int32, device=DEV)
    cu_k = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32, device=DEV)
    per_set = 2 * Hkv * N * D * 2
    gen = torch.Generator(device=DEV).manual_seed(11)
    inputs = []
    for _ in range(sets_for(per_set, free_bytes() * 0.3)):
        q = torch.randn(1, Hq, seqs, D, device=DEV, dtype=torch.bfloat16, generator=gen)
        k = torch.randn(1, Hkv, N, D, device=DEV, dtype=torch.bfloat16, generator=gen)
        v = torch.randn(1, Hkv, N, D, device=DEV, dtype=torch.bfloat16, generator=gen)
        inputs.append((q, k, v))
    impls = {"attnfuse": ours.impl(handle, cerr, lambda: [
        ours.call(handle, q, k, v, torch.full_like(q, float("nan")), cu_seqlens=cu_q, cu_seqlens_k=cu_k)
        for (q, k, v) in inputs], "cu_seqlens: device int32")}
    if not args.ours_only:
        packed = [tuple(t[0].transpose(0, 1).contiguous() for t in x) for x in inputs]
        try:
            flash_varlen(*packed[0], cu_q, 1, cu_k, max(lens))
            torch.cuda.synchronize()
            impls["sdpa_flash_varlen"] = {
                "fns": [lambda x=x: flash_varlen(*x, cu_q, 1, cu_k, max(lens)).transpose(0, 1).unsqueeze(0)
                        for x in packed],
                "note": "aten._flash_attention_forward varlen, [total, H, D] inputs (layout copies untimed)",
                "_keep": packed}
        except Exception as e:  # noqa: BLE001 - no varlen flash in this torch: skip
            impls["sdpa_flash_varlen"] = {"error": f"skipped: {str(e).splitlines()[0][:150]}"}
    q, k, v = inputs[0]
    check = sorted({0, 1, seqs // 2, seqs - 1})
    g = Hq // Hkv
    refs = []
    for d in check:
        kd, vd = k[0, :, cu_k[d]:cu_k[d + 1]].double(), v[0, :, cu_k[d]:cu_k[d + 1]].double()
        qd = q[0, :, d].double().view(Hkv, g, D)
        p = torch.softmax(torch.einsum("hgd,hjd->hgj", qd, kd) / math.sqrt(D), dim=-1)
        refs.append(torch.einsum("hgj,hjd->hgd", p, vd).reshape(Hq, D))
    ref = torch.stack(refs, dim=1).unsqueeze(0)
    res = validate_and_time(impls, lambda o: rel_err(o[:, :, check], ref), args)
    header("TB/s")
    print_rows(name, res, "tb_per_s", lambda ms: per_set / (ms * 1e-3) / 1e12)
    SINK.add({"case": name, "seqs": seqs, "Hq": Hq, "Hkv": Hkv, "D": D, "kv_lengths": lens, "Nq": 1,
              "program": DOCUMENTS_PROGRAM, "dtype": "bf16", "kv_bytes": per_set, "impls": res})
    say(f"  ({time.time() - t0:.1f} s)")


def run_documents_cell(ours, args, geo, Hq, Hkv, D):
    N, ndocs = 16384, 8
    g = Hq // Hkv
    name = f"documents {geo} N{N // 1024}k"
    if args.filter not in name:
        return
    say(f"== documents: {DOCUMENTS_PROGRAM}, bf16, B1 Hq{Hq} Hkv{Hkv} D{D}, {N} packed tokens in {ndocs} "
        f"documents; TFLOP/s of kept cells")
    handle, cerr = ours.compile(DOCUMENTS_PROGRAM, D, torch.bfloat16)
    lens = doc_lengths(N, ndocs, seed=5)
    t0 = time.time()
    cu_list = [0]
    for n in lens:
        cu_list.append(cu_list[-1] + n)
    cu = torch.tensor(cu_list, dtype=torch.int32, device=DEV)
    kept = sum(n * (n + 1) // 2 for n in lens)
    flops = 4.0 * Hq * kept * D
    say(f"{name}: lengths {lens}, kept cells {kept} ({100 * kept / (N * N):.2f}% of N^2)")
    gen = torch.Generator(device=DEV).manual_seed(5)
    per_set = (Hq + 2 * Hkv) * N * D * 2
    sets = sets_for(per_set, free_bytes() * 0.3)
    inputs = []
    for _ in range(sets):
        q = torch.randn(1, Hq, N, D, device=DEV, dtype=torch.bfloat16, generator=gen)
        k = torch.randn(1, Hkv, N, D, device=DEV, dtype=torch.bfloat16, generator=gen)
        v = torch.randn(1, Hkv, N, D, device=DEV, dtype=torch.bfloat16, generator=gen)
        inputs.append((q, k, v))
    impls = {"attnfuse": ours.impl(handle, cerr, lambda: [
        ours.call(handle, q, k, v, torch.full_like(q, float("nan")), cu_seqlens=cu) for (q, k, v) in inputs],
        "cu_seqlens: device int32")}
    doc_id = torch.repeat_interleave(torch.arange(ndocs, device=DEV), torch.tensor(lens, device=DEV))
    if not args.ours_only:
        if FLEX is not None:
            def doc_mask(b, h, qi, kv):
                return (doc_id[qi] == doc_id[kv]) & (qi >= kv)
            try:
                bm = create_block_mask(doc_mask, None, None, N, N, device=DEV)
                impls["flex"] = {"fns": [lambda q=q, k=k, v=v: FLEX(q, k, v, block_mask=bm, enable_gqa=True)
                                         for (q, k, v) in inputs], "note": "document & causal mask_mod"}
            except Exception as e:  # noqa: BLE001
                impls["flex"] = {"error": str(e).splitlines()[0][:200]}
        else:
            impls["flex"] = {"error": f"flex_attention unavailable: {FLEX_ERROR[:120]}"}
        # FA2 varlen wants [total, H, D]; the BSHD copies are made outside timing.
        packed = [tuple(t[0].transpose(0, 1).contiguous() for t in x) for x in inputs]
        try:
            flash_varlen(*packed[0], cu, max(lens))
            torch.cuda.synchronize()
            impls["sdpa_flash_varlen"] = {
                "fns": [lambda x=x: flash_varlen(*x, cu, max(lens)).transpose(0, 1).unsqueeze(0) for x in packed],
                "note": "aten._flash_attention_forward varlen, [total, H, D] inputs (layout copies untimed)",
                "_keep": packed}
        except Exception as e:  # noqa: BLE001 - no varlen flash in this torch: skip
            impls["sdpa_flash_varlen"] = {"error": f"skipped: {str(e).splitlines()[0][:150]}"}
    q, k, v = inputs[0]
    rows = torch.unique(torch.cat([torch.randint(0, N, (64,), device=DEV, generator=gen),
                                   cu[:-1].long(), (cu[1:] - 1).long()]))
    j = torch.arange(N, device=DEV)
    keep = (doc_id[rows].view(-1, 1) == doc_id.view(1, -1)) & (rows.view(-1, 1) >= j.view(1, -1))
    qd = q[0, :, rows].double().view(Hkv, g, len(rows), D)
    s = torch.einsum("hgid,hjd->hgij", qd, k[0].double()) / math.sqrt(D)
    p = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    ref = torch.einsum("hgij,hjd->hgid", p, v[0].double()).reshape(1, Hq, len(rows), D)
    del s, p
    res = validate_and_time(impls, lambda o: rel_err(o[:, :, rows], ref), args)
    header("TFLOP/s")
    print_rows(name, res, "tflops", lambda ms: flops / (ms * 1e-3) / 1e12)
    SINK.add({"case": name, "B": 1, "Hq": Hq, "Hkv": Hkv, "D": D, "N": N, "doc_lengths": lens,
              "program": DOCUMENTS_PROGRAM, "dtype": "bf16", "flops": flops, "input_sets": sets, "impls": res})
    say(f"  ({time.time() - t0:.1f} s)")


# ---------------------------------------------------------------- main

SUITES = {"decode": run_decode, "paged": run_paged, "bigbird": run_bigbird, "documents": run_documents}


def strip_private(obj):
    """JSON-safe copy: drops '_keep' entries and callables."""
    if isinstance(obj, dict):
        return {k: strip_private(v) for k, v in obj.items() if not k.startswith("_") and k != "fns"}
    if isinstance(obj, (list, tuple)):
        return [strip_private(v) for v in obj]
    return obj


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
    global SINK
    SINK = Sink(a.out, meta)
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
    ap.add_argument("--selfcheck", action="store_true",
                    help="no GPU: ctypes layouts vs the C header, and the new ABI on the CPU device")
    a = ap.parse_args()
    a.lib = os.path.abspath(a.lib or default_lib())
    if a.selfcheck:
        return selfcheck(a.lib)
    return gpu_main(a)


if __name__ == "__main__":
    sys.exit(main())
