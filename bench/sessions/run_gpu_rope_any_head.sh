#!/usr/bin/env bash
# Fortieth session, not yet run: the fixed-unit rotation for whole heads whose pair units do not
# divide the block's threads (D = 96, Phi-3's head, where 120 of 128 threads rotate; the module
# key's 3 bits a span code), landed from bench/experiments/rope_fixed_unit_any_head.patch after
# the host emulator ran the whole kernel. Carry (the tree, and the patch reversed as the old CLI):
#   git apply -R bench/experiments/rope_fixed_unit_any_head.patch && bash bench/make_device_carry.sh
#   strip .devcarry/attnfuse && cp .devcarry/attnfuse /tmp/attnfuse_old && git apply bench/experiments/rope_fixed_unit_any_head.patch
#   bash bench/make_device_carry.sh && strip .devcarry/attnfuse .devcarry/test_gpu
#   rm -f .devcarry/lib/libattnfuse_c.so .devcarry/dispatch_bench
#   mkdir -p .devcarry/old && cp /tmp/attnfuse_old .devcarry/old/attnfuse
# Run: bash bench/sessions/run_gpu_rope_any_head.sh
#   1. the whole GPU suite in 8 shards (limit LIMIT, default 300 s; CudaRope's
#      PositionsFollowQOffsetAndHeadDims has D = 96 prefill and decode cases);
#   2. old / new, two interleaved rounds, ms: fused RoPE at Phi-3-mini's geometry (Hq = Hkv = 32,
#      D = 96): prefill 8k, decode B1 and B8 at 32k; and Llama-3-8B B1 decode as a control.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
say "== 1. the whole GPU suite"
gpu_suite_sharded "${LIMIT:-300}" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. old / new, ms (median of 30)"
PHI='softmax(causal(rope(Q, K, base=10000))) @ V'
L3='softmax(causal(rope(Q, K, base=500000))) @ V'
t() {  # cli program shape: the median ms of fused RoPE
  timeout 60 "$1" bench "$2" --shape "$3" --dtype bf16 --device cuda --rope-mode fused --reps 30 --no-check 2>&1 |
    awk '$1=="fused"{print $2}'
}
cli_of() { case $1 in old) echo .devcarry/old/attnfuse ;; *) echo .devcarry/attnfuse ;; esac; }
for v in old new; do
  c=$(cli_of $v)
  export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
  "$c" bench "$PHI" --shape 1,32,32,777,777,96 --dtype bf16 --device cuda --rope-mode fused --reps 3 > "$W/check_$v.log" 2>&1
  "$c" bench "$PHI" --shape 2,32,32,1,4099,96 --dtype bf16 --device cuda --rope-mode fused --reps 3 >> "$W/check_$v.log" 2>&1
  say "check $v: $(grep -cE '^ +PASS' "$W/check_$v.log") PASS of 2"
done
for round in 1 2; do
  for v in old new; do
    c=$(cli_of $v)
    export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
    say "round $round $v: phi3 prefill 8k $(t $c "$PHI" 1,32,32,8192,8192,96) | phi3 B1 32k $(t $c "$PHI" 1,32,32,1,32768,96) | phi3 B8 32k $(t $c "$PHI" 8,32,32,1,32768,96) | llama3-8b B1 32k $(t $c "$L3" 1,32,8,1,32768,128)"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "end in ${SECONDS}s"
