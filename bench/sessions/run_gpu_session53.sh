#!/usr/bin/env bash
# Fifty-third session, call 2 (carry .devcarry from bench/make_device_carry.sh at HEAD): merge_states
# on CUDA, first run on a GPU.
#   1. CudaMergeStates.* (the CPU merge's results, two levels, the 1024-state cap, a prefix/suffix
#      cascade against the float64 reference), then the same under compute-sanitizer memcheck;
#   2. bench/gpu_merge_states.py: ours against the merge in PyTorch, eager and compiled, and a copy
#      of the same bytes (validated first);
#   3. the GPU suite's decode and sparse tests (params.cuh gained the merge structs, so every module
#      recompiles), as time allows.
# CAP bounds the whole (default 330 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-330}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
say "== 1. CudaMergeStates.*"
gpu_tests merge 'CudaMergeStates.*' "$(left 120)"
memcheck_tests merge_memcheck 'CudaMergeStates.*' "$(left 90)"
say "== 2. gpu_merge_states.py"
timeout "$(left 120)" python3 bench/gpu_merge_states.py --lib .devcarry/lib/libattnfuse_c.so \
  --json "$OUT/merge_states.json" > "$W/merge_bench.log" 2>&1
say "rc=$?"
cat "$W/merge_bench.log" | grep -v '^W' | tail -8 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
if [ "$(left 999)" -ge 100 ]; then
  say "== 3. CudaDecode.* and CudaSparse.*, 8 shards"
  export GTEST_FILTER='CudaDecode.*:CudaSparse.*'
  gpu_suite_sharded "$(left 999)" 8
  unset GTEST_FILTER
  tar czf "$OUT/logs.tgz" -C "$W" .
fi
say "done in ${SECONDS}s"
