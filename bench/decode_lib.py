"""gpu_decode.py's torch-free half: the C ABI's functions through ctypes (Lib, BlockMaskHandle,
default_lib) and --selfcheck (the ctypes layouts against attnfuse.h, the new ABI on the CPU device).

Separate so that what runs without torch or a GPU (ctest's bench_abi_mirrors) reads on its own;
the GPU code needs only Lib from it.
"""
import ctypes
import math
import os
import random
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------- the C ABI (include/attnfuse/attnfuse.h)

from attnfuse_abi import (BLOCK_FULL, BLOCK_INACTIVE, BLOCK_PARTIAL, DEVICE_CPU, FP32,  # noqa: E402
                          MISSING_TENSOR, OK, PAGED_HND, PAGED_NHD, Args, BlockClassifyFn, BlockFillFn, Offsets,
                          PagedKV, State, Tensor, raw_tensor)


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
        lib.attnfuse_block_mask_from_block_cells.argtypes = [BlockClassifyFn, BlockFillFn, vp, i64, i64, i64, i64,
                                                             ctypes.c_int, ctypes.c_int, ctypes.POINTER(vp)]
        lib.attnfuse_block_mask_from_block_kinds.argtypes = [vp, BlockFillFn, vp, i64, i64, i64, i64, ctypes.c_int,
                                                             ctypes.c_int, ctypes.POINTER(vp)]
        lib.attnfuse_block_mask_from_partial_cells.argtypes = [vp, vp, i64, i64, i64, i64, i64, ctypes.c_int,
                                                               ctypes.c_int, ctypes.POINTER(vp)]
        lib.attnfuse_block_mask_free.argtypes = [vp]
        lib.attnfuse_merge_states.argtypes = [ctypes.c_int, ctypes.POINTER(State), i64, ctypes.POINTER(State), vp]

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

    def block_mask_from_block_cells(self, fill, batch, heads, q_len, kv_len, block_q, block_k, classify=None):
        """attnfuse_block_mask_from_block_cells with Python callbacks: fill(b, h, q0, q1, kv0, kv1, keep)
        sets keep[(q - q0) * (kv1 - kv0) + (kv - kv0)] (a ctypes uint8 pointer, zeroed) for the kept
        cells; classify(b, h, q0, q1, kv0, kv1), if given, returns BLOCK_INACTIVE / BLOCK_FULL where
        sure, else BLOCK_PARTIAL. Called from the library's threads (each call takes the GIL)."""
        classify_fn = BlockClassifyFn(lambda _u, *block: classify(*block)) if classify else BlockClassifyFn()
        return self._mask_from_fill("attnfuse_block_mask_from_block_cells", fill, lambda fill_fn, out: (
            self.lib.attnfuse_block_mask_from_block_cells(classify_fn, fill_fn, None, batch, heads, q_len, kv_len,
                                                          block_q, block_k, out)))

    def block_mask_from_block_kinds(self, kinds_ptr, fill, batch, heads, q_len, kv_len, block_q, block_k):
        """attnfuse_block_mask_from_block_kinds: kinds_ptr is the address of a [batch, heads, nqb, nkb]
        uint8 grid of BLOCK_INACTIVE / BLOCK_FULL / BLOCK_PARTIAL (e.g. numpy's arr.ctypes.data);
        fill (as above, or None when no block is partial) is called for the partial blocks only."""
        return self._mask_from_fill("attnfuse_block_mask_from_block_kinds", fill, lambda fill_fn, out: (
            self.lib.attnfuse_block_mask_from_block_kinds(kinds_ptr, fill_fn, None, batch, heads, q_len, kv_len,
                                                          block_q, block_k, out)))

    def block_mask_from_partial_cells(self, kinds_ptr, cells_ptr, num_partial, batch, heads, q_len, kv_len, block_q,
                                      block_k):
        """attnfuse_block_mask_from_partial_cells, no callback: kinds_ptr as above, cells_ptr the address of
        a [num_partial, block_q, block_k] uint8 array holding the cells of kinds' partial blocks in its
        C order (nonzero = kept; bytes past the lengths are ignored)."""
        handle = ctypes.c_void_p()
        st = self.lib.attnfuse_block_mask_from_partial_cells(kinds_ptr, cells_ptr, num_partial, batch, heads, q_len,
                                                             kv_len, block_q, block_k, ctypes.byref(handle))
        if st != OK:
            raise RuntimeError(f"attnfuse_block_mask_from_partial_cells: status {st}: {self.error()}")
        return BlockMaskHandle(self, handle)

    def _mask_from_fill(self, name, fill, call):
        failures = []

        def fill_c(_user, b, h, q0, q1, kv0, kv1, keep):
            try:
                fill(b, h, q0, q1, kv0, kv1, keep)
                return 0
            except Exception as e:  # stops the build; raised again below
                failures.append(e)
                return 1
        fill_fn = BlockFillFn(fill_c) if fill else BlockFillFn()  # kept alive until the call returns
        handle = ctypes.c_void_p()
        st = call(fill_fn, ctypes.byref(handle))
        if failures:
            raise failures[0]
        if st != OK:
            raise RuntimeError(f"{name}: status {st}: {self.error()}")
        return BlockMaskHandle(self, handle)

    def merge_states(self, device, states, out, stream=None):
        """attnfuse_merge_states: states a list of State, out a State (device pointers on DEVICE_CUDA)."""
        arr = (State * len(states))(*states)
        st = self.lib.attnfuse_merge_states(device, arr, len(states), ctypes.byref(out), ctypes.c_void_p(stream))
        if st != OK:
            raise RuntimeError(f"attnfuse_merge_states: status {st}: {self.error()}")

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
  S(attnfuse_state) O(attnfuse_state, o) O(attnfuse_state, dtype) O(attnfuse_state, lse)
  O(attnfuse_state, lse_strides)
  S(attnfuse_args) O(attnfuse_args, q) O(attnfuse_args, k) O(attnfuse_args, v) O(attnfuse_args, out)
  O(attnfuse_args, lse) O(attnfuse_args, lse_strides) O(attnfuse_args, bias) O(attnfuse_args, has_q_offset)
  O(attnfuse_args, q_offset) O(attnfuse_args, cu_seqlens_q) O(attnfuse_args, cu_seqlens_k)
  O(attnfuse_args, paged) O(attnfuse_args, block_mask) O(attnfuse_args, rope_cos) O(attnfuse_args, rope_sin)
  O(attnfuse_args, rope_positions) O(attnfuse_args, rope_pairs) O(attnfuse_args, paged_table_settled)
  O(attnfuse_args, bias_dtype)
  printf("enum sizeof %zu\n", sizeof(attnfuse_paged_layout));
  printf("ATTNFUSE_PAGED_NHD %d\nATTNFUSE_PAGED_HND %d\n", (int)ATTNFUSE_PAGED_NHD, (int)ATTNFUSE_PAGED_HND);
  printf("ATTNFUSE_ERROR_MISSING_TENSOR %d\n", (int)ATTNFUSE_ERROR_MISSING_TENSOR);
  printf("ATTNFUSE_BLOCK_INACTIVE %d\nATTNFUSE_BLOCK_FULL %d\nATTNFUSE_BLOCK_PARTIAL %d\n", ATTNFUSE_BLOCK_INACTIVE,
         ATTNFUSE_BLOCK_FULL, ATTNFUSE_BLOCK_PARTIAL);
  {  /* the callback types ctypes mirrors: a mismatch fails to compile under -Werror */
    int (*classify)(void*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) = (attnfuse_block_classify_fn)0;
    int (*fill)(void*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint8_t*) = (attnfuse_block_fill_fn)0;
    (void)classify, (void)fill;
  }
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
            "attnfuse_args": Args, "attnfuse_state": State}
    py = {}
    for cname, cls in ours.items():
        py[f"{cname} sizeof"] = ctypes.sizeof(cls)
        for fname, _ in cls._fields_:
            py[f"{cname}.{fname}"] = getattr(cls, fname).offset
    py["enum sizeof"] = ctypes.sizeof(ctypes.c_int)
    py["ATTNFUSE_PAGED_NHD"], py["ATTNFUSE_PAGED_HND"] = PAGED_NHD, PAGED_HND
    py["ATTNFUSE_ERROR_MISSING_TENSOR"] = MISSING_TENSOR
    py["ATTNFUSE_BLOCK_INACTIVE"], py["ATTNFUSE_BLOCK_FULL"] = BLOCK_INACTIVE, BLOCK_FULL
    py["ATTNFUSE_BLOCK_PARTIAL"] = BLOCK_PARTIAL
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

    # a cell-exact mask from Python callbacks: the causal window of 9 as block_sparse, against the
    # sliding_window program; blocks off the window's edges settled by the classifier
    W = 9

    def fill_window(b, h, q0, q1, kv0, kv1, keep):
        for q in range(q0, q1):
            for kv in range(kv0, kv1):
                keep[(q - q0) * (kv1 - kv0) + (kv - kv0)] = 0 <= q - kv < W

    def classify_window(b, h, q0, q1, kv0, kv1):
        if kv0 > q1 - 1 or q0 - (kv1 - 1) >= W:
            return BLOCK_INACTIVE
        return BLOCK_FULL if kv1 - 1 <= q0 and q1 - 1 - kv0 < W else BLOCK_PARTIAL
    window = lib.compile(f"softmax(sliding_window(causal(scaled_dot_product(Q, K)), {W})) @ V", DEVICE_CPU, FP32, 0)
    nb8 = (N + 7) // 8
    kinds = (ctypes.c_uint8 * (nb8 * nb8))(*[classify_window(0, 0, qb * 8, min(N, qb * 8 + 8), kb * 8,
                                                             min(N, kb * 8 + 8))
                                             for qb in range(nb8) for kb in range(nb8)])
    builds = (lambda: lib.block_mask_from_block_cells(fill_window, 1, 1, N, N, 8, 8),
              lambda: lib.block_mask_from_block_cells(fill_window, 1, 1, N, N, 8, 8, classify_window),
              lambda: lib.block_mask_from_block_kinds(ctypes.addressof(kinds), fill_window, 1, 1, N, N, 8, 8))
    # the same kinds with the partial blocks' cells packed in one array, no callback (the bytes past N
    # are junk, which must not be read as kept)
    slabs = [(1 if q >= N or kv >= N else int(0 <= q - kv < W))
             for i, kind in enumerate(kinds) if kind == BLOCK_PARTIAL
             for q in range(i // nb8 * 8, i // nb8 * 8 + 8) for kv in range(i % nb8 * 8, i % nb8 * 8 + 8)]
    packed = (ctypes.c_uint8 * len(slabs))(*slabs)
    builds += (lambda: lib.block_mask_from_partial_cells(ctypes.addressof(kinds), ctypes.addressof(packed),
                                                         len(slabs) // 64, 1, 1, N, N, 8, 8),)
    diffs = []
    for build in builds:
        cells = build()
        pair = []
        for handle, m in ((sparse, cells), (window, None)):
            o = floats([7.0] * (Hq * N * D))
            a5 = Args()
            a5.q, a5.k, a5.v, a5.out = (host_view(qs, [1, Hq, N, D]), host_view(ks, [1, Hkv, N, D]),
                                        host_view(vs, [1, Hkv, N, D]), host_view(o, [1, Hq, N, D]))
            a5.block_mask = m.handle if m else None
            pair.append(o if lib.launch(handle, a5) == OK else None)
        cells.free()
        diffs.append(max(abs(x - y) for x, y in zip(*pair)) if all(pair) else float("inf"))
    print(f"selfcheck: CPU block mask from Python callbacks vs sliding_window: max |diff| {diffs[0]:.1e} "
          f"(cells only), {diffs[1]:.1e} (with a classifier), {diffs[2]:.1e} (a grid of kinds), "
          f"{diffs[3]:.1e} (kinds and packed cells)")
    ok &= max(diffs) < 1e-5
    lib.lib.attnfuse_kernel_free(window)

    # merge_states on the CPU through the ABI: two fp32 states of 3 rows x 4 dims (row 2 empty in
    # the second) against the log-sum-exp merge computed here
    lses = [[0.5, -1.0, 2.0], [1.5, 0.25, float("-inf")]]
    os_ = [[0.1 * (k + 1) * (j + 1) for j in range(12)] for k in range(2)]
    bufs = [floats(o) for o in os_] + [floats([7.0] * 12)]
    lbufs = [floats(l) for l in lses] + [floats([7.0] * 3)]
    st = []
    for o, lb in zip(bufs, lbufs):
        s_ = State()
        s_.o, s_.dtype, s_.lse = host_view(o, [1, 1, 3, 4]), FP32, ctypes.cast(lb, ctypes.c_void_p)
        s_.lse_strides[:] = [3, 3, 1]
        st.append(s_)
    lib.merge_states(DEVICE_CPU, st[:2], st[2])
    err = 0.0
    for r in range(3):
        m = max(lses[0][r], lses[1][r])
        w = [math.exp(lses[k][r] - m) for k in range(2)]
        err = max(err, abs(lbufs[2][r] - (m + math.log(sum(w)))))
        for d in range(4):
            err = max(err, abs(bufs[2][r * 4 + d] - sum(w[k] / sum(w) * os_[k][r * 4 + d] for k in range(2))))
    print(f"selfcheck: CPU merge_states through the ABI vs the log-sum-exp merge here: max |diff| {err:.1e}")
    ok &= err < 1e-5

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
