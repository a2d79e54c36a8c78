#!/usr/bin/env bash
# Fortieth session, second call: the landed fixed-unit rotation (Spec::kRopeHalf, batch 4) with
# the module-key fix (partial rotary spans get the generic loop's module) and two stages for
# paged fused RoPE decode in split calls. The first call (bench/results/2026-12-05-h100-session40/
# call1/, bench/sessions/run_gpu_rope_fixed_unit.sh) timed the patch and found 9 partial-span cases
# failing: a full span's module served from the in-memory cache.
# Carry (.devcarry/old/attnfuse: the CLI of 65613d5, the tree before this session):
#   bash bench/make_device_carry.sh && strip .devcarry/attnfuse .devcarry/test_gpu
#   rm -f .devcarry/lib/libattnfuse_c.so .devcarry/dispatch_bench
#   mkdir -p .devcarry/old && cp <the old CLI> .devcarry/old/attnfuse
# Run: bash bench/sessions/run_gpu_session40_second.sh
#   1. the whole GPU suite in 8 shards (limit 330 s), memcheck on the RoPE subsets alongside;
#   2. old / new, two interleaved rounds, ms: fused RoPE decode (8B B1 and B8 at 32k, 70B B1 at
#      32k and 128k, 70B B1 at 32k in pages of 16 and of 64), fused prefill (Llama-3-8B and
#      GPT-2 at 16k), and a partial span (rotary_dim 64 of 128, 8B 16k prefill, 8B B8 decode)
#      that keeps the generic loop.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
say "== 1. the whole GPU suite; memcheck on the RoPE subsets"
if command -v compute-sanitizer >/dev/null; then
  ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-memcheck timeout 300 compute-sanitizer --tool memcheck \
    --error-exitcode 9 .devcarry/test_gpu --gtest_filter='CudaRope.SanitizerSubset:CudaDecode.RopePlacementsInDecode' \
    > "$W/san_memcheck.log" 2>&1 &
fi
gpu_suite_sharded 330 8
wait
say "memcheck: $(grep -E '^\[  (PASSED|FAILED)|ERROR SUMMARY' "$W/san_memcheck.log" 2>/dev/null | tr '\n' ' ')"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. old / new, ms (median of 30)"
ROPE='softmax(causal(rope(Q, K, base=500000))) @ V'
GPT2='softmax(causal(rope(Q, K))) @ V'
HALF='softmax(causal(rope(Q, K, base=500000, rotary_dim=64))) @ V'
t() {  # cli shape [args...]: the median ms of fused RoPE (PROG: another program)
  local c=$1 shape=$2
  shift 2
  timeout 90 "$c" bench "${PROG:-$ROPE}" --shape "$shape" --dtype bf16 --device cuda --rope-mode fused --reps 30 --no-check "$@" 2>&1 |
    awk '$1=="fused"{print $2}'
}
cli_of() { case $1 in old) echo .devcarry/old/attnfuse ;; *) echo .devcarry/attnfuse ;; esac; }
for v in old new; do  # checks first (and the cold compiles)
  c=$(cli_of $v)
  export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
  "$c" bench "$ROPE" --shape 1,32,8,1,4099,128 --dtype bf16 --device cuda --rope-mode fused --reps 3 > "$W/check_$v.log" 2>&1
  "$c" bench "$ROPE" --shape 2,32,8,1,4099,128 --dtype bf16 --device cuda --rope-mode fused --reps 3 --page-size 16 >> "$W/check_$v.log" 2>&1
  "$c" bench "$GPT2" --shape 4,12,12,777,777,64 --dtype bf16 --device cuda --rope-mode fused --reps 3 >> "$W/check_$v.log" 2>&1
  "$c" bench "$HALF" --shape 1,32,8,777,777,128 --dtype bf16 --device cuda --rope-mode fused --reps 3 >> "$W/check_$v.log" 2>&1
  say "check $v: $(grep -cE '^ +PASS' "$W/check_$v.log") PASS of 4"
done
for round in 1 2; do
  for v in old new; do
    c=$(cli_of $v)
    export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
    say "round $round $v: 8B-B1 $(t $c 1,32,8,1,32768,128) | 8B-B8 $(t $c 8,32,8,1,32768,128) | 70B-B1 $(t $c 1,64,8,1,32768,128) | 70B-128k $(t $c 1,64,8,1,131072,128) | 70B-pages16 $(t $c 1,64,8,1,32768,128 --page-size 16) | 70B-pages64 $(t $c 1,64,8,1,32768,128 --page-size 64) | prefill 8B-16k $(t $c 1,32,8,16384,16384,128) | prefill gpt2-16k $(PROG=$GPT2 t $c 4,12,12,16384,16384,64) | half-span prefill 8B-16k $(PROG=$HALF t $c 1,32,8,16384,16384,128) | half-span 8B-B8 $(PROG=$HALF t $c 8,32,8,1,32768,128)"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "end in ${SECONDS}s"
