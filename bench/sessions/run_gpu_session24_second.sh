#!/usr/bin/env bash
# Twenty-fourth session, second call (build here: bash bench/make_device_carry.sh; carry .devcarry
# and .devcarry-abl with the previous commit's kernels in .devcarry-abl/base): rope_window with
# causal Δ ranges that stop at each warp's last query position and a single compare per
# corrected cell (this build) against the previous commit's kernels.
#   0. CudaRope.* on this build (two new causal chunked-prefill rope_window cases), and the
#      rope_window tests on the previous kernels;
#   1. attnfuse bench, median ms, N 8k and 32k, two interleaved rounds, then 128k once;
#   2. bench/gpu_rope.py --suite window at every N with this build.
# CAP bounds the whole (default 500 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-500}
R=$LLAMA32_ROPE
say "== 0. CudaRope.* on the carried build, then the rope_window tests on .devcarry-abl/base"
gpu_tests rope 'CudaRope.*' "$(left 150)"
ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/base gpu_tests rope_window_base '*RopeWindow*' "$(left 100)"
say "== 1. rope_window timings (median ms of attnfuse bench, bf16, B1 Hq24 Hkv8 D128)"
for round in 1 2 3; do
  ns="8192 32768"
  [ $round = 3 ] && ns=131072
  for n in $ns; do
    window_bench rope - "softmax(causal(rope(Q, K, $R))) @ V" $n
    window_bench new_k1 - "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
    window_bench base_k1 base "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. gpu_rope.py --suite window (every N, this build's kernels)"
window_suite "$(left 220)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
