#!/usr/bin/env python3
"""Hand-made barrier faults in the CUDA kernel templates, each run under ThreadSanitizer.

For every fault: edit one kernel header in place, rebuild build/bin/test_kernel_races (the
host-emulated kernels instrumented by TSan, tests/CMakeLists.txt), run the tests that reach the
edited code with copies at each end of their window (default and ATTNFUSE_HOST_COPIES=flipped),
restore the header, and report per mode whether TSan reported a race and whether a test's result
check failed. A race detector that misses a removed barrier is the defect this looks for; a
fault that only TSan reports is one the result checks alone would have let through.

    python3 tools/race_faults.py [--build build] [--only NAME ...]
    python3 tools/race_faults.py --check   (only that every fault's text is still in its header; CI)

Restores every header on exit (also on Ctrl-C); rebuild afterwards before trusting the binary.
"""
import argparse
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
K = "src/codegen/cuda/kernels/"
# (block_merge.cuh's key-warp merge: the line each warp stages its accumulator rows with)
ORO = ("        for (int d = 0; d < kDT; ++d) orow[d * 4 + t] = "
       "make_float2(acc_o[a][d][2 * hf], acc_o[a][d][2 * hf + 1]);\n")

# name, header, exact text (must occur once), replacement, gtest filter
FAULTS = [
    ("mma_rotated_k_unpublished", K + "attention_fwd.cuh",
     "      if (produced) KV::compute_sync();  // the rotated K tile is visible to every computing warp\n"
     "      else __syncthreads();\n", "",
     "AttentionKernelOnHost.FusedRope*:AttentionKernelOnHost.BothRope*:"
     "HopperKernelOnHost.TmaDecodeRotatesEachLandedStage"),
    ("mma_key_warp_merge_over_live_stages", K + "attention_fwd.cuh",
     "      __syncthreads();  // every warp is done with the K/V stages the merge reuses\n", "",
     "AttentionKernelOnHost.DecodeTile*:AttentionKernelOnHost.SplitDecode*"),
    ("mma_stage_barrier_only_in_first_step", K + "attention_fwd.cuh",
     "    if (!produced) __syncthreads();  // tile nb is in smem",
     "    if (!produced && rel == 0) __syncthreads();  // tile nb is in smem",
     "AttentionKernelOnHost.PrefillTiles*:AttentionKernelOnHost.StagesHold*"),
    ("mma_rope_tables_unpublished", K + "attention_fwd.cuh",
     "      if constexpr (kProducer) KV::compute_sync();\n      else __syncthreads();\n"
     "    } else if constexpr (kPairWindow) {",
     "    } else if constexpr (kPairWindow) {",
     "AttentionKernelOnHost.ModifiersAndRopeWindowPerCell:AttentionKernelOnHost.FusedRope*:"
     "HopperKernelOnHost.TmaDecodeRotatesEachLandedStage"),
    ("decode_producer_zeroed_rows_unpublished", K + "attention_fwd.cuh",
     "      if (rel == 0 || zeroed) KV::compute_sync();", "      if (rel == 0) KV::compute_sync();",
     "HopperKernelOnHost.TmaPagedDecode:HopperKernelOnHost.TmaDecodeRotatesEachLandedStage"),
    ("key_warp_states_unpublished", K + "block_merge.cuh",
     ORO + "      }\n    __syncthreads();\n", ORO + "      }\n",
     "AttentionKernelOnHost.DecodeTile*:HopperKernelOnHost.TmaDecodeTiles"),
    ("split_merge_scratch_over_live_rows", K + "block_merge.cuh",
     "    __syncthreads();  // every warp's partial rows are written, and the stages the scratch reuses are free\n",
     "", "AttentionKernelOnHost.SplitDecode*:AttentionKernelOnHost.BlockSparse*"),
    ("rotate_kernel_tables_unpublished", K + "rope.cuh",
     "    const RopeTables rope = stage_rope_tables<kD / 2>(p.rope, tables);\n    __syncthreads();\n",
     "    const RopeTables rope = stage_rope_tables<kD / 2>(p.rope, tables);\n",
     "RopeKernelOnHost.*:AttentionKernelOnHost.BothRope*"),
    ("wgmma_loader_skips_release_wait", K + "fwd_wgmma.cuh",
     "              if (rel >= 2) mbar_wait(empty + st * 8, ((rel - 2) / kS) & 1);  // tile rel - 2 released\n",
     "", "HopperKernelOnHost.WgmmaPrefill*:HopperKernelOnHost.StagesHold*"),
    ("wgmma_document_zeroing_unpublished", K + "fwd_wgmma.cuh",
     "      if constexpr (Kernel::kProducer) Kernel::KV::compute_sync();\n      else __syncthreads();\n    }\n  }\n",
     "    }\n  }\n", "HopperKernelOnHost.WgmmaDocumentsByTma"),
    ("wgmma_lockstep_refill_before_release", K + "fwd_wgmma.cuh",
     "        if (kProduced && tma) Kernel::KV::compute_sync();\n        else __syncthreads();\n",
     "        if (kProduced && tma) Kernel::KV::compute_sync();\n        else if (rel == 0) __syncthreads();\n",
     "HopperKernelOnHost.WgmmaPagedPrefill:HopperKernelOnHost.StagesHold*"),
]


