#!/usr/bin/env bash
# Thirty-ninth session, prepared and not yet run: bench/experiments/rope_fixed_unit.patch (the
# in-kernel rotation with one pair unit per thread and compile-time kRopeHalf; kernels, emitter
# and goldens only), and rope_fixed_unit_batch8.patch (the same, whose decode tiles keep 8 rows
# of each thread's unit in flight instead of 4). The A/B takes three CLIs, because the kernels
# are embedded in the binary; the GPU suite runs on the batch-8 build (its prefill kernels are
# the first patch's, and its decode kernels run the same code with 8 for 4). The carry (each
# patch applies to the tree alone):
#   bash bench/make_device_carry.sh && strip .devcarry/attnfuse && cp .devcarry/attnfuse /tmp/attnfuse_old
#   git apply bench/experiments/rope_fixed_unit.patch && bash bench/make_device_carry.sh
#   strip .devcarry/attnfuse && cp .devcarry/attnfuse /tmp/attnfuse_a && git apply -R bench/experiments/rope_fixed_unit.patch
#   git apply bench/experiments/rope_fixed_unit_batch8.patch && bash bench/make_device_carry.sh
#   strip .devcarry/attnfuse .devcarry/test_gpu && rm -f .devcarry/lib/libattnfuse_c.so .devcarry/dispatch_bench
#   mkdir -p .devcarry/old .devcarry/a && cp /tmp/attnfuse_old .devcarry/old/attnfuse && cp /tmp/attnfuse_a .devcarry/a/attnfuse
# (.devcarry/attnfuse is then the batch-8 build.) Carry .devcarry and run:
#   CAP=575 bash bench/sessions/run_gpu_rope_fixed_unit.sh
#   1. the whole GPU suite in 8 shards with the batch-8 patch (limit 350 s), and memcheck on
#      the RoPE sanitizer subset and the decode placements test at the same time;
#   2. old / a (batch 4) / b8, two interleaved rounds, ms: fused RoPE decode (8B B1 and B8 at
#      32k, 70B B1 at 32k and 128k, 70B B1 at 32k in pages of 16), and fused prefill
#      (Llama-3-8B and GPT-2 16k);
#   3. paged fused RoPE decode on the old CLI: its default tile against the two-stage one.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-575}
say "== 1. the whole GPU suite with the batch-8 patch; memcheck on the RoPE subsets"
if command -v compute-sanitizer >/dev/null; then
  ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-memcheck timeout "$(left 300)" compute-sanitizer --tool memcheck \
    --error-exitcode 9 .devcarry/test_gpu --gtest_filter='CudaRope.SanitizerSubset:CudaDecode.RopePlacementsInDecode' \
    > "$W/san_memcheck.log" 2>&1 &
fi
gpu_suite_sharded "$(left 350)" 8
wait
say "memcheck: $(grep -E '^\[  (PASSED|FAILED)|ERROR SUMMARY' "$W/san_memcheck.log" 2>/dev/null | tr '\n' ' ')"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. old / a / b8, ms (median of 30)"
ROPE='softmax(causal(rope(Q, K, base=500000))) @ V'
GPT2='softmax(causal(rope(Q, K))) @ V'  # (the shapes of bench/sessions/run_gpu_fused_rotation.sh)
t() {  # cli shape [args...]: the median ms of fused RoPE (PROG: another program)
  local c=$1 shape=$2
  shift 2
  timeout 90 "$c" bench "${PROG:-$ROPE}" --shape "$shape" --dtype bf16 --device cuda --rope-mode fused --reps 30 --no-check "$@" 2>&1 |
    awk '$1=="fused"{print $2}'
}
cli_of() { case $1 in old) echo .devcarry/old/attnfuse ;; a) echo .devcarry/a/attnfuse ;; *) echo .devcarry/attnfuse ;; esac; }
for v in old a b8; do  # checks first (and the cold compiles)
  c=$(cli_of $v)
  ATTNFUSE_CACHE_DIR=/tmp/cache-$v "$c" bench "$ROPE" --shape 1,32,8,1,4099,128 --dtype bf16 --device cuda --rope-mode fused --reps 3 > "$W/check_$v.log" 2>&1
  ATTNFUSE_CACHE_DIR=/tmp/cache-$v "$c" bench "$GPT2" --shape 4,12,12,777,777,64 --dtype bf16 --device cuda --rope-mode fused --reps 3 >> "$W/check_$v.log" 2>&1
  say "check $v: $(grep -cE '^ +PASS' "$W/check_$v.log") PASS of 2"
done
for round in 1 2; do
  for v in old a b8; do
    c=$(cli_of $v)
    export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
    [ "$(left 90)" -lt 40 ] && break 2
    say "round $round $v: 8B-B1 $(t $c 1,32,8,1,32768,128) | 8B-B8 $(t $c 8,32,8,1,32768,128) | 70B-B1 $(t $c 1,64,8,1,32768,128) | 70B-B1-128k $(t $c 1,64,8,1,131072,128) | 70B-pages16 $(t $c 1,64,8,1,32768,128 --page-size 16) | prefill 8B-16k $(t $c 1,32,8,16384,16384,128) | prefill gpt2-16k $(PROG=$GPT2 t $c 4,12,12,16384,16384,64)"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
# Paged fused RoPE decode keeps the three-stage tile for short split parts (passes::cuda_decode_tile,
# `rotates` is for contiguous caches only, the measured case): the two-stage tile there, old CLI.
say "== 3. paged fused RoPE decode, 70B B1 / 32k, default tile / 16,64,4,2,4, ms"
export ATTNFUSE_CACHE_DIR=/tmp/cache-old
for round in 1 2; do
  [ "$(left 60)" -lt 20 ] && break
  say "round $round: pages of 16 $(t .devcarry/old/attnfuse 1,64,8,1,32768,128 --page-size 16) / $(ATTNFUSE_CUDA_DECODE_TILE=16,64,4,2,4 t .devcarry/old/attnfuse 1,64,8,1,32768,128 --page-size 16) | pages of 64 $(t .devcarry/old/attnfuse 1,64,8,1,32768,128 --page-size 64) / $(ATTNFUSE_CUDA_DECODE_TILE=16,64,4,2,4 t .devcarry/old/attnfuse 1,64,8,1,32768,128 --page-size 64)"
done
say "end in ${SECONDS}s"
