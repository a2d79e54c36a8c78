#!/usr/bin/env bash
# The twenty-first session's last device call, cut to the device time that was left (~420 s with
# the machine's start): on the final build (.devcarry, e55874e's tree)
#   1. the whole GPU suite in eight shards at once (the tests are bound by NVRTC on the host's 16
#      cores);
#   2. bench/gpu_decode.py --suite decode (the decode cells with the peers in the same process).
# CAP bounds the whole (default 290 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-290}
say "== 1. GPU suite, 8 shards"
gpu_suite_sharded "$(left 185)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode with the peers"
peer_sweep decode decode "$(left 100)"
tar czf "$OUT/logs.tgz" -C "$W" .
