#!/usr/bin/env bash
# The twenty-ninth session's fifth device call (carry .devcarry): block-sparse masks of 64-row
# blocks at D = 64 on the 64-row wgmma tile (passes::cuda_wgmma_64_rows).
#   1. the CudaSparse GPU tests, 8 shards;
#   2. BigBird at 64-blocks (4k, 16k), ours only, the 128-row tile with row groups skipping
#      (ATTNFUSE_CUDA_SPARSE_64_ROWS=0) against the 64-row tile, two interleaved rounds;
#   3. the same cells with the peers (flex with 64 x 64 kernel tiles).
# CAP bounds the whole (default 400 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-400}
say "== 1. CudaSparse.*, 8 shards"
GTEST_FILTER='CudaSparse.*' gpu_suite_sharded "$(left 200)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. BigBird 64-blocks: 128-row tile (rows64=0) / 64-row tile (rows64=1), ours only"
knob_ab ATTNFUSE_CUDA_SPARSE_64_ROWS "0 1" bigbird 60 --bigbird-block 64
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. BigBird 64-blocks with the peers"
timeout "$(left 120)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite bigbird \
  --bigbird-block 64 --out "$W/b64_peers" > "$W/b64_peers.log" 2>&1
say "rc=$?"
grep -E '^bigbird' "$W/b64_peers.log" | cut -c1-140 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
