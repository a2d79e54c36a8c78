#!/usr/bin/env bash
# One device call that places decode time (issue 5): Nsight Compute on the decode and combine
# kernels at two B1 cells (duration, DRAM throughput, occupancy, warp stall reasons), then
# bench/decode_tile_sweep.sh over the decode tiles given in TILES (block_q,block_k,warps,stages
# [,key_warps]). Expects .devcarry/ from bench/make_device_carry.sh. On the device, repo root:
#   TILES="16,64,4,2,4 16,64,4,3,4" bench/run_gpu_decode_probe.sh
# NCU=0 skips the profiler; its clocks are left alone (--clock-control none, METHOD.md).
# TEST_FILTER=gtest-filter runs those GPU tests first (log: $OUT/gpu_tests.log).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
if [ -n "${TEST_FILTER:-}" ]; then
  echo "== GPU tests $TEST_FILTER"
  timeout "${TEST_TIMEOUT:-300}" .devcarry/test_gpu --gtest_filter="$TEST_FILTER" > "$OUT/gpu_tests.log" 2>&1
  echo "rc=$?"
  grep -E '^\[  (PASSED|FAILED) |^\[  FAILED|Failure|tests ran' "$OUT/gpu_tests.log" | head -30
fi
P='softmax(causal(scaled_dot_product(Q, K))) @ V'
if [ "${NCU:-1}" = 1 ]; then
  for shape in 1,64,8,1,32768,128 1,32,8,1,4096,128; do
    echo "== ncu $shape"
    log="$OUT/ncu_${shape//,/_}.txt"
    timeout 150 ncu --clock-control none -k regex:attnfuse --launch-skip 6 --launch-count 2 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis \
      .devcarry/attnfuse bench "$P" --shape "$shape" --dtype bf16 --device cuda > "$log" 2>&1
    echo "rc=$?"
    grep -E "attnfuse_(fwd|combine)|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Grid Size|Block Size|Waves Per SM|Stall|One or More" \
      "$log" | head -60
  done
fi
bash bench/decode_tile_sweep.sh ${TILES:-16,64,4,2,4}
