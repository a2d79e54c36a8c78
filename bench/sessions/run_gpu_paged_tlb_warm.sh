#!/usr/bin/env bash
# Prepared in the thirty-third session, not yet run: a settled page table's blocks ask L2 for the
# first line of their head in each staged page, K and V, while they stage the page list before the
# grid dependency wait (bench/experiments/paged_settled_tlb_warm.patch: prefetch.global.L2, one
# line per page and tensor, through the load path rather than the copy engine; the thirty-third
# session's TMA prefetch of whole tiles queued on the copy engine and lost). The idea: the paged
# calls' extra prologue (70B B1 / 32k settled: 2.5-3.1 us against 1.3 us contiguous) is partly
# the first touch of scattered pages (translations, DRAM pages), which can happen during the wait.
# On the carried build (.devcarry), the patch applied to a copy of its templates:
#   1. the paged decode GPU tests that take the patched path (a settled table is the only case in
#      which the patch changes anything: PagedSettledTablesChainCallsOnOneStream), with the page-list
#      staging test, on the patched templates (the whole CudaDecode.Paged* set compiles cold for
#      over 190 s, which cut the thirty-fourth session's try; the patched templates were checked to
#      compile without spills locally on 2026-12-05: NvrtcCompile.DecodeAndPagedVariantsCompileWithoutSpills);
#   2. the paged suite, ours only, three interleaved rounds: the build's templates / patched.
# CAP bounds the whole (default 580 s). Run it alone in a call: bash bench/sessions/run_gpu_paged_tlb_warm.sh
# PATCH names another variant (thirty-sixth session: bench/experiments/paged_settled_tlb_warm_few_pages.patch,
# the same warm only in blocks of fewer than 256 pages).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-580}
K=$PWD/.devcarry/kwarm
rm -rf "$K" && mkdir -p "$K" && cp src/codegen/cuda/kernels/*.cuh "$K/"
PATCH=${PATCH:-bench/experiments/paged_settled_tlb_warm.patch}
say "patch: $PATCH"
patch -p5 -d "$K" < "$PATCH" > "$W/patch.log" 2>&1 || { say "patch failed"; cat "$W/patch.log" >> "$D"; exit 1; }
say "== 1. paged decode tests on the patched templates"
ATTNFUSE_KERNEL_DIR=$K ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-kwarm gpu_tests paged 'CudaDecode.PagedSettled*:CudaDecode.PagedPageLists*' "$(left 300)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. paged: the build's templates / warmed pages, ours only, three rounds"
OUT=$W/ab_paged QUICK=0 ROUNDS=3 SUITE=paged timeout "$(left 570)" bash bench/run_gpu_decode_ab.sh \
  cur=.devcarry warm=.devcarry+ATTNFUSE_KERNEL_DIR=$K > "$W/paged_ab.txt" 2>&1
say "paged rc=$?"
sed -E 's/ +/ /g' "$W/paged_ab.txt" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
