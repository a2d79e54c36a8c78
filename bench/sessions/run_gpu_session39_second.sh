#!/usr/bin/env bash
# Thirty-ninth session, the second device call (after run_gpu_rope_decode_tma.sh on the same
# carry: .devcarry/attnfuse and lib/libattnfuse_c.so with bench/experiments/rope_decode_tma.patch
# applied, .devcarry/old/attnfuse without it). Each step bounded by CAP:
#   1. bench/sessions/run_gpu_decode_rope_modes.sh: plain, fused, prerotated and auto RoPE decode (CLI=...
#      picks which build; the patched one by default);
#   2. bench/gpu_rope.py --suite peers: fused RoPE prefill against the peers with a compiled
#      pre-rotation (the patch does not touch prefill), to refresh the README's fused column;
#   3. if time is left: bench/gpu_decode.py --suite decode against SDPA-cuDNN.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-570}
L=.devcarry/lib/libattnfuse_c.so
say "== 1. RoPE placement in decode calls (CLI ${CLI:-.devcarry/attnfuse})"
OUT=$W/modes CAP=$(left 170) bash bench/sessions/run_gpu_decode_rope_modes.sh 2>&1 | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. gpu_rope.py --suite peers"
timeout "$(left 150)" python3 bench/gpu_rope.py --lib $L --cli .devcarry/attnfuse --suite peers \
  --out "$W/rope_peers.json" 2>&1 | grep -v Warning > "$W/rope_peers.log"
grep -E "attnfuse_rope_auto|x[0-9]" "$W/rope_peers.log" | head -60 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. gpu_decode.py --suite decode against SDPA-cuDNN"
[ "$(left 200)" -gt 60 ] && timeout "$(left 200)" python3 bench/gpu_decode.py --lib $L --suite decode \
  --peers sdpa_cudnn --out "$W/decode" > "$W/decode.log" 2>&1
grep -E "^[a-z0-9].*(attnfuse|cudnn)" "$W/decode.log" | head -40 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "end in ${SECONDS}s"
