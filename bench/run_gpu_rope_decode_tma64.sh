#!/usr/bin/env bash
# Forty-first session, not yet run: fused RoPE decode on Hopper's TMA tile in 64-key tiles of two
# stages (three blocks per SM, as the cp.async tile it replaces), each landed stage rotated in
# place in its swizzled layout (bench/experiments/rope_decode_tma64.patch; the host emulator runs
# it: HopperKernelOnHost.TmaDecodeRotatesEachLandedStage). The thirty-ninth session's form took
# the 128-key tile, one block per SM, and lost 12-18%; the rotation has since become 1.24-1.40x
# faster (fixed pair units). Carry (the tree as the old CLI, the patched tree as the new one):
#   bash bench/make_device_carry.sh && strip .devcarry/attnfuse && cp .devcarry/attnfuse /tmp/attnfuse_old
#   git apply bench/experiments/rope_decode_tma64.patch && bash bench/make_device_carry.sh
#   strip .devcarry/attnfuse .devcarry/test_gpu && rm -f .devcarry/lib/libattnfuse_c.so .devcarry/dispatch_bench
#   mkdir -p .devcarry/old && cp /tmp/attnfuse_old .devcarry/old/attnfuse
# Run: bash bench/run_gpu_rope_decode_tma64.sh
#   1. the whole GPU suite on the patched tree in 8 shards (limit LIMIT, default 300 s): every
#      fused RoPE decode case of CudaRope and CudaDecode now runs the TMA tile on sm_90;
#   2. old / new, two interleaved rounds, ms (median of 30): fused RoPE decode at Llama-3-8B
#      B1 / B8 / B32 and 32k, Llama-3-70B B1 at 32k and 128k, 70B B1 pages of 16 and 64, gptj over
#      half the head at D = 64; plain decode 8B B1 as a control (unchanged code).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
say "== 1. the whole GPU suite"
gpu_suite_sharded "${LIMIT:-300}" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. old / new, ms (median of 30)"
L3='softmax(causal(rope(Q, K, base=500000))) @ V'
GJ='softmax(causal(rope(Q, K, style=gptj, rotary_dim=32))) @ V'
PLAIN='softmax(causal(scaled_dot_product(Q, K))) @ V'
for v in old new; do
  export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
  ab_check $v "$L3" 2,32,8,1,4099,128
  ab_check $v "$GJ" 2,8,2,3,3001,64
  ab_check $v "$L3" 2,64,8,1,5000,128 --page-size 16
  say "check $v: $(grep -cE '^ +PASS' "$W/check_$v.log") PASS of 3"
done
for round in 1 2; do
  for v in old new; do
    c=$(ab_cli $v)
    export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
    say "round $round $v: 8B B1 $(fused_ms $c "$L3" 1,32,8,1,32768,128) | B8 $(fused_ms $c "$L3" 8,32,8,1,32768,128) | B32 $(fused_ms $c "$L3" 32,32,8,1,32768,128) | 70B B1 $(fused_ms $c "$L3" 1,64,8,1,32768,128) | 70B 128k $(fused_ms $c "$L3" 1,64,8,1,131072,128)"
    say "round $round $v: 70B pages16 $(fused_ms $c "$L3" 1,64,8,1,32768,128 --page-size 16) | pages64 $(fused_ms $c "$L3" 1,64,8,1,32768,128 --page-size 64) | gptj D64 B8 $(fused_ms $c "$GJ" 8,32,8,1,32768,64) | plain 8B B1 $(fused_ms $c "$PLAIN" 1,32,8,1,32768,128)"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "end in ${SECONDS}s"
