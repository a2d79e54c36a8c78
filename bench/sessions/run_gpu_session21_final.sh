#!/usr/bin/env bash
# The twenty-first session's last device call, on the final build (.devcarry: the vectorised
# split merge and the key-warp merge spread over the decode tile's warps) against the build at
# 0ef1796 (.devcarry-base, without the key-warp change):
#   1. the whole GPU suite in four shards;
#   2. bench/gpu_decode.py --suite all (decode with the peers in the same process, paged,
#      BigBird, documents);
#   3. decode A/B, final against base, two rounds.
# CAP bounds the whole (default 450 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-450}
say "== 1. GPU suite"
gpu_suite_sharded "$(left 250)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. all suites with the peers"
peer_sweep all all "$(left 110)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. decode A/B, final vs base"
OUT=$W/ab QUICK=0 ROUNDS=2 timeout "$(left 90)" bash bench/run_gpu_decode_ab.sh final=.devcarry \
  base=.devcarry-base > "$W/decode_ab_summary.txt" 2>&1
cut -c1-170 "$W/decode_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
