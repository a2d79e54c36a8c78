#!/usr/bin/env bash
# One device call (see bench/README.md): GPU test suite, sanitizer subset, dispatch/compile
# timing and the peer benchmark, with every log under $OUT. Expects .devcarry/ from
# bench/make_device_carry.sh. Usage on the device: bench/run_gpu.sh [quick|full]
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
suite=${1:-quick}
echo "== GPU tests"; .devcarry/test_gpu 2>&1 | tee "$OUT/gpu_tests.log" | grep -E '^\[  (PASSED|FAILED)|Failure|error|SKIPPED|OK \]' | head -40
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer (memcheck, racecheck) on a subset"
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool --error-exitcode 9 .devcarry/test_gpu --gtest_filter='CudaForward.FullyMaskedRowsAndQOffset' \
      > "$OUT/sanitizer_$tool.log" 2>&1; echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | head -2 | tr '\n' ' ')"
  done
fi
echo "== CLI on the GPU (the make demo job, and --check on a few programs)"
{
  prog='softmax(causal(scaled_dot_product(Q, K))) @ V'
  .devcarry/attnfuse run "$prog" --shape 1,32,8,1024,1024,128 --dtype bf16 --device auto --check
  .devcarry/attnfuse bench "$prog" --shape 1,32,8,1024,1024,128 --dtype bf16 --device auto
  .devcarry/attnfuse run 'softmax(softcap(alibi(sliding_window(causal(scaled_dot_product(Q, K)), 100)), 20)) @ V' \
    --shape 2,8,2,333,333,64 --dtype fp16 --device cuda --check
  .devcarry/attnfuse run 'relu_attention(additive_bias(scaled_dot_product(Q, K))) @ V' --shape 1,4,4,200,250,96 \
    --dtype bf16 --device cuda --check
} > "$OUT/cli_gpu.log" 2>&1; echo "cli exit $?"; grep -E 'PASS|FAIL|fused|error' "$OUT/cli_gpu.log"
echo "== dispatch"; .devcarry/dispatch_bench 2>/dev/null | tee "$OUT/dispatch.log" | tail -4
echo "== peers ($suite)"; python3 bench/gpu_peers.py --lib .devcarry/lib/libattnfuse_c.so --suite "$suite" --out "$OUT/peers.json" 2>&1 | tee "$OUT/peers.log" | grep -v Warning
