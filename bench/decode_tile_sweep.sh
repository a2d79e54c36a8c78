#!/usr/bin/env bash
# Decode tile sweep on the device: bench/gpu_decode.py's quick decode and paged cells, attnfuse
# alone, for each ATTNFUSE_CUDA_DECODE_TILE=block_q,block_k,num_warps,stages. Expects .devcarry/.
# Usage on the device: bench/decode_tile_sweep.sh [tile ...]  (summary in $OUT/decode_tile_sweep.txt)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/attnfuse-gpu-out}
mkdir -p "$OUT/sweep"
export LD_LIBRARY_PATH="$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
tiles=${*:-64,64,4,2 64,32,4,4 64,64,4,4 64,32,4,6 64,64,4,3 32,32,2,4 16,32,1,4 16,64,1,4}
for t in $tiles; do
  echo "== tile $t"
  ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$t ATTNFUSE_CUDA_DECODE_TILE=$t \
    python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite decode --quick --ours-only \
    > "$OUT/sweep/decode_$t.log" 2>&1
  ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$t ATTNFUSE_CUDA_DECODE_TILE=$t \
    python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite paged --quick \
    > "$OUT/sweep/paged_$t.log" 2>&1
  grep -hE "^(llama|  first)" "$OUT/sweep/decode_$t.log" "$OUT/sweep/paged_$t.log" | grep -E "attnfuse" | sed "s/^/$t  /"
done | tee "$OUT/decode_tile_sweep.txt"
