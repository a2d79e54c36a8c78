#!/usr/bin/env bash
# One device call for the producer-warp experiment (ATTNFUSE_CUDA_DECODE_PRODUCER=1: a fifth warp
# issues the TMA decode tiles' copies, the four computing warps wait on per-stage full / empty
# mbarriers instead of a block barrier per tile; attention_fwd.cuh FwdKernel::producer). Why: Nsight
# at 70B B1 / 32k (bench/results/2026-12-02-h200-session16/call5/) has 4 warps per SM issuing an
# instruction every 7.6-8.0 cycles, so the issuing warp's lookups and copies lengthen every tile
# of the block. In order, each step bounded by CAP (560 s in all):
#   1. GPU tests with the producer warp: the decode and paged ones that cover split and unsplit,
#      contiguous and paged (every box size), the in-kernel merge and empty rows;
#   2. compute-sanitizer racecheck and synccheck on a small subset with the producer warp;
#   3. the decode and paged sweeps, base (.devcarry) against the producer warp, two interleaved
#      rounds, each row validated against float64 before it is timed.
# Digest in $OUT/digest.txt, logs in $OUT/logs.tgz. Expects .devcarry/ from bench/make_device_carry.sh.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
digest_init  # $W, $D, say (device_env.sh)
CAP=${CAP:-560}  # left (device_env.sh) bounds each step by it

say "== 1. GPU tests with ATTNFUSE_CUDA_DECODE_PRODUCER=1"
ATTNFUSE_CUDA_DECODE_PRODUCER=1 gpu_tests tests \
  'CudaDecode.SanitizerSubset:CudaDecode.QueriesCachesGqaAndSplits:CudaDecode.PagedTma*:CudaDecode.PagedLayouts*:CudaDecode.InKernelMerge*:CudaDecode.RowsThatKeepNothing:CudaDecode.HundredThousandKeys:CudaDecode.PagedPageLists*' \
  "$(left 200)"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 2. compute-sanitizer with the producer warp"
for tool in racecheck synccheck; do
  ATTNFUSE_CUDA_DECODE_PRODUCER=1 timeout "$(left 90)" compute-sanitizer --tool $tool --error-exitcode 9 \
    .devcarry/test_gpu --gtest_filter='CudaDecode.SanitizerSubset:CudaDecode.InKernelMerge*' \
    > "$W/sanitizer_$tool.log" 2>&1
  say "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$W/sanitizer_$tool.log" | head -2 | tr '\n' ' ')"
done
tar czf "$OUT/logs.tgz" -C "$W" .

# paged also gets `wide`: the producer warp with 128-key tiles at every page size (pages of 16
# in 128-key tiles were slower in session 15, when warp 0 issued their 32 copies per tile itself).
for suite in decode paged; do
  say "== 3. $suite: base against the producer warp"
  extra=(); [ $suite = paged ] && extra=(wide=.devcarry+ATTNFUSE_CUDA_DECODE_PRODUCER=1+ATTNFUSE_CUDA_DECODE_TILE=16,128,4,3,4)
  OUT=$W/${suite}_ab SUITE=$suite QUICK=$([ $suite = paged ] && echo 0 || echo 1) ROUNDS=2 \
    timeout "$(left 200)" bash bench/run_gpu_decode_ab.sh base=.devcarry \
    producer=.devcarry+ATTNFUSE_CUDA_DECODE_PRODUCER=1 "${extra[@]}" 2>&1 | tee -a "$D"
  tar czf "$OUT/logs.tgz" -C "$W" .
done
