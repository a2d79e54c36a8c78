#!/usr/bin/env bash
# The eighteenth session's fifth device call: bench/gpu_rope.py --suite peers at the final tile
# rule (the README's RoPE table). CAP bounds it (default 170 s). Digest $OUT/digest.txt, log and
# JSON in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-170}
timeout "$(left 165)" python3 bench/gpu_rope.py --lib .devcarry/lib/libattnfuse_c.so --cli .devcarry/attnfuse \
  --suite peers --out "$W/rope_peers.json" 2>&1 | grep -v Warning > "$W/rope_peers.log"
grep -E "rope_auto|\+rot" "$W/rope_peers.log" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
