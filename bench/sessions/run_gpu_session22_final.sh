#!/usr/bin/env bash
# Twenty-second session, final call on the committed tree (build here: bash
# bench/make_device_carry.sh; carry .devcarry): the paged small-pages producer rule and the
# rope_window loop that leaves the P V product running under the softmax.
#   1. the whole GPU suite, 8 shards;
#   2. gpu_decode.py --suite paged (paged against contiguous, ours);
#   3. gpu_rope.py --suite window up to 32k (rope_window on vs off).
# CAP bounds the whole (default 430 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-430}
say "== 1. GPU suite, 8 shards"
gpu_suite_sharded "$(left 240)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
[ "${SUITE_ONLY:-0}" = 1 ] && exit 0  # (when device time is short: steps 2-3 repeat call1 / call2's figures)
say "== 2. paged against contiguous"
peer_sweep paged paged "$(left 100)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. rope_window on vs off (N <= 32k)"
timeout "$(left 80)" python3 bench/gpu_rope.py --lib .devcarry/lib/libattnfuse_c.so --cli .devcarry/attnfuse \
  --suite window --max-n 32768 --out "$W/window.json" > "$W/window.log" 2>&1
say "rc=$?"
grep -E "attnfuse_rope|speedup" "$W/window.log" | cut -c1-160 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
