#!/usr/bin/env bash
# Lazy rescaling (bench/experiments/lazy_rescale.patch) against the carried build. Build here:
# bash bench/make_device_carry.sh; then make the variant's kernel directory and carry both:
#   rm -rf .devcarry-abl/lazy && mkdir -p .devcarry-abl && cp -r src/codegen/cuda/kernels .devcarry-abl/lazy
#   patch -p1 -d .devcarry-abl/lazy < bench/experiments/lazy_rescale.patch
# (device: bash bench/sessions/run_gpu_lazy_rescale.sh, carry [".devcarry", ".devcarry-abl"]).
#   0. the whole GPU suite on lazy/'s kernels, 8 shards (the patch touches every kernel's softmax);
#   1. attnfuse bench, median ms, two interleaved rounds: causal D = 128 (Llama-3-8B heads) and
#      D = 64 (GPT-2 heads) at 8k and 32k, rope_window k = 1 at 8k and 32k (Llama-3.2-3B).
# CAP bounds the whole (default 480 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-480}
R=$LLAMA32_ROPE
say "== 0. the whole GPU suite on .devcarry-abl/lazy's kernels, 8 shards"
ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/lazy gpu_suite_sharded "$(left 260)" 8
say "== 1. timings (median ms of attnfuse bench, bf16, unchecked: the suite above checks)"
for round in 1 2; do
  for n in 8192 32768; do
    for v in - lazy; do
      l=${v/-/build}
      window_bench "causal128_$l" $v "softmax(causal(scaled_dot_product(Q, K))) @ V" $n "1,32,8,$n,$n,128"
      window_bench "causal64_$l" $v "softmax(causal(scaled_dot_product(Q, K))) @ V" $n "4,12,12,$n,$n,64"
      window_bench "window_k1_$l" $v "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
    done
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
