#!/usr/bin/env bash
# Fifty-third session, calls 3 and 4: merge_states kernel variants, one process each through
# ATTNFUSE_KERNEL_DIR (carry .devcarry with .devcarry/merge_variants/<name>/, copies of the kernel
# templates made locally, VARIANTS names them). Two interleaved rounds of bench/gpu_merge_states.py
# --ours-only (validated first), then the committed kernel's CudaMergeStates.* tests and one run
# with the peers. CAP bounds the whole (default 240 s).
#   call 3 (d51f23d, one warp per row): base = the first kernel (no prefetch, 7bfb319), pN = the
#     first O chunk of N states loaded with the LSEs, bM = __launch_bounds__(128, M);
#   call 4 (e215e7b, a thread per chunk): bN = N states' loads in a batch, mM = __launch_bounds__(256, M).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-240}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
VARIANTS=${VARIANTS:-b4 b2 b8 b2m8}
for round in 1 2; do
  for v in $VARIANTS; do
    ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/merge_variants/$v timeout "$(left 40)" python3 bench/gpu_merge_states.py \
      --lib .devcarry/lib/libattnfuse_c.so --ours-only > "$W/ab_${v}_r$round.log" 2>&1
    say "r$round $v rc=$? $(grep -E '^(cascade|16|64)' "$W/ab_${v}_r$round.log" | sed -E 's/ +([0-9.]+ MB): attnfuse ([0-9.]+ us).*/: \2/' | tr '\n' ';')"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== the committed kernel: CudaMergeStates.*"
gpu_tests merge 'CudaMergeStates.*' "$(left 60)"
say "== with the peers"
timeout "$(left 90)" python3 bench/gpu_merge_states.py --lib .devcarry/lib/libattnfuse_c.so \
  --json "$OUT/merge_states.json" > "$W/merge_bench.log" 2>&1
say "rc=$?"
grep -E '^(#|cascade|16|64)' "$W/merge_bench.log" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
