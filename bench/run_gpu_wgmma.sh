#!/usr/bin/env bash
# One device call for the Hopper (wgmma) prefill kernel: the GPU suite (every prefill case runs
# the wgmma form on an H200), compute-sanitizer on a forward subset, the peer benchmark with the
# wgmma form and, for A/B, attnfuse alone with ATTNFUSE_CUDA_WGMMA=0 (mma.sync), every log under $OUT.
# Expects .devcarry/ from bench/make_device_carry.sh.
# Usage on the device: bench/run_gpu_wgmma.sh [tests] [sanitize] [peers] [ab] [full]
# Env: TEST_FILTER (gtest filter), PEERS_FILTER (gpu_peers.py --filter), TEST_TIMEOUT,
# BENCH_TIMEOUT (seconds).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
want() { [[ " ${STAGES} " == *" $1 "* ]]; }
STAGES=" ${*:-tests peers} "
SUITE=quick; want full && SUITE=full
LIB=.devcarry/lib/libattnfuse_c.so

if want tests; then
  echo "== GPU tests (${TEST_FILTER:-*})"
  timeout ${TEST_TIMEOUT:-420} .devcarry/test_gpu --gtest_filter="${TEST_FILTER:-*}" > "$OUT/gpu_tests.log" 2>&1
  echo "rc=$?"
  grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure|tests ran' "$OUT/gpu_tests.log" | head -30
  grep -E 'compiled .* in' "$OUT/gpu_tests.log" | sed 's/.*compiled //' > "$OUT/cold_compiles.txt"
fi
if want sanitize; then
  for tool in memcheck racecheck; do
    timeout ${SANITIZER_TIMEOUT:-300} compute-sanitizer --tool $tool --error-exitcode 9 .devcarry/test_gpu \
      --gtest_filter='CudaForward.FullyMaskedRowsAndQOffset:CudaForward.AdditiveBiasAtEdgeTiles' \
      > "$OUT/sanitizer_$tool.log" 2>&1
    echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | head -2 | tr '\n' ' ')"
  done
fi
if want peers; then
  echo "== peers ($SUITE), wgmma form"
  timeout ${BENCH_TIMEOUT:-400} python3 bench/gpu_peers.py --lib $LIB --suite $SUITE --filter "${PEERS_FILTER:-}" \
    --out "$OUT/peers_wgmma.json" > "$OUT/peers_wgmma.log" 2>&1
  echo "rc=$?"; grep -vE 'Warning|^\s*$|\(.* s\)' "$OUT/peers_wgmma.log" | tail -80
fi
if want ab; then
  echo "== ours only, mma.sync form (ATTNFUSE_CUDA_WGMMA=0)"
  ATTNFUSE_CUDA_WGMMA=0 timeout ${BENCH_TIMEOUT:-400} python3 bench/gpu_peers.py --lib $LIB --suite $SUITE \
    --filter "${PEERS_FILTER:-}" --ours-only --out "$OUT/peers_mma.json" > "$OUT/peers_mma.log" 2>&1
  echo "rc=$?"; grep -E 'attnfuse' "$OUT/peers_mma.log" | tail -40
fi
