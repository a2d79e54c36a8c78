#!/usr/bin/env bash
# Decode tile sweep on the device: bench/gpu_decode.py's quick decode and paged cells, attnfuse
# alone, for each ATTNFUSE_CUDA_DECODE_TILE=block_q,block_k,num_warps,stages[,key_warps]; `auto`
# runs the runtime's own choice (no knob). An entry may end in :S to fix the split count too
# (ATTNFUSE_CUDA_DECODE_SPLITS=S; e.g. auto:2). ROUNDS=n repeats the whole list n times,
# interleaved, so drift between runs shows. SUITES (default "decode paged") picks the suites. Expects
# .devcarry/.
# Usage on the device: bench/decode_tile_sweep.sh [tile ...]  (summary in $OUT/decode_tile_sweep.txt)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/attnfuse-gpu-out}
mkdir -p "$OUT/sweep"
export LD_LIBRARY_PATH="$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
tiles=${*:-64,64,4,2 64,32,4,4 64,64,4,4 64,32,4,6 64,64,4,3 32,32,2,4 16,32,1,4 16,64,1,4}
for round in $(seq "${ROUNDS:-1}"); do
  for t in $tiles; do
    echo "== tile $t (round $round)"
    n=${t//,/_}  # file names without commas or colons (the device call does not return those)
    n=${n//:/_s}
    knob=${t%%:*} splits=
    [[ $t == *:* ]] && splits=${t#*:}
    [ "$knob" = auto ] && knob=
    for suite in ${SUITES:-decode paged}; do
      extra=()
      [ $suite = decode ] && extra=(--ours-only)
      ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$n ATTNFUSE_CUDA_DECODE_TILE=$knob ATTNFUSE_CUDA_DECODE_SPLITS=$splits \
        python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite $suite --quick "${extra[@]}" \
        > "$OUT/sweep/${suite}_${n}_r$round.log" 2>&1
    done
    for suite in ${SUITES:-decode paged}; do cat "$OUT/sweep/${suite}_${n}_r$round.log"; done |
      grep -E "^(llama|  first)" | grep -E "attnfuse" | sed "s/^/$t  /"
  done
done | tee "$OUT/decode_tile_sweep.txt"
