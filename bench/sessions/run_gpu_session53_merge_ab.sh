#!/usr/bin/env bash
# Fifty-third session, calls 3 and 4: merge_states kernel variants, one process each through
# ATTNFUSE_KERNEL_DIR (carry .devcarry with .devcarry/merge_variants/<name>/, copies of the kernel
# templates made locally, VARIANTS names them). Two interleaved rounds of bench/gpu_merge_states.py
# --ours-only (validated first), then the committed kernel's CudaMergeStates.* tests and one run
# with the peers. CAP bounds the whole (default 240 s).
#   call 3 (d51f23d, one warp per row): base = the first kernel (no prefetch, 7bfb319), pN = the
#     first O chunk of N states loaded with the LSEs, bM = __launch_bounds__(128, M);
#   call 4 (e215e7b, a thread per chunk): bN = N states' loads in a batch, mM = __launch_bounds__(256, M);
#   call 5 (VARIANTS='committed chunk4 b4 committed'): chunks of 8 elements against 4, and 4 states'
#     loads in a batch against 2; memcheck on the merge tests.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-240}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
VARIANTS=${VARIANTS:-b4 b2 b8 b2m8}
for round in 1 2; do
  for v in $VARIANTS; do
    # committed: the carried kernels; chunk4: those with ATTNFUSE_CUDA_MERGE_CHUNK=4; else a variant dir.
    case $v in
      committed) knobs=() ;;
      chunk4) knobs=(ATTNFUSE_CUDA_MERGE_CHUNK=4) ;;
      *) knobs=(ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/merge_variants/$v) ;;
    esac
    env "${knobs[@]}" timeout "$(left 40)" python3 bench/gpu_merge_states.py \
      --lib .devcarry/lib/libattnfuse_c.so --ours-only > "$W/ab_${v}_r$round.log" 2>&1
    say "r$round $v rc=$? $(grep -E '^(cascade|16|64)' "$W/ab_${v}_r$round.log" | sed -E 's/ +([0-9.]+ MB): attnfuse ([0-9.]+ us).*/: \2/' | tr '\n' ';')"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== the committed kernel: CudaMergeStates.*"
gpu_tests merge 'CudaMergeStates.*' "$(left 60)"
if [ -n "${MEMCHECK:-}" ]; then
  memcheck_tests merge_memcheck 'CudaMergeStates.*' "$(left 60)"
fi
say "== with the peers"
timeout "$(left 90)" python3 bench/gpu_merge_states.py --lib .devcarry/lib/libattnfuse_c.so \
  --json "$OUT/merge_states.json" > "$W/merge_bench.log" 2>&1
say "rc=$?"
grep -E '^(#|cascade|16|64)' "$W/merge_bench.log" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
