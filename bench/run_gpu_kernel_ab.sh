#!/usr/bin/env bash
# One device call that compares variants of the kernel templates without rebuilding the library:
# each variant is src/codegen/cuda/kernels/ with a patch applied (bench/experiments/*.patch,
# paths relative to the repo root), compiled through ATTNFUSE_KERNEL_DIR. For the embedded
# templates ("base") and each variant it runs, in that order:
#   - the GPU tests TEST_FILTER selects (skipped when empty), so a variant is checked before it
#     is timed;
#   - the benchmark BENCH names (a bench/*.py script and its suite arguments; --lib, --filter
#     FILTER and --out are added), skipped when BENCH is empty. Default: RoPE's window suite.
# Usage on the device (expects .devcarry/ from bench/make_device_carry.sh):
#   FILTER=overhead TEST_FILTER='CudaRope.RopeWindow*' \
#     bash bench/run_gpu_kernel_ab.sh bench/experiments/<a>.patch bench/experiments/<b>.patch
#   BENCH='bench/gpu_decode.py --suite bigbird --ours-only' TEST_FILTER='CudaSparse.*' \
#     bash bench/run_gpu_kernel_ab.sh bench/experiments/<c>.patch
# Logs: $OUT/ab_<variant>_{tests,bench}.log and the benchmark's output at $OUT/ab_<variant>_bench.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
L=.devcarry/lib/libattnfuse_c.so
BENCH=${BENCH-bench/gpu_rope.py --cli .devcarry/attnfuse --suite window} FILTER=${FILTER-} TEST_FILTER=${TEST_FILTER-}
run_variant() {  # name, kernel dir ("" = embedded)
  local name=$1 dir=$2
  echo "== $name"
  if [ -n "$TEST_FILTER" ]; then
    ATTNFUSE_KERNEL_DIR=$dir timeout ${TEST_TIMEOUT:-240} .devcarry/test_gpu --gtest_filter="$TEST_FILTER" \
      > "$OUT/ab_${name}_tests.log" 2>&1
    echo "tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/ab_${name}_tests.log" | tr '\n' ' ')"
  fi
  if [ -n "$BENCH" ]; then
    # shellcheck disable=SC2086  # BENCH is a script and its arguments
    ATTNFUSE_KERNEL_DIR=$dir timeout ${BENCH_TIMEOUT:-300} python3 $BENCH --lib $L --filter "$FILTER" \
      --out "$OUT/ab_${name}_bench" 2>&1 | grep -v Warning > "$OUT/ab_${name}_bench.log"
    grep -E "attnfuse|speedup|INVALID|rror" "$OUT/ab_${name}_bench.log" | head -30
  fi
}
[ -n "${SKIP_BASE:-}" ] || run_variant base ""  # SKIP_BASE=1: variants only (their benchmarks time plain rope in the same process)
for patch_file in "$@"; do
  name=$(basename "$patch_file" .patch)
  dir=$(mktemp -d)/kernels
  cp -r src/codegen/cuda/kernels "$dir"
  if ! patch -s -p5 -d "$dir" < "$patch_file"; then echo "== $name: the patch does not apply"; continue; fi
  run_variant "$name" "$dir"
done
