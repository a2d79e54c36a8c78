#!/usr/bin/env bash
# Twenty-fourth session, first call (build here: bash bench/make_device_carry.sh; carry .devcarry
# and .devcarry-abl with this tree's kernels plus bench/experiments/rope_window_far_tile_compare.patch
# in .devcarry-abl/far): the previous session's last review commit checked on the GPU, and the
# far-tile single compare timed against it.
#   0. the rope_window GPU tests on the build and on .devcarry-abl/far;
#   1. attnfuse bench, median ms, N 8k and 32k, two interleaved rounds;
#   2. the whole GPU suite, 8 shards.
# CAP bounds the whole (default 520 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-520}
R=$LLAMA32_ROPE
say "== 0. the rope_window GPU tests on the carried build, then on .devcarry-abl/far"
gpu_tests rope_window '*RopeWindow*' "$(left 100)"
ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/far gpu_tests rope_window_far '*RopeWindow*' "$(left 100)"
say "== 1. rope_window timings (median ms of attnfuse bench, bf16, B1 Hq24 Hkv8 D128)"
for round in 1 2; do
  for n in 8192 32768; do
    window_bench rope - "softmax(causal(rope(Q, K, $R))) @ V" $n
    window_bench head_k1 - "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
    window_bench far_k1 far "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. GPU suite, 8 shards"
gpu_suite_sharded "$(left 300)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
