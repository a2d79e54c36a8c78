#!/usr/bin/env bash
# Fifty-third session, call 3: merge_states kernel variants, one process each through
# ATTNFUSE_KERNEL_DIR (carry .devcarry with .devcarry/merge_variants/<name>/, copies of the kernel
# templates made locally): base = the first kernel (no prefetch, 7bfb319), pN = the first O chunk of
# N states loaded with the LSEs, bM = __launch_bounds__(128, M). Two interleaved rounds of
# bench/gpu_merge_states.py --ours-only (validated first), then the committed kernel's
# CudaMergeStates.* tests and one run with the peers. CAP bounds the whole (default 240 s).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-240}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
VARIANTS=${VARIANTS:-base p4 p2 p8 p4b10 p2b12}
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
