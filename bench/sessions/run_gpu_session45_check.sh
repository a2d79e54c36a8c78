#!/usr/bin/env bash
# Forty-fifth session, the split rule for ragged (varlen decode) grids (passes/split_kv.hpp), on the
# build that has it (.devcarry from bench/make_device_carry.sh) against the library before it
# (.devcarry/base45/libattnfuse_c.so):
#   1. the whole GPU suite, 8 shards;
#   2. varlen decode (gpu_decode.py --suite documents, 32 one-query sequences), ours only, base /
#      new, two interleaved rounds, caches of random lengths (1k-32k) and of equal ones;
#   3. the documents suite with the peers on the new build (prefill documents and varlen decode).
# Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
say "== 1. the GPU suite, 8 shards"
gpu_suite_sharded 300 8
say "== 2. varlen decode, ours only: base / new, two rounds"
for round in 1 2; do
  for lens in random uniform; do
    for v in base new; do
      lib=.devcarry/lib/libattnfuse_c.so
      [ $v = base ] && lib=.devcarry/base45/libattnfuse_c.so
      ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$v timeout 120 python3 bench/gpu_decode.py --lib $lib --suite documents \
        --quick --ours-only --filter varlen --varlen-lengths $lens > "$W/varlen_${lens}_${v}_r$round.log" 2>&1
      say "r$round $lens $v rc=$? $(grep -E '^varlen decode .*attnfuse' "$W/varlen_${lens}_${v}_r$round.log" | head -1 | cut -c1-90)"
    done
  done
done
say "== 3. documents with the peers, new build"
ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-new timeout 200 python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so \
  --suite documents > "$W/documents_peers.log" 2>&1
say "rc=$?"; grep -E '^(documents|varlen)' "$W/documents_peers.log" | cut -c1-140 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
