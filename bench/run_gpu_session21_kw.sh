#!/usr/bin/env bash
# Session 21, one device call (carry .devcarry and .devcarry-paged):
#   1. the O stride refusal (CudaForward.MisalignedRowsAreRejectedBeforeLaunch) on the carried build;
#   2. bench/experiments/decode_key_warp_slices.patch (the narrow decode tile's key-warp merge spread
#      over the four warps, each merging and writing a quarter of D, and rows past the tile's real
#      ones skipped) through ATTNFUSE_KERNEL_DIR: every decode GPU test, then a decode A/B against
#      the embedded templates (three interleaved rounds);
#   3. the paged producer rule (.devcarry-paged, see run_gpu_paged_producer_rule.sh): its tests, and
#      a paged A/B where both builds compile the same templates (this tree's), so only the rule
#      differs.
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-560}
K0=$W/k_base K1=$W/k_kw
mkdir -p "$K0" "$K1" && cp -r src/codegen/cuda/kernels "$K0/" && cp -r src/codegen/cuda/kernels "$K1/"
patch -s -p5 -d "$K1/kernels" < bench/experiments/decode_key_warp_slices.patch || say "the key-warp patch does not apply"
say "== 1. O stride refusal"
gpu_tests refusal 'CudaForward.MisalignedRowsAreRejectedBeforeLaunch' "$(left 60)"
say "== 2. key-warp slices: decode tests"
ATTNFUSE_KERNEL_DIR=$K1/kernels ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-kw \
  gpu_tests tests_kw 'CudaDecode.*:CudaSparse.BlockSparsePlanCuts*' "$(left 170)"
tar czf "$OUT/logs.tgz" -C "$W" --exclude='k_*' .
say "== 2. decode A/B"
OUT=$W/ab QUICK=0 ROUNDS=3 timeout "$(left 130)" bash bench/run_gpu_decode_ab.sh base=.devcarry \
  kw=.devcarry+ATTNFUSE_KERNEL_DIR=$K1/kernels > "$W/decode_ab_summary.txt" 2>&1
cut -c1-200 "$W/decode_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" --exclude='k_*' .
say "== 3. paged rule: tests"
timeout "$(left 120)" .devcarry-paged/test_gpu --gtest_filter='CudaDecode.Paged*' > "$W/paged_tests.log" 2>&1
say "rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$W/paged_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is' "$W/paged_tests.log" | head -20 >> "$D"
say "== 3. paged A/B"
OUT=$W/pab SUITE=paged QUICK=0 ROUNDS=2 timeout "$(left 150)" bash bench/run_gpu_decode_ab.sh \
  base=.devcarry+ATTNFUSE_KERNEL_DIR=$K0/kernels rule=.devcarry-paged+ATTNFUSE_KERNEL_DIR=$K0/kernels \
  > "$W/paged_ab_summary.txt" 2>&1
cut -c1-200 "$W/paged_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" --exclude='k_*' .
