#!/usr/bin/env bash
# Forty-fourth session, in two calls (carry .devcarry from bench/make_device_carry.sh at HEAD):
#   PART=suite   the whole GPU suite on the landed tree (8 shards), then gpu_rope.py --suite window
#                to 128k: rope_window on / off against its 2/(1+s) ceiling;
#   PART=decode  gpu_decode.py --suite all with the peers: decode against SDPA-cuDNN / flash / flex
#                as TB/s, paged against contiguous, BigBird against flex, documents.
# CAP bounds the whole (default 570 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-570}
case "${PART:-suite}" in
  suite)
    say "== 1. the GPU suite, 8 shards"
    gpu_suite_sharded "$(left 280)" 8
    tar czf "$OUT/logs.tgz" -C "$W" .
    say "== 2. gpu_rope.py --suite window (to 128k)"
    window_sweep "$(left 290)"
    ;;
  decode)
    say "== gpu_decode.py --suite all"
    peer_sweep all all "$(left 560)"
    ;;
esac
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
