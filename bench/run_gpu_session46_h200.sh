#!/usr/bin/env bash
# Forty-sixth session, a short peer run for whatever card comes (meant for an H200, which had not
# come since the thirty-third session): gpu_decode.py --suite decode, paged and documents (the
# ragged varlen split rule), then the additive-bias case against cuDNN. Carry .devcarry from
# bench/make_device_carry.sh at HEAD. CAP bounds the whole (default 150 s).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-150}
for suite in decode paged documents; do
  say "== gpu_decode.py --suite $suite"
  peer_sweep "$suite" "$suite" "$(left 60)"
done
say "== additive bias with the peers"
timeout "$(left 40)" python3 bench/gpu_peers.py --lib .devcarry/lib/libattnfuse_c.so --suite full \
  --filter "additive bias" > "$W/bias_peers.log" 2>&1
say "rc=$?"; grep -E 'additive bias' "$W/bias_peers.log" | cut -c1-160 | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
