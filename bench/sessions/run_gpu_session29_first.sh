#!/usr/bin/env bash
# The twenty-ninth session's first device call (build here: the base library from HEAD into
# .devcarry-base/lib, then bash bench/make_device_carry.sh; carry .devcarry and .devcarry-base):
#   1. the whole GPU suite on the new build, 8 shards (with
#      CudaSparse.BlockSparseRowGroupsSkipTheBlocksTheyDoNotKeep);
#   2. BigBird, ours only, base against new, two interleaved rounds (64- and 128-blocks);
#   3. gpu_decode.py --suite bigbird with the peers (flex on the 64-block grid with 64-row
#      kernel tiles, and on the same cells in its 128-blocks).
# CAP bounds the whole (default 540 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
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
