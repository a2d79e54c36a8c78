#!/usr/bin/env bash
# Thirty-eighth session, second call: the fused rotation with its cos/sin source tested once per
# tile (rope.cuh rotate_tile_at) instead of at every pair. Carry .devcarry (this tree's portable
# build) with .devcarry/bisect/attnfuse_a770211 (before the caller tables) and
# attnfuse_112c170 (the tree before this change), stripped portable CLIs.
#   1. the RoPE GPU tests (caller tables, every placement, decode and documents with RoPE, the
#      sanitizer subset) in 4 shards, while the three CLIs check their kernel against the float64
#      reference (cold compiles, one cache per build);
#   2. two interleaved rounds: fused prefill at Llama-3-8B and GPT-2 16k, fused decode at
#      Llama-3-8B B1 / 32k (ms, median of 20 runs, --no-check after the check above).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-330}
LLAMA='softmax(causal(rope(Q, K, base=500000))) @ V'
GPT2='softmax(causal(rope(Q, K))) @ V'
clis=(.devcarry/bisect/attnfuse_a770211 .devcarry/bisect/attnfuse_112c170 .devcarry/attnfuse)
name() { case $1 in .devcarry/attnfuse) echo new ;; *) basename "$1" | sed 's/attnfuse_//' ;; esac; }
say "== 1. RoPE GPU tests (4 shards) and the CLIs' checks"
for c in "${clis[@]}"; do
  n=$(name "$c")
  ( export ATTNFUSE_CACHE_DIR=/tmp/cache-$n
    timeout "$(left 200)" "$c" bench "$LLAMA" --shape 1,32,8,777,777,128 --dtype bf16 --device cuda --rope-mode fused --reps 5 > "$W/check_llama_$n.log" 2>&1
    timeout "$(left 200)" "$c" bench "$GPT2" --shape 4,12,12,777,777,64 --dtype bf16 --device cuda --rope-mode fused --reps 5 > "$W/check_gpt2_$n.log" 2>&1
    timeout "$(left 200)" "$c" bench "$LLAMA" --shape 1,32,8,1,4099,128 --dtype bf16 --device cuda --rope-mode fused --reps 5 > "$W/check_decode_$n.log" 2>&1 ) &
done
GTEST_FILTER='CudaRope.*:CudaDecode.Rope*:CudaDecode.PagedAutoRope*:CudaSparse.DocumentsAutoRope*' gpu_suite_sharded "$(left 220)" 4
wait
for c in "${clis[@]}"; do
  n=$(name "$c")
  say "check $n: llama $(grep -cE '^ +PASS' "$W/check_llama_$n.log") gpt2 $(grep -cE '^ +PASS' "$W/check_gpt2_$n.log") decode $(grep -cE '^ +PASS' "$W/check_decode_$n.log") (PASS lines)"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. fused RoPE, ms (median of 20), two rounds"
for round in 1 2; do
  for c in "${clis[@]}"; do
    n=$(name "$c")
    [ "$(left 60)" -lt 15 ] && break 2
    export ATTNFUSE_CACHE_DIR=/tmp/cache-$n
    l=$(timeout 40 "$c" bench "$LLAMA" --shape 1,32,8,16384,16384,128 --dtype bf16 --device cuda --rope-mode fused --reps 20 --no-check 2>&1 | awk '$1=="fused"{print $2}')
    g=$(timeout 40 "$c" bench "$GPT2" --shape 4,12,12,16384,16384,64 --dtype bf16 --device cuda --rope-mode fused --reps 20 --no-check 2>&1 | awk '$1=="fused"{print $2}')
    d=$(timeout 40 "$c" bench "$LLAMA" --shape 1,32,8,1,32768,128 --dtype bf16 --device cuda --rope-mode fused --reps 50 --no-check 2>&1 | awk '$1=="fused"{print $2}')
    say "round $round $n: llama16k-fused $l ms, gpt2-16k-fused $g ms, llama-decode-32k-fused $d ms"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "end in ${SECONDS}s"
