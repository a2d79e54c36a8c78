#!/usr/bin/env bash
# Prepared in the twentieth session (which had no device time left to run it): the split merge
# (combine.cuh SplitMerge, used by the decode kernel's last part block and by the combine kernel)
# reading each partial row in 16-byte chunks, lane c holding dims 4c .. 4c + 3, and writing O two
# dims per 32-bit store (bench/experiments/decode_merge_vec4.patch; adopted and deleted in 0ef1796:
# git show 0ef1796^:bench/experiments/decode_merge_vec4.patch); and the same with every split up to
# 16 loaded together with the LSEs, one memory latency instead of two at 16 parts
# (decode_merge_vec4_unroll16.patch). Same arithmetic per element in the same order, so the bits
# must equal the embedded merge's. Both through ATTNFUSE_KERNEL_DIR on the carried build:
#   1. merge, decode and block-sparse-cut GPU tests on each variant;
#   2. decode A/B (ours only, every decode cell, three interleaved rounds) against the embedded
#      templates; the 70B cell (two rows per warp, 16 parts) is the one it aims at.
# CAP bounds the whole (default 420 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-420}
TESTS='CudaDecode.*Merge*:CudaDecode.QueriesCachesGqaAndSplits:CudaDecode.DtypesAndHeadDims:CudaDecode.RowsThatKeepNothing:CudaDecode.DependentLaunches*:CudaSparse.BlockSparsePlanCuts*'
for v in vec4 vec4_unroll16; do
  mkdir -p "$W/k_$v" && cp -r src/codegen/cuda/kernels "$W/k_$v/"
  patch -s -p5 -d "$W/k_$v/kernels" < "bench/experiments/decode_merge_$v.patch" || say "decode_merge_$v.patch does not apply"
done
for v in vec4 vec4_unroll16; do
  say "== tests, $v"
  ATTNFUSE_KERNEL_DIR=$W/k_$v/kernels gpu_tests "tests_$v" "$TESTS" "$(left 130)"
done
tar czf "$OUT/logs.tgz" -C "$W" --exclude='k_*' .
say "== decode A/B"
OUT=$W/ab QUICK=0 ROUNDS=3 timeout "$(left 150)" bash bench/run_gpu_decode_ab.sh base=.devcarry \
  vec4=.devcarry+ATTNFUSE_KERNEL_DIR=$W/k_vec4/kernels u16=.devcarry+ATTNFUSE_KERNEL_DIR=$W/k_vec4_unroll16/kernels \
  > "$W/decode_ab_summary.txt" 2>&1
cut -c1-200 "$W/decode_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" --exclude='k_*' .
