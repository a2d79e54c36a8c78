#!/usr/bin/env bash
# Thirty-ninth session, calls 4 and 5 (run inline on the device; kept here as run): fused RoPE
# decode tiles through ATTNFUSE_CUDA_DECODE_TILE on the tree's CLI (.devcarry/old/attnfuse).
#   bash bench/sessions/run_gpu_session39_tiles.sh time    # call4: ms, median of 50, two rounds
#   bash bench/sessions/run_gpu_session39_tiles.sh check   # call5: against the float64 reference
# (16,128,8,2,4 in call4 is not a valid tile, 8 warps over 4 key warps need 32 rows: no time.)
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
cli=.devcarry/old/attnfuse
ROPE='softmax(causal(rope(Q, K, base=500000))) @ V'
if [ "${1:-time}" = time ]; then
  for r in 1 2; do
    for s in 1,32,8,1,32768,128 8,32,8,1,32768,128 32,32,8,1,4096,128 1,64,8,1,131072,128; do
      line="r$r $s:"
      for tile in default 16,64,4,2,4 16,32,2,2,2 16,48,3,2,3 16,128,8,2,4; do
        e=()
        [ $tile != default ] && e=(ATTNFUSE_CUDA_DECODE_TILE=$tile)
        line+=" $tile $(env "${e[@]}" ATTNFUSE_CACHE_DIR=/tmp/cs timeout 40 $cli bench "$ROPE" --shape $s --dtype bf16 \
          --device cuda --reps 50 --no-check --rope-mode fused 2>&1 | awk '$1=="fused"{print $2}')"
      done
      say "$line"
    done
  done
else
  for s in 1,32,8,1,4099,128 4,32,8,3,20001,128 1,64,8,2,65537,128; do
    for tile in 16,64,4,2,4 16,48,3,2,3; do
      say "$s $tile: $(ATTNFUSE_CUDA_DECODE_TILE=$tile ATTNFUSE_CACHE_DIR=/tmp/cs timeout 40 $cli bench "$ROPE" --shape $s \
        --dtype bf16 --device cuda --reps 2 --rope-mode fused 2>&1 | grep -iE 'PASS|FAIL|err' | head -3 | tr '\n' ' ')"
    done
  done
fi
