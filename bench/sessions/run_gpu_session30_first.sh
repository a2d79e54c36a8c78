#!/usr/bin/env bash
# The thirtieth session's first device call (build: bash bench/make_device_carry.sh at 16fa301;
# carry .devcarry): run_gpu_next.sh's first two steps, the peer sweep left to a later call.
#   1. the whole GPU suite, 8 shards (the 64-row block-sparse tile had run only CudaSparse.*);
#   2. BigBird at 128-blocks (4k, 16k), ours only: the 128-row tile against every D = 64 mask on
#      the 64-row tile (ATTNFUSE_CUDA_SPARSE_64_ROWS=all), two interleaved rounds.
# Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-400}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 240)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. BigBird 128-blocks: 128-row tile / 64-row tile (ATTNFUSE_CUDA_SPARSE_64_ROWS=all), ours only"
knob_ab ATTNFUSE_CUDA_SPARSE_64_ROWS "1 all" bigbird 60 --bigbird-block 128
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
