#!/usr/bin/env bash
# Prepared in the thirty-seventh session, run in the thirty-eighth on an H100 and not kept (see
# bench/experiments/README.md; results in bench/results/2026-12-05-h100-session38/call1/).
# bench/experiments/paged_unsettled_guess.patch: blocks of an unsettled page table guess
# their pages before the grid dependency wait (KvCopy::warm_guessed_pages: the table read through
# L2 only and clamped to the table and the pool, then prefetch.global.L2 of each guessed page's
# first K and V line, in blocks of fewer than 256 pages, only in dependent launches), as a settled
# table's blocks warm theirs; and GPU test CudaDecode.PagedTableWrittenByTheKernelAheadIsReadAfterIt
# (the kernel ahead writes the paged call's page_indptr). The patch touches the host (FwdParams
# gains fields at its end), so it is built into the carry:
#   mkdir -p /tmp/kold && cp src/codegen/cuda/kernels/*.cuh /tmp/kold/   # the templates before
#   git apply bench/experiments/paged_unsettled_guess.patch && bash bench/make_device_carry.sh
#   mkdir -p .devcarry/kold && cp /tmp/kold/*.cuh .devcarry/kold/         # carry .devcarry
# (the old templates read only the prefix of the new FwdParams, so the new host drives both). Then:
#   1. the whole GPU suite in 8 shards (with the new test), and compute-sanitizer memcheck on the
#      new test and the settled-table chains at the same time;
#   2. the paged suite, ours only, three interleaved rounds: old templates / new;
#   3. time permitting, a split-count sweep of the quick paged cells (bench/decode_tile_sweep.sh).
# CAP bounds the whole (default 580 s). Run it alone in a call: bash bench/sessions/run_gpu_paged_guess.sh
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-580}
say "== 1. the whole GPU suite, 8 shards, and memcheck on the table written by the kernel ahead (at once)"
if command -v compute-sanitizer >/dev/null; then
  ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-memcheck timeout "$(left 290)" compute-sanitizer --tool memcheck \
    --error-exitcode 9 .devcarry/test_gpu --gtest_filter='CudaDecode.PagedTableWritten*:CudaDecode.PagedSettled*' \
    > "$W/san_guess.log" 2>&1 &
else
  say "no compute-sanitizer"
fi
gpu_suite_sharded "$(left 300)" 8
wait
say "memcheck: $(grep -E '^\[  (PASSED|FAILED)|ERROR SUMMARY' "$W/san_guess.log" | tr '\n' ' ')"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. paged: old templates (kold) / guessed warm, ours only, three rounds"
OUT=$W/ab_paged QUICK=0 ROUNDS=3 SUITE=paged timeout "$(left 570)" bash bench/run_gpu_decode_ab.sh \
  old=.devcarry+ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/kold new=.devcarry > "$W/paged_ab.txt" 2>&1
say "paged rc=$?"
sed -E 's/ +/ /g' "$W/paged_ab.txt" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
if [ "$(left 200)" -ge 150 ]; then
  say "== 3. paged split sweep (quick paged cells, new templates): auto and fixed split counts"
  OUT=$W/sweep ROUNDS=1 SUITES=paged timeout "$(left 200)" bash bench/decode_tile_sweep.sh auto auto:2 auto:4 auto:8 > "$W/sweep.txt" 2>&1
  grep -E "== tile|paged_ps16|B8.*attnfuse " "$W/sweep.txt" | sed -E 's/ +/ /g' | head -40 >> "$D"
  tar czf "$OUT/logs.tgz" -C "$W" .
fi
say "end in ${SECONDS}s"
