#!/usr/bin/env bash
# The eighteenth session's second device call, at the 192-row rule (passes::cuda_wgmma_192_rows:
# D = 64 plain scores, no mask or causal, contiguous caches):
#   1. the whole GPU test suite, in four shards at once (gpu_suite_sharded, device_env.sh);
#   2. bench/gpu_peers.py --suite full (the README's CUDA table);
#   3. bench/gpu_rope.py --suite peers (the README's RoPE table).
# CAP bounds the whole (default 540 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-540}
L=.devcarry/lib/libattnfuse_c.so

say "== 1. test_gpu, 4 shards"
gpu_suite_sharded "$(left 320)"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 2. gpu_peers.py --suite full"
timeout "$(left 110)" python3 bench/gpu_peers.py --lib $L --suite full --out "$W/peers_full.json" 2>&1 \
  | grep -v Warning > "$W/peers_full.log"
tail -25 "$W/peers_full.log" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 3. gpu_rope.py --suite peers"
timeout "$(left 130)" python3 bench/gpu_rope.py --lib $L --cli .devcarry/attnfuse --suite peers \
  --out "$W/rope_peers.json" 2>&1 | grep -v Warning > "$W/rope_peers.log"
grep -E "rope_auto|\+rot" "$W/rope_peers.log" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
