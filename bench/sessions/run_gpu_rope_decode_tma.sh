#!/usr/bin/env bash
# Prepared in the thirty-eighth session, not yet run (the session's device budget ran out).
# bench/experiments/rope_decode_tma.patch: decode calls with fused RoPE take Hopper's TMA decode
# tile (until now they kept the cp.async tile, because the rotation read the padded layout): each
# K tile is rotated in place in the swizzled layout the copy engine lands, then a proxy fence
# before the stage is refilled; the RoPE tables sit behind the stage barriers; calls with the
# producer warp sync the computing warps alone. New GPU test CudaDecode.FusedRopeDecodeTakesTheTmaTile.
# The patch touches the host (CudaKernel::decode_tma, the decode tile's shared memory), so the
# A/B takes two CLIs. The carry:
#   bash bench/make_device_carry.sh && strip .devcarry/attnfuse && cp .devcarry/attnfuse /tmp/attnfuse_old
#   git apply bench/experiments/rope_decode_tma.patch && bash bench/make_device_carry.sh
#   strip .devcarry/attnfuse .devcarry/test_gpu && rm -f .devcarry/lib/libattnfuse_c.so .devcarry/dispatch_bench
#   mkdir -p .devcarry/old && cp /tmp/attnfuse_old .devcarry/old/attnfuse
# Then carry .devcarry and run: CAP=560 bash bench/sessions/run_gpu_rope_decode_tma.sh
#   1. the whole GPU suite in 8 shards with the patch; memcheck and racecheck on the new test;
#   2. fused RoPE decode, old / new CLI, two interleaved rounds: Llama-3-8B B1 and B8 / 32k,
#      Llama-3-70B B1 / 32k, pages of 16 at 70B (the producer warp); and plain decode for scale.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
say "== 1. the whole GPU suite with the patch, and the sanitizers on the new test"
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$tool timeout "$(left 300)" compute-sanitizer --tool $tool \
      --error-exitcode 9 .devcarry/test_gpu --gtest_filter='CudaDecode.FusedRopeDecodeTakesTheTmaTile' \
      > "$W/san_$tool.log" 2>&1 &
  done
fi
gpu_suite_sharded "$(left 300)" 8
wait
for tool in memcheck racecheck; do
  say "$tool: $(grep -E '^\[  (PASSED|FAILED)|ERROR SUMMARY|RACECHECK SUMMARY' "$W/san_$tool.log" 2>/dev/null | tr '\n' ' ')"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. fused RoPE decode, ms (median of 50), old / new, two rounds"
ROPE='softmax(causal(rope(Q, K, base=500000))) @ V'
PLAIN='softmax(causal(scaled_dot_product(Q, K))) @ V'
t() {  # cli program shape [args...]: the median ms
  local c=$1 prog=$2 shape=$3
  shift 3
  timeout 60 "$c" bench "$prog" --shape "$shape" --dtype bf16 --device cuda --reps 50 --no-check "$@" 2>&1 |
    awk '$1=="fused"{print $2}'
}
for v in old new; do  # checks first (and the cold compiles)
  c=.devcarry/attnfuse; [ $v = old ] && c=.devcarry/old/attnfuse
  ATTNFUSE_CACHE_DIR=/tmp/cache-$v "$c" bench "$ROPE" --shape 1,32,8,1,4099,128 --dtype bf16 --device cuda --rope-mode fused --reps 5 > "$W/check_$v.log" 2>&1
  say "check $v: $(grep -cE '^ +PASS' "$W/check_$v.log") PASS"
done
for round in 1 2; do
  for v in old new; do
    c=.devcarry/attnfuse; [ $v = old ] && c=.devcarry/old/attnfuse
    export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
    [ "$(left 60)" -lt 20 ] && break 2
    say "round $round $v: 8B-B1 $(t $c "$ROPE" 1,32,8,1,32768,128 --rope-mode fused) | 8B-B8 $(t $c "$ROPE" 8,32,8,1,32768,128 --rope-mode fused) | 70B-B1 $(t $c "$ROPE" 1,64,8,1,32768,128 --rope-mode fused) | 70B-B1-pages16 $(t $c "$ROPE" 1,64,8,1,32768,128 --rope-mode fused --page-size 16) | plain 8B-B1 $(t $c "$PLAIN" 1,32,8,1,32768,128)"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "end in ${SECONDS}s"
