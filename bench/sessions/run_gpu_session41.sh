#!/usr/bin/env bash
# Forty-first session, not yet run: both pending RoPE experiments in one call, one GPU suite.
#  - the landed fixed-unit rotation for whole heads of 96 dims (Phi-3), against the build before it
#    (bench/experiments/rope_fixed_unit_any_head.patch reversed: "old" against "base");
#  - fused RoPE decode on Hopper's TMA tile in 64-key two-stage tiles
#    (bench/experiments/rope_decode_tma64.patch: "base" against "new").
# Carry (three CLIs; the patched tree's test_gpu runs the suite, which covers the landed tree):
#   git apply -R bench/experiments/rope_fixed_unit_any_head.patch && bash bench/make_device_carry.sh
#   strip .devcarry/attnfuse && cp .devcarry/attnfuse /tmp/attnfuse_old && git checkout src tests
#   bash bench/make_device_carry.sh && strip .devcarry/attnfuse && cp .devcarry/attnfuse /tmp/attnfuse_base
#   git apply bench/experiments/rope_decode_tma64.patch && bash bench/make_device_carry.sh
#   strip .devcarry/attnfuse .devcarry/test_gpu && rm -f .devcarry/lib/libattnfuse_c.so .devcarry/dispatch_bench
#   mkdir -p .devcarry/old .devcarry/base && cp /tmp/attnfuse_old .devcarry/old/attnfuse
#   cp /tmp/attnfuse_base .devcarry/base/attnfuse && git checkout src tests bench/emit_decode_kernel.cpp
# Run: bash bench/sessions/run_gpu_session41.sh (carry .devcarry)
#   1. the whole GPU suite on the patched tree in 8 shards (limit LIMIT, default 280 s);
#   2. checks: each CLI's fused RoPE against the reference (Phi-3 prefill and decode, Llama-3-8B
#      decode contiguous and in pages of 16, gptj at D = 64);
#   3. old / base, two interleaved rounds, ms (median of 30): Phi-3-mini (Hq = Hkv = 32, D = 96)
#      fused prefill 8k and decode B1 / B8 at 32k;
#   4. base / new, two interleaved rounds: fused RoPE decode at Llama-3-8B B1 / B8 / B32 and 32k,
#      70B B1 at 32k and 128k, 70B pages of 16 and 64, gptj at D = 64 B8; plain decode as control.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
say "== 1. the whole GPU suite (patched tree)"
gpu_suite_sharded "${LIMIT:-280}" 8
tar czf "$OUT/logs.tgz" -C "$W" .
PHI='softmax(causal(rope(Q, K, base=10000))) @ V'
L3='softmax(causal(rope(Q, K, base=500000))) @ V'
GJ='softmax(causal(rope(Q, K, style=gptj, rotary_dim=32))) @ V'
PLAIN='softmax(causal(scaled_dot_product(Q, K))) @ V'
say "== 2. checks"
for v in old base new; do
  export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
  ab_check $v "$PHI" 1,32,32,777,777,96
  ab_check $v "$PHI" 2,32,32,1,4099,96
  ab_check $v "$L3" 2,32,8,1,4099,128
  ab_check $v "$L3" 2,64,8,1,5000,128 --page-size 16
  ab_check $v "$GJ" 2,8,2,3,3001,64
  say "check $v: $(grep -cE '^ +PASS' "$W/check_$v.log") PASS of 5"
done
say "== 3. D = 96 fixed units: old / base, ms"
for round in 1 2; do
  for v in old base; do
    c=$(ab_cli $v)
    export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
    say "round $round $v: phi3 prefill 8k $(fused_ms $c "$PHI" 1,32,32,8192,8192,96) | B1 32k $(fused_ms $c "$PHI" 1,32,32,1,32768,96) | B8 32k $(fused_ms $c "$PHI" 8,32,32,1,32768,96)"
  done
done
say "== 4. fused RoPE decode on the TMA tile: base / new, ms"
for round in 1 2; do
  for v in base new; do
    c=$(ab_cli $v)
    export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
    say "round $round $v: 8B B1 $(fused_ms $c "$L3" 1,32,8,1,32768,128) | B8 $(fused_ms $c "$L3" 8,32,8,1,32768,128) | B32 $(fused_ms $c "$L3" 32,32,8,1,32768,128) | 70B B1 $(fused_ms $c "$L3" 1,64,8,1,32768,128) | 70B 128k $(fused_ms $c "$L3" 1,64,8,1,131072,128)"
    say "round $round $v: 70B pages16 $(fused_ms $c "$L3" 1,64,8,1,32768,128 --page-size 16) | pages64 $(fused_ms $c "$L3" 1,64,8,1,32768,128 --page-size 64) | gptj D64 B8 $(fused_ms $c "$GJ" 8,32,8,1,32768,64) | plain 8B B1 $(fused_ms $c "$PLAIN" 1,32,8,1,32768,128)"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "end in ${SECONDS}s"
