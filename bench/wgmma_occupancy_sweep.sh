#!/usr/bin/env bash
# Times attnfuse alone under several (block_k, blocks per SM) settings of the Hopper form's tile
# (ATTNFUSE_CUDA_WGMMA_TILE=block_k,min_blocks) on the peer suite's cases and the RoPE placement
# cases of one geometry, to pick cuda_arch_tile's choice. Device-side script; expects .devcarry/.
# Usage: bench/wgmma_occupancy_sweep.sh [filter, default gpt2] (SETTINGS="128,1 64,2" overrides).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
L=.devcarry/lib/libattnfuse_c.so
filter=${1:-gpt2}
for s in ${SETTINGS:-"128,1" "64,1" "64,2"}; do
  echo "== ATTNFUSE_CUDA_WGMMA_TILE=$s"
  ATTNFUSE_CUDA_WGMMA_TILE=$s timeout ${BENCH_TIMEOUT:-150} python3 bench/gpu_peers.py --lib $L --suite full --ours-only \
    --filter "$filter" 2>&1 | grep -E '^[a-z].*attnfuse' | grep -v Warning
  ATTNFUSE_CUDA_WGMMA_TILE=$s timeout ${BENCH_TIMEOUT:-150} python3 bench/gpu_rope.py --lib $L --cli .devcarry/attnfuse \
    --suite placement --filter "placement $filter" 2>&1 | grep -E 'prerotate'
done
