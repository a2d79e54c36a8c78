#!/usr/bin/env bash
# Forty-eighth session, first call (carry .devcarry from bench/make_device_carry.sh at HEAD):
#   1. on an H200: the GPU tests that run bias programs (CudaForward, CudaDecode.EveryCombinator
#      and DtypesAndHeadDims) in 6 shards, then gpu_decode.py --suite all with the peers (decode,
#      paged, BigBird, documents with the ragged varlen split rule, never run on an H200);
#   2. on an H100: the whole GPU suite in 8 shards (eddddd5's BiasQuad has not run on a GPU).
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-560}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  say "== 1. GPU tests with bias programs"
  GTEST_FILTER='CudaForward.*:CudaDecode.EveryCombinator:CudaDecode.DtypesAndHeadDims' gpu_suite_sharded "$(left 150)" 6
  tar czf "$OUT/logs.tgz" -C "$W" .
  say "== 1b. gpu_decode.py --suite all with the peers"
  peer_sweep all all "$(left 420)"
else
  say "== 2. the whole GPU suite, 8 shards"
  gpu_suite_sharded "$(left 420)" 8
fi
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
