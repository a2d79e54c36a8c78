#!/usr/bin/env bash
# Forty-sixth session, first call (carry .devcarry from bench/make_device_carry.sh at HEAD):
#   1. the whole GPU suite on the landed tree (8 shards): the paged-vs-contiguous comparison's
#      rounding tolerance and the bias-row helper (2294fb9) had not run on a GPU;
#   2. gpu_decode.py --suite all with the peers (decode, paged, BigBird, documents with the
#      ragged varlen split rule), then the documents suite again with equal varlen lengths.
# CAP bounds the whole (default 580 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-580}
say "== 1. the GPU suite, 8 shards"
gpu_suite_sharded "$(left 300)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. gpu_decode.py --suite all"
peer_sweep all all "$(left 200)"
say "== 3. gpu_decode.py --suite documents --varlen-lengths uniform"
timeout "$(left 60)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite documents \
  --varlen-lengths uniform --out "$W/documents_uniform" > "$W/documents_uniform.log" 2>&1
say "rc=$?"
grep -E 'attnfuse|flash|flex|done in' "$W/documents_uniform.log" | cut -c1-150 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
