#!/usr/bin/env bash
# The nineteenth session's second device call:
#   1. decode A/B: the block-wide split merge with its part loop unrolled (.devcarry) against
#      ab9be50 (.devcarry-base), every cell of the decode suite, two interleaved rounds;
#   2. bench/gpu_decode.py --suite all (decode with the peers, paged, BigBird, documents) on
#      ab9be50, the first sweep of those suites since the eighteenth session's per-row key ranges.
# CAP bounds the whole (default 400 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-400}
say "== 1. decode A/B"
OUT=$W/ab QUICK=0 ROUNDS=2 timeout "$(left 170)" bash bench/run_gpu_decode_ab.sh base=.devcarry-base new=.devcarry \
  > "$W/decode_ab_summary.txt" 2>&1
cut -c1-150 "$W/decode_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. all suites on ab9be50"
timeout "$(left 220)" python3 bench/gpu_decode.py --lib .devcarry-base/lib/libattnfuse_c.so --suite all \
  --out "$W/all" > "$W/all.log" 2>&1
say "rc=$?"
grep -E 'attnfuse|cudnn|flex|flash|done in' "$W/all.log" | cut -c1-140 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
