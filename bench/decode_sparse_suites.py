"""gpu_decode.py's bigbird and documents suites: BigBird block sparsity against flex's BlockMask
and SDPA's dense mask, packed documents and varlen decode against flex and FA2 varlen.

Separate from the decode and paged suites (decode_suites.py): these build masks and document
offsets rather than KV caches, and share nothing with them but decode_harness.
"""
import itertools
import math
import random
import statistics
import time

from decode_harness import (DEV, SINK, F, FLEX, FLEX_ERROR, create_block_mask, free_bytes, header, print_rows,
                            rel_err, say, sets_for, share_state, torch, validate_and_time)

share_state(globals())  # keeps torch, FLEX, SINK, ... (decode_harness.SHARED) current here


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
    uniform = getattr(args, "varlen_lengths", "random") == "uniform"
    name = f"varlen decode llama3-8b B{seqs}" + (" uniform" if uniform else "")
    if args.filter not in name:
        return
    t0 = time.time()
    rng = random.Random(11)
    lens = [rng.randrange(1024, 32769) for _ in range(seqs)]
    if uniform:  # the same keys in all, spread evenly: the split choice sees the same mean either way
        lens = [sum(lens) // seqs] * seqs
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
