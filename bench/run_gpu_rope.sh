#!/usr/bin/env bash
# One device call for RoPE (issue 4): the whole GPU suite, compute-sanitizer on the RoPE subset,
# the demo job on the GPU and the RoPE benchmarks, every log under $OUT. Expects .devcarry/
# from bench/make_device_carry.sh. Usage on the device:
#   bench/run_gpu_rope.sh [all | tests sanitize cli placement peers window ...]
# (all = every stage; WINDOW_FILTER=text keeps only the window cases whose name contains it;
# BENCH_TIMEOUT caps each benchmark suite in seconds).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
L=.devcarry/lib/libattnfuse_c.so
STAGES=" ${*:-all} "
[ "$STAGES" = " all " ] && STAGES=" tests sanitize cli placement peers window "
want() { [[ "$STAGES" == *" $1 "* ]]; }
if want tests; then
echo "== GPU tests"
.devcarry/test_gpu --gtest_filter="${TEST_FILTER:-*}" > "$OUT/gpu_tests.log" 2>&1; echo "rc=$?"
grep -E '^\[  (PASSED|FAILED)|FAILED|Failure' "$OUT/gpu_tests.log" | head -20
grep -E 'compiled .* in' "$OUT/gpu_tests.log" | sed 's/.*compiled //' | sort -t' ' -k1,1 | awk '{print}' > "$OUT/cold_compiles.txt"
fi
want sanitize && for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 .devcarry/test_gpu \
    --gtest_filter='CudaRope.SanitizerSubset:CudaForward.FullyMaskedRowsAndQOffset' > "$OUT/sanitizer_$tool.log" 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | head -2 | tr '\n' ' ')"
done
if want cli; then
echo "== the make demo job on the GPU"
prog='softmax(causal(rope(Q, K, base=500000))) @ V'
{ .devcarry/attnfuse run "$prog" --shape 1,32,8,1024,1024,128 --dtype bf16 --device auto --check
  .devcarry/attnfuse bench "$prog" --shape 1,32,8,1024,1024,128 --dtype bf16 --device auto
  .devcarry/attnfuse run 'softmax(causal(rope_window(Q, K, k=1, base=500000))) @ V' --shape 1,8,2,700,700,128 \
    --dtype bf16 --device cuda --rope-mode fused --check
} > "$OUT/cli_rope_gpu.log" 2>&1; echo "cli rc=$?"; grep -E "PASS|FAIL|fused  " "$OUT/cli_rope_gpu.log"
fi
for suite in placement peers window; do
  want $suite || continue
  echo "== $suite"
  filter=$([ "$suite" = window ] && echo "${WINDOW_FILTER:-}" || true)
  timeout ${BENCH_TIMEOUT:-400} python3 bench/gpu_rope.py --lib $L --cli .devcarry/attnfuse --suite "$suite" --filter "$filter" \
    --out "$OUT/rope_$suite.json" 2>&1 \
    | grep -v Warning > "$OUT/rope_$suite.log"
  grep -E "speedup|INVALID|rror" "$OUT/rope_$suite.log" | head -20
done
