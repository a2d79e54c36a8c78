#!/usr/bin/env bash
# A session's first device call on the current tree (written in the twenty-sixth session, run
# as session 27's call1; build here: bash bench/make_device_carry.sh; carry .devcarry):
#   1. the whole GPU suite, 8 shards;
#   2. gpu_decode.py --suite all with the peers (the README's decode, paged, BigBird and
#      documents figures);
#   3. the phase probe at 70B B1 / 32k, contiguous and paged.
# CAP bounds the whole (default 540 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-540}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 240)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. gpu_decode.py --suite all"
peer_sweep all all "$(left 110)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. phases at 70B B1 / 32k"
CELLS=1,64,8,32768 PDLS=1 decode_phases "$(left 150)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
