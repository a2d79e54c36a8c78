"""gpu_decode.py's shared GPU machinery: the lazily imported torch and flex, where results go (Sink,
say), attnfuse through the C ABI on tensors (Ours), and timing, validation and the printed rows.

Separate from the suites (decode_suites.py, decode_sparse_suites.py), which all use it; it also
holds the names that change at run time and the share_state() that keeps the suites' copies of them
current.
"""
import ctypes
import json
import math
import os
import statistics

from attnfuse_abi import BF16, DEVICE_CUDA, FP16, OK, Args, Offsets, PagedKV, raw_tensor

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


# The suites' code, moved out of gpu_decode.py, reads torch, FLEX, SINK, ... as globals of its own
# module, as when it was one file; those names change at run time (import_torch(), gpu_main's Sink
# for --out). So each such module imports them from here and hands its globals() to share_state(),
# which rebinds them there now and whenever they change here.
SHARED = ("torch", "F", "SDPBackend", "sdpa_kernel", "FLEX", "create_block_mask", "FLEX_ERROR", "SINK")
_sharers = []


def share_state(namespace):
    _sharers.append(namespace)
    _publish()


def _publish():
    for namespace in _sharers:
        namespace.update({name: globals()[name] for name in SHARED if name in namespace})


def set_sink(sink):
    """The Sink that say() and the suites write to, in every module that shares the state."""
    global SINK
    SINK = sink
    _publish()


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
    _publish()


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


def strip_private(obj):
    """JSON-safe copy: drops '_keep' entries and callables."""
    if isinstance(obj, dict):
        return {k: strip_private(v) for k, v in obj.items() if not k.startswith("_") and k != "fns"}
    if isinstance(obj, (list, tuple)):
        return [strip_private(v) for v in obj]
    return obj
