"""gpu_decode.py's decode and paged suites: the decode cells, inputs, float64 reference and
peers (SDPA-cuDNN, SDPA-flash, flex), and paged KV caches against the contiguous one.

Separate from the sparse suites (decode_sparse_suites.py): these two share cells, inputs and the
reference, and bench/ncu_decode_target.py uses them through gpu_decode.
"""
import math
import time

from attnfuse_abi import PAGED_HND, PAGED_NHD
from decode_harness import (DEV, GIB, SINK, F, FLEX, FLEX_ERROR, SDPBackend, free_bytes, header, print_rows, rel_err,
                            say, sdpa_kernel, sets_for, share_state, torch, validate_and_time)

share_state(globals())  # keeps torch, FLEX, SINK, ... (decode_harness.SHARED) current here


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
