#!/usr/bin/env bash
# The twenty-ninth session's third device call (carry .devcarry and .devcarry-base as for the
# first): the row-group skipping loop as its own module (TileConfig::skip_row_groups), taken
# per call only for masks with such blocks.
#   1. the whole GPU suite on the new build, 8 shards;
#   2. BigBird, ours only, base (HEAD) against new, two interleaved rounds;
#   3. gpu_decode.py --suite bigbird with the peers.
# CAP bounds the whole (default 540 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-540}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 250)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. BigBird base / new, ours only"
suite_ab bigbird 'bigbird' 60
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. gpu_decode.py --suite bigbird with the peers"
peer_sweep bigbird_peers bigbird "$(left 120)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
