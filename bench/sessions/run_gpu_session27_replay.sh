#!/usr/bin/env bash
# Session 27, last device call, on the final tree's build (identical libattnfuse_c.so to cafcb5e;
# bash bench/make_device_carry.sh, carry .devcarry), two test runs at once:
#   1. CudaDecode.DtypesAndHeadDims replayed with the seed that failed in call4
#      (ATTNFUSE_TEST_SEED=4447857088062076409) and once with a fresh seed;
#   2. CudaSparse.Documents* (documents by TMA in the wgmma tile).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
ATTNFUSE_TEST_SEED=4447857088062076409 ATTNFUSE_CACHE_DIR=/tmp/c1 timeout 150 .devcarry/test_gpu \
  --gtest_filter='CudaDecode.DtypesAndHeadDims' > "$W/replay.log" 2>&1 &
ATTNFUSE_CACHE_DIR=/tmp/c2 timeout 150 .devcarry/test_gpu --gtest_filter='CudaSparse.Documents*' > "$W/docs.log" 2>&1 &
ATTNFUSE_CACHE_DIR=/tmp/c3 timeout 150 .devcarry/test_gpu --gtest_filter='CudaDecode.DtypesAndHeadDims' > "$W/fresh.log" 2>&1 &
wait
for f in replay fresh docs; do
  say "$f: $(grep -E '^\[  (PASSED|FAILED)' "$W/$f.log" | tr '\n' ' ')"
  grep -E 'seed|max abs error' "$W/$f.log" | sort | uniq -c | head -8 >> "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
