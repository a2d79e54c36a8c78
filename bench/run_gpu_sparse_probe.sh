#!/usr/bin/env bash
# One device call that places block-sparse time (issue 5, BigBird at the GPT-2 geometry): the dense
# program at the same shape for scale, the BigBird suite under several wgmma tiles
# (ATTNFUSE_CUDA_WGMMA_TILE=block_k,min_blocks[,stages]; "auto" = the tile pass's), then Nsight
# Compute on one BigBird 4k launch (duration, occupancy, warp stalls, SM activity).
# Expects .devcarry/ from bench/make_device_carry.sh. On the device, repo root:
#   TILES="auto 128,2,3 64,2,4" bash bench/run_gpu_sparse_probe.sh
# NCU=0 skips the profiler (clocks left alone: --clock-control none, METHOD.md). TEST_FILTER runs
# those GPU tests first ($OUT/gpu_tests.log).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
L=.devcarry/lib/libattnfuse_c.so
if [ -n "${TEST_FILTER:-}" ]; then
  echo "== GPU tests $TEST_FILTER"
  timeout "${TEST_TIMEOUT:-300}" .devcarry/test_gpu --gtest_filter="$TEST_FILTER" > "$OUT/gpu_tests.log" 2>&1
  echo "rc=$?"
  grep -E '^\[  (PASSED|FAILED) |^\[  FAILED|Failure' "$OUT/gpu_tests.log" | head -30
fi
echo "== dense, same shape (B4 H12 N4k D64, bf16)"
timeout 120 .devcarry/attnfuse bench 'softmax(scaled_dot_product(Q, K)) @ V' --shape 4,12,12,4096,4096,64 \
  --dtype bf16 --device cuda 2>&1 | tail -4 | tee "$OUT/dense_4k.txt"
for t in ${TILES:-auto}; do
  name=bigbird_${t//,/_}
  echo "== ATTNFUSE_CUDA_WGMMA_TILE=$t"
  if [ "$t" = auto ]; then
    timeout 200 python3 bench/gpu_decode.py --lib $L --suite bigbird ${PEERS---ours-only} --out "$OUT/$name" \
      > "$OUT/$name.log" 2>&1
  else
    ATTNFUSE_CUDA_WGMMA_TILE=$t timeout 200 python3 bench/gpu_decode.py --lib $L --suite bigbird --ours-only \
      --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  fi
  echo "rc=$?"
  grep -E "^bigbird.*(attnfuse|flex)|rror" "$OUT/$name.log" | head -12
done
if [ "${NCU:-1}" = 1 ]; then
  echo "== ncu bigbird 4k b128"
  timeout 200 ncu --clock-control none -k regex:attnfuse --launch-skip 5 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis \
    python3 bench/gpu_decode.py --lib $L --suite bigbird --quick --ours-only > "$OUT/ncu_bigbird_4k.txt" 2>&1
  echo "rc=$?"
  grep -E "attnfuse_|Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Shared Memory Config|Dynamic Shared|Grid Size|Waves Per SM|Stall|Issued|Eligible|Active Warps|One or More|No Eligible|SM Active|Elapsed Cycles" \
    "$OUT/ncu_bigbird_4k.txt" | head -60
fi
