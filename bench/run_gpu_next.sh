#!/usr/bin/env bash
# A session's first device call on the current tree (build here: bash bench/make_device_carry.sh;
# carry .devcarry). Its first two steps ran in the thirtieth session (run_gpu_session30_first.sh);
# the whole suite last ran on 3afc5e5 (settled page tables) and CudaDecode.* on the decode
# changes after it (1024 staged page ids, two stages for unsplit contiguous calls):
#   1. the whole GPU suite, 8 shards;
#   2. BigBird at 128-blocks, ATTNFUSE_CUDA_SPARSE_64_ROWS 1 / all (kept as a check of the knob);
#   3. gpu_decode.py --suite all with the peers (the paged suite includes the _settled rows).
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-560}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 240)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. BigBird 128-blocks: 128-row tile / 64-row tile (ATTNFUSE_CUDA_SPARSE_64_ROWS=all), ours only"
knob_ab ATTNFUSE_CUDA_SPARSE_64_ROWS "1 all" bigbird 60 --bigbird-block 128
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. gpu_decode.py --suite all"
peer_sweep all all "$(left 150)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
