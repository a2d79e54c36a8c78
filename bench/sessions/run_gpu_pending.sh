#!/usr/bin/env bash
# One device call for what the 2026-12-01 (fifth) session built but could not run on the GPU:
# the GPU tests of caller RoPE tables and of BlockMasks finer than the prefill tile, the BigBird
# benchmark whose 64-block case those masks now reach (with the mask-construction timing that
# measured 16 ms for tiny grids), and compute-sanitizer on the new tests. Logs under $OUT.
# Expects .devcarry/ from bench/make_device_carry.sh.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
NEW='CudaRope.CallerTablesInEveryPlacement:CudaSparse.BlockSparseFinerThanTheTile'
echo "== new GPU tests"
timeout ${TEST_TIMEOUT:-240} .devcarry/test_gpu --gtest_filter="$NEW" > "$OUT/gpu_tests_pending.log" 2>&1; echo "rc=$?"
grep -E '^\[  (PASSED|FAILED)|Failure' "$OUT/gpu_tests_pending.log" | head -10
for tool in memcheck racecheck; do
  timeout ${SANITIZER_TIMEOUT:-120} compute-sanitizer --tool $tool --error-exitcode 9 .devcarry/test_gpu \
    --gtest_filter='CudaSparse.BlockSparseFinerThanTheTile' > "$OUT/sanitizer_$tool.log" 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | head -1)"
done
echo "== BigBird (64- and 128-blocks) against flex"
timeout ${BENCH_TIMEOUT:-200} python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite bigbird \
  --out "$OUT/bigbird" > "$OUT/bigbird.log" 2>&1; echo "rc=$?"
grep -E "attnfuse|flex|construction" "$OUT/bigbird.log" | head -20
