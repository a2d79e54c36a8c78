#!/usr/bin/env bash
# Twenty-fourth session, third call (build here: bash bench/make_device_carry.sh at the previous
# commit; carry .devcarry and .devcarry-abl with qa/ and half/): rope_window with the next tile's
# lead-step fragment loaded at the end of each iteration, off the QK issue path (qa/), and that
# plus corrections of the lower half of keys only, where causal masks the upper half for the
# warp's rows (half/), against the carried build.
#   0. the rope_window tests on qa/ and half/;
#   1. attnfuse bench, median ms, N 8k and 32k (k = 1) and 32k (k = 10^6), two interleaved rounds;
#   2. the whole GPU suite on half/'s kernels, 8 shards.
# CAP bounds the whole (default 480 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-480}
R=$LLAMA32_ROPE
say "== 0. the rope_window GPU tests on .devcarry-abl/qa and .devcarry-abl/half"
ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/qa gpu_tests rope_window_qa '*RopeWindow*' "$(left 100)"
ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/half gpu_tests rope_window_half '*RopeWindow*' "$(left 100)"
say "== 1. rope_window timings (median ms of attnfuse bench, bf16, B1 Hq24 Hkv8 D128)"
for round in 1 2; do
  for n in 8192 32768; do
    window_bench rope - "softmax(causal(rope(Q, K, $R))) @ V" $n
    for v in - qa half; do
      window_bench "k1_${v/-/build}" $v "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
    done
    if [ $n = 32768 ]; then
      for v in - qa; do
        window_bench "k1e6_${v/-/build}" $v "softmax(causal(rope_window(Q, K, k=1e6, $R))) @ V" $n
      done
    fi
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. GPU suite on .devcarry-abl/half's kernels, 8 shards"
export ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/half
gpu_suite_sharded "$(left 300)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