def run_mode(build, flt, flipped):
    env = dict(os.environ, OMP_NUM_THREADS="1", TSAN_OPTIONS="halt_on_error=0")
    env.pop("ATTNFUSE_HOST_COPIES", None)
    if flipped:
        env["ATTNFUSE_HOST_COPIES"] = "flipped"
    try:
        r = subprocess.run([str(build / "bin/test_kernel_races"), f"--gtest_filter={flt}"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=1200)
        out = r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        return "timeout (deadlock?)", (e.stdout or b"")
    races = out.count("WARNING: ThreadSanitizer")
    failed = out.count("[  FAILED  ]") > 0 or r.returncode not in (0, 66)
    return f"races {races:3d}, results {'FAIL' if failed else 'pass'}", out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--logs", default="/tmp/race_faults")
    ap.add_argument("--check", action="store_true", help="check the fault list against the headers, run nothing")
    a = ap.parse_args()
    build = ROOT / a.build
    logs = pathlib.Path(a.logs)
    unknown = sorted(set(a.only or []) - {f[0] for f in FAULTS})
    if unknown:
        print("no such fault: " + ", ".join(unknown))
        return 1
    chosen = [f for f in FAULTS if not a.only or f[0] in a.only]
    # Every fault's text is checked before any runs: a header edited since the table was written
    # stops the whole run at once instead of after the faults before it.
    counts = [(name, header, (ROOT / header).read_text().count(old)) for name, header, old, _, _ in chosen]
    stale = [f"{name}: the text to change occurs {n} times in {header}" for name, header, n in counts if n != 1]
    if stale:
        print("fault list out of date:\n  " + "\n  ".join(stale))
        return 1
    if a.check:
        print(f"race_faults: all {len(chosen)} faults' texts occur once in their headers")
        return 0
    logs.mkdir(parents=True, exist_ok=True)
    for name, header, old, new, flt in chosen:
        path = ROOT / header
        text = path.read_text()
        try:
            path.write_text(text.replace(old, new))
            b = subprocess.run(["cmake", "--build", str(build), "--target", "test_kernel_races"], cwd=ROOT,
                               capture_output=True, text=True)
            if b.returncode != 0:
                print(f"{name}: the faulty header does not build\n{b.stdout[-2000:]}")
                continue
            line = [name]
            for flipped in (False, True):
                summary, out = run_mode(build, flt, flipped)
                mode = "flipped" if flipped else "default"
                (logs / f"{name}.{mode}.log").write_text(out if isinstance(out, str) else out.decode(errors="replace"))
                line.append(f"{mode}: {summary}")
            print(" | ".join(line), flush=True)
        finally:
            path.write_text(text)
    print("headers restored; rebuild test_kernel_races before trusting it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
