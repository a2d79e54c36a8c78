#!/usr/bin/env bash
# The thirty-second session's second device call, on the first call's build (carry .devcarry):
# gpu_decode.py --suite all with the peers (decode against SDPA-cuDNN / flash / flex, paged
# against contiguous, BigBird and documents against flex and FA2 varlen).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-400}
say "== gpu_decode.py --suite all with the peers (32f build)"
peer_sweep all all 380
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
