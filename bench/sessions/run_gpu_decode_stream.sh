#!/usr/bin/env bash
# One device call (under 10 minutes: each step has its own timeout) for what the fourteenth
# session left ready but unrun:
#   1. the GPU suites its 128-key Hopper decode tile reaches beyond CudaDecode (CudaRope's decode
#      placements, CudaForward), so the tile is checked everywhere it runs;
#   2. the decode stream's L2 experiments (bench/experiments/README.md, "The decode stream's L2
#      traffic"): the tensor maps' L2 promotion (ATTNFUSE_CUDA_TMA_L2_PROMOTE) and the two kernel
#      patches through ATTNFUSE_KERNEL_DIR, each against the embedded kernels in one process;
#   3. paged NHD against HND pages (is the paged overhead the NHD layout's scattered rows?);
#   4. Nsight on SDPA-cuDNN's decode kernels next to ours (its L2 load).
# Everything lands in $OUT/digest.txt and $OUT/logs.tgz (the device returns at most 8 files).
# Expects .devcarry/ from bench/make_device_carry.sh. On the device: bash bench/sessions/run_gpu_decode_stream.sh
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
L=.devcarry/lib/libattnfuse_c.so
digest_init  # $W, $D, say (device_env.sh)

say "== 1. GPU tests the 128-key decode tile reaches"
timeout 180 .devcarry/test_gpu --gtest_filter='CudaRope.*:CudaForward.*' > "$W/tests.log" 2>&1
say "rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$W/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED' "$W/tests.log" >> "$D"

say "== 2a. L2 promotion, one round (ROUNDS_L2 to change)"
OUT=$W/l2 ROUNDS=${ROUNDS_L2:-1} timeout 90 bash bench/run_gpu_decode_ab.sh base=.devcarry \
  p128=.devcarry+ATTNFUSE_CUDA_TMA_L2_PROMOTE=128 none=.devcarry+ATTNFUSE_CUDA_TMA_L2_PROMOTE=none 2>&1 | tee -a "$D"

say "== 2b. kernel patches (tests, then the quick decode cells)"
OUT=$W/kab BENCH="bench/gpu_decode.py --suite decode --quick --ours-only" \
  TEST_FILTER='CudaDecode.QueriesCachesGqaAndSplits:CudaDecode.InKernel*' TEST_TIMEOUT=60 BENCH_TIMEOUT=40 \
  timeout 130 bash bench/run_gpu_kernel_ab.sh bench/experiments/decode_tma_row_order.patch \
  bench/experiments/decode_tma_evict_first.patch 2>&1 | tee -a "$D"

say "== 3. paged NHD and HND"
timeout 60 python3 bench/gpu_decode.py --lib $L --suite paged --quick --paged-layouts nhd,hnd --out "$W/paged" \
  > "$W/paged.log" 2>&1
grep -E " attnfuse" "$W/paged.log" | tee -a "$D"

say "== 4. Nsight: ours and cuDNN at 8B B32 32k"
OUT=$W/ncu CELLS="32,32,8,32768" timeout 120 bash bench/run_gpu_ncu_decode.sh 2>&1 | tee -a "$D"

tar czf "$OUT/logs.tgz" -C "$W" .
