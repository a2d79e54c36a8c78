#!/usr/bin/env bash
# Prepared in the twenty-first session (not yet run): the cluster merge
# (bench/experiments/decode_cluster_merge.patch) lost at 16 splits, where a tile's 16 blocks of
# ~200 KB need 16 free SMs of one GPC at once; at 8 splits (portable clusters, 64 blocks at 8B
# B1 and 70B B1, one wave) it may not. The twentieth session measured 70B B1 / 32k at 8 splits as
# fast as at 16 with the global merge, and the phase probe put 7 us of that call's tail in the
# last block's merge, which a cluster spreads over its 8 blocks.
# Build here first (two trees):
#   bash bench/make_device_carry.sh                       # .devcarry: the tree as committed
#   git apply bench/experiments/decode_cluster_merge.patch && bash bench/make_device_carry.sh &&
#   rm -rf .devcarry-cl && mv .devcarry .devcarry-cl &&
#   git apply -R bench/experiments/decode_cluster_merge.patch && bash bench/make_device_carry.sh
# then carry .devcarry and .devcarry-cl. On the device:
#   1. the cluster tests on the cluster build;
#   2. decode A/B, three interleaved rounds: base (auto splits) / base at 8 splits / cluster at 8
#      splits / cluster (auto). ATTNFUSE_CUDA_DECODE_SPLITS=8 forces 8 splits on every decode
#      cell, so read the B1 and 70B rows (and B8 4k, the one cell the cluster won at auto).
# CAP bounds the whole (default 330 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-330}
say "== 1. cluster tests"
timeout "$(left 90)" .devcarry-cl/test_gpu \
  --gtest_filter='CudaDecode.ClusterMerge*:CudaDecode.InKernelMerge*:CudaDecode.LaunchPlanOfALlama3Step' \
  > "$W/tests.log" 2>&1
say "rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$W/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is|cluster sizes' "$W/tests.log" | head -20 >> "$D"
say "== 2. decode A/B"
OUT=$W/ab QUICK=0 ROUNDS=3 timeout "$(left 230)" bash bench/run_gpu_decode_ab.sh base=.devcarry \
  s8=.devcarry+ATTNFUSE_CUDA_DECODE_SPLITS=8 cl8=.devcarry-cl+ATTNFUSE_CUDA_DECODE_SPLITS=8 cl=.devcarry-cl \
  > "$W/decode_ab_summary.txt" 2>&1
cut -c1-240 "$W/decode_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
