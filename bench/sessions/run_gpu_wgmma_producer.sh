#!/usr/bin/env bash
# One device call for the seventeenth session's two producer questions.
#   1. compute-sanitizer racecheck, with source lines (ATTNFUSE_NVRTC_LINEINFO=1), on the decode
#      subset with and without ATTNFUSE_CUDA_DECODE_PRODUCER=1 (session 17's first call had 6
#      hazards with it, reported as offsets only), and on small wgmma prefill calls with and
#      without ATTNFUSE_CUDA_WGMMA_PRODUCER=1: is the decode report the producer's own, or does
#      racecheck flag every TMA copy issued after an "empty" mbarrier wait?
#   2. The wgmma prefill with a producer warpgroup (setmaxnreg: 24 registers for it, 240 for
#      the computing warpgroups): GPU tests with the knob, then the CLI A/B against the built-in
#      tile (GPT-2 causal 32k / 8k, dense 8k; Llama-3-8B causal 8k / 32k), two rounds.
# Each step bounded by CAP (default 560 s in all). Digest $OUT/digest.txt, logs $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}  # left (device_env.sh) bounds each step by it
race() {  # name, filter, limit, env assignments...
  local name=$1 filter=$2 limit=$3; shift 3
  env ATTNFUSE_NVRTC_LINEINFO=1 "$@" timeout "$(left "$limit")" compute-sanitizer --tool racecheck \
    --error-exitcode 9 .devcarry/test_gpu --gtest_filter="$filter" > "$W/race_$name.log" 2>&1
  say "racecheck $name exit $?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$W/race_$name.log" | head -3 | tr '\n' ' ')"
  grep -E -A3 'Error: Race' "$W/race_$name.log" | grep -E 'Race|at .*\.cuh|in attnfuse' | sort | uniq -c | sort -rn | head -12 >> "$D"
}

say "== 1. racecheck with source lines"
race decode_base 'CudaDecode.SanitizerSubset' 80
race decode_producer 'CudaDecode.SanitizerSubset' 80 ATTNFUSE_CUDA_DECODE_PRODUCER=1
race wgmma_base 'CudaRope.SanitizerSubset' 80
race wgmma_producer 'CudaRope.SanitizerSubset' 80 ATTNFUSE_CUDA_WGMMA_PRODUCER=1
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 2. wgmma prefill with a producer warpgroup: tests"
ATTNFUSE_CUDA_WGMMA_PRODUCER=1 gpu_tests wgmma_tests \
  'CudaForward.*:CudaSparse.BlockSparseRandomGridsAndPartialBlocks:CudaRope.EveryFormInBothPlacements' "$(left 200)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. CLI A/B, base against the producer warpgroup"
OUT=$W/cli ROUNDS=2 timeout "$(left 240)" bash bench/run_gpu_cli_ab.sh base wgp=env:ATTNFUSE_CUDA_WGMMA_PRODUCER=1 2>&1 | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
