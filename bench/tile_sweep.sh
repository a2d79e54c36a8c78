#!/usr/bin/env bash
# Times attnfuse alone under several CUDA tile shapes (ATTNFUSE_CUDA_TILE=block_q,block_k,warps)
# on the causal and dense Llama-3-8B cases, to pick the tile pass's choices. Device-side script.
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
for tile in ${TILES:-"128,64,8" "128,128,8" "64,64,4" "128,32,8" "64,128,4"}; do
  echo "== tile $tile"
  ATTNFUSE_CUDA_TILE=$tile python3 bench/gpu_peers.py --lib .devcarry/lib/libattnfuse_c.so --suite quick \
    --ours-only --filter "${FILTER:-llama3-8b}" 2>&1 | grep -E '^(causal|dense)' | grep -v window
done
