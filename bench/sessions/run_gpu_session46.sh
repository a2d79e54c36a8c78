#!/usr/bin/env bash
# Forty-sixth session, first call (carry .devcarry from bench/make_device_carry.sh at HEAD, with
# the library before the bias-pair loads in .devcarry/base46/):
#   1. the whole GPU suite on the landed tree (8 shards): the paged-vs-contiguous comparison's
#      rounding tolerance, the bias-row helper (2294fb9) and the bias-pair loads had not run on a GPU;
#   2. additive bias (gpu_peers.py --suite full --filter "additive bias"), ours only, base against
#      new, two interleaved rounds; then with the peers;
#   3. gpu_decode.py --suite all with the peers (decode, paged, BigBird, documents with the
#      ragged varlen split rule), then the documents suite again with equal varlen lengths.
# CAP bounds the whole (default 580 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-580}
say "== 1. the GPU suite, 8 shards"
gpu_suite_sharded "$(left 290)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. additive bias, ours only, two rounds"
for round in 1 2; do
  for v in base new; do
    lib=.devcarry/lib/libattnfuse_c.so
    [ $v = base ] && lib=.devcarry/base46/libattnfuse_c.so
    ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$v timeout "$(left 60)" python3 bench/gpu_peers.py --lib $lib \
      --suite full --filter "additive bias" --ours-only > "$W/bias_${v}_r$round.log" 2>&1
    say "r$round $v rc=$? $(grep -E '^additive bias.*attnfuse' "$W/bias_${v}_r$round.log" | head -1)"
  done
done
ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-new timeout "$(left 90)" python3 bench/gpu_peers.py \
  --lib .devcarry/lib/libattnfuse_c.so --suite full --filter "additive bias" > "$W/bias_peers.log" 2>&1
say "rc=$?"; grep -E '^additive bias' "$W/bias_peers.log" | cut -c1-160 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. gpu_decode.py --suite all"
peer_sweep all all "$(left 150)"
say "== 4. gpu_decode.py --suite documents --varlen-lengths uniform"
timeout "$(left 40)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite documents \
  --varlen-lengths uniform --out "$W/documents_uniform" > "$W/documents_uniform.log" 2>&1
say "rc=$?"
grep -E 'attnfuse|flash|flex|done in' "$W/documents_uniform.log" | cut -c1-150 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
