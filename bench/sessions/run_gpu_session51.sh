#!/usr/bin/env bash
# Fifty-first session (carry .devcarry from bench/make_device_carry.sh at HEAD):
#   1. the whole GPU suite in 8 shards on whatever card comes: the first GPU run since
#      BlockMask's factories became templates over the predicate (the CUDA tests build their
#      masks through them; the CSR is bit for bit the same, tests/sparsity/block_mask_cells_test.cpp);
#   2. on an H200 only: gpu_decode.py --suite all with the peers, then gpu_rope.py --suite window up
#      to 32k (the session-49 sweep; on an H100 it is in bench/results/2026-12-07-h100-session51/call1/).
# GPU_FILTER (a gtest filter, e.g. 'CudaSparse.*': the tests that build BlockMasks) narrows step 1
# when little device time is left. CAP bounds the whole (default 560 s). Digest $OUT/digest.txt,
# logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
if [ -n "${GPU_FILTER:-}" ]; then
  say "== 1. the GPU suite's $GPU_FILTER, 8 shards"
  export GTEST_FILTER=$GPU_FILTER
else
  say "== 1. the whole GPU suite, 8 shards"
fi
gpu_suite_sharded "$(left 300)" 8
unset GTEST_FILTER
tar czf "$OUT/logs.tgz" -C "$W" .
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ "$(left 999)" -ge 120 ]; then
  say "== 2. gpu_decode.py --suite all with the peers"
  peer_sweep all all "$(left 200)"
  tar czf "$OUT/logs.tgz" -C "$W" .
  if [ "$(left 999)" -ge 90 ]; then
    say "== 3. gpu_rope.py --suite window up to 32k"
    window_sweep "$(left 120)" 32768
    tar czf "$OUT/logs.tgz" -C "$W" .
  fi
fi
say "done in ${SECONDS}s"
