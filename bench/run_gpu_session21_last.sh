#!/usr/bin/env bash
# The twenty-first session's last device call, cut to the device time that was left (~420 s with
# the machine's start): on the final build (.devcarry, e55874e's tree)
#   1. the whole GPU suite in eight shards at once (the tests are bound by NVRTC on the host's 16
#      cores);
#   2. bench/gpu_decode.py --suite decode (the decode cells with the peers in the same process).
# CAP bounds the whole (default 290 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-290}
say "== 1. GPU suite, 8 shards"
lim=$(left 185)
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-shard$i \
    timeout "$lim" .devcarry/test_gpu > "$W/tests_shard$i.log" 2>&1 &
done
wait
for i in 0 1 2 3 4 5 6 7; do
  say "shard $i: $(grep -E '^\[  (PASSED|FAILED)' "$W/tests_shard$i.log" | tr '\n' ' ') $(grep -c '^\[       OK' "$W/tests_shard$i.log") ok"
  grep -E '^\[  FAILED|Failure|Expected|Which is' "$W/tests_shard$i.log" | head -10 >> "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode with the peers"
timeout "$(left 100)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite decode \
  --out "$W/decode" > "$W/decode.log" 2>&1
say "rc=$?"
grep -E 'attnfuse|cudnn|flex|flash|done in' "$W/decode.log" | cut -c1-150 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
