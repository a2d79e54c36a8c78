#!/usr/bin/env bash
# The thirty-second session's fourth device call, on the first call's build (carry .devcarry):
# compute-sanitizer memcheck, synccheck and racecheck, at once, on
# CudaDecode.PagedSettledTablesChainCallsOnOneStream (chains of dependent launches with settled
# tables: the producer warp's early lookup, the 128-key tile in boxes of 64 rows, the 64-key TMA
# tile, the cp.async module). CAP bounds the whole (default 560 s).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
command -v compute-sanitizer >/dev/null || { say "no compute-sanitizer"; exit 3; }
say "== compute-sanitizer on CudaDecode.PagedSettledTablesChainCallsOnOneStream"
for tool in memcheck synccheck racecheck; do
  ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$tool timeout "$(left 540)" compute-sanitizer --tool $tool --error-exitcode 9 \
    .devcarry/test_gpu --gtest_filter='CudaDecode.PagedSettledTablesChainCallsOnOneStream' > "$W/san_$tool.log" 2>&1 &
done
wait
for tool in memcheck synccheck racecheck; do
  say "$tool: $(grep -E '^\[  (PASSED|FAILED)|ERROR SUMMARY|RACECHECK SUMMARY' "$W/san_$tool.log" | tr '\n' ' ')"
  grep -E 'Error|Hazard|hazard' "$W/san_$tool.log" | head -5 >> "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
