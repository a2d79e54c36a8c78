#!/usr/bin/env bash
# Forty-ninth session, for an H200 (carry .devcarry from bench/make_device_carry.sh at HEAD; the
# whole GPU suite passed on this build on an H100, call1):
#   1. gpu_decode.py --suite all with the peers (decode, paged, BigBird, documents with the ragged
#      varlen split rule, which has never run on an H200);
#   2. with what is left: gpu_rope.py --suite window up to 32k (rope_window on vs off).
# CAP bounds the whole (default 450 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-450}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
say "== 1. gpu_decode.py --suite all with the peers"
peer_sweep all all "$(left 330)"
tar czf "$OUT/logs.tgz" -C "$W" .
if [ "$(left 999)" -ge 90 ]; then
  say "== 2. gpu_rope.py --suite window up to 32k"
  window_sweep "$(left 200)" 32768
  tar czf "$OUT/logs.tgz" -C "$W" .
fi
say "done in ${SECONDS}s"
