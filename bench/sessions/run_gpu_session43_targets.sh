#!/usr/bin/env bash
# Forty-third session: the open targets of issues 4 and 5 measured again on the landed tree (the
# H200 figures are from the twenty-fifth and thirty-sixth sessions). Carry .devcarry with the
# landed library: bash bench/make_device_carry.sh (or, over the forty-first session's carry,
# cmake --build build-dev --target attnfuse_c at HEAD and strip it into .devcarry/lib/).
#   1. gpu_decode.py --suite all with the peers: decode against SDPA-cuDNN / flash / flex as TB/s,
#      paged against contiguous, BigBird against flex, documents;
#   2. gpu_rope.py --suite window: rope_window on / off against the 2/(1+s) ceiling, to 128k.
# CAP bounds the whole (default 570 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-570}
say "== 1. gpu_decode.py --suite all"
peer_sweep all all "$(left 330)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. gpu_rope.py --suite window (to 128k)"
window_sweep "$(left 230)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
