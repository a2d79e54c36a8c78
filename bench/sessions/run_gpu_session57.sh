#!/usr/bin/env bash
# Fifty-seventh session, on any card (the card goes to the digest). Carry .devcarry from
# bench/make_device_carry.sh.
# PARTS picks, in order (default "ab merge tests"):
#   ab:    gpu_decode.py --suite decode and --suite paged, ours only, ATTNFUSE_CUDA_EARLY_L2 16 / 1 / 0
#          (every stage hinted, the first tile only, none), two interleaved rounds: on the H200 the
#          every-stage hints read level to 1% slower (call1/), on H100s 1.4-4.7% faster;
#   abd:   the same, --suite decode only;
#   merge: gpu_merge_states.py --graph, ours only, the 16-bit states' entry (now the default) against
#          ATTNFUSE_CUDA_MERGE_HALF=0, two interleaved rounds; then with the peers, graphed;
#   tests: CudaDecode.* and CudaMergeStates.* (the hints' tile count and the 16-bit entry by default).
# CAP bounds the whole (default 570 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-570}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
merge_run() {  # name, round [env...]
  local name=$1 round=$2
  shift 2
  env "$@" timeout "$(left 40)" python3 bench/gpu_merge_states.py --lib .devcarry/lib/libattnfuse_c.so --ours-only \
    --graph > "$W/merge_${name}_r$round.log" 2>&1
  say "r$round $name rc=$? $(grep -E '^(cascade|16|64)' "$W/merge_${name}_r$round.log" |
    sed -E 's/ +([0-9.]+ MB): attnfuse ([0-9.]+ us).*/: \2/' | tr '\n' ';')"
}
for part in ${PARTS:-ab merge tests}; do
  case $part in
    ab | abd)
      say "== $part: ATTNFUSE_CUDA_EARLY_L2 16 / 1 / 0"
      knob_ab ATTNFUSE_CUDA_EARLY_L2 "16 1 0" decode 60
      [ $part = ab ] && knob_ab ATTNFUSE_CUDA_EARLY_L2 "16 1 0" paged 30
      ;;
    merge)
      say "== merge: the 16-bit entry (default) / ATTNFUSE_CUDA_MERGE_HALF=0, graphed, ours only"
      for round in 1 2; do
        merge_run half "$round"
        merge_run full "$round" ATTNFUSE_CUDA_MERGE_HALF=0
      done
      say "== the merge with the peers, graphed"
      timeout "$(left 90)" python3 bench/gpu_merge_states.py --lib .devcarry/lib/libattnfuse_c.so --graph \
        --json "$OUT/merge_states_graphed.json" > "$W/merge_bench_graphed.log" 2>&1
      say "rc=$?"
      grep -E '^(#|cascade|16|64|Traceback|[A-Za-z]*Error)' "$W/merge_bench_graphed.log" >> "$D"
      ;;
    tests)
      say "== tests: CudaDecode.* and CudaMergeStates.*"
      gpu_tests decode_merge 'CudaDecode.*:CudaMergeStates.*' "$(left 300)"
      ;;
  esac
  tar czf "$OUT/logs.tgz" -C "$W" .
done
say "done in ${SECONDS}s"
