#!/usr/bin/env bash
# Prepared in the thirty-fifth session (2026-12-05, no device lent), for the next session's first
# device call, on the carried build of the tree (bash bench/make_device_carry.sh; carry .devcarry):
#   1. the custom ALiBi slopes on CUDA, new that day and never run on a GPU:
#      CudaForward.CustomAlibiSlopes alone, and under compute-sanitizer memcheck at the same time
#      (the GQA-packed decode tile's padding rows read slopes past the last head, which
#      runtime/device_slopes pads for: memcheck is what shows the reads stay inside the copy);
#   2. the whole GPU suite in 8 shards (~250 s cold), which includes the paged decode case with
#      custom slopes (CudaDecode.PagedEveryCombinator).
# Then, in a call of its own: bash bench/sessions/run_gpu_paged_tlb_warm.sh.
# CAP bounds the whole (default 580 s).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-580}
say "== 1. custom ALiBi slopes, and memcheck on them"
if command -v compute-sanitizer >/dev/null; then
  ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-memcheck timeout "$(left 200)" compute-sanitizer --tool memcheck \
    --error-exitcode 9 .devcarry/test_gpu --gtest_filter='CudaForward.CustomAlibiSlopes' > "$W/san_slopes.log" 2>&1 &
else
  say "no compute-sanitizer"
fi
gpu_tests slopes 'CudaForward.CustomAlibiSlopes' "$(left 180)"
wait
say "memcheck: $(grep -E '^\[  (PASSED|FAILED)|ERROR SUMMARY' "$W/san_slopes.log" 2>/dev/null | tr '\n' ' ')"
grep -E 'Invalid|Error' "$W/san_slopes.log" 2>/dev/null | head -5 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 540)" 8  # left N: at most N s, at most what CAP leaves
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
