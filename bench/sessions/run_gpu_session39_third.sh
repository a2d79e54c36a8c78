#!/usr/bin/env bash
# Thirty-ninth session, the third device call: why fused RoPE costs decode calls ~60% (H100,
# call2: Llama-3-8B B1 / 32k plain 0.062 ms, fused 0.098; B8 0.369 -> 0.617). CLI =
# .devcarry/old/attnfuse (the tree's build, HEAD). Each step bounded by CAP:
#   1. Nsight Compute warp-stall sampling per SASS line of one fused decode launch (8B B8 / 32k)
#      and of the plain cp.async decode tile (ATTNFUSE_CUDA_DECODE_TMA=0) for comparison;
#   2. decode tiles for fused RoPE (ATTNFUSE_CUDA_DECODE_TILE) against the default, with plain
#      decode on both its TMA tile and the cp.async tile for scale; two interleaved rounds.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-400}
cli=.devcarry/old/attnfuse
ROPE='softmax(causal(rope(Q, K, base=500000))) @ V'
PLAIN='softmax(causal(scaled_dot_product(Q, K))) @ V'
say "== 1. ncu source sampling (8B B8 / 32k)"
for v in fused plain_cpasync; do
  prog=$ROPE extra=(--rope-mode fused) envs=()
  [ $v = plain_cpasync ] && prog=$PLAIN extra=() envs=(ATTNFUSE_CUDA_DECODE_TMA=0)
  mkdir -p "$W/ncu_$v"
  # run_gpu_ncu_source.sh splits CMD on blanks, and the program has some: a wrapper script.
  printf '#!/bin/bash\nexec %q bench %q --shape 8,32,8,1,32768,128 --dtype bf16 --device cuda %s --reps 3 --no-check\n' \
    "$PWD/$cli" "$prog" "${extra[*]}" > "$W/ncu_$v.sh"
  env "${envs[@]}" ATTNFUSE_NVRTC_LINEINFO=1 ATTNFUSE_CACHE_DIR=/tmp/cache-ncu-$v OUT="$W/ncu_$v" SKIP=2 \
    CMD="bash $W/ncu_$v.sh" timeout "$(left 110)" bash bench/run_gpu_ncu_source.sh > "$W/ncu_$v.log" 2>&1
  say "-- $v"; head -40 "$W/ncu_$v/ncu_source_digest.txt" 2>/dev/null | cut -c1-200 >> "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode tiles for fused RoPE, ms (median of 50)"
t() {  # label env... -- program shape args...: one line "label ms"
  local label=$1; shift
  local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  local prog=$1 shape=$2; shift 2
  env "${envs[@]}" ATTNFUSE_CACHE_DIR=/tmp/cache-sweep timeout 60 "$cli" bench "$prog" --shape "$shape" --dtype bf16 \
    --device cuda --reps 50 --no-check "$@" > "$W/sweep_$label.log" 2>&1
  echo "$label $(awk '$1=="fused"{print $2}' "$W/sweep_$label.log")"
}
for round in 1 2; do
  for geo in 8b-B1:1,32,8,1,32768,128 8b-B8:8,32,8,1,32768,128 70b-B1:1,64,8,1,32768,128; do
    g=${geo%%:*} s=${geo#*:}
    [ "$(left 60)" -lt 25 ] && break 2
    line="r$round $g:"
    line+=" $(t plain -- "$PLAIN" $s) |"
    line+=" $(t plain_cpasync ATTNFUSE_CUDA_DECODE_TMA=0 -- "$PLAIN" $s) |"
    line+=" $(t fused -- "$ROPE" $s --rope-mode fused) |"
    for tile in 16,64,4,2,4 16,128,8,2,8 16,128,8,3,8 16,32,2,3,2 16,128,4,2,4; do
      line+=" $(t "fused_$tile" ATTNFUSE_CUDA_DECODE_TILE=$tile -- "$ROPE" $s --rope-mode fused) |"
    done
    say "$line"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "end in ${SECONDS}s"
