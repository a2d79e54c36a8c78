#!/usr/bin/env bash
# Thirty-eighth session: where the mma.sync fused-RoPE kernel lost 15-28% (bench/results rope_peers
# records: Llama-3-8B 32k 176 TFLOP/s on 2026-11-30, 161 on 2026-12-01 05:30, 131-133 from the
# seventeenth session on; GPT-2 171 / 123 / 107). That kernel is what every GPU other than Hopper
# runs for short RoPE prefills, and Hopper with rope_mode=fused. The first drop is 629670b's
# spill-free tiles (rope D <= 64 on 8 warps instead of 4, after the Work record pushed them over
# 255 registers); this times the second.
# Carry: .devcarry (the tree's portable build, bench/make_device_carry.sh) and .devcarry/bisect/
# attnfuse_<commit>: stripped portable CLIs (-DATTNFUSE_NATIVE=OFF) of commits between the two
# records. Every CLI's kernel is first checked against the float64 reference at an odd length
# (also its cold compile, each build in its own cache, all at once), then timed with --no-check in
# two interleaved rounds. In parallel with those compiles: the whole GPU suite of the tree in 8
# shards. CAP bounds the whole (default 560 s).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
LLAMA='softmax(causal(rope(Q, K, base=500000))) @ V'
GPT2='softmax(causal(rope(Q, K))) @ V'
PLAIN='softmax(causal(scaled_dot_product(Q, K))) @ V'
clis=(.devcarry/bisect/attnfuse_* .devcarry/attnfuse)
name() { case $1 in .devcarry/attnfuse) echo HEAD ;; *) basename "$1" | sed 's/attnfuse_//' ;; esac; }
say "== 1. checks (cold compiles, one cache per build) and the whole GPU suite at once"
for c in "${clis[@]}"; do
  n=$(name "$c")
  ( export ATTNFUSE_CACHE_DIR=/tmp/cache-$n
    timeout "$(left 300)" "$c" bench "$LLAMA" --shape 1,32,8,777,777,128 --dtype bf16 --device cuda --rope-mode fused --reps 5 > "$W/check_llama_$n.log" 2>&1
    timeout "$(left 300)" "$c" bench "$GPT2" --shape 4,12,12,777,777,64 --dtype bf16 --device cuda --rope-mode fused --reps 5 > "$W/check_gpt2_$n.log" 2>&1
    ATTNFUSE_CUDA_WGMMA=0 timeout "$(left 300)" "$c" bench "$PLAIN" --shape 1,32,8,777,777,128 --dtype bf16 --device cuda --reps 5 > "$W/check_plain_$n.log" 2>&1 ) &
done
gpu_suite_sharded "$(left 300)" 8
wait
for c in "${clis[@]}"; do
  n=$(name "$c")
  say "check $n: llama $(grep -cE '^ +PASS' "$W/check_llama_$n.log") gpt2 $(grep -cE '^ +PASS' "$W/check_gpt2_$n.log") plain-mma.sync $(grep -cE '^ +PASS' "$W/check_plain_$n.log") (PASS lines)"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. fused RoPE (mma.sync) and plain causal on mma.sync, ms (median of 20), two rounds"
for round in 1 2; do
  for c in "${clis[@]}"; do
    n=$(name "$c")
    [ "$(left 60)" -lt 20 ] && break 2
    export ATTNFUSE_CACHE_DIR=/tmp/cache-$n
    l=$(timeout 60 "$c" bench "$LLAMA" --shape 1,32,8,16384,16384,128 --dtype bf16 --device cuda --rope-mode fused --reps 20 --no-check 2>&1 | awk '$1=="fused"{print $2}')
    g=$(timeout 60 "$c" bench "$GPT2" --shape 4,12,12,16384,16384,64 --dtype bf16 --device cuda --rope-mode fused --reps 20 --no-check 2>&1 | awk '$1=="fused"{print $2}')
    pl=$(ATTNFUSE_CUDA_WGMMA=0 timeout 60 "$c" bench "$PLAIN" --shape 1,32,8,16384,16384,128 --dtype bf16 --device cuda --reps 20 --no-check 2>&1 | awk '$1=="fused"{print $2}')
    say "round $round $n: llama16k-fused $l ms, gpt2-16k-fused $g ms, llama16k-plain-mma.sync $pl ms"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "end in ${SECONDS}s"
