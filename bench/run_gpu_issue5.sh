#!/usr/bin/env bash
# One device call for decoding and sparsity (issue 5): the GPU suite, compute-sanitizer on the
# decode / sparse subsets, CLI checks of every new path against the float64 reference, and the
# decode / paged / BigBird / documents benchmarks, every log under $OUT. Expects .devcarry/ from
# bench/make_device_carry.sh. Usage on the device: bench/run_gpu_issue5.sh [tests] [sanitize] [smoke] [bench] [quick]
# Env: TEST_FILTER (gtest filter), SANITIZE_FILTER (the sanitizer runs' gtest filter), SANITIZER_TOOLS ("memcheck racecheck"), SANITIZER_TIMEOUT and
# BENCH_TIMEOUT (seconds), so one device call (10 minutes) can hold a chosen subset.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
want() { [[ " ${STAGES} " == *" $1 "* ]]; }
STAGES=" ${*:-tests sanitize smoke bench} "
A=.devcarry/attnfuse

if want tests; then
  echo "== GPU tests"
  .devcarry/test_gpu --gtest_filter="${TEST_FILTER:-*}" > "$OUT/gpu_tests.log" 2>&1; echo "rc=$?"
  grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' "$OUT/gpu_tests.log" | head -30
  grep -E 'compiled .* in' "$OUT/gpu_tests.log" | sed 's/.*compiled //' > "$OUT/cold_compiles.txt"
fi
# Small cases of every new path: splits with empty rows, paged with q_offset, documents with
# int64 per-batch offsets, block-sparse from a classifier and in decode, plus the RoPE subset.
SANITIZE=${SANITIZE_FILTER:-'CudaRope.SanitizerSubset:CudaDecode.SanitizerSubset:CudaDecode.RowsThatKeepNothing:CudaDecode.PagedExplicitQOffsetAppliesToEverySequence:CudaSparse.DocumentsPerBatchAndInt64Offsets:CudaSparse.BlockSparseFromClassifier:CudaSparse.BlockSparseDecode:CudaDecode.InKernelMergeMatchesTheCombineKernelCallAfterCall'}
if want sanitize; then
  for tool in ${SANITIZER_TOOLS:-memcheck racecheck}; do
    timeout ${SANITIZER_TIMEOUT:-600} compute-sanitizer --tool $tool --error-exitcode 9 .devcarry/test_gpu \
      --gtest_filter="$SANITIZE" > "$OUT/sanitizer_$tool.log" 2>&1
    echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | head -2 | tr '\n' ' ')"
  done
fi

if want smoke; then
  echo "== CLI checks against the float64 reference"
  python3 - "$OUT/npy" <<'PY'
import numpy as np, sys, os
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
np.save(f"{d}/cq.npy", np.array([0, 100, 100, 357, 800], dtype=np.int32))
np.save(f"{d}/ck.npy", np.array([0, 130, 200, 457, 900], dtype=np.int32))
rng = np.random.default_rng(1)
g = (rng.random((8, 8)) < 0.3).astype(np.uint8); g[:, 0] = 1; g[3, :] = 0
np.save(f"{d}/grid.npy", g)
PY
  N="$OUT/npy"
  {
    c() { echo "-- $*"; "$A" run "$@" --device cuda --check 2>&1 | grep -E "PASS|FAIL|error|cuda launch|attnfuse:"; }
    c 'softmax(causal(scaled_dot_product(Q, K))) @ V' --shape 1,32,8,1,32768,128 --dtype bf16
    c 'softmax(causal(scaled_dot_product(Q, K))) @ V' --shape 2,64,8,3,5000,128 --dtype bf16
    c 'softmax(alibi(sliding_window(causal(rope(Q, K, base=500000)), 700))) @ V' --shape 2,32,8,4,9001,128 --dtype bf16
    c 'softmax(softcap(causal(rope_window(Q, K, k=1, base=500000)), 30)) @ V' --shape 1,24,8,1,20000,128 --dtype bf16
    c 'relu_attention(causal(scaled_dot_product(Q, K))) @ V' --shape 1,8,2,16,3000,64 --dtype fp16
    c 'softmax(additive_bias(scaled_dot_product(Q, K))) @ V' --shape 1,8,4,2,999,96 --dtype bf16
    c 'softmax(causal(scaled_dot_product(Q, K))) @ V' --shape 1,16,4,1,777,256 --dtype bf16
    c 'softmax(causal(scaled_dot_product(Q, K))) @ V' --shape 3,32,8,1,5000,128 --dtype bf16 --page-size 16
    c 'softmax(causal(rope(Q, K))) @ V' --shape 2,8,2,100,3000,128 --dtype bf16 --page-size 64
    c 'softmax(causal(scaled_dot_product(Q, K))) @ V' --shape 2,8,8,300,1000,64 --dtype fp16 --page-size 1
    c 'softmax(document(causal(scaled_dot_product(Q, K)))) @ V' --shape 1,8,2,800,900,128 --dtype bf16 \
      --cu-seqlens-q "$N/cq.npy" --cu-seqlens-k "$N/ck.npy"
    c 'softmax(sliding_window(document(causal(rope(Q, K))), 64)) @ V' --shape 1,8,2,800,900,64 --dtype bf16 \
      --cu-seqlens-q "$N/cq.npy" --cu-seqlens-k "$N/ck.npy"
    c 'softmax(block_sparse(scaled_dot_product(Q, K))) @ V' --shape 2,4,2,1000,1000,64 --dtype bf16 \
      --block-mask "$N/grid.npy" --block-size 128,128
    c 'softmax(block_sparse(alibi(causal(scaled_dot_product(Q, K))))) @ V' --shape 1,4,4,1000,1000,128 --dtype fp16 \
      --block-mask "$N/grid.npy" --block-size 128,128
    c 'softmax(block_sparse(causal(scaled_dot_product(Q, K)))) @ V' --shape 1,8,2,1,1000,128 --dtype bf16 \
      --block-mask "$N/grid.npy" --block-size 128,128
  } > "$OUT/cli_checks.log" 2>&1
  echo "PASS $(grep -c PASS "$OUT/cli_checks.log")  FAIL $(grep -c FAIL "$OUT/cli_checks.log")"
  grep -B2 -E "FAIL|error" "$OUT/cli_checks.log" | head -30
  echo "== CLI decode timings"
  for s in 1,32,8,1,4096,128 1,32,8,1,32768,128 1,32,8,1,131072,128 8,32,8,1,32768,128 32,32,8,1,32768,128 1,64,8,1,32768,128; do
    "$A" bench 'softmax(causal(scaled_dot_product(Q, K))) @ V' --shape $s --dtype bf16 --device cuda 2>&1 \
      | grep -E "cuda launch|median|ms" | head -3 | sed "s/^/$s /"
  done > "$OUT/cli_decode_bench.log" 2>&1
  cat "$OUT/cli_decode_bench.log"
fi

if want bench && [ -f bench/gpu_decode.py ]; then
  echo "== decode / paged / BigBird / documents against peers"
  Q=""; want quick && Q="--quick"
  timeout ${BENCH_TIMEOUT:-3000} python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --out "$OUT" $Q \
    > "$OUT/gpu_decode.log" 2>&1
  echo "rc=$?"; grep -E "attnfuse|sdpa|flex|overhead|density|construction" "$OUT/gpu_decode.log" | cut -c1-150 | tail -70
fi
